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
#: (~1 min on 2 cores), so under pytest-xdist with ``--dist loadgroup`` (the Makefile's test command) they all run
#: on one worker and the compile is paid once per run, not once per worker.
_BEMPP_FILES = ("test_bem.py", "test_bem_fallback.py", "test_transfer_cli.py", "test_shell_ffat.py",
                "test_shell_screen.py")
#: test files that render shells: the shell render kernels are compiled per process (not cacheable: they call a
#: parallel kernel, sources/shell/_render_kernel.py), ~15-20 s each time, so these run on one worker too
_SHELL_RENDER_FILES = ("test_shell_source.py",)


class _BemppGroup:
    """``--dist loadgroup`` with the bempp-cl files as one group. (pytest-xdist 3.8 marks a group by renaming each
    test's node id, which pytest 9 no longer allows, so ``xdist_group`` marks are not seen: the grouping is done
    here, in the scheduler, instead.) Registered only where pytest-xdist is (its hook is unknown elsewhere)."""

    @staticmethod
    def pytest_xdist_make_scheduler(config, log):
        if config.getvalue("dist") != "loadgroup":
            return None
        from xdist.scheduler import LoadScopeScheduling

        class _Groups(LoadScopeScheduling):
            def _split_scope(self, nodeid):
                name = nodeid.split("::")[0].rsplit("/", 1)[-1]
                if name in _BEMPP_FILES:
                    return "bempp"
                return "shell-render" if name in _SHELL_RENDER_FILES else nodeid

        return _Groups(config, log)


def pytest_configure(config):
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_BemppGroup(), "impactsound-bempp-group")
