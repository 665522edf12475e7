"""The client of a trial's tool server, and its command line (``itbench tool ...``).

This file uses the standard library only and imports nothing else, so it runs on its own:
``python3 toolclient.py tool call NAME key=value...`` (the leading ``tool`` is optional).
It reads the server's address from ``ITBENCH_TOOLS_URL`` and its token from
``ITBENCH_TOOLS_TOKEN``. Exit codes: 0 done, 1 the call failed (the message on stderr),
2 bad usage.

Protocol (JSON, every request carries ``Authorization: Bearer <token>``):

- ``GET /task`` — the task view;
- ``GET /tools`` — the tool specs (name, description, JSON-schema parameters, action flag);
- ``POST /call`` with ``{"tool": NAME, "arguments": {...}}`` — answers
  ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": "..."}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

URL_ENV = "ITBENCH_TOOLS_URL"
TOKEN_ENV = "ITBENCH_TOOLS_TOKEN"

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
PROG = "itbench tool"


class ToolClientError(Exception):
    """A request the tool server refused or could not answer; the message says why."""


class UsageProblem(ValueError):
    """The command line or the environment does not say what to call, or where."""


class ToolClient:
    """A client of a trial's tool server."""

    #: Raised with the server's message when a request fails.
    error: ClassVar[type[Exception]] = ToolClientError

    def __init__(self, url: str, token: str, timeout: float = 120.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ToolClient:
        """A client of the server named by ``ITBENCH_TOOLS_URL`` and ``ITBENCH_TOOLS_TOKEN``.

        Raises:
            UsageProblem: either variable is missing.
        """
        env = os.environ if environ is None else environ
        url, token = env.get(URL_ENV), env.get(TOKEN_ENV)
        if not url or not token:
            raise UsageProblem(
                f"{URL_ENV} and {TOKEN_ENV} must be set (run me from a trial's agent)"
            )
        return cls(url, token)

    def _request(self, path: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method="GET" if data is None else "POST"
        )
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310 - loopback URL
                body = resp.read()
        except urllib.error.HTTPError as exc:
            answer = _loads(_read_quietly(exc))
            message = answer.get("error") if isinstance(answer, dict) else None
            raise self.error(message or f"HTTP {exc.code}") from None
        except urllib.error.URLError as exc:
            raise self.error(f"cannot reach the tool server at {self.url}: {exc.reason}") from None
        except OSError as exc:  # a reset or a timeout while reading the answer
            raise self.error(f"the tool server at {self.url} did not answer: {exc}") from None
        answer = _loads(body)
        if answer is _NOT_JSON:
            raise self.error(f"the tool server at {self.url} answered something that is not JSON")
        return answer

    def tools(self) -> list[dict[str, Any]]:
        """Tool specs."""
        result: list[dict[str, Any]] = self._request("/tools")
        return result

    def task(self) -> dict[str, Any]:
        """The task view."""
        result: dict[str, Any] = self._request("/task")
        return result

    def call(self, tool: str, /, **arguments: Any) -> Any:
        """Call a tool and return its result.

        Raises:
            ToolClientError: (or the class's ``error``) with the server's message on failure.
        """
        answer = self._request("/call", {"tool": tool, "arguments": arguments})
        if not isinstance(answer, dict):
            raise self.error("the tool server's answer is not a JSON object")
        if not answer.get("ok"):
            raise self.error(str(answer.get("error") or "tool call failed"))
        return answer.get("result")


_NOT_JSON = object()


def _loads(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _read_quietly(exc: urllib.error.HTTPError) -> bytes:
    try:
        return exc.read()
    except OSError:
        return b""


def parse_arguments(pairs: Sequence[str], args_json: str | None = None) -> dict[str, Any]:
    """Tool arguments from ``KEY=VALUE`` words (values parsed as JSON when they can be).

    Args:
        pairs: ``KEY=VALUE`` words; a VALUE that is not JSON is taken as a string.
        args_json: a JSON object of further arguments (they win over ``pairs``).

    Raises:
        UsageProblem: a word is not ``KEY=VALUE`` or ``args_json`` is not a JSON object.
    """
    out: dict[str, Any] = {}
    for item in pairs:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageProblem(f"{item!r} is not KEY=VALUE")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    if args_json:
        try:
            extra = json.loads(args_json)
        except ValueError as exc:
            raise UsageProblem(f"--args-json: {exc}") from None
        if not isinstance(extra, dict):
            raise UsageProblem("--args-json must be a JSON object")
        out.update(extra)
    return out


def print_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    top = argparse.ArgumentParser(
        prog=PROG,
        description="Call a running trial's tools. "
        f"Reads {URL_ENV} and {TOKEN_ENV}, which the `command` agent sets.",
    )
    commands = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    commands.add_parser("list", help="print the tools (name, description, parameters) as JSON")
    commands.add_parser("task", help="print the task view as JSON")
    call = commands.add_parser(
        "call",
        help="call tool NAME and print its result as JSON",
        description="Call tool NAME; VALUEs are parsed as JSON when they can be. Prints the "
        "result as JSON; exits 1 with the tool's error message on stderr when the call fails.",
    )
    call.add_argument("name", metavar="NAME")
    call.add_argument("arguments", nargs="*", metavar="KEY=VALUE")
    call.add_argument("--args-json", help="all arguments as one JSON object instead")
    return top, {"call": call}


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Run ``[tool] list``, ``[tool] task`` or ``[tool] call NAME [KEY=VALUE]...``.

    Args:
        argv: the words after the program name (``sys.argv[1:]`` when not given).
        environ: where to read the server's address and token (``os.environ`` when not given).

    Returns:
        The exit code: 0 done, 1 the server or the tool refused, 2 bad usage.
    """
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["tool"]:
        words = words[1:]
    top, sub = _parsers()
    try:
        if words[:1] == ["call"]:
            # Intermixed, so that options may come between or after the KEY=VALUE words.
            args = sub["call"].parse_intermixed_args(words[1:])
            args.command = "call"
        else:
            args = top.parse_args(words)
    except SystemExit as exc:  # argparse already printed help or the usage problem
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    parser = sub.get(args.command, top)
    try:
        kwargs = parse_arguments(args.arguments, args.args_json) if args.command == "call" else {}
        client = ToolClient.from_env(environ)
    except UsageProblem as exc:
        parser.print_usage(sys.stderr)
        sys.stderr.write(f"{parser.prog}: error: {exc}\n")
        return EXIT_USAGE
    try:
        if args.command == "list":
            result: Any = client.tools()
        elif args.command == "task":
            result = client.task()
        else:
            result = client.call(args.name, **kwargs)
    except ToolClientError as exc:
        sys.stderr.write(f"itbench: {exc}\n")
        return EXIT_FAILED
    print_json(result)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
