"""A server whose starts fail before it reads anything, as ``uvx`` does while a package's download is
refused (a certificate error, a network blip): one line on stderr, exit status 1, until the file named by
``FLAKY_READY`` exists; from then on the official SDK's server of ``tests/servers/arguments.py``, which
speaks both eras. ``FLAKY_STARTS`` names a file that gets one line per start."""

from __future__ import annotations

import os
import sys
from pathlib import Path

with Path(os.environ["FLAKY_STARTS"]).open("a") as starts:
    starts.write("start\n")
if not Path(os.environ["FLAKY_READY"]).exists():
    print("error: Failed to fetch: invalid peer certificate: UnknownIssuer", file=sys.stderr, flush=True)
    sys.exit(1)

from tests.servers.arguments import server  # (only once the start is to succeed)
from tests.servers.common import run_stdio

run_stdio(server)
