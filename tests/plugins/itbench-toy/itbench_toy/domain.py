"""The toy domain: a key-value "registry" in memory where a fault corrupts one key.

Options for the core's tests:

- ``fail_setup``: setup raises an infrastructure error; ``setup_delay=SECONDS`` slows it.
- ``harness_server=1``: the environment also runs a real server of the harness (a status page
  over HTTP, named in the task context), which must still be the same process after the
  agent's turn (:meth:`ToyEnvironment.harness_problems`).
- ``eval_delay=SECONDS`` / ``teardown_delay=SECONDS``: slow evaluation / teardown (crash tests
  kill the harness in every phase).
- ``harness_server=detached``: the status server runs in a session of its own and outlives a
  killed harness (like a daemon): only ``recover`` (``--resume``, ``itbench cleanup``) stops it.
- ``tamper=fingerprint``: the ``write`` tool also raises the limit the evaluator judges by (an
  evaluator input changed during the agent's turn). ``tamper=server``: ``write`` kills the
  harness server (implies ``harness_server``). Either makes the trial ``invalid``.
"""

from __future__ import annotations

import hashlib
import json
import random
import signal
import subprocess
import sys
import time
from typing import Any, Literal

from pydantic import BaseModel, Field

from itbench import (
    Domain,
    Environment,
    Evaluation,
    InfrastructureError,
    ManagedProcess,
    ScenarioSpec,
    Submission,
    TaskView,
    Tool,
    Toolbox,
    ToolError,
    TrialContext,
    port_open,
    record_pid,
    stop_recorded,
    wait_for_port,
)

#: Values at or above this are invalid (an evaluator input: fingerprinted).
LIMIT = 1000


class ToyTruth(BaseModel):
    """Ground truth: which key is wrong and what it must be."""

    key: str | None
    expected: int


class ToySpec(ScenarioSpec):
    """A toy scenario: initial values and an optional corruption."""

    domain: Literal["toy"]
    values: dict[str, int]
    ground_truth: ToyTruth
    candidates: list[str] = Field(
        default_factory=list, description="Keys the corrupted one is drawn from, per trial."
    )

    def facets(self) -> dict[str, str]:
        """The kind of fault: a corrupted key, or none."""
        corrupt = self.ground_truth.key is not None or bool(self.candidates)
        return {"fault": "corrupted-key" if corrupt else "none"}


class ToySubmission(Submission):
    """The key the agent blames (``None`` with ``no_incident`` for a healthy registry)."""

    key: str | None = None
    no_incident: bool = False


class ToyEnvironment(Environment):
    """The in-memory registry of one trial."""

    def __init__(self, spec: ToySpec, ctx: TrialContext) -> None:
        self.spec = spec
        self.ctx = ctx
        self.values: dict[str, int] = {}
        self.torn_down = 0
        self.limit = LIMIT
        self.tamper = str(ctx.options.get("tamper", ""))
        self.server: ManagedProcess | None = None
        self.detached: subprocess.Popen[bytes] | None = None

    def setup(self) -> None:
        """Load the initial values; options can make this fail or slow for tests."""
        if self.ctx.options.get("fail_setup"):
            raise InfrastructureError("setup failed on purpose (option fail_setup)")
        time.sleep(float(self.ctx.options.get("setup_delay", 0)))
        self.values = dict(self.spec.values)
        if self.ctx.options.get("harness_server") or self.tamper == "server":
            www = self.ctx.trial_dir / "www"
            www.mkdir(exist_ok=True)
            (www / "status").write_text("ok\n")
            port = self.ctx.port(0)
            argv = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)]
            argv += ["--directory", str(www)]
            if self.ctx.options.get("harness_server") == "detached":
                self.detached = subprocess.Popen(
                    argv,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
                record_pid(self.ctx.trial_dir, "status", self.detached.pid)
                wait_for_port(port, 15, proc=self.detached)
                return
            self.server = ManagedProcess("status", argv, self.ctx.trial_dir)
            self.server.start(wait_port=port)

    def inject(self) -> None:
        """Corrupt the ground-truth key."""
        gt = self.spec.ground_truth
        if gt.key is not None:
            self.values[gt.key] = gt.expected + 1000

    def tools(self) -> list[Tool]:
        """Read and write tools."""

        def read(key: str) -> int:
            """Read the value of a key."""
            if key not in self.values:
                raise ToolError(f"no key {key!r}")
            return self.values[key]

        def keys() -> list[str]:
            """List the keys."""
            return sorted(self.values)

        def write(key: str, value: int) -> None:
            """Set a key to a value."""
            if key not in self.values:
                raise ToolError(f"no key {key!r}")
            self.values[key] = value
            if self.tamper == "fingerprint":
                self.limit = 10**9
            elif self.tamper == "server" and self.server and self.server.proc:
                self.server.proc.send_signal(signal.SIGKILL)
                self.server.proc.wait(timeout=5)

        return [
            Tool.from_function(keys),
            Tool.from_function(read),
            Tool.from_function(write, action=True),
        ]

    def context(self) -> dict[str, object]:
        """Public facts: values are correct when below 1000; the status page, if any."""
        out: dict[str, object] = {"rule": f"every value must be below {LIMIT}"}
        if self.server is not None or self.detached is not None:
            out["status_url"] = f"http://127.0.0.1:{self.ctx.port(0)}/status"
        return out

    def fingerprint(self) -> dict[str, str]:
        """Digest of what the evaluator judges by: the ground truth and the limit."""
        truth = json.dumps([self.spec.ground_truth.model_dump(), self.limit], sort_keys=True)
        return {"ground_truth": hashlib.sha256(truth.encode()).hexdigest()}

    def harness_problems(self) -> list[str]:
        """The status server, when there is one, must be the process setup started."""
        if self.server is None:
            return []
        if not self.server.alive():
            return ["the toy status server died during the agent's turn"]
        if not port_open(self.ctx.port(0)):
            return ["the toy status server stopped answering during the agent's turn"]
        return []

    def teardown(self) -> None:
        """Stop the status server and forget everything."""
        time.sleep(float(self.ctx.options.get("teardown_delay", 0)))
        if self.detached is not None:
            stop_recorded(self.ctx.trial_dir)
            self.detached.wait(timeout=5)
        self.torn_down += 1
        marker = self.ctx.trial_dir / "teardown.count"
        marker.write_text(str(self.torn_down))
        self.values.clear()
        if self.server is not None:
            self.server.stop()


#: Drawn values of each trial that no answer depends on.
DECOYS = 8


class ToyDomain(Domain):
    """Find the corrupted key and repair it."""

    name = "toy"
    spec_model = ToySpec
    submission_model = ToySubmission
    description = "In-memory registry with one corrupted key."
    ports_per_trial = 2

    def draw(self, spec: ScenarioSpec, ctx: TrialContext) -> tuple[ScenarioSpec, dict[str, Any]]:
        """Draw the corrupted key from ``candidates`` with the trial's secret seed."""
        assert isinstance(spec, ToySpec)
        if not spec.candidates:
            return spec, {}
        key = random.Random(ctx.secret_seed("key")).choice(sorted(spec.candidates))
        truth = ToyTruth(key=key, expected=spec.values[key])
        # Drawn scenery the answer does not depend on (as decoys are in a real domain).
        scenery = random.Random(ctx.secret_seed("scenery"))
        decoys = [scenery.randrange(4) for _ in range(DECOYS)]
        drawn = {"key": key, "decoys": decoys}
        return spec.model_copy(update={"ground_truth": truth, "candidates": []}), drawn

    def answer_facts(self, published: ScenarioSpec, drawn: dict[str, Any]) -> Any:
        """The corrupted key alone: the decoys change nothing in the answer."""
        return {"key": drawn.get("key")}

    def create_environment(self, spec: ScenarioSpec, ctx: TrialContext) -> Environment:
        """Build the registry."""
        assert isinstance(spec, ToySpec)
        return ToyEnvironment(spec, ctx)

    def evaluate(
        self,
        spec: ScenarioSpec,
        env: Environment,
        submission: Submission | None,
        toolbox: Toolbox,
        ctx: TrialContext,
    ) -> Evaluation:
        """Pass when the blame is right and every value is valid again."""
        assert isinstance(spec, ToySpec) and isinstance(env, ToyEnvironment)
        time.sleep(float(ctx.options.get("eval_delay", 0)))
        gt = spec.ground_truth
        if submission is None:
            return Evaluation(passed=False, metrics={"localized": False, "repaired": False})
        assert isinstance(submission, ToySubmission)
        if gt.key is None:
            ok = submission.no_incident and submission.key is None
            return Evaluation(passed=ok, metrics={"localized": ok, "repaired": ok})
        localized = submission.key == gt.key
        repaired = all(v < env.limit for v in env.values.values())
        return Evaluation(
            passed=localized and repaired,
            metrics={
                "localized": localized,
                "repaired": repaired,
                "actions": len(toolbox.action_calls),
            },
        )

    def oracle(self, spec: ScenarioSpec, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Repair from ground truth through the tools."""
        assert isinstance(spec, ToySpec)
        gt = spec.ground_truth
        if gt.key is None:
            return ToySubmission(no_incident=True)
        toolbox.call("write", key=gt.key, value=gt.expected)
        return ToySubmission(key=gt.key)

    def baseline(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Blame the first key over the limit and reset it to zero."""
        for key in toolbox.call("keys"):
            if toolbox.call("read", key=key) >= 1000:
                toolbox.call("write", key=key, value=0)
                return ToySubmission(key=key)
        return ToySubmission(no_incident=True)
