"""A server that starts only when the test lets it: ``python -m tests.servers.gated FIFO COMMAND...`` opens
the named pipe FIFO for reading, which blocks until the test opens it for writing, then becomes COMMAND.
The gateway sees an upstream still starting for as long as the test wants, and the test knows for sure
what happened before the server was even allowed to run (an order of events, not a timing)."""

from __future__ import annotations

import os
import sys

from gateway import start_up

start_up.resume()


def main() -> None:
    fifo, *command = sys.argv[1:]
    os.close(os.open(fifo, os.O_RDONLY))
    os.execvp(command[0], command)  # noqa: S606 - the test's own command


if __name__ == "__main__":
    main()
