"""The embedded Rego engine's worker: rego-cpp (regopy) in a process of its own.

The harness starts it with an empty environment (``opa.runtime()`` sees no variable of the
harness), a memory limit, and talks to it over a pipe: one JSON request per line on stdin, one
JSON reply per line on the original stdout (whatever rego-cpp itself prints goes to stderr).
A policy that crashes or exhausts the engine takes down this process, never the harness.

Requests and replies:

- ``{"op": "compile", "modules": {file: source}}`` → ``{"error": message | null}``;
- ``{"op": "evaluate", "modules": ..., "queries": [q...], "inputs": [doc...]}`` →
  ``{"error": compile message | null, "rows": [[[value, error], ...], ...]}`` where
  ``rows[i][j]`` is query ``j`` on input ``i``.

Run as ``python -I -m itbench_ciso.regoworker``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

_ERROR = re.compile(r"\(error (\d+):")
_MSG = re.compile(r"\(errormsg (\d+):")


class CompileError(Exception):
    """The modules (or a query) do not compile; the message is formatted."""


def _sized(text: str, match: re.Match[str]) -> str:
    size = int(match.group(1))
    start = match.end()
    return text[start : start + size]


def format_rego_error(raw: str, modules: dict[str, str]) -> str:
    """Turn rego-cpp's error tree into ``file:line:col: message`` lines."""
    lines: list[str] = []
    for err in _ERROR.finditer(raw):
        name = _sized(raw, err)
        rest = raw[err.end() + len(name) :]
        loc = re.match(r"\|(\d+)\|(\d+)", rest)
        msg_match = _MSG.search(raw, err.end())
        msg = _sized(raw, msg_match) if msg_match else "error"
        where = name or "policy"
        if loc and name in modules:
            offset = int(loc.group(1))
            before = modules[name][:offset]
            line = before.count("\n") + 1
            col = offset - (before.rfind("\n") + 1) + 1
            where = f"{name}:{line}:{col}"
        lines.append(f"{where}: {msg}")
    if not lines:
        msgs = [_sized(raw, m) for m in _MSG.finditer(raw)]
        lines = msgs or [raw.strip()[:500] or "the engine reported an error without a message"]
    # rego-cpp repeats a message per enclosing construct; keep each once, in order.
    return "\n".join(dict.fromkeys(lines))


def _interpreter(modules: dict[str, str]) -> Any:
    import regopy  # type: ignore[import-untyped]

    interp = regopy.Interpreter()
    interp.log_level = regopy.LogLevel.NONE  # errors are returned, not printed
    for fname, source in modules.items():
        try:
            interp.add_module(fname, source)
        except regopy.RegoError as exc:
            raise CompileError(format_rego_error(str(exc), modules)) from None
    return interp


def _query(interp: Any, query: str, modules: dict[str, str]) -> list[Any]:
    """``[value, error]`` of one query."""
    import regopy
    from regopy.interpreter import rego_query  # type: ignore[import-untyped]
    from regopy.output import (  # type: ignore[import-untyped]
        rego_free_output,
        rego_output_ok,
        rego_output_string,
    )

    try:
        impl = rego_query(interp._impl, query)
    except regopy.RegoError as exc:
        raise CompileError(format_rego_error(str(exc), modules)) from None
    try:
        ok = rego_output_ok(impl)
        text = rego_output_string(impl)
    finally:
        rego_free_output(impl)
    if not ok:
        return [None, "evaluation error (for example conflicting values of a rule)"]
    if text == "undefined":
        return [None, None]
    try:
        doc = json.loads(text, strict=False)  # rego-cpp leaves control characters raw
    except json.JSONDecodeError:
        return [None, format_rego_error(text, modules)]
    results = doc if isinstance(doc, list) else [doc]
    exprs = results[0].get("expressions", []) if results and isinstance(results[0], dict) else []
    return [exprs[0] if exprs else None, None]


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Answer one request."""
    modules = {str(k): str(v) for k, v in dict(request.get("modules") or {}).items()}
    try:
        interp = _interpreter(modules)
        if request.get("op") == "compile":
            interp.set_input({})
            _query(interp, "data", modules)
            return {"error": None}
        rows = []
        for doc in request.get("inputs") or []:
            interp.set_input(doc)
            rows.append([_query(interp, str(q), modules) for q in request.get("queries") or []])
        return {"error": None, "rows": rows}
    except CompileError as exc:
        return {"error": str(exc)}


def main() -> int:
    """Serve requests until stdin ends."""
    # The protocol keeps the original stdout; anything the engine prints goes to stderr.
    reply = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    for line in sys.stdin:
        try:
            text = json.dumps(handle(json.loads(line)))
        except Exception as exc:  # a malformed request or value must not end the worker
            text = json.dumps({"error": f"{type(exc).__name__}: {exc}", "fatal": True})
        reply.write(text + "\n")
        reply.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
