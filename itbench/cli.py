"""The ``itbench`` command line."""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from functools import wraps
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from itbench import __version__, console
from itbench.bench import Bench
from itbench.builtin.agents import PROBES
from itbench.errors import RunDirError, UsageError
from itbench.models import (
    Complexity,
    RunConfig,
    RunManifest,
    ScenarioSpec,
    Submission,
    TaskView,
    TrialResult,
    TrialStatus,
)
from itbench.options import OptionError, parse_flags
from itbench.runner import Runner, RunOutcome
from itbench.store import RunStore

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _bench(plugins: tuple[str, ...], scenario_paths: tuple[str, ...]) -> Bench:
    bench = Bench(plugins=plugins, scenario_paths=scenario_paths)
    return bench


def _report_problems(bench: Bench) -> None:
    for line in bench.problem_lines():
        console.problem(line)


def bench_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--plugin`` and ``--scenario-path`` and pass a loaded :class:`Bench` as ``bench``."""

    @click.option(
        "--plugin", "plugins", multiple=True, metavar="MODULE", help="Load a plugin module."
    )
    @click.option(
        "--scenario-path",
        "scenario_paths",
        multiple=True,
        type=click.Path(file_okay=False),
        metavar="DIR",
        help="An extra scenario catalog directory.",
    )
    @wraps(fn)
    def wrapper(
        *args: Any, plugins: tuple[str, ...], scenario_paths: tuple[str, ...], **kwargs: Any
    ) -> Any:
        return fn(*args, bench=_bench(plugins, scenario_paths), **kwargs)

    return wrapper


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
sandbox_option = click.option(
    "--sandbox",
    type=click.Choice(["bwrap", "none"]),
    default="bwrap",
    show_default=True,
    help="Confine external agents (none: for debugging; results are labelled unsandboxed).",
)


def _catalog(bench: Bench, quiet: bool = False) -> None:
    """Load the catalog and print plugin problems and rejected scenario files."""
    catalog = bench.catalog
    _report_problems(bench)
    if not quiet:
        for error in catalog.errors:
            console.problem(f"rejected scenario: {error.line()}")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="itbench")
def cli() -> None:
    """itbench: benchmark AI agents on real IT work (SRE, compliance, FinOps)."""


# --- list / show ------------------------------------------------------------------------


@cli.command("list")
@click.argument("patterns", nargs=-1)
@click.option("--domain", "domains", multiple=True, help="Only these domains.")
@click.option("--tag", "tags", multiple=True, help="Only scenarios with every one of these tags.")
@click.option("--complexity", multiple=True, type=click.Choice([c.value for c in Complexity]))
@json_option
@bench_options
def list_cmd(
    bench: Bench,
    patterns: tuple[str, ...],
    domains: tuple[str, ...],
    tags: tuple[str, ...],
    complexity: tuple[str, ...],
    as_json: bool,
) -> None:
    """List scenarios (id globs like 'sre/*' select)."""
    _catalog(bench)
    specs = bench.catalog.select(
        patterns or ("*",), tags=tags, domains=domains, complexity=complexity
    )
    rejected = len(bench.catalog.errors)
    if as_json:
        console.print_json([s.summary() for s in specs])
    else:
        rows = [
            [s.id, s.domain, s.complexity.value, ",".join(s.task_types), ",".join(s.tags)]
            for s in specs
        ]
        console.table(None, ["id", "domain", "complexity", "task types", "tags"], rows)
        console.out.print(f"{len(specs)} scenarios, {rejected} rejected")
    if rejected:
        console.problem(f"{rejected} scenario file(s) rejected")


@cli.command()
@click.argument("scenario_id")
@json_option
@bench_options
def show(bench: Bench, scenario_id: str, as_json: bool) -> None:
    """Show the public fields of one scenario (never its ground truth)."""
    _catalog(bench, quiet=True)
    spec = bench.catalog.scenarios.get(scenario_id)
    if spec is None:
        raise click.UsageError(f"unknown scenario {scenario_id!r} (see `itbench list`)")
    data = {**spec.summary(), "description": spec.description, "goal": spec.goal}
    data["params"] = spec.params
    data["source"] = str(spec.source_path) if spec.source_path else None
    if as_json:
        console.print_json(data)
        return
    for key, value in data.items():
        text = ", ".join(value) if isinstance(value, list) else value
        console.out.print(f"[bold]{key}[/bold]: {text}", highlight=False)


# --- evaluate / validate ----------------------------------------------------------------


def _parse_options(values: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--option")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _sigterm_as_interrupt() -> None:
    """Treat SIGTERM like Ctrl-C, so teardown runs and finished trials stay recorded."""
    signal.signal(signal.SIGTERM, _raise_interrupt)


def _run(
    bench: Bench, config: RunConfig, run_dir: Path, resume: bool, show_progress: bool
) -> RunOutcome:
    """Run with a progress bar; usage problems become click usage errors."""
    with console.progress(show_progress) as bar:
        task = bar.add_task(config.agent, total=None, last="")

        def on_plan(todo: int, done: int) -> None:
            bar.update(task, total=todo + done, completed=done)

        def on_result(result: TrialResult) -> None:
            bar.update(task, advance=1, last=f"{result.scenario_id}: {result.status.value}")

        runner = Runner(bench, config, run_dir, on_result=on_result, on_plan=on_plan)
        try:
            return runner.run(resume=resume)
        except (UsageError, RunDirError) as exc:
            raise click.UsageError(str(exc)) from None


#: Lets plugin-registered flags (``itbench_register_options``) through to :func:`_plugin_flags`.
PLUGIN_FLAGS = {"ignore_unknown_options": True, "allow_extra_args": True}


def _plugin_flags(bench: Bench, tokens: list[str]) -> tuple[list[str], dict[str, Any]]:
    """Plain arguments and the trial options set by plugin flags among ``tokens``."""
    try:
        return parse_flags(tokens, bench.options)
    except OptionError as exc:
        raise click.UsageError(str(exc)) from None


@cli.command(context_settings=PLUGIN_FLAGS)
@click.pass_context
@click.option("--agent", help="Agent name (see `itbench plugins`); required unless --resume.")
@click.option("--scenarios", "-s", "patterns", multiple=True, help="Scenario id glob (repeatable).")
@click.option("--domain", "domains", multiple=True)
@click.option("--tag", "tags", multiple=True)
@click.option("--complexity", multiple=True, type=click.Choice([c.value for c in Complexity]))
@click.option("--trials", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="Agent time limit, s.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--executor", default="local", show_default=True)
@sandbox_option
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE", help="Domain option.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Run directory.")
@click.option("--resume", type=click.Path(file_okay=False, path_type=Path), help="Continue a run.")
@json_option
@click.option("--plugin", "plugins", multiple=True, metavar="MODULE", help="Load a plugin module.")
@click.option("--scenario-path", "scenario_paths", multiple=True, metavar="DIR")
def evaluate(
    ctx: click.Context,
    agent: str | None,
    patterns: tuple[str, ...],
    domains: tuple[str, ...],
    tags: tuple[str, ...],
    complexity: tuple[str, ...],
    trials: int,
    seed: int,
    timeout: float | None,
    workers: int,
    executor: str,
    sandbox: str,
    options: tuple[str, ...],
    out: Path | None,
    resume: Path | None,
    as_json: bool,
    plugins: tuple[str, ...],
    scenario_paths: tuple[str, ...],
) -> None:
    """Run an agent on scenarios and record the results.

    Plugins may add flags of their own (listed by `itbench plugins`), such as
    `--policy-engine opa`; each sets a trial option like `--option KEY=VALUE`.

    Exits 0 when every trial ran (whatever the scores), 1 when any trial ended in an
    infrastructure error, 2 on a usage error, 130 when interrupted.
    """
    if resume is not None:
        try:
            manifest = RunStore(resume).read_manifest()
        except RunDirError as exc:
            raise click.UsageError(str(exc)) from None
        config = manifest.config
        run_dir = resume
    else:
        if not agent:
            raise click.UsageError("--agent is required (or --resume DIR)")
        config = RunConfig(
            agent=agent,
            scenarios=list(patterns) or ["*"],
            domains=list(domains),
            tags=list(tags),
            complexity=[Complexity(c) for c in complexity],
            trials=trials,
            seed=seed,
            timeout=timeout,
            workers=workers,
            executor=executor,
            sandbox=sandbox,
            plugins=list(plugins),
            scenario_paths=[str(Path(p).resolve()) for p in scenario_paths],
            options=_parse_options(options),
        )
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        run_dir = out or Path("runs") / f"{stamp}-{agent.replace('/', '_')}"
    bench = _bench(tuple(config.plugins), tuple(config.scenario_paths))
    rest, flags = _plugin_flags(bench, list(ctx.args))
    if rest:
        raise click.UsageError(f"unexpected argument(s): {' '.join(rest)}")
    if flags and resume is not None:
        raise click.UsageError("a resumed run keeps its options; drop the flags or start a new run")
    config.options.update(flags)
    _catalog(bench, quiet=True)
    _sigterm_as_interrupt()
    try:
        outcome = _run(bench, config, run_dir, resume is not None, show_progress=not as_json)
    except KeyboardInterrupt:
        done = len(RunStore(run_dir).results())
        console.problem(
            f"interrupted; {done} trial(s) recorded in {run_dir}; continue with --resume {run_dir}"
        )
        sys.exit(EXIT_INTERRUPTED)
    _print_outcome(outcome, as_json)
    sys.exit(EXIT_FAILED if outcome.errors else EXIT_OK)


def _print_outcome(outcome: RunOutcome, as_json: bool) -> None:
    if as_json:
        console.print_json(
            {
                "run_dir": str(outcome.run_dir),
                "errors": outcome.errors,
                "results": [r.model_dump(mode="json") for r in outcome.results],
            }
        )
        return
    header, rows = console.trial_rows(outcome.results)
    console.table(f"results: {outcome.run_dir}", header, rows)
    counts = {s.value: sum(r.status is s for r in outcome.results) for s in TrialStatus}
    console.out.print(", ".join(f"{n} {s}" for s, n in counts.items()), highlight=False)


@cli.command(context_settings=PLUGIN_FLAGS)
@click.pass_context
@click.argument("patterns", nargs=-1)
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE", help="Domain option.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Keep runs here.")
@click.option(
    "--probes/--no-probes",
    default=True,
    show_default=True,
    help="Also run the probe agents (leak, constant, thrash); each must fail.",
)
@json_option
@bench_options
def validate(
    ctx: click.Context,
    bench: Bench,
    patterns: tuple[str, ...],
    workers: int,
    options: tuple[str, ...],
    out: Path | None,
    probes: bool,
    as_json: bool,
) -> None:
    """Check scenarios: the oracle must pass each one; noop and every probe must fail it.

    The probes are `probe/leak` (looks for the answer outside the environment, from the
    sandbox), `probe/constant` (a fixed plausible answer; scenarios tagged `control` may pass
    it) and `probe/thrash` (acts on everything). A scenario any of them passes is invalid,
    with the agent named. Exits 1 when any selected scenario is invalid, and, when no PATTERN
    is given, when any scenario file of the catalog is rejected. Plugin flags (see
    `itbench plugins`) work as in `itbench evaluate`.
    """
    rest, flags = _plugin_flags(bench, [*patterns, *ctx.args])
    patterns = tuple(rest)
    _catalog(bench)
    specs = bench.catalog.select(patterns or ("*",))
    if not specs:
        raise click.UsageError(f"no scenario matches {', '.join(patterns or ('*',))}")
    base = out or Path(tempfile.mkdtemp(prefix="itbench-validate-"))
    outcomes: dict[str, dict[str, TrialResult]] = {s.id: {} for s in specs}
    agents = ["oracle", "noop", *(PROBES if probes else ())]
    _sigterm_as_interrupt()
    try:
        for agent in agents:
            config = RunConfig(
                agent=agent,
                scenarios=[s.id for s in specs],
                workers=workers,
                options={**_parse_options(options), **flags},
            )
            outcome = _run(
                bench,
                config,
                base / agent.replace("/", "-"),
                resume=(base / agent.replace("/", "-") / "manifest.json").exists(),
                show_progress=not as_json,
            )
            for r in outcome.results:
                outcomes[r.scenario_id][agent] = r
    except KeyboardInterrupt:
        console.problem(f"interrupted; partial runs in {base}")
        sys.exit(EXIT_INTERRUPTED)
    report = [_verdict(spec, outcomes[spec.id], agents) for spec in specs]
    bad = sum(not v["valid"] for v in report)
    rows = [
        [
            str(v["id"]),
            *(str(v["agents"].get(a) or "–") for a in agents),
            "[green]ok[/green]" if v["valid"] else "[red]INVALID[/red]",
            "; ".join(v["reasons"])[:160],
        ]
        for v in report
    ]
    rejected = len(bench.catalog.errors)
    if as_json:
        console.print_json(
            {"scenarios": report, "invalid": bad, "rejected_files": rejected, "runs": str(base)}
        )
    else:
        console.table("validate", ["scenario", *agents, "verdict", "why"], rows)
        console.out.print(
            f"{len(specs) - bad} valid, {bad} invalid, {rejected} rejected files; runs in {base}"
        )
    # Rejected files have no id to match, so they fail only a validation of the whole catalog.
    sys.exit(EXIT_FAILED if bad or (rejected and not patterns) else EXIT_OK)


#: What each agent of ``validate`` must end in; a probe may also time out or be invalid.
_MUST = {
    "oracle": {TrialStatus.passed},
    "noop": {TrialStatus.failed},
    **{p: {TrialStatus.failed, TrialStatus.timeout, TrialStatus.invalid} for p in PROBES},
}


def _verdict(
    spec: ScenarioSpec, by_agent: dict[str, TrialResult], agents: list[str]
) -> dict[str, Any]:
    """Whether one scenario is valid: the oracle passed it, noop and every probe failed it.

    A scenario tagged ``control`` expects a plain "no incident" answer, which
    ``probe/constant`` may give; it alone may pass those.
    """
    reasons = []
    for agent in agents:
        result = by_agent.get(agent)
        allowed = set(_MUST[agent])
        if agent == "probe/constant" and "control" in spec.tags:
            allowed.add(TrialStatus.passed)
        if result is None:
            reasons.append(f"{agent} missing")
        elif result.status not in allowed:
            note = f": {result.error}" if result.error else ""
            verb = "passed it" if result.passed else result.status.value
            reasons.append(f"{agent} {verb}{note}")
    statuses = {a: by_agent[a].status.value if a in by_agent else None for a in agents}
    return {
        "id": spec.id,
        "valid": not reasons,
        **{a: statuses[a] for a in ("oracle", "noop")},
        "agents": statuses,
        "reasons": reasons,
    }


# --- report -----------------------------------------------------------------------------


@cli.command()
@click.argument(
    "run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path)
)
@click.option(
    "--k", "k", default=1, show_default=True, type=click.IntRange(min=1), help="k of pass@k."
)
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), help="Where to write files."
)
@json_option
@bench_options
def report(
    bench: Bench, run_dirs: tuple[Path, ...], k: int, out: Path | None, as_json: bool
) -> None:
    """Summarize runs: per domain and agent pass rate, pass@k, metrics, timings."""
    from itbench.reporting.frames import display_rows, metric_rows, results_frame, summarize

    results: list[TrialResult] = []
    for run_dir in run_dirs:
        store = RunStore(run_dir)
        try:
            results += store.results(store.read_manifest())
        except RunDirError as exc:
            raise click.UsageError(str(exc)) from None
    summary = summarize(results_frame(results), k=k)
    out_dir = out or run_dirs[0]
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    for name, reporter in bench.reporters.items():
        try:
            written += [str(p) for p in reporter.write(summary, out_dir)]
        except Exception as exc:
            console.problem(f"reporter {name!r} failed: {type(exc).__name__}: {exc}")
    _report_problems(bench)
    if as_json:
        console.print_json(
            {"summary": json.loads(summary.to_json(orient="records")), "files": written}
        )
        return
    header, rows = display_rows(summary, k)
    console.table(f"report: {', '.join(map(str, run_dirs))}", header, rows, plain=True)
    header, rows = metric_rows(summary)
    if rows:
        console.table("metrics: mean ± standard error over scored trials", header, rows, True)
    for path in written:
        console.out.print(f"wrote {path}", highlight=False)


# --- plugins / schema -------------------------------------------------------------------


@cli.command()
@json_option
@click.option("--plugin", "plugins", multiple=True, metavar="MODULE", help="Load a plugin module.")
def plugins(as_json: bool, plugins: tuple[str, ...]) -> None:
    """List loaded plugins: source, distribution, version and the hooks each implements."""
    bench = _bench(plugins, ())
    # Calling the registration hooks surfaces plugins whose hooks raise.
    _ = (bench.domains, bench.agents, bench.executors, bench.reporters, bench.options)
    _ = bench.catalog_paths
    rows: list[dict[str, Any]] = []
    for name, info in bench.host.infos.items():
        rows.append(
            {
                "name": name,
                "source": info.source,
                "distribution": info.distribution,
                "version": info.version,
                "module": info.module,
                "hooks": bench.host.hooks_of(name),
            }
        )
    problems = [
        {"plugin": p.plugin, "hook": p.hook, "reason": p.reason} for p in bench.host.problems
    ]
    if as_json:
        console.print_json(
            {
                "plugins": rows,
                "problems": problems,
                "domains": sorted(bench.domains),
                "agents": sorted(bench.agents),
                "executors": sorted(bench.executors),
                "reporters": sorted(bench.reporters),
                "options": [
                    {
                        "flag": f"--{o.name}",
                        "key": o.key,
                        "help": o.help,
                        "choices": list(o.choices),
                    }
                    for o in bench.options.values()
                ],
            }
        )
    else:
        console.table(
            "plugins",
            ["plugin", "source", "distribution", "version", "hooks"],
            [
                [
                    r["name"],
                    r["source"],
                    r["distribution"] or "–",
                    r["version"] or "–",
                    ", ".join(r["hooks"]),
                ]
                for r in rows
            ],
        )
        console.out.print(f"domains: {', '.join(sorted(bench.domains)) or '–'}", highlight=False)
        console.out.print(f"agents: {', '.join(sorted(bench.agents))}", highlight=False)
        for o in bench.options.values():
            values = "|".join(o.choices) or "VALUE"
            console.out.print(f"--{o.name} {values}: {o.help}", highlight=False, markup=False)
    _report_problems(bench)


@cli.command()
@click.option(
    "--out", default="schemas", show_default=True, type=click.Path(file_okay=False, path_type=Path)
)
@json_option
@bench_options
def schema(bench: Bench, out: Path, as_json: bool) -> None:
    """Write the JSON Schemas of the models (and of each domain's spec and submission)."""
    models: dict[str, type[Any]] = {
        "scenario": ScenarioSpec,
        "task-view": TaskView,
        "submission": Submission,
        "trial-result": TrialResult,
        "run-manifest": RunManifest,
    }
    for name, domain in sorted(bench.domains.items()):
        models[f"{name}.scenario"] = domain.spec_model
        models[f"{name}.submission"] = domain.submission_model
    schemas = {name: model.model_json_schema() for name, model in models.items()}
    _report_problems(bench)
    if as_json:
        console.print_json(schemas)
        return
    out.mkdir(parents=True, exist_ok=True)
    for name, data in schemas.items():
        path = out / f"{name}.schema.json"
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        console.out.print(f"wrote {path}", highlight=False)


# --- tool (client for external agents) -------------------------------------------------


@cli.group()
def tool() -> None:
    """Call a running trial's tools (for agents that are external processes).

    Reads ITBENCH_TOOLS_URL and ITBENCH_TOOLS_TOKEN, which the `command` agent sets.
    """


def _client() -> Any:
    from itbench.toolclient import ToolClient, UsageProblem

    try:
        return ToolClient.from_env(os.environ)
    except UsageProblem as exc:
        raise click.UsageError(str(exc)) from None


@tool.command("list")
def tool_list() -> None:
    """Print the tools (name, description, JSON-schema parameters) as JSON."""
    console.print_json(_tool_call(lambda c: c.tools()))


@tool.command("task")
def tool_task() -> None:
    """Print the task view as JSON."""
    console.print_json(_tool_call(lambda c: c.task()))


@tool.command("call")
@click.argument("name")
@click.argument("arguments", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--args-json", help="All arguments as one JSON object instead.")
def tool_call(name: str, arguments: tuple[str, ...], args_json: str | None) -> None:
    """Call tool NAME; VALUEs are parsed as JSON when they can be. Prints the result as JSON.

    Exits 1 with the tool's error message on stderr when the call fails.
    """
    from itbench.toolclient import UsageProblem, parse_arguments

    try:
        kwargs = parse_arguments(arguments, args_json)
    except UsageProblem as exc:
        raise click.UsageError(str(exc)) from None
    console.print_json(_tool_call(lambda c: c.call(name, **kwargs)))


def _tool_call(fn: Callable[[Any], Any]) -> Any:
    from itbench.toolclient import ToolClientError

    try:
        return fn(_client())
    except ToolClientError as exc:
        console.problem(str(exc))
        sys.exit(EXIT_FAILED)


def main() -> None:
    """Console-script entry point."""
    try:
        cli.main(prog_name="itbench", standalone_mode=True)
    except ValidationError as exc:  # a model rejected user input that click could not check
        err = exc.errors()[0]
        console.problem(f"invalid option {'.'.join(map(str, err['loc']))}: {err['msg']}")
        sys.exit(EXIT_USAGE)


if __name__ == "__main__":
    main()
