"""Rego policy engines: embedded (regopy, in-process) and an OPA server (opa-python-client)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from itbench.domain import InfrastructureError

#: The package every single-policy submission declares; its rule ``violations`` is queried.
PACKAGE = "compliance"
RULE = "violations"

_PACKAGE_LINE = re.compile(r"^package\s+([A-Za-z_][\w.]*)", re.MULTILINE)


class PolicyError(Exception):
    """A policy could not be compiled or evaluated; the message is the engine's."""


@dataclass
class Verdict:
    """The result of one query on one input.

    Attributes:
        value: The query's value (``None`` when undefined).
        error: The engine's message when evaluation failed.
    """

    value: Any = None
    error: str | None = None


class PolicyEngine(ABC):
    """A Rego engine that compiles a set of modules and evaluates one query on many inputs."""

    name: str = ""

    @abstractmethod
    def compile(self, modules: dict[str, str]) -> str | None:
        """Check that ``modules`` (file name -> source) compile; return the error message or None."""

    @abstractmethod
    def evaluate(self, modules: dict[str, str], query: str, inputs: list[Any]) -> list[Verdict]:
        """Evaluate ``query`` (a ``data.`` reference) once per input document.

        Raises:
            PolicyError: the modules do not compile.
        """

    def evaluate_queries(
        self, modules: dict[str, str], queries: list[str], inputs: list[Any]
    ) -> list[list[Verdict]]:
        """Evaluate several queries per input: ``result[i][j]`` is query ``j`` on input ``i``.

        Raises:
            PolicyError: the modules do not compile.
        """
        per_query = [self.evaluate(modules, q, inputs) for q in queries]
        return [[per_query[j][i] for j in range(len(queries))] for i in range(len(inputs))]

    def close(self) -> None:  # noqa: B027 - optional
        """Release whatever the engine holds."""


# --- embedded -------------------------------------------------------------------------------

#: rego-cpp is not known to be thread safe: every call into it holds this lock.
_REGO_LOCK = threading.Lock()
_ERROR = re.compile(r"\(error (\d+):")
_MSG = re.compile(r"\(errormsg (\d+):")


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


class EmbeddedEngine(PolicyEngine):
    """rego-cpp through regopy, in-process: Rego v1 (``import rego.v1``, ``contains``, ``if``)."""

    name = "embedded"

    def _interpreter(self, modules: dict[str, str]) -> Any:
        import regopy  # type: ignore[import-untyped]

        interp = regopy.Interpreter()
        interp.log_level = regopy.LogLevel.NONE  # errors are returned, not printed
        for fname, source in modules.items():
            try:
                interp.add_module(fname, source)
            except regopy.RegoError as exc:
                raise PolicyError(format_rego_error(str(exc), modules)) from None
        return interp

    def _query(self, interp: Any, query: str, modules: dict[str, str]) -> Verdict:
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
            raise PolicyError(format_rego_error(str(exc), modules)) from None
        try:
            ok = rego_output_ok(impl)
            text = rego_output_string(impl)
        finally:
            rego_free_output(impl)
        if not ok:
            return Verdict(error="evaluation error (for example conflicting values of a rule)")
        if text == "undefined":
            return Verdict(value=None)
        try:
            doc = json.loads(text, strict=False)  # rego-cpp leaves control characters raw
        except json.JSONDecodeError:
            return Verdict(error=format_rego_error(text, modules))
        results = doc if isinstance(doc, list) else [doc]
        exprs = (
            results[0].get("expressions", []) if results and isinstance(results[0], dict) else []
        )
        return Verdict(value=exprs[0] if exprs else None)

    def compile(self, modules: dict[str, str]) -> str | None:
        """Parse and compile ``modules``; the engine's message on failure."""
        with _REGO_LOCK:
            try:
                interp = self._interpreter(modules)
                interp.set_input({})
                self._query(interp, "data", modules)
            except PolicyError as exc:
                return str(exc)
        return None

    def evaluate(self, modules: dict[str, str], query: str, inputs: list[Any]) -> list[Verdict]:
        """Evaluate ``query`` once per input with one interpreter."""
        return [row[0] for row in self.evaluate_queries(modules, [query], inputs)]

    def evaluate_queries(
        self, modules: dict[str, str], queries: list[str], inputs: list[Any]
    ) -> list[list[Verdict]]:
        """Every query on every input, setting each input once (the costly step)."""
        out: list[list[Verdict]] = []
        with _REGO_LOCK:
            interp = self._interpreter(modules)
            for doc in inputs:
                interp.set_input(doc)
                out.append([self._query(interp, q, modules) for q in queries])
        return out


# --- OPA server -------------------------------------------------------------------------------


class OpaEngine(PolicyEngine):
    """An OPA server reached through opa-python-client.

    Args:
        url: ``http://host:port`` of the server.
    """

    name = "opa"

    def __init__(self, url: str) -> None:
        from urllib.parse import urlparse

        import requests
        from opa_client import OpaClient  # type: ignore[import-untyped]

        parsed = urlparse(url)
        self.url = url
        self.client = OpaClient(
            host=parsed.hostname or "127.0.0.1", port=parsed.port or 8181, timeout=30
        )
        self._lock = threading.Lock()
        self._counter = 0
        self._prefix = ""
        try:
            resp = self.client._session.get(f"{url.rstrip('/')}/health", timeout=10)
        except requests.RequestException as exc:
            raise InfrastructureError(f"OPA server {url} is not reachable: {exc}") from None
        if resp.status_code != 200:
            raise InfrastructureError(f"OPA server {url} is not healthy: HTTP {resp.status_code}")

    def _load(self, modules: dict[str, str]) -> list[str]:
        import requests
        from opa_client.errors import RegoParseError  # type: ignore[import-untyped]

        self._counter += 1
        self._prefix = f"itbench_{os.getpid()}_{id(self)}_{self._counter}"
        ids: list[str] = []
        for i, original in enumerate(modules.values()):
            # A server may be shared by concurrent trials: each load gets its own namespace.
            source = _PACKAGE_LINE.sub(rf"package {self._prefix}.\1", original, count=1)
            pid = f"{self._prefix}-{i}"
            try:
                self.client.update_policy_from_string(source, pid, rego_compat=False)
            except RegoParseError as exc:
                self._unload(ids)
                raise PolicyError(str(exc)) from None
            except (OSError, requests.RequestException) as exc:
                self._unload(ids)
                raise InfrastructureError(f"OPA server {self.url}: {exc}") from None
            except Exception as exc:  # the client raises several types for a 400
                self._unload(ids)
                raise PolicyError(f"{type(exc).__name__}: {exc}") from None
            ids.append(pid)
        return ids

    def _unload(self, ids: list[str]) -> None:
        for pid in ids:
            with contextlib.suppress(Exception):  # best effort cleanup
                self.client.delete_policy(pid)

    def compile(self, modules: dict[str, str]) -> str | None:
        """Upload the modules (the server compiles them), then remove them."""
        with self._lock:
            try:
                ids = self._load(modules)
            except PolicyError as exc:
                return str(exc)
            self._unload(ids)
        return None

    def evaluate(self, modules: dict[str, str], query: str, inputs: list[Any]) -> list[Verdict]:
        """Upload, query once per input, remove."""
        out: list[Verdict] = []
        with self._lock:
            ids = self._load(modules)
            path = f"{self._prefix}.{query.removeprefix('data.')}".replace(".", "/")
            try:
                for doc in inputs:
                    try:
                        resp = self.client._session.post(
                            f"{self.client.root_url}/data/{path}",
                            json={"input": doc},
                            timeout=30,
                        )
                        body = resp.json()
                    except Exception as exc:
                        out.append(Verdict(error=f"{type(exc).__name__}: {exc}"))
                        continue
                    if resp.status_code != 200:
                        out.append(Verdict(error=str(body.get("message", body))))
                    else:
                        out.append(Verdict(value=body.get("result")))
            finally:
                self._unload(ids)
        return out


class OpaServer:
    """An ``opa run --server`` process on 127.0.0.1, owned by one trial.

    Args:
        binary: Path of the ``opa`` executable.
        port: TCP port.
        trial_dir: Where the log and pid file go.
    """

    def __init__(self, binary: str, port: int, trial_dir: Path) -> None:
        from itbench.process import ManagedProcess

        self.port = port
        self.process = ManagedProcess(
            "opa",
            [binary, "run", "--server", "--addr", f"127.0.0.1:{port}", "--log-level", "error"],
            trial_dir,
        )

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the server and wait for its port."""
        self.process.start(wait_port=self.port, timeout=20)

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        self.process.stop()


def opa_binary() -> str | None:
    """The ``opa`` executable on PATH, if any."""
    return shutil.which("opa")


def opa_available() -> str | None:
    """Why no OPA server can be used, or ``None`` when one can."""
    if os.environ.get("ITBENCH_OPA_URL") or opa_binary():
        return None
    return "no OPA server: ITBENCH_OPA_URL is not set and no `opa` binary is on PATH"


def engine_choice(options: dict[str, Any]) -> str:
    """The engine a run asked for (``--policy-engine embedded|opa``, or ``--option policy_engine=...``).

    Raises:
        InfrastructureError: an unknown engine name.
    """
    choice = str(options.get("policy_engine", "embedded")).lower()
    if choice not in ("embedded", "opa"):
        raise InfrastructureError(f"--option policy_engine={choice!r}: must be 'embedded' or 'opa'")
    return choice


def sets_as_lists(value: Any) -> Any:
    """Normalise a Rego value for comparison (sets arrive as JSON arrays from both engines)."""
    if isinstance(value, list):
        items = [sets_as_lists(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, dict):
        return {k: sets_as_lists(v) for k, v in value.items()}
    return value
