"""A run killed with SIGKILL or interrupted with SIGINT/SIGTERM resumes to exactly one result per trial."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import ITBENCH, CliFn, _env, results, trial_dir, trial_records

from itbench.process import record_pid
from itbench.store import RunStore
from itbench.trial import WORKSPACE_ALIASES


def _ids(run: Path) -> list[str]:
    return [
        json.loads(line)["trial_id"] for line in (run / "results.jsonl").read_text().splitlines()
    ]


def _default_sigint() -> None:
    # A suite started in the background of a shell inherits SIGINT ignored; the run under
    # test must see Ctrl-C as a user's terminal sends it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(plugin_site: Path, cwd: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*ITBENCH, *args],
        cwd=cwd,
        env=_env(plugin_site, None),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_default_sigint,  # the test's own child, no threads touched
    )


def _secret_sha256(run: Path) -> str:
    secret = run / "secret"
    assert secret.stat().st_mode & 0o777 == 0o600
    return hashlib.sha256(bytes.fromhex(secret.read_text().strip())).hexdigest()


def _wait_for_results(
    run: Path, count: int, proc: subprocess.Popen[bytes], timeout: float = 60
) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        path = run / "results.jsonl"
        if path.exists() and len(path.read_text().splitlines()) >= count:
            return
        assert proc.poll() is None, "run ended before it could be interrupted"
        time.sleep(0.02)
    raise AssertionError("no results appeared")


ARGS = (
    "evaluate",
    "--agent",
    "oracle",
    "-s",
    "toy/[hr]*",
    "--trials",
    "3",
    "--option",
    "setup_delay=0.25",
)


def test_sigkill_mid_run_then_resume_records_every_trial_exactly_once(
    plugin_site: Path, tmp_path: Path, itbench: CliFn
) -> None:
    run = tmp_path / "k"
    proc = _start(plugin_site, tmp_path, *ARGS, "--workers", "2", "--out", str(run))
    _wait_for_results(run, 3, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    before = _ids(run)
    assert 3 <= len(before) < 12
    manifest = json.loads((run / "manifest.json").read_text())
    secret = (run / "secret").read_text()
    assert manifest["secret_sha256"] == _secret_sha256(run)
    # Trials in flight when the harness died left directories named only by their handle;
    # those already judged (killed in teardown) are recorded from their verdicts.
    unfinished = {t: d.name for t, d in trial_records(run).items() if t not in before}
    judged = {t for t, d in trial_records(run).items() if (d / "verdict.json").is_file()}
    judged -= set(before)
    res = itbench("evaluate", "--resume", str(run), "--json")
    assert res.returncode == 0, res.stderr
    counts = Counter(_ids(run))
    assert len(counts) == 12 and set(counts.values()) == {1}
    assert _ids(run)[: len(before)] == before  # earlier results kept, not rewritten
    assert len(res.json()["results"]) == 12  # type: ignore[index]
    # The same secret carried on: the manifest still names it and it was not replaced.
    after = json.loads((run / "manifest.json").read_text())
    assert after["secret_sha256"] == manifest["secret_sha256"] == _secret_sha256(run)
    assert (run / "secret").read_text() == secret and after["run_id"] == manifest["run_id"]
    # Each unfinished trial directory was found through its trial.json and removed; the
    # rerun got a fresh handle.
    handles = {r["trial_id"]: r["handle"] for r in results(run)}
    assert {d.name for d in (run / "trials").iterdir()} == set(handles.values())
    assert {d.name for d in (run / "workspaces").iterdir()} == set(handles.values())
    for trial, old in unfinished.items():
        if trial in judged:
            assert handles[trial] == old and (run / "trials" / old).exists()
            continue
        assert handles[trial] != old and not (run / "trials" / old).exists()
        assert not (WORKSPACE_ALIASES / old).is_symlink()  # nor its alias
    assert not any((WORKSPACE_ALIASES / h).is_symlink() for h in handles.values())


def test_torn_last_line_is_cut_before_resume_appends(itbench: CliFn, tmp_path: Path) -> None:
    run = tmp_path / "torn"
    assert (
        itbench("evaluate", "--agent", "oracle", "-s", "toy/registry", "--out", str(run)).returncode
        == 0
    )
    lines = (run / "results.jsonl").read_text().splitlines()
    (run / "results.jsonl").write_text(lines[0] + "\n" + lines[1][:40])  # died while writing line 2
    assert len(RunStore(run).results()) == 1
    res = itbench("evaluate", "--resume", str(run))
    assert res.returncode == 0, res.stderr
    assert Counter(_ids(run)) == Counter({i: 1 for i in _ids(run)}) and len(_ids(run)) == 3


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_tears_down_in_flight_trials_and_keeps_finished_ones(
    plugin_site: Path, tmp_path: Path, itbench: CliFn, sig: signal.Signals
) -> None:
    run = tmp_path / "i"
    proc = _start(plugin_site, tmp_path, *ARGS, "--out", str(run))
    _wait_for_results(run, 2, proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert b"--resume" in err
    done = set(_ids(run))
    for trial in (run / "trials").iterdir():
        # Every environment that was set up was torn down, finished or not.
        assert (trial / "teardown.count").read_text() == "1", trial.name
    assert itbench("evaluate", "--resume", str(run)).returncode == 0
    assert done < set(_ids(run)) and len(_ids(run)) == 12 == len(set(_ids(run)))


def test_resume_of_a_killed_trial_calls_the_domains_recover(tmp_path: Path, itbench: CliFn) -> None:
    run = tmp_path / "r"
    assert (
        itbench(
            "evaluate", "--agent", "oracle", "-s", "toy/healthy", "--trials", "2", "--out", str(run)
        ).returncode
        == 0
    )
    # Pretend the harness died during trial 1: its result is missing but its directory remains.
    secret_sha256 = json.loads((run / "manifest.json").read_text())["secret_sha256"]
    lines = (run / "results.jsonl").read_text().splitlines()
    assert json.loads(lines[1])["trial_id"] == "toy.healthy__oracle__1"
    (run / "results.jsonl").write_text(lines[0] + "\n")
    leftover = trial_dir(run, "toy.healthy__oracle__1")  # found by its trial.json alone
    (leftover / "verdict.json").unlink()  # it died before the trial was judged
    leftover_workspace = run / "workspaces" / leftover.name
    assert leftover_workspace.is_dir()
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    record_pid(leftover, "server", sleeper.pid)
    assert itbench("evaluate", "--resume", str(run)).returncode == 0
    assert sleeper.wait(timeout=10) != 0  # stopped by recover
    assert len(_ids(run)) == 2
    assert not (leftover / "pids" / "server.pid").exists()
    assert not leftover.exists() and not leftover_workspace.exists()
    rerun = trial_dir(run, "toy.healthy__oracle__1")
    assert rerun != leftover and (rerun / "teardown.count").read_text() == "1"
    assert json.loads((run / "manifest.json").read_text())["secret_sha256"] == secret_sha256
    assert _secret_sha256(run) == secret_sha256


def test_a_judged_trial_whose_line_was_lost_is_recorded_not_drawn_again(
    tmp_path: Path, itbench: CliFn
) -> None:
    """The harness died after judging, before the line; or the line was cut to re-roll it.

    Resume records the trial's verdict from its directory: the trial is not run again, so
    cutting a failed trial's line off the end and resuming gets the same failure.
    """
    run = tmp_path / "r"
    res = itbench("evaluate", "--agent", "noop", "-s", "toy/registry-*", "--out", str(run))
    assert res.returncode == 0, res.stderr
    lines = (run / "results.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])
    assert last["status"] == "failed"
    (run / "results.jsonl").write_text("".join(x + "\n" for x in lines[:-1]))
    before = {d.name for d in (run / "trials").iterdir()}
    res = itbench("evaluate", "--resume", str(run))
    assert res.returncode == 0, res.stderr
    after = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert [r["trial_id"] for r in after] == [json.loads(x)["trial_id"] for x in lines]
    again = after[-1]
    assert again["status"] == "failed" and again["handle"] == last["handle"]
    assert (
        again["record_sha256"] == last["record_sha256"] and "recorded on resume" in again["error"]
    )
    assert {d.name for d in (run / "trials").iterdir()} == before  # no second attempt
    # The recorded line is on the run's chain like any other.
    assert itbench("report", str(run), "--json").returncode == 0
