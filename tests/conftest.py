import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Each test session uses its own asset cache, so tests never read a developer's cache."""
    d = tmp_path_factory.getbasetemp() / "cache"
    d.mkdir(exist_ok=True)
    monkeypatch.setenv("IMPACTSOUND_CACHE", str(d))
    yield
