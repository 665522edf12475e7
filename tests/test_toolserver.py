"""The tool server against hostile clients (raw sockets), and its standalone client program."""

from __future__ import annotations

import ast
import json
import select
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from itbench.errors import ToolError
from itbench.testing import bare_task
from itbench.toolclient import ToolClientError
from itbench.tools import Tool, Toolbox
from itbench.toolserver import (
    MAX_BODY,
    MAX_DEPTH,
    MAX_ITEMS,
    ToolClient,
    ToolServer,
    json_depth,
    json_items,
)

CLIENT = Path(__file__).parents[1] / "itbench" / "toolclient.py"
SYSTEM_PYTHON = "/usr/bin/python3"


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text for this")


def _toolbox() -> Toolbox:
    def add(a: int, b: int = 1) -> int:
        """Add two numbers."""
        return a + b

    def echo(text: str) -> str:
        """Answer the text."""
        return text

    def odd() -> Any:
        """Answer something that is not JSON."""
        return _Unprintable()

    return Toolbox.of([Tool.from_function(f) for f in (add, echo, odd)])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ToolServer]:
    box = _toolbox()
    srv = ToolServer(box, bare_task(box, tmp_path, goal="add numbers"), read_timeout=1.0).start()
    try:
        yield srv
    finally:
        srv.stop()


def _address(server: ToolServer) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").split(":")
    return host, int(port)


def _post_head(server: ToolServer, *headers: str, token: str | None = None) -> bytes:
    lines = ["POST /call HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines.append(f"Authorization: Bearer {server.token if token is None else token}")
    return ("\r\n".join([*lines, *headers]) + "\r\n\r\n").encode("latin-1")


def _exchange(server: ToolServer, data: bytes, timeout: float = 10) -> tuple[int, Any]:
    """Send ``data`` on a fresh connection; the status and JSON body of the answer."""
    with socket.create_connection(_address(server), timeout=timeout) as sock:
        sock.sendall(data)
        answer = _read_to_end(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)


def _read_to_end(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _body(payload: Any) -> bytes:
    return json.dumps(payload).encode()


def _call(server: ToolServer, payload: Any, *headers: str) -> tuple[int, Any]:
    body = payload if isinstance(payload, bytes) else _body(payload)
    head = _post_head(server, f"Content-Length: {len(body)}", *headers)
    return _exchange(server, head + body)


def _still_serves(server: ToolServer) -> None:
    assert ToolClient(server.url, server.token, timeout=5).call("add", a=2, b=3) == 5


GOOD = _body({"tool": "add", "arguments": {"a": 1}})


@pytest.mark.parametrize(
    ("headers", "status", "message"),
    [
        (["Content-Length: -1"], 400, "must be a number of bytes"),
        (["Content-Length: abc"], 400, "must be a number of bytes"),
        (["Content-Length: +34"], 400, "must be a number of bytes"),
        (["Content-Length: 3", "Content-Length: 34"], 400, "more than one"),
        ([], 411, "Content-Length is required"),
        (["Transfer-Encoding: chunked"], 411, "chunked"),
        ([f"Content-Length: {MAX_BODY + 1}"], 413, "too large"),
        (["Content-Length: " + "9" * 40], 413, "too large"),
    ],
)
def test_a_bad_content_length_is_refused_at_once(
    server: ToolServer,
    capfd: pytest.CaptureFixture[str],
    headers: list[str],
    status: int,
    message: str,
) -> None:
    start = time.monotonic()
    # The body follows and the connection stays open: the answer must not wait for its end.
    code, answer = _exchange(server, _post_head(server, *headers) + GOOD)
    assert (code, answer["ok"]) == (status, False) and message in answer["error"]
    assert time.monotonic() - start < 5
    _still_serves(server)
    assert capfd.readouterr().err == ""


def test_json_nested_200000_deep_is_a_bad_request(
    server: ToolServer, capfd: pytest.CaptureFixture[str]
) -> None:
    deep = b'{"tool": "add", "arguments": {"a": ' + b"[" * 200_000 + b"]" * 200_000 + b"}}"
    assert json_depth(deep) == 200_002
    code, answer = _call(server, deep)
    assert code == 400 and f"deeper than {MAX_DEPTH}" in answer["error"]
    unclosed = b"{" * 300_000
    assert _call(server, unclosed)[0] == 400
    _still_serves(server)
    assert capfd.readouterr().err == ""


def test_a_body_of_a_million_tiny_values_is_a_bad_request(server: ToolServer) -> None:
    """Under the size cap, but it would parse into some 90 MB of Python objects."""
    wide = b'{"tool": "add", "arguments": {"a": [' + b",".join([b"{}"] * 1_000_000) + b"]}}"
    assert len(wide) < MAX_BODY and json_items(wide) > MAX_ITEMS
    code, answer = _call(server, wide)
    assert code == 400 and f"more than {MAX_ITEMS} values" in answer["error"]
    text = ",[{" * 200_000  # inside a string: no values
    code, answer = _call(server, {"tool": "echo", "arguments": {"text": text}})
    assert (code, answer) == (200, {"ok": True, "result": text})
    _still_serves(server)


def test_brackets_inside_strings_are_not_nesting(server: ToolServer) -> None:
    text = '[{"\\"' * 1000
    code, answer = _call(server, {"tool": "echo", "arguments": {"text": text}})
    assert (code, answer) == (200, {"ok": True, "result": text})
    code, answer = _call(server, {"tool": "add", "arguments": {"a": [[[[1]]]]}})
    assert code == 200 and "invalid arguments" in answer["error"]


def test_a_5_mib_body_is_refused_unread(
    server: ToolServer, capfd: pytest.CaptureFixture[str]
) -> None:
    body = b'{"tool": "echo", "arguments": {"text": "' + b"x" * (5 * 1024 * 1024) + b'"}}'
    code, answer = _call(server, body)
    assert code == 413 and "too large" in answer["error"]
    _still_serves(server)
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'"add"',
        b"42",
        b"null",
        b"",
        b"{",
        b'{"tool": 1}',
        b'{"tool": "add", "arguments": [1]}',
        b'{"arguments": {"a": 1}}',
        b'{"tool": "\xff\xfe"}',
        b'{"tool": "add", "arguments": {"a": ' + b"1" * 5000 + b"}}",
    ],
)
def test_a_body_that_is_not_a_call_object_is_a_bad_request(
    server: ToolServer, capfd: pytest.CaptureFixture[str], body: bytes
) -> None:
    code, answer = _call(server, body)
    assert code == 400 and answer["ok"] is False and answer["error"].startswith("bad request")
    _still_serves(server)
    assert capfd.readouterr().err == ""


def _closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> bytes | None:
    """What the server sent before closing, while ``trickle`` goes out a byte at a time.

    None when the connection is still open after ``seconds``.
    """
    end = time.monotonic() + seconds
    received = b""
    for i in range(10_000):
        if time.monotonic() > end:
            return None
        if i < len(trickle):
            try:
                sock.sendall(trickle[i : i + 1])
            except OSError:
                return received
        readable, _, _ = select.select([sock], [], [], 0.1)
        if readable:
            try:
                chunk = sock.recv(65536)
            except OSError:
                return received
            if not chunk:
                return received
            received += chunk
    return None


def test_a_slow_client_is_cut_off_at_the_read_timeout(
    server: ToolServer, capfd: pytest.CaptureFixture[str]
) -> None:
    # Each of these clients is never idle for long, but takes longer than the 1 s allowed.
    request = _post_head(server, f"Content-Length: {len(GOOD)}") + GOOD
    with socket.create_connection(_address(server), timeout=10) as idle:
        idle.sendall(b"POST /call HTTP/1.1\r\n")
        start = time.monotonic()
        assert _closed_within(idle, 5) == b""
        assert 0.8 < time.monotonic() - start < 5
    with socket.create_connection(_address(server), timeout=10) as headers:
        assert _closed_within(headers, 5, trickle=request) is not None
    head = _post_head(server, f"Content-Length: {len(GOOD)}")
    with socket.create_connection(_address(server), timeout=10) as body:
        body.sendall(head)
        answer = _closed_within(body, 5, trickle=GOOD * 100)
        assert answer is not None and answer.startswith(b"HTTP/1.0 408")
        assert b"too long to arrive" in answer
    _still_serves(server)
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(
    "token",
    ["", "wrong", "Bearer", "TRUNCATED", "caf\xe9", "x" * 10_000],
    ids=["none", "wrong", "bare-bearer", "truncated", "non-ascii", "long"],
)
def test_a_missing_or_wrong_token_is_refused(
    server: ToolServer, capfd: pytest.CaptureFixture[str], token: str
) -> None:
    token = server.token[:-1] if token == "TRUNCATED" else token
    head = _post_head(server, f"Content-Length: {len(GOOD)}", token=token)
    code, answer = _exchange(server, head + GOOD)
    assert code == 401 and "token" in answer["error"]
    get = f"GET /tools HTTP/1.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode("latin-1")
    assert _exchange(server, get)[0] == 401
    _still_serves(server)
    assert capfd.readouterr().err == ""


def test_unknown_tools_and_paths_are_refused(server: ToolServer) -> None:
    code, answer = _call(server, {"tool": "rm", "arguments": {}})
    assert code == 200 and answer["ok"] is False and "unknown tool 'rm'" in answer["error"]
    get = f"GET /secrets HTTP/1.1\r\nAuthorization: Bearer {server.token}\r\n\r\n".encode()
    assert _exchange(server, get)[0] == 404


def test_a_handler_failure_is_a_500_without_a_traceback(
    server: ToolServer, capfd: pytest.CaptureFixture[str]
) -> None:
    code, answer = _call(server, {"tool": "odd"})
    assert code == 500 and answer == {
        "ok": False,
        "error": "internal error of the tool server: RuntimeError",
    }
    with pytest.raises(ToolError, match="internal error") as caught:
        ToolClient(server.url, server.token, timeout=5).call("odd")
    assert isinstance(caught.value, ToolClientError)
    _still_serves(server)
    assert capfd.readouterr().err == ""


def _run_client(
    server: ToolServer, program: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {"PATH": "/usr/bin:/bin", **server.env()} if env is None else env
    return subprocess.run(
        [SYSTEM_PYTHON, str(program), *args],
        capture_output=True,
        text=True,
        env=clean,
        cwd="/tmp",
        timeout=60,
    )


def test_the_client_program_runs_alone_on_the_system_python(
    server: ToolServer, tmp_path: Path
) -> None:
    res = _run_client(server, CLIENT, "tool", "list")
    assert res.returncode == 0, res.stderr
    assert [t["name"] for t in json.loads(res.stdout)] == ["add", "echo", "odd"]
    alone = tmp_path / "bin" / "toolclient.py"  # a copy with no package beside it
    alone.parent.mkdir()
    shutil.copy(CLIENT, alone)
    res = _run_client(server, alone, "call", "add", "a=2", "--args-json", '{"b": 40}')
    assert (res.returncode, res.stdout, res.stderr) == (0, "42\n", "")
    res = _run_client(server, alone, "tool", "task")
    assert res.returncode == 0 and json.loads(res.stdout)["goal"] == "add numbers"
    res = _run_client(server, alone, "tool", "call", "add", "a=x")
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.startswith("itbench: invalid arguments for add")
    res = _run_client(server, alone, "tool", "call", "add", "oops")
    assert res.returncode == 2 and "'oops' is not KEY=VALUE" in res.stderr
    res = _run_client(server, alone, "tool", "list", env={"PATH": "/usr/bin:/bin"})
    assert res.returncode == 2 and "ITBENCH_TOOLS_URL" in res.stderr
    res = _run_client(server, alone, "tool", "call", "--help")
    assert res.returncode == 0 and "--args-json" in res.stdout


def test_the_client_program_imports_only_the_standard_library() -> None:
    tree = ast.parse(CLIENT.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "no relative imports"
            imported.add((node.module or "").split(".")[0])
    assert imported and imported <= sys.stdlib_module_names | {"__future__"}, imported
