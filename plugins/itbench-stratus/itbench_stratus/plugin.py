"""Entry-point module: registers the ``stratus`` agent."""

from __future__ import annotations

from itbench import AgentSpec, OptionSpec, hookimpl
from itbench_stratus.agent import StratusAgent, configure, option_specs


@hookimpl
def itbench_register_agents() -> list[AgentSpec]:
    """The STRATUS-style agent, for the SRE domain."""
    return [
        AgentSpec(
            "stratus",
            StratusAgent,
            "STRATUS-style SRE agent: detection, diagnosis, mitigation and validation stages on "
            "the llm agent; a failed mitigation is undone before the next attempt.",
            domains=["sre"],
            configure=configure,
        )
    ]


@hookimpl
def itbench_register_options() -> list[OptionSpec]:
    """The ``stratus_*`` settings (``--option stratus_attempts=N`` and the like)."""
    return option_specs()
