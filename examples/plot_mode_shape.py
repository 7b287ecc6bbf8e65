"""Look at the first vibration modes of a free square plate: deformed surface coloured by displacement magnitude.

Shows: what :func:`impactsound.modal_analysis` returns (``impactsound.ModalModel``): the frequencies
``frequencies_hz`` [Hz], the surface mesh ``surface_nodes`` (body frame [m]) / ``surface_faces``, and the
mass-normalised mode shapes ``shapes`` (modes x surface nodes x 3) [1/sqrt(kg)], drawn with matplotlib in 3-D.
Each panel shows one mode: the plate displaced along the mode shape (exaggerated so the largest displacement is
15 % of the plate's size), coloured by |u| relative to its maximum. The first mode of a free square plate twists
it (opposite corners move together), the next two are a saddle and a ring-like mode, as Chladni figures show.

Sanity check (printed): thin-plate (Kirchhoff) theory for a free square plate of side a and thickness t,
f_i = lambda_i^2 / (2 pi a^2) sqrt(E t^2 / (12 rho (1 - nu^2))), with lambda^2 = 13.49, 19.79, 24.43, 35.02,
35.02 for nu = 0.3 (Leissa 1969, "Vibration of Plates", NASA SP-160; Barton 1951). The FEM values lie a little
below (shear and rotary inertia of the 4 % thick plate).

Units: SI (m, kg, Hz); shapes per unit modal amplitude.
Run: ``.venv/bin/python examples/plot_mode_shape.py`` -> ``out/examples/plot_mode_shape.png``.
"""
from pathlib import Path

import numpy as np
import trimesh

import impactsound as isd

PLATE = (0.10, 0.10, 0.004)        # steel plate [m]
LAMBDA2 = [13.49, 19.79, 24.43, 35.02, 35.02]   # free square plate, nu = 0.3 (Leissa 1969)


def kirchhoff_plate_hz(side, thickness, material):
    """Thin-plate frequencies [Hz] of the first free modes of a square plate (nu = 0.3)."""
    m = material
    return np.array(LAMBDA2) / (2 * np.pi * side**2) * np.sqrt(m.E * thickness**2 / (12 * m.rho * (1 - m.nu**2)))


def main(out_dir="out/examples", small=False):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    out_dir = Path(out_dir)
    n_show = 4 if small else 6
    steel = isd.get_material("steel")
    model = isd.modal_analysis(trimesh.creation.box(PLATE), steel, order=2, max_modes=n_show)
    theory = kirchhoff_plate_hz(PLATE[0], PLATE[2], steel)
    faces = np.asarray(model.surface_faces)
    nv = model.n_surface_vertices                          # the triangle vertices come first among surface nodes
    x = np.asarray(model.surface_nodes)[:nv]
    print(f"steel plate {PLATE} m, {model.mass * 1000:.0f} g, {len(faces)} surface triangles")

    cols = 3 if n_show > 4 else 2
    rows = -(-n_show // cols)
    fig = plt.figure(figsize=(4.2 * cols, 3.8 * rows))
    for j in range(n_show):
        u = np.asarray(model.shapes[j])[:nv]               # (vertices, 3) [1/sqrt(kg)]
        mag = np.linalg.norm(u, axis=1)
        scale = 0.15 * max(PLATE) / mag.max()
        tri = (x + scale * u)[faces]                       # deformed triangles (faces, 3, 3)
        colour = plt.cm.viridis(mag[faces].mean(axis=1) / mag.max())
        ax = fig.add_subplot(rows, cols, j + 1, projection="3d")
        ax.add_collection3d(Poly3DCollection(tri, facecolors=colour, edgecolors="none"))
        lim = 0.6 * max(PLATE)
        ax.set(xlim=(-lim, lim), ylim=(-lim, lim), zlim=(-lim, lim), xlabel="x [m]", ylabel="y [m]")
        ax.set_box_aspect((1, 1, 1))
        ax.view_init(elev=25, azim=-60)
        ax.set_title(f"mode {j}: {model.frequencies_hz[j]:.0f} Hz")
        f_th = f" (thin-plate theory {theory[j]:.1f} Hz)" if j < len(theory) else ""
        print(f"  mode {j}: {model.frequencies_hz[j]:8.1f} Hz{f_th}")
    fig.colorbar(plt.cm.ScalarMappable(cmap="viridis"), ax=fig.axes, shrink=0.6, label="|u| / max |u|")
    fig.suptitle("free steel plate: first modes (displacement exaggerated)")
    png = out_dir / "plot_mode_shape.png"
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=90)
    plt.close(fig)
    print("wrote", png)
    return {"png": png, "frequencies_hz": model.frequencies_hz, "theory_hz": theory}


if __name__ == "__main__":
    main()
