"""``impactsound bank build|info``: the proxy soundbank of acceleration noise (Chadwick, Zheng & James 2012,
"Faster acceleration noise for multibody animations using precomputed soundbanks", sec. 3-5;
sources/pan/soundbank.py).

Registered on the command group in cli.py with ``cli.add_command(bank)``.
"""
from __future__ import annotations

import json
from pathlib import Path

import click

from .constants import BANK_EPS as DEFAULT_EPS
from .errors import AssetError, InputError


@click.group("bank")
def bank():
    """Proxy soundbank (Chadwick, Zheng & James 2012): PAN fields of 66 reference ellipsoids, wavelet-compressed,
    that stand for any object's acceleration noise."""


def _progress(ctx):
    """The group's Progress when run under ``impactsound``, else a visible one (commands invoked on their own)."""
    p = getattr(ctx.obj, "progress", None)
    if p is None:
        from .io.progress import Progress
        p = Progress(quiet=False)
    return p


def _parse_entries(text: str | None) -> list[int] | None:
    """'0,5,10-12' -> [0, 5, 10, 11, 12]; None -> None (all)."""
    if text is None or not text.strip():
        return None
    from .sources.pan.proxy import bank_entries
    n = len(bank_entries())
    out = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                a, b = (int(v) for v in part.split("-", 1))
                if a > b:
                    raise ValueError
                out.extend(range(a, b + 1))
            else:
                out.append(int(part))
    except ValueError:
        raise InputError(f"--entries {text!r}: give entry indices and ranges separated by commas, e.g. 0,5,10-12 "
                         f"(0..{n - 1})") from None
    bad = [i for i in out if not 0 <= i < n]
    if bad:
        raise InputError(f"--entries {text!r}: {bad} outside 0..{n - 1} (the bank has {n} entries)")
    return list(dict.fromkeys(out))


def _ranges(ix: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    parts, i = [], 0
    while i < len(ix):
        j = i
        while j + 1 < len(ix) and ix[j + 1] == ix[j] + 1:
            j += 1
        parts.append(str(ix[i]) if i == j else f"{ix[i]}-{ix[j]}")
        i = j + 1
    return ",".join(parts) or "none"


def _fmt_time(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else (f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h")


@bank.command("build")
@click.option("--preset", type=click.Choice(["tiny", "standard", "paper"]), default="standard", show_default=True,
              help="Grid and rate: tiny (tests, seconds per entry), standard (about an hour on 2 cores), paper "
                   "(500^3 at 96 kHz, for a cluster).")
@click.option("--eps", type=float, default=DEFAULT_EPS, show_default=True,
              help="Wavelet tolerance in (0, 1): coefficients below eps times each radius' largest are dropped.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Local processes, one entry each.")
@click.option("--scheduler", metavar="ADDRESS", help="Dask scheduler (tcp://HOST:8786): entries run on its workers.")
@click.option("--fallback-local", is_flag=True, help="Run locally when the scheduler does not answer.")
@click.option("--entries", metavar="LIST", help="Only these entries, e.g. 0,5,10-12 (default: all 66).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Bank file (default: soundbank_<preset>_eps<eps>_v<version>.h5 in the cache folder).")
@click.pass_context
def bank_build(ctx, preset, eps, workers, scheduler, fallback_local, entries, out):
    """Build the missing entries of a soundbank. Prints the estimate first; interrupt and rerun to resume
    (finished entries are in the file, running ones resume from per-field checkpoints)."""
    from .parallel import require_distributed
    from .sources.pan.soundbank import Soundbank
    idx = _parse_entries(entries)
    sb = Soundbank(out, preset=preset, eps=eps)           # checks eps, and refuses a file of other settings
    if scheduler:
        require_distributed()
    e = sb.estimate(idx)
    band = e["band_hz_reference"]
    click.echo(f"soundbank {sb.path}")
    click.echo(f"  preset {e['preset']}: grid {e['grid'][0]}^3 (dx {e['dx_m'] * 1e3:.3g} mm), "
               f"{e['sample_rate_hz'] / 1e3:g} kHz, >= {e['steps']} steps per field, "
               f"{e['memory_bytes'] / 2**20:.0f} MiB per solver")
    click.echo(f"  band at A' = 0.5 m: pulse {band['pulse_band_hz']:.4g} Hz, grid {band['grid_band_hz']:.4g} Hz; "
               f"an object of semi-axis A gets these times 0.5/A")
    click.echo(f"  to build: {len(e['entries'])} of 66 entries ({_ranges(e['entries'])}), "
               f"{e['cell_updates']:.3g} cell updates, ~{_fmt_time(e['seconds'])} in one process; "
               f"bank file ~{e['size_bytes'] / 1e6:.3g} MB at eps {sb.eps:g}")
    with _progress(ctx).stage("soundbank build") as update:
        done = sb.build(idx, workers=workers, scheduler=scheduler, fallback_local=fallback_local,
                        progress=update)
    info = sb.info()
    click.echo(f"built {len(done)} entries; {info['n_entries']} of 66 present, {info['size_mb']:.3g} MB, "
               f"largest compression error {100 * (info['max_error'] or 0):.2f} %")
    click.echo(str(sb.path))


@bank.command("info")
@click.argument("bank_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--preset", type=click.Choice(["tiny", "standard", "paper"]), default="standard", show_default=True,
              help="Without BANK_FILE: which default bank (the shipped one for standard at eps 0.01, else the "
                   "cache folder's).")
@click.option("--eps", type=float, default=DEFAULT_EPS, show_default=True, help="Without BANK_FILE: which default bank file.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def bank_info(bank_file, preset, eps, as_json):
    """Entries present, eps, size and the compression error of each entry (relative L2 of the wavelet form
    against the raw solver series, measured at build time; the largest of its six fields)."""
    from .sources.pan.soundbank import Soundbank, default_path, shipped_bank
    path = bank_file
    if path is None:
        shipped = shipped_bank(preset, eps)        # what scenes use: the package's own bank, verified
        path = shipped.path if shipped is not None else default_path(preset, eps)
    if not path.is_file():
        raise AssetError(f"{path}: no soundbank there; build one with `impactsound bank build --preset {preset} "
                         f"--eps {eps:g}" + (f" --out {path}`" if bank_file is not None else "`"))
    info = Soundbank.open(path).info()
    if as_json:
        click.echo(json.dumps(info, indent=1))
        return
    click.echo(f"{info['path']}")
    click.echo(f"  preset {info['preset']}, {info['sample_rate_hz'] / 1e3:g} kHz, eps {info['eps']:g}, version "
               f"{info['version']}, c {info['c']:g} m/s, rho {info['rho']:g} kg/m^3, {info['n_directions']} "
               f"directions (full sphere), h_ref {info['reference_pulse_h_s'] * 1e3:g} ms")
    click.echo(f"  entries: {info['n_entries']} of {info['n_total']} ({_ranges(info['entries_present'])}), "
               f"{info['size_mb']:.3g} MB")
    if info["entries"]:
        click.echo(f"  compression error (relative L2): largest {100 * info['max_error']:.2f} %, mean "
                   f"{100 * info['mean_error']:.2f} %")
        click.echo("  entry    B'      C'     error %   kB     s")
        for e in info["entries"]:
            click.echo(f"  {e['index']:5d}  {e['axes'][1]:.4f}  {e['axes'][2]:.4f}  {100 * e['error']:7.2f}  "
                       f"{e['kbytes']:6.0f}  {e['seconds']:5.1f}")


@bank.command("manifest")
@click.argument("bank_file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
def bank_manifest(bank_file):
    """Write BANK_FILE's manifest beside it (BANK_FILE with suffix .json: sha256, size, entries, compression errors,
    versions): what a bank shipped as package data is checked against when it is opened. For maintainers shipping
    a bank built with `impactsound bank build`."""
    import hashlib
    import platform

    from . import __version__
    from .sources.pan.soundbank import Soundbank
    info = Soundbank.open(bank_file).info()
    data = bank_file.read_bytes()
    man = {"file": bank_file.name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
           "preset": info["preset"], "eps": info["eps"], "version": info["version"], "c": info["c"],
           "rho": info["rho"], "entries": info["entries_present"], "n_entries": info["n_entries"],
           "max_compression_error": info["max_error"], "mean_compression_error": info["mean_error"],
           "build_seconds": sum(e["seconds"] for e in info["entries"]),
           "built_with": f"impactsound {__version__}: impactsound bank build --preset {info['preset']} --eps "
                         f"{info['eps']:g}", "machine": platform.machine()}
    out = bank_file.with_suffix(".json")
    out.write_text(json.dumps(man, indent=1) + "\n")
    click.echo(str(out))
