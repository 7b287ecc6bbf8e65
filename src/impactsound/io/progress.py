"""Progress reporting for long steps (meshing, eigen-solves, dynamics, synthesis), on stderr; quiet with -q."""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager


class Progress:
    """Reports stages and fractions. ``Progress(quiet=True)`` prints nothing."""

    def __init__(self, quiet: bool = False, stream=None):
        self.quiet = quiet
        self.stream = stream or sys.stderr

    def message(self, text: str) -> None:
        if not self.quiet:
            print(text, file=self.stream, flush=True)

    @contextmanager
    def stage(self, name: str, total: float | None = None):
        """Context giving a callable ``update(fraction)``; prints a bar (tqdm) and the elapsed time.

        ``update`` also takes a sub-stage name (str), shown next to the stage name (e.g. "eigensolve")."""
        t0 = time.perf_counter()
        if self.quiet:
            yield lambda fraction: None
            return
        from tqdm import tqdm
        bar = tqdm(total=100, desc=name, file=self.stream, leave=False, unit="%",
                   bar_format="{desc}: {percentage:3.0f}%|{bar:20}| {elapsed}")
        last = [0.0]

        def update(fraction: float | str) -> None:
            if isinstance(fraction, str):
                bar.set_description_str(f"{name} ({fraction})")
                return
            f = min(max(float(fraction), 0.0), 1.0) * 100
            if f > last[0]:
                bar.update(f - last[0])
                last[0] = f

        try:
            yield update
        finally:
            bar.close()
            self.message(f"{name}: done in {time.perf_counter() - t0:.1f} s")


QUIET = Progress(quiet=True)
