"""Entry-point module of the toy plugin."""

from __future__ import annotations

from pathlib import Path

from itbench import AgentSpec, Domain, OptionSpec, check_number, hookimpl
from itbench_toy.agents import crasher, sleeper, slow_solver, solver
from itbench_toy.domain import ToyDomain


@hookimpl
def itbench_register_domains() -> list[Domain]:
    """The toy domain."""
    return [ToyDomain()]


@hookimpl
def itbench_register_catalog_paths() -> list[Path]:
    """The toy scenarios shipped inside the package."""
    return [Path(__file__).parent / "scenarios"]


@hookimpl
def itbench_register_agents() -> list[AgentSpec]:
    """Toy agents."""
    return [
        AgentSpec(
            "toy/solver", solver, "Reads every key and repairs the bad one.", domains=["toy"]
        ),
        AgentSpec("toy/slow", slow_solver, "The solver, after 0.8 s.", domains=["toy"]),
        AgentSpec("toy/sleeper", sleeper, "Hangs.", domains=["toy"]),
        AgentSpec("toy/crasher", crasher, "Raises.", domains=["toy"]),
    ]


@hookimpl
def itbench_register_options() -> list[OptionSpec]:
    """A run flag for the tests (``--fail-setup 1`` makes every toy setup fail) and the
    options the toy domain reads."""
    return [
        OptionSpec("fail-setup", "fail_setup", "Make toy setups fail.", ("1",)),
        *(
            OptionSpec(
                key, key, "Seconds the toy step sleeps.", check=check_number(0, 60), flag=False
            )
            for key in ("setup_delay", "teardown_delay", "eval_delay")
        ),
        OptionSpec("tamper", "tamper", "What the toy domain tampers with.", flag=False),
        OptionSpec("harness_server", "harness_server", "Start a harness-side server.", flag=False),
    ]
