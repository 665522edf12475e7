"""The client of a trial's tool server, and its command line (``itbench tool ...``).

This file uses the standard library only and imports nothing else, so it runs on its own:
``python3 toolclient.py tool call NAME key=value...`` (the leading ``tool`` is optional); each
value is parsed by the type its parameter has in the tool's schema (``GET /tools``).
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
import math
import os
import re
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
        try:
            data = None if payload is None else json.dumps(payload, allow_nan=False).encode()
        except RecursionError:
            raise self.error("the request nests too deeply to be sent") from None
        except ValueError as exc:  # NaN or an infinity
            raise self.error(f"the request is not JSON: {exc}") from None
        req = urllib.request.Request(
            self.url + path, data=data, method="GET" if data is None else "POST"
        )
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # loopback URL
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

    def parameters(self, tool: str) -> dict[str, Any] | None:
        """The JSON-schema parameters of ``tool`` (``None`` when the server lists no such tool)."""
        for spec in self.tools():
            if isinstance(spec, dict) and spec.get("name") == tool:
                params = spec.get("parameters")
                return params if isinstance(params, dict) else None
        return None

    def call_words(self, tool: str, words: Mapping[str, str], extra: Mapping[str, Any]) -> Any:
        """Call ``tool`` with raw ``KEY=VALUE`` values typed by its schema, plus ``extra``.

        Raises:
            ToolClientError: (or the class's ``error``) a value does not fit its parameter's
                type, or the call failed.
        """
        parameters = self.parameters(tool) if words else None
        try:
            arguments = typed_arguments(tool, words, parameters)
        except ArgumentProblem as exc:
            raise self.error(str(exc)) from None
        return self.call(tool, **{**arguments, **extra})

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


class ArgumentProblem(ToolClientError):
    """A ``KEY=VALUE`` value does not have the type the tool's schema gives its parameter."""


def split_arguments(
    pairs: Sequence[str], args_json: str | None = None
) -> tuple[dict[str, str], dict[str, Any]]:
    """The raw ``KEY=VALUE`` words by key, and the ``--args-json`` object.

    Raises:
        UsageProblem: a word is not ``KEY=VALUE`` or ``args_json`` is not a JSON object.
    """
    words: dict[str, str] = {}
    for item in pairs:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageProblem(f"{item!r} is not KEY=VALUE")
        if key in words:
            raise UsageProblem(f"{key!r} is given twice; give each KEY=VALUE once")
        words[key] = raw
    extra: dict[str, Any] = {}
    if args_json:
        try:
            extra = _standard_json(args_json)
        except RecursionError:
            raise UsageProblem("--args-json: nested too deeply") from None
        except ValueError as exc:
            raise UsageProblem(f"--args-json: {exc}") from None
        if not isinstance(extra, dict):
            raise UsageProblem("--args-json must be a JSON object")
    return words, extra


_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")
_WORDS = {
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true or false)",
    "array": "a JSON array",
    "object": "a JSON object",
    "null": "null",
    "string": "a string",
}
_NO_VALUE = object()
#: Literals as JSON writes them: ``3000.0`` is a number, not an integer; ``NaN`` is neither.
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


class SchemaProblem(ArgumentProblem):
    """The tool's schema of a parameter is not valid JSON Schema, so no value can be typed."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    """A number literal as a float; ``ValueError`` past the largest float (``1e999``)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of the range of a number")
    return value


def _standard_json(text: str) -> Any:
    """Standard JSON: no ``NaN`` or ``Infinity``, nor a number that would become one."""
    return json.loads(text, parse_constant=_reject_constant, parse_float=_finite)


def _strict_json(raw: str) -> Any:
    """``raw`` parsed as standard JSON (see :func:`_standard_json`), else ``_NOT_JSON``."""
    try:
        return _standard_json(raw)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _convert(raw: str, kind: str, kinds: Sequence[str]) -> Any:
    """``raw`` as JSON-schema type ``kind`` (one of ``kinds``), or ``_NO_VALUE``.

    Raises:
        ArgumentProblem: ``raw`` is of the kind but cannot be a value (too many digits).
    """
    text = raw.strip()
    if kind == "string":
        return raw
    if kind == "boolean":
        low = text.lower()
        return True if low in _TRUE else False if low in _FALSE else _NO_VALUE
    if kind == "null":
        # An empty value is null only where it cannot be the empty string.
        return None if text == "null" or (text == "" and "string" not in kinds) else _NO_VALUE
    if kind in ("integer", "number") and _INTEGER.fullmatch(text):
        digits = len(text.lstrip("-"))
        limit = getattr(sys, "get_int_max_str_digits", int)()  # 0: no limit
        if limit and digits > limit:
            raise ArgumentProblem(f"{digits} digits, more than an integer may have ({limit})")
        return int(text)
    if kind == "integer":
        return _NO_VALUE
    if kind == "number" and _NUMBER.fullmatch(text):
        try:
            return _finite(text)
        except ValueError as exc:
            raise ArgumentProblem(str(exc)) from None
    if kind == "number":
        return _NO_VALUE
    value = _strict_json(raw)
    wanted = {"array": list, "object": dict}[kind]
    return value if isinstance(value, wanted) else _NO_VALUE


def _kinds(schema: Mapping[str, Any], defs: Mapping[str, Any], depth: int = 0) -> list[str]:
    """The JSON-schema types a parameter accepts (empty: anything), strings last.

    Raises:
        ValueError: the schema is malformed (the message says where).
    """
    ref = schema.get("$ref")
    if isinstance(ref, str) and depth < 20:
        target = defs.get(ref.rsplit("/", 1)[-1], {})
        if not isinstance(target, dict):
            raise ValueError(f"{ref!r} is {target!r}, not a schema")
        return _kinds(target, defs, depth + 1)
    kinds: list[str] = []
    for key in ("anyOf", "oneOf", "allOf"):
        alternatives = schema.get(key, [])
        if not isinstance(alternatives, list):
            raise ValueError(f"{key!r} is {alternatives!r}, not a list of schemas")
        for alternative in alternatives:
            sub = _kinds(alternative, defs, depth + 1) if isinstance(alternative, dict) else []
            if not sub:
                return []
            kinds += sub
    kind = schema.get("type", [])
    names = [kind] if isinstance(kind, str) else kind
    if not isinstance(names, list) or not all(n in _WORDS for n in names):
        raise ValueError(f"'type' is {kind!r}, not a JSON-schema type or a list of them")
    kinds += names
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise ValueError(f"'enum' is {schema['enum']!r}, not a list")
    for key in ("enum", "const"):
        values = schema.get(key, [None]) if key == "enum" else [schema.get(key)]
        if key in schema and all(isinstance(v, str) for v in values):
            kinds.append("string")
    unique = list(dict.fromkeys(kinds))
    # A value that parses as another accepted type is that type; any other is a string.
    return sorted(unique, key=lambda k: k == "string")


def _mapping(parameters: Mapping[str, Any] | None, key: str, tool: str) -> Mapping[str, Any]:
    value = (parameters or {}).get(key) or {}
    if not isinstance(value, dict):
        raise SchemaProblem(f"the schema of {tool} is malformed: {key!r} is {value!r:.80}")
    return value


def typed_arguments(
    tool: str, words: Mapping[str, str], parameters: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Tool arguments from raw ``KEY=VALUE`` words, each parsed by its parameter's type.

    A parameter of type string keeps its value verbatim (``zip=02134`` stays a string),
    integers, numbers and booleans are parsed as such, arrays and objects as JSON. Only a
    literal as JSON writes it is a number (``3000.0`` is not an integer, ``NaN`` no number),
    so where a string is also allowed anything else stays the string given. An empty value
    is null where null but no string is allowed. A value of a parameter the schema does not
    describe is parsed as JSON when it can be, else kept as a string.

    Args:
        tool: The tool's name (for messages).
        words: Raw values by parameter name.
        parameters: The tool's JSON-schema parameters (``None`` when unknown).

    Raises:
        ArgumentProblem: a value is not of its parameter's type.
        SchemaProblem: the schema of a parameter given is malformed.
    """
    props = _mapping(parameters, "properties", tool)
    defs = _mapping(parameters, "$defs", tool)
    out: dict[str, Any] = {}
    for key, raw in words.items():
        prop = props.get(key)
        try:
            kinds = _kinds(prop, defs) if isinstance(prop, dict) else []
        except (ValueError, RecursionError) as exc:
            detail = "it nests too deep" if isinstance(exc, RecursionError) else str(exc)
            raise SchemaProblem(
                f"the schema of {tool} is malformed for parameter {key!r}: {detail}"
            ) from None
        if not kinds:
            value = _strict_json(raw)
            out[key] = raw if value is _NOT_JSON else value
            continue
        for kind in kinds:
            try:
                value = _convert(raw, kind, kinds)
            except ArgumentProblem as exc:
                if "string" in kinds:
                    continue  # kept as the string given
                raise ArgumentProblem(
                    f"invalid arguments for {tool}: parameter {key!r} expects {_WORDS[kind]}: {exc}"
                ) from None
            if value is not _NO_VALUE:
                out[key] = value
                break
        else:
            expected = " or ".join(_WORDS.get(k, k) for k in kinds)
            raise ArgumentProblem(
                f"invalid arguments for {tool}: parameter {key!r} expects {expected}, got {raw!r}"
            )
    return out


def parse_arguments(
    pairs: Sequence[str],
    args_json: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    tool: str = "the tool",
) -> dict[str, Any]:
    """Tool arguments from ``KEY=VALUE`` words, typed by the tool's parameter schema.

    Args:
        pairs: ``KEY=VALUE`` words, parsed as :func:`typed_arguments` says.
        args_json: a JSON object of further arguments (they win over ``pairs``).
        parameters: the tool's JSON-schema parameters (as ``GET /tools`` lists them); without
            them a VALUE is parsed as JSON when it can be, else taken as a string.
        tool: the tool's name, for messages.

    Raises:
        UsageProblem: a word is not ``KEY=VALUE`` or ``args_json`` is not a JSON object.
        ArgumentProblem: a value is not of its parameter's type.
    """
    words, extra = split_arguments(pairs, args_json)
    return {**typed_arguments(tool, words, parameters), **extra}


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
        description="Call tool NAME; each VALUE is parsed by the type of its parameter (strings "
        "verbatim, arrays and objects as JSON). Prints the result as JSON; exits 1 with the "
        "tool's error message on stderr when a value does not fit or the call fails.",
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
        values: dict[str, str] = {}
        extra: dict[str, Any] = {}
        if args.command == "call":
            values, extra = split_arguments(args.arguments, args.args_json)
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
            result = client.call_words(args.name, values, extra)
    except ToolClientError as exc:
        sys.stderr.write(f"itbench: {exc}\n")
        return EXIT_FAILED
    print_json(result)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
