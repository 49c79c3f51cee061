"""A prompt server that starts a child process of its own (as servers wrapping a tool or a language
runtime do) and records the child's pid in ``SPAWNER_PIDS``. ``SPAWNER_EXIT_AFTER`` = N makes it exit
after answering N requests (a crash loop when N is small)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.servers.old import answer


def main() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
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
