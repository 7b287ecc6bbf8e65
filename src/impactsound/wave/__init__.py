"""Wave solvers: the acoustic FDTD solver (fdtd.py) and the voxelization of bodies for it (voxel.py)."""
