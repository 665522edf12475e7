"""Export of a run to the inspect_ai log format (``itbench export --format inspect``).

One run becomes one log per domain (``<run_id>-<domain>.eval``): task ``itbench/<domain>``
with the catalog's version of the run's scenarios as task version, the run's model (the
``llm`` agent's, else ``itbench/<agent>``), and a sample per trial: id the scenario id, epoch
the trial index + 1, input the goal, the trial's messages (its model conversation, or for an
agent without a model, each tool call as an assistant call and a tool answer) and its events
(each model response as a model event with its input and usage, each tool call as a tool
event, each agent event as an info event), so ``inspect view`` shows the transcript. Scores: an
``itbench`` score of 1.0 when the trial passed and 0.0 otherwise (status and labels as
metadata), and one score per numeric metric of the domain (precision, recall, ``loc_f1``, ...;
a boolean as 1.0 or 0.0). The log's results hold the pass rate as ``accuracy`` and each
metric's mean. Ground truth is not exported: the target is empty. ``inspect view`` and
inspect's data frames (``inspect_ai.analysis.samples_df``) open the files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from itbench.models import RunManifest, TrialResult, TrialStatus
from itbench.store import RunStore
from itbench.trajectory import EventStep, MessageStep, ToolStep, Trajectory
from itbench.trajectory import read as read_trajectory

#: The name of the pass score (1.0 passed, 0.0 otherwise).
SCORE = "itbench"


def _arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        return {}, str(exc)
    return (value, None) if isinstance(value, dict) else ({}, "the arguments are not an object")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def messages(t: Trajectory | None, goal: str) -> list[Any]:
    """The inspect messages of one trial."""
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
    )
    from inspect_ai.tool import ToolCall

    steps = t.steps if t is not None else []
    said = [s for s in steps if isinstance(s, MessageStep)]
    out: list[Any] = []
    if said:
        names: dict[str, str] = {}
        for m in said:
            content = m.content or ""
            if m.role == "system":
                out.append(ChatMessageSystem(content=content))
            elif m.role == "user":
                out.append(ChatMessageUser(content=content))
            elif m.role == "assistant":
                calls = []
                for c in m.tool_calls:
                    names[c.id] = c.name
                    arguments, problem = _arguments(c.arguments)
                    calls.append(
                        ToolCall(id=c.id, function=c.name, arguments=arguments, parse_error=problem)
                    )
                model = t.model if t is not None else None
                out.append(
                    ChatMessageAssistant(content=content, tool_calls=calls or None, model=model)
                )
            else:
                function = names.get(m.tool_call_id or "")
                out.append(
                    ChatMessageTool(content=content, tool_call_id=m.tool_call_id, function=function)
                )
        return out
    out.append(ChatMessageUser(content=goal))
    for s in steps:
        if not isinstance(s, ToolStep):
            continue
        call_id = f"call_{s.index}"
        arguments = s.arguments if isinstance(s.arguments, dict) else {}
        out.append(
            ChatMessageAssistant(
                content="", tool_calls=[ToolCall(id=call_id, function=s.tool, arguments=arguments)]
            )
        )
        shown = _text(s.result) if s.ok else f"error: {s.error}"
        out.append(ChatMessageTool(content=shown, tool_call_id=call_id, function=s.tool))
    return out


def events(t: Trajectory | None, said: list[Any]) -> list[Any]:
    """The inspect events of one trial, in order.

    Args:
        t: Its trajectory.
        said: Its inspect messages (:func:`messages`): a model event's input is what was said
            before the response.
    """
    from inspect_ai.event import InfoEvent, ModelEvent, ToolEvent
    from inspect_ai.model import (
        ChatCompletionChoice,
        ChatMessageAssistant,
        GenerateConfig,
        ModelOutput,
        ModelUsage,
    )
    from inspect_ai.tool import ToolCallError

    if t is None:
        return []
    out: list[Any] = []
    replies = iter(i for i, m in enumerate(said) if isinstance(m, ChatMessageAssistant))
    model = t.model or "itbench"
    for s in t.steps:
        if isinstance(s, MessageStep) and s.role == "assistant" and t.model:
            at = next(replies, None)
            if at is None:
                continue
            u = s.usage
            usage = ModelUsage(
                input_tokens=u.input_tokens if u else 0,
                output_tokens=u.output_tokens if u else 0,
                total_tokens=(u.input_tokens + u.output_tokens) if u else 0,
                total_cost=u.cost_usd if u else None,
            )
            output = ModelOutput(
                model=model,
                choices=[ChatCompletionChoice(message=said[at], stop_reason="stop")],
                usage=usage,
            )
            out.append(
                ModelEvent(
                    timestamp=s.at,
                    model=model,
                    input=said[:at],
                    tools=[],
                    tool_choice="auto",
                    config=GenerateConfig(),
                    output=output,
                    working_time=s.elapsed,
                )
            )
        elif isinstance(s, ToolStep):
            error = None if s.ok else ToolCallError("unknown", s.error or "failed")
            out.append(
                ToolEvent(
                    timestamp=s.at,
                    id=f"call_{s.index}",
                    function=s.tool,
                    arguments=s.arguments if isinstance(s.arguments, dict) else {},
                    result=_text(s.result) if s.ok else "",
                    error=error,
                    truncated=None,
                    working_time=s.elapsed,
                )
            )
        elif isinstance(s, EventStep):
            out.append(
                InfoEvent(timestamp=s.at, source="itbench", data={"event": s.name, **_detail(s)})
            )
    return out


def _detail(s: EventStep) -> dict[str, Any]:
    return {"detail": json.loads(json.dumps(s.detail, default=str))} if s.detail is not None else {}


def _numeric(metrics: dict[str, Any]) -> dict[str, float]:
    """The metrics inspect can score: numbers, and booleans as 1.0 or 0.0."""
    return {
        k: float(v)
        for k, v in metrics.items()
        if isinstance(v, bool | int | float) and v == v and k != SCORE
    }


def _sample(result: TrialResult, trial_dir: Path, model: str) -> Any:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelUsage
    from inspect_ai.scorer import Score

    try:
        trajectory: Trajectory | None = read_trajectory(trial_dir)
    except Exception:  # a trial without a readable trajectory keeps its score
        trajectory = None
    goal = ""
    task_file = trial_dir / "task.json"
    if task_file.is_file():
        goal = str(json.loads(task_file.read_text(encoding="utf-8")).get("goal", ""))
    submission = trajectory.submission if trajectory is not None else None
    u = result.usage
    usage = {}
    if u.input_tokens is not None or u.output_tokens is not None:
        usage[model] = ModelUsage(
            input_tokens=u.input_tokens or 0,
            output_tokens=u.output_tokens or 0,
            total_tokens=(u.input_tokens or 0) + (u.output_tokens or 0),
            total_cost=u.cost_usd,
        )
    explanation = result.status.value + (f": {result.error}" if result.error else "")
    said = messages(trajectory, goal)
    return EvalSample(
        id=result.scenario_id,
        epoch=result.trial_index + 1,
        input=goal,
        target="",
        messages=said,
        events=events(trajectory, said),
        scores={
            SCORE: Score(
                value=1.0 if result.status is TrialStatus.passed else 0.0,
                answer=json.dumps(submission) if submission is not None else None,
                explanation=explanation,
                metadata={"status": result.status.value, "metrics": result.metrics},
            ),
            **{k: Score(value=v) for k, v in _numeric(result.metrics).items()},
        },
        metadata={
            "trial_id": result.trial_id,
            "handle": result.handle,
            "domain": result.domain,
            "agent": result.agent,
            "status": result.status.value,
            "labels": [str(label) for label in result.labels],
            "tags": result.tags,
            "complexity": result.complexity.value if result.complexity else None,
            "facets": result.facets,
            "timings": result.timings.model_dump(),
            "agent_metrics": result.agent_metrics,
        },
        model_usage=usage,
        started_at=result.started_at.isoformat(),
        completed_at=result.finished_at.isoformat(),
        total_time=result.timings.total,
    )


def build_log(
    manifest: RunManifest, results: list[TrialResult], store: RunStore, domain: str
) -> Any:
    """The inspect log of a run's trials of ``domain``."""
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalRevision,
        EvalScore,
        EvalSpec,
        EvalStats,
    )
    from inspect_ai.model import ModelUsage

    options = manifest.config.options
    model = manifest.config.model or f"itbench/{manifest.config.agent}"
    ordered = sorted(
        (r for r in results if r.domain == domain), key=lambda r: (r.scenario_id, r.trial_index)
    )
    samples = [_sample(r, store.trial_dir(r.handle), model) for r in ordered]
    passed = sum(r.status is TrialStatus.passed for r in ordered)
    total = ModelUsage()
    for s in samples:
        for u in s.model_usage.values():
            total = total + u
    revision = (
        EvalRevision(type="git", origin="", commit=manifest.git_revision, dirty=manifest.git_dirty)
        if manifest.git_revision
        else None
    )
    spec = EvalSpec(
        eval_id=manifest.run_id,
        run_id=manifest.run_id,
        created=manifest.created_at.isoformat(),
        task=f"itbench/{domain}",
        task_id=f"{manifest.run_id}-{domain}",
        task_version=manifest.catalog_versions.get(domain, 0),
        dataset=EvalDataset(
            name=f"itbench/{domain}",
            samples=len(samples),
            sample_ids=sorted({r.scenario_id for r in ordered}),
        ),
        model=model,
        model_base_url=options.get("llm_base_url"),
        config=EvalConfig(epochs=manifest.config.trials),
        revision=revision,
        packages=manifest.packages,
        metadata={
            "agent": manifest.config.agent,
            "labels": [str(label) for label in manifest.labels],
            "options": {k: v for k, v in options.items()},
        },
    )
    return EvalLog(
        status="success",
        eval=spec,
        results=EvalResults(
            total_samples=len(samples),
            completed_samples=len(samples),
            scores=[
                EvalScore(
                    name=SCORE,
                    scorer=SCORE,
                    metrics={
                        "accuracy": EvalMetric(
                            name="accuracy", value=passed / len(samples) if samples else 0.0
                        )
                    },
                ),
                *(
                    EvalScore(
                        name=name,
                        scorer=name,
                        metrics={"mean": EvalMetric(name="mean", value=sum(got) / len(got))},
                    )
                    for name, got in _by_metric(ordered).items()
                ),
            ],
        ),
        stats=EvalStats(
            started_at=manifest.created_at.isoformat(),
            completed_at=max(
                (r.finished_at for r in ordered), default=manifest.created_at
            ).isoformat(),
            model_usage={model: total} if total.total_tokens else {},
        ),
        samples=samples,
    )


def _by_metric(results: list[TrialResult]) -> dict[str, list[float]]:
    """Each numeric metric's values over the trials that have it."""
    out: dict[str, list[float]] = {}
    for r in results:
        for k, v in _numeric(r.metrics).items():
            out.setdefault(k, []).append(v)
    return dict(sorted(out.items()))


def export_run(run_dir: Path, out_dir: Path) -> list[Path]:
    """Write the inspect logs of ``run_dir`` (one per domain) into ``out_dir``; the files.

    Raises:
        RunDirError: not a run directory, or a malformed one.
        ImportError: inspect_ai is not installed.
    """
    from inspect_ai.log import write_eval_log

    store = RunStore(run_dir)
    manifest = store.read_manifest()
    results = store.results(manifest, key=store.chain_key(manifest))
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for domain in sorted({r.domain for r in results}):
        path = out_dir / f"{manifest.run_id}-{domain}.eval"
        write_eval_log(build_log(manifest, results, store, domain), str(path))
        paths.append(path)
    return paths
