"""Per-family runtimes: what the environment shows, the tools, the judge and the reference."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

from itbench import Evaluation, Tool
from itbench_ciso.checks.base import Variant
from itbench_ciso.engine import PACKAGE, RULE, PolicyEngine
from itbench_ciso.scoring import Confusion, evaluation
from itbench_ciso.spec import CisoSpec, CisoSubmission

#: A module's package line (the first one).
_PACKAGE_LINE = re.compile(
    r"^\s*package\s+([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)", re.M
)

if TYPE_CHECKING:
    from itbench import TrialContext


class Runtime(ABC):
    """One family's part of a trial.

    Args:
        spec: The scenario.
        ctx: The trial context.
        engine: The policy engine of the trial.
    """

    def __init__(self, spec: CisoSpec, ctx: TrialContext, engine: PolicyEngine) -> None:
        self.spec = spec
        self.ctx = ctx
        self.engine = engine
        self.visible: Variant | None = None
        self.hidden: list[Variant] = []

    @property
    def workspace(self) -> Path:
        """The agent's workspace."""
        return self.ctx.workspace

    @property
    def hidden_seed(self) -> int:
        """Seed of the hidden variants: from the run's secret, apart from the visible one's."""
        return self.ctx.secret_seed("ciso:hidden-variants")

    @property
    def visible_seed(self) -> int:
        """Seed of the visible system (its content tells nothing about the hidden seed)."""
        return self.ctx.secret_seed("ciso:visible-system")

    def fingerprint(self) -> dict[str, str]:
        """Digests of what the judge reads: the hidden variants and their ground truth."""
        return {"hidden_variants": digest([_variant_record(v) for v in self.hidden])}

    def harness_problems(self) -> list[str]:
        """Why a server of the family is not as setup left it (none by default)."""
        return []

    def setup(self) -> None:  # noqa: B027 - optional
        """Start what the family needs and write the visible material to the workspace."""

    def teardown(self) -> None:  # noqa: B027 - optional
        """Stop what :meth:`setup` started (idempotent)."""

    @abstractmethod
    def tools(self) -> list[Tool]:
        """The agent's tools."""

    @abstractmethod
    def context(self) -> dict[str, Any]:
        """Public facts of the task view."""

    @abstractmethod
    def judge(self, submission: CisoSubmission | None) -> Evaluation:
        """Score the submission on the hidden variants."""

    # --- shared helpers ----------------------------------------------------------------------

    def policy_tool(self, default_input: Any) -> Tool:
        """A tool that evaluates a Rego policy with the trial's engine."""

        def evaluate_policy(policy: str, input_document: Any = None) -> dict[str, Any]:
            """Evaluate a Rego policy and return its `violations`.

            Its package is compliance, or one below it (a policy set's compliance.control_NN).
            Without input_document the visible system's document is used.
            """
            found = _PACKAGE_LINE.search(policy)
            package = found[1] if found else PACKAGE
            if package != PACKAGE and not package.startswith(f"{PACKAGE}."):
                return {
                    "compiles": False,
                    "error": f"package {package}: use {PACKAGE} or a package below it "
                    f"({PACKAGE}.control_01)",
                }
            modules = {"policy.rego": policy}
            error = self.engine.compile(modules)
            if error is not None:
                return {"compiles": False, "error": error}
            doc = default_input() if input_document is None else input_document
            verdict = self.engine.evaluate(modules, f"data.{package}.{RULE}", [doc])[0]
            error = verdict.error
            if verdict.engine_failed:
                error = f"the judge's engine cannot evaluate this policy ({error}); rewrite it"
            return {"compiles": True, "violations": verdict.value, "error": error}

        return Tool.from_function(evaluate_policy)

    def save(self, name: str, text: str) -> None:
        """Write a harness-private artifact of the trial."""
        path = self.ctx.trial_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def compile_policy(self, modules: dict[str, str]) -> str | None:
        """Compile the submitted modules; the engine's message goes to the trial's artifacts."""
        error = self.engine.compile(modules)
        self.save(
            "policy-compile.txt",
            f"engine: {self.engine.name}\n" + ("ok\n" if error is None else error + "\n"),
        )
        return error

    def _nothing(self, start: float, why: str) -> Evaluation:
        """The evaluation when nothing could be judged: no hidden system is found non-compliant.

        Hosts and accounts are judged whole (a non-empty set of violations means non-compliant);
        families that judge smaller units override this.
        """
        conf = Confusion()
        for v in self.hidden:
            conf.add(not v.compliant, False)
        return evaluation(
            conf,
            [],
            compiles=False,
            engine=self.engine.name,
            seconds=timer() - start,
            extra={"evidence_collected": 0.0},
            details={"reason": why},
        )

    def save_hidden(self) -> None:
        """Record the hidden variants' ground truth in the trial's artifacts.

        Called after judging (every run of the agent's programs is over by then): until then
        the ground truth is in memory only.
        """
        self.save(
            "hidden-variants.json",
            json.dumps(
                [
                    {"name": v.name, "violating": sorted(v.violating), "notes": v.notes}
                    for v in self.hidden
                ],
                indent=1,
            ),
        )


def timer() -> float:
    """Monotonic seconds."""
    return time.perf_counter()


def digest(value: Any) -> str:
    """SHA-256 of a JSON-able value (canonical form)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=_jsonable)
    return hashlib.sha256(text.encode()).hexdigest()


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(f"cannot fingerprint {type(value).__name__}")


def _variant_record(v: Variant) -> dict[str, Any]:
    return {"name": v.name, "data": v.data, "violating": v.violating, "units": v.units}
