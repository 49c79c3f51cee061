"""An SDK prompt server that does not exit when its stdin ends, as mcp-server-sqlite does: it runs on
until it is signalled. At start it records, one per line in ``STUBBORN_PIDS``, its own pid, a child's
(in its process group) and a daemon's (double fork and ``setsid``: out of the group, keeping its
environment). ``STUBBORN_IGNORE_TERM`` = 1 makes it and its child ignore SIGTERM too: only SIGKILL ends
them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import mcp.types as t
from mcp.server.lowlevel.server import Server

from gateway import start_up
from tests.servers.common import run_stdio, text_result
from tests.servers.spawner import SLEEPER, daemonize

start_up.resume()

IGNORING_SLEEPER = [
    sys.executable,
    "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)",
]


async def list_prompts(ctx: object, params: t.PaginatedRequestParams | None) -> t.ListPromptsResult:
    return t.ListPromptsResult(prompts=[t.Prompt(name="stay", description="answers with the server's pid")])


async def get_prompt(ctx: object, params: t.GetPromptRequestParams) -> t.GetPromptResult:
    return text_result(str(os.getpid()))


def main() -> None:
    ignore_term = os.environ.get("STUBBORN_IGNORE_TERM") == "1"
    pids_path = os.environ["STUBBORN_PIDS"]
    child = subprocess.Popen(IGNORING_SLEEPER if ignore_term else SLEEPER)
    with open(pids_path, "a") as pids:
        pids.write(f"{os.getpid()}\n{child.pid}\n")
    daemonize(pids_path, clean_env=False)
    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    run_stdio(Server("stubborn", on_list_prompts=list_prompts, on_get_prompt=get_prompt))
    threading.Event().wait()  # what keeps sqlite running: its stdin has ended, it has not


if __name__ == "__main__":
    main()
