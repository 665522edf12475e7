"""The shop's Prometheus HTTP API for agents: read-only, on a port of the trial's block.

A thread of the harness relays the query endpoints standard PromQL clients use to the
environment's Prometheus and refuses everything else: the admin API (``/api/v1/admin/...``),
the lifecycle endpoints (``/-/reload``, ``/-/quit``), and the status and target pages that
describe the server's own files and flags; the rules it serves without their file paths
(Prometheus runs with neither the admin API nor the lifecycle endpoints enabled, so they are
refused twice). Requests are capped in size.

The relay is the agent's only lane to Prometheus: the agent's tools read through it too
(:meth:`PrometheusProxy.read`). At most :data:`AGENT_SLOTS` of the agent's requests are at
Prometheus at once, and a slot is freed only when Prometheus answers: Prometheus may go on
evaluating a query whose client hung up, so a slot freed earlier would let the agent pile up
queries it no longer waits for. Prometheus runs :data:`SERVER_SLOTS` queries at once, so rule evaluation and
the evaluator, which reads Prometheus directly, always find a free slot. Queries are forwarded
with Prometheus's own ``timeout`` parameter (:data:`QUERY_TIMEOUT`, whatever the agent asked).
When the agent's turn ends, :meth:`PrometheusProxy.end_turn` stops the relay, refuses every
further request and closes the upstream connections of the requests in flight.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Paths a client may read (GET, or POST with form-encoded parameters where the API allows).
ALLOWED = re.compile(
    r"/api/v1/(query|query_range|query_exemplars|series|labels|label/[^/]+/values|metadata|"
    r"targets/metadata|alerts|rules|format_query|status/buildinfo)"
)
#: Paths whose evaluation Prometheus bounds by the ``timeout`` parameter.
TIMED = frozenset({"/api/v1/query", "/api/v1/query_range"})
MAX_BODY = 64 * 1024
#: The agent's requests at Prometheus at once (the relay and the agent's tools together).
AGENT_SLOTS = 4
#: Query slots of Prometheus the agent never gets: rule evaluation and the evaluator.
RESERVED_SLOTS = 2
#: Prometheus's ``--query.max-concurrency``.
SERVER_SLOTS = AGENT_SLOTS + RESERVED_SLOTS
#: The query limits the shop's Prometheus runs with: bounded queries cannot take it down (and
#: with it the trial's validity), and the relay's slots leave some to the harness.
QUERY_FLAGS = (
    "--query.max-samples=2000000",
    "--query.timeout=30s",
    f"--query.max-concurrency={SERVER_SLOTS}",
)
#: Seconds Prometheus may evaluate one of the agent's queries.
QUERY_TIMEOUT = 20.0
#: Seconds a request waits for a free slot before it is refused.
SLOT_WAIT = 5.0
#: Seconds a client may take to send its request (each read of it) before the relay hangs up.
READ_TIMEOUT = 10.0
_CHUNK = 65536


class Refused(Exception):
    """A request of the agent's that the relay does not forward (status and reason)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


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


def _form(text: str, timeout: float | None) -> str:
    """Form parameters without any ``timeout``, plus ``timeout`` when given.

    Prometheus reads the first ``timeout`` of the query string and the body together, so the
    agent's own are dropped wherever they are. Latin-1 keeps every byte as it came.
    """
    params = [
        (k, v)
        for k, v in urllib.parse.parse_qsl(text, keep_blank_values=True, encoding="latin-1")
        if k != "timeout"
    ]
    if timeout is not None:
        params.append(("timeout", f"{timeout:g}"))  # seconds
    return urllib.parse.urlencode(params, encoding="latin-1")


def timed_request(
    path: str, query: str, body: bytes | None, timeout: float
) -> tuple[str, bytes | None]:
    """The target and body forwarded for a request, with the relay's ``timeout`` on queries."""
    if path not in TIMED:
        return (f"{path}?{query}" if query else path), body
    if body is None:
        return f"{path}?{_form(query, timeout)}", None
    stripped = _form(query, None)
    target = f"{path}?{stripped}" if stripped else path
    return target, _form(body.decode("latin-1"), timeout).encode("latin-1")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # A client's parallel connections are not dropped at the door (the default is five).
    request_queue_size = 64


class PrometheusProxy:
    """The agent's read-only lane to one Prometheus.

    Args:
        listen_port: Port of 127.0.0.1 to serve on.
        upstream_port: Port of the environment's Prometheus on 127.0.0.1.
        read_timeout: Seconds each read of a request may wait: a client that opens
            connections and sends nothing holds none of the harness's threads for longer.
        query_timeout: Seconds Prometheus may evaluate one of the agent's queries.
    """

    def __init__(
        self,
        listen_port: int,
        upstream_port: int,
        read_timeout: float = READ_TIMEOUT,
        query_timeout: float = QUERY_TIMEOUT,
    ) -> None:
        self.listen_port = listen_port
        self.upstream_port = upstream_port
        self.read_timeout = read_timeout
        self.query_timeout = query_timeout
        self._slots = threading.BoundedSemaphore(AGENT_SLOTS)
        self._lock = threading.Lock()
        self._upstream: set[socket.socket] = set()
        self._waiting = 0
        self._ended = False
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The address agents use."""
        return f"http://127.0.0.1:{self.listen_port}"

    def start(self) -> None:
        """Serve in a daemon thread of the harness."""
        self._server = _Server(("127.0.0.1", self.listen_port), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def end_turn(self) -> list[str]:
        """Stop serving the agent: refuse what comes, abort what is in flight (idempotent).

        Returns:
            What the agent had left at Prometheus or waiting for a slot, empty if nothing.
        """
        with self._lock:
            self._ended = True
            upstream = list(self._upstream)
            waiting = self._waiting
        for sock in upstream:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.stop()
        left = len(upstream) + waiting
        return [f"{left} request(s) to Prometheus in flight"] if left else []

    @property
    def ended(self) -> bool:
        """Whether the agent's turn is over (nothing more is forwarded)."""
        return self._ended

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        if self._server is not None:
            with contextlib.suppress(OSError):
                self._server.shutdown()
                self._server.server_close()
            self._server = None

    # --- the lane -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _slot(self) -> Any:
        """Hold one of the agent's slots; :class:`Refused` once the turn is over or when busy."""
        with self._lock:
            if self._ended:
                raise Refused(503, "the agent's turn is over")
            self._waiting += 1
        try:
            got = self._slots.acquire(timeout=SLOT_WAIT)
        finally:
            with self._lock:
                self._waiting -= 1
        if not got:
            raise Refused(503, "too many requests at once")
        try:
            yield
        finally:
            self._slots.release()

    @contextlib.contextmanager
    def exchange(self, method: str, path: str, query: str = "", body: bytes | None = None) -> Any:
        """One request of the agent's at Prometheus; yields the upstream response.

        The slot and the upstream connection are held until the body has been read. No client
        timeout: the slot must stay taken while Prometheus still works on the query.

        Raises:
            Refused: the turn is over or every slot stays taken.
            OSError: Prometheus is unreachable or the connection was aborted.
        """
        target, body = timed_request(path, query, body, self.query_timeout)
        with self._slot():
            conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port)
            try:
                conn.connect()
                sock = conn.sock
                with self._lock:
                    if self._ended:
                        raise Refused(503, "the agent's turn is over")
                    self._upstream.add(sock)
                try:
                    headers = {"Connection": "close"}
                    if body is not None:
                        headers["Content-Type"] = "application/x-www-form-urlencoded"
                    conn.request(method, target, body=body, headers=headers)
                    yield conn.getresponse()
                finally:
                    with self._lock:
                        self._upstream.discard(sock)
            except http.client.HTTPException as exc:
                raise OSError(f"bad exchange with Prometheus: {exc}") from exc
            finally:
                conn.close()

    def read(self, path: str, params: dict[str, Any]) -> Any:
        """The agent's tools' reader: ``data`` of a Prometheus API answer, through the lane.

        Raises:
            RuntimeError: refused, unreachable or an error answer (the message says which).
        """
        try:
            with self.exchange("GET", path, urllib.parse.urlencode(params)) as resp:
                status, data = resp.status, resp.read()
        except Refused as exc:
            raise RuntimeError(f"Prometheus: {exc.reason}") from None
        except OSError as exc:
            raise RuntimeError(f"Prometheus unreachable: {exc}") from None
        try:
            body = json.loads(data)
        except ValueError:
            raise RuntimeError(f"Prometheus answered HTTP {status}") from None
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else status
            raise RuntimeError(f"Prometheus: {error}")
        return body["data"]

    # --- the relay ------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"
            timeout = proxy.read_timeout

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _head(self, status: int, length: int) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(length))
                self.end_headers()

            def _send(self, status: int, data: bytes) -> None:
                with contextlib.suppress(OSError):
                    self._head(status, len(data))
                    self.wfile.write(data)

            def _refuse(self, status: int, why: str) -> None:
                self._send(
                    status, f'{{"status":"error","errorType":"forbidden","error":"{why}"}}'.encode()
                )

            def _relay(self, method: str) -> None:
                path, _, query = self.path.partition("?")
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
                try:
                    with proxy.exchange(method, path, query, body) as resp:
                        if 300 <= resp.status < 400:
                            # Prometheus cleans a path by redirecting: its target is unchecked.
                            self._refuse(403, "this endpoint is not served: the API is read-only")
                        elif path == "/api/v1/rules":
                            data = resp.read()
                            ok = resp.status == 200
                            self._send(resp.status, _without_files(data) if ok else data)
                        else:
                            self._stream(resp)
                except Refused as exc:
                    self._refuse(exc.status, exc.reason)
                except OSError:
                    # After the turn the client is gone or no longer owed an answer.
                    if not proxy.ended:
                        self._refuse(502, "prometheus unreachable")

            def _stream(self, resp: http.client.HTTPResponse) -> None:
                """Copy the answer as it comes: the harness never holds a whole large one.

                Prometheus answers once it has evaluated the query, so the slot may go with a
                client that leaves while the answer is copied.
                """
                self.send_response(resp.status)
                self.send_header("Content-Type", resp.getheader("Content-Type", "application/json"))
                length = resp.getheader("Content-Length")
                if length is not None:
                    self.send_header("Content-Length", length)
                self.end_headers()
                while chunk := resp.read(_CHUNK):
                    self.wfile.write(chunk)

            def do_GET(self) -> None:
                self._relay("GET")

            def do_POST(self) -> None:
                self._relay("POST")

            def do_PUT(self) -> None:
                self._refuse(405, "read-only")

            def do_DELETE(self) -> None:
                self._refuse(405, "read-only")

        return Handler
