"""Built-in agents: ``noop``, ``oracle`` and ``baseline``."""

from __future__ import annotations

from itbench import hookimpl
from itbench.agents import AgentContext, AgentSpec, BaselineAgent, NoopAgent, OracleAgent
from itbench.external import CommandAgent


def _noop(ctx: AgentContext) -> NoopAgent:
    return NoopAgent()


@hookimpl
def itbench_register_agents() -> list[AgentSpec]:
    """Register the reference agents every domain supports."""
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
        ),
    ]
