"""The SRE domain object: spec, environment factory, evaluator and reference agents."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, ClassVar

from itbench_sre import agents, faults, reference, scoring, topology
from itbench_sre.embedded import recorded_groups, recorded_shared, sweep, unmount_under
from itbench_sre.environment import SreEnvironment, trial_root
from itbench_sre.spec import TASK_TYPES, SreSpec, SreSubmission

from itbench import (
    Domain,
    Evaluation,
    TaskView,
    Toolbox,
    TrialContext,
    recorded_pid,
    stop_group,
    stop_recorded,
)


class SreDomain(Domain[SreSpec, SreSubmission, SreEnvironment]):
    """Incidents on a live multi-service shop: detect, localize, diagnose and mitigate."""

    name = "sre"
    spec_model = SreSpec
    submission_model = SreSubmission
    description = "Incidents on a live web shop (services, Redis, PostgreSQL, Prometheus)."
    ports_per_trial = topology.PORTS_PER_ENV
    task_types = TASK_TYPES
    #: A shop is about ten processes (services, Redis, PostgreSQL, Prometheus, load).
    resources: ClassVar[dict[str, float]] = {"num_cpus": 1.0, "memory": 1.5 * 2**30}

    def system_prompt(self) -> str:
        """What a model agent is told about this domain's work (``prompt.md`` of the package)."""
        return Path(__file__).with_name("prompt.md").read_text(encoding="utf-8")

    def draw(self, spec: SreSpec, ctx: TrialContext) -> tuple[SreSpec, dict[str, Any]]:
        """The trial's problem: targets, parameters, noise and decoys drawn from the secret."""
        concrete = spec.concrete(random.Random(ctx.secret_seed("sre-draw")))
        return concrete, concrete.drawn_record()

    def create_environment(self, spec: SreSpec, ctx: TrialContext) -> SreEnvironment:
        """A shop deployment for one trial (drawing the scenario first if the runner did not)."""
        if not spec.drawn:
            spec, _ = self.draw(spec, ctx)
        return SreEnvironment(spec, ctx)

    def evaluate(
        self,
        spec: SreSpec,
        env: SreEnvironment,
        submission: SreSubmission | None,
        toolbox: Toolbox,
        ctx: TrialContext,
    ) -> Evaluation:
        """Score detection, localization, diagnosis and mitigation."""
        return scoring.evaluate(spec, env, submission, toolbox)

    def oracle(self, spec: SreSpec, task: TaskView, toolbox: Toolbox) -> SreSubmission | None:
        """Ground truth plus the reference fix, through the tools."""
        return agents.oracle(spec, toolbox, task.handle)

    def answer_key(self, drawn: SreSpec, task: TaskView, toolbox: Toolbox) -> SreSubmission | None:
        """The public draw's diagnosis, with its reference fixes tried on the trial's shop."""
        return agents.answer_key(drawn, toolbox)

    def answer_facts(self, published: SreSpec, drawn: dict[str, Any]) -> Any:
        """Each fault's root cause, and its fault type and reference fix where they are asked.

        The propagation follows from the roots. A control's answer is its benign
        explanation, drawn among its noise and decoys: its whole draw.
        """
        if not drawn.get("faults"):
            return drawn
        out = []
        for f in drawn["faults"]:
            mech = faults.get(f["mechanism"])
            answer: dict[str, Any] = {"root": mech.root(f["target"])}
            if "diagnosis" in published.task_types:
                answer["fault_type"] = mech.fault_type
            if "mitigation" in published.task_types and mech.fix is not None:
                answer["fix"] = mech.fix(f["target"], {**mech.defaults, **f["params"]})
            out.append(answer)
        return out

    def baseline(self, task: TaskView, toolbox: Toolbox) -> SreSubmission | None:
        """The deterministic heuristic agent."""
        return agents.baseline(task, toolbox)

    def probe(self, kind: str, task: TaskView, toolbox: Toolbox) -> SreSubmission | None:
        """``constant``: a fixed answer unseen; ``thrash``: restart and roll back everything."""
        if kind == "constant":
            return agents.probe_constant()
        if kind == "thrash":
            return agents.probe_thrash(toolbox)
        return None

    def reference_sections(self) -> dict[str, str]:
        """Fault mechanisms, noise, controls, double faults and the shop's topology."""
        return reference.sections()

    def recover(self, trial_dir: Path) -> None:
        """Stop what a dead harness left of a trial's shop.

        Only paths of the harness-only trial directory are used: the environment's root and
        the shared data directory its record names (checked to have the shape deploy gives).
        """
        super().recover(trial_dir)
        root = trial_root(trial_dir)
        # supervisord first, or it restarts the programs being stopped.
        pid = recorded_pid(root, "supervisord")
        if pid is not None:
            stop_group(pid)
        stop_recorded(root)
        sweep(root, recorded_shared(root))
        groups = recorded_groups(root)
        if groups is not None:
            groups.remove()
        unmount_under(root)
