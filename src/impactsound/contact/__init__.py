"""Contact forces: Hertz time scale, effective mass, local curvature radius, half-sine profile.

After Chadwick, Zheng & James 2012, "Precomputed Acceleration Noise for Improved Rigid-Body Sound", sec. 3.
"""
from .curvature import SurfaceCurvature, radius_from_curvature, vertex_mean_curvature
from .hertz import (HERTZ_TAU_CONSTANT, combined_modulus, effective_mass, half_sine, half_sine_amplitude,
                    half_sine_force, hertz_stiffness, hertz_tau, inverse_effective_mass)

__all__ = ["HERTZ_TAU_CONSTANT", "SurfaceCurvature", "combined_modulus", "effective_mass", "half_sine",
           "half_sine_amplitude", "half_sine_force", "hertz_stiffness", "hertz_tau", "inverse_effective_mass",
           "radius_from_curvature", "vertex_mean_curvature"]
