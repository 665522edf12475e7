"""Commands about agents' work: ``trajectory``, ``export`` and ``mcp``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from itbench import console
from itbench.cli.common import EXIT_FAILED
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


@click.command()
@click.argument(
    "run_dirs",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
)
@click.option(
    "--format", "fmt", type=click.Choice(["inspect"]), required=True, help="Output format."
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to write to (default: RUN_DIR/inspect).",
)
def export(run_dirs: tuple[Path, ...], fmt: str, out: Path | None) -> None:
    """Export runs to another tool's format.

    `--format inspect` writes one inspect_ai log (.eval) per run: a sample per trial with its
    messages (tool calls for agents without a model), score (1 passed, 0 otherwise; the
    metrics as metadata) and model usage, for `inspect view` and inspect's data frames.
    Ground truth is not exported.
    """
    from itbench.inspect_export import export_run

    for run_dir in run_dirs:
        try:
            path = export_run(run_dir, out or run_dir / "inspect")
        except RunDirError as exc:
            raise click.UsageError(str(exc)) from None
        except ImportError as exc:
            raise click.UsageError(
                f"the inspect export needs inspect_ai ({exc}): pip install 'itbench[inspect]'"
            ) from None
        console.out.print(f"wrote {path}", highlight=False)


def _endpoint(path: Path) -> tuple[Path, dict[str, Any]]:
    """The waiting trial at ``path`` (a trial directory, or a run with one waiting trial)."""
    from itbench.human import ENDPOINT_FILE

    candidates = (
        [path]
        if (path / ENDPOINT_FILE).exists()
        else sorted(path.glob(f"trials/*/{ENDPOINT_FILE}"))
    )
    candidates = [c.parent if c.name == ENDPOINT_FILE else c for c in candidates]
    if not candidates:
        raise click.UsageError(
            f"no trial is waiting in {path}: start one with "
            "`itbench evaluate --agent human -s SCENARIO --timeout SECONDS` and give its trial "
            "directory (the run prints it)"
        )
    if len(candidates) > 1:
        listed = "\n".join(f"  {c}" for c in candidates)
        raise click.UsageError(f"several trials are waiting in {path}; give one:\n{listed}")
    record = candidates[0] / ENDPOINT_FILE
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        url, token = str(data["url"]), str(data["token"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise click.UsageError(f"{record}: cannot read the trial's endpoint: {exc}") from None
    return candidates[0], {**data, "url": url, "token": token}


@click.command()
@click.option(
    "--trial-dir",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The waiting trial's directory (or its run's, when one trial waits).",
)
@click.option(
    "--print", "show", is_flag=True, help="Print the endpoint and client configurations instead."
)
def mcp(trial_dir: Path, show: bool) -> None:
    """Serve a waiting trial to an MCP client over stdio (for a person driving it by hand).

    An environment lives only while its trial runs: start a trial that waits for you with
    `itbench evaluate --agent human -s SCENARIO --timeout 3600`, then point your MCP client at
    this command (`itbench mcp --trial-dir DIR` as a stdio server). The trial's tools and
    `submit` are offered; your first accepted submission ends the trial and it is scored.
    `--print` shows the streamable HTTP endpoint with its token, and both configurations in
    the common `mcpServers` form.
    """
    from itbench import mcpbridge

    where, data = _endpoint(trial_dir)
    if show:
        console.print_json(
            {
                "trial_dir": str(where),
                "url": data["url"],
                "token": data["token"],
                "deadline": data.get("deadline"),
                "mcpServers": {
                    "itbench": {
                        "type": "http",
                        "url": data["url"],
                        "headers": {"Authorization": f"Bearer {data['token']}"},
                    },
                    "itbench-stdio": {
                        "type": "stdio",
                        "command": sys.argv[0] if sys.argv[0].endswith("itbench") else "itbench",
                        "args": ["mcp", "--trial-dir", str(where.resolve())],
                    },
                },
            }
        )
        return
    try:
        mcpbridge.serve(data["url"], data["token"], sys.stdin.buffer, sys.stdout.buffer)
    except KeyboardInterrupt:
        sys.exit(EXIT_FAILED)
