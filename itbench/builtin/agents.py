"""Built-in agents: ``noop``, ``oracle``, ``baseline``, ``command`` and the probes."""

from __future__ import annotations

from pathlib import Path

from itbench import leakprobe
from itbench.agents import Agent, AgentContext, AgentSpec, BaselineAgent, NoopAgent, OracleAgent
from itbench.command import CommandAgent
from itbench.markers import hookimpl
from itbench.models import Submission, TaskView
from itbench.tools import Toolbox

#: The probe agents ``itbench validate`` runs beside oracle and noop; each must fail.
PROBES = ("probe/leak", "probe/constant", "probe/thrash")
_LEAK_IN_SANDBOX = "/opt/itbench/leakprobe.py"


def _noop(ctx: AgentContext) -> NoopAgent:
    return NoopAgent()


class DomainProbe(Agent):
    """Delegates to the domain's probe of one kind (see :meth:`itbench.domain.Domain.probe`)."""

    def __init__(self, ctx: AgentContext, kind: str) -> None:
        super().__init__()
        self.domain = ctx.domain
        self.kind = kind

    def run(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Run the domain's probe."""
        return self.domain.probe(self.kind, task, toolbox)


def _leak(ctx: AgentContext) -> CommandAgent:
    files = {_LEAK_IN_SANDBOX: Path(leakprobe.__file__)}
    return CommandAgent(ctx, ["/usr/bin/python3", _LEAK_IN_SANDBOX], files=files)


@hookimpl
def itbench_register_agents() -> list[AgentSpec]:
    """Register the reference agents and probes every domain supports."""
    return [
        AgentSpec("noop", _noop, "Submits nothing; every valid scenario fails it."),
        AgentSpec(
            "oracle",
            OracleAgent,
            "The domain's reference solution from ground truth.",
            privileged=True,
        ),
        AgentSpec("baseline", BaselineAgent, "The domain's deterministic heuristic agent."),
        AgentSpec(
            "command",
            CommandAgent,
            "An external program (--option agent_command=...) using tools over HTTP.",
            sandboxed=True,
        ),
        AgentSpec(
            "probe/leak",
            _leak,
            "Looks for the answer outside the environment (files, packages, processes, "
            "ports) from the sandbox; every valid scenario fails it.",
            sandboxed=True,
        ),
        AgentSpec(
            "probe/constant",
            lambda ctx: DomainProbe(ctx, "constant"),
            "A fixed plausible answer per domain; only control scenarios may pass it.",
        ),
        AgentSpec(
            "probe/thrash",
            lambda ctx: DomainProbe(ctx, "thrash"),
            "Acts on everything (restarts, rollbacks, stops) and answers the constant; "
            "every valid scenario fails it.",
        ),
    ]
