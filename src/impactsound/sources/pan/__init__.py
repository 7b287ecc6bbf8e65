"""Precomputed Acceleration Noise (PAN; Chadwick, Zheng & James 2012, "Precomputed Acceleration Noise for Improved
Rigid-Body Sound", ACM TOG 31(4)): pulse basis, time scale, field fit, synthesis and the ``acceleration_noise``
source."""
from .field import (PANField, angle_weights, direction_angles, direction_vectors, fit_operator, fit_pan_field,
                    sample_points, shell_radii)
from .pulse import contact_weights, psi, psi_weights
from .source import PANSource
from .synth import PANTable, synthesize_pan
from .timescale import (acceleration_amplitudes, body_accelerations, equivalent_sphere_radius,
                        pulse_timescale)

__all__ = ["PANField", "PANSource", "PANTable", "acceleration_amplitudes", "angle_weights", "body_accelerations",
           "contact_weights", "direction_angles", "direction_vectors", "equivalent_sphere_radius", "fit_operator",
           "fit_pan_field", "psi", "psi_weights", "pulse_timescale", "sample_points", "shell_radii", "synthesize_pan"]
