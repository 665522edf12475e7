"""A trial's tools, plus ``submit``, served over the Model Context Protocol (official ``mcp`` SDK).

The server speaks streamable HTTP on an ephemeral port of 127.0.0.1 at ``/mcp``; every request
must carry the trial's token (``Authorization: Bearer <token>``), anything else is answered
401 before the MCP layer sees it. A request body is at most :data:`MAX_BODY` bytes with a
``Content-Length`` (a larger or chunked one is refused from its headers, unread), and at most
:data:`MAX_CONCURRENT` requests are served at once. Tool calls go through the trial's toolbox, so they are
validated, journaled and refused after the deadline like any other; ``submit`` validates the
answer against the domain's submission and keeps the last accepted one
(:mod:`itbench.submit`). The server's instructions state the task (goal, task types, time limit,
public context). Harness paths are hidden from results and errors (:mod:`itbench.redact`).

MCP clients that only launch stdio servers use :mod:`itbench.mcpbridge`, a standard-library
program that relays stdio to this endpoint (bound into the sandbox at
``/opt/itbench/mcpbridge.py``; ``itbench mcp --trial-dir DIR`` runs it for a person).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import secrets
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from itbench.errors import ToolError
from itbench.models import TaskView
from itbench.prompts import task_message
from itbench.redact import NOTHING, Redactor
from itbench.submit import Submitter
from itbench.tools import Toolbox, _jsonable
from itbench.toolserver import MAX_BODY as TOOL_MAX_BODY
from itbench.toolserver import MAX_ITEMS, json_items
from itbench.trajectory import EventStep, Step

if TYPE_CHECKING:
    import uvicorn
    from mcp.server import Server, ServerRequestContext
    from mcp_types import (
        CallToolRequestParams,
        CallToolResult,
        ListToolsResult,
        PaginatedRequestParams,
    )

#: Environment variable of the endpoint's URL for a program (its token is ``ITBENCH_TOOLS_TOKEN``).
URL_ENV = "ITBENCH_MCP_URL"
PATH = "/mcp"
#: Largest request body, in bytes (the tool server's cap: the same calls arrive either way).
MAX_BODY = TOOL_MAX_BODY
#: Requests served at once; more are answered 503 (bodies held at once are bounded too).
MAX_CONCURRENT = 16
#: Seconds the server may take to start and to stop.
START_TIMEOUT = 20.0
STOP_TIMEOUT = 5.0


def object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's parameters as an object schema (MCP and function calling require ``type``)."""
    return schema if schema.get("type") == "object" else {**schema, "type": "object"}


def quiet_sdk() -> None:
    """Keep the SDK's and the web server's log lines off the harness's output."""
    for name in ("mcp", "uvicorn", "uvicorn.error", "uvicorn.access"):
        sdk = logging.getLogger(name)
        sdk.propagate = False
        if not sdk.handlers:
            sdk.addHandler(logging.NullHandler())


async def _answer(send: Any, status: int, error: str) -> None:
    """Send a whole JSON error answer through ASGI ``send``."""
    body = json.dumps({"error": error}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _body_problem(headers: list[tuple[bytes, bytes]]) -> tuple[int, str] | None:
    """Why a request's announced body is refused before any of it is read, or ``None``."""
    if any(k == b"transfer-encoding" for k, _ in headers):
        return 411, "chunked bodies are not accepted: send a Content-Length"
    lengths = [v.strip() for k, v in headers if k == b"content-length"]
    if len(lengths) > 1:
        return 400, "more than one Content-Length"
    if not lengths:
        return None
    raw = lengths[0]
    if not (raw.isascii() and raw.isdigit()):
        return 400, "Content-Length must be a number of bytes"
    if len(raw) > len(str(MAX_BODY)) or int(raw) > MAX_BODY:
        return 413, f"request too large: at most {MAX_BODY} bytes"
    return None


class _Limits:
    """ASGI middleware: bodies of at most :data:`MAX_BODY` bytes, :data:`MAX_CONCURRENT` at once.

    Both are decided from the headers, before the web server reads a byte of the body (it
    stops reading a connection whose body nobody asks for).
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.active = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = _body_problem(scope["headers"])
        if problem is not None:
            await _answer(send, *problem)
            return
        # One event loop runs every request: the count needs no lock.
        if self.active >= MAX_CONCURRENT:
            await _answer(send, 503, "too many requests at once")
            return
        self.active += 1
        try:
            body = await _read_body(receive)
            if body is None:
                return  # the client left
            if json_items(body) > MAX_ITEMS:
                # Under the size cap, tiny values would still parse into ~20 times their bytes.
                await _answer(send, 400, f"bad request: JSON of more than {MAX_ITEMS} values")
                return
            await self.app(scope, _replay(body, receive), send)
        finally:
            self.active -= 1


async def _read_body(receive: Any) -> bytes | None:
    """A request's whole body (at most :data:`MAX_BODY`), or ``None`` when the client left."""
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


def _replay(body: bytes, receive: Any) -> Any:
    """An ASGI ``receive`` that gives ``body`` first, then what ``receive`` gives."""
    given = False

    async def replay() -> Any:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class _TokenGuard:
    """ASGI middleware: 401 for an HTTP request without the trial's bearer token."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
            if not hmac.compare_digest(given, self.expected):
                await _answer(send, 401, "missing or wrong token")
                return
        await self.app(scope, receive, send)


class McpServer:
    """The MCP endpoint of one trial.

    Args:
        toolbox: The trial's tools.
        task: The task view (its text becomes the server's instructions).
        submitter: The ``submit`` tool.
        redactor: Hides harness paths in results and errors.
        token: The bearer token (a fresh one when not given).
        steps: A trajectory to record submissions in.
    """

    def __init__(
        self,
        toolbox: Toolbox,
        task: TaskView,
        submitter: Submitter,
        redactor: Redactor = NOTHING,
        token: str | None = None,
        steps: list[Step] | None = None,
    ) -> None:
        self.toolbox = toolbox
        self.task = task
        self.submitter = submitter
        self.redactor = redactor
        self.token = token or secrets.token_hex(16)
        self.steps = steps if steps is not None else []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Inherited by accepted connections: the server writes an answer's head and body
        # separately, and with Nagle's algorithm the body waits for the client's delayed ACK
        # (about 40 ms per call on loopback).
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self._uvicorn: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The endpoint's URL."""
        return f"http://127.0.0.1:{self.port}{PATH}"

    def env(self) -> dict[str, str]:
        """Environment variables that point a program at this endpoint."""
        from itbench.toolclient import TOKEN_ENV

        return {URL_ENV: self.url, TOKEN_ENV: self.token}

    def client_config(self) -> dict[str, Any]:
        """This endpoint in the common ``mcpServers`` form (``.mcp.json``)."""
        return {
            "type": "http",
            "url": self.url,
            "headers": {"Authorization": f"Bearer {self.token}"},
        }

    # --- the MCP layer --------------------------------------------------------------------

    def _server(self) -> Server[Any]:
        from mcp.server import Server

        return Server(
            "itbench",
            version="1",
            instructions=task_message(self.task, self.submitter.name),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        import mcp_types as types

        specs = [*self.toolbox.specs(), self.submitter.spec()]
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=s.name, description=s.description, input_schema=object_schema(s.parameters)
                )
                for s in specs
            ]
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        import anyio
        import mcp_types as types

        arguments = dict(params.arguments or {})
        if params.name == self.submitter.name:
            accepted, text = self.submitter.offer(arguments)
            self.steps.append(
                EventStep(
                    name="submit" if accepted else "submit_rejected",
                    detail={"via": "mcp", "message": text},
                )
            )
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)], is_error=not accepted
            )

        def call() -> Any:
            return self.toolbox.call(params.name, **arguments)

        try:
            result = await anyio.to_thread.run_sync(call)
        except ToolError as exc:
            text = self.redactor.text(str(exc))
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)], is_error=True
            )
        data = self.redactor.data(_jsonable(result))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(data, default=str))],
            structured_content=data if isinstance(data, dict) else None,
        )

    # --- serving --------------------------------------------------------------------------

    def start(self) -> McpServer:
        """Serve in a background thread; returns once the endpoint accepts connections.

        Raises:
            RuntimeError: the server did not start in time.
        """
        import uvicorn

        quiet_sdk()
        app = _Limits(
            _TokenGuard(self._server().streamable_http_app(json_response=True), self.token)
        )
        config = uvicorn.Config(
            app,
            log_level="critical",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=1,
        )
        server = self._uvicorn = uvicorn.Server(config)
        self._sock.listen(64)
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [self._sock]}, daemon=True, name="itbench-mcp"
        )
        self._thread.start()
        end = time.monotonic() + START_TIMEOUT
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > end:
                self.stop()
                raise RuntimeError("the MCP server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving and close the socket. Idempotent."""
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=STOP_TIMEOUT)
            if self._thread.is_alive() and self._uvicorn is not None:
                self._uvicorn.force_exit = True
                self._thread.join(timeout=STOP_TIMEOUT)
        with contextlib.suppress(OSError):
            self._sock.close()
