"""The operator page (``[server.admin]``): what the gateway sees, read-only. Server-rendered HTML (Jinja2,
autoescaped) with a little plain JavaScript from the package itself, under a Content-Security-Policy that
allows nothing else; upstream states, the catalog and new audit events pushed as server-sent events
as they change; the explain form answered by the same explanations as ``prompt-gateway explain``.

Who may look: with no ``token``, loopback clients only; with one, whoever presents it (``Authorization:
Bearer``, or once through the sign-in form, which keeps it in an HttpOnly, SameSite=Strict cookie
scoped to the page). Tokens and secrets are never rendered.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from importlib import resources
from typing import Any, Protocol

import anyio
import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from gateway import __version__
from gateway.config import AdminSettings, is_loopback
from gateway.frontend.http.messages import sse_response

COOKIE = "prompt_gateway_admin"
COOKIE_MAX_AGE_S = 12 * 3600
CLOCK_SKEW_S = 60
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
PUSH_INTERVAL_S = 0.5


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


def cookie_value(token: str, issued: int) -> str:
    """What the sign-in cookie holds: when it was issued and a MAC of that under the token, never the
    token (a cookie store, a proxy's log or a browser's devtools then never show it). Changing the token
    ends every sign-in; so does the cookie's age, checked here and not only by the browser's Max-Age (a
    copied cookie of a constant value worked until the token changed)."""
    mac = hmac.new(token.encode(), f"prompt-gateway operator page|{issued}".encode(), hashlib.sha256).hexdigest()
    return f"{issued}.{mac}"


def cookie_valid(cookie: str, token: str, now: float) -> bool:
    """Whether ``cookie`` was issued for ``token`` at most ``COOKIE_MAX_AGE_S`` before ``now``."""
    issued_text = cookie.partition(".")[0]
    if not issued_text.isascii() or not issued_text.isdigit() or len(issued_text) > 12:
        return False
    issued = int(issued_text)
    if not now - COOKIE_MAX_AGE_S <= issued <= now + CLOCK_SKEW_S:
        return False
    return hmac.compare_digest(cookie.encode(), cookie_value(token, issued).encode())


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
        scopes_of: Callable[[str], Awaitable[frozenset[str] | None]] | None = None,
        host_refusal: Callable[[Request], Response | None] = lambda _: None,
    ) -> None:
        self._settings = settings
        self._view = view
        self._scopes_of = scopes_of
        self._host_refusal = host_refusal
        self._closing = anyio.Event()
        self._base = settings.path.rstrip("/")
        self._templates = _environment()

    def routes(self) -> list[Route]:
        base = self._base
        return [
            Route(base, self._guarded(self._page), methods=["GET"]),
            Route(f"{base}/events", self._guarded(self._events), methods=["GET"]),
            Route(f"{base}/explain", self._guarded(self._explain), methods=["GET"]),
            Route(f"{base}/sign-in", self._sign_in, methods=["POST"]),
            Route(f"{base}/sign-out", self._sign_out, methods=["POST"]),
            Route(f"{base}/static/{{name}}", self._static, methods=["GET"]),
        ]

    # ---- who may look --------------------------------------------------------------------------

    async def _refusal(self, request: Request) -> Response | None:
        """None when the request may see the page, else the answer that refuses it."""
        refused = self._host_refusal(request)  # the front end's Host check: a rebound DNS name is refused
        if refused is not None:  # (its answer is a JSON-RPC error, for MCP clients: a person reads this one)
            message = "Misdirected Request: the gateway does not answer to this Host"
            return _secured(PlainTextResponse(message, status_code=refused.status_code))
        if _from_another_origin(request):
            return _secured(PlainTextResponse("Forbidden: another origin", status_code=403))
        token, scope = self._settings.token, self._settings.scope
        if token is None and scope is None:
            loopback_name = _is_loopback_name(request.headers.get("host", ""))
            if request.client is not None and is_loopback(request.client.host) and loopback_name:
                return None
            return _secured(PlainTextResponse("Forbidden: the operator page answers loopback only", status_code=403))
        cookie = request.cookies.get(COOKIE)
        if cookie is not None and token is not None and cookie_valid(cookie[:200], token, time.time()):
            return None
        scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
        presented = bearer.strip() if scheme.lower() == "bearer" else ""
        if token is not None and hmac.compare_digest(presented.encode(), token.encode()):
            return None
        if scope is not None and presented and self._scopes_of is not None:
            scopes = await self._scopes_of(presented)
            if scopes is not None and scope in scopes:
                return None
            if scopes is not None:
                return _secured(PlainTextResponse(f"Forbidden: the token lacks the scope {scope}", status_code=403))
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
        if self._settings.token is None:  # (an access token is presented as a bearer, never typed in)
            return _secured(PlainTextResponse("Not Found", status_code=404))
        if _from_another_origin(request):
            return _secured(PlainTextResponse("Forbidden: another origin", status_code=403))
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            return _secured(PlainTextResponse("Payload Too Large", status_code=413))
        form = await request.form()
        token = form.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self._settings.token.encode()):
            return self._sign_in_page("That is not the operator page's token.", 401)
        answer = RedirectResponse(self._base, status_code=303)
        secure = request.url.scheme == "https"
        answer.set_cookie(
            COOKIE,
            cookie_value(self._settings.token, int(time.time())),
            max_age=COOKIE_MAX_AGE_S,
            httponly=True,
            samesite="strict",
            secure=secure,
            path=self._base,
        )
        return _secured(answer)

    async def _sign_out(self, request: Request) -> Response:
        """Forget the sign-in in this browser (the cookie's own age ends it everywhere else)."""
        if _from_another_origin(request):
            return _secured(PlainTextResponse("Forbidden: another origin", status_code=403))
        answer = RedirectResponse(self._base, status_code=303)
        answer.delete_cookie(COOKIE, path=self._base, httponly=True, samesite="strict")
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
        an audit event per request)."""
        view = self._view

        async def changes() -> AsyncIterator[bytes]:
            yield _event("upstreams", view.upstreams())
            shown = view.versions()
            while not self._closing.is_set():
                if view.versions() == shown:
                    await self._until_closing(view.changed())
                    await self._until_closing(anyio.sleep(PUSH_INTERVAL_S))  # changes close together: one push
                    if self._closing.is_set():
                        return
                states, audit = view.versions()
                if states != shown[0]:  # the catalog first: it reads the lists whose counts the rows show
                    yield _event("catalog", await view.prompts())
                yield _event("upstreams", view.upstreams())  # a request served moves latencies too
                if audit != shown[1]:
                    yield _event("audit", view.audit_events())
                shown = (states, audit)

        return sse_response(changes())

    async def _until_closing(self, waited: Awaitable[None]) -> None:
        """``waited``, unless the gateway starts stopping first."""
        async with anyio.create_task_group() as tg:

            async def closing() -> None:
                await self._closing.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(closing)
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
