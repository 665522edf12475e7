"""Compare two runs problem by problem: ``itbench compare``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from itbench import console
from itbench.cli.params import json_option, run_dir_type
from itbench.errors import RunDirError


@click.command()
@click.argument("run_a", type=run_dir_type)
@click.argument("run_b", type=run_dir_type)
@json_option
def compare(run_a: Path, run_b: Path, as_json: bool) -> None:
    """Compare two runs problem by problem (paired tests; definitions in itbench.report.compare).

    Prints each common problem's pass rates and difference (B - A), the problems that flipped,
    an exact McNemar test and a paired permutation test.
    """
    from itbench.report import frames
    from itbench.report.compare import compare as compare_runs

    try:
        a, b = frames([run_a]).trials, frames([run_b]).trials
    except RunDirError as exc:
        raise click.UsageError(str(exc)) from None
    result = compare_runs(a, b)
    summary = result.summary()
    agents = {
        "a": sorted({str(x) for x in a["agent"]}) if not a.empty else [],
        "b": sorted({str(x) for x in b["agent"]}) if not b.empty else [],
    }
    if as_json:
        console.print_json(
            {
                **summary,
                "agent_a": agents["a"],
                "agent_b": agents["b"],
                "problems": json.loads(result.problems.to_json(orient="records")),
                "flipped": {"to_pass": result.flipped_to_pass, "to_fail": result.flipped_to_fail},
                "only_in_a": result.only_a,
                "only_in_b": result.only_b,
            }
        )
        return
    rows = [
        [
            str(r["scenario_id"]),
            f"{r['rate_a']:.2f} ({r['passed_a']}/{r['scored_a']})",
            f"{r['rate_b']:.2f} ({r['passed_b']}/{r['scored_b']})",
            f"{r['difference']:+.2f}",
            "to pass"
            if r["pass_b"] and not r["pass_a"]
            else "to fail"
            if r["pass_a"] and not r["pass_b"]
            else "",
        ]
        for _, r in result.problems.iterrows()
    ]
    console.table(
        f"compare: A = {', '.join(agents['a']) or '–'} ({run_a}), "
        f"B = {', '.join(agents['b']) or '–'} ({run_b})",
        ["problem", "A", "B", "B - A", "flipped"],
        rows,
        plain=True,
    )
    lines = [
        f"common problems: {summary['common_problems']} (only in A: {summary['only_in_a']}, "
        f"only in B: {summary['only_in_b']})",
        f"flipped to pass: {summary['flipped_to_pass']}, to fail: {summary['flipped_to_fail']}",
        f"exact McNemar p = {summary['mcnemar_p']:.4g}; "
        f"paired permutation p = {summary['permutation_p']:.4g}",
    ]
    if summary["mean_difference"] is not None:
        lines.insert(1, f"mean difference of pass rates (B - A): {summary['mean_difference']:+.3f}")
    for line in lines:
        console.out.print(line, highlight=False, markup=False)
