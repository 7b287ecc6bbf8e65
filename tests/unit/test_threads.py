"""Thread counts of the compute kernels: $IMPACTSOUND_THREADS caps them, bad values are a clear error, and the
local process pool splits the cores between its workers (no oversubscription when fields run side by side)."""
import pytest

from impactsound.errors import InputError
from impactsound.parallel import THREADS_ENV, default_threads, local_cores, map_tasks


def _threads_in_worker(_):
    """Top-level (picklable) task: the thread count a worker process would use."""
    return default_threads()


def test_env_caps_threads(monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert default_threads() == local_cores()
    monkeypatch.setenv(THREADS_ENV, "3")
    assert default_threads() == 3


@pytest.mark.parametrize("bad", ["0", "-2", "two"])
def test_bad_env_is_a_clear_error(monkeypatch, bad):
    monkeypatch.setenv(THREADS_ENV, bad)
    with pytest.raises(InputError, match=THREADS_ENV):
        default_threads()


def test_pool_workers_share_the_cores(monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    got = map_tasks(_threads_in_worker, [0, 1], workers=2)
    assert got == [max(1, local_cores() // 2)] * 2
    assert map_tasks(_threads_in_worker, [0], workers=1) == [local_cores()]      # in this process: all cores
