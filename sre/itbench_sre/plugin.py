"""Entry-point module of the SRE plugin (kept cheap to import).

The SRE scenarios live in the repository's ``scenarios/sre/``, which the core's built-in
catalog already loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from itbench import AgentSpec, hookimpl

if TYPE_CHECKING:
    from itbench_sre.domain import SreDomain


@hookimpl
def itbench_register_domains() -> list[SreDomain]:
    """The SRE domain."""
    from itbench_sre.domain import SreDomain

    return [SreDomain()]


@hookimpl
def itbench_register_agents() -> list[AgentSpec]:
    """The destructive agent, which quiets alerts by breaking the shop (for scoring tests)."""
    from itbench_sre.agents import destructive

    return [
        AgentSpec(
            "sre/destructive",
            destructive,
            "Stops and scales down everything and silences monitoring; must fail mitigation.",
            domains=["sre"],
        )
    ]
