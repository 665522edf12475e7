"""Rego policy engines: regorus and regopy in a worker process, and an OPA server.

``regorus`` (the default) and ``regopy`` run in a worker process of the trial
(:mod:`itbench_ciso.regoworker`); ``opa`` is an OPA server reached through opa-python-client.
Every engine evaluates with OPA's semantics under ``--strict-builtin-errors``: an error of a
built-in function is an error of the policy, not an undefined value.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
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


#: Engine names, the default first (``--policy-engine``).
ENGINES = ("regorus", "regopy", "opa")
DEFAULT_ENGINE = "regorus"

#: Error kinds: an error of the policy as OPA defines it, or a failure of the engine itself.
POLICY_FAULT = "policy"
ENGINE_FAILURE = "engine"


@dataclass
class Verdict:
    """The result of one query on one input.

    Attributes:
        value: The query's value (``None`` when undefined).
        error: The engine's message when evaluation failed.
        kind: What failed: :data:`POLICY_FAULT` (a runtime error OPA defines, such as
            conflicting values or a built-in function's error, or a limit of the judge the
            policy ran into) or :data:`ENGINE_FAILURE` (the engine itself failed).
    """

    value: Any = None
    error: str | None = None
    kind: str | None = None

    @property
    def engine_failed(self) -> bool:
        """Whether the engine, not the policy, failed."""
        return self.kind == ENGINE_FAILURE


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

    def judge(
        self, modules: dict[str, str], queries: list[str], inputs: list[Any]
    ) -> list[list[Verdict]]:
        """:meth:`evaluate_queries` for the judge: an engine failure is never a free pass.

        An input on which the engine failed (an internal error, a crashed worker) is evaluated
        again alone, in a fresh engine. If it still fails, the engine's health is checked by a
        fixed policy on the same input: when that fails too, the engine is broken and the
        judge cannot judge (:class:`InfrastructureError`, the trial is an ``error``); when it
        works, the failure is this policy's alone and stays in its verdict (the agent must not
        be able to turn a failure into an ``error``, which scores exclude).

        Raises:
            PolicyError: the modules do not compile.
            InfrastructureError: the engine fails on the health policy too.
        """
        rows = self.evaluate_queries(modules, queries, inputs)
        for i, row in enumerate(rows):
            if not any(v.engine_failed for v in row):
                continue
            self.close()
            [rows[i]] = self.evaluate_queries(modules, queries, [inputs[i]])
            failed = [v for v in rows[i] if v.engine_failed]
            if not failed:
                continue
            self.close()
            [health] = self.evaluate({"health.rego": HEALTH_POLICY}, HEALTH_QUERY, [inputs[i]])
            if health.error is not None or health.value is not True:
                raise InfrastructureError(
                    f"the {self.name} engine cannot evaluate policies: {failed[0].error} "
                    f"(and on a fixed policy: {health.error or health.value!r})"
                )
        return rows

    def judge_query(self, modules: dict[str, str], query: str, inputs: list[Any]) -> list[Verdict]:
        """:meth:`judge` of one query."""
        return [row[0] for row in self.judge(modules, [query], inputs)]

    def close(self) -> None:  # noqa: B027 - optional
        """Release whatever the engine holds."""


#: A policy every working engine evaluates to ``true`` on any input (the judge's health check).
HEALTH_POLICY = (
    "package itbench_health\n\nimport rego.v1\n\nok if count([x | walk(input, x)]) > 0\n"
)
HEALTH_QUERY = "data.itbench_health.ok"


# --- worker engines (regorus, regopy) --------------------------------------------------------

#: Seconds one request to a worker engine may take (``--option policy_timeout=S``).
POLICY_TIMEOUT = 30.0
#: Address space of a regorus worker, in bytes.
WORKER_MEMORY = 4 * 1024 * 1024 * 1024
#: Largest reply read from the worker, in bytes.
REPLY_LIMIT = 64 * 1024 * 1024


class _WorkerFailure(Exception):
    """The worker died, hung or answered nonsense; the message says which.

    Attributes:
        kind: :data:`POLICY_FAULT` when the policy ran into a limit of the judge (time, size
            of its result), :data:`ENGINE_FAILURE` when the worker failed.
    """

    def __init__(self, message: str, kind: str = ENGINE_FAILURE) -> None:
        super().__init__(message)
        self.kind = kind


class WorkerEngine(PolicyEngine):
    """An embedded engine (regorus or regopy) in a worker process of its own.

    The worker (:mod:`itbench_ciso.regoworker`) starts with an empty environment, so
    ``opa.runtime()`` reveals nothing of the harness; a policy that crashes the engine or runs
    past ``timeout`` fails alone, and the next request gets a fresh worker.

    Args:
        engine: ``regorus`` or ``regopy``.
        trial_dir: Where the worker's pid is recorded (recovery after a harness crash).
        timeout: Seconds one request may take.
    """

    def __init__(
        self,
        engine: str = DEFAULT_ENGINE,
        trial_dir: Path | None = None,
        timeout: float = POLICY_TIMEOUT,
    ) -> None:
        if engine not in ("regorus", "regopy"):
            raise ValueError(f"no worker engine {engine!r}")
        self.name = engine
        self.trial_dir = trial_dir
        self.timeout = timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._lock = threading.Lock()
        self._errors: Any = None

    def _start(self) -> subprocess.Popen[bytes]:
        import tempfile

        # What the engine prints (and the allocator's last words) end up here.
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed by _stop
        argv = [sys.executable, "-I", "-m", "itbench_ciso.regoworker", self.name]
        try:
            proc = subprocess.Popen(  # our own worker module
                argv,
                env={},  # opa.runtime() reports this environment: nothing of the harness
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._errors,
                start_new_session=True,
            )
        except OSError as exc:
            raise InfrastructureError(f"cannot start the Rego engine: {exc}") from exc
        if self.name == "regorus":
            # A policy that builds huge values ends the worker, not the machine (rego-cpp's
            # allocator reserves more address space at start than any sane limit).
            with contextlib.suppress(OSError, ValueError):
                resource.prlimit(proc.pid, resource.RLIMIT_AS, (WORKER_MEMORY, WORKER_MEMORY))
        if self.trial_dir is not None:
            from itbench import record_pid

            record_pid(self.trial_dir, "rego-worker", proc.pid)
        self._buffer = b""
        return proc

    def _last_words(self) -> str:
        """The end of what the worker wrote to its standard error."""
        if self._errors is None:
            return ""
        with contextlib.suppress(OSError):
            self._errors.seek(0, 2)
            self._errors.seek(max(0, self._errors.tell() - 4096))
            return str(self._errors.read().decode(errors="replace"))
        return ""

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
        if self._errors is not None:
            with contextlib.suppress(OSError):
                self._errors.close()
            self._errors = None
        if self.trial_dir is not None:
            from itbench import forget_pid

            forget_pid(self.trial_dir, "rego-worker")

    def _readline(self, proc: subprocess.Popen[bytes], deadline: float) -> bytes:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _WorkerFailure(
                    f"the policy took longer than {self.timeout:g}s to evaluate", POLICY_FAULT
                )
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                if "memory allocation" in self._last_words():
                    raise _WorkerFailure(
                        f"the policy exceeded the engine's memory limit of "
                        f"{WORKER_MEMORY >> 30} GiB",
                        POLICY_FAULT,
                    )
                raise _WorkerFailure("the policy engine stopped (the policy crashed it)")
            self._buffer += chunk
            if len(self._buffer) > REPLY_LIMIT:
                raise _WorkerFailure(
                    f"the policy's result is larger than {REPLY_LIMIT} bytes", POLICY_FAULT
                )
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
            raise _WorkerFailure(
                f"the input cannot be given to the engine: {exc}", POLICY_FAULT
            ) from None
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
            return [[Verdict(error=str(exc), kind=exc.kind) for _ in queries] for _ in inputs]
        if reply.get("error") is not None:
            raise PolicyError(str(reply["error"]))
        return [[Verdict(v, e, k) for v, e, k in row] for row in reply.get("rows", [])]

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
                            params={"strict-builtin-errors": "true"},
                            json={"input": doc},
                            timeout=30,
                        )
                        body = resp.json()
                    except Exception as exc:
                        out.append(
                            Verdict(error=f"{type(exc).__name__}: {exc}", kind=ENGINE_FAILURE)
                        )
                        continue
                    if resp.status_code == 500 and body.get("code") == "internal_error":
                        # OPA reports a policy's runtime errors (conflicts, built-in errors)
                        # as internal errors with the policy's location in the message.
                        out.append(Verdict(error=str(body.get("message", body)), kind=POLICY_FAULT))
                    elif resp.status_code != 200:
                        out.append(
                            Verdict(error=str(body.get("message", body)), kind=ENGINE_FAILURE)
                        )
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
    """The engine a run asked for (``--policy-engine``, or ``--option policy_engine=...``).

    Raises:
        InfrastructureError: an unknown engine name.
    """
    choice = str(options.get("policy_engine", DEFAULT_ENGINE)).lower()
    if choice not in ENGINES:
        raise InfrastructureError(
            f"--option policy_engine={choice!r}: must be one of {', '.join(ENGINES)}"
        )
    return choice


def sets_as_lists(value: Any) -> Any:
    """Normalise a Rego value for comparison (sets arrive as JSON arrays from both engines)."""
    if isinstance(value, list):
        items = [sets_as_lists(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, dict):
        return {k: sets_as_lists(v) for k, v in value.items()}
    return value
