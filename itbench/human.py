"""The ``human`` agent: a trial that waits for a person to work it through MCP.

An environment lives only while its trial runs, so a person drives a trial by running one
whose agent waits: ``itbench evaluate --agent human -s SCENARIO --timeout 3600``. Once the
environment is ready, the trial serves its tools and ``submit`` on an MCP endpoint
(:mod:`itbench.mcpserver`), records where in ``mcp.json`` of its (harness-only) trial directory
and says on stderr how to connect: ``itbench mcp --trial-dir DIR`` is a stdio MCP server for
any MCP client (an IDE, a desktop assistant, the MCP inspector), ``itbench mcp --trial-dir DIR
--print`` gives the endpoint for clients that speak streamable HTTP. The trial ends at the
first accepted submission, or when its time is up, and is scored like any other. A person at
the harness's machine can read everything, so the results are labelled ``unsandboxed``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from itbench.agents import Agent, AgentContext
from itbench.mcpserver import McpServer
from itbench.models import Submission, TaskView
from itbench.redact import Redactor
from itbench.submit import Submitter
from itbench.tools import Toolbox

#: The file of a waiting trial's directory that says where its endpoint is.
ENDPOINT_FILE = "mcp.json"


def endpoint_record(server: McpServer, task: TaskView) -> dict[str, Any]:
    """What ``mcp.json`` holds: the endpoint, its token, the trial's handle and deadline."""
    return {
        "url": server.url,
        "token": server.token,
        "handle": task.handle,
        "deadline": task.deadline.isoformat(),
        "pid": os.getpid(),
    }


class HumanAgent(Agent):
    """Serves the trial over MCP and waits for a submission (see the module's documentation)."""

    def __init__(self, ctx: AgentContext) -> None:
        super().__init__()
        if ctx.trial_dir is None:
            raise ValueError("the human agent needs its trial directory")
        self.trial_dir: Path = ctx.trial_dir
        self.domain = ctx.domain
        self.redactor = Redactor([*ctx.protected, ctx.trial_dir])

    def run(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Serve until a submission is accepted or the toolbox closes."""
        submitter = Submitter(self.domain.submission_model, task.output_schema, set(toolbox.tools))
        server = McpServer(toolbox, task, submitter, self.redactor, steps=self.steps).start()
        record = self.trial_dir / ENDPOINT_FILE
        try:
            fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(endpoint_record(server, task), fh, indent=2)
            sys.stderr.write(
                f"\ntrial {task.handle} is waiting for you until {task.deadline:%H:%M:%S} UTC.\n"
                f"  stdio MCP server: itbench mcp --trial-dir {self.trial_dir}\n"
                f"  HTTP endpoint:    itbench mcp --trial-dir {self.trial_dir} --print\n"
                "The trial ends at your first accepted submit.\n"
            )
            sys.stderr.flush()
            while not submitter.done.wait(0.2):
                if toolbox.closed:
                    break
        finally:
            record.unlink(missing_ok=True)
            server.stop()
        return submitter.accepted
