"""Report generation over 100,000 synthetic trial records (goal: under 5 s).

Writes a run directory of 100,000 results (3 domains, 4 agents, 150 problems with a mechanism
facet, metrics and timings), then times the whole ``itbench report`` path: reading and checking
every line, the frames, the summary and breakdowns with bootstrap intervals, and the CSV,
Markdown, LaTeX and HTML (with plots) files. Baseline in the same run: reading the file's lines
with ``json.loads`` only.

Run: .venv/bin/python benchmarks/core_report.py [--records N] [--runs R]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from _common import median_time

from itbench.models import HostInfo, RunConfig, RunManifest, Timings, TrialResult, TrialStatus
from itbench.report import build, frames
from itbench.report.html import write_html
from itbench.report.render import write_csv, write_latex, write_markdown
from itbench.store import RunStore

DOMAINS = ("sre", "ciso", "finops")
AGENTS = ("oracle", "baseline", "noop", "probe/constant")


def write_run(root: Path, records: int) -> Path:
    """A run directory with ``records`` synthetic results."""
    rng = random.Random(7)
    problems = [(d, f"{d}/problem-{i:03d}", f"mech-{i % 17}") for d in DOMAINS for i in range(50)]
    per_agent = records // len(AGENTS)
    trials: list[tuple[str, str, str, str, int]] = []
    for agent in AGENTS:
        for n in range(per_agent):
            domain, sid, mech = problems[n % len(problems)]
            trials.append((agent, domain, sid, mech, n // len(problems)))
    store = RunStore(root)
    seeds = {f"{sid.replace('/', '.')}__{a}__{i}": 0 for a, _, sid, _, i in trials}
    now = datetime.now(UTC)
    store.write_manifest(
        RunManifest(
            run_id="bench",
            created_at=now,
            config=RunConfig(agent="mixed"),
            packages={},
            git_revision=None,
            host=HostInfo(hostname="bench", platform="linux", python="3", cpus=2),
            seeds=seeds,
            scenario_ids=sorted({p[1] for p in problems}),
        )
    )
    lines = []
    for agent, domain, sid, mech, index in trials:
        passed = rng.random() < {"oracle": 1.0, "baseline": 0.3}.get(agent, 0.0)
        result = TrialResult(
            run_id="bench",
            trial_id=f"{sid.replace('/', '.')}__{agent}__{index}",
            scenario_id=sid,
            domain=domain,
            agent=agent,
            trial_index=index,
            seed=0,
            status=TrialStatus.passed if passed else TrialStatus.failed,
            metrics={"detected": passed, "loc_f1": rng.random(), "tool_calls": rng.randint(1, 40)},
            timings=Timings(setup=8.0, agent=rng.random() * 60, total=70.0, time_to_detect=5.0),
            task_types=["detection", "localization"],
            facets={"mechanism": mech},
            started_at=now,
            finished_at=now,
        )
        lines.append(result.model_dump_json())
    store.results_path.write_text("\n".join(lines) + "\n")
    return root


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = write_run(Path(tmp) / "run", args.records)
        out = Path(tmp) / "out"
        out.mkdir()

        def parse_only() -> None:
            with (run / "results.jsonl").open("rb") as fh:
                for line in fh:
                    json.loads(line)

        def report() -> None:
            result = build(frames([run]), k=1)
            for write in (write_csv, write_markdown, write_latex, write_html):
                write(result, out)

        base, _ = median_time(parse_only, repeat=args.runs)
        full, samples = median_time(report, repeat=args.runs)
    print(
        f"report over {args.records:,} records: median {full:.2f} s over {len(samples)} runs "
        f"(goal < 5 s)"
    )
    print(f"baseline json.loads of every line: median {base:.2f} s; ratio {full / base:.1f}")


if __name__ == "__main__":
    main()
