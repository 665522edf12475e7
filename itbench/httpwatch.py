"""What an agent asks of its task's endpoints, read off the bytes the sandbox's relay carries.

The relay (:class:`itbench.netbridge.Relay`) copies each connection from the sandbox to a task
endpoint (Prometheus's API, an AWS endpoint) as it is; an :class:`HttpWatcher` reads a copy of
both directions as HTTP/1.x and reports each exchange once its answer's head arrives: method,
path (never the query string), the AWS action and service where the request names them (the
``X-Amz-Target`` header, a form body's ``Action``, the signing scope of ``Authorization``),
status and seconds. Credentials, bodies and query strings are never reported. A connection
that does not speak HTTP/1.x (TLS, another protocol), whose framing the watcher cannot
follow, or with more than :data:`MAX_PENDING` requests unanswered is left unwatched from there
on, and that is reported once; what the relay carries never depends on the watcher. Every
part read is bounded (heads, forms, the ``Authorization`` header searched), so no request can
make the watcher slow or large.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Longest request or response head read (bytes); a longer one ends the watching.
MAX_HEAD = 64 * 1024
#: Longest form body read for its ``Action`` (bytes); longer ones are skipped unread.
MAX_FORM = 64 * 1024
#: Requests sent and not yet answered on one connection; past it the connection is unwatched.
MAX_PENDING = 64
#: Characters of the ``Authorization`` header searched for the signing scope.
MAX_AUTHORIZATION = 2048
# Servers accept looser request lines than the standard's (tabs, runs of blanks, 1.x).
_REQUEST = re.compile(rb"([A-Z]{3,10})[ \t]+(\S+)[ \t]+HTTP/\d\.\d[ \t]*(?:\r\n|$)")
_STATUS = re.compile(rb"HTTP/\d\.\d[ \t]+(\d{3})")
# Bounded parts: a crafted header cannot make the search slow.
_SCOPE = re.compile(r"Credential=[^/,\s]{1,128}/\d{8}/[^/,\s]{1,64}/([a-z0-9-]{1,64})/aws4_request")
_ACTION = re.compile(r"[A-Za-z0-9]{1,64}")


@dataclass
class Exchange:
    """One request to an endpoint and its answer.

    Attributes:
        port: The endpoint's port.
        method: The HTTP method.
        path: The request's path, without its query string.
        action: The AWS action it calls, when it names one.
        service: The AWS service its signature is scoped to, when signed.
        status: The answer's status code.
        seconds: From the request's first byte to the answer's head.
        started: When the request's first byte passed (``time.time()``).
    """

    port: int
    method: str
    path: str
    action: str | None
    service: str | None
    status: int | None
    seconds: float | None
    started: float

    def record(self) -> dict[str, Any]:
        """The exchange as a trajectory records it (absent fields left out)."""
        out: dict[str, Any] = {"port": self.port, "method": self.method, "path": self.path}
        for key in ("action", "service", "status"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.seconds is not None:
            out["seconds"] = round(self.seconds, 4)
        return out


def _headers(head: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    last = ""
    for line in head.split(b"\r\n")[1:]:
        if line[:1] in (b" ", b"\t") and last:  # a folded line continues the header above
            out[last] = f"{out[last]} {line.strip().decode('latin-1')}".strip()
            continue
        name, sep, value = line.partition(b":")
        if sep:
            last = name.strip().lower().decode("latin-1")
            out[last] = value.strip().decode("latin-1")
    return out


def _length(headers: dict[str, str]) -> int | None:
    raw = headers.get("content-length")
    return int(raw) if raw is not None and raw.isascii() and raw.isdigit() else None


class _Body:
    """Skips one message body: a known length, chunked, or everything to the end."""

    def __init__(self, length: int | None, chunked: bool) -> None:
        self.left = length or 0
        self.chunked = chunked
        self.to_end = length is None and not chunked
        self._line = b""
        self._state = "size" if chunked else "data"
        self.broken = False

    def feed(self, data: bytes) -> tuple[bool, bytes]:
        """Consume ``data``; whether the body ended, and the bytes after it."""
        if self.to_end:
            return False, b""
        while data:
            if self._state == "data":
                take = min(self.left, len(data))
                self.left -= take
                data = data[take:]
                if self.left:
                    return False, b""
                if not self.chunked:
                    return True, data
                self._state = "crlf"
            elif self._state in ("size", "crlf", "trailer"):
                cut = data.find(b"\n")
                if cut < 0:
                    self._line += data
                    if len(self._line) > MAX_HEAD:
                        self.broken = True
                    return False, b""
                line, data = (self._line + data[:cut]).strip(), data[cut + 1 :]
                self._line = b""
                if self._state == "crlf":
                    self._state = "size"
                elif self._state == "trailer":
                    if not line:
                        return True, data
                else:
                    size = line.split(b";")[0]
                    try:
                        self.left = int(size, 16)
                    except ValueError:
                        self.broken = True
                        return False, b""
                    self._state = "data" if self.left else "trailer"
        if not self.chunked and self.left == 0:
            return True, b""
        return False, b""


class HttpWatcher:
    """Reads one relayed connection as HTTP/1.x exchanges.

    Args:
        port: The endpoint's port.
        report: Called with each :class:`Exchange` as its answer's head arrives (from the
            relay's thread of the answering direction).
        on_lost: Called once with the port when the connection stops being followed (not
            HTTP/1.x, framing it cannot follow, too many requests unanswered): what passes
            after that is not journaled, and the journal says so.
    """

    def __init__(
        self,
        port: int,
        report: Callable[[Exchange], None],
        on_lost: Callable[[int], None] = lambda port: None,
    ) -> None:
        self.port = port
        self.report = report
        self.on_lost = on_lost
        self.lost = False
        self._lock = threading.Lock()
        self._pending: deque[Exchange] = deque()
        self._sent = _Side(self._request, lambda head: _form_length(_headers(head)))
        self._received = _Side(self._answer)

    def sent(self, data: bytes) -> None:
        """Bytes the agent sent towards the endpoint."""
        self._feed(self._sent, data)

    def received(self, data: bytes) -> None:
        """Bytes the endpoint sent back."""
        self._feed(self._received, data)

    def _feed(self, side: _Side, data: bytes) -> None:
        if self.lost:
            return
        try:
            followed = side.feed(data)
        except Exception:  # whatever the bytes, the watcher gives up rather than fails
            followed = False
        if not followed:
            with self._lock:
                if self.lost:
                    return
                self.lost = True
            self.on_lost(self.port)

    def _request(self, head: bytes, body_start: bytes) -> _Body | None:
        m = _REQUEST.match(head)
        if m is None:
            return None
        headers = _headers(head)
        target = m[2].decode("latin-1")
        # As servers route it: the path is what precedes the query (absolute form aside).
        path, _, query = target.partition("?")
        if not path.startswith("/"):  # the absolute form: http://host/path
            path = urllib.parse.urlsplit(path).path
        path = path.split("#", 1)[0] or "/"
        scope = _SCOPE.search(headers.get("authorization", "")[:MAX_AUTHORIZATION])
        # Every place that can name an action; several that disagree are all reported.
        named = [headers.get("x-amz-target", "").rpartition(".")[2]]
        named += urllib.parse.parse_qs(query[:MAX_FORM]).get("Action", [])
        length = _length(headers)
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        wanted = _form_length(headers)
        if wanted and len(body_start) >= wanted:
            form = urllib.parse.parse_qs(body_start[:wanted].decode("latin-1"))
            named += form.get("Action", [])
        actions = sorted({a for a in named if a}, key=named.index)
        action = "|".join(a if _ACTION.fullmatch(a) else "?" for a in actions[:4]) or None
        with self._lock:
            if len(self._pending) >= MAX_PENDING:
                return None
            self._pending.append(
                Exchange(
                    self.port,
                    m[1].decode(),
                    path[:512],
                    action,
                    scope[1] if scope else None,
                    None,
                    None,
                    time.time(),
                )
            )
        if length is None and not chunked:
            length = 0  # a request without a framed body has none
        return _Body(length, chunked)

    def _answer(self, head: bytes, body_start: bytes) -> _Body | None:
        m = _STATUS.match(head)
        if m is None:
            return None
        status = int(m[1])
        headers = _headers(head)
        with self._lock:
            if status < 200:  # an interim answer: the final one follows
                return _Body(0, False)
            exchange = self._pending.popleft() if self._pending else None
        if exchange is None:
            return None
        exchange.status = status
        exchange.seconds = max(0.0, time.time() - exchange.started)
        self.report(exchange)
        if exchange.method == "HEAD" or status in (204, 304):
            return _Body(0, False)
        return _Body(_length(headers), "chunked" in headers.get("transfer-encoding", "").lower())


def _form_length(headers: dict[str, str]) -> int:
    """Bytes of a request's body to read with its head: a small form's, else none."""
    length = _length(headers)
    form = "x-www-form-urlencoded" in headers.get("content-type", "")
    return length if form and length is not None and length <= MAX_FORM else 0


class _Side:
    """One direction of a connection: heads parsed by ``on_head``, bodies skipped.

    Args:
        on_head: Reads a head (with the first bytes after it); the body to skip, or None
            when the stream is not HTTP/1.x.
        wants: How many bytes of the body ``on_head`` must see with the head.
    """

    def __init__(
        self,
        on_head: Callable[[bytes, bytes], _Body | None],
        wants: Callable[[bytes], int] | None = None,
    ) -> None:
        self.on_head = on_head
        self.wants = wants
        self.buffer = b""
        self.body: _Body | None = None

    def feed(self, data: bytes) -> bool:
        """Consume ``data``; False once the stream cannot be followed."""
        while data:
            if self.body is not None:
                done, data = self.body.feed(data)
                if self.body.broken:
                    return False
                if not done:
                    return True
                self.body = None
                continue
            self.buffer += data
            data = b""
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0 or end > MAX_HEAD:
                return end < 0 and len(self.buffer) <= MAX_HEAD
            head, rest = self.buffer[:end], self.buffer[end + 4 :]
            if self.wants is not None and len(rest) < self.wants(head):
                return len(self.buffer) <= MAX_HEAD + MAX_FORM
            self.buffer = b""
            body = self.on_head(head, rest[:MAX_FORM])
            if body is None:
                return False
            self.body = body
            data = rest
        return True
