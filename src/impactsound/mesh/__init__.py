"""Surface checks, volume-mesh loading and tetrahedral meshing (see surface.py, tetra.py)."""
from .surface import MeshWarning, check_surface, load_surface, load_volume_mesh, merge_seams, shell_groups
from .tetra import boundary_faces, orient_tets, tetrahedralize

__all__ = ["load_surface", "check_surface", "load_volume_mesh", "tetrahedralize", "orient_tets",
           "boundary_faces", "merge_seams", "shell_groups", "MeshWarning"]
