"""The ``command`` agent: any program, in any language, run as an external process.

The program is started in the trial's workspace with the task view on its standard input and
in ``$ITBENCH_TASK``, and reaches its tools through ``$ITBENCH_TOOLS_URL`` (see
:mod:`itbench.toolserver`; the ``itbench tool`` command is a ready client). Its submission is
``submission.json`` in the workspace, or else the last line of its standard output that parses
as a JSON object. It may write ``usage.json`` (``input_tokens``, ``output_tokens``,
``cost_usd``). It is stopped, with its whole process group, when its time is up.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import time
from typing import Any

from itbench.agents import Agent, AgentContext
from itbench.models import TaskView, Usage
from itbench.process import stop_group
from itbench.tools import Toolbox
from itbench.toolserver import ToolServer

COMMAND_OPTION = "agent_command"


class CommandAgent(Agent):
    """Runs ``--option agent_command='...'`` as the agent."""

    def __init__(self, ctx: AgentContext) -> None:
        super().__init__()
        command = ctx.options.get(COMMAND_OPTION)
        if not command:
            raise ValueError(f"the command agent needs --option {COMMAND_OPTION}='PROGRAM ARGS'")
        self.argv = shlex.split(command) if isinstance(command, str) else [str(c) for c in command]

    def run(self, task: TaskView, toolbox: Toolbox) -> dict[str, Any] | None:
        """Run the program until it exits or its time is up."""
        ws = task.workspace
        task_json = task.model_dump_json(indent=2)
        (ws / "task.json").write_text(task_json, encoding="utf-8")
        server = ToolServer(toolbox, task).start()
        env = {
            **os.environ,
            **server.env(),
            "ITBENCH_TASK": str(ws / "task.json"),
            "ITBENCH_WORKSPACE": str(ws),
        }
        try:
            with (ws / "agent.stdout").open("wb") as out, (ws / "agent.stderr").open("wb") as err:
                proc = subprocess.Popen(
                    self.argv,
                    cwd=ws,
                    env=env,
                    stdin=subprocess.PIPE,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
                try:
                    assert proc.stdin is not None
                    with contextlib.suppress(BrokenPipeError):
                        proc.stdin.write(task_json.encode())
                        proc.stdin.close()
                    while proc.poll() is None:
                        if toolbox.closed:
                            return None
                        time.sleep(0.05)
                finally:
                    if proc.poll() is None:
                        stop_group(proc.pid, timeout=2)
                        proc.wait(timeout=5)
        finally:
            server.stop()
        self._read_usage(ws / "usage.json")
        if proc.returncode != 0:
            tail = (ws / "agent.stderr").read_text(errors="replace").strip().splitlines()[-3:]
            raise RuntimeError(f"agent command exited with {proc.returncode}: {' | '.join(tail)}")
        return self._submission(ws / "submission.json", ws / "agent.stdout")

    def _read_usage(self, path: Any) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.usage = Usage.model_validate_json(path.read_text())

    @staticmethod
    def _submission(file: Any, stdout: Any) -> dict[str, Any] | None:
        if file.exists():
            data = json.loads(file.read_text())
            return data if isinstance(data, dict) else None
        for line in reversed(stdout.read_text(errors="replace").splitlines()):
            with contextlib.suppress(ValueError):
                data = json.loads(line)
                if isinstance(data, dict):
                    return data
        return None
