"""Pydantic models shared by the core and every domain: scenarios, tasks, submissions, results."""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

#: Version of the on-disk result format (``results.jsonl`` and ``manifest.json``).
SCHEMA_VERSION = "1.0"
_ID = re.compile(r"[a-z][a-z0-9_-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
_DOMAIN = re.compile(r"[a-z][a-z0-9_-]*")

MetricValue = float | int | bool | None
#: The longest agent wall-clock limit a scenario or a run may set, in seconds (one day): a
#: deadline further out is a mistake, and one past what a date can hold would fail every trial.
MAX_TIME_LIMIT = 86400.0
#: The tag of a control scenario, and the facet every result records for it (``yes``/``no``).
CONTROL_TAG = "control"


class Complexity(StrEnum):
    """How hard a scenario is meant to be."""

    low = "low"
    medium = "medium"
    high = "high"


class TrialStatus(StrEnum):
    """Outcome of one trial.

    ``error`` is an infrastructure failure (setup, injection, readiness, evaluation or
    teardown broke); it is never counted against the agent. ``timeout`` means the agent
    exceeded its wall-clock limit, which is an agent failure. ``invalid`` means what decides
    the score was tampered with or lost during the agent's turn (an evaluator input changed, a
    harness server died, the scoring code changed): never a pass, never an ``error``; reports
    count it apart and score it as a failure, so tampering cannot hide one. ``unavailable``
    means the model the agent talks to could not be reached or kept refusing after its retries
    (a failure of neither the agent nor the harness): shown apart with its reason and, like
    ``error``, left out of every score.
    """

    passed = "passed"
    failed = "failed"
    error = "error"
    timeout = "timeout"
    invalid = "invalid"
    unavailable = "unavailable"


class Label(StrEnum):
    """What a result's agent could reach, shown beside it in every output."""

    #: The agent ran without the sandbox (an in-process Python agent, or ``--sandbox none``):
    #: it could read the harness's files and processes, so its score proves nothing.
    unsandboxed = "unsandboxed"
    #: A privileged reference agent (``oracle``) that reads ground truth by design.
    reference = "reference"
    #: A sandboxed agent ran without its memory, process, CPU and workspace bounds (the harness
    #: could not make control groups or mount its workspace): it could starve the machine.
    unbounded = "unbounded"


class ScenarioSpec(BaseModel):
    """Base of every domain's scenario spec.

    A domain subclasses it, narrows ``domain`` to a ``Literal`` and adds its own fields
    (environment, fault, ground truth). Ground truth is read only by the evaluator and
    the oracle; the task view is built from a whitelist of public fields.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="Unique id `domain/name`, plus a variant suffix from a matrix.")
    domain: str = Field(description="Name of the domain plugin that runs this scenario.")
    title: str = Field(default="", description="One-line human title.")
    description: str = Field(default="", description="Longer description for catalog readers.")
    goal: str = Field(description="The task text handed to the agent.")
    tags: list[str] = Field(default_factory=list)
    complexity: Complexity = Complexity.medium
    task_types: list[str] = Field(min_length=1, description="detection, localization, ...")
    time_limit: float = Field(
        default=300.0,
        gt=0,
        le=MAX_TIME_LIMIT,
        allow_inf_nan=False,
        description="Agent wall-clock limit, seconds.",
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="Matrix parameters this variant was expanded from."
    )

    _source_path: Path | None = PrivateAttr(default=None)

    @field_validator("id")
    @classmethod
    def _well_formed_id(cls, value: str) -> str:
        # One slash and no '.' in the domain part keep ids distinct as trial ids and paths.
        if not _ID.fullmatch(value):
            raise ValueError(
                f"id {value!r} is not `domain/name` (a lowercase domain of letters, digits, '_' "
                "and '-'; one '/'; a name of letters, digits, '.', '_' and '-')"
            )
        return value

    @property
    def source_path(self) -> Path | None:
        """File this scenario was loaded from (``None`` when built in code)."""
        return self._source_path

    @property
    def source_dir(self) -> Path | None:
        """Directory holding the scenario file and any data files beside it."""
        return self._source_path.parent if self._source_path else None

    def facets(self) -> dict[str, str]:
        """Categories of this scenario that reports break results down by.

        A domain overrides it, for example ``{"mechanism": "bad_release"}`` or
        ``{"family": "linux", "check": "ssh-root-login"}``. Every result records them
        (:attr:`TrialResult.facets`); like the scenario id, they never reach the agent.
        """
        return {}

    @property
    def control(self) -> bool:
        """Whether this is a control (tagged ``control``): no fault, a benign explanation."""
        return CONTROL_TAG in self.tags

    def result_facets(self) -> dict[str, str]:
        """The facets a result records: the domain's, and whether the scenario is a control.

        Reports show controls apart and never fold them into the pass rate of the problems.
        """
        return {**self.facets(), CONTROL_TAG: "yes" if self.control else "no"}

    def summary(self) -> dict[str, Any]:
        """Public catalog fields, as printed by ``itbench list --json``."""
        return {
            "id": self.id,
            "domain": self.domain,
            "title": self.title,
            "tags": list(self.tags),
            "complexity": self.complexity.value,
            "task_types": list(self.task_types),
            "time_limit": self.time_limit,
            "facets": self.facets(),
        }


class ToolSpec(BaseModel):
    """A tool as the agent sees it: name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any] = Field(description="JSON Schema of the keyword arguments.")
    action: bool = Field(default=False, description="True when the tool changes the environment.")


class TaskView(BaseModel):
    """Everything an agent is given for one trial.

    It never contains ground truth, nor the scenario id, title, params, file or family:
    ``handle`` is random per trial and names nothing.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    handle: str = Field(description="Opaque id of this trial, random per trial.")
    domain: str
    goal: str
    task_types: list[str]
    tools: list[ToolSpec]
    workspace: Path = Field(description="Private directory the agent may write to.")
    deadline: datetime = Field(description="Wall-clock time after which tool calls are refused.")
    time_limit: float
    output_schema: dict[str, Any] = Field(description="JSON Schema of the submission.")
    context: dict[str, Any] = Field(
        default_factory=dict, description="Domain-specific public facts (endpoints, hosts...)."
    )


class Submission(BaseModel):
    """Base of every domain's submission. Agents return one (or ``None`` for nothing)."""

    # A submission is JSON: NaN and infinities are not, and would not survive submission.json.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    notes: str = Field(default="", description="Free text from the agent; never scored.")


class Evaluation(BaseModel):
    """What a domain's evaluator returns for one trial."""

    passed: bool
    metrics: dict[str, MetricValue] = Field(default_factory=dict)
    details: dict[str, Any] = Field(
        default_factory=dict, description="Explanations written to the trial's artifacts."
    )
    time_to_detect: float | None = None
    time_to_mitigate: float | None = None


class Timings(BaseModel):
    """Seconds spent in each phase of a trial (``None`` when a phase did not run)."""

    setup: float | None = None
    inject: float | None = None
    ready: float | None = None
    agent: float | None = None
    evaluate: float | None = None
    teardown: float | None = None
    total: float | None = None
    time_to_detect: float | None = None
    time_to_mitigate: float | None = None


class Usage(BaseModel):
    """Model usage an agent reports about itself (self-reported, not measured)."""

    model_config = ConfigDict(allow_inf_nan=False)

    input_tokens: int | None = Field(default=None, ge=0, le=10**15)
    output_tokens: int | None = Field(default=None, ge=0, le=10**15)
    cost_usd: float | None = Field(default=None, ge=0, le=10**9)


class AgentOutput(BaseModel):
    """How much an external agent printed, and the cap applied to what was kept."""

    cap_bytes: int = Field(description="Bytes kept at most of each of stdout and stderr.")
    stdout_bytes: int = 0
    stderr_bytes: int = 0

    @property
    def truncated(self) -> bool:
        """Whether either stream went past the cap."""
        return max(self.stdout_bytes, self.stderr_bytes) > self.cap_bytes


class TrialResult(BaseModel):
    """One finished trial: a line of ``results.jsonl``."""

    schema_version: str = SCHEMA_VERSION
    run_id: str
    trial_id: str
    handle: str = Field(default="", description="The trial's opaque handle and directory name.")
    scenario_id: str
    domain: str
    agent: str
    trial_index: int
    seed: int
    status: TrialStatus
    metrics: dict[str, MetricValue] = Field(default_factory=dict)
    timings: Timings = Field(default_factory=Timings)
    steps: int = 0
    tool_calls: int = 0
    usage: Usage = Field(default_factory=Usage)
    agent_metrics: dict[str, MetricValue] = Field(
        default_factory=dict,
        description="Figures the agent reported about itself (attempts, undos); never scored.",
    )
    error: str | None = Field(
        default=None, description="Reason for an error, a timeout or an invalid trial."
    )
    labels: list[Label] = Field(
        default_factory=list, description="unsandboxed, reference, unbounded."
    )
    bounds: dict[str, int | float] = Field(
        default_factory=dict,
        description="The sandbox's bounds the agent ran under, by option name (agent_memory...); "
        "empty when none applied.",
    )
    agent_output: AgentOutput | None = None
    tags: list[str] = Field(default_factory=list)
    complexity: Complexity | None = None
    task_types: list[str] = Field(default_factory=list)
    facets: dict[str, str] = Field(
        default_factory=dict, description="The scenario's report categories (mechanism, family)."
    )
    drawn: dict[str, Any] = Field(
        default_factory=dict,
        description="What the trial drew from the scenario's declared sets (targets, parameters).",
    )
    started_at: datetime
    finished_at: datetime
    versions: dict[str, str] = Field(default_factory=dict)
    record_sha256: str | None = Field(
        default=None,
        description="sha256 of the trial's evaluation.json (None: the trial recorded none).",
    )
    chain: str = Field(
        default="",
        description="HMAC binding this line to its run and the lines before it (itbench.chain).",
    )

    @field_validator("domain")
    @classmethod
    def _well_formed_domain(cls, value: str) -> str:
        # Domains name files of reports and leaderboards: never a path.
        if not _DOMAIN.fullmatch(value):
            raise ValueError(
                f"domain {value!r} is not a domain name (lowercase letters, digits, '_', '-')"
            )
        return value

    @model_validator(mode="after")
    def _scenario_of_its_domain(self) -> TrialResult:
        if not _ID.fullmatch(self.scenario_id) or not self.scenario_id.startswith(
            f"{self.domain}/"
        ):
            raise ValueError(
                f"scenario_id {self.scenario_id!r} is not a scenario of domain {self.domain!r}"
            )
        return self

    @property
    def passed(self) -> bool:
        """Whether the trial passed."""
        return self.status is TrialStatus.passed


#: The trial option naming the model an agent talks to (set by ``--model``).
MODEL_OPTION = "llm_model"


class RunConfig(BaseModel):
    """The options of one ``itbench evaluate`` run, enough to resume it."""

    agent: str
    scenarios: list[str] = Field(default_factory=lambda: ["*"])
    tags: list[str] = Field(default_factory=list)
    domains: list[str] = Field(default_factory=list)
    complexity: list[Complexity] = Field(default_factory=list)
    trials: int = Field(default=1, ge=1)
    seed: int = 0
    timeout: float | None = Field(default=None, gt=0, le=MAX_TIME_LIMIT, allow_inf_nan=False)
    workers: int = Field(default=1, ge=1)
    executor: str = "local"
    sandbox: Literal["bwrap", "none"] = Field(
        default="bwrap", description="How external agents are confined; none is for debugging."
    )
    plugins: list[str] = Field(default_factory=list)
    scenario_paths: list[str] = Field(default_factory=list)
    options: dict[str, Any] = Field(default_factory=dict, description="Domain options.")
    label: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        pattern=r"^[^\x00-\x1f\[\]]+$",
        description="The run's name in every table (default: the agent, with its model).",
    )

    @property
    def display_label(self) -> str:
        """What tables call the run: its label, else the agent with its model where it has one."""
        if self.label:
            return self.label
        return f"{self.agent} ({self.model})" if self.model else self.agent

    @property
    def model(self) -> str | None:
        """The model the run's agent talks to (``--model``, the ``llm_model`` option), if any."""
        value = self.options.get(MODEL_OPTION)
        return str(value) if value is not None else None


class HostInfo(BaseModel):
    """The machine a run happened on."""

    hostname: str
    platform: str
    python: str
    cpus: int
    memory_bytes: int | None = None


class RunManifest(BaseModel):
    """``manifest.json`` of a run directory."""

    schema_version: str = SCHEMA_VERSION
    kind: Literal["itbench-run"] = "itbench-run"
    run_id: str
    created_at: datetime
    config: RunConfig
    packages: dict[str, str]
    package_hashes: dict[str, str] = Field(
        default_factory=dict, description="sha256 over each plugin package's source files."
    )
    git_revision: str | None
    git_dirty: bool | None = Field(default=None, description="Uncommitted changes in the tree.")
    secret_sha256: str = Field(default="", description="Hash of the run's secret file.")
    labels: list[Label] = Field(default_factory=list, description="Labels of the run's agent.")
    bounds: dict[str, int | float] = Field(
        default_factory=dict,
        description="The bounds of the run's sandboxes, by option name; empty when none apply.",
    )
    host: HostInfo
    seeds: dict[str, int] = Field(description="Seed of each planned trial, by trial id.")
    scenario_ids: list[str]
    catalog_versions: dict[str, str] = Field(
        default_factory=dict,
        description="Per domain, a digest of how the catalog defined the run's scenarios.",
    )
