"""Built-in agents and the run flags of the ``llm`` and ``command`` agents.

The agents: ``noop``, ``oracle``, ``baseline``, ``command``, ``llm``, ``human`` and the probes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from itbench import bounds, leakprobe
from itbench.agents import Agent, AgentContext, AgentSpec, BaselineAgent, NoopAgent, OracleAgent
from itbench.chat import configure as configure_llm
from itbench.chat import option_specs as llm_options
from itbench.command import CommandAgent, configure_program
from itbench.command import configure as configure_command
from itbench.command import option_specs as command_options
from itbench.domain import READY_TIMEOUT_OPTION, AnyDomain, TrialContext
from itbench.human import HumanAgent
from itbench.llm import LlmAgent
from itbench.markers import hookimpl
from itbench.models import ScenarioSpec, Submission, TaskView
from itbench.options import OptionSpec, check_number
from itbench.tools import Toolbox

#: The probe agents ``itbench validate`` runs beside oracle and noop; each must fail.
PROBES = ("probe/leak", "probe/constant", "probe/thrash", "probe/answer-key")
#: The secret of the answer key's draws: public, so anyone holding the catalog can make them.
ANSWER_KEY_SECRET = b"itbench public answer key"
#: How many public draws the answer key compares with the trial's own.
ANSWER_KEY_DRAWS = 16
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


class AnswerKeyProbe(Agent):
    """The answer a memorizer of the public catalog gives: the domain's, for a public draw.

    Everything a scenario publishes (its file, the domain's code and docs) lets anyone draw it
    under a secret of their own and solve that draw; only the trial's secret is out of reach.
    This probe draws the published scenario under public secrets and submits the domain's
    answer for one of those draws (:meth:`itbench.domain.Domain.answer_key`, by default the
    oracle's). Of :data:`ANSWER_KEY_DRAWS` public draws it takes the one that differs most
    from the trial's own, so that it does not pass by sharing the trial's draw; a problem
    whose answer does not depend on its draw or its systems (a fixed target, a fixed
    parameter, a fixed text) is still passed, and ``itbench validate`` calls it invalid.
    """

    def __init__(self, ctx: AgentContext) -> None:
        super().__init__()
        if ctx.published is None or ctx.trial_dir is None:
            raise ValueError("the answer-key probe needs the published scenario")
        self.domain = ctx.domain
        self.published = ctx.published
        self.trial_draw = ctx.trial_draw or {}
        self.trial_dir = ctx.trial_dir
        self.options = dict(ctx.options)

    def public_draw(self, task: TaskView) -> ScenarioSpec:
        """The public draw whose answer differs most from the trial's (the first one on a tie).

        Distance is counted first over the draws' answer facts
        (:meth:`itbench.domain.Domain.answer_facts`), then over everything drawn: decoys and
        noise must not outweigh the target.
        """
        best: tuple[tuple[int, int], ScenarioSpec] | None = None
        mine = _leaves(self.trial_draw)
        my_facts = _leaves(self.domain.answer_facts(self.published, self.trial_draw))
        draws = public_draws(
            self.domain, self.published, self.trial_dir, task.workspace, self.options
        )
        for spec, record in draws:
            theirs = _leaves(record)
            their_facts = _leaves(self.domain.answer_facts(self.published, record))
            distance = (_distance(my_facts, their_facts), _distance(mine, theirs))
            if best is None or distance > best[0]:
                best = (distance, spec)
        assert best is not None
        return best[1]

    def run(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Answer a public draw of the scenario."""
        return self.domain.answer_key(self.public_draw(task), task, toolbox)


def public_draws(
    domain: AnyDomain,
    published: ScenarioSpec,
    trial_dir: Path,
    workspace: Path,
    options: dict[str, Any],
    count: int = ANSWER_KEY_DRAWS,
) -> list[tuple[ScenarioSpec, dict[str, Any]]]:
    """Draws of a published scenario under the public secret: what anyone can make of it."""
    out = []
    for n in range(count):
        public = TrialContext(
            trial_id="answer-key",
            seed=n,
            trial_dir=trial_dir,
            workspace=workspace,
            port_base=0,
            port_count=0,
            options=options,
            secret=ANSWER_KEY_SECRET,
        )
        out.append(domain.draw(published, public))
    return out


def answer_spread(
    domain: AnyDomain, published: ScenarioSpec, scratch: Path, count: int = 64
) -> dict[str, Any] | None:
    """How many distinct answers public draws of a scenario ask for, and the commonest's share.

    The share is what a memorizer of the catalog gets right by giving the commonest answer
    every time (:meth:`itbench.domain.Domain.answer_facts`); ``None`` where the domain does
    not say what an answer depends on.
    """
    seen: dict[str, int] = {}
    for _, record in public_draws(domain, published, scratch, scratch, {}, count):
        facts = domain.answer_facts(published, record)
        if facts is None:
            return None
        key = json.dumps(facts, sort_keys=True, default=str)
        seen[key] = seen.get(key, 0) + 1
    return {"distinct": len(seen), "commonest": round(max(seen.values()) / count, 3)}


def _distance(mine: dict[str, str], theirs: dict[str, str]) -> int:
    """How many leaves two flattened values disagree on."""
    return sum(mine.get(k) != theirs.get(k) for k in mine.keys() | theirs.keys())


def _leaves(value: Any, path: str = "") -> dict[str, str]:
    """A JSON value as its leaves: path to the leaf's JSON text."""
    if isinstance(value, dict):
        out: dict[str, str] = {}
        for k, v in value.items():
            out.update(_leaves(v, f"{path}/{k}"))
        return out
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(_leaves(v, f"{path}/{i}"))
        return out
    return {path: json.dumps(value, sort_keys=True, default=str)}


def _leak(ctx: AgentContext) -> CommandAgent:
    files = {_LEAK_IN_SANDBOX: Path(leakprobe.__file__)}
    # The probe tries to import the trial's domain package, whatever its name.
    package = type(ctx.domain).__module__.partition(".")[0]
    return CommandAgent(ctx, ["/usr/bin/python3", _LEAK_IN_SANDBOX, package], files=files)


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
            "An external program (--option agent_command=...) using tools over HTTP or MCP.",
            sandboxed=True,
            configure=configure_program,
        ),
        AgentSpec(
            "llm",
            LlmAgent,
            "A model behind an OpenAI-compatible Chat Completions API, calling the trial's tools "
            "(--model NAME, --base-url URL).",
            sandboxed=True,
            configure=configure_llm,
            needs_sandbox=False,
        ),
        AgentSpec(
            "human",
            HumanAgent,
            "Waits for a person (or any MCP client) to work the trial through its MCP endpoint "
            "(itbench mcp --trial-dir DIR).",
        ),
        AgentSpec(
            "probe/leak",
            _leak,
            "Looks for the answer outside the environment (files, packages, processes, "
            "ports) from the sandbox; every valid scenario fails it.",
            sandboxed=True,
            configure=configure_command,
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
        AgentSpec(
            "probe/answer-key",
            AnswerKeyProbe,
            "The oracle's answer for a draw anyone can make from the public catalog, not the "
            "trial's own; every valid scenario fails it.",
            published=True,
        ),
    ]


@hookimpl
def itbench_register_options() -> list[OptionSpec]:
    """The options of the ``llm`` and ``command`` agents, the sandbox's bounds and the runner's."""
    return [
        *llm_options(),
        *command_options(),
        *bounds.option_specs(),
        OptionSpec(
            READY_TIMEOUT_OPTION,
            READY_TIMEOUT_OPTION,
            "Seconds an environment may take to make its fault observable (default 120).",
            check=check_number(1, 86_400),
            flag=False,
        ),
    ]
