"""The operator page (``[server.admin]``): what the gateway sees, read-only. Server-rendered HTML (Jinja2,
autoescaped) with a little plain JavaScript from the package itself, under a Content-Security-Policy that
allows nothing else; upstream states, the catalog and new audit events pushed as server-sent events
as they change; the explain form answered by the same explanations as ``prompt-gateway explain``.

Who may look: with no ``token``, loopback clients only; with one, whoever presents it (``Authorization:
Bearer``, or once through the sign-in form, which keeps it in an HttpOnly, SameSite=Strict cookie
scoped to the page). Tokens and secrets are never rendered.
"""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from importlib import resources
from typing import Any, Protocol
from urllib.parse import parse_qsl

import anyio
import jinja2
import structlog
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from gateway import __version__
from gateway.cluster.replicas import NoCluster
from gateway.config import AdminSettings, is_loopback
from gateway.frontend.admin.sign_ins import (
    COOKIE_MAX_AGE_S,
    SharedSignOuts,
    SignInFailures,
    SignOuts,
    cookie_value,
    new_sign_in,
    sign_in_of,
)
from gateway.frontend.http.credentials_expiry import ending_at
from gateway.frontend.http.messages import bearer_token, read_body, sse_response
from gateway.identity.principal import Grant

log = structlog.get_logger("gateway.admin")

COOKIE = "prompt_gateway_admin"
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # (no-referrer makes a browser send "Origin: null" with the sign-in form)
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
STATIC = {
    "admin.js": "text/javascript; charset=utf-8",
    "admin.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
SIGN_IN = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>prompt-gateway · sign in</title>
<link rel="stylesheet" href="{base}/static/admin.css"><link rel="icon" href="{base}/static/icon.svg">
</head><body><h1>prompt-gateway</h1>
<p>{message}</p><form method="post" action="{base}/sign-in"><label>admin token
<input type="password" name="token" autocomplete="off" required></label>
<button type="submit">sign in</button></form></body></html>"""
MAX_FORM_BYTES = 4096
"""The sign-in form's body at most (a token and its field name): a longer one is refused unread."""
PUSH_INTERVAL_S = 0.5
SIGN_IN_CHECK_S = 5.0
"""How often an open event stream asks whether the sign-in it was opened under still holds, with no
change to push (a sign-out on this replica ends its streams at once; one on another, by then)."""


class OperatorView(Protocol):
    """What the page shows, read from the running gateway (the composition root provides it)."""

    audit_enabled: bool

    def callers(self) -> list[tuple[str, str]]:
        """The explain form's choices: (value, label)."""

    def upstreams(self) -> list[dict[str, Any]]: ...

    async def prompts(self) -> list[dict[str, Any]]: ...

    async def explain(self, name: str, caller: str) -> tuple[int, str]: ...

    def audit_events(self) -> list[dict[str, Any]]: ...

    def versions(self) -> tuple[int, int]:
        """(upstream changes and reloads, audit events kept) so far: what changed since a page was sent."""

    async def changed(self) -> None:
        """Until an upstream's state or prompts change, the config is reloaded, or an audit event is kept."""


def _environment() -> jinja2.Environment:
    loader = jinja2.PackageLoader("gateway.frontend.admin", "templates")
    return jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined)


def _from_another_origin(request: Request) -> bool:
    """A browser's request made by another site's page (its Origin is not this page's host)."""
    origin = request.headers.get("origin")
    return origin is not None and origin.split("://", 1)[-1] != request.headers.get("host")


def _is_loopback_name(host_header: str) -> bool:
    """A ``Host`` header naming this machine (its port, if any, aside)."""
    return is_loopback(host_header if host_header.endswith("]") else host_header.rsplit(":", 1)[0])


class AdminPage:
    def __init__(
        self,
        settings: AdminSettings,
        view: OperatorView,
        grant_of: Callable[[str], Awaitable[Grant | None]] | None = None,
        host_refusal: Callable[[Request], Response | None] = lambda _: None,
        shared_sign_outs: SharedSignOuts | None = None,
    ) -> None:
        self._settings = settings
        self._view = view
        self._grant_of = grant_of
        self._host_refusal = host_refusal
        self._sign_outs = SignOuts(shared_sign_outs or NoCluster())
        self._failures = SignInFailures(settings.sign_in_failures) if settings.token is not None else None
        self._closing = anyio.Event()
        self._signed_out = anyio.Event()  # set (and replaced) on each sign-out here: streams look again
        self._base = settings.path.rstrip("/")
        self._templates = _environment()

    def routes(self) -> list[Route]:
        """Every route passes the same Host and Origin check first; all but the sign-in form, the
        sign-out and the static files then want someone allowed to look."""
        base, placed, guarded = self._base, self._placed, self._guarded
        return [
            Route(base, placed(guarded(self._page)), methods=["GET"]),
            Route(f"{base}/events", placed(guarded(self._events)), methods=["GET"]),
            Route(f"{base}/explain", placed(guarded(self._explain)), methods=["GET"]),
            Route(f"{base}/sign-in", placed(self._sign_in), methods=["POST"]),
            Route(f"{base}/sign-out", placed(self._sign_out), methods=["POST"]),
            Route(f"{base}/static/{{name}}", placed(self._static), methods=["GET"]),
        ]

    # ---- who may look --------------------------------------------------------------------------

    def _placed(self, handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        """``handler``, for requests to a Host the front end answers to (a rebound DNS name is refused)
        from no other site's page."""

        async def placed(request: Request) -> Response:
            refused = self._host_refusal(request)
            if refused is not None:  # (its answer is a JSON-RPC error, for MCP clients: a person reads this one)
                message = "Misdirected Request: the gateway does not answer to this Host"
                return _secured(PlainTextResponse(message, status_code=refused.status_code))
            if _from_another_origin(request):
                return _secured(PlainTextResponse("Forbidden: another origin", status_code=403))
            return await handler(request)

        return placed

    async def _refusal(self, request: Request) -> Response | None:
        """None when the request may see the page, else the answer that refuses it."""
        token, scope = self._settings.token, self._settings.scope
        if token is None and scope is None:
            loopback_name = _is_loopback_name(request.headers.get("host", ""))
            if request.client is not None and is_loopback(request.client.host) and loopback_name:
                return None
            return _secured(PlainTextResponse("Forbidden: the operator page answers loopback only", status_code=403))
        cookie = request.cookies.get(COOKIE)
        sign_in = sign_in_of(cookie, token, time.time()) if cookie is not None and token is not None else None
        if sign_in is not None and not await self._sign_outs.ended(sign_in):
            return None
        presented = bearer_token(request.headers.get("authorization"))
        if scope is not None and presented and self._grant_of is not None:  # first: a valid access token is
            grant = await self._grant_of(presented)  # no guess, and others' wrong ones never lock it out
            scopes = grant.scopes if grant is not None else None
            if scopes is not None and scope in scopes:
                return None
            if scopes is not None:
                return _secured(PlainTextResponse(f"Forbidden: the token lacks the scope {scope}", status_code=403))
        if token is not None and presented:  # counted as the form's sign-ins are (else guessing went on here)
            limited = await self._limited(request)
            if limited is not None:
                return limited
            if hmac.compare_digest(presented.encode(), token.encode()):
                return None
            await self._failed(request)  # neither an access token nor the page's token: a wrong one
        if token is None:
            message = f"Unauthorized: present an access token with the scope {scope} (Authorization: Bearer)"
            return _secured(PlainTextResponse(message, status_code=401, headers={"WWW-Authenticate": "Bearer"}))
        if request.url.path not in (self._base, self._base + "/"):  # the event stream, the form: no page to sign in on
            message = "Unauthorized: sign in on the operator page, or present its token (Authorization: Bearer)"
            return _secured(PlainTextResponse(message, status_code=401, headers={"WWW-Authenticate": "Bearer"}))
        return self._sign_in_page("Sign in with the operator page's token.", 401)

    def _guarded(self, handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def guarded(request: Request) -> Response:
            refusal = await self._refusal(request)
            return refusal if refusal is not None else _secured(await handler(request))

        return guarded

    def _sign_in_page(self, message: str, status: int) -> Response:
        html = SIGN_IN.format(base=self._base, message=message)
        return _secured(HTMLResponse(html, status_code=status, headers={"WWW-Authenticate": "Bearer"}))

    async def _sign_in(self, request: Request) -> Response:
        """The form's token, checked in constant time; wrong ones are counted per client address (the
        proxy's, unless ``[server] trusted_proxies`` names it) and past ``sign_in_failures`` refused."""
        token, failures = self._settings.token, self._failures
        if token is None or failures is None:  # (an access token is presented as a bearer, never typed in)
            return _secured(PlainTextResponse("Not Found", status_code=404))
        address = request.client.host if request.client is not None else ""
        limited = await self._limited(request)
        if limited is not None:
            return limited
        try:
            body = await read_body(request, MAX_FORM_BYTES)
        except ClientDisconnect:
            return Response(status_code=400)  # gone while sending it: nobody reads this
        if body is None:
            message = f"Payload Too Large: the sign-in form is at most {MAX_FORM_BYTES} bytes"
            return _secured(PlainTextResponse(message, status_code=413, headers={"Connection": "close"}))
        try:
            presented = dict(parse_qsl(body.decode("utf-8", "replace"), max_num_fields=4)).get("token", "")
        except ValueError:
            return _secured(PlainTextResponse("Bad Request: the sign-in form has one field, token", status_code=400))
        if not hmac.compare_digest(presented.encode(), token.encode()):
            await self._failed(request)
            return self._sign_in_page("That is not the operator page's token.", 401)
        log.info("admin_signed_in", client=address)
        answer = RedirectResponse(self._base, status_code=303)
        answer.set_cookie(
            COOKIE,
            cookie_value(token, new_sign_in(time.time())),
            max_age=COOKIE_MAX_AGE_S,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",  # reached over HTTPS (behind a trusted proxy: as it says)
            path=self._base,
        )
        return _secured(answer)

    async def _limited(self, request: Request) -> Response | None:
        """429 for an address past ``sign_in_failures`` wrong tokens (form or header alike), else None."""
        if self._failures is None:
            return None
        address = request.client.host if request.client is not None else ""
        retry_after = await self._failures.retry_after(address)
        if retry_after is None:
            return None
        log.warning("admin_sign_in_limited", client=address, retry_after_s=retry_after)
        message = f"Too Many Requests: too many wrong tokens from this address; try again in {retry_after} s"
        return _secured(PlainTextResponse(message, status_code=429, headers={"Retry-After": str(retry_after)}))

    async def _failed(self, request: Request) -> None:
        if self._failures is not None:
            address = request.client.host if request.client is not None else ""
            await self._failures.failed(address)
            log.warning("admin_sign_in_failed", client=address)

    async def _sign_out(self, request: Request) -> Response:
        """End the sign-in: its cookie is refused from now on, by every replica (and this browser forgets it)."""
        cookie, token = request.cookies.get(COOKIE), self._settings.token
        now = time.time()
        sign_in = sign_in_of(cookie, token, now) if cookie is not None and token is not None else None
        if sign_in is not None:
            await self._sign_outs.sign_out(sign_in, now)
            log.info("admin_signed_out", client=request.client.host if request.client is not None else "")
            self._signed_out.set()
            self._signed_out = anyio.Event()
        answer = RedirectResponse(self._base, status_code=303)
        secure = request.url.scheme == "https"
        answer.delete_cookie(COOKIE, path=self._base, httponly=True, samesite="strict", secure=secure)
        return _secured(answer)

    # ---- what it shows -------------------------------------------------------------------------

    async def _page(self, request: Request) -> Response:
        view = self._view
        prompts = await view.prompts()  # first: it reads the lists, whose counts the upstream rows show
        html = self._templates.get_template("admin.html").render(
            base=self._base,
            version=__version__,
            upstreams=view.upstreams(),
            prompts=prompts,
            callers=view.callers(),
            audit_enabled=view.audit_enabled,
            audit=view.audit_events(),
            signed_in=COOKIE in request.cookies,
        )
        return HTMLResponse(html)

    async def _events(self, request: Request) -> Response:
        """The upstreams' states at once, then what changes: states, the catalog (an upstream's prompts,
        a reload) and new audit events, each at most once per ``PUSH_INTERVAL_S`` (a busy gateway keeps
        an audit event per request). A stream opened under a sign-in ends with it: nothing is pushed
        once it is signed out (or its cookie has expired)."""
        view = self._view
        cookie, token = request.cookies.get(COOKIE), self._settings.token
        sign_in = sign_in_of(cookie, token, time.time()) if cookie is not None and token is not None else None
        if sign_in is not None and await self._sign_outs.ended(sign_in):
            sign_in = None  # (let in by its bearer token, which a sign-out does not end)

        # let in by an access token (not a sign-in): the stream ends when the token does, as the MCP ones do
        valid_until = await self._access_token_end(request) if sign_in is None else None

        async def signed_in() -> bool:
            if sign_in is None or cookie is None or token is None:
                return True
            return sign_in_of(cookie, token, time.time()) is not None and not await self._sign_outs.ended(sign_in)

        async def changes() -> AsyncGenerator[bytes]:
            yield _event("upstreams", view.upstreams())
            shown = view.versions()
            while not self._closing.is_set():
                if view.versions() == shown:
                    with anyio.move_on_after(SIGN_IN_CHECK_S if sign_in is not None else float("inf")):
                        await self._until_closing(view.changed(), self._signed_out)
                    if view.versions() == shown:  # a sign-out, or time to look again
                        if not await signed_in():
                            return
                        continue
                    await self._until_closing(anyio.sleep(PUSH_INTERVAL_S))  # changes close together: one push
                    if self._closing.is_set():
                        return
                if not await signed_in():
                    return
                states, audit = view.versions()
                if states != shown[0]:  # the catalog first: it reads the lists whose counts the rows show
                    yield _event("catalog", await view.prompts())
                yield _event("upstreams", view.upstreams())  # a request served moves latencies too
                if audit != shown[1]:
                    yield _event("audit", view.audit_events())
                shown = (states, audit)

        return sse_response(ending_at(changes(), valid_until))

    async def _access_token_end(self, request: Request) -> float | None:
        """Until when the request's access token holds, where it carries one with the page's scope (None:
        let in otherwise, by the page's own token or on loopback, which do not end)."""
        scope, presented = self._settings.scope, bearer_token(request.headers.get("authorization"))
        if scope is None or not presented or self._grant_of is None:
            return None
        grant = await self._grant_of(presented)
        return grant.valid_until if grant is not None and scope in grant.scopes else None

    async def _until_closing(self, waited: Awaitable[None], *or_until: anyio.Event) -> None:
        """``waited``, unless the gateway starts stopping first (or one of ``or_until`` is set)."""
        async with anyio.create_task_group() as tg:

            async def until(event: anyio.Event) -> None:
                await event.wait()
                tg.cancel_scope.cancel()

            for event in (self._closing, *or_until):
                tg.start_soon(until, event)
            await waited
            tg.cancel_scope.cancel()

    def close(self) -> None:
        """End the open event streams (the gateway is stopping: they must not hold up its shutdown)."""
        self._closing.set()

    async def _explain(self, request: Request) -> Response:
        name = request.query_params.get("name", "")[:512]
        caller = request.query_params.get("caller", "")[:200]
        if not name:
            return PlainTextResponse("Bad Request: name the prompt", status_code=400)
        status, text = await self._view.explain(name, caller)
        return PlainTextResponse(text, status_code=status)

    async def _static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return _secured(PlainTextResponse("Not Found", status_code=404))
        data = resources.files("gateway.frontend.admin").joinpath("static").joinpath(name).read_bytes()
        return _secured(Response(data, media_type=STATIC[name]))


def _event(name: str, data: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _secured(response: Response, headers: Mapping[str, str] = SECURITY_HEADERS) -> Response:
    response.headers.update(headers)
    return response
