"""Progress reporting for long steps (meshing, eigen-solves, dynamics, synthesis).

Messages go to the ``impactsound`` logger (``logging.getLogger("impactsound")``, level INFO): a program using the
library sees them when it configures logging, and the command line shows them (``-q`` hides them). Progress
bars (tqdm, on stderr) are drawn only by a ``Progress(quiet=False)``, as the command line passes; the library's
default, :data:`QUIET`, draws none.
"""
from __future__ import annotations

import logging
import sys
import time
from contextlib import contextmanager

log = logging.getLogger("impactsound")


class Progress:
    """Reports stages and fractions.

    Parameters
    ----------
    quiet : bool, optional
        Draw no bars and log no stage timings (:meth:`message` still logs).
    stream : file-like, optional
        Where bars go (default stderr).
    """

    def __init__(self, quiet: bool = False, stream=None):
        self.quiet = quiet
        self.stream = stream or sys.stderr

    def message(self, text: str) -> None:
        """A line for the user (INFO on the ``impactsound`` logger).

        Parameters
        ----------
        text : str
        """
        log.info(text)

    @contextmanager
    def stage(self, name: str, total: float | None = None):
        """Context giving a callable ``update(fraction)``; unless quiet, draws a bar (tqdm) and logs the elapsed
        time at the end.

        ``update`` also takes a sub-stage name (str), shown next to the stage name (e.g. "eigensolve").

        Parameters
        ----------
        name : str
            Stage name.
        total : float, optional
            Unused (fractions are in [0, 1]).

        Yields
        ------
        callable
            ``update(fraction or str)``; a no-op when quiet.
        """
        t0 = time.perf_counter()
        if self.quiet:
            yield lambda fraction: None
            return
        from tqdm import tqdm
        bar = tqdm(total=100, desc=name, file=self.stream, leave=False, unit="%",
                   bar_format="{desc}: {percentage:3.0f}%|{bar:20}| {elapsed}<{remaining}")
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
