"""The domain contract: what one family of scenarios provides to the runner."""

from __future__ import annotations

import hashlib
import hmac
import logging
from abc import ABC, abstractmethod
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from itbench.deadline import Deadline
from itbench.errors import InfrastructureError
from itbench.models import Evaluation, ScenarioSpec, Submission, TaskView
from itbench.process import stop_recorded
from itbench.prompts import default_prompt
from itbench.reference import model_reference
from itbench.tools import Tool, Toolbox

#: What the key of a trial's seeds is derived under, from the run's secret.
SEEDS_LABEL = b"itbench trial seeds v1"


#: The run option giving the seconds an environment may take to make its fault observable.
READY_TIMEOUT_OPTION = "ready_timeout"
#: Its default.
DEFAULT_READY_TIMEOUT = 120.0


@dataclass
class TrialContext:
    """What the runner hands a domain for one trial.

    Attributes:
        trial_id: The trial's opaque handle: random per trial, safe to show the agent and to use
            in names of processes, directories and resources (it names no scenario).
        seed: Seed for every random choice of the trial. Derived from the run's secret, so an
            agent cannot recompute it from anything public (run seed, scenario id, index).
        trial_dir: Harness-private directory for artifacts (logs, journals). Agents never see it.
        workspace: The agent's private working directory.
        port_base: First TCP port of the block reserved for this trial (127.0.0.1 only).
        port_count: Number of ports in the block.
        options: Run-wide domain options (``--option key=value``).
        log: Logger for harness-side messages of this trial.
        secret: The run's secret, given at construction only: the context keeps a key derived
            from it for :meth:`secret_seed`, never the secret itself, so a domain gets seeds
            and nothing that could sign or rebuild the run's records.
    """

    trial_id: str
    seed: int
    trial_dir: Path
    workspace: Path
    port_base: int
    port_count: int
    options: dict[str, Any] = field(default_factory=dict)
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("itbench.trial"))
    secret: InitVar[bytes] = b""
    _seeds_key: bytes = field(init=False, repr=False, compare=False, default=b"")

    def __post_init__(self, secret: bytes) -> None:
        self._seeds_key = hmac.new(secret, SEEDS_LABEL, hashlib.sha256).digest()

    def secret_seed(self, label: str) -> int:
        """A 31-bit seed for one named random choice, derived from the run's secret.

        Use it (or :attr:`seed`) for hidden variants and randomized targets: without the
        secret, which lives in a harness-only file, nobody can derive it.
        """
        message = f"{self.seed}:{label}".encode()
        digest = hmac.new(self._seeds_key, message, hashlib.sha256).digest()
        return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF

    def port(self, offset: int) -> int:
        """Port number ``offset`` of this trial's block."""
        if not 0 <= offset < self.port_count:
            raise InfrastructureError(f"port offset {offset} outside block of {self.port_count}")
        return self.port_base + offset


class Environment(ABC):
    """A live environment for one trial.

    The runner calls, in order: :meth:`setup`, :meth:`inject`, :meth:`wait_observable`, then
    :meth:`agent_started` and hands :meth:`tools` to the agent, calls :meth:`agent_finished`
    once the agent's turn is over, asks the domain to evaluate, and always calls
    :meth:`teardown` (also after a failure in any earlier step, Ctrl-C or an agent hang).
    Any step may raise :class:`InfrastructureError`.
    """

    def setup(self) -> None:  # noqa: B027 - optional step
        """Deploy the environment (servers, seed data)."""

    def inject(self) -> None:  # noqa: B027 - optional step
        """Inject the scenario's fault(s). Control scenarios inject nothing."""

    def agent_started(self) -> None:  # noqa: B027 - optional step
        """Called right before the agent starts, after the task view was built.

        The start of the agent's clock: environments that time detection or mitigation note
        the time here.
        """

    def agent_finished(self) -> list[str]:
        """Called once the agent's turn is over, before the integrity checks and the evaluation.

        The agent's program and its sandbox are gone and its toolbox is closed. An environment
        that relays the agent to a server (a read-only API in front of its monitoring, say)
        stops the relay here: it refuses every further request and aborts those in flight, so
        nothing the agent left behind competes with the evaluator.

        Returns:
            What the agent left in flight (``"3 request(s) to Prometheus in flight"``), empty
            when nothing. An evaluation that fails after the agent left something makes the
            trial ``invalid`` with these reasons, never an ``error``.
        """
        return []

    def wait_observable(self, timeout: float) -> None:  # noqa: B027 - optional step
        """Block until the fault is observable (for example its alert fires).

        Raises:
            InfrastructureError: the fault did not become observable within ``timeout``.
        """

    @abstractmethod
    def tools(self) -> list[Tool]:
        """The agent's tools for this environment."""

    def context(self) -> dict[str, Any]:
        """Public facts for the task view (endpoints, credentials of the sandbox, hosts)."""
        return {}

    def fingerprint(self) -> dict[str, str]:
        """Digests of the evaluator's inputs that nobody may change during the trial.

        Ground truth, hidden variants, alert rules, scrape config, load generator config, seeded
        billing data, price tables: whatever the evaluator reads to judge. The runner takes it
        once the fault is observable and again before evaluating; any difference makes the
        trial ``invalid`` with the names of the changed inputs.
        """
        return {}

    def harness_problems(self) -> list[str]:
        """Why the harness's own servers are not as setup left them, or nothing.

        Called after the agent's turn, before evaluating. A server of the harness (supervisord,
        Prometheus, a moto server, a load generator) that died or was replaced makes the trial
        ``invalid`` with these reasons, never an ``error``.
        """
        return []

    @abstractmethod
    def teardown(self) -> None:
        """Stop everything this environment started. Idempotent; must never leave processes.

        Use only paths and pids held in memory or in harness-only files: never a path read back
        from a file or a system the agent could write.
        """


SpecT = TypeVar("SpecT", bound=ScenarioSpec)
SubmissionT = TypeVar("SubmissionT", bound=Submission)
EnvT = TypeVar("EnvT", bound=Environment)


class Domain(ABC, Generic[SpecT, SubmissionT, EnvT]):
    """One family of scenarios (sre, ciso, finops, ...), registered by a plugin.

    A domain is generic in its scenario spec, its submission and its environment:
    ``class MyDomain(Domain[MySpec, MySubmission, MyEnvironment])``. The runner hands every
    method the domain's own types: specs validated by :attr:`spec_model`, environments made by
    :meth:`create_environment`, submissions validated by :attr:`submission_model` (once, before
    scoring), so no method needs to check or convert them.

    Subclasses set :attr:`name`, :attr:`spec_model` and :attr:`submission_model` and
    implement environment creation, evaluation and the oracle.
    """

    name: ClassVar[str]
    #: The scenario spec (a subclass of :class:`itbench.models.ScenarioSpec`).
    spec_model: type[SpecT]
    #: What the agent submits (a subclass of :class:`itbench.models.Submission`).
    submission_model: type[SubmissionT]
    description: ClassVar[str] = ""
    #: Ports a trial of this domain needs in its block.
    ports_per_trial: ClassVar[int] = 0
    #: The task types a scenario of this domain may name (empty: any).
    task_types: ClassVar[tuple[str, ...]] = ()
    #: What one trial needs of a machine, for executors that schedule trials on a cluster
    #: (``--executor ray``): ``num_cpus`` (fractions allowed) and ``memory`` in bytes.
    resources: ClassVar[dict[str, float]] = {"num_cpus": 1.0, "memory": 512 * 2**20}

    def system_prompt(self) -> str:
        """What a model agent (``llm``) is told about the domain's work before its task.

        Domains override it with their own text (SRE, CISO and FinOps ship a ``prompt.md``
        in their package); the default is a generic prompt for any domain. It must describe
        the kind of work, never a scenario.
        """
        return default_prompt()

    def draw(self, spec: SpecT, ctx: TrialContext) -> tuple[SpecT, dict[str, Any]]:
        """The concrete scenario of one trial, drawn from the spec's declared sets.

        A scenario may declare sets (targets, parameters, decoys) instead of single values, so
        that repeating it explores it rather than replaying it. The runner calls this once per
        trial, before :meth:`create_environment`; draw with :meth:`TrialContext.secret_seed`
        (derived from the run's harness-only secret, so nobody can predict the draw).

        Returns:
            The concrete spec, which the environment, the evaluator and privileged agents (the
            oracle) receive, and what was drawn (JSON-able), recorded in the trial's result.
            The default draws nothing: ``(spec, {})``.
        """
        return spec, {}

    @abstractmethod
    def create_environment(self, spec: SpecT, ctx: TrialContext) -> EnvT:
        """Create (not yet set up) the environment of one trial."""

    def task_view(
        self,
        spec: SpecT,
        env: EnvT,
        ctx: TrialContext,
        toolbox: Toolbox,
        deadline: Deadline,
    ) -> TaskView:
        """Build the agent's task view by whitelist from the spec's public fields.

        The view carries the goal, never the scenario's id, title, params or file, and the
        turn's ``deadline`` as the runner computed it (its end and its time limit).
        """
        return TaskView(
            handle=ctx.trial_id,
            domain=spec.domain,
            goal=spec.goal,
            task_types=list(spec.task_types),
            tools=toolbox.specs(),
            workspace=ctx.workspace,
            deadline=deadline.when,
            time_limit=deadline.seconds,
            output_schema=self.submission_model.model_json_schema(),
            context=env.context(),
        )

    @abstractmethod
    def evaluate(
        self,
        spec: SpecT,
        env: EnvT,
        submission: SubmissionT | None,
        toolbox: Toolbox,
        ctx: TrialContext,
    ) -> Evaluation:
        """Score a trial from the environment's final state, the submission and the journal.

        Args:
            spec: The scenario, ground truth included.
            env: The live environment after the agent stopped.
            submission: What the agent returned, or ``None`` when it submitted nothing.
            toolbox: The trial's toolbox; ``toolbox.calls`` is the tool-call journal.
            ctx: The trial context.
        """

    @abstractmethod
    def oracle(self, spec: SpecT, task: TaskView, toolbox: Toolbox) -> SubmissionT | None:
        """Solve the scenario from ground truth, acting only through ``toolbox``."""

    def baseline(self, task: TaskView, toolbox: Toolbox) -> SubmissionT | None:
        """A deterministic heuristic agent that sees only the task view and tools."""
        return None

    def probe(self, kind: str, task: TaskView, toolbox: Toolbox) -> SubmissionT | None:
        """A probe agent that every valid scenario must fail (``itbench validate`` runs them).

        Args:
            kind: ``"constant"``: a fixed plausible answer without looking at the systems
                (scenarios tagged ``control`` may pass it); ``"thrash"``: act on everything
                (restart and roll back every service, stop every instance, ...) and submit
                the same constant answer.
            task: The task view.
            toolbox: The trial's tools.

        Returns:
            The probe's submission; the default submits nothing.
        """
        return None

    def answer_key(self, drawn: SpecT, task: TaskView, toolbox: Toolbox) -> SubmissionT | None:
        """The answer of someone who holds the catalog but not the trial's secret.

        ``probe/answer-key`` calls it with the published scenario drawn under a public secret
        (anyone can make that draw from the scenario file and the domain's code); every valid
        scenario fails the answer. Compute it from ``drawn`` alone, never from what the trial's
        systems show; acting through ``toolbox`` on names the draw gives is allowed. The
        default is :meth:`oracle` on that draw, right for a domain whose oracle reads only its
        spec; a domain whose oracle reads the systems overrides it.
        """
        return self.oracle(drawn, task, toolbox)

    def answer_facts(self, published: SpecT, drawn: dict[str, Any]) -> Any:
        """The answer a draw of ``published`` asks for, from the draw's record (JSON-able).

        ``probe/answer-key`` answers the public draw whose facts differ most from the trial's
        own (then the one that differs most in all), so that it passes only where the answer
        does not depend on the draw; ``itbench validate`` reports how many distinct answers
        public draws have and how often the commonest comes up (what a memorizer of the
        catalog would get right). Two draws with equal facts must have the same answer. The
        default, ``None``, says nothing: the probe then compares whole records, and
        ``validate`` reports no spread.
        """
        return None

    def reference_sections(self) -> dict[str, str]:
        """Extra sections of this domain's field reference: heading to Markdown body.

        The place for what the spec models cannot say: the valid ids of a ``check`` field,
        the fault mechanisms with their parameters and valid targets, the families.
        """
        return {}

    def reference(self) -> str:
        """The Markdown reference of this domain's scenario fields (``itbench docs`` writes it).

        Generated from :attr:`spec_model`, :attr:`task_types`, :meth:`reference_sections` and
        :attr:`submission_model`; a test keeps the committed copy in ``docs/`` in sync.
        """
        out = [f"# Scenario reference: `{self.name}`", ""]
        if self.description:
            out += [self.description, ""]
        out += [
            "Generated from the domain's models by `itbench docs`; do not edit by hand.",
            "",
            model_reference(self.spec_model, "Scenario fields"),
        ]
        if self.task_types:
            out += [
                "## Task types",
                "",
                "`task_types` takes these values: "
                + ", ".join(f"`{t}`" for t in self.task_types)
                + ".",
                "",
            ]
        for heading, body in self.reference_sections().items():
            out += [f"## {heading}", "", body.strip(), ""]
        out.append(model_reference(self.submission_model, "Submission fields"))
        return "\n".join(out).rstrip() + "\n"

    def recover(self, trial_dir: Path) -> None:
        """Clean up after a trial whose harness process died (resume calls this).

        The default stops every process group recorded under ``trial_dir`` by
        :class:`itbench.process.ManagedProcess` or :func:`itbench.process.record_pid`;
        domains that leave other state behind extend it.
        """
        stop_recorded(trial_dir)


#: A domain of any spec, submission and environment types (what the core handles).
AnyDomain = Domain[Any, Any, Any]
