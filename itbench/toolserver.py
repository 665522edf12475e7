"""Serves a trial's toolbox over HTTP on 127.0.0.1, for agents that are external processes.

The protocol is described in :mod:`itbench.toolclient`, whose client (a standalone program,
bound into an agent's sandbox) is what ``itbench tool`` runs.

The server answers every request it refuses with a 4xx and a JSON error, and anything that
goes wrong while handling one with a 500: never with a traceback on the harness's output. A
request must arrive whole (line, headers and body) within ``read_timeout`` seconds.
"""

from __future__ import annotations

import contextlib
import hmac
import io
import itertools
import json
import re
import secrets
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from itbench import toolclient
from itbench.errors import ToolError
from itbench.models import TaskView
from itbench.redact import NOTHING, Redactor
from itbench.toolclient import TOKEN_ENV, URL_ENV, ToolClientError
from itbench.tools import Toolbox, _jsonable

__all__ = [
    "MAX_BODY",
    "MAX_DEPTH",
    "TOKEN_ENV",
    "URL_ENV",
    "RemoteToolError",
    "ToolClient",
    "ToolServer",
    "json_depth",
]

MAX_BODY = 4 * 1024 * 1024
MAX_DEPTH = 64
#: Most values (arrays, objects and their elements) a request may hold: a 4 MiB body of tiny
#: values parses into some 90 MB of Python objects.
MAX_ITEMS = 100_000
READ_TIMEOUT = 30.0
# After refusing a body unread, discard what the client still sends for a little while, so
# that closing the socket does not reset the connection before the client reads the answer.
LINGER_SECONDS = 2.0
LINGER_BYTES = 4 * MAX_BODY

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _BRACKETS)
_SIGNS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 and -1 as signed bytes


def json_depth(document: bytes) -> int:
    """How deeply arrays and objects nest in a UTF-8 JSON ``document``, found without recursion.

    Brackets inside strings do not count. On text that is not JSON the answer is only an
    upper bound of something meaningless, which is enough to refuse it.
    """
    signs = _STRING.sub(b"", document).translate(_SIGNS, _NOT_BRACKETS)
    return max(itertools.accumulate(memoryview(signs).cast("b")), default=0)


def json_items(document: bytes) -> int:
    """About how many values a UTF-8 JSON ``document`` holds (an upper bound, strings aside).

    Counts arrays, objects and the commas between elements outside strings.
    """
    bare = _STRING.sub(b"", document)
    return bare.count(b",") + bare.count(b"[") + bare.count(b"{")


class RemoteToolError(ToolError, ToolClientError):
    """A failed request to a tool server, catchable as either error class."""


class ToolClient(toolclient.ToolClient):
    """The protocol's client, raising :class:`~itbench.tools.ToolError` like a local toolbox."""

    error = RemoteToolError


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _DeadlineReader(io.RawIOBase):
    """Reads a socket, failing with :class:`TimeoutError` once ``deadline`` has passed."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request took too long to arrive")
        self._sock.settimeout(remaining)
        return self._sock.recv_into(buffer)


#: Requests served at once; a client that opens more waits in the listen queue.
MAX_CONCURRENT = 32


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: ToolServer) -> None:
        self.owner = owner
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT)
        self._live: set[socket.socket] = set()
        self._live_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve in a thread, never more than :data:`MAX_CONCURRENT` at once."""
        self._slots.acquire()
        with self._live_lock:
            self._live.add(request)
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._forget(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """Serve one request and free its slot."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._forget(request)

    def _forget(self, request: socket.socket) -> None:
        with self._live_lock:
            self._live.discard(request)
        self._slots.release()

    def hang_up(self) -> None:
        """Shut the connections of the requests being served: their answers go nowhere."""
        with self._live_lock:
            live = list(self._live)
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Drop the connection quietly: the harness's output is not the client's to fill."""


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        owner = self.server.owner
        self.rfile.close()
        self.rfile = io.BufferedReader(
            _DeadlineReader(self.connection, time.monotonic() + owner.read_timeout)
        )
        self._responded = False
        self._unread_body = False

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        if self._unread_body:
            self._discard_input()

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the harness's output clean."""

    def _send(self, code: int, payload: Any) -> None:
        try:
            body = json.dumps(payload, default=str).encode()
        except (ValueError, TypeError, RecursionError):
            code, body = 500, b'{"ok": false, "error": "the result cannot be sent as JSON"}'
        self._responded = True
        try:
            self.connection.settimeout(self.server.owner.read_timeout)
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if self._unread_body:
                self.close_connection = True
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            self.close_connection = True

    def _discard_input(self) -> None:
        sock = self.connection
        end = time.monotonic() + LINGER_SECONDS
        budget = LINGER_BYTES
        scratch = bytearray(64 * 1024)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
            while budget > 0 and (remaining := end - time.monotonic()) > 0:
                sock.settimeout(remaining)
                got = sock.recv_into(scratch)
                if not got:
                    break
                budget -= got

    def _answer(self, handle: Any) -> None:
        try:
            handle()
        except _Refused as exc:
            self._send(exc.code, {"ok": False, "error": exc.message})
        except TimeoutError:
            self.close_connection = True
            if not self._responded:
                self._send(408, {"ok": False, "error": "the request took too long to arrive"})
        except Exception as exc:  # the client gets a 500, the harness no traceback
            self.close_connection = True
            if not self._responded:
                message = f"internal error of the tool server: {type(exc).__name__}"
                self._send(500, {"ok": False, "error": message})

    def _check_token(self) -> None:
        given = self.headers.get("Authorization", "").removeprefix("Bearer ")
        expected = self.server.owner.token
        # Compared as bytes: compare_digest refuses str with non-ASCII characters.
        if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode()):
            raise _Refused(401, "missing or wrong token")

    def do_GET(self) -> None:
        self._answer(self._get)

    def do_POST(self) -> None:
        # Until the body is read, a refusal must not close the socket on the client's data.
        self._unread_body = self.headers.get("Content-Length", "").strip() != "0"
        self._answer(self._post)

    def _get(self) -> None:
        self._check_token()
        owner = self.server.owner
        if self.path == "/tools":
            self._send(200, [s.model_dump() for s in owner.toolbox.specs()])
        elif self.path == "/task":
            self._send(200, owner.task.model_dump(mode="json"))
        else:
            raise _Refused(404, f"no such path {self.path}")

    def _post(self) -> None:
        self._check_token()
        if self.path != "/call":
            raise _Refused(404, f"no such path {self.path}")
        body = self._read_body(self._content_length())
        name, arguments = _parse_call(body)
        owner = self.server.owner
        try:
            result = owner.toolbox.call(name, **arguments)
        except ToolError as exc:
            self._send(200, {"ok": False, "error": owner.redactor.text(str(exc))})
            return
        self._send(200, {"ok": True, "result": owner.redactor.data(_jsonable(result))})

    def _content_length(self) -> int:
        if "Transfer-Encoding" in self.headers:
            raise _Refused(411, "chunked bodies are not accepted: send a Content-Length")
        values = self.headers.get_all("Content-Length") or []
        if not values:
            raise _Refused(411, "a Content-Length is required")
        if len(values) > 1:
            raise _Refused(400, "more than one Content-Length")
        raw = values[0].strip()
        if not (raw.isascii() and raw.isdigit()):
            raise _Refused(400, f"Content-Length must be a number of bytes, not {raw[:32]!r}")
        if len(raw) > len(str(MAX_BODY)) or int(raw) > MAX_BODY:
            raise _Refused(413, f"request too large: at most {MAX_BODY} bytes")
        return int(raw)

    def _read_body(self, length: int) -> bytes:
        body = self.rfile.read(length) if length else b""
        if len(body) < length:
            raise _Refused(400, f"body shorter than its Content-Length ({len(body)} < {length})")
        self._unread_body = False
        return body


def _parse_call(body: bytes) -> tuple[str, dict[str, Any]]:
    """The tool name and arguments of a ``/call`` body; :class:`_Refused` (400) if malformed."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise _Refused(400, "bad request: the body is not UTF-8") from None
    if json_depth(body) > MAX_DEPTH:
        raise _Refused(400, f"bad request: JSON nested deeper than {MAX_DEPTH} levels")
    if json_items(body) > MAX_ITEMS:
        raise _Refused(400, f"bad request: JSON of more than {MAX_ITEMS} values")
    try:
        request = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise _Refused(400, f"bad request: {exc}") from None
    if not isinstance(request, dict):
        raise _Refused(400, "bad request: the body must be a JSON object")
    name = request.get("tool")
    arguments = request.get("arguments") or {}
    if not isinstance(name, str) or not isinstance(arguments, dict):
        raise _Refused(400, "bad request: 'tool' must be a string and 'arguments' an object")
    return name, arguments


class ToolServer:
    """An HTTP front of one toolbox, bound to an ephemeral port of 127.0.0.1.

    Args:
        toolbox: the tools served.
        task: the task view served at ``/task``.
        read_timeout: seconds a client has to send a whole request; also the socket timeout
            while answering.
        redactor: hides harness paths in results and errors.
    """

    def __init__(
        self,
        toolbox: Toolbox,
        task: TaskView,
        read_timeout: float = READ_TIMEOUT,
        redactor: Redactor = NOTHING,
    ) -> None:
        self.toolbox = toolbox
        self.task = task
        self.redactor = redactor
        self.token = secrets.token_hex(16)
        self.read_timeout = read_timeout
        self._httpd = _HTTPServer(self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, daemon=True, name="itbench-tools"
        )

    @property
    def url(self) -> str:
        """Base URL of the server."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def env(self) -> dict[str, str]:
        """Environment variables that point a client at this server."""
        return {URL_ENV: self.url, TOKEN_ENV: self.token}

    def start(self) -> ToolServer:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the socket and hang up on requests in flight. Idempotent.

        A request that is still being served when the agent's turn ends gets no answer; the
        tool call it started, if any, returns into the closed connection.
        """
        self._httpd.hang_up()  # first: a full house holds the loop that shutdown waits for
        if self._thread.is_alive():
            self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd.hang_up()
