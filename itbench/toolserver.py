"""Serves a trial's toolbox over HTTP on 127.0.0.1, for agents that are external processes.

Protocol (JSON, every request carries ``Authorization: Bearer <token>``):

- ``GET /task`` — the task view;
- ``GET /tools`` — the tool specs (name, description, JSON-schema parameters, action flag);
- ``POST /call`` with ``{"tool": NAME, "arguments": {...}}`` — answers
  ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": "..."}``.

The ``itbench tool`` command is a client of this protocol; it reads ``ITBENCH_TOOLS_URL`` and
``ITBENCH_TOOLS_TOKEN`` from the environment.
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from itbench.models import TaskView
from itbench.tools import Toolbox, ToolError, _jsonable

URL_ENV = "ITBENCH_TOOLS_URL"
TOKEN_ENV = "ITBENCH_TOOLS_TOKEN"
MAX_BODY = 4 * 1024 * 1024


class ToolServer:
    """An HTTP front of one toolbox, bound to an ephemeral port of 127.0.0.1."""

    def __init__(self, toolbox: Toolbox, task: TaskView) -> None:
        self.toolbox = toolbox
        self.task = task
        self.token = secrets.token_hex(16)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                """Keep the harness's output clean."""

            def _send(self, code: int, payload: Any) -> None:
                body = json.dumps(payload, default=str).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _authorized(self) -> bool:
                given = self.headers.get("Authorization", "").removeprefix("Bearer ")
                if hmac.compare_digest(given, server.token):
                    return True
                self._send(401, {"ok": False, "error": "missing or wrong token"})
                return False

            def do_GET(self) -> None:
                if not self._authorized():
                    return
                if self.path == "/tools":
                    self._send(200, [s.model_dump() for s in server.toolbox.specs()])
                elif self.path == "/task":
                    self._send(200, server.task.model_dump(mode="json"))
                else:
                    self._send(404, {"ok": False, "error": f"no such path {self.path}"})

            def do_POST(self) -> None:
                if not self._authorized():
                    return
                if self.path != "/call":
                    self._send(404, {"ok": False, "error": f"no such path {self.path}"})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    self._send(413, {"ok": False, "error": "request too large"})
                    return
                try:
                    request = json.loads(self.rfile.read(length) or b"{}")
                    name = request["tool"]
                    arguments = request.get("arguments") or {}
                    if not isinstance(name, str) or not isinstance(arguments, dict):
                        raise TypeError("'tool' must be a string and 'arguments' an object")
                except (ValueError, KeyError, TypeError) as exc:
                    self._send(400, {"ok": False, "error": f"bad request: {exc}"})
                    return
                try:
                    result = server.toolbox.call(name, **arguments)
                except ToolError as exc:
                    self._send(200, {"ok": False, "error": str(exc)})
                    return
                self._send(200, {"ok": True, "result": _jsonable(result)})

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
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
        """Stop serving and close the socket. Idempotent."""
        if self._thread.is_alive():
            self._httpd.shutdown()
        self._httpd.server_close()


class ToolClient:
    """A client of :class:`ToolServer` (what ``itbench tool`` uses)."""

    def __init__(self, url: str, token: str, timeout: float = 120.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _request(self, path: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(self.url + path, data=data, method="POST" if data else "GET")
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310 - loopback URL
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read() or b"{}")
            raise ToolError(body.get("error") or f"HTTP {exc.code}") from None
        except urllib.error.URLError as exc:
            raise ToolError(f"cannot reach the tool server at {self.url}: {exc.reason}") from None

    def tools(self) -> list[dict[str, Any]]:
        """Tool specs."""
        result: list[dict[str, Any]] = self._request("/tools")
        return result

    def task(self) -> dict[str, Any]:
        """The task view."""
        result: dict[str, Any] = self._request("/task")
        return result

    def call(self, tool: str, **arguments: Any) -> Any:
        """Call a tool; raises :class:`ToolError` with the server's message on failure."""
        answer = self._request("/call", {"tool": tool, "arguments": arguments})
        if not answer.get("ok"):
            raise ToolError(answer.get("error", "tool call failed"))
        return answer.get("result")
