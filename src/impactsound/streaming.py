"""Streaming render: the events of a scene rendered in time blocks, the mix and stems written as they complete.

Memory follows the work, not the length: a render holds one block of events and the sound they make (the block,
plus the longest ring of any of its sources), never the whole scene. Acoustics is linear, so the sound of the
events of each block adds into the output where they ring (p = sum of every event's pressure; Chadwick, Zheng &
James 2012, "Precomputed Acceleration Noise", sec. 2), and a block's samples are final once no later block can
reach them.

How a block is rendered: a source kind that declares its ``span`` (sources/registry.py: how long before and
after an event its sound lasts) renders the block's events in a window [block start - lead, block end + tail +
propagation delay], through the same code as a whole render, with every time in the context shifted to the
window's start (events, the bodies' recorded motion and rests, the listeners' trajectories). Windows start on a
whole control frame of the moving-radiation renderer (transfer/motion.py), so its frames fall where they fall in a
whole render. Kinds without a span (the nonlinear shells, whose state carries from one event to the next;
granular sources, which render their own events; plugins) render the whole scene once, as before, and their
output is added block by block.

What differs from the whole render (``render_scene``): the order of floating-point additions, and the modal
renderer's 120 dB ring cutoff (``mode_cutoff_db``), which a block applies after its own last event instead of the
scene's: at most 1e-6 of the ring's amplitude after that event, measured far below that (tests/unit/test_streaming.py).

Files: each output (the mix, and with stems each source kind and object) is spooled to a raw float64 file beside
the output as its samples become final; once the whole scene is rendered the level is chosen from the spooled mix
(its peak, or its loudness measured piecewise, io/audio.py ``LoudnessMeter``) and the WAVs are written from the
spools, piece by piece. The spool folder is removed afterwards (also after an error).
"""
from __future__ import annotations

import copy
import dataclasses
import logging
import math
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .io.progress import QUIET, Progress
from .sources.registry import RenderContext

log = logging.getLogger("impactsound")

#: default block length [s]
BLOCK_S = 10.0
#: samples read or written per piece when the WAVs are written from the spools
PIECE = 1 << 18
#: a block renders its objects in groups whose outputs fit in this many bytes [B]
GROUP_BYTES = 256 << 20


@dataclass
class StreamedRender:
    """A scene rendered to files (:func:`render_to_file`).

    Attributes
    ----------
    files : list of Path
        The WAV, then the PNG if any.
    stems : list of Path
        Stem WAVs written (empty without ``stems``).
    sidecar : dict
        The WAV's JSON sidecar (scale, level, what each object got).
    events : EventLog
        The contact events rendered.
    listener_names : list of str
    sample_rate : int
    n_samples : int
    peak_pa : float
        Largest |pressure| of the mix [Pa].
    blocks : int
        Time blocks rendered.
    """

    files: list
    stems: list
    sidecar: dict
    events: object
    listener_names: list
    sample_rate: int
    n_samples: int
    peak_pa: float
    blocks: int = 1
    info: dict = field(default_factory=dict)


class _Spool:
    """A (channels, n) float64 signal appended in pieces to a raw file, read back in pieces."""

    def __init__(self, path: Path, channels: int):
        self.path, self.channels = path, int(channels)
        self.f = open(path, "wb")
        self.n = 0
        self.peak = 0.0

    def append(self, x: np.ndarray) -> None:
        if x.shape[1]:
            self.f.write(np.ascontiguousarray(x.T, np.float64).tobytes())
            self.n += x.shape[1]
            self.peak = max(self.peak, float(np.max(np.abs(x))))

    def pad_to(self, n: int) -> None:
        while self.n < n:
            self.append(np.zeros((self.channels, min(PIECE, n - self.n))))

    def close(self) -> None:
        self.f.close()

    def pieces(self, scale: float = 1.0):
        """(channels, k) pieces of the whole signal, in order."""
        with open(self.path, "rb") as f:
            for a in range(0, self.n, PIECE):
                k = min(PIECE, self.n - a)
                x = np.fromfile(f, np.float64, k * self.channels).reshape(k, self.channels).T
                yield x * scale if scale != 1.0 else x

    def channel(self, c: int) -> "_SpoolChannel":
        """Channel c as a read-on-demand 1-D array (slices read from the file; nothing stays mapped)."""
        return _SpoolChannel(self, c)


class _SpoolChannel:
    """One channel of a spool, read a slice at a time (what the picture of a long render needs)."""

    ndim = 1

    def __init__(self, spool: _Spool, c: int):
        self.spool, self.c = spool, int(c)
        self.shape = (spool.n,)

    def __getitem__(self, sl: slice) -> np.ndarray:
        a, b, step = sl.indices(self.spool.n)
        if step != 1:
            raise IndexError("only contiguous slices")
        k = max(0, b - a)
        with open(self.spool.path, "rb") as f:
            f.seek(a * self.spool.channels * 8)
            x = np.fromfile(f, np.float64, k * self.spool.channels)
        return x.reshape(k, self.spool.channels)[:, self.c]

    def __array__(self, dtype=None, copy=None):
        x = self[0:self.spool.n]
        return x if dtype is None else x.astype(dtype)


class _Accumulator:
    """Sum of the block outputs of one signal over [a0, a0 + capacity); finished samples go to a spool."""

    def __init__(self, spool: _Spool, capacity: int, a0: int = 0):
        self.spool = spool
        self.buf = np.zeros((spool.channels, capacity))
        self.a0 = a0
        spool.pad_to(a0)

    def add(self, w0: int, y: np.ndarray) -> None:
        i = w0 - self.a0
        assert i >= 0 and i + y.shape[1] <= self.buf.shape[1], "block outside the streaming window"
        self.buf[:, i:i + y.shape[1]] += y

    def flush(self, upto: int, extra=None) -> None:
        """Samples before ``upto`` are final: spool them (plus ``extra(a, b)``, a whole-scene output's slice)."""
        k = upto - self.a0
        if k <= 0:
            return
        done = self.buf[:, :k].copy()
        if extra is not None:
            done += extra(self.a0, upto)
        self.spool.append(done)
        self.buf[:, :-k] = self.buf[:, k:]
        self.buf[:, -k:] = 0.0
        self.a0 = upto


def delay_bound(ctx: RenderContext) -> float:
    """An upper bound [s] of the propagation delay from any sounding point of the scene to any listener: the
    largest distance between the bounding boxes of the listeners (with their trajectories) and of the event points,
    the bodies' recorded positions and their initial positions (each widened by the body's size), over c."""
    scene = ctx.scene
    lis = [np.atleast_2d(ctx.listeners)]
    for l in scene.listeners:
        if getattr(l, "trajectory", None) is not None:
            lis.append(np.asarray(l.trajectory.position).reshape(-1, 3))
    src = [np.asarray(ctx.events.point).reshape(-1, 3)]
    size = 0.0
    for i, b in enumerate(scene.bodies):
        src.append(np.asarray(b.position, np.float64).reshape(1, 3))
        tr = ctx.motion.get(i)
        if tr is not None:
            src.append(np.asarray(tr.position).reshape(-1, 3))
        size = max(size, float(np.linalg.norm(np.ptp(np.asarray(b.mesh.vertices), axis=0))))
    L, S = np.vstack(lis), np.vstack(src)
    L, S = L[np.isfinite(L).all(axis=1)], S[np.isfinite(S).all(axis=1)]
    if not len(L) or not len(S):
        return 0.0
    lo = np.minimum(L.min(axis=0), S.min(axis=0))
    hi = np.maximum(L.max(axis=0), S.max(axis=0))
    return (float(np.linalg.norm(hi - lo)) + size) / float(scene.air.c)


def _shift_trajectory(tr, t0: float):
    if tr is None or t0 == 0.0:
        return tr
    out = copy.copy(tr)
    out.t = tr.t - t0
    out._spline = None
    return out


def block_context(ctx: RenderContext, mask: np.ndarray, w0: int, m: int) -> RenderContext:
    """The context of the events ``mask`` rendered into samples [w0, w0 + m) of the scene: every time shifted by
    w0 / fs (events, the bodies' motion and rests, the listeners' trajectories), output length m."""
    fs = ctx.sample_rate
    t0 = w0 / fs
    ev = ctx.events.select(mask)
    ev.t = ev.t - t0
    motion = {i: _shift_trajectory(tr, t0) for i, tr in ctx.motion.items()}
    resting = {i: [dataclasses.replace(r, t0=r.t0 - t0, t1=r.t1 - t0) for r in rs] for i, rs in ctx.resting.items()}
    if hasattr(ev, "motion"):
        ev.motion = [motion.get(i) for i in range(len(ctx.motion))] if ctx.motion else getattr(ev, "motion")
    if hasattr(ev, "resting"):
        ev.resting = resting
    scene = copy.copy(ctx.scene)
    scene.listeners = [dataclasses.replace(l, trajectory=_shift_trajectory(l.trajectory, t0))
                       if getattr(l, "trajectory", None) is not None else l for l in ctx.scene.listeners]
    return RenderContext(scene, ev, ctx.listeners, ctx.ears, fs, m, QUIET, motion=motion, resting=resting,
                         whole=ctx)


def render_to_file(scene, path, *, stems=None, png=None, title: str = "", normalise="peak",
                   lufs_target: float | None = None, full_scale_pa: float | None = None,
                   progress: Progress = QUIET, events=None, allow_implausible: bool = False,
                   block_s: float = BLOCK_S) -> StreamedRender:
    """Render a scene straight to files, in time blocks (module docstring): peak memory follows one block, not the
    scene's length. Writes what :meth:`~impactsound.pipeline.RenderResult.save` writes for
    :func:`~impactsound.pipeline.render_scene`'s result (the same files, sidecar and levels).

    Parameters
    ----------
    scene : Scene, str, Path or dict
    path : str or Path
        Output ``.wav`` (float32) or ``.flac`` (24-bit); its JSON sidecar keeps the scale (pascals).
    stems : str or Path, optional
        Folder for one WAV per source kind and per source kind and object, at the mix's scale.
    png : str or Path, optional
        Waveform and spectrogram of the first channel.
    title : str
    normalise, lufs_target, full_scale_pa
        The output level (io/audio.py ``output_gain``): ``peak`` (default), ``lufs``, ``none`` or ``shared``.
    progress : Progress
    events : EventLog, optional
        Events to render instead of the scene's (checked as :func:`~impactsound.pipeline.render_scene` does).
    allow_implausible : bool
    block_s : float
        Block length [s] (default 10 s): events are rendered this many seconds at a time.

    Returns
    -------
    StreamedRender
    """
    from .errors import InputError
    from .io.audio import (DEFAULT_LUFS, LoudnessMeter, check_lufs_target, lufs_gain, normalisation_gain,
                           output_gain, write_wav_chunks)
    from .pipeline import describe_into, prepare_render, warn_silent
    path = Path(path)
    if path.suffix.lower() not in (".wav", ".flac"):
        raise InputError(f"{path}: output must end in .wav or .flac")
    if not (math.isfinite(block_s) and block_s > 0):
        raise InputError(f"block_s = {block_s!r} s: give a positive block length (default {BLOCK_S:g} s)")
    # the level's arguments are checked before any work (a bad choice fails now, not after the render)
    target = DEFAULT_LUFS if lufs_target is None else lufs_target
    if normalise == "lufs":
        check_lufs_target(target)
    else:
        output_gain(np.ones((1, 1)), 48000, normalise, full_scale_pa=full_scale_pa)
    scene, kinds, events, ctx = prepare_render(scene, progress, events, allow_implausible=allow_implausible)
    fs, n, L = ctx.sample_rate, ctx.n_samples, len(ctx.listeners)
    info: dict = {"sources": list(scene.sources), "quality": getattr(scene, "quality", "default")}
    objects: dict = {b.name: {} for b in scene.bodies}
    prepared = []
    for kind in kinds:
        prep = kind.prepare(scene, progress)
        prepared.append(prep)
        describe_into(kind, prep, info, objects)
    info["objects"] = objects

    from .transfer.motion import control_hop
    H = control_hop(fs)
    B = max(H, int(round(block_s * fs / H)) * H)
    D = delay_bound(ctx)
    spans = [kind.span(prep, ctx) if kind.span is not None else None for kind, prep in zip(kinds, prepared)]
    streamed = [s is not None and all(math.isfinite(v) for v in s) for s in spans]
    lead = max([s[0] for s, ok in zip(spans, streamed) if ok] + [0.0])
    lead_n = -(-int(math.ceil(lead * fs)) // H) * H
    # each kind renders [block start - lead, block end + its own tail + the propagation delay]
    tail_n = [int(math.ceil((s[1] + D) * fs)) + 1 if ok else 0 for s, ok in zip(spans, streamed)]
    nblocks = max(1, -(-n // B))
    cap = min(n, lead_n + B + max(tail_n + [0])) if n else 0

    spool_dir = Path(tempfile.mkdtemp(prefix=f".{path.stem}-", dir=path.parent if path.parent.exists() else None))
    try:
        keep_stems = stems is not None
        mix = _Accumulator(_Spool(spool_dir / "mix.f64", L), cap)
        stem_acc: dict[tuple[str, str], _Accumulator] = {}
        whole: dict[tuple[str, str], np.ndarray] = {}     # outputs of the kinds rendered whole
        for kind, prep, ok in zip(kinds, prepared, streamed):
            if not ok:
                why = "its span is unknown" if kind.span is None else "its sound may not end"
                progress.message(f"{kind.name}: rendered for the whole scene at once ({why})")
                for name, y in kind.render(prep, ctx).items():
                    whole[(kind.name, name)] = y

        def acc_of(key):
            if key not in stem_acc:
                stem_acc[key] = _Accumulator(_Spool(spool_dir / f"{len(stem_acc)}.f64", L), cap, a0=mix.a0)
            return stem_acc[key]

        if keep_stems:
            # every stem a whole render writes, silent ones too: the objects each kind renders, asked with no events
            empty = block_context(ctx, np.zeros(len(events), bool), 0, 0)
            for kind, prep, ok in zip(kinds, prepared, streamed):
                acc_of((kind.name, ""))
                for name in (kind.render(prep, empty) if ok else {k[1]: 0 for k in whole if k[0] == kind.name}):
                    acc_of((kind.name, name))
        t_ev = np.asarray(events.t)
        ids = np.r_[np.asarray(events.a), np.asarray(events.b)]
        body_names = [b.name for b in scene.bodies]
        with progress.stage(f"rendering {nblocks} block{'s' if nblocks > 1 else ''} of {B / fs:g} s") as update:
            for b in range(nblocks):
                s0, s1 = b * B, min(n, (b + 1) * B)
                last = b == nblocks - 1
                mask = (t_ev >= s0 / fs) & ((t_ev < s1 / fs) | last)
                if b == 0:
                    mask |= t_ev < 0
                w0 = max(0, s0 - lead_n)
                if mask.any() and n > w0:
                    bctx = block_context(ctx, mask, w0, n - w0)
                    # the objects these events touch, a group at a time: memory follows the group, not the pile
                    touched = np.unique(ids[np.r_[mask, mask]])
                    active = [body_names[i] for i in touched if i >= 0]
                    for kind, prep, ok, tn in zip(kinds, prepared, streamed, tail_n):
                        if not ok or not active:
                            continue
                        m = min(n, s1 + tn) - w0
                        group = max(1, int(GROUP_BYTES // max(1, m * L * 8)))
                        for g in range(0, len(active), group):
                            only = frozenset(active[g:g + group])
                            outs = kind.render(prep, dataclasses.replace(bctx, n_samples=m, only=only))
                            for name in sorted(outs):
                                if name not in only:
                                    continue              # a kind that renders every object: once per object
                                y = outs[name]
                                mix.add(w0, y)
                                if keep_stems:
                                    acc_of((kind.name, name)).add(w0, y)
                                    acc_of((kind.name, "")).add(w0, y)
                            del outs
                    del bctx
                # samples before the next block's window are final
                upto = n if last else min(n, max(mix.a0, (b + 1) * B - lead_n))
                _flush_all(mix, stem_acc, whole, upto, keep_stems)
                update((b + 1) / nblocks)
        mix.spool.close()
        for a in stem_acc.values():
            a.spool.close()

        # the level, from the spooled mix
        peak = mix.spool.peak
        norm = {True: "peak", False: "none"}.get(normalise, normalise)
        if norm == "lufs":
            g0 = normalisation_gain(np.array([peak]), 1.0)
            meter = LoudnessMeter(fs, L)
            for x in mix.spool.pieces(g0):
                meter.feed(x)
            gain, level = lufs_gain(meter.result(), g0, peak, target)
        else:
            gain, level = output_gain(np.array([[peak]]), fs, norm, full_scale_pa=full_scale_pa)
        side = {"listeners": [l.name for l in scene.listeners], "events": len(events), **info, "level": level}
        write_wav_chunks(path, mix.spool.pieces(), L, fs, gain, side)
        log.info("wrote %s (peak %.3g Pa at the listener; scale in %s.json)", path, peak, path)
        if n and peak == 0.0:
            warn_silent(path, len(events), info)
        stem_files = []
        if keep_stems:
            stems = Path(stems)
            for (kname, oname), acc in sorted(stem_acc.items()):
                f = stems / (f"{kname}.wav" if not oname else f"{kname}_{oname}.wav")
                meta = {"source": kname} if not oname else {"source": kname, "object": oname}
                stem_files.append(write_wav_chunks(f, acc.spool.pieces(), L, fs, gain, meta))
            log.info("wrote stems to %s/", stems)
        files = [path]
        if png is not None:
            from .io.plot import spectrogram_png
            spectrogram_png(Path(png), mix.spool.channel(0), fs, title or path.stem, events.t)
            files.append(Path(png))
        sidecar = {"sample_rate_hz": fs, "channels": L, "samples": n, "pascals_per_unit": 1.0 / gain,
                   "peak_pa": peak, **side}
        log.info("rendered %s: %d events, peak %.3g Pa, %d blocks", scene.path, len(events), peak, nblocks)
        return StreamedRender(files, stem_files, sidecar, events, [l.name for l in scene.listeners], fs, n, peak,
                              nblocks, info)
    finally:
        shutil.rmtree(spool_dir, ignore_errors=True)


def _flush_all(mix, stem_acc, whole, upto, keep_stems):
    """Spool every signal's samples before ``upto``, adding the whole-scene outputs' slices."""
    if not whole:
        extra_mix = None
    else:
        def extra_mix(a, b):
            out = np.zeros((mix.buf.shape[0], b - a))
            for key in sorted(whole):
                out += whole[key][:, a:b]
            return out
    mix.flush(upto, extra_mix)
    if keep_stems:
        for key, acc in stem_acc.items():
            kname, oname = key
            if oname:
                y = whole.get(key)
                acc.flush(upto, None if y is None else (lambda a, b, y=y: y[:, a:b]))
            else:
                ys = [whole[k] for k in sorted(whole) if k[0] == kname]
                acc.flush(upto, None if not ys else (lambda a, b, ys=ys: sum(y[:, a:b] for y in ys)))
