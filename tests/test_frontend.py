import pytest

from gateway.catalog import Catalog, Mount
from gateway.cursor import CursorCodec
from gateway.errors import InvalidRequest, MethodNotFound
from gateway.frontend import ClientSession, Hub, PromptService
from gateway.protocol.jsonrpc import Notification, Request
from gateway.testing import FakePromptSource

pytestmark = pytest.mark.anyio


class Announced(list[int]):
    def append_one(self) -> None:
        self.append(1)


announced = Announced()


async def no_notify(method: str, params: object) -> None:
    raise AssertionError("no notification expected")


def session(completions: bool = True) -> ClientSession:
    catalog = Catalog(
        [Mount(FakePromptSource.numbered("a", 2), prefix="a__")], codec=CursorCodec(b"k" * 32), generation="g"
    )
    service = PromptService(lambda: catalog, completions=lambda: completions, hub=Hub())
    return ClientSession(service, on_list_changed=announced.append_one)


INIT = Request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c"}})


async def test_states_and_capabilities() -> None:
    s = session()
    with pytest.raises(InvalidRequest, match="prompts/list before initialize"):
        await s.handle_request(Request(1, "prompts/list"), no_notify)
    result = await s.handle_request(INIT, no_notify)
    assert result["protocolVersion"] == "2025-06-18"
    assert result["capabilities"] == {"prompts": {"listChanged": True}, "completions": {}}
    assert s.state == "initializing"
    await s.handle_notification(Notification("notifications/initialized"))
    assert s.state == "ready"
    with pytest.raises(InvalidRequest, match="already initialized"):
        await s.handle_request(INIT, no_notify)
    with pytest.raises(MethodNotFound, match="Method not found: resources/list"):
        await s.handle_request(Request(2, "resources/list"), no_notify)
    assert len((await s.handle_request(Request(3, "prompts/list"), no_notify))["prompts"]) == 2


async def test_completion_without_any_completing_upstream_is_method_not_found() -> None:
    s = session(completions=False)
    result = await s.handle_request(INIT, no_notify)
    assert "completions" not in result["capabilities"]
    with pytest.raises(MethodNotFound):
        await s.handle_request(Request(2, "completion/complete", {}), no_notify)


async def test_hub_announces_only_to_initialized_sessions() -> None:
    hub, fresh, joined = Hub(), session(), session()
    await joined.handle_request(INIT, no_notify)
    hub.add(fresh)
    hub.add(joined)
    announced.clear()
    assert hub.broadcast_list_changed() == 2
    assert announced == [1]  # the session that has not initialized is not told
