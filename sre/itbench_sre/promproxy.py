"""The shop's Prometheus HTTP API for agents: read-only, on a port of the trial's block.

A thread of the harness relays the query endpoints standard PromQL clients use to the
environment's Prometheus and refuses everything else: the admin API (``/api/v1/admin/...``),
the lifecycle endpoints (``/-/reload``, ``/-/quit``), and the status and target pages that
describe the server's own files and flags; the rules it serves without their file paths
(Prometheus runs with neither the admin API nor the lifecycle
endpoints enabled, so they are refused twice). Requests are capped in size and concurrency.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Paths a client may read (GET, or POST with form-encoded parameters where the API allows).
ALLOWED = re.compile(
    r"/api/v1/(query|query_range|query_exemplars|series|labels|label/[^/]+/values|metadata|"
    r"targets/metadata|alerts|rules|format_query|status/buildinfo)"
)
MAX_BODY = 64 * 1024
MAX_CONCURRENT = 16
#: Seconds a client may take to send its request (each read of it) before the relay hangs up.
READ_TIMEOUT = 10.0


def _without_files(data: bytes) -> bytes:
    """The rules answer without the rule files' paths (they name the harness's directories)."""
    try:
        body = json.loads(data)
        for group in body.get("data", {}).get("groups", []):
            group.pop("file", None)
        return json.dumps(body).encode()
    except (ValueError, AttributeError):
        return b'{"status":"error","error":"unreadable answer"}'


def _length(header: str | None) -> int | None:
    """A request's ``Content-Length`` (0 when absent), or None when it is not a byte count.

    A negative length would make the body be read to the end of the connection, past
    :data:`MAX_BODY`.
    """
    text = (header or "0").strip()
    return int(text) if text.isascii() and text.isdigit() else None


class PrometheusProxy:
    """A read-only relay to one Prometheus.

    Args:
        listen_port: Port of 127.0.0.1 to serve on.
        upstream_port: Port of the environment's Prometheus on 127.0.0.1.
        read_timeout: Seconds each read of a request may wait: a client that opens
            connections and sends nothing holds none of the harness's threads for longer.
    """

    def __init__(
        self, listen_port: int, upstream_port: int, read_timeout: float = READ_TIMEOUT
    ) -> None:
        self.listen_port = listen_port
        self.read_timeout = read_timeout
        self.upstream = f"http://127.0.0.1:{upstream_port}"
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The address agents use."""
        return f"http://127.0.0.1:{self.listen_port}"

    def start(self) -> None:
        """Serve in a daemon thread of the harness."""
        self._server = ThreadingHTTPServer(("127.0.0.1", self.listen_port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        if self._server is not None:
            with contextlib.suppress(OSError):
                self._server.shutdown()
                self._server.server_close()
            self._server = None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"
            timeout = proxy.read_timeout

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

            def _send(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(data)

            def _refuse(self, status: int, why: str) -> None:
                self._send(
                    status, f'{{"status":"error","errorType":"forbidden","error":"{why}"}}'.encode()
                )

            def _relay(self, method: str) -> None:
                path = self.path.split("?", 1)[0]
                if not ALLOWED.fullmatch(path):
                    self._refuse(403, "this endpoint is not served: the API is read-only")
                    return
                body = None
                if method == "POST":
                    length = _length(self.headers.get("Content-Length"))
                    if length is None:
                        self._refuse(400, "Content-Length must be a number of bytes")
                        return
                    if length > MAX_BODY:
                        self._refuse(413, "request too large")
                        return
                    body = self.rfile.read(length)
                if not proxy._slots.acquire(timeout=5):
                    self._refuse(503, "too many requests at once")
                    return
                try:
                    req = urllib.request.Request(
                        proxy.upstream + self.path, data=body, method=method
                    )
                    if body is not None:
                        req.add_header("Content-Type", "application/x-www-form-urlencoded")
                    try:
                        with urllib.request.urlopen(req, timeout=30) as resp:
                            status, data = resp.status, resp.read()
                    except urllib.error.HTTPError as exc:
                        status, data = exc.code, exc.read()
                    except OSError:
                        self._refuse(502, "prometheus unreachable")
                        return
                finally:
                    proxy._slots.release()
                if path == "/api/v1/rules" and status == 200:
                    data = _without_files(data)
                self._send(status, data)

            def do_GET(self) -> None:  # noqa: N802
                self._relay("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._relay("POST")

            def do_PUT(self) -> None:  # noqa: N802
                self._refuse(405, "read-only")

            def do_DELETE(self) -> None:  # noqa: N802
                self._refuse(405, "read-only")

        return Handler
