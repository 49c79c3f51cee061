"""An HTTP server that answers every request with one status (503 by default), as a proxy in front of a
server being deployed does: ``python -m tests.servers.unavailable PORT [STATUS]``. Prints its port once
it listens."""

from __future__ import annotations

import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gateway import start_up

start_up.resume()


class Unavailable(BaseHTTPRequestHandler):
    status = 503

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body = b"<html>Service Unavailable</html>"
        self.send_response(self.status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    Unavailable.status = int(sys.argv[2]) if len(sys.argv) > 2 else 503
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Unavailable)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
