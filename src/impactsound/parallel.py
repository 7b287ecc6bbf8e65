"""Run independent tasks locally or on a Dask cluster, with results in task order.

One function, :func:`map_tasks`: ``map_tasks(fn, tasks)`` returns ``[fn(t) for t in tasks]``, computed

* in this process, one after the other, when ``workers == 1`` (or there is at most one task);
* in a local process pool of ``workers`` processes (default: the core count, at most one per task);
* on a Dask cluster when ``scheduler="tcp://host:8786"`` (needs ``pip install 'impactsound[distributed]'``);
  start one with ``dask scheduler`` and, on each machine, ``dask worker tcp://host:8786 --nthreads 1
  --nworkers 2``.

The result is the same list whichever way it runs (tasks must be deterministic); ``fn`` and the tasks must be
picklable for the pool and Dask (top-level functions, ``functools.partial`` of them, or instances of top-level
classes; no lambdas or closures). ``on_result(index, result)`` is called in this process as each task finishes
(in completion order; the PAN precompute writes its per-field checkpoints there) and ``progress(fraction)``
after it. An unreachable scheduler raises :class:`SchedulerError` unless ``fallback_local`` is set, in which case
a :class:`SchedulerFallbackWarning` is issued and the tasks run locally.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import warnings
from typing import Any, Callable, Iterable, Sequence

from .errors import InputError

DEFAULT_CONNECT_TIMEOUT = 5.0   # [s] to reach a scheduler before giving up
DISTRIBUTED_EXTRA = "pip install 'impactsound[distributed]'"


class SchedulerError(InputError):
    """A Dask scheduler was asked for but cannot be used (not installed, bad address, unreachable)."""


class SchedulerUnreachable(SchedulerError):
    """No Dask scheduler answered at the address (the case ``fallback_local`` covers).

    Parameters
    ----------
    address : str
        The scheduler address.
    reason : str
        What happened (first line of the message).
    hint : str
        What to do about it (rest of the message).
    """

    def __init__(self, address: str, reason: str, hint: str):
        super().__init__(f"{reason}; {hint}")
        self.address, self.reason = address, reason


class SchedulerFallbackWarning(UserWarning):
    """The Dask scheduler could not be reached and the tasks ran on this machine instead (``fallback_local``)."""


#: environment variable that caps the compute threads of one process (FDTD, synthesis kernels)
THREADS_ENV = "IMPACTSOUND_THREADS"


def local_cores() -> int:
    """Cores this process may run on.

    Returns
    -------
    int
        Size of the CPU affinity set (the CPU count off Linux), at least 1.
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def default_threads() -> int:
    """Compute threads for one process.

    The local process pool sets ``$IMPACTSOUND_THREADS`` to cores // processes in its workers so that several
    solves side by side do not oversubscribe the cores; set it on Dask workers that share a machine.

    Returns
    -------
    int
        ``$IMPACTSOUND_THREADS`` when set, else :func:`local_cores`.

    Raises
    ------
    InputError
        If ``$IMPACTSOUND_THREADS`` is set but not a positive integer.
    """
    v = os.environ.get(THREADS_ENV, "").strip()
    if v:
        try:
            n = int(v)
        except ValueError:
            n = 0
        if n < 1:
            raise InputError(f"{THREADS_ENV}={v!r}: need a positive integer number of threads (or unset it)")
        return n
    return local_cores()


def _limit_threads(n: int) -> None:
    """Process-pool initializer: cap this worker's compute threads (see :func:`default_threads`)."""
    os.environ[THREADS_ENV] = str(max(1, int(n)))


def map_tasks(fn: Callable[[Any], Any], tasks: Iterable[Any], *, scheduler: str | None = None,
              workers: int | None = None, fallback_local: bool = False,
              progress: Callable[[float], None] | None = None,
              on_result: Callable[[int, Any], None] | None = None,
              connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> list:
    """``[fn(t) for t in tasks]``, run serially, in a local process pool or on a Dask cluster (module docstring).

    A task's error is raised with its own type: in the local pool once the tasks already running have finished
    (they still reach ``on_result``; the others are cancelled), on Dask at once (the rest cancelled). With no
    tasks nothing is started or contacted (but a missing Dask install is still reported when a scheduler is
    given).

    Parameters
    ----------
    fn : callable
        Picklable function of one task.
    tasks : iterable
        The tasks (picklable).
    scheduler : str, optional
        Dask scheduler address ("tcp://host:8786"); None runs locally.
    workers : int, optional
        Local processes (default the core count, at most one per task; 1 = in this process); ignored with a
        scheduler (its workers decide).
    fallback_local : bool, optional
        When no scheduler answers, warn (:class:`SchedulerFallbackWarning`) and run locally instead of raising.
    progress : callable, optional
        ``progress(fraction)``, called with the fraction of tasks done as each finishes.
    on_result : callable, optional
        ``on_result(index, result)``, called in this process as each task finishes (completion order).
    connect_timeout : float, optional
        Seconds to wait for the scheduler.

    Returns
    -------
    list
        The results in task order.

    Raises
    ------
    InputError
        If ``workers`` < 1.
    SchedulerError
        When the scheduler cannot be used (:class:`SchedulerUnreachable`: nothing answered within
        ``connect_timeout``, unless ``fallback_local``).
    """
    tasks = list(tasks)
    if workers is not None and int(workers) < 1:
        raise InputError(f"workers = {workers}: need at least 1")
    if scheduler is not None:
        scheduler = str(scheduler).strip()
        if not scheduler:
            raise SchedulerError("--scheduler: empty address; give the Dask scheduler's address, e.g. "
                                 "tcp://HOST:8786")
        require_distributed()                 # fail early and clearly when dask is missing
        if not tasks:
            return []
        try:
            client = _connect(scheduler, connect_timeout)
        except SchedulerUnreachable as exc:
            if not fallback_local:
                raise
            warnings.warn(f"{exc.reason}; running the {len(tasks)} tasks on this machine instead",
                          SchedulerFallbackWarning, stacklevel=2)
        else:
            try:
                return _run_dask(client, fn, tasks, progress, on_result)
            finally:
                client.close()
    if not tasks:
        return []
    n = min(int(workers) if workers is not None else local_cores(), len(tasks))
    if n <= 1:
        return _run_serial(fn, tasks, progress, on_result)
    return _run_pool(fn, tasks, n, progress, on_result)


# ---------------------------------------------------------------------------------------------------------------
def _done(k: int, n: int, progress) -> None:
    if progress is not None:
        progress(k / n)


def _run_serial(fn, tasks: Sequence, progress, on_result) -> list:
    out = []
    for i, t in enumerate(tasks):
        r = fn(t)
        if on_result is not None:
            on_result(i, r)
        out.append(r)
        _done(i + 1, len(tasks), progress)
    return out


def _start_method() -> str:
    """"fork" where it is safe, else "spawn". A forked worker starts in milliseconds with this process's imports
    and compiled kernels (a spawned one imports the package and loads its kernels again: ~1.5 s on 2 cores, a
    fifth of a 20-render batch of short scenes on two workers). Forking is safe only while this process runs no
    other thread: a thread pool (the FDTD's, a progress bar's monitor) or Numba's threading layer may hold a lock
    at the fork that the child then never sees released. So: Linux, one Python thread, Numba's parallel layer not
    started; otherwise spawn, whose workers behave like Dask's."""
    import sys
    import threading
    if not sys.platform.startswith("linux") or threading.active_count() != 1:
        return "spawn"
    par = sys.modules.get("numba.np.ufunc.parallel")
    if par is not None and getattr(par, "_is_initialized", True):
        return "spawn"
    return "fork"


def _run_pool(fn, tasks: Sequence, n: int, progress, on_result) -> list:
    """A pool of ``n`` processes, forked where that is safe, else spawned (:func:`_start_method`). After a task
    error the tasks not started are cancelled, the running ones still reach on_result (their work is kept), then
    the error is raised."""
    import multiprocessing as mp
    from concurrent.futures import CancelledError, ProcessPoolExecutor, as_completed
    out: list = [None] * len(tasks)
    error: BaseException | None = None
    share = max(1, local_cores() // n)
    ex = ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context(_start_method()), initializer=_limit_threads,
                             initargs=(share,))
    try:
        futs = {ex.submit(fn, t): i for i, t in enumerate(tasks)}
        k = 0
        for fut in as_completed(futs):
            i = futs[fut]
            try:
                r = fut.result()
            except CancelledError:
                continue
            except Exception as exc:
                if error is None:
                    error = exc
                    for f in futs:
                        f.cancel()
                continue
            if on_result is not None:
                on_result(i, r)
            out[i] = r
            k += 1
            _done(k, len(tasks), progress)
    finally:
        ex.shutdown(wait=True, cancel_futures=True)
    if error is not None:
        raise error
    return out


# ---------------------------------------------------------------------------------------------------------------
def require_distributed():
    """Import Dask's ``distributed`` package.

    Returns
    -------
    module
        ``distributed``.

    Raises
    ------
    SchedulerError
        If it is not installed (with the install command).
    """
    try:
        import distributed
    except ImportError as exc:
        raise SchedulerError(f"--scheduler needs Dask's distributed scheduler, which is not installed ({exc}); "
                             f"install it with: {DISTRIBUTED_EXTRA}") from None
    return distributed


def _worker_hint(address: str) -> str:
    return (f"start a scheduler with `dask scheduler` and workers with `dask worker {address} --nthreads 1 "
            f"--nworkers 2` (each on the machines that should compute), or pass --fallback-local "
            f"(fallback_local=True) to run on this machine")


def _unreachable(address: str, timeout: float, exc: BaseException) -> SchedulerUnreachable:
    why = str(exc).split("\n")[0] or type(exc).__name__
    return SchedulerUnreachable(address, f"--scheduler {address}: no Dask scheduler reachable within {timeout:g} s "
                                         f"({why})", _worker_hint(address))


def _probe_tcp(address: str, timeout: float) -> None:
    """Open and close a plain TCP connection to a tcp:// or tls:// scheduler address first.

    Why: a distributed.Client whose constructor fails is left half-built and is closed by its __del__ whenever
    the garbage collector gets to it, from whatever thread is running then. If that is the thread a later
    Client starts, __del__ waits for the lock that Client's start holds and the process hangs (seen in CI). So
    an address where nothing listens never gets a Client at all."""
    import socket

    from distributed.comm.addressing import parse_address, parse_host_port
    scheme, loc = parse_address(address)
    if scheme not in ("tcp", "tls"):
        return                                # inproc://, ucx://, ws://: leave to distributed
    try:
        host, port_n = parse_host_port(loc, 8786)
    except ValueError as exc:
        raise SchedulerError(f"--scheduler {address}: not a Dask scheduler address (port is not a number: {exc}); "
                             f"expected e.g. tcp://HOST:8786") from None
    try:
        socket.create_connection((host, port_n), timeout=timeout).close()
    except OSError as exc:                    # refused, timed out, unknown host
        raise _unreachable(address, timeout, exc) from None


def _connect(address: str, timeout: float):
    import gc
    distributed = require_distributed()
    _probe_tcp(address, timeout)
    try:
        return distributed.Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:    # refused, timed out, unknown host (OSError covers CommClosedError)
        err = _unreachable(address, timeout, exc)
    except ValueError as exc:                 # malformed address
        err = SchedulerError(f"--scheduler {address}: not a Dask scheduler address ({exc}); expected e.g. "
                             f"tcp://HOST:8786")
    gc.collect()                              # close the half-built Client now, on this thread (see _probe_tcp)
    raise err


def _run_dask(client, fn, tasks: Sequence, progress, on_result) -> list:
    from distributed import as_completed
    name = getattr(getattr(fn, "func", fn), "__name__", "task")     # functools.partial: the wrapped function
    run = os.urandom(6).hex()
    futs = client.map(fn, tasks, pure=False, key=[f"impactsound-{name}-{i}-{run}" for i in range(len(tasks))])
    index = {f.key: i for i, f in enumerate(futs)}
    out: list = [None] * len(tasks)
    k = 0
    try:
        for fut in as_completed(futs, loop=client.loop):
            i = index[fut.key]
            r = fut.result()                  # re-raises a task's error here (with its original type)
            if on_result is not None:
                on_result(i, r)
            out[i] = r
            k += 1
            _done(k, len(tasks), progress)
            fut.release()
    finally:
        client.cancel([f for f in futs if not f.done()])
    return out


# ----------------------------------------------------------------------------------------------------------
# BLAS threads

# (get, set) thread-count entry points of the OpenBLAS builds numpy and scipy wheels bundle (prefixed, 64-bit
# integer or not) and of a plain system OpenBLAS
_OPENBLAS_API = [("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
                 ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
                 ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
                 ("openblas_get_num_threads", "openblas_set_num_threads")]
_openblas_handles: list | None = None


def _find_openblas() -> list:
    """(get, set) functions of every OpenBLAS loaded in this process (Linux: from /proc/self/maps); [] if none."""
    global _openblas_handles
    if _openblas_handles is None:
        found = []
        try:
            with open("/proc/self/maps") as f:          # fields: address perms offset dev inode pathname
                paths = sorted({parts[5].strip() for parts in (ln.split(maxsplit=5) for ln in f)
                                if len(parts) == 6 and "openblas" in parts[5].lower()})
        except OSError:
            paths = []
        for path in paths:
            try:
                lib = ctypes.CDLL(path)                  # already loaded: this only returns its handle
            except OSError:
                continue
            for get, set_ in _OPENBLAS_API:
                if hasattr(lib, get) and hasattr(lib, set_):
                    g, s_ = getattr(lib, get), getattr(lib, set_)
                    g.restype, g.argtypes = ctypes.c_int, []
                    s_.restype, s_.argtypes = None, [ctypes.c_int]
                    found.append((g, s_))
                    break
        _openblas_handles = found
    return _openblas_handles


@contextlib.contextmanager
def single_threaded_blas():
    """Run the block with OpenBLAS on one thread, then restore the previous counts.

    Why (eigen-solve, fem/eigen.py): every BLAS call there is small to medium (fronts of a few hundred rows,
    blocks of 8-32 vectors), where a second thread gains little, and on a busy machine each threaded call waits
    for its helper thread to be scheduled. Measured on the 2-core bench machine under load
    (bench/bench_modal_solve.py): the whole solve took 21-51 s with OpenBLAS's default 2 threads against 5-6 s
    with one. No-op where OpenBLAS is not found (other BLAS, other OS); OPENBLAS_NUM_THREADS etc. are then the way
    to the same effect.
    Also used so that a result does not depend on where it runs: a threaded LAPACK factorisation may round
    differently with another thread count, and Dask workers run with one BLAS thread (transfer/precompute.py).
    """
    saved = []
    try:
        for get, set_ in _find_openblas():
            saved.append((set_, get()))
            set_(1)
        yield
    finally:
        for set_, n in reversed(saved):
            set_(n)


_malloc_tuned = False


def undo_dask_malloc_trim() -> None:
    """Give glibc back its usual large-allocation behaviour in a process started with MALLOC_TRIM_THRESHOLD_
    set (Dask's nanny sets 65536 in every worker it spawns). With that variable glibc stops adapting its mmap
    threshold, so every array over 128 KiB is a fresh mmap and page faults on first touch: the transfer
    precompute ran 1.36x slower (4 modes, 19.4 -> 26.3 s, measured in one process each way). Here the mmap
    threshold is fixed at glibc's adaptive maximum (32 MiB on 64-bit) and the trim threshold at twice that.
    No-op without that variable, off Linux/glibc, or on a second call."""
    global _malloc_tuned
    if _malloc_tuned or "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        return
    _malloc_tuned = True
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):                # pragma: no cover - not glibc
        return
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    mallopt(M_MMAP_THRESHOLD, 32 * 2**20)
    mallopt(M_TRIM_THRESHOLD, 64 * 2**20)
