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
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, Field, ValidationError

from itbench.errors import RunDirError
from itbench.models import Label, RunManifest, ScenarioSpec, TrialResult
from itbench.report.dataset import frames_of
from itbench.report.tables import breakdown, fmt, summarize
from itbench.store import MANIFEST, RESULTS, RunStore

RUNS = "runs"
SUMMARY = "summary.json"
OVERALL = "overall"


class RunSummary(BaseModel):
    """``summary.json`` of a leaderboard entry."""

    schema_version: str = "1.0"
    kind: str = "itbench-run-summary"
    name: str
    run_id: str
    agent: str
    model: str | None = None
    labels: list[Label] = Field(default_factory=list)
    itbench_version: str
    date: str = Field(description="When the run started (UTC, ISO 8601).")
    trials: int
    results_sha256: str
    manifest_sha256: str
    catalog: dict[str, str] = Field(description="Catalog version per domain the run was scored on.")


def sha256_of(path: Path) -> str:
    """The sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def catalog_versions(
    scenario_ids: Sequence[str], catalog: Mapping[str, ScenarioSpec]
) -> dict[str, str]:
    """Per domain, a digest of how the catalog defines the given scenarios.

    A scenario missing from the catalog counts as changed (its digest input is ``missing``).
    """
    by_domain: dict[str, list[str]] = {}
    for sid in sorted(set(scenario_ids)):
        spec = catalog.get(sid)
        domain = spec.domain if spec is not None else sid.split("/", 1)[0]
        text = spec.model_dump_json() if spec is not None else "missing"
        by_domain.setdefault(domain, []).append(f"{sid}\n{text}")
    return {
        d: hashlib.sha256("\n\n".join(parts).encode()).hexdigest()[:16]
        for d, parts in sorted(by_domain.items())
    }


def add_run(
    run_dir: Path, board: Path, name: str, catalog: Mapping[str, ScenarioSpec], version: str
) -> Path:
    """Copy a run into ``board/runs/<name>/`` with its summary.

    Raises:
        RunDirError: not a run, or results its manifest does not hold, or the entry exists.
    """
    store = RunStore(run_dir)
    manifest = store.read_manifest()
    results = list(store.iter_results(manifest))
    if not results:
        raise RunDirError(f"{store.results_path}: no results to add")
    entry = board / RUNS / name
    if entry.exists():
        raise RunDirError(f"{entry}: a leaderboard entry of that name exists")
    entry.mkdir(parents=True)
    shutil.copyfile(store.manifest_path, entry / MANIFEST)
    # Only complete lines: a torn last line is no result.
    lines = store.results_path.read_bytes().split(b"\n")[:-1]
    (entry / RESULTS).write_bytes(b"".join(line + b"\n" for line in lines if line.strip()))
    model = manifest.config.options.get("model")
    summary = RunSummary(
        name=name,
        run_id=manifest.run_id,
        agent=manifest.config.agent,
        model=str(model) if model is not None else None,
        labels=sorted(set(manifest.labels) | {label for r in results for label in r.labels}),
        itbench_version=manifest.packages.get("itbench", version),
        date=manifest.created_at.strftime("%Y-%m-%d"),
        trials=len(results),
        results_sha256=sha256_of(entry / RESULTS),
        manifest_sha256=sha256_of(entry / MANIFEST),
        catalog=catalog_versions([r.scenario_id for r in results], catalog),
    )
    (entry / SUMMARY).write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return entry


@dataclass
class Entry:
    """A leaderboard entry that passed its checks."""

    summary: RunSummary
    manifest: RunManifest
    results: list[TrialResult]
    notes: list[str] = field(default_factory=list)


def load_entries(board: Path, catalog: Mapping[str, ScenarioSpec]) -> tuple[list[Entry], list[str]]:
    """The entries of ``board/runs/`` that pass their checks, and why the others were refused."""
    entries, refused = [], []
    root = board / RUNS
    for entry in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        try:
            summary = RunSummary.model_validate_json((entry / SUMMARY).read_text(encoding="utf-8"))
        except (OSError, ValidationError) as exc:
            refused.append(f"{entry / SUMMARY}: cannot be read: {str(exc).splitlines()[0]}")
            continue
        problems = []
        for file, recorded in (
            (RESULTS, summary.results_sha256),
            (MANIFEST, summary.manifest_sha256),
        ):
            try:
                actual = sha256_of(entry / file)
            except OSError as exc:
                problems.append(f"{entry / file}: cannot be read: {exc}")
                continue
            if actual != recorded:
                problems.append(
                    f"{entry / file}: sha256 {actual[:12]}… is not the {recorded[:12]}… its summary records"
                )
        if problems:
            refused += problems
            continue
        store = RunStore(entry)
        try:
            manifest = store.read_manifest()
            results = list(store.iter_results(manifest))
        except RunDirError as exc:
            refused.append(str(exc))
            continue
        notes = []
        labels = set(summary.labels)
        if Label.unsandboxed in labels:
            notes.append("unsandboxed")
        if Label.reference in labels:
            notes.append("reference")
        if any(r.status.value == "invalid" for r in results):
            notes.append("invalid trials")
        if catalog_versions([r.scenario_id for r in results], catalog) != summary.catalog:
            notes.append("other catalog version")
        entries.append(Entry(summary, manifest, results, notes))
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
        trials = frames_of([(e.manifest, results)]).trials
        trials = trials.assign(domain=domain or "all")
        s = summarize(trials, 1, by=("domain",)).iloc[0]
        tasks = breakdown(trials, "task_type", 1)
        per_task = {str(r["task_type"]): _round(float(r["pass_rate"])) for _, r in tasks.iterrows()}
        rows.append(
            {
                "agent": e.summary.agent,
                "model": e.summary.model,
                "entry": e.summary.name,
                "trials": int(s["trials"]),
                "scored": int(s["scored"]),
                "pass_rate": _round(float(s["pass_rate"])),
                "pass_rate_se": _round(float(s["pass_rate_se"])),
                "ci_low": _round(float(s["ci_low"])),
                "ci_high": _round(float(s["ci_high"])),
                "task_types": dict(sorted(per_task.items())),
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
                "sandboxed": Label.unsandboxed not in e.summary.labels,
                "notes": e.notes,
            }
        )
    rows.sort(key=lambda r: (-(r["pass_rate"] or 0.0), r["agent"], r["entry"]))
    return rows


def _markdown(board: str, rows: list[dict[str, Any]]) -> str:
    tasks = sorted({t for r in rows for t in r["task_types"]})
    header = ["agent", "model", "trials", "pass rate ± SE", "95% CI", *tasks]
    header += ["TTD s", "TTM s", "tokens", "cost $", "date", "itbench", "sandboxed", "notes"]
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
        cells = [r["agent"], r["model"] or "–", str(r["trials"])]
        cells.append("–" if rate is None else f"{rate:.3f} ± {r['pass_rate_se']:.3f}")
        ci = "–" if r["ci_low"] is None else f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]"
        cells.append(ci)
        cells += [fmt(r["task_types"].get(t), 2) for t in tasks]
        cells += [fmt(r["time_to_detect"], 1), fmt(r["time_to_mitigate"], 1)]
        cells += [fmt(r["tokens"], 0), fmt(r["cost_usd"], 2), r["date"], r["itbench_version"]]
        cells += ["yes" if r["sandboxed"] else "no", ", ".join(r["notes"]) or "–"]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
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


def build(board: Path, catalog: Mapping[str, ScenarioSpec]) -> tuple[dict[Path, str], list[str]]:
    """The files of a leaderboard directory, by path, and the refused entries' reasons."""
    entries, refused = load_entries(board, catalog)
    files: dict[Path, str] = {}
    for name, (md, js) in boards(entries).items():
        files[board / f"{name}.md"] = md
        files[board / f"{name}.json"] = js
    return files, refused
