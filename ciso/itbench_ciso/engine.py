"""Rego policy engines: embedded (regopy, in-process) and an OPA server (opa-python-client)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from itbench import InfrastructureError

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

#: Seconds one request to the embedded engine may take (``--option policy_timeout=S``).
POLICY_TIMEOUT = 30.0
#: Largest reply read from the worker, in bytes.
REPLY_LIMIT = 64 * 1024 * 1024


class _WorkerFailure(Exception):
    """The worker died, hung or answered nonsense; the message says which."""


class EmbeddedEngine(PolicyEngine):
    """rego-cpp through regopy: Rego v1 (``import rego.v1``, ``contains``, ``if``).

    The engine runs in a worker process of its own (:mod:`itbench_ciso.regoworker`) with an
    empty environment, so ``opa.runtime()`` reveals nothing of the harness; a policy that
    crashes the engine or runs past ``timeout`` fails alone.

    Args:
        trial_dir: Where the worker's pid is recorded (recovery after a harness crash).
        timeout: Seconds one request may take.
    """

    name = "embedded"

    def __init__(self, trial_dir: Path | None = None, timeout: float = POLICY_TIMEOUT) -> None:
        self.trial_dir = trial_dir
        self.timeout = timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen[bytes]:
        # No address-space limit: rego-cpp's allocator reserves more than any sane one at start.
        argv = [sys.executable, "-I", "-m", "itbench_ciso.regoworker"]
        try:
            proc = subprocess.Popen(  # noqa: S603 - our own worker module
                argv,
                env={},  # opa.runtime() reports this environment: nothing of the harness
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            raise InfrastructureError(f"cannot start the Rego engine: {exc}") from exc
        if self.trial_dir is not None:
            from itbench import record_pid

            record_pid(self.trial_dir, "rego-worker", proc.pid)
        self._buffer = b""
        return proc

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)
        for pipe in (proc.stdout,):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()
        if self.trial_dir is not None:
            from itbench import forget_pid

            forget_pid(self.trial_dir, "rego-worker")

    def _readline(self, proc: subprocess.Popen[bytes], deadline: float) -> bytes:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _WorkerFailure(f"the policy took longer than {self.timeout:g}s to evaluate")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise _WorkerFailure("the policy engine stopped (the policy crashed it)")
            self._buffer += chunk
            if len(self._buffer) > REPLY_LIMIT:
                raise _WorkerFailure(f"the policy's result is larger than {REPLY_LIMIT} bytes")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one request; restart the worker after any failure.

        Raises:
            _WorkerFailure: the worker crashed, hung or answered nonsense.
        """
        try:
            payload = json.dumps(request).encode() + b"\n"
        except (TypeError, ValueError, RecursionError) as exc:
            raise _WorkerFailure(f"the input cannot be given to the engine: {exc}") from None
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._stop()
                self._proc = self._start()
            proc = self._proc
            assert proc.stdin is not None
            try:
                proc.stdin.write(payload)
                proc.stdin.flush()
                line = self._readline(proc, time.monotonic() + self.timeout)
                reply = json.loads(line)
            except _WorkerFailure:
                self._stop()
                raise
            except (OSError, ValueError, RecursionError) as exc:
                self._stop()
                raise _WorkerFailure(f"the policy engine failed: {exc}") from None
        if not isinstance(reply, dict) or reply.get("fatal"):
            raise _WorkerFailure(f"the policy engine failed: {reply.get('error')}")
        return reply

    def compile(self, modules: dict[str, str]) -> str | None:
        """Parse and compile ``modules``; the engine's message on failure."""
        try:
            reply = self._call({"op": "compile", "modules": modules})
        except _WorkerFailure as exc:
            return str(exc)
        error = reply.get("error")
        return None if error is None else str(error)

    def evaluate(self, modules: dict[str, str], query: str, inputs: list[Any]) -> list[Verdict]:
        """Evaluate ``query`` once per input with one interpreter."""
        return [row[0] for row in self.evaluate_queries(modules, [query], inputs)]

    def evaluate_queries(
        self, modules: dict[str, str], queries: list[str], inputs: list[Any]
    ) -> list[list[Verdict]]:
        """Every query on every input, setting each input once (the costly step)."""
        if not inputs:
            return []
        try:
            reply = self._call(
                {"op": "evaluate", "modules": modules, "queries": queries, "inputs": inputs}
            )
        except _WorkerFailure as exc:
            return [[Verdict(error=str(exc)) for _ in queries] for _ in inputs]
        if reply.get("error") is not None:
            raise PolicyError(str(reply["error"]))
        return [[Verdict(value=v, error=e) for v, e in row] for row in reply.get("rows", [])]

    def close(self) -> None:
        """Stop the worker (a later call starts a new one)."""
        with self._lock:
            self._stop()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self._stop()


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
        from itbench import ManagedProcess

        self.port = port
        self.process = ManagedProcess(
            "opa",
            [binary, "run", "--server", "--addr", f"127.0.0.1:{port}", "--log-level", "error"],
            trial_dir,
        )
        # opa.runtime() reports the server's environment to any policy: give it none.
        self.process.env = {}

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

    def alive(self) -> bool:
        """Whether the server process runs and listens on its port."""
        from itbench import port_open

        return self.process.alive() and port_open(self.port)


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
