"""Export a struck bar as a modal bank (JSON) and as a Faust program (.dsp) that plays it in real time.

Shows: ``impactsound.io.export.export_modal`` (docs/export.md; the idea of mesh2faust, Michon, Martin & Smith
2017): one damped resonator per mode, with a gain per mode and hit point, written as

* ``export_faust.json``: the bank (frequencies, decay rates, per-point gains, the synthesis formula, units, and
  the hashes of the model it came from), read back with ``impactsound.io.export.load_bank``;
* ``export_faust.dsp``: a complete Faust program with a "strike" button, a "hit point" entry and an "impulse"
  slider [N s]; compile it for any Faust target (``faust2jack export_faust.dsp``, a plug-in, Web Audio ...).

The bank here is "dry" (``listener_direction=None``): its output is the sum of the modal coordinates q_j
[m sqrt(kg)], as mesh2faust's, with no radiation model folded in (give a body-frame direction to get the
pressure at 1 m instead). ``export_faust.wav`` is what the bank plays for a 0.01 N s strike at each hit point in
turn (``modal_impulse_response``, the bank's formula sampled at 48 kHz), normalised.

Units: SI (m, kg, s, Hz, N s). Hit points are in the body frame: the bar's axes, origin at its centre of mass.
Run: ``.venv/bin/python examples/export_faust.py`` -> ``out/examples/export_faust.json``, ``.dsp`` and ``.wav``.
"""
from pathlib import Path

import numpy as np
import trimesh

import impactsound as isd
from impactsound.io.audio import normalisation_gain, write_wav
from impactsound.io.export import export_modal, load_bank, modal_impulse_response

BAR = (0.25, 0.02, 0.02)                           # steel bar, square section [m]
HIT_POINTS = [[0.12, 0.0, 0.01],                   # top face, near one end
              [0.0, 0.0, 0.01],                    # top face, middle (only the symmetric modes ring)
              [0.06, 0.01, 0.0]]                   # side face, a quarter along


def main(out_dir="out/examples", small=False):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model = isd.modal_analysis(trimesh.creation.box(BAR), isd.get_material("steel"), order=2,
                               max_modes=8 if small else 24)
    common = dict(points=HIT_POINTS, listener_direction=None, sample_rate=48000)
    json_path, dsp_path = out_dir / "export_faust.json", out_dir / "export_faust.dsp"
    export_modal(model, "json", json_path, **common)
    export_modal(model, "faust", dsp_path, **common)

    bank = load_bank(json_path)
    f, d = np.array(bank["modes"]["frequency_hz"]), np.array(bank["modes"]["decay_rate"])
    print(f"steel bar {BAR} m: {len(f)} modes in the bank")
    for j in range(len(f)):
        gains = " ".join(f"{a[j]:+8.3f}" for a in bank["points"]["gains"])
        print(f"  {f[j]:8.1f} Hz, 60 dB decay in {np.log(1000) / d[j]:5.2f} s, gain per hit point [1/sqrt(kg)]: "
              f"{gains}")

    # 0.01 N s at each hit point in turn, 1 s apart (0.5 s with small)
    n = 24000 if small else 48000
    y = np.concatenate([0.01 * modal_impulse_response(bank, p, n) for p in range(len(HIT_POINTS))])
    wav = write_wav(out_dir / "export_faust.wav", y, 48000, normalisation_gain(y),
                    {"units_before_gain": "m sqrt(kg) (sum of modal coordinates)", "hit_points_m": HIT_POINTS})
    print("wrote", json_path, dsp_path, wav)
    return {"json": json_path, "dsp": dsp_path, "wav": wav, "bank": bank}


if __name__ == "__main__":
    main()
