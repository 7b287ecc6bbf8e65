"""Benchmark: a user's own small object, first render cold and warm, default and preview quality.

Three objects made with trimesh as a new user would (a 4 cm glass cup with a 3 mm wall, a brass coin the size of
a quarter, a hard-wood block), each dropped alone on the default floor (1.5 s, one listener), rendered by the
CLI in a fresh process:

- cold: an empty asset cache (the standard soundbank comes with the package), ``impactsound render``;
- warm: the same command again (everything cached);
- preview: ``impactsound render --preview`` into another empty cache.

Per object it prints the wall times of the three runs and the stages of the cold one (from the progress lines),
the peak RSS of each run (the child's ru_maxrss), and how far the preview is from the default: its modes'
frequencies (each default mode matched to the nearest preview mode), the level of the modal stem (rms over the
whole render, dB), and the log-spectral distance of the mixes (rms over 1/3-octave bands 100 Hz-20 kHz of the
band-level difference, dB). Goals (issue "your own object"): cold <= 30 s, warm <= 2 s, preview < 5 s cold, on
2 cores.

    .venv/bin/python bench/bench_first_render.py [--objects cup,coin,block] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

OBJECTS = {
    "cup": ("glass", 0.2),
    "coin": ("brass", 0.15),
    "block": ("wood_hard", 0.2),
}


def make_objects(folder: Path, names):
    import trimesh
    folder.mkdir(parents=True, exist_ok=True)
    prof = np.array([[0, 0], [0.04, 0], [0.04, 0.09], [0.037, 0.09], [0.037, 0.005], [0, 0.005]])
    meshes = {"cup": trimesh.creation.revolve(prof, sections=48),
              "coin": trimesh.creation.cylinder(radius=0.01213, height=0.00175, sections=48),
              "block": trimesh.creation.box(extents=(0.08, 0.05, 0.03))}
    scenes = {}
    for name in names:
        mat, z = OBJECTS[name]
        meshes[name].export(folder / f"{name}.obj")
        p = folder / f"{name}.toml"
        p.write_text(f'[scene]\nduration = 1.5\n[[object]]\nname = "{name}"\nmesh = "{name}.obj"\n'
                     f'material = "{mat}"\nposition = [0, 0, {z}]\neuler_deg = [20, 10, 0]\n'
                     f'[[listener]]\nposition = [0.6, 0.3, 0.4]\n')
        scenes[name] = p
    return scenes


def run(scene: Path, out: Path, cache: Path, *extra):
    env = dict(os.environ, IMPACTSOUND_CACHE=str(cache))
    exe = str(Path(sys.executable).with_name("impactsound"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    r = subprocess.run([exe, "render", str(scene), "--out", str(out), "--stems", str(out.with_suffix("")), *extra],
                       env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode:
        raise RuntimeError(r.stderr[-2000:])
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    stages = re.findall(r"\n?([^\r\n]*?): done in ([0-9.]+) s", r.stderr.replace("\r", "\n"))
    return wall, max(rss, before) / 1024, [(s.strip(), float(t)) for s, t in stages]


def band_levels(x, fs):
    spec = np.abs(np.fft.rfft(x)) ** 2
    f = np.fft.rfftfreq(len(x), 1 / fs)
    centres = 1000 * 2.0 ** (np.arange(-10, 14) / 3)
    centres = centres[(centres >= 100) & (centres <= 20000)]
    lo, hi = centres * 2 ** (-1 / 6), centres * 2 ** (1 / 6)
    return np.array([10 * np.log10(spec[(f >= a) & (f < b)].sum() + 1e-30) for a, b in zip(lo, hi)])


def pascals(wav: Path) -> np.ndarray:
    """First channel of a rendered WAV in pascals (its sidecar's pascals_per_unit)."""
    import soundfile as sf
    x, _ = sf.read(wav, dtype="float64", always_2d=True)
    return x[:, 0] * json.loads(Path(str(wav) + ".json").read_text())["pascals_per_unit"]


def compare(default_wav: Path, preview_wav: Path, fs: int = 48000):
    a, b = pascals(default_wav), pascals(preview_wav)
    lsd = float(np.sqrt(np.mean((band_levels(a, fs) - band_levels(b, fs)) ** 2)))
    ma = pascals(default_wav.with_suffix("") / "modal.wav")
    mb = pascals(preview_wav.with_suffix("") / "modal.wav")
    lev = 20 * np.log10(np.sqrt(np.mean(mb ** 2)) / max(np.sqrt(np.mean(ma ** 2)), 1e-30))
    return lsd, float(lev)


def modes_of(cache: Path):
    from impactsound.fem.model import ModalModel
    files = sorted(cache.glob("modal_*.h5"))
    return ModalModel.load(files[0]).frequencies_hz if files else np.zeros(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--objects", default="cup,coin,block")
    ap.add_argument("--keep", type=Path, help="keep the scenes, caches and WAVs here")
    a = ap.parse_args()
    names = [n for n in a.objects.split(",") if n]
    root = a.keep or Path(tempfile.mkdtemp(prefix="first_render_"))
    scenes = make_objects(root, names)
    print(f"{os.cpu_count()} cores; folder {root}")
    for name, scene in scenes.items():
        cold, warm, prev = root / f"cache_{name}", root / f"cache_{name}_warm", root / f"cache_{name}_preview"
        t_cold, rss_c, stages = run(scene, root / f"{name}.wav", cold)
        t_warm, rss_w, _ = run(scene, root / f"{name}_warm.wav", cold)
        t_prev, rss_p, stages_p = run(scene, root / f"{name}_preview.wav", prev, "--preview")
        f_def, f_prev = modes_of(cold), modes_of(prev)
        ferr = (np.array([np.min(np.abs(f_prev / f - 1)) for f in f_def]) if len(f_def) and len(f_prev)
                else np.zeros(0))
        lsd, lev = compare(root / f"{name}.wav", root / f"{name}_preview.wav")
        print(f"{name}: cold {t_cold:.1f} s (peak RSS {rss_c:.0f} MiB), warm {t_warm:.1f} s, preview cold "
              f"{t_prev:.1f} s")
        print("   cold stages: " + ", ".join(f"{s} {t:.1f} s" for s, t in stages))
        print("   preview stages: " + ", ".join(f"{s} {t:.1f} s" for s, t in stages_p))
        if len(ferr):
            print(f"   preview vs default: {len(f_def)} modes, frequency error median {100 * np.median(ferr):.2f} %, "
                  f"max {100 * ferr.max():.2f} %; modal stem level {lev:+.2f} dB; mix 1/3-octave LSD {lsd:.2f} dB")
        else:
            print(f"   preview vs default: no modes; mix 1/3-octave LSD {lsd:.2f} dB")


if __name__ == "__main__":
    main()
