import anyio
import pytest

from gateway.catalog.catalog import Catalog
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.mounts import Mount
from gateway.frontend.hub import Hub
from gateway.frontend.service import SERVER_INFO, PromptService
from gateway.frontend.session import ClientSession
from gateway.protocol.errors import InvalidParams, InvalidRequest, MethodNotFound, UnsupportedVersion
from gateway.protocol.jsonrpc import Notification, Request
from gateway.protocol.modern import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY, SERVER_INFO_KEY, SUBSCRIPTION_ID_KEY
from gateway.testing import FakePromptSource

pytestmark = pytest.mark.anyio


class Announced(list[int]):
    def append_one(self, _lists: object) -> None:
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


MODERN = {"_meta": {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: {}}}


def modern_request(request_id: int, method: str, **params: object) -> Request:
    return Request(request_id, method, {**MODERN, **params})


async def test_modern_requests_need_no_handshake_and_carry_result_type_and_identity() -> None:
    s = session()
    discovered = await s.handle_request(modern_request(1, "server/discover"), no_notify)
    assert discovered["supportedVersions"] == ["2026-07-28"]
    assert discovered["capabilities"] == {"prompts": {"listChanged": True}, "completions": {}}
    assert discovered["resultType"] == "complete"
    assert discovered["_meta"][SERVER_INFO_KEY]["name"] == "mcp-prompt-gateway"
    assert (discovered["ttlMs"], discovered["cacheScope"]) == (60_000, "public")
    listing = await s.handle_request(modern_request(2, "prompts/list"), no_notify)
    assert [p["name"] for p in listing["prompts"]] == ["a__p00000", "a__p00001"]
    assert listing["resultType"] == "complete"
    assert s.state == "new"  # a stateless request leaves no session state behind
    with pytest.raises(MethodNotFound, match="ping \\(removed in 2026-07-28\\)"):
        await s.handle_request(modern_request(3, "ping"), no_notify)
    future = {"_meta": {**MODERN["_meta"], PROTOCOL_VERSION_KEY: "2030-01-01"}}
    with pytest.raises(UnsupportedVersion):
        await s.handle_request(Request(4, "prompts/list", future), no_notify)


async def test_a_listen_stream_is_acknowledged_tagged_and_ended_gracefully() -> None:
    hub = Hub()
    catalog = Catalog(
        [Mount(FakePromptSource.numbered("a", 1), prefix="a__")], codec=CursorCodec(b"k" * 32), generation="g"
    )
    service = PromptService(lambda: catalog, completions=lambda: False, hub=hub)
    legacy_announced: list[int] = []
    s = ClientSession(service, on_list_changed=lambda _lists: legacy_announced.append(1))
    hub.add(s)
    sent: list[tuple[str, dict[str, object] | None]] = []
    acknowledged = anyio.Event()

    async def notify(method: str, params: dict[str, object] | None) -> None:
        sent.append((method, params))
        acknowledged.set()

    outcome: dict[str, object] = {}

    async def listen() -> None:
        request = modern_request(
            7, "subscriptions/listen", notifications={"promptsListChanged": True, "toolsListChanged": True}
        )
        outcome.update(await s.handle_request(request, notify))

    async with anyio.create_task_group() as tg:
        tg.start_soon(listen)
        await acknowledged.wait()
        assert hub.broadcast_list_changed() == 2
        hub.close_subscriptions()
    tag = {SUBSCRIPTION_ID_KEY: 7}
    assert sent == [
        ("notifications/subscriptions/acknowledged", {"_meta": tag, "notifications": {"promptsListChanged": True}}),
        ("notifications/prompts/list_changed", {"_meta": tag}),
    ]
    assert outcome["resultType"] == "complete"
    assert outcome["_meta"] == {**tag, SERVER_INFO_KEY: SERVER_INFO}
    assert legacy_announced == []  # a client that never initialized gets no unsolicited notification
    assert len(hub) == 1  # the subscription left the hub


async def test_a_listen_filter_must_be_an_object() -> None:
    with pytest.raises(InvalidParams, match="notifications must be an object"):
        await session().handle_request(modern_request(1, "subscriptions/listen"), no_notify)
