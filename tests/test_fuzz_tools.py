"""Fuzzed tool calls: the toolbox, the tool server's HTTP requests and ``itbench tool call``.

Every call either runs the tool with arguments its schema accepts, or fails with a
:class:`ToolError` (over HTTP: a 4xx and a JSON error) naming the tool, the parameter and the
reason; the journal stays one JSON line per call; the server keeps serving; and ``KEY=VALUE``
words are typed by the tool's schema or refused naming the parameter and the type expected.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner
from fuzzing import budget, deep_json, json_values, names
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from itbench import toolclient
from itbench.cli import cli
from itbench.errors import ToolError
from itbench.testing import bare_task
from itbench.toolclient import ArgumentProblem, UsageProblem, split_arguments, typed_arguments
from itbench.tools import Tool, Toolbox
from itbench.toolserver import ToolClient, ToolServer


class Span(BaseModel):
    start: int
    end: int


def typed(
    n: int,
    x: float,
    flag: bool,
    items: list[int],
    mapping: dict[str, float],
    word: str = "",
    choice: Literal["a", "b"] | None = None,
    span: Span | None = None,
    anything: Any = None,
) -> dict[str, Any]:
    """Echo the arguments as the tool got them."""
    return {k: v.model_dump() if isinstance(v, BaseModel) else v for k, v in locals().items()}


def write(key: str, value: int) -> None:
    """Change something (an action)."""


def failing(reason: str) -> None:
    """Fail with the reason given."""
    raise RuntimeError(reason)


def odd() -> Any:
    """Answer values that are not JSON."""
    return {"set": {1, 2}, "bytes": b"\xff", "object": object()}


TOOLS = [
    Tool.from_function(typed),
    Tool.from_function(write, action=True),
    Tool.from_function(failing),
    Tool.from_function(odd),
]
PARAMETERS = sorted({p for t in TOOLS for p in t.args_model.model_fields})

arguments = st.dictionaries(
    st.one_of(st.sampled_from(PARAMETERS), names), json_values(6), max_size=6
)
tool_names = st.one_of(st.sampled_from([t.name for t in TOOLS]), names)


def _journal(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@budget(100)
@given(name=tool_names, args=arguments)
def test_a_call_runs_with_valid_arguments_or_fails_naming_tool_parameter_and_reason(
    tmp_path_factory: pytest.TempPathFactory, name: str, args: dict[str, Any]
) -> None:
    journal = tmp_path_factory.mktemp("j") / "tools.jsonl"
    box = Toolbox.of(TOOLS, journal_path=journal)
    tool = box.tools.get(name)
    try:
        expected = tool.args_model.model_validate(args) if tool else None
    except ValidationError as exc:
        expected, problems = None, exc.errors()
    try:
        result = box.call(name, **args)
    except ToolError as exc:
        message = str(exc)
        if tool is None:
            assert message.startswith(f"unknown tool {name!r}; tools: "), message
        elif expected is None:
            assert message.startswith(f"invalid arguments for {name}: "), message
            # Each problem names its parameter (or the arguments as a whole) and the reason.
            for problem in problems:
                where = ".".join(str(p) for p in problem["loc"]) or "(arguments)"
                assert f"{where}: {problem['msg']}" in message, message
        else:
            assert (
                name == "failing" and message == f"failing failed: RuntimeError: {args['reason']}"
            )
        ok = False
    else:
        assert expected is not None, "a call with invalid arguments ran"
        if name == "typed":
            assert result == typed(**dict(expected))
        ok = True
    [entry] = _journal(journal)
    assert (entry["tool"], entry["ok"]) == (name, ok)
    assert entry["arguments"].keys() == args.keys()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolServer]:
    box = Toolbox.of(TOOLS, journal_path=tmp_path_factory.mktemp("srv") / "tools.jsonl")
    task = bare_task(box, tmp_path_factory.mktemp("ws"), goal="anything")
    srv = ToolServer(box, task, read_timeout=1.0).start()
    yield srv  # stopped after the module's tests, whatever they did
    srv.stop()


@st.composite
def requests(draw: st.DrawFn, token: str) -> bytes:
    """An HTTP request as a client could send it, right or wrong in any part."""
    method = draw(st.sampled_from(["GET", "POST", "POST", "PUT", "DELETE", "HEAD", "G\x00T"]))
    path = draw(st.sampled_from(["/call", "/call", "/tools", "/task", "/", "/call?x=1", "//call"]))
    version = draw(st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/9.9", ""]))
    auth = draw(
        st.sampled_from([f"Bearer {token}", f"Bearer {token}"[:-1], "", "Bearer \u00e9", token])
    )
    if draw(st.integers(0, 3)):
        body = json.dumps(
            {
                "tool": draw(st.one_of(tool_names, json_values(2))),
                "arguments": draw(st.one_of(arguments, json_values(4))),
            }
        ).encode()
    else:
        body = draw(st.one_of(st.binary(max_size=200), deep_json().map(str.encode)))
    length = draw(
        st.one_of(
            st.just(str(len(body))),
            st.sampled_from(["", "-1", "abc", "1e3", " 5", "99999999999", "\u0663"]),
            st.integers(0, len(body) + 10).map(str),
        )
    )
    headers = ["Host: 127.0.0.1", "Content-Type: application/json"]
    if auth:
        headers.append(f"Authorization: {auth}")
    if length or draw(st.booleans()):
        headers.append(f"Content-Length: {length}")
    if draw(st.integers(0, 9)) == 0:
        headers.append(draw(st.sampled_from(["Transfer-Encoding: chunked", "Content-Length: 1"])))
    head = f"{method} {path} {version}".rstrip() + "\r\n" + "\r\n".join(headers) + "\r\n\r\n"
    return head.encode("utf-8") + body


def _exchange(server: ToolServer, data: bytes) -> bytes:
    url = urlsplit(server.url)
    chunks = []
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        # The server may answer and close before the whole request is sent (a version it does
        # not speak): what it answered is read all the same.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)  # a body shorter than announced ends here, not in 1 s
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    return b"".join(chunks)


def _status(answer: bytes) -> tuple[int, bytes | None]:
    """The status of an answer, and its body when that is JSON.

    To a request of HTTP/0.9 (no version) or of a version it does not speak, the server
    answers as HTTP/0.9 does: the body alone, JSON or the standard library's error page.
    """
    if answer.startswith(b"HTTP/"):
        head, _, body = answer.partition(b"\r\n\r\n")
        status = int(head.split(b"\r\n", 1)[0].split(b" ", 2)[1])
        return status, body if b"application/json" in head else None
    page = re.search(rb"Error code: (\d+)", answer)
    if page:
        return int(page.group(1)), None
    return (400 if b'"ok": false' in answer else 200), answer


@budget(150)
@given(data=st.data())
def test_the_tool_server_answers_any_request_with_a_status_and_a_reason(
    server: ToolServer, data: Any
) -> None:
    raised: list[BaseException] = []
    hook, threading.excepthook = threading.excepthook, lambda a: raised.append(a.exc_value)
    try:
        answer = _exchange(server, data.draw(requests(server.token), label="request"))
    finally:
        threading.excepthook = hook
    assert not raised, raised
    status, json_body = _status(answer)
    assert status < 500 or status in (501, 505), answer[:300]  # methods and versions it lacks
    if json_body is not None and status >= 400:
        payload = json.loads(json_body)
        assert payload["ok"] is False and payload["error"].strip(), payload
    # Whatever it was sent, it still serves.
    assert ToolClient(server.url, server.token, timeout=10).call("write", key="k", value=1) is None


raw_values = st.one_of(
    st.text(max_size=20),
    st.integers().map(str),
    st.floats().map(repr),
    st.sampled_from(
        ["", " 7 ", "+5", "-0", "0x10", "1_000", "1e999", "NaN", "Infinity", "null", "true"]
    ),
    st.sampled_from(["\u0663", "\u00bd", "\uff17", "9" * 5000, "-" + "9" * 4400, "1" * 4300]),
    json_values().map(json.dumps),
    deep_json().map(lambda t: t),
)


@budget(200)
@given(
    tool=st.sampled_from(TOOLS),
    words=st.dictionaries(st.one_of(st.sampled_from(PARAMETERS), names), raw_values, max_size=5),
)
def test_key_value_words_are_typed_by_the_schema_or_refused_naming_parameter_and_type(
    tool: Tool, words: dict[str, str]
) -> None:
    schema = tool.spec().parameters
    try:
        typed_args = typed_arguments(tool.name, words, schema)
    except ArgumentProblem as exc:
        message = str(exc)
        assert message.startswith(f"invalid arguments for {tool.name}: parameter "), message
        key = message.split("parameter ", 1)[1].split(" expects", 1)[0]
        assert key in {repr(k) for k in words}, message
        assert "expects" in message
        return
    assert typed_args.keys() == words.keys()
    for key, raw in words.items():
        if schema["properties"].get(key, {}).get("type") == "string":
            assert typed_args[key] == raw  # strings stay verbatim
    json.dumps(typed_args, allow_nan=False)  # what is sent is plain JSON
    box = Toolbox.of(TOOLS)
    try:
        box.call(tool.name, **typed_args)
    except ToolError as exc:
        assert str(exc).startswith((f"invalid arguments for {tool.name}: ", f"{tool.name} failed"))


@budget(100)
@given(
    pairs=st.lists(
        st.one_of(
            st.tuples(st.one_of(st.sampled_from(PARAMETERS), names), raw_values).map("=".join),
            st.text(max_size=10),
        ),
        max_size=5,
    ),
    args_json=st.one_of(
        st.none(), json_values().map(json.dumps), deep_json(), st.text(max_size=20)
    ),
)
def test_words_and_args_json_are_split_or_refused_with_the_reason(
    pairs: list[str], args_json: str | None
) -> None:
    try:
        words, extra = split_arguments(pairs, args_json)
    except UsageProblem as exc:
        message = str(exc)
        assert "KEY=VALUE" in message or "given twice" in message or "--args-json" in message
        return
    assert isinstance(extra, dict)
    json.dumps(extra, allow_nan=False)
    assert set(words) == {p.partition("=")[0] for p in pairs}


@budget(40)
@given(
    name=tool_names,
    pairs=st.lists(
        st.tuples(st.one_of(st.sampled_from(PARAMETERS), names), raw_values).map("=".join),
        max_size=4,
    ),
    args_json=st.one_of(st.none(), json_values().map(json.dumps), deep_json()),
)
def test_itbench_tool_call_exits_with_a_status_and_never_a_traceback(
    server: ToolServer, name: str, pairs: list[str], args_json: str | None
) -> None:
    argv = ["call", name, *pairs, *(["--args-json", args_json] if args_json is not None else [])]
    # The standalone client (what runs inside the sandbox) ...
    code = toolclient.main(argv, server.env())
    assert code in (0, 1, 2)
    # ... and the CLI's command.
    res = CliRunner().invoke(cli, ["tool", *argv], env=server.env())
    assert res.exit_code in (0, 1, 2), res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output
