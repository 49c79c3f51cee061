from pathlib import Path

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _a_cache_of_its_own(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's gateways remember what they learn across runs (sources/era_memory.py) in a folder of
    the test's own: never the machine's ~/.cache, and never what another test taught them."""
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first (marked ``longest``): with several workers, one long test started last
    would end the run alone, long after the others."""
    items.sort(key=lambda item: item.get_closest_marker("longest") is None)  # stable: the rest keep their order
