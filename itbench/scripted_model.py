"""A scripted model server speaking the OpenAI Chat Completions wire protocol, for tests.

A model API is outside the machine, so tests of model-driven agents need a stand-in: this is a
real HTTP server on 127.0.0.1 answering ``POST /v1/chat/completions`` as the protocol says
(tool calls, usage fields, error statuses), from scripts the test writes. Each conversation
gets its own script, chosen by the test's ``pick`` function from its first request; a request
continues the conversation whose messages so far (with the server's last answer) it extends,
so trials with the same opening are told apart; a request equal to a conversation's last one is
a client's retry, and gets the same answer again. Each step of a script answers one request:

- :class:`Reply`: a message with tool calls (:class:`Call`; raw argument text allowed, to play
  a malformed call) and/or text, with its usage;
- :class:`Fail`: an error status (429 with ``Retry-After``, 500...), to exercise retries;
- a callable taking the :class:`Conversation` so far and returning one of those, for a model
  that reads its tool results before deciding.

The server checks what a real one would refuse (a tool message that answers no call, a call
left unanswered) with a 400, and keeps every request body (:attr:`ScriptedModel.requests`) for
the test to inspect.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Call:
    """A tool call the scripted model makes; a ``str`` of arguments is sent verbatim."""

    tool: str
    arguments: dict[str, Any] | str = field(default_factory=dict)


@dataclass
class Reply:
    """One assistant message: tool calls and/or text, and the usage the server reports."""

    calls: list[Call] = field(default_factory=list)
    content: str | None = None
    prompt_tokens: int = 100
    completion_tokens: int = 20


@dataclass
class Fail:
    """An error answer instead of a message (the script moves on to its next step)."""

    status: int = 429
    retry_after: float | None = 0.0
    message: str = "rate limit reached, retry later"


@dataclass
class Conversation:
    """A conversation as the scripted model sees it at one request."""

    request: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request's messages."""
        found: list[dict[str, Any]] = self.request.get("messages", [])
        return found

    @property
    def tools(self) -> list[str]:
        """The names of the functions offered."""
        return [t["function"]["name"] for t in self.request.get("tools", [])]

    def results(self, tool: str) -> list[Any]:
        """What the calls of ``tool`` returned, oldest first (JSON parsed when it parses)."""
        names = {}
        for m in self.messages:
            for c in m.get("tool_calls") or []:
                names[c["id"]] = c["function"]["name"]
        out = []
        for m in self.messages:
            if m.get("role") == "tool" and names.get(m.get("tool_call_id")) == tool:
                try:
                    out.append(json.loads(m["content"]))
                except (ValueError, TypeError):
                    out.append(m["content"])
        return out

    def last(self, tool: str) -> Any:
        """What the latest call of ``tool`` returned (``None`` when it was not called)."""
        found = self.results(tool)
        return found[-1] if found else None

    def text(self) -> str:
        """Every message's content, joined (to look for a phrase)."""
        return "\n".join(str(m.get("content") or "") for m in self.messages)


Step = Reply | Fail | Callable[[Conversation], Reply | Fail]


@dataclass
class _Thread:
    """One conversation: the messages a next request starts with, and what is left of its script.

    ``asked`` is the last request's messages and ``answer`` the completion it got, to answer a
    client's retry of that request again.
    """

    said: list[Said]
    script: list[Step]
    asked: list[Said] = field(default_factory=list)
    answer: dict[str, Any] | None = None


#: Chooses the script of a new conversation from its first request.
Pick = Callable[[Conversation], Sequence[Step]]


Said = tuple[str, str, tuple[str, ...], str]


def _said(message: dict[str, Any]) -> Said:
    """What identifies a message within a conversation."""
    calls = tuple(str(c.get("id")) for c in message.get("tool_calls") or [])
    content = message.get("content")
    text = content if isinstance(content, str) else "" if content is None else json.dumps(content)
    return (str(message.get("role")), text, calls, str(message.get("tool_call_id") or ""))


def _protocol_problem(messages: Any) -> str | None:
    """What a real server would refuse in ``messages`` (``None``: nothing)."""
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    open_calls: set[str] = set()
    for m in messages:
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("system", "user", "assistant", "tool"):
            return f"invalid role {role!r}"
        if role == "tool":
            if m.get("tool_call_id") not in open_calls:
                return "messages with role 'tool' must answer a preceding 'tool_calls' entry"
            open_calls.discard(m["tool_call_id"])
            continue
        if open_calls:
            return f"tool_calls without answers: {sorted(open_calls)}"
        if role == "assistant":
            open_calls = {c["id"] for c in m.get("tool_calls") or []}
    return None


class ScriptedModel:
    """The server (see the module's documentation); use it as a context manager.

    Args:
        pick: Returns the script of each new conversation, from its first request.
    """

    def __init__(self, pick: Pick) -> None:
        self.pick = pick
        self.requests: list[dict[str, Any]] = []
        self.answered: list[Reply | Fail] = []
        self._threads: list[_Thread] = []
        #: Errors of the test's scripts (``pick`` or a step raised), answered with a 500.
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                """Keep the test's output clean."""

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length))
                except ValueError:
                    body = None
                status, headers, payload = owner.answer(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                for k, v in {**headers, "Content-Type": "application/json"}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL to give the client (``--base-url``)."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    @staticmethod
    def _error(status: int, message: str, kind: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}

    def answer(self, path: str, body: Any) -> tuple[int, dict[str, str], dict[str, Any]]:
        """The status, headers and JSON answer of one request."""
        if path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            return 404, {}, self._error(404, f"no route {path}", "not_found")
        if not isinstance(body, dict) or not body.get("model"):
            message = "a JSON body with 'model' is required"
            return 400, {}, self._error(400, message, "invalid_request_error")
        problem = _protocol_problem(body.get("messages"))
        if problem is not None:
            return 400, {}, self._error(400, problem, "invalid_request_error")
        conversation = Conversation(body)
        said = [_said(m) for m in conversation.messages]
        try:
            with self._lock:
                self.requests.append(body)
                thread = self._continued(said)
                if thread is not None and thread.asked == said and thread.answer is not None:
                    # A client's retry of a request already answered (its answer was lost).
                    return 200, {}, thread.answer
                if thread is None:
                    thread = _Thread(said, list(self.pick(conversation)))
                    self._threads.append(thread)
                step = thread.script.pop(0) if thread.script else Reply(content="(no script left)")
            reply = step(conversation) if callable(step) else step
        except Exception as exc:  # a broken script is the test's error, shown as such
            self.errors.append(f"{type(exc).__name__}: {exc}")
            return 500, {}, self._error(500, f"script error: {exc}", "server_error")
        with self._lock:
            self.answered.append(reply)
            thread.asked = said
            if isinstance(reply, Fail):
                thread.said, thread.answer = said, None
                wait = (
                    {} if reply.retry_after is None else {"Retry-After": f"{reply.retry_after:g}"}
                )
                return (
                    reply.status,
                    wait,
                    self._error(reply.status, reply.message, "rate_limit_error"),
                )
            thread.answer = self._completion(body["model"], reply)
            thread.said = [*said, _said(thread.answer["choices"][0]["message"])]
            return 200, {}, thread.answer

    def _continued(self, said: list[Said]) -> _Thread | None:
        """The conversation whose messages a request extends the most (``None``: a new one)."""
        best: _Thread | None = None
        for thread in self._threads:
            known = thread.said if said[: len(thread.said)] == thread.said else thread.asked
            if said[: len(known)] == known and (best is None or len(known) > len(best.said)):
                best = thread
        return best

    def _completion(self, model: str, reply: Reply) -> dict[str, Any]:
        n = next(self._ids)
        calls = [
            {
                "id": f"call_{n}_{i}",
                "type": "function",
                "function": {
                    "name": c.tool,
                    "arguments": c.arguments
                    if isinstance(c.arguments, str)
                    else json.dumps(c.arguments),
                },
            }
            for i, c in enumerate(reply.calls)
        ]
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
            ],
            "usage": {
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            },
        }

    @property
    def replies(self) -> list[Reply]:
        """The messages answered so far (errors left out)."""
        return [r for r in self.answered if isinstance(r, Reply)]


__all__ = ["Call", "Conversation", "Fail", "Pick", "Reply", "ScriptedModel", "Step"]
