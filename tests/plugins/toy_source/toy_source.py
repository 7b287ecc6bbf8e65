"""A toy impactsound source kind: each impact on an object adds a short burst of seeded white noise.

Its pressure is not physical; it exists to exercise the plugin contract (options validated from
``[source.toy]``, ``prepare``, ``render`` with the shared contact stage and the scene's seed, ``describe``).
"""
import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from impactsound.sources.registry import SourceKind


class ToyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    gain: float = Field(default=0.1, gt=0)        # burst amplitude per N s of impulse [Pa / (N s)]
    burst: float = Field(default=0.002, gt=0)     # burst length [s]


def prepare(scene, progress):
    return scene.options["toy"]


def render(opt, ctx):
    out = {}
    stage = ctx.contacts()
    n_burst = max(1, int(round(opt.burst * ctx.sample_rate)))
    for i, body in enumerate(ctx.scene.bodies):
        y = np.zeros((len(ctx.listeners), ctx.n_samples))
        bc = stage.of(i)
        if bc is not None:
            rng = ctx.rng("toy", body.name)
            start = np.round(ctx.events.t[bc.rows] * ctx.sample_rate).astype(int)
            amp = opt.gain * np.linalg.norm(bc.impulse, axis=1)
            for s, a in zip(start, amp):             # a handful of events per test scene
                seg = y[:, s:s + n_burst]
                seg += a * rng.standard_normal(seg.shape[1])
        out[body.name] = y
    return out


def describe(opt):
    return {"toy_gain": opt.gain}, {}


SOURCE = SourceKind(name="toy", options=ToyOptions, prepare=prepare, render=render, describe=describe,
                    summary="test plugin: seeded noise bursts")
