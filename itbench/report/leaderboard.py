"""Leaderboards built from committed runs (``itbench leaderboard``).

A leaderboard directory holds ``runs/<entry>/`` (``summary.json``, ``manifest.json`` and
``results.jsonl`` of one run, added with ``itbench leaderboard add RUN_DIR``) and the tables
built from them: ``overall``, then one per domain, each as ``<board>.md`` and ``<board>.json``.

A summary records the sha256 of its results and manifest files and, per domain, the version of
the catalog the run was scored on (a digest of the scenarios it ran, as the catalog defines
them). When the tables are built:

- an entry whose results or manifest do not match their recorded hashes is **refused** (left
  out, and the build fails), as is one whose files cannot be read;
- an entry whose agent ran unsandboxed (its score proves nothing), a reference agent, a run
  with invalid trials, and a run scored on another version of the catalog are **marked** in a
  ``notes`` column.

Columns: agent, model, trials, pass rate ± standard error, the 95 % interval (problems
resampled), pass rate per task type, mean time to detect and to mitigate (over trials that
record them), tokens and cost, the run's date, the itbench version, whether the agent was
sandboxed, and the notes. Rows are sorted by pass rate, then by agent. Building twice from the
same files writes the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from pydantic import BaseModel, Field, ValidationError

from itbench.active import RunLock
from itbench.bounds import OPTIONS as BOUND_DEFAULTS
from itbench.catalog import catalog_versions
from itbench.errors import RunDirError
from itbench.models import Label, RunManifest, ScenarioSpec, TrialResult, TrialStatus
from itbench.plan import trial_id_prefix
from itbench.provenance import (
    code_dirs,
    code_hashes,
    git_dirty,
    in_checkout,
    package_versions,
    revision_hashes,
)
from itbench.report.dataset import frames_of
from itbench.report.render import markdown_cell
from itbench.report.tables import breakdown, fmt, problems_and_controls, summarize
from itbench.report.verify import agent_program, copy_agent, read_verification
from itbench.runner import CORE_AGENTS
from itbench.store import MANIFEST, RESULTS, RunStore, published_manifest

if TYPE_CHECKING:
    from itbench.bench import Bench

RUNS = "runs"
SUMMARY = "summary.json"
OVERALL = "overall"


class RunSummary(BaseModel):
    """``summary.json`` of a leaderboard entry.

    Every field is derived from the entry's hashed ``manifest.json`` and ``results.jsonl``; when
    the board is built they are derived again, and a summary that disagrees is refused.
    """

    schema_version: str = "1.0"
    kind: str = "itbench-run-summary"
    name: str
    run_id: str
    agent: str
    model: str | None = None
    labels: list[Label] = Field(default_factory=list)
    itbench_version: str
    date: str = Field(description="When the run started (UTC, ISO 8601 date).")
    trials: int = Field(description="Trials recorded.")
    planned: int = Field(description="Trials the run planned.")
    results_sha256: str
    manifest_sha256: str
    catalog: dict[str, str] = Field(description="Catalog version per domain the run was scored on.")
    reproduce: str = Field(
        default="", description="The command that runs the entry's trials again (new draws)."
    )
    chain_key: str = Field(
        default="",
        description="The run's results chain key (hex), so the board can check every line.",
    )
    checks: list[str] = Field(
        default_factory=list, description="What `leaderboard add` checked before taking the run."
    )


#: Summary fields written by `leaderboard add` that the entry's files cannot give again.
ADDED_FIELDS = ("chain_key", "checks")


#: Names of entries: a plain directory name.
ENTRY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def sha256_of(path: Path) -> str:
    """The sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def summarize_run(name: str, entry: Path, version: str) -> RunSummary:
    """The summary of an entry, from its manifest and results files alone.

    Raises:
        RunDirError: the files cannot be read or do not belong together.
    """
    store = RunStore(entry)
    manifest = store.read_manifest()
    results = list(store.iter_results(manifest))
    return RunSummary(
        name=name,
        run_id=manifest.run_id,
        agent=manifest.config.agent,
        model=manifest.config.model,
        labels=sorted(set(manifest.labels) | {label for r in results for label in r.labels}),
        itbench_version=manifest.packages.get("itbench", version),
        date=manifest.created_at.strftime("%Y-%m-%d"),
        trials=len(results),
        planned=len(manifest.seeds),
        results_sha256=sha256_of(entry / RESULTS),
        manifest_sha256=sha256_of(entry / MANIFEST),
        catalog=dict(manifest.catalog_versions),
        reproduce=reproduce_command(manifest),
    )


def reproduce_command(manifest: RunManifest) -> str:
    """The ``itbench evaluate`` command line of a run's settings (credentials left redacted)."""
    c = published_manifest(manifest).config
    words = ["itbench", "evaluate", "--agent", c.agent]
    for pattern in c.scenarios:
        words += ["-s", pattern]
    for flag, values in (("--tag", c.tags), ("--domain", c.domains)):
        for value in values:
            words += [flag, value]
    for level in c.complexity:
        words += ["--complexity", str(level)]
    words += ["--trials", str(c.trials), "--seed", str(c.seed), "--workers", str(c.workers)]
    if c.timeout is not None:
        words += ["--timeout", f"{c.timeout:g}"]
    if c.executor != "local":
        words += ["--executor", c.executor]
    if c.sandbox != "bwrap":
        words += ["--sandbox", c.sandbox]
    for module in c.plugins:
        words += ["--plugin", module]
    for path in c.scenario_paths:
        words += ["--scenario-path", path]
    for key, value in sorted(c.options.items()):
        text = value if isinstance(value, str) else json.dumps(value)
        words += ["--option", f"{key}={text}"]
    return shlex.join(words)


def add_run(
    run_dir: Path, board: Path, name: str, version: str, bench: Bench, *, provenance: bool = True
) -> Path:
    """Copy a run into ``board/runs/<name>/`` with its summary, after checking it.

    Every line must follow the run's results chain and agree with its trial's evaluation
    record; the labels must be those the agent's registration gives; with ``provenance``, the
    run must come from committed code whose package hashes are those of its recorded revision
    (see :func:`check_provenance`). The summary records each check.

    Raises:
        RunDirError: not a run, results its manifest does not hold or off their chain, no
            results, labels or code other than recorded, a bad name, or an entry of that
            name exists.
    """
    if not ENTRY_NAME.fullmatch(name):
        raise RunDirError(
            f"--name {name!r}: an entry name is letters, digits, '.', '_' and '-' (at most 100)"
        )
    store = RunStore(run_dir)
    manifest = store.read_manifest()
    key = store.chain_key(manifest)
    results = list(store.iter_results(manifest, key=key))
    if not results:
        raise RunDirError(f"{store.results_path}: no results to add")
    checks = [f"{len(results)} results lines on the run's chain, each matching its trial's record"]
    checks.append(check_labels(bench, manifest, results, store.manifest_path))
    if provenance:
        checks += check_provenance(bench, manifest, store.manifest_path)
    with RunLock(run_dir):  # a run still in progress is not published
        pass
    entry = board / RUNS / name
    if entry.exists():
        raise RunDirError(f"{entry}: a leaderboard entry of that name exists")
    entry.mkdir(parents=True)
    try:
        program = agent_program(manifest.config)
        if program is not None:
            checks.append(copy_agent(program, entry))
        (entry / MANIFEST).write_text(
            published_manifest(manifest).model_dump_json(indent=2), encoding="utf-8"
        )
        # Only complete lines: a torn last line is no result.
        lines = store.results_path.read_bytes().split(b"\n")[:-1]
        (entry / RESULTS).write_bytes(b"".join(line + b"\n" for line in lines if line.strip()))
        summary = summarize_run(name, entry, version).model_copy(
            update={"chain_key": key.hex(), "checks": checks}
        )
    except BaseException:
        shutil.rmtree(entry, ignore_errors=True)
        raise
    (entry / SUMMARY).write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return entry


#: Labels a run gets from the machine it ran on rather than from its agent's registration.
MACHINE_LABELS = ("unbounded",)


def registered_labels(bench: Bench, manifest: RunManifest) -> list[Label] | None:
    """The labels the run's agent earns by its registration here (``None``: not registered)."""
    spec = bench.agents.get(manifest.config.agent)
    if spec is None:
        return None
    core = bench.owners.get(("agent", spec.name)) == CORE_AGENTS
    return spec.labels(manifest.config.sandbox, core=core)


def check_labels(
    bench: Bench, manifest: RunManifest, results: list[TrialResult], where: Path
) -> str:
    """Check the run's labels against its agent's registration; what was checked.

    An in-process agent is unsandboxed, a reference agent a reference, whatever its files say.

    Raises:
        RunDirError: the agent is not registered here, or the labels are not the ones its
            registration gives.
    """
    expected = registered_labels(bench, manifest)
    agent = manifest.config.agent
    if expected is None:
        raise RunDirError(
            f"{where}: field 'config.agent': agent {agent!r} is not registered here, so its "
            "labels cannot be checked (install the plugin that registers it)"
        )
    # Labels the run's machine adds (a sandbox without its bounds) may come on top.
    extra = {str(x) for x in manifest.labels} - {str(x) for x in expected} - set(MACHINE_LABELS)
    if extra or not set(expected) <= set(manifest.labels):
        raise RunDirError(
            f"{where}: field 'labels': {sorted(manifest.labels)} but agent {agent!r} run with "
            f"sandbox {manifest.config.sandbox!r} is {sorted(expected)} by its registration"
        )
    for r in results:
        if not set(expected) <= set(r.labels):
            raise RunDirError(
                f"{where.parent / RESULTS}: trial {r.trial_id!r}: field 'labels': lacks "
                f"{sorted(set(expected) - set(r.labels))} that its agent's registration gives"
            )
    return f"labels {sorted(str(x) for x in expected)} from the registration of agent {agent!r}"


def check_provenance(bench: Bench, manifest: RunManifest, where: Path) -> list[str]:
    """Check that the run's code is committed source; what was checked.

    The run must come from a tree without uncommitted changes, and each package's hash must be
    the hash of that package as committed at the run's recorded revision (or, when this
    checkout does not hold that revision, the installed package's at the same version).

    Raises:
        RunDirError: a dirty tree, a package hash other than the source's, or a run whose
            code this installation cannot check.
    """
    if manifest.git_dirty:
        raise RunDirError(
            f"{where}: field 'git_dirty': the run was made from a tree with uncommitted "
            "changes; a leaderboard takes runs of committed code only"
        )
    dirs = code_dirs(bench.host)
    unknown = sorted(set(manifest.package_hashes) - set(dirs))
    if unknown:
        raise RunDirError(
            f"{where}: field 'package_hashes': packages {unknown} are not installed here, so "
            "their code cannot be checked"
        )
    ran = {n: dirs[n] for n in manifest.package_hashes}
    revision = manifest.git_revision or ""
    committed = revision_hashes(revision, ran) if revision else {}
    versions = package_versions(bench.host)
    installed: dict[str, str] | None = None
    sources = set()
    for name, recorded in sorted(manifest.package_hashes.items()):
        if name in committed:
            expected, source = committed[name], f"the source committed at {revision[:12]}"
        else:
            # Not in this checkout at that revision: the installed package of the same version.
            differ = [k for k, v in manifest.packages.items() if k in versions and versions[k] != v]
            if differ or (in_checkout(ran[name]) and git_dirty()):
                raise RunDirError(
                    f"{where}: field 'package_hashes.{name}': neither its recorded revision "
                    f"{revision[:12] or '(none)'} nor an unmodified installation of the same "
                    "version is here, so the run's code cannot be checked"
                )
            installed = installed if installed is not None else code_hashes(ran)
            expected, source = installed[name], "the installed package of the same version"
        if expected != recorded:
            raise RunDirError(
                f"{where}: field 'package_hashes.{name}': {recorded[:12]}… is not the hash of "
                f"{source} ({expected[:12]}…): the run's code was changed"
            )
        sources.add(source)
    return [
        "made from a tree without uncommitted changes",
        f"package hashes of {', '.join(sorted(ran))} match {' and '.join(sorted(sources))}",
    ]


@dataclass
class Entry:
    """A leaderboard entry that passed its checks."""

    summary: RunSummary
    manifest: RunManifest
    results: list[TrialResult]
    notes: list[str] = field(default_factory=list)
    #: ``verified``, ``disputed`` or ``unverified`` (see :mod:`itbench.report.verify`).
    verified: str = "unverified"


def _validation_reason(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(document)"
    return f"field '{where}': {err['msg']}"


def _missing(manifest: RunManifest, results: list[TrialResult]) -> list[TrialResult]:
    """A failed result for each planned trial the results do not hold (never left out)."""
    recorded = {r.trial_id for r in results}
    scenario_of = {trial_id_prefix(sid): sid for sid in manifest.scenario_ids}
    out = []
    for trial_id in sorted(set(manifest.seeds) - recorded):
        prefix, _, index = trial_id.rsplit("__", 2)
        scenario = scenario_of.get(prefix)
        if scenario is None:
            continue
        out.append(
            TrialResult(
                run_id=manifest.run_id,
                trial_id=trial_id,
                scenario_id=scenario,
                domain=scenario.split("/", 1)[0],
                agent=manifest.config.agent,
                trial_index=int(index) if index.isdigit() else 0,
                seed=manifest.seeds[trial_id],
                status=TrialStatus.failed,
                error="planned but missing from the results",
                labels=list(manifest.labels),
                started_at=manifest.created_at,
                finished_at=manifest.created_at,
            )
        )
    return out


def _hash_problems(entry: Path, summary: RunSummary) -> list[str]:
    problems = []
    for file, recorded in ((RESULTS, summary.results_sha256), (MANIFEST, summary.manifest_sha256)):
        try:
            actual = sha256_of(entry / file)
        except OSError as exc:
            problems.append(f"{entry / file}: cannot be read: {exc.strerror or exc}")
            continue
        if actual != recorded:
            problems.append(
                f"{entry / file}: sha256 {actual[:12]}… is not the {recorded[:12]}… "
                "its summary records"
            )
    return problems


def _notes(
    summary: RunSummary,
    manifest: RunManifest,
    results: list[TrialResult],
    missing: int,
    catalog: Mapping[str, ScenarioSpec],
) -> list[str]:
    notes = []
    labels = set(summary.labels)
    if Label.unsandboxed in labels:
        notes.append("unsandboxed")
    if Label.reference in labels:
        notes.append("reference")
    if Label.unbounded in labels:
        notes.append("unbounded")
    if missing:
        notes.append(f"{missing} planned trials missing (counted as failed)")
    raised = sorted(
        name
        for name, value in manifest.bounds.items()
        if name in BOUND_DEFAULTS
        and name != "agent_workspace_keep"
        and value > BOUND_DEFAULTS[name][0]
    )
    if raised:
        # More memory, processes or CPU than the defaults is an advantage in a fixed time.
        notes.append(f"bounds above the defaults: {', '.join(raised)}")
    if any(r.status is TrialStatus.invalid for r in results):
        notes.append("invalid trials")
    if any(r.status is TrialStatus.error for r in results):
        notes.append("errors")
    if any(r.status is TrialStatus.unavailable for r in results):
        # Left out of the score: a submitter's model endpoint decides when it is unavailable.
        notes.append("model unavailable trials")
    specs = [catalog[s] for s in manifest.scenario_ids if s in catalog]
    if len(specs) < len(manifest.scenario_ids) or catalog_versions(specs) != summary.catalog:
        notes.append("other catalog version")
    return notes


def load_entries(
    board: Path, catalog: Mapping[str, ScenarioSpec], bench: Bench | None = None
) -> tuple[list[Entry], list[str]]:
    """The entries of ``board/runs/`` that pass their checks, and why the others were refused.

    Each entry's files must match the hashes its summary records and every results line must
    follow the entry's chain; with ``bench``, the labels must be those its agent's registration
    gives (when the agent is registered here).
    """
    entries, refused = [], []
    root = board / RUNS
    for entry in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        try:
            summary = RunSummary.model_validate_json((entry / SUMMARY).read_bytes())
        except OSError as exc:
            refused.append(f"{entry / SUMMARY}: cannot be read: {exc.strerror or exc}")
            continue
        except ValidationError as exc:
            refused.append(f"{entry / SUMMARY}: {_validation_reason(exc)}")
            continue
        problems = _hash_problems(entry, summary)
        if problems:
            refused += problems
            continue
        try:
            derived = summarize_run(entry.name, entry, summary.itbench_version)
            store = RunStore(entry)
            manifest = store.read_manifest()
            key = bytes.fromhex(summary.chain_key) if summary.chain_key else None
            if key is None:
                raise RunDirError(f"{entry / SUMMARY}: field 'chain_key': missing")
            results = list(store.iter_results(manifest, key=key, records=False))
        except (RunDirError, ValueError) as exc:
            refused.append(str(exc))
            continue
        differ = [
            f
            for f in RunSummary.model_fields
            if f not in ADDED_FIELDS and getattr(derived, f) != getattr(summary, f)
        ]
        if differ:
            refused.append(
                f"{entry / SUMMARY}: disagrees with the run's files in {', '.join(differ)}"
            )
            continue
        if bench is not None and registered_labels(bench, manifest) is not None:
            try:
                check_labels(bench, manifest, results, entry / MANIFEST)
            except RunDirError as exc:
                refused.append(str(exc))
                continue
        missing = _missing(manifest, results)
        notes = _notes(summary, manifest, results, len(missing), catalog)
        check = read_verification(entry)
        # A verification of other files (the entry was replaced since) proves nothing.
        verified = (
            check.status if check and check.results_sha256 == summary.results_sha256 else None
        )
        entry_ = Entry(summary, manifest, results + missing, notes, verified or "unverified")
        entries.append(entry_)
    return entries, refused


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 4)
    return value


def _rows(entries: list[Entry], domain: str | None) -> list[dict[str, Any]]:
    rows = []
    for e in entries:
        results = [r for r in e.results if domain is None or r.domain == domain]
        if not results:
            continue
        every = frames_of([(e.manifest, results)]).trials
        every = every.assign(domain=domain or "all")
        # Controls are scored apart: the pass rate is the problems'.
        trials, controls = problems_and_controls(every)
        if trials.empty:
            trials = every
        s = summarize(trials, 1, by=("domain",)).iloc[0]
        c = summarize(controls, 1, by=("domain",)).iloc[0] if len(controls) else None
        tasks = breakdown(trials, "task_type", 1)
        per_task = {str(r["task_type"]): _round(float(r["pass_rate"])) for _, r in tasks.iterrows()}
        rows.append(
            {
                "agent": e.summary.agent,
                # The run's --label: two programs or set-ups of one agent kind stay apart.
                "label": e.manifest.config.label,
                "model": e.summary.model,
                "entry": e.summary.name,
                "trials": int(s["trials"]),
                "errors": int(s["errors"]),
                "scored": int(s["scored"]),
                "pass_rate": _round(float(s["pass_rate"])),
                "pass_rate_se": _round(float(s["pass_rate_se"])),
                "ci_low": _round(float(s["ci_low"])),
                "ci_high": _round(float(s["ci_high"])),
                "task_types": dict(sorted(per_task.items())),
                "controls_pass_rate": None if c is None else _round(float(c["pass_rate"])),
                "time_to_detect": _round(float(s.get("time_to_detect_mean", math.nan))),
                "time_to_mitigate": _round(float(s.get("time_to_mitigate_mean", math.nan))),
                "tokens": _round(
                    float(
                        pd.Series([s.get("input_tokens"), s.get("output_tokens")]).sum(min_count=1)
                    )
                ),
                "cost_usd": _round(float(s.get("cost_usd", math.nan))),
                "date": e.summary.date,
                "itbench_version": e.summary.itbench_version,
                # In-process agents (unsandboxed) and reference agents ran inside the harness.
                "sandboxed": not ({Label.unsandboxed, Label.reference} & set(e.summary.labels)),
                "verified": e.verified,
                "reproduce": e.summary.reproduce,
                "notes": e.notes,
            }
        )
    rows.sort(key=lambda r: (-(r["pass_rate"] or 0.0), r["agent"], r["entry"]))
    return rows


def _markdown(board: str, rows: list[dict[str, Any]]) -> str:
    tasks = sorted({t for r in rows for t in r["task_types"]})
    header = ["agent", "model", "trials", "errors", "pass rate ± SE", "95% CI", *tasks]
    header += ["TTD s", "TTM s", "tokens", "cost $", "date", "itbench", "sandboxed", "verified"]
    header.append("notes")
    lines = [
        f"# Leaderboard: {board}",
        "",
        "Generated by `itbench leaderboard` from the runs in `runs/`; do not edit by hand.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    for r in rows:
        rate = r["pass_rate"]
        agent = r["agent"] if not r["label"] else f"{r['label']} ({r['agent']})"
        cells = [agent, r["model"] or "–", str(r["trials"]), str(r["errors"])]
        cells.append("–" if rate is None else f"{rate:.3f} ± {r['pass_rate_se']:.3f}")
        ci = "–" if r["ci_low"] is None else f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]"
        cells.append(ci)
        cells += [fmt(r["task_types"].get(t), 2) for t in tasks]
        cells += [fmt(r["time_to_detect"], 1), fmt(r["time_to_mitigate"], 1)]
        cells += [fmt(r["tokens"], 0), fmt(r["cost_usd"], 2), r["date"], r["itbench_version"]]
        cells += ["yes" if r["sandboxed"] else "no", r["verified"], ", ".join(r["notes"]) or "–"]
        lines.append("| " + " | ".join(markdown_cell(c) for c in cells) + " |")
    if not rows:
        lines.append("")
        lines.append("No run of this board yet.")
    return "\n".join(lines) + "\n"


def boards(entries: list[Entry]) -> dict[str, tuple[str, str]]:
    """Each board's ``(markdown, json)`` text: ``overall`` and one per domain the runs cover."""
    domains = sorted({r.domain for e in entries for r in e.results})
    out = {}
    for board in (OVERALL, *domains):
        rows = _rows(entries, None if board == OVERALL else board)
        data = {"board": board, "rows": rows}
        out[board] = (_markdown(board, rows), json.dumps(data, indent=2, sort_keys=True) + "\n")
    return out


def build(
    board: Path, catalog: Mapping[str, ScenarioSpec], bench: Bench | None = None
) -> tuple[dict[Path, str], list[str]]:
    """The files of a leaderboard directory, by path, and the refused entries' reasons.

    Raises:
        RunDirError: ``board`` is no directory.
    """
    if not board.is_dir():
        raise RunDirError(f"{board}: no such leaderboard directory")
    entries, refused = load_entries(board, catalog, bench)
    files: dict[Path, str] = {}
    for name, (md, js) in boards(entries).items():
        files[board / f"{name}.md"] = md
        files[board / f"{name}.json"] = js
    return files, refused
