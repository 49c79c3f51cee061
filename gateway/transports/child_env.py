"""What a child process (a stdio upstream) inherits from the gateway's environment.

A minimal environment, not the whole parent one: tokens in the gateway's environment stay out unless
the config names them. But what lets a program reach the network the way this machine does is in:
where the trusted CA certificates are (behind a TLS-inspecting proxy, ``uvx`` and ``npx`` fail with
``invalid peer certificate: UnknownIssuer`` without it), which proxy to use, and where the package
caches are (without them ``uvx``/``npx`` download everything again at each start). An MCP client
launches the gateway with a minimal environment of its own; a variable it did not pass is simply not
set for the upstream either, which is never an error (unlike ``${VAR}`` in the config).

Proxy URLs may carry credentials (``http://user:password@proxy:3128``): the child needs them to work,
so they are passed, but the environment is never logged.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

BASICS = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ")
"""Who and where the process is, and how it reads text."""

TRUST = (
    "SSL_CERT_FILE",  # OpenSSL and everything built on it (Python's ssl, uv, curl, git)
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",  # Python requests (and pip)
    "CURL_CA_BUNDLE",  # curl, and requests too
    "PIP_CERT",
    "UV_NATIVE_TLS",  # uv: trust the system's store instead of its bundled roots
    "GIT_SSL_CAINFO",  # uvx/npx installing from a git URL
    "NODE_EXTRA_CA_CERTS",  # Node.js, npm and npx
    "NODE_USE_SYSTEM_CA",  # Node.js: trust the system's store (recent versions)
    "NPM_CONFIG_CAFILE",
    "npm_config_cafile",
    "DENO_CERT",
)
"""Which certificate authorities to trust."""

PROXIES = (
    "HTTP_PROXY",
    "http_proxy",  # curl reads this one in lower case only; most programs read both
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
    "NODE_USE_ENV_PROXY",  # Node.js's own fetch follows HTTP(S)_PROXY only with this set
)
"""Which proxy to go through, and for which hosts not."""

CACHES = (
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",  # uv's installed tools and Pythons
    "XDG_STATE_HOME",
    "UV_CACHE_DIR",
    "UV_TOOL_DIR",
    "UV_PYTHON_INSTALL_DIR",
    "PIP_CACHE_DIR",
    "NPM_CONFIG_CACHE",
    "npm_config_cache",
)
"""Where package managers keep what they downloaded: a warm cache is a start in a second, not ten."""

INHERITED = BASICS + TRUST + PROXIES + CACHES
"""Every variable a child keeps from the gateway's environment, where it is set there."""


def child_environment(extra: Mapping[str, str], parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """The inherited variables of ``parent`` (the gateway's environment), plus the configured ones.

    The gateway's own interpreter directory leads PATH, so ``python3`` and console scripts installed
    beside the gateway resolve to the gateway's environment, as they would in an activated venv.
    """
    parent = os.environ if parent is None else parent
    env = {key: parent[key] for key in INHERITED if key in parent}
    own_bin = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join(p for p in (own_bin, env.get("PATH", os.defpath)) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def withhold_inherited_descriptors() -> int:
    """Mark every descriptor above stderr that the gateway was started with as close-on-exec, so that its
    upstreams do not inherit them; returns how many were inheritable.

    Python's own subprocess closes them (``close_fds``), but uvloop, which ``serve`` runs on, starts
    children through libuv, which has none: whatever the client that started the gateway left open
    (Node's children inherit the same way) reached every stdio upstream, and through it every process
    the upstream started, holding pipes and files of the client's open for their lifetime. Called once,
    before anything is opened: the gateway's own descriptors are close-on-exec already (PEP 446)."""
    withheld = 0
    try:
        opened = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc (macOS): the usual range, tried one by one
        opened = list(range(3, 256))
    for fd in opened:
        if fd <= 2:
            continue
        try:
            if os.get_inheritable(fd):
                os.set_inheritable(fd, False)
                withheld += 1
        except OSError:  # closed meanwhile (the listing's own descriptor) or never open
            continue
    return withheld
