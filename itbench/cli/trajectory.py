"""Print one trial's trajectory: ``itbench trajectory``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from itbench import console
from itbench.cli.params import json_option
from itbench.errors import RunDirError
from itbench.store import MANIFEST, RunStore
from itbench.trajectory import EventStep, MessageStep, Step, ToolStep, Trajectory, read

#: Characters of a message or result shown per step without ``--full``.
SHOWN = 600


def _not_a_trial(path: Path) -> click.UsageError:
    """The error for a directory that holds no trajectory, naming the trials when it is a run."""
    if (path / MANIFEST).is_file():
        trials = RunStore(path).trial_dirs()
        listed = "\n".join(f"  {path / 'trials' / h}  ({t})" for h, t in sorted(trials.items()))
        return click.UsageError(
            f"{path} is a run directory; give one of its trials:\n{listed or '  (none yet)'}"
        )
    return click.UsageError(
        f"{path} holds no {'trajectory.json'} (not a finished trial's directory)"
    )


def _cut(text: str, full: bool) -> str:
    return text if full or len(text) <= SHOWN else text[:SHOWN] + f" … [{len(text)} characters]"


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _step_lines(step: Step, start: float, full: bool) -> list[str]:
    when = f"+{step.at.timestamp() - start:7.2f}s"
    took = f" ({step.elapsed:.2f}s)" if step.elapsed is not None else ""
    head = f"[dim]#{step.index:<3} {when}[/dim] "
    if isinstance(step, MessageStep):
        usage = ""
        if step.usage is not None:
            cost = f", ${step.usage.cost_usd:.6f}" if step.usage.cost_usd is not None else ""
            usage = (
                f" [dim]{step.usage.input_tokens} in / {step.usage.output_tokens} out{cost}[/dim]"
            )
        role = "tool result" if step.role == "tool" else step.role
        lines = [f"{head}[bold]{role}[/bold]{took}{usage}"]
        if step.content:
            lines.append("    " + escape(_cut(step.content, full)).replace("\n", "\n    "))
        lines += [
            f"    [cyan]→ {escape(c.name)}[/cyan]({escape(_cut(c.arguments, full))})"
            for c in step.tool_calls
        ]
        return lines
    if isinstance(step, ToolStep):
        state = "[green]ok[/green]" if step.ok else "[red]error[/red]"
        lines = [f"{head}[bold]tool {escape(step.tool)}[/bold] {state}{took}"]
        lines.append(f"    args: {escape(_cut(_json(step.arguments), full))}")
        shown = step.result if step.ok else step.error
        lines.append(
            "    " + escape(_cut(_json(shown), full)) + (" [truncated]" if step.truncated else "")
        )
        return lines
    assert isinstance(step, EventStep)
    detail = f" {escape(_cut(_json(step.detail), full))}" if step.detail is not None else ""
    return [f"{head}[magenta]event {escape(step.name)}[/magenta]{detail}"]


def print_trajectory(t: Trajectory, full: bool = False) -> None:
    """Print a trajectory readably on stdout."""
    info = t.trial
    usage = t.usage
    cost = f", ${usage.cost_usd:.6f}" if usage.cost_usd is not None else ""
    console.out.print(
        f"[bold]{escape(info.trial_id)}[/bold] ({escape(info.scenario_id)}, agent "
        f"{escape(console.agent_label(info.agent, info.labels))}): [bold]{info.status}[/bold]"
        + (f" — {escape(info.error)}" if info.error else ""),
        highlight=False,
    )
    if t.model:
        console.out.print(
            f"model {escape(t.model)}; settings {escape(json.dumps(t.settings))}", highlight=False
        )
    console.out.print(
        f"{len(t.steps)} steps, {len(t.tool_steps())} tool calls, "
        f"{usage.input_tokens or 0} input / {usage.output_tokens or 0} output tokens{cost}",
        highlight=False,
    )
    if t.agent_metrics:
        console.out.print(f"agent metrics: {escape(json.dumps(t.agent_metrics))}", highlight=False)
    start = info.started_at.timestamp()
    for step in t.steps:
        for line in _step_lines(step, start, full):
            console.out.print(line, highlight=False)
    if t.submission is not None:
        console.out.print("[bold]submission[/bold]", highlight=False)
        console.out.print(escape(_cut(json.dumps(t.submission, indent=2), full)), highlight=False)


@click.command()
@click.argument("trial_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--full", is_flag=True, help="Show messages and results whole.")
@json_option
def trajectory(trial_dir: Path, full: bool, as_json: bool) -> None:
    """Print the trajectory of one trial (TRIAL_DIR: a run's trials/<handle>).

    Every agent's trials have one: model messages with tokens and cost, tool calls with their
    arguments, results and timings, retries, submissions. Format: itbench/trajectory.py.
    """
    try:
        t = read(trial_dir)
    except RunDirError as exc:
        if not (trial_dir / "trajectory.json").exists():
            raise _not_a_trial(trial_dir) from None
        raise click.UsageError(str(exc)) from None
    if as_json:
        console.print_json(t.model_dump(mode="json"))
    else:
        print_trajectory(t, full)
