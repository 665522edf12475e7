"""A stdio MCP server that relays to a trial's MCP endpoint over streamable HTTP.

For MCP clients that launch their servers as programs: ``python3 mcpbridge.py`` reads
JSON-RPC messages, one per line, on its standard input, posts each to the endpoint named by
``ITBENCH_MCP_URL`` with the token of ``ITBENCH_TOOLS_TOKEN`` (or ``--url``/``--token-env``),
and writes every message of the answers (JSON or an SSE stream) as a line on its standard
output. Both protocol eras pass through: after an ``initialize`` handshake the session id and
the negotiated version go with every request; a request that carries its protocol version in
``params._meta`` gets the ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` headers that
the streamable HTTP transport asks for. When its input ends, the session is closed and the
program exits.

This file uses the standard library only and imports nothing else: it is bound into an agent's
sandbox by itself (``/opt/itbench/mcpbridge.py``), and ``itbench mcp --trial-dir DIR`` runs it
for a person's MCP client.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import re
import sys
import threading
import urllib.error
import urllib.request
from typing import IO, Any

URL_ENV = "ITBENCH_MCP_URL"
TOKEN_ENV = "ITBENCH_TOOLS_TOKEN"
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
#: Method -> the parameter mirrored in the ``Mcp-Name`` header.
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_HEADER_SAFE = re.compile(r"^[\x20-\x7E]*$")
INTERNAL_ERROR = -32603


def header_value(value: str) -> str:
    """``value`` as an HTTP header value, base64-wrapped when it would not survive verbatim."""
    if _HEADER_SAFE.fullmatch(value) and value == value.strip() and not value.startswith("=?"):
        return value
    return f"=?base64?{base64.b64encode(value.encode('utf-8')).decode('ascii')}?="


class Bridge:
    """Relays JSON-RPC lines to one streamable HTTP endpoint and writes the answers.

    Args:
        url: The endpoint.
        token: Its bearer token.
        out: Where answer lines go.
        timeout: Seconds one HTTP exchange may take.
    """

    def __init__(self, url: str, token: str, out: IO[bytes], timeout: float = 3600.0) -> None:
        self.url = url
        self.token = token
        self.out = out
        self.timeout = timeout
        self.session: str | None = None
        self.version: str | None = None
        self._write_lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def write(self, message: Any) -> None:
        """Write one JSON-RPC message as a line."""
        line = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        with self._write_lock:
            self.out.write(line)
            self.out.flush()

    def headers(self, message: Any) -> dict[str, str]:
        """The HTTP headers a message is posted with."""
        out = {
            "Authorization": f"Bearer {self.token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        params = message.get("params") if isinstance(message, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        modern = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, dict) else None
        if isinstance(modern, str) and isinstance(params, dict):
            method = str(message.get("method", ""))
            out["MCP-Protocol-Version"] = modern
            out["Mcp-Method"] = method
            named = params.get(NAME_BEARING.get(method, ""))
            if isinstance(named, str):
                out["Mcp-Name"] = header_value(named)
            return out
        if self.session:
            out["Mcp-Session-Id"] = self.session
        if self.version and not (
            isinstance(message, dict) and message.get("method") == "initialize"
        ):
            out["MCP-Protocol-Version"] = self.version
        return out

    def handle(self, line: bytes) -> None:
        """Relay one input line: in a thread of its own unless it opens or ends a session."""
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            self.write(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
            )
            return
        is_request = isinstance(message, dict) and "id" in message and "method" in message
        if not is_request or message.get("method") == "initialize":
            self.exchange(message, line)
            return
        thread = threading.Thread(target=self.exchange, args=(message, line), daemon=True)
        thread.start()
        self._threads.append(thread)

    def exchange(self, message: Any, body: bytes) -> None:
        """POST one message and write every message of the answer."""
        request_id = message.get("id") if isinstance(message, dict) else None
        req = urllib.request.Request(
            self.url, data=body, method="POST", headers=self.headers(message)
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # loopback URL
                if isinstance(message, dict) and message.get("method") == "initialize":
                    self.session = resp.headers.get("Mcp-Session-Id") or self.session
                kind = resp.headers.get("Content-Type", "")
                if "text/event-stream" in kind:
                    self._events(resp, message)
                else:
                    self._answer(resp.read(), message)
        except urllib.error.HTTPError as exc:
            body_text = exc.read() if exc.fp is not None else b""
            if not self._answer(body_text, message) and request_id is not None:
                detail = body_text.decode("utf-8", "replace")[:300]
                self._error(request_id, f"HTTP {exc.code} from the trial's MCP endpoint: {detail}")
        except (urllib.error.URLError, OSError) as exc:
            if request_id is not None:
                self._error(request_id, f"cannot reach the trial's MCP endpoint: {exc}")

    def _error(self, request_id: Any, text: str) -> None:
        self.write(
            {"jsonrpc": "2.0", "id": request_id, "error": {"code": INTERNAL_ERROR, "message": text}}
        )

    def _answer(self, body: bytes, message: Any) -> bool:
        """Write the JSON-RPC message(s) of a JSON body; whether there were any."""
        if not body.strip():
            return False
        try:
            answer = json.loads(body)
        except (ValueError, RecursionError):
            return False
        answers = answer if isinstance(answer, list) else [answer]
        found = False
        for item in answers:
            if isinstance(item, dict) and item.get("jsonrpc") == "2.0":
                self._note(item, message)
                self.write(item)
                found = True
        return found

    def _events(self, resp: Any, message: Any) -> None:
        data: list[str] = []
        for raw in resp:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif not line and data:
                self._answer("\n".join(data).encode(), message)
                data = []
        if data:
            self._answer("\n".join(data).encode(), message)

    def _note(self, answer: dict[str, Any], message: Any) -> None:
        """Keep the version an ``initialize`` negotiated, for the requests after it."""
        if isinstance(message, dict) and message.get("method") == "initialize":
            result = answer.get("result")
            if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
                self.version = result["protocolVersion"]

    def close(self) -> None:
        """Wait for answers in flight, then end the session."""
        for thread in self._threads:
            thread.join(timeout=self.timeout)
        if self.session:
            req = urllib.request.Request(
                self.url,
                method="DELETE",
                headers={"Authorization": f"Bearer {self.token}", "Mcp-Session-Id": self.session},
            )
            with contextlib.suppress(urllib.error.URLError, OSError):
                urllib.request.urlopen(req, timeout=5).close()  # loopback URL


def serve(url: str, token: str, stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """Relay ``stdin`` to the endpoint until it ends."""
    bridge = Bridge(url, token, stdout)
    for line in stdin:
        if line.strip():
            bridge.handle(line)
    bridge.close()


def main(argv: list[str] | None = None) -> int:
    """Relay stdio to the endpoint; exit 2 when it is not named."""
    parser = argparse.ArgumentParser(prog="mcpbridge.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url", default=os.environ.get(URL_ENV), help=f"the endpoint (default ${URL_ENV})"
    )
    parser.add_argument("--token-env", default=TOKEN_ENV, help="the variable holding the token")
    args = parser.parse_args(argv)
    token = os.environ.get(args.token_env)
    if not args.url or not token:
        parser.error(f"name the endpoint (--url or ${URL_ENV}) and set ${args.token_env}")
    serve(args.url, token, sys.stdin.buffer, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
