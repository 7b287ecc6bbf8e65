import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Each test session uses its own asset cache, so tests never read a developer's cache. Parallel workers
    (pytest -n, pytest-xdist) share one: the asset store's locks and atomic writes make each asset computed once."""
    import os
    base = tmp_path_factory.getbasetemp()
    d = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "cache"
    d.mkdir(exist_ok=True)
    monkeypatch.setenv("IMPACTSOUND_CACHE", str(d))
    yield


@pytest.fixture(autouse=True)
def _fresh_impactsound_logger():
    """Each test starts with the library logger as a program gets it: the CLI sets its level, handler and
    propagation for the process (right for a command line, not for the next test in the same worker)."""
    import logging
    log = logging.getLogger("impactsound")
    saved = (log.level, list(log.handlers), log.propagate)
    yield
    log.setLevel(saved[0])
    log.handlers[:] = saved[1]
    log.propagate = saved[2]


#: test files whose tests assemble bempp-cl operators. bempp-cl compiles its Numba kernels once per process
#: (~75 s on 2 cores), so under pytest-xdist (``--dist loadgroup``, the Makefile's test command) they all run on
#: one worker and the compile is paid once per run, not once per worker.
_BEMPP_FILES = ("test_bem.py", "test_bem_fallback.py", "test_transfer_cli.py", "test_shell_ffat.py",
                "test_shell_screen.py")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in _BEMPP_FILES:
            item.add_marker(pytest.mark.xdist_group("bempp"))
