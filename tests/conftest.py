import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first (marked ``longest``): with several workers, one long test started last
    would end the run alone, long after the others."""
    items.sort(key=lambda item: item.get_closest_marker("longest") is None)  # stable: the rest keep their order
