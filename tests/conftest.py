import compileall
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis's per-example deadline (200 ms) and its "too slow" health check are timings: on a shared
# machine with its cores oversubscribed one example of a property test over claims took longer and
# failed a run that was otherwise green. What a property test proves does not depend on its speed.
settings.register_profile("shared-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("shared-machine")


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


def pytest_configure(config: pytest.Config) -> None:
    """Compile the project's modules to bytecode once, before any worker starts. The suite starts some
    460 gateway processes; where the machine sets ``PYTHONDONTWRITEBYTECODE`` (this one does) Python
    never caches what it compiles, and each of them compiled the gateway's ~140 modules from source
    again: a third of every start. Cached bytecode is still read with that variable set."""
    if hasattr(config, "workerinput"):
        return  # a worker: the controller has done it
    root = Path(__file__).resolve().parent.parent
    for folder in ("gateway", "tests", "bench"):
        compileall.compile_dir(root / folder, quiet=2)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first (marked ``longest``): with several workers, one long test started last
    would end the run alone, long after the others."""
    items.sort(key=lambda item: item.get_closest_marker("longest") is None)  # stable: the rest keep their order
