"""The agents API: an agent turns a task view and a toolbox into a submission."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from itbench.deadline import Deadline
from itbench.domain import AnyDomain
from itbench.models import (
    AgentOutput,
    Label,
    MetricValue,
    ScenarioSpec,
    Submission,
    TaskView,
    Usage,
)
from itbench.tools import Toolbox
from itbench.trajectory import Step


class Agent(ABC):
    """Base class of agents.

    One instance is created per trial by its :class:`AgentSpec` factory. ``run`` may call
    ``toolbox.call(name, **args)`` any number of times before the task's deadline and
    returns a submission of the domain's submission model, or a mapping that validates
    against it (``task.output_schema``), or ``None`` to submit nothing.

    Besides the submission, an agent may fill :attr:`usage` with token counts and cost,
    :attr:`steps` with its trajectory (model messages, tool calls, events; see
    :mod:`itbench.trajectory`: without tool steps of its own, the runner adds the tool-call
    journal) and :attr:`metrics` with figures about itself (attempts, undos), recorded as the
    result's ``agent_metrics`` and never scored.
    """

    #: Whether nothing the agent's own code does can reach the harness: an external program in
    #: the sandbox, or the core's model loop, whose model acts only through the toolbox. Read
    #: only for the core's own agents (see :meth:`AgentSpec.labels`).
    confined: bool = False

    def __init__(self) -> None:
        self.usage = Usage()
        self.output: AgentOutput | None = None
        self.steps: list[Step] = []
        self.metrics: dict[str, MetricValue] = {}

    @abstractmethod
    def run(self, task: TaskView, toolbox: Toolbox) -> Submission | dict[str, Any] | None:
        """Work on the task and return a submission."""


@dataclass
class AgentContext:
    """What an agent factory gets.

    Attributes:
        domain: The domain of the trial's scenario.
        scenario: The scenario, ground truth included; set only for privileged agents.
        options: The run's ``--option`` values (agent settings such as a command or a model).
        sandbox: ``bwrap`` (external programs run in the sandbox) or ``none``.
        trial_dir: The trial's harness-only directory (an agent's own logs go there).
        protected: Paths no external agent may see (run directory, catalog, packages).
        seed: The trial's public seed (the manifest's ``seeds``), for an agent's own sampling;
            never to be shown to a model or a program.
        deadline: The end of the agent's turn, the same one the task view and the toolbox
            hold (``None`` outside a trial).
        published: The scenario as the catalog publishes it, before the trial's draw; set
            only for agents that declare :attr:`AgentSpec.published` (``probe/answer-key``).
        trial_draw: What the trial's own draw chose (the result's ``drawn``), set with
            ``published``, so that the answer key can draw differently on purpose.
    """

    domain: AnyDomain
    scenario: ScenarioSpec | None = None
    options: dict[str, Any] = field(default_factory=dict)
    sandbox: str = "bwrap"
    trial_dir: Path | None = None
    protected: list[Path] = field(default_factory=list)
    seed: int = 0
    deadline: Deadline | None = None
    published: ScenarioSpec | None = None
    trial_draw: dict[str, Any] | None = None


@dataclass
class AgentSpec:
    """A registered agent.

    Attributes:
        name: Name used by ``--agent`` (namespaced names like ``vendor/model`` are fine).
        factory: Builds an agent for one trial.
        description: One line for listings.
        privileged: When true the factory receives the scenario, ground truth included. Only
            reference agents may be privileged; their results are labelled ``reference``.
        domains: Domains the agent can work on (empty: all).
        sandboxed: The agent runs its work confined (an external program in the namespace
            sandbox, or the core's model loop). Honoured only for the core's own agents
            (``command``, ``llm``, ``probe/leak``) and only for trials whose agent really ran
            confined (:attr:`Agent.confined`): results of every other agent, and of runs with
            ``--sandbox none`` (for the agents it applies to), are labelled ``unsandboxed``.
        configure: Checks the run's options for this agent and returns them with the agent's
            defaults filled in, so the manifest records every setting the agent used (model,
            temperature); raises ``ValueError`` with a message naming the option when one is
            wrong. Called once per run, before any trial.
        needs_sandbox: Whether ``--sandbox none`` takes the agent out of its confinement (true
            for external programs; the model loop has no program to confine).
        published: When true the factory receives the scenario as published, before the
            trial's draw (:attr:`AgentContext.published`): what anyone holding the catalog
            has, never the trial's ground truth.
    """

    name: str
    factory: Callable[[AgentContext], Agent]
    description: str = ""
    privileged: bool = False
    domains: list[str] = field(default_factory=list)
    sandboxed: bool = False
    configure: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    needs_sandbox: bool = True
    published: bool = False

    def labels(self, sandbox: str, *, core: bool) -> list[Label]:
        """The labels of this agent's results under a run's ``sandbox`` setting.

        Args:
            sandbox: The run's sandbox setting.
            core: Whether the core's own plugin registered this spec. A plugin's factory runs
                in the harness process, whatever it hands the sandbox (answers in argv, a
                patched command agent), so only the core's agents earn ``sandboxed``.
        """
        if self.privileged:
            return [Label.reference]
        if self.sandboxed and core and (sandbox != "none" or not self.needs_sandbox):
            return []
        return [Label.unsandboxed]

    def settings(self, options: dict[str, Any]) -> dict[str, Any]:
        """The run's options with this agent's defaults filled in (see :attr:`configure`).

        Raises:
            ValueError: an option of the agent is missing or wrong (the message names it).
        """
        return self.configure(dict(options)) if self.configure is not None else dict(options)


class NoopAgent(Agent):
    """Submits nothing and calls no tool: every valid scenario must fail it."""

    def run(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Return nothing."""
        return None


class OracleAgent(Agent):
    """Delegates to the domain's reference solution, which reads ground truth."""

    def __init__(self, ctx: AgentContext) -> None:
        super().__init__()
        if ctx.scenario is None:
            raise ValueError("the oracle agent needs the scenario")
        self.domain = ctx.domain
        self.scenario = ctx.scenario

    def run(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Run the domain's oracle."""
        return self.domain.oracle(self.scenario, task, toolbox)


class BaselineAgent(Agent):
    """Delegates to the domain's deterministic heuristic baseline."""

    def __init__(self, ctx: AgentContext) -> None:
        super().__init__()
        self.domain = ctx.domain

    def run(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Run the domain's baseline."""
        return self.domain.baseline(task, toolbox)
