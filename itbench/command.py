"""The ``command`` agent: any program, in any language, run as an external process.

The program is started in the trial's workspace with the task view on its standard input and
in ``$ITBENCH_TASK``, and reaches its tools through ``$ITBENCH_TOOLS_URL`` (see
:mod:`itbench.toolserver`; ``itbench tool`` is a ready client, also inside the sandbox). Its
submission is ``submission.json`` in the workspace, or else the last line of its standard
output that parses as a JSON object. It may write ``usage.json`` (``input_tokens``,
``output_tokens``, ``cost_usd``).

By default it runs in the namespace sandbox of :mod:`itbench.sandbox`: an unprivileged uid,
its workspace, its own program's directory (``--option agent_dir=DIR``, or the directory of the
command's first argument that is a file) and a read-only system, nothing of the harness. Its
network reaches the tool server, the loopback endpoints of the task context and the ports of
``--option agent_ports=P[,P...]`` (a local model server, or a proxy to a hosted model API). With
``--sandbox none`` it runs as the harness does, for debugging, and its results are labelled
``unsandboxed``. Either way its standard output and error are kept up to
:data:`OUTPUT_CAP` bytes each (``--option agent_output_cap=BYTES``) in the trial directory, and
when it exits or its time is up every process it started is stopped.

The sandbox is bounded (:mod:`itbench.bounds`): memory, processes and CPU
(``--option agent_memory=SIZE``, ``agent_pids=N``, ``agent_cpus=N``) and a workspace of
``agent_workspace_size`` bytes, of which the run directory keeps ``agent_workspace_keep``
bytes. A program killed at its memory limit fails its trial, with the reason. When the
sandbox's bubblewrap is stopped or traced (:mod:`itbench.stopped`) the trial ends at once as
``failed``, with the reason, rather than waiting out its time limit.

With ``--mcp`` (the option ``mcp``) the trial's tools and ``submit`` are also served over MCP
(:mod:`itbench.mcpserver`), and ``.mcp.json`` in the workspace configures the program's MCP
client in the common ``mcpServers`` form: the endpoint's URL and token (``--option
mcp_transport=http``, the default), or the standard-library launcher ``/opt/itbench/mcpbridge.py``
as a stdio server (``mcp_transport=stdio``). A submission accepted through ``submit`` wins over
``submission.json`` and standard output.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from itbench import bounds, mcpbridge, stopped
from itbench.agents import Agent, AgentContext
from itbench.httpwatch import Exchange, HttpWatcher
from itbench.mcpserver import McpServer
from itbench.models import AgentOutput, Submission, TaskView, Usage
from itbench.options import OptionSpec, check_integer, check_text, checked_values
from itbench.process import stop_marked, stop_pgid
from itbench.redact import Redactor
from itbench.sandbox import OPT, Sandbox, agent_dir_for, check_agent_dir
from itbench.submit import Submitter
from itbench.tools import Toolbox
from itbench.toolserver import ToolServer
from itbench.trajectory import EventStep

COMMAND_OPTION = "agent_command"
AGENT_DIR_OPTION = "agent_dir"
OUTPUT_CAP_OPTION = "agent_output_cap"
PORTS_OPTION = "agent_ports"
MCP_OPTION = "mcp"
MCP_TRANSPORT_OPTION = "mcp_transport"
#: The trajectory event of a request the program sent to a task endpoint through the relay.
ENDPOINT_REQUEST = "endpoint_request"
#: Endpoint requests a trial's trajectory journals one by one; the rest are counted.
MAX_JOURNALED = 5000
#: The MCP client configuration written into the workspace with ``--mcp``.
MCP_CONFIG = ".mcp.json"
#: Where the stdio launcher is inside the sandbox.
MCP_BRIDGE = f"{OPT}/mcpbridge.py"
#: Bytes of each of stdout and stderr kept by default.
OUTPUT_CAP = 1024 * 1024
#: Largest ``submission.json`` or ``usage.json`` read from the workspace.
MAX_FILE = 4 * 1024 * 1024
_LOOPBACK_PORT = re.compile(r"(?:127\.0\.0\.1|localhost|\[::1\]):(\d{2,5})\b")


def context_ports(context: Any) -> list[int]:
    """TCP ports of loopback endpoints named anywhere in a task context."""
    text = json.dumps(context, default=str)
    return sorted({int(p) for p in _LOOPBACK_PORT.findall(text) if 0 < int(p) < 65536})


class SubmissionFileError(ValueError):
    """The agent's ``submission.json`` is there but is not one JSON object (the message says why)."""


def extra_ports(value: Any) -> list[int]:
    """The ports of ``--option agent_ports=P[,P...]`` (a local model server, an API proxy).

    Raises:
        ValueError: a port that is not a number from 1 to 65535.
    """
    if value is None or value == "":
        return []
    words = [str(value)] if isinstance(value, int) else str(value).split(",")
    ports = []
    for word in words:
        word = word.strip()
        if not word.isdigit() or not 0 < int(word) < 65536:
            raise ValueError(f"option {PORTS_OPTION}: {word!r} is not a TCP port (1-65535)")
        ports.append(int(word))
    return ports


def _command_words(value: Any) -> Any:
    """A check of ``agent_command``: a command line of words, or a list of them."""
    if isinstance(value, list) and value and all(isinstance(w, str) for w in value):
        return value
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a command line")
    if not shlex.split(value):
        raise ValueError("no program given")
    return value


def _ports(value: Any) -> Any:
    extra_ports(value)
    return value


def option_specs() -> list[OptionSpec]:
    """The options of the ``command`` agent (the ``--mcp`` switch has a flag)."""
    return [
        OptionSpec(
            COMMAND_OPTION,
            COMMAND_OPTION,
            "command: the program and its arguments ('PROGRAM ARGS').",
            check=_command_words,
            flag=False,
        ),
        OptionSpec(
            AGENT_DIR_OPTION,
            AGENT_DIR_OPTION,
            "command: the program's directory, bound read-only into the sandbox.",
            check=check_text,
            flag=False,
        ),
        OptionSpec(
            OUTPUT_CAP_OPTION,
            OUTPUT_CAP_OPTION,
            "command: bytes of each of stdout and stderr kept (default 1 MiB).",
            check=check_integer(0, 2**40),
            flag=False,
        ),
        OptionSpec(
            PORTS_OPTION,
            PORTS_OPTION,
            "command: more loopback ports the sandbox may reach (P[,P...]).",
            check=_ports,
            flag=False,
        ),
        OptionSpec(
            MCP_OPTION,
            MCP_OPTION,
            "command: serve the trial's tools over MCP too and write .mcp.json into the workspace.",
            switch=True,
        ),
        OptionSpec(
            MCP_TRANSPORT_OPTION,
            MCP_TRANSPORT_OPTION,
            "command: how .mcp.json reaches the tools: http (default) or stdio.",
            choices=("http", "stdio"),
            flag=False,
        ),
    ]


def configure(options: dict[str, Any]) -> dict[str, Any]:
    """Check the command agent's options once per run (see :attr:`AgentSpec.configure`).

    Raises:
        ValueError: a value that fails the check its option declares (:func:`option_specs`),
            or a wrong bound (:data:`itbench.bounds.OPTIONS`).
    """
    return bounds.defaults(checked_values(options, option_specs()))


def configure_program(options: dict[str, Any]) -> dict[str, Any]:
    """Check the ``command`` agent's program settings once per run, then the shared ones.

    Raises:
        ValueError: no ``agent_command``, one that cannot be split into words, or an
            ``agent_dir`` that is not a directory (and every error of :func:`configure`).
    """
    if not options.get(COMMAND_OPTION):
        raise ValueError(f"the command agent needs --option {COMMAND_OPTION}='PROGRAM ARGS'")
    directory = options.get(AGENT_DIR_OPTION)
    if directory is not None and not Path(str(directory)).is_dir():
        raise ValueError(f"option {AGENT_DIR_OPTION}: {directory} is not a directory")
    return configure(options)


def read_agent_file(path: Path, limit: int = MAX_FILE) -> bytes | None:
    """Read a file the agent wrote, never following a link and never past ``limit`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # before fdopen, which refuses a directory
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    return data if len(data) <= limit else None


class SandboxHalted(RuntimeError):
    """The sandbox's bubblewrap was stopped or traced: it could never end by itself."""


class _Capture(threading.Thread):
    """Copies a stream to a file, keeping at most ``cap`` bytes and counting the rest."""

    def __init__(self, stream: IO[bytes], path: Path, cap: int) -> None:
        super().__init__(daemon=True, name=f"capture-{path.name}")
        self.stream, self.path, self.cap, self.total = stream, path, cap, 0

    def run(self) -> None:
        with self.path.open("wb") as out:
            while chunk := self.stream.read1(65536):  # type: ignore[attr-defined]
                keep = max(0, self.cap - self.total)
                if keep:
                    out.write(chunk[:keep])
                self.total += len(chunk)


def command_argv(command: Any) -> list[str]:
    """A ``agent_command`` option as its arguments: a string is split as a shell would.

    Raises:
        ValueError: the string does not split (an unclosed quote).
    """
    if isinstance(command, str):
        return shlex.split(command)
    return [str(c) for c in command or []]


def program_dir(options: Mapping[str, Any], argv: Sequence[str] | None = None) -> Path | None:
    """The directory of a ``command`` agent's program, bound read-only into its sandbox.

    ``agent_dir`` when the options give it, else the directory of the command's first
    argument that is a file of its own (:func:`itbench.sandbox.agent_dir_for`); ``None`` when
    the command names none. The runner (to refuse a program inside the run directory), the
    agent (to bind it) and ``leaderboard add``/``verify`` (to keep and re-run it) all ask here.

    Args:
        options: The run's options.
        argv: The command's arguments, when already split (else split from the options; a
            command that does not split names no directory).
    """
    raw = options.get(AGENT_DIR_OPTION)
    if raw:
        return Path(str(raw)).resolve()
    if argv is None:
        try:
            argv = command_argv(options.get(COMMAND_OPTION))
        except ValueError:
            return None
    return agent_dir_for(argv)


class CommandAgent(Agent):
    """Runs ``--option agent_command='...'`` as the agent."""

    def __init__(
        self,
        ctx: AgentContext,
        argv: Sequence[str] | None = None,
        files: dict[str, Path] | None = None,
    ) -> None:
        """Build the agent.

        Args:
            ctx: The agent context (options, sandbox setting, trial directory).
            argv: The command; default ``--option agent_command``.
            files: Programs of the harness's own to bind read-only into the sandbox, by their
                path there (without a sandbox, ``argv`` is rewritten to their host paths).
        """
        super().__init__()
        self.domain = ctx.domain
        self.mcp = ctx.options.get(MCP_OPTION) is True
        self.mcp_transport = str(ctx.options.get(MCP_TRANSPORT_OPTION, "http"))
        if self.mcp_transport not in ("http", "stdio"):
            raise ValueError(
                f"option {MCP_TRANSPORT_OPTION}: {self.mcp_transport!r} is not http or stdio"
            )
        self.files = dict(files or {})
        self.workspace_path = Path("/nonexistent")
        command = argv if argv is not None else ctx.options.get(COMMAND_OPTION)
        if not command:
            raise ValueError(f"the command agent needs --option {COMMAND_OPTION}='PROGRAM ARGS'")
        self.argv = command_argv(command)
        self.sandboxed = self.confined = ctx.sandbox != "none"
        self.log_dir = ctx.trial_dir
        self.protected = list(ctx.protected)
        self.redactor = Redactor([*self.protected, *([ctx.trial_dir] if ctx.trial_dir else [])])
        self.agent_dir = program_dir(ctx.options, self.argv)
        self.cap = int(ctx.options.get(OUTPUT_CAP_OPTION, OUTPUT_CAP))
        self.extra_ports = extra_ports(ctx.options.get(PORTS_OPTION))
        #: Endpoint requests journaled, and those past :data:`MAX_JOURNALED` only counted.
        self.journaled = 0
        self.unjournaled = 0
        self._journal_lock = threading.Lock()
        self.bounds = bounds.Bounds.from_options(ctx.options)
        #: The bounds the sandbox applied, under their option names (empty: none).
        self.applied: dict[str, int | float] = {}
        #: Why the sandbox ran without its bounds (``None``: bounded, or not sandboxed).
        self.unbounded: str | None = None
        if not self.sandboxed:
            self.argv = [str(self.files.get(a, a)) for a in self.argv]

    def _serve_mcp(
        self, task: TaskView, toolbox: Toolbox, token: str
    ) -> tuple[McpServer, Submitter]:
        """Start the MCP endpoint and write the client configuration into the workspace."""
        submitter = Submitter(self.domain.submission_model, task.output_schema, set(toolbox.tools))
        server = McpServer(toolbox, task, submitter, self.redactor, token=token, steps=self.steps)
        server.start()
        entry: dict[str, Any] = server.client_config()
        if self.mcp_transport == "stdio":
            bridge = MCP_BRIDGE if self.sandboxed else str(Path(mcpbridge.__file__).resolve())
            entry = {
                "type": "stdio",
                "command": "/usr/bin/python3",
                "args": [bridge],
                "env": server.env(),
            }
        config = {"mcpServers": {"itbench": entry}}
        (task.workspace / MCP_CONFIG).write_text(
            json.dumps(config, indent=2) + "\n", encoding="utf-8"
        )
        return server, submitter

    def run(self, task: TaskView, toolbox: Toolbox) -> Submission | dict[str, Any] | None:
        """Run the program until it exits or its time is up."""
        ws = self.workspace_path = task.workspace
        task_json = task.model_dump_json(indent=2)
        (ws / "task.json").write_text(task_json, encoding="utf-8")
        logs = self.log_dir or ws
        server = ToolServer(toolbox, task, redactor=self.redactor).start()
        variables = {
            **server.env(),
            "ITBENCH_TASK": str(ws / "task.json"),
            "ITBENCH_WORKSPACE": str(ws),
        }
        sandbox: Sandbox | None = None
        mcp: McpServer | None = None
        submitter: Submitter | None = None
        popen: dict[str, Any] = {}
        try:
            endpoints = set(context_ports(task.context))
            ports = [int(server.url.rsplit(":", 1)[1]), *sorted(endpoints), *self.extra_ports]
            if self.mcp:
                mcp, submitter = self._serve_mcp(task, toolbox, server.token)
                variables.update(mcp.env())
                ports.append(mcp.port)
            if self.sandboxed:
                if self.agent_dir is not None:
                    check_agent_dir(self.agent_dir, [*self.protected, ws])
                files = {k: v.read_text(encoding="utf-8") for k, v in self.files.items()}
                endpoints -= {ports[0], *([mcp.port] if mcp is not None else [])}
                sandbox = Sandbox(
                    ws,
                    ports,
                    self.agent_dir,
                    variables,
                    files,
                    self.bounds,
                    self.log_dir,
                    watch=lambda port: (
                        HttpWatcher(port, self._journal_request, self._journal_unwatched)
                        if port in endpoints
                        else None
                    ),
                )
                sandbox.prepare()
                self.unbounded = sandbox.unbounded
                if self.unbounded is None:
                    self.applied = self.bounds.record()
                else:
                    bounds.warn_once(self.unbounded)
                argv = sandbox.argv(self.argv)
                popen = {
                    "env": sandbox.environment(),
                    "cwd": "/",
                    "preexec_fn": sandbox.preexec,
                    "pass_fds": sandbox.pass_fds,
                }
            else:
                argv = self.argv
                popen = {"env": {**os.environ, **variables}, "cwd": ws}
            returncode = self._execute(argv, popen, task_json, toolbox, logs)
            reached = sandbox.limits_reached() if sandbox is not None else []
        finally:
            server.stop()
            if mcp is not None:
                mcp.stop()
            if sandbox is not None:
                sandbox.close()
            if self.unjournaled:
                self.steps.append(
                    EventStep(name=ENDPOINT_REQUEST, detail={"not_journaled": self.unjournaled})
                )
        if returncode is None:
            return None
        self._read_usage(ws / "usage.json")
        if submitter is not None and submitter.accepted is not None:
            return submitter.accepted
        if returncode != 0:
            tail = (logs / "agent.stderr").read_text(errors="replace").strip().splitlines()[-3:]
            why = "".join(f" ({r})" for r in reached)
            raise RuntimeError(f"agent command exited with {returncode}{why}: {' | '.join(tail)}")
        return self._submission(ws / "submission.json", logs / "agent.stdout")

    def _journal_request(self, exchange: Exchange) -> None:
        """Journal a request the program sent to a task endpoint (no credentials, no body)."""
        self._journal_event(
            exchange.record(), datetime.fromtimestamp(exchange.started, UTC), exchange.seconds
        )

    def _journal_unwatched(self, port: int) -> None:
        """Journal that a connection to an endpoint is no longer read as HTTP requests."""
        self._journal_event({"port": port, "unwatched": True})

    def _journal_event(
        self, detail: dict[str, Any], at: datetime | None = None, elapsed: float | None = None
    ) -> None:
        """Add one ``endpoint_request`` event, or past :data:`MAX_JOURNALED` only count it.

        So a flood of requests cannot grow the harness or the trajectory without bound.
        """
        with self._journal_lock:  # the relay reports from a thread per connection
            if self.journaled >= MAX_JOURNALED:
                self.unjournaled += 1
                return
            self.journaled += 1
        self.steps.append(
            EventStep(
                name=ENDPOINT_REQUEST,
                at=at or datetime.now(UTC),
                elapsed=elapsed,
                detail=detail,
            )
        )

    def _execute(
        self,
        argv: list[str],
        popen: dict[str, Any],
        task_json: str,
        toolbox: Toolbox,
        logs: Path,
    ) -> int | None:
        """Run ``argv`` until it exits (its status) or the toolbox closes (``None``)."""
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            **popen,
        )
        assert proc.stdout is not None and proc.stderr is not None and proc.stdin is not None
        captures = [
            _Capture(proc.stdout, logs / "agent.stdout", self.cap),
            _Capture(proc.stderr, logs / "agent.stderr", self.cap),
        ]
        for c in captures:
            c.start()
        try:
            with contextlib.suppress(BrokenPipeError, OSError):
                proc.stdin.write(task_json.encode())
                proc.stdin.close()
            watched = time.monotonic()
            while proc.poll() is None:
                if toolbox.closed:
                    return None
                if self.sandboxed and time.monotonic() - watched >= stopped.WATCH_INTERVAL:
                    watched = time.monotonic()
                    reason = stopped.halted(proc.pid)
                    if reason is not None:
                        with contextlib.suppress(ProcessLookupError):
                            os.killpg(proc.pid, signal.SIGKILL)  # a stopped process cannot wait
                        raise SandboxHalted(f"the sandbox cannot end: {reason}")
                time.sleep(0.02)
            return proc.returncode
        finally:
            # Also after a clean exit: whatever the program left running goes with it (in the
            # sandbox its PID namespace ends; without, daemons are found by their workspace).
            stop_pgid(proc.pid, timeout=2)
            if not self.sandboxed:
                stop_marked([self.workspace_path, self.workspace_path.resolve()])
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            for c in captures:
                c.join(timeout=2)
            self.output = AgentOutput(
                cap_bytes=self.cap,
                stdout_bytes=captures[0].total,
                stderr_bytes=captures[1].total,
            )

    def _read_usage(self, path: Path) -> None:
        data = read_agent_file(path)
        if data is not None:
            with contextlib.suppress(ValueError):
                self.usage = Usage.model_validate_json(data)

    @staticmethod
    def _submission(file: Path, stdout: Path) -> dict[str, Any] | None:
        """``submission.json``, else the last line of standard output that is a JSON object.

        Raises:
            SubmissionFileError: ``submission.json`` is there but is not one JSON object.
        """
        data = read_agent_file(file)
        if data is None and (file.exists() or file.is_symlink()):
            raise SubmissionFileError(f"{file.name}: {_unreadable(file)}")
        if data is not None:
            try:
                parsed = json.loads(data)
            except RecursionError:
                raise SubmissionFileError(f"{file.name}: JSON nested too deeply") from None
            except ValueError as exc:
                raise SubmissionFileError(f"{file.name}: not JSON: {exc}") from None
            if not isinstance(parsed, dict):
                raise SubmissionFileError(
                    f"{file.name}: must be a JSON object, not {type(parsed).__name__}"
                )
            return parsed
        for line in reversed(stdout.read_text(errors="replace").splitlines()):
            with contextlib.suppress(ValueError, RecursionError):
                parsed = json.loads(line)
                if isinstance(parsed, dict):
                    return parsed
        return None


def _unreadable(path: Path) -> str:
    """Why :func:`read_agent_file` did not read ``path``, which exists."""
    if path.is_symlink():
        return "is a symbolic link (links are not followed)"
    try:
        info = path.stat()
    except OSError as exc:
        return f"cannot be read: {exc.strerror}"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    if info.st_size > MAX_FILE:
        return f"larger than {MAX_FILE} bytes"
    return "cannot be read"
