"""The progress line: counts by outcome as trials end, and an ETA per domain."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import CliFn

from itbench.models import TrialResult, TrialStatus
from itbench.progress import Estimate

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _result(domain: str, seconds: float, status: TrialStatus, n: int) -> TrialResult:
    return TrialResult(
        run_id="r",
        trial_id=f"{domain}-{n}",
        scenario_id=f"{domain}/x",
        domain=domain,
        agent="a",
        trial_index=n,
        seed=n,
        status=status,
        started_at=T0,
        finished_at=T0 + timedelta(seconds=seconds),
    )


def test_the_eta_weighs_each_domain_by_its_own_trial_times() -> None:
    estimate = Estimate(["sre"] * 3 + ["finops"] * 3, workers=2)
    assert estimate.seconds_left() is None and estimate.line().startswith("ETA ?")
    estimate.finished(_result("sre", 100, TrialStatus.passed, 0))
    # FinOps has no time of its own yet: it borrows the mean of what finished.
    assert estimate.seconds_left() == (2 * 100 + 3 * 100) / 2
    estimate.finished(_result("finops", 2, TrialStatus.failed, 0))
    estimate.finished(_result("finops", 4, TrialStatus.error, 1))
    assert estimate.seconds_left() == (2 * 100 + 1 * 3) / 2
    assert estimate.line() == "ETA 1m42s · 1 passed, 1 failed, 1 error"
    estimate.finished(_result("finops", 3, TrialStatus.timeout, 2))
    for n in (1, 2):
        estimate.finished(_result("sre", 90, TrialStatus.passed, n))
    assert estimate.seconds_left() == 0.0
    assert estimate.line() == "ETA 0s · 3 passed, 1 failed, 1 error, 1 other"


def test_evaluate_shows_the_counts_and_the_eta_as_trials_end(
    itbench: CliFn, tmp_path: Path
) -> None:
    res = itbench(
        "evaluate",
        "--agent",
        "noop",
        "-s",
        "toy/healthy",
        "-s",
        "toy/registry-alpha-1",
        "--out",
        "run",
        env={"COLUMNS": "240"},
    )
    assert res.returncode == 0, res.stderr
    assert "ETA 0s · 0 passed, 2 failed, 0 error" in res.stderr, res.stderr
