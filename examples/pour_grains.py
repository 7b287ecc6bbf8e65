"""Pour glass beads into cups: the scenarios of M. Marko's thesis ("Sound simulation of granular materials",
Appendix B), as scenes with a ``[granular]`` table (docs/granular.md).

Shows: a granular scene written as a dict (grains, funnel, the container object, ``fill`` for a partly full cup),
the event-driven simulator behind ``events = "simulate"``, the two granular source kinds (``grain_noise``: the
beads' own clicks; ``container``: the cup's modes struck by the beads) and their stems, and what the render says
per object (``info["objects"]``) and about the collisions (``info["granular"]``).

The variants: beads of 1 mm or 2 mm diameter (the thesis' "Glass1mm" and "Glass2mm"; radius 0.5 or 1 mm), poured
from a funnel 10 cm above the rim into a ceramic cup or a 1-litre steel cup, empty or onto beads already in it.
Each cup's radiation (FFAT maps from FDTD solves) is computed once and cached: about 3 minutes on 2 cores for the
ceramic cup, about 6 minutes for the thin steel cup (its modes ~3 min, its radiation ~2.4 min with its 1.5 mm
walls as screens on the grid). ``small=True`` renders one
small, short pour with the compact radiation model in seconds.

Units: SI throughout (m, kg, s, Pa, Hz). z is up; the floor is the plane z = 0.
Run: ``.venv/bin/python examples/pour_grains.py [ceramic|metal] [1mm|2mm]`` -> ``out/examples/pour_*.wav``
(+ ``.png``, stems in ``pour_*_stems/``), the empty and the partly full cup.
"""
import sys
from pathlib import Path

import impactsound as isd

#: the cups: mug primitive sizes [m] and material; the centre of mass puts each cup's base on the floor
CUPS = {
    "ceramic": {"size": {"radius": 0.04, "height": 0.08, "thickness": 0.004}, "material": "ceramic",
                "com_z": 0.0333232},
    "metal": {"size": {"radius": 0.05, "height": 0.13, "thickness": 0.0015}, "material": "steel",
              "com_z": 0.0550291},
}
#: bead radius [m] per diameter name
BEADS = {"1mm": 0.0005, "2mm": 0.001}


def scene(cup="ceramic", beads="2mm", full=False, small=False):
    """One pour as a scene dict (what a scene TOML file would hold)."""
    c = CUPS[cup]
    height = c["size"]["height"]
    a = BEADS[beads]
    s = {
        "scene": {"duration": 0.5 if small else 1.5, "sample_rate": 48000, "seed": 3,
                  "sources": ["grain_noise", "container"]},
        "listener": [{"name": "mic", "position": [0.0, -0.3, 0.12]}],
        "object": [{"name": "cup", "shape": "mug", "size": c["size"], "material": c["material"],
                    "position": [0.0, 0.0, c["com_z"]]}],
        "granular": {"material": "glass_bead", "radius": a, "count": 80 if small else 500, "container": "cup",
                     "restitution": 0.5,
                     # a funnel with its hole 10 cm above the rim (the thesis' recordings)
                     "funnel": {"position": [0.0, 0.0, height + 0.1], "hole_radius": 0.004,
                                "top_radius": 0.025, "height": 0.03}},
    }
    if full:
        # beads already lying in the cup (about three layers), which also damp its modes
        s["granular"].update({"fill": 600 if small else int(3000 * (1e-3 / a) ** 2), "fill_damping": 0.02})
    if small:
        s["source"] = {"container": {"transfer": "low_order", "modal_order": 1}}
    return s


def main(out_dir="out/examples", small=False, cup="ceramic", beads="2mm"):
    out_dir = Path(out_dir)
    written = []
    for full in (False, True):
        name = f"pour_{cup}_{beads}_{'full' if full else 'empty'}"
        result = isd.render_scene(scene(cup, beads, full, small))
        g = result.info["granular"]
        hits = result.info["objects"]["cup"]["container"]["grain_hits"]
        print(f"{name}: {g['grain_collisions']} bead-bead collisions, {hits} hits on the cup; peak "
              f"{abs(result.mix).max():.3g} Pa")
        written += result.save(out_dir / f"{name}.wav", png=out_dir / f"{name}.png", stems=out_dir / f"{name}_stems",
                               title=name)
    return written


if __name__ == "__main__":
    args = sys.argv[1:]
    main(cup=args[0] if args else "ceramic", beads=args[1] if len(args) > 1 else "2mm")
