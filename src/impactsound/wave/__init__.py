"""Wave solvers: the FDTD acoustic solver used by Precomputed Acceleration Noise (specs/pan.md sec. 5)."""
