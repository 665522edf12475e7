"""Entry-point module: registers the ``stratus`` agent."""

from __future__ import annotations

from itbench import AgentSpec, OptionSpec, check_integer, check_number, hookimpl
from itbench_stratus.agent import OPTIONS, StratusAgent, configure


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
    return [
        OptionSpec(
            key,
            key,
            f"stratus: {key.removeprefix('stratus_').replace('_', ' ')} (default {default:g}).",
            check=(
                check_integer(int(low), int(high))
                if isinstance(default, int)
                else check_number(low, high)
            ),
            flag=False,
        )
        for key, (default, low, high) in OPTIONS.items()
    ]
