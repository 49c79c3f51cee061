"""A prompt server that starts a child process of its own (as servers wrapping a tool or a language
runtime do) and records the child's pid in ``SPAWNER_PIDS``. ``SPAWNER_EXIT_AFTER`` = N makes it exit
after answering N requests (a crash loop when N is small). ``SPAWNER_DAEMON`` = ``keep-env`` starts the
child as a daemon instead (double fork and ``setsid``: out of the server's process group), ``clean-env``
as one that also clears its environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from gateway import start_up
from tests.servers.old import answer

start_up.resume()

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def daemonize(pids_path: str, *, clean_env: bool) -> None:
    """The classic daemon: fork, setsid, fork again; the grandchild runs on. Its pid is recorded by the
    child between them, before the server goes on: recorded by the grandchild itself, it could still be
    missing when the server had answered (a test that read it then failed, now and then, under load)."""
    if os.fork() == 0:
        os.setsid()
        grandchild = os.fork()
        if grandchild == 0:
            os.execve(SLEEPER[0], SLEEPER, {} if clean_env else dict(os.environ))  # noqa: S606 - the test's own sleeper
        with open(pids_path, "a") as pids:
            pids.write(f"{grandchild}\n")
        os._exit(0)
    os.wait()


def main() -> None:
    daemon = os.environ.get("SPAWNER_DAEMON")
    if daemon:
        daemonize(os.environ["SPAWNER_PIDS"], clean_env=daemon == "clean-env")
    else:
        child = subprocess.Popen(SLEEPER)
        with open(os.environ["SPAWNER_PIDS"], "a") as pids:
            pids.write(f"{child.pid}\n")
    exit_after = int(os.environ.get("SPAWNER_EXIT_AFTER", "0"))
    answered = 0
    for line in sys.stdin:
        message = json.loads(line)
        if "id" in message and "method" in message:
            reply = answer(message["id"], message["method"], message.get("params") or {})
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}) + "\n")
            sys.stdout.flush()
            answered += 1
            if answered == exit_after:
                os._exit(3)  # a crash: the child is left behind


if __name__ == "__main__":
    main()
