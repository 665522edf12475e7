"""Verifying a leaderboard entry by re-running some of its trials (``leaderboard verify``).

Whoever submits a run holds its secret and could rebuild its results chain around edited lines;
what they cannot do is make the agent pass trials it fails. ``itbench leaderboard verify ENTRY
--rerun K`` draws K of the entry's scored trials at random, runs their scenarios again with the
entry's recorded agent and settings on fresh draws, and compares the entry's pass count on those
trials with the re-run's by a one-sided Fisher exact test. An entry whose claimed passes are
significantly more than the re-run's is **disputed**; otherwise it is **verified**. A re-run
trial that ends in an error or invalid counts as not passed: settings that break the re-run do
not spare an entry. An entry that cannot be re-run here (its agent is not registered, a
credential was redacted and not given again) is **unverified**. The outcome is written to
``runs/<entry>/verification.json`` and shown on the board.

A ``command`` agent's program directory is committed with its entry (``runs/<entry>/agent/``)
by ``leaderboard add``, and the re-run uses that copy.
"""

from __future__ import annotations

import hashlib
import math
import random
import shutil
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from itbench.errors import RunDirError
from itbench.models import RunConfig, TrialResult, TrialStatus
from itbench.store import REDACTED, RunStore

if TYPE_CHECKING:
    from itbench.bench import Bench

VERIFICATION = "verification.json"
#: Where a command agent's program is kept in its entry.
AGENT_COPY = "agent"
#: Largest agent program directory an entry keeps, in bytes.
AGENT_COPY_LIMIT = 16 * 1024 * 1024
#: The test's significance level: claimed passes beyond the re-run's at this level dispute.
ALPHA = 0.05
#: Statuses that count as scored (a pass or a failure).
SCORED = (TrialStatus.passed, TrialStatus.failed, TrialStatus.timeout)


class Verification(BaseModel):
    """``verification.json`` of a leaderboard entry."""

    kind: Literal["itbench-entry-verification"] = "itbench-entry-verification"
    status: Literal["verified", "disputed", "unverified"]
    reason: str = ""
    rerun: int = Field(description="Trials drawn and re-run.")
    trials: list[str] = Field(default_factory=list, description="The drawn trial ids.")
    claimed_passed: int = 0
    rerun_passed: int = 0
    rerun_scored: int = 0
    p_value: float | None = None
    alpha: float = ALPHA
    rerun_run_id: str | None = None
    results_sha256: str = Field(description="The verified entry's results file.")
    date: str


def fisher_greater(claimed: int, k: int, rerun: int, m: int) -> float:
    """One-sided Fisher exact p-value that ``claimed`` of ``k`` beats ``rerun`` of ``m``.

    The probability, with both samples' passes pooled and the margins fixed, of the claimed
    sample holding ``claimed`` passes or more.
    """
    total, passes = k + m, claimed + rerun
    denominator = math.comb(total, k)
    tail = sum(
        math.comb(passes, x) * math.comb(total - passes, k - x)
        for x in range(claimed, min(k, passes) + 1)
    )
    return min(1.0, tail / denominator)


def draw(results: list[TrialResult], k: int, rng: random.Random) -> list[TrialResult]:
    """``k`` scored trials drawn at random without replacement (all when there are fewer)."""
    scored = sorted((r for r in results if r.status in SCORED), key=lambda r: r.trial_id)
    return rng.sample(scored, min(k, len(scored)))


def copy_agent(program_dir: Path, entry: Path) -> str:
    """Keep a command agent's program directory with its entry; what was kept.

    Raises:
        RunDirError: the directory is missing or larger than :data:`AGENT_COPY_LIMIT`.
    """
    if not program_dir.is_dir():
        raise RunDirError(f"{program_dir}: the command agent's program directory is missing")
    size = sum(f.stat().st_size for f in program_dir.rglob("*") if f.is_file())
    if size > AGENT_COPY_LIMIT:
        raise RunDirError(
            f"{program_dir}: the agent's program directory holds {size} bytes, more than the "
            f"{AGENT_COPY_LIMIT} an entry keeps"
        )
    shutil.copytree(program_dir, entry / AGENT_COPY, symlinks=False)
    return f"the command agent's program {program_dir} kept in {AGENT_COPY}/ ({size} bytes)"


def agent_program(config: RunConfig) -> Path | None:
    """The program directory of a run's ``command`` agent (``None`` for other agents)."""
    from itbench.command import COMMAND_OPTION, command_argv, program_dir
    from itbench.sandbox import SYSTEM_DIRS

    if config.agent != "command":
        return None
    try:
        argv = command_argv(config.options.get(COMMAND_OPTION))
    except ValueError:
        argv = []
    found = program_dir(config.options, argv)
    if found is not None:
        return found
    # Gone since the run (a re-run uses the entry's copy): the directory of the first absolute
    # argument outside the system's directories, as the command names it.
    for arg in argv:
        path = Path(arg)
        if path.is_absolute() and not any(path.is_relative_to(d) for d in SYSTEM_DIRS):
            return path.parent
    return None


def _rerun_options(config: RunConfig, entry: Path, given: dict[str, Any]) -> dict[str, Any]:
    """The entry's options for a re-run: its committed agent program, credentials given again."""
    from itbench.command import AGENT_DIR_OPTION, COMMAND_OPTION

    options = dict(config.options)
    copy = entry / AGENT_COPY
    program = agent_program(config)
    if program is not None and copy.is_dir():
        command = options.get(COMMAND_OPTION)
        if isinstance(command, str):
            options[COMMAND_OPTION] = command.replace(str(program), str(copy.resolve()))
        options[AGENT_DIR_OPTION] = str(copy.resolve())
    options.update(given)
    redacted = sorted(k for k, v in options.items() if v == REDACTED)
    if redacted:
        raise RunDirError(
            f"{entry / 'manifest.json'}: field 'config.options': {', '.join(redacted)} were "
            "redacted when the entry was published; give them again with --option"
        )
    return options


def verify_entry(
    entry: Path,
    bench: Bench,
    k: int,
    out: Path,
    *,
    options: dict[str, Any] | None = None,
    rng: random.Random | None = None,
) -> Verification:
    """Re-run ``k`` trials of a leaderboard entry and write its ``verification.json``.

    Args:
        entry: The entry directory (``runs/<name>/`` of a board).
        bench: The harness to re-run with (the entry's agent must be registered).
        k: Trials to draw and re-run.
        out: The re-run's run directory (must not exist).
        options: Options given again (credentials redacted at publication).
        rng: Random source of the draw (default: the system's).

    Raises:
        RunDirError: the entry cannot be read.
    """
    from itbench.runner import Runner

    store = RunStore(entry)
    manifest = store.read_manifest()
    results = list(store.iter_results(manifest))
    drawn = draw(results, k, rng or random.SystemRandom())
    now = datetime.now(UTC).strftime("%Y-%m-%d")
    base = {
        "rerun": len(drawn),
        "trials": [r.trial_id for r in drawn],
        "date": now,
        "results_sha256": hashlib.sha256(store.results_path.read_bytes()).hexdigest(),
    }
    claimed = sum(r.passed for r in drawn)

    def unverified(reason: str) -> Verification:
        return Verification(status="unverified", reason=reason, claimed_passed=claimed, **base)

    if not drawn:
        return _write(entry, unverified("the entry has no scored trial"))
    if manifest.config.agent not in bench.agents:
        return _write(entry, unverified(f"agent {manifest.config.agent!r} is not registered"))
    try:
        rerun_options = _rerun_options(manifest.config, entry, options or {})
    except RunDirError as exc:
        return _write(entry, unverified(str(exc)))
    counts = Counter(r.scenario_id for r in drawn)
    config = manifest.config.model_copy(
        update={
            "scenarios": sorted(counts),
            "tags": [],
            "domains": [],
            "complexity": [],
            "trials": max(counts.values()),
            "seed": random.SystemRandom().randrange(2**31),
            "options": rerun_options,
        }
    )
    outcome = Runner(bench, config, out).run()
    taken: list[TrialResult] = []
    for scenario, count in sorted(counts.items()):
        mine = sorted(
            (r for r in outcome.results if r.scenario_id == scenario), key=lambda r: r.trial_index
        )
        taken += mine[:count]
    scored = [r for r in taken if r.status in SCORED]
    # The entry's own agent and settings could not pass what they claim to pass: a re-run trial
    # that ends in an error, invalid or never ran counts as not passed (an entry whose settings
    # break its re-run is not thereby spared).
    passed = sum(r.passed for r in scored)
    figures = {
        "claimed_passed": claimed,
        "rerun_passed": passed,
        "rerun_scored": len(scored),
        "rerun_run_id": outcome.results[0].run_id if outcome.results else None,
    }
    p = fisher_greater(claimed, len(drawn), passed, len(drawn))
    status: Literal["verified", "disputed"] = "disputed" if p < ALPHA else "verified"
    unscored = f", {len(drawn) - len(scored)} not scored" if len(scored) < len(drawn) else ""
    reason = (
        f"claimed {claimed} of {len(drawn)} passed; the re-run passed {passed} of {len(drawn)}"
        f"{unscored} (one-sided Fisher exact p = {p:.3g})"
    )
    return _write(entry, Verification(status=status, reason=reason, p_value=p, **base, **figures))


def _write(entry: Path, verification: Verification) -> Verification:
    (entry / VERIFICATION).write_text(verification.model_dump_json(indent=2) + "\n")
    return verification


def read_verification(entry: Path) -> Verification | None:
    """An entry's verification, or ``None`` when it has none (or an unreadable one)."""
    try:
        return Verification.model_validate_json((entry / VERIFICATION).read_bytes())
    except (OSError, ValueError):
        return None
