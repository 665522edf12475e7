"""The embedded Rego engines' worker: regorus or rego-cpp (regopy) in a process of its own.

The harness starts it with an empty environment (``opa.runtime()`` sees no variable of the
harness) and talks to it over a pipe: one JSON request per line on stdin, one JSON reply per
line on the original stdout (whatever an engine itself prints goes to stderr). A policy that
crashes or exhausts the engine takes down this process, never the harness.

Results are read through each engine's value API (Python values from regorus, the node tree
of rego-cpp), never by parsing the engine's printed JSON; sets come back as sorted lists.

Requests and replies:

- ``{"op": "compile", "modules": {file: source}}`` → ``{"error": message | null}``;
- ``{"op": "evaluate", "modules": ..., "queries": [q...], "inputs": [doc...]}`` →
  ``{"error": compile message | null, "rows": [[[value, error, kind], ...], ...]}`` where
  ``rows[i][j]`` is query ``j`` on input ``i`` and ``kind`` classifies an error: ``policy``
  (a runtime error OPA defines: conflicting values, a built-in function's error, a call of an
  unknown function) or ``engine`` (the engine failed: an internal error or panic).

Run as ``python -I -m itbench_ciso.regoworker ENGINE`` (``regorus`` or ``regopy``).
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

from itbench_ciso.opa_builtins import EXTENSIONS, rewrite_walk

#: The engines this worker can run.
ENGINES = ("regorus", "regopy")

_ERROR = re.compile(r"\(error (\d+):")
_MSG = re.compile(r"\(errormsg (\d+):")
#: regorus locates an error as ``--> file:line:col`` before its source excerpt.
_REGORUS_WHERE = re.compile(r"-->\s*(\S+:\d+:\d+)")
_REGORUS_ERROR = re.compile(r"^error:\s*(.*)$", re.MULTILINE | re.DOTALL)


class CompileError(Exception):
    """The modules (or a query) do not compile; the message is formatted."""


def plain(value: Any) -> Any:
    """A Python value of an engine as JSON-able data: sets as sorted lists, keys as text."""
    if isinstance(value, (set, frozenset, list, tuple)):
        items = [plain(v) for v in value]
        if isinstance(value, (set, frozenset)):
            items.sort(key=lambda v: json.dumps(v, sort_keys=True))
        return items
    if isinstance(value, dict):
        return {
            (k if isinstance(k, str) else json.dumps(plain(k), sort_keys=True)): plain(v)
            for k, v in value.items()
        }
    return value


# --- regorus ----------------------------------------------------------------------------------


def regorus_message(raw: str) -> str:
    """``file:line:col: message`` of a regorus error (its backtrace and excerpt dropped)."""
    text = raw.split("Stack backtrace:", 1)[0].strip()
    where = _REGORUS_WHERE.search(text)
    found = _REGORUS_ERROR.search(text)
    message = " ".join((found.group(1) if found else text).split())
    return f"{where.group(1)}: {message}" if where else message


class Regorus:
    """regorus (Rust) through its Python bindings."""

    def __init__(self, modules: dict[str, str]) -> None:
        import regorus

        self.engine = regorus.Engine()
        for builtin, (nargs, function) in EXTENSIONS.items():
            self.engine.add_extension(builtin, nargs, function)
        for name, source in modules.items():
            try:
                self.engine.add_policy(name, rewrite_walk(source))
            except Exception as exc:  # the bindings raise RuntimeError for every parse error
                raise CompileError(regorus_message(str(exc))) from None

    def set_input(self, doc: Any) -> None:
        """Set the input document."""
        self.engine.set_input(doc)

    def query(self, query: str) -> list[Any]:
        """``[value, error, kind]`` of one rule reference."""
        try:
            try:
                value = plain(self.engine.eval_rule(query))
            except TypeError:
                # The bindings make a Python set of a Rego set, which cannot hold objects:
                # take the same value as serialised by the engine's own serde encoder.
                value = json.loads(self.engine.eval_rule_as_json(query))
        except RuntimeError as exc:
            return [None, regorus_message(str(exc)), "policy"]
        except BaseException as exc:  # a Rust panic arrives as pyo3's PanicException
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            return [None, f"the engine failed: {type(exc).__name__}: {exc}"[:2000], "engine"]
        return [value, None, None]


# --- regopy (rego-cpp) -----------------------------------------------------------------------


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


def node_value(node: Any) -> Any:
    """A rego-cpp result node as a Python value (sets as lists)."""
    from regopy import NodeKind  # type: ignore[import-untyped]

    kind = node.kind
    if kind in (NodeKind.Term, NodeKind.Scalar):
        return node_value(node.at(0))
    if kind == NodeKind.String:
        return _string(node.value)
    if kind in (NodeKind.Int, NodeKind.Float, NodeKind.Null):
        return node.value
    if kind in (NodeKind.True_, NodeKind.False_, NodeKind.Boolean):
        return node.value if kind == NodeKind.Boolean else kind == NodeKind.True_
    if kind in (NodeKind.Array, NodeKind.Terms):
        return [node_value(node.at(i)) for i in range(len(node))]
    if kind == NodeKind.Set:
        members = {}
        for child in node._children.values():
            value = node_value(child)
            members[json.dumps(value, sort_keys=True)] = value
        return [members[k] for k in sorted(members)]
    if kind == NodeKind.Object:
        return _object(node)
    raise ValueError(f"unexpected result node {node.kind_name}")


def _string(raw: str) -> str:
    """A rego-cpp string: strings that came from a JSON token keep their quotes inside it."""
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        try:
            value = json.loads(raw)
        except ValueError:
            return raw
        if isinstance(value, str):
            return value
    return raw


def _object(node: Any) -> dict[str, Any]:
    """An object node: its items hold the key at 0 and the value at 1."""
    from regopy.node import Node  # type: ignore[import-untyped]
    from regopy.rego_shared import rego_node_get, rego_node_size  # type: ignore[import-untyped]

    out: dict[str, Any] = {}
    for i in range(rego_node_size(node._impl)):
        item = Node(rego_node_get(node._impl, i))
        key = node_value(item.at(0))
        out[key if isinstance(key, str) else json.dumps(key, sort_keys=True)] = node_value(
            item.at(1)
        )
    return out


class Regopy:
    """rego-cpp through regopy, with strict built-in errors (as the judge's semantics)."""

    def __init__(self, modules: dict[str, str]) -> None:
        import regopy

        self.modules = modules
        self.interp = regopy.Interpreter()
        self.interp.log_level = regopy.LogLevel.NONE  # errors are returned, not printed
        self.interp.strict_built_in_errors = True
        for fname, source in modules.items():
            try:
                self.interp.add_module(fname, source)
            except regopy.RegoError as exc:
                raise CompileError(format_rego_error(str(exc), modules)) from None

    def set_input(self, doc: Any) -> None:
        """Set the input document."""
        self.interp.set_input(doc)

    def query(self, query: str) -> list[Any]:
        """``[value, error, kind]`` of one query."""
        import regopy
        from regopy.interpreter import rego_query  # type: ignore[import-untyped]
        from regopy.node import Node
        from regopy.output import (  # type: ignore[import-untyped]
            rego_free_output,
            rego_output_expressions_at_index,
            rego_output_ok,
            rego_output_string,
        )

        try:
            impl = rego_query(self.interp._impl, query)
        except regopy.RegoError as exc:
            raise CompileError(format_rego_error(str(exc), self.modules)) from None
        try:
            if not rego_output_ok(impl):
                return [None, _regopy_errors(impl), "policy"]
            # "undefined" is the engine's sentinel for no result (it has no node then).
            if rego_output_string(impl) == "undefined":
                return [None, None, None]
            terms = Node(rego_output_expressions_at_index(impl, 0))
            try:
                value = node_value(terms.at(0)) if len(terms) else None
            except (ValueError, IndexError) as exc:
                return [None, f"the engine failed: {exc}", "engine"]
            return [value, None, None]
        finally:
            rego_free_output(impl)


def _regopy_errors(impl: Any) -> str:
    """``code: message`` of each error of a failed rego-cpp query (read from its node tree)."""
    from regopy import NodeKind
    from regopy.output import rego_output_node
    from regopy.rego_shared import (
        rego_node_get,
        rego_node_size,
        rego_node_type,
        rego_node_value,
    )

    lines = []
    seq = rego_output_node(impl)
    for i in range(rego_node_size(seq)):
        err = rego_node_get(seq, i)
        parts = {}
        for j in range(rego_node_size(err)):
            child = rego_node_get(err, j)
            kind = rego_node_type(child)
            if kind in (NodeKind.ErrorMessage, NodeKind.ErrorCode):
                parts[kind] = rego_node_value(child)
        code, msg = parts.get(NodeKind.ErrorCode, ""), parts.get(NodeKind.ErrorMessage, "")
        lines.append(f"{code}: {msg}" if code else msg or "evaluation error")
    return "\n".join(dict.fromkeys(lines)) or "evaluation error"


def _engine(name: str, modules: dict[str, str]) -> Regorus | Regopy:
    return Regorus(modules) if name == "regorus" else Regopy(modules)


def handle(engine: str, request: dict[str, Any]) -> dict[str, Any]:
    """Answer one request."""
    modules = {str(k): str(v) for k, v in dict(request.get("modules") or {}).items()}
    try:
        interp = _engine(engine, modules)
        if request.get("op") == "compile":
            return {"error": None}
        rows = []
        for doc in request.get("inputs") or []:
            interp.set_input(doc)
            rows.append([interp.query(str(q)) for q in request.get("queries") or []])
        return {"error": None, "rows": rows}
    except CompileError as exc:
        return {"error": str(exc)}


def main(argv: list[str] | None = None) -> int:
    """Serve requests until stdin ends."""
    args = sys.argv[1:] if argv is None else argv
    engine = args[0] if args else "regorus"
    if engine not in ENGINES:
        print(f"unknown engine {engine!r}; one of {', '.join(ENGINES)}", file=sys.stderr)
        return 2
    # The protocol keeps the original stdout; anything the engine prints goes to stderr.
    reply = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    for line in sys.stdin:
        try:
            text = json.dumps(handle(engine, json.loads(line)))
        except Exception as exc:  # a malformed request or value must not end the worker
            text = json.dumps({"error": f"{type(exc).__name__}: {exc}", "fatal": True})
        reply.write(text + "\n")
        reply.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
