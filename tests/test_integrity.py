"""Integrity gates of the core: labels, the leak probe, invalid trials, the run's records.

Runs the real CLI on the toy domain: the sandbox is bubblewrap, the probe is the shipped
``probe/leak`` program, and tampering comes from the toy's ``tamper`` option (an evaluator
input changed, a harness server killed) or from an unsandboxed agent rewriting scoring code.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

import psutil
import pytest
from conftest import CliFn, results, trial_dir

from itbench import AgentContext, leakprobe
from itbench.bench import Bench

TOY = ["-s", "toy/healthy", "-s", "toy/registry-alpha-1"]


def _workspace(run: Path, row: dict[str, object]) -> Path:
    return run / "workspaces" / str(row["handle"])


def test_the_leak_probe_finds_nothing_in_the_sandbox_and_plenty_without(
    itbench: CliFn, tmp_path: Path
) -> None:
    res = itbench("evaluate", "--agent", "probe/leak", *TOY, "--out", "in")
    assert res.returncode == 0, res.stderr
    rows = results(tmp_path / "in")
    assert [r["status"] for r in rows] == ["failed", "failed"]
    for row in rows:
        assert json.loads((_workspace(tmp_path / "in", row) / "leaks.json").read_text()) == []
        assert row["labels"] == []
    assert json.loads((tmp_path / "in" / "manifest.json").read_text())["labels"] == []
    # The same probe without the sandbox: it has teeth, and its results say unsandboxed.
    res = itbench(
        "evaluate",
        "--agent",
        "probe/leak",
        "--sandbox",
        "none",
        "-s",
        "toy/registry-alpha-1",
        "--out",
        "out",
    )
    assert res.returncode == 0, res.stderr
    [row] = results(tmp_path / "out")
    assert row["labels"] == ["unsandboxed"] and row["status"] == "failed"
    leaks = json.loads((_workspace(tmp_path / "out", row) / "leaks.json").read_text())
    assert {"environment", "process"} <= {leak["kind"] for leak in leaks}
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["labels"] == ["unsandboxed"]
    res = itbench("evaluate", "--agent", "oracle", "-s", "toy/healthy", "--out", "ref")
    [row] = results(tmp_path / "ref")
    assert row["labels"] == ["reference"] and row["status"] == "passed"
    report = itbench("report", "out", "ref", "--json")
    data = report.json()
    # toy/healthy is a control: its row is among the controls, scored apart.
    agents = {r["agent"] for r in data["summary"] + data["controls"]}  # type: ignore[index,operator]
    assert agents == {"probe/leak [unsandboxed]", "oracle [reference]"}
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| probe/leak [unsandboxed] |" in md and "| oracle [reference] |" in md


def test_labels_show_in_the_terminal_tables(itbench: CliFn) -> None:
    res = itbench("evaluate", "--agent", "oracle", "-s", "toy/healthy", "--out", "r")
    assert "oracle [reference]" in res.stdout
    res = itbench("report", "r")
    assert "oracle [reference]" in res.stdout


@pytest.fixture
def oracle_run(itbench: CliFn, tmp_path: Path) -> Path:
    run = tmp_path / "r"
    res = itbench(
        "evaluate", "--agent", "oracle", "-s", "toy/healthy", "--trials", "2", "--out", "r"
    )
    assert res.returncode == 0, res.stderr
    return run


def _forge(lines: list[str], change: str) -> list[str]:
    """``results.jsonl`` after a "passed" line was slipped in (what a daemon of an agent did)."""
    first = {**json.loads(lines[0]), "status": "passed", "error": None}
    if change == "foreign":
        return [*lines, json.dumps({**first, "trial_id": "toy.healthy__oracle__7"})]
    if change == "duplicate":
        return [*lines, json.dumps(first)]
    # A trial of the manifest not yet recorded, in a line of another run.
    other = {**first, "run_id": "f00f00f00f00", "trial_id": "toy.healthy__oracle__1"}
    return [lines[0], json.dumps(other)]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("foreign", "results.jsonl:3: field 'trial_id': trial 'toy.healthy__oracle__7' is not in"),
        ("duplicate", "results.jsonl:3: field 'trial_id': trial 'toy.healthy__oracle__0' is recor"),
        ("other-run", "results.jsonl:2: field 'run_id': 'f00f00f00f00' is not the manifest's"),
    ],
)
def test_report_accepts_only_the_manifests_trials_once_each(
    itbench: CliFn, oracle_run: Path, change: str, message: str
) -> None:
    path = oracle_run / "results.jsonl"
    path.write_text("\n".join(_forge(path.read_text().splitlines(), change)) + "\n")
    res = itbench("report", "r")
    assert res.returncode == 2
    assert message in " ".join(res.stderr.split()), res.stderr
    res = itbench("evaluate", "--resume", "r")
    assert res.returncode == 2 and "results.jsonl:" in res.stderr, res.stderr


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        ("fingerprint", "evaluator inputs changed during the agent's turn: ground_truth"),
        ("server", "the toy status server died during the agent's turn"),
    ],
)
def test_tampering_during_the_agents_turn_makes_the_trial_invalid(
    itbench: CliFn, tmp_path: Path, tamper: str, reason: str
) -> None:
    # The oracle would pass; its write also tampers with what judges it.
    args = ("-s", "toy/registry-*", "--option", f"tamper={tamper}")
    res = itbench("evaluate", "--agent", "oracle", *args, "--out", "t", "--json")
    assert res.returncode == 0, res.stderr  # invalid is no infrastructure error
    assert res.json()["errors"] == 0  # type: ignore[index]
    rows = results(tmp_path / "t")
    assert [r["status"] for r in rows] == ["invalid"] * 3
    for row in rows:
        assert reason in row["error"]
        trial = trial_dir(tmp_path / "t", row["trial_id"])
        assert reason in (trial / "invalid.txt").read_text()
        assert not (trial / "evaluation.json").exists()
        assert (trial / "teardown.count").read_text() == "1"
    # noop does not act, so nothing is tampered with: a plain failure.
    res = itbench("evaluate", "--agent", "noop", *args, "--out", "n")
    assert {r["status"] for r in results(tmp_path / "n")} == {"failed"}
    report = itbench("report", "t", "n", "--json")
    summary = {r["agent"]: r for r in report.json()["summary"]}  # type: ignore[index]
    oracle = summary["oracle [reference]"]
    assert (oracle["trials"], oracle["invalid"], oracle["errors"], oracle["passed"]) == (3, 3, 0, 0)
    # Scored as failures: tampering cannot hide a failure by dropping the trial.
    assert oracle["pass_rate"] == 0.0 and oracle["pass@1"] == 0.0
    assert summary["noop [unsandboxed]"]["invalid"] == 0
    md = (tmp_path / "t" / "report.md").read_text()
    assert md.startswith("| domain | agent | trials | errors | invalid | pass rate |")
    assert "| toy | oracle [reference] | 3 | 0 | 3 | 0.000 ± 0.000 | [0.00, 0.00] | 0.000 |" in md


def test_a_harness_server_the_sandboxed_agent_cannot_reach_keeps_the_trial_valid(
    itbench: CliFn, tmp_path: Path
) -> None:
    # Control for the test above: with the server running and no tampering, oracle passes.
    res = itbench(
        "evaluate",
        "--agent",
        "oracle",
        "-s",
        "toy/registry-alpha-1",
        "--option",
        "harness_server=1",
        "--out",
        "s",
    )
    assert res.returncode == 0, res.stderr
    [row] = results(tmp_path / "s")
    assert row["status"] == "passed"
    task = json.loads((trial_dir(tmp_path / "s", row["trial_id"]) / "task.json").read_text())
    assert task["context"]["status_url"].startswith("http://127.0.0.1:")


def test_scoring_code_changed_during_a_run_makes_the_trial_invalid(
    itbench: CliFn, tmp_path: Path, plugin_site: Path
) -> None:
    site = tmp_path / "site"
    shutil.copytree(plugin_site, site, symlinks=True)
    scoring = site / "itbench_toy" / "domain.py"
    env = {"PYTHONPATH": str(site)}
    # Unsandboxed, an agent can write the installed code; the gate catches it.
    program = f"open({str(scoring)!r}, 'a').write('\\nLIMIT = 10**9\\n'); print('{{}}')"
    res = itbench(
        "evaluate",
        "--agent",
        "command",
        "--sandbox",
        "none",
        "-s",
        "toy/healthy",
        "--option",
        f'agent_command=/usr/bin/python3 -c "{program}"',
        "--out",
        "c",
        env=env,
    )
    assert res.returncode == 0, res.stderr
    [row] = results(tmp_path / "c")
    assert row["status"] == "invalid", row
    assert "scoring code changed since the run started: itbench_toy" in row["error"]
    assert row["labels"] == ["unsandboxed"]
    first = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert first["git_dirty"] in (True, False)
    # The next run records the changed code: its hash differs from the first run's.
    res = itbench("evaluate", "--agent", "noop", "-s", "toy/healthy", "--out", "n", env=env)
    second = json.loads((tmp_path / "n" / "manifest.json").read_text())
    assert set(first["package_hashes"]) >= {"itbench", "itbench_toy"}
    assert first["package_hashes"]["itbench_toy"] != second["package_hashes"]["itbench_toy"]
    assert first["package_hashes"]["itbench"] == second["package_hashes"]["itbench"]


def test_each_run_has_its_own_secret_and_resume_refuses_another(
    itbench: CliFn, tmp_path: Path
) -> None:
    for name in ("a", "b"):
        args = ("evaluate", "--agent", "oracle", "-s", "toy/healthy", "--seed", "7")
        assert itbench(*args, "--out", name).returncode == 0
    manifests = [json.loads((tmp_path / n / "manifest.json").read_text()) for n in "ab"]
    assert manifests[0]["seeds"] == manifests[1]["seeds"]  # the public seeds agree
    secrets = [(tmp_path / n / "secret").read_text().strip() for n in "ab"]
    assert secrets[0] != secrets[1]
    for manifest, secret, name in zip(manifests, secrets, "ab", strict=True):
        assert manifest["secret_sha256"] == hashlib.sha256(bytes.fromhex(secret)).hexdigest()
        assert (tmp_path / name / "secret").stat().st_mode & 0o777 == 0o600
        assert (tmp_path / name / "trials").stat().st_mode & 0o777 == 0o700
    # A run with someone else's secret is not the same run.
    (tmp_path / "a" / "secret").write_text(secrets[1] + "\n")
    (tmp_path / "a" / "results.jsonl").write_text("")
    res = itbench("evaluate", "--resume", "a")
    assert res.returncode == 2 and "does not match the secret_sha256" in res.stderr, res.stderr


def test_an_unsandboxed_agents_daemon_is_stopped_too(itbench: CliFn, tmp_path: Path) -> None:
    marker = f"itbench-unsandboxed-daemon-{time.monotonic_ns()}"
    program = (
        "import os, subprocess; "
        f"subprocess.Popen(['/usr/bin/sleep', '60'], start_new_session=True, "
        f"env={{'M': '{marker}'}}, cwd=os.getcwd()); print('{{}}')"
    )
    try:
        res = itbench(
            "evaluate",
            "--agent",
            "command",
            "--sandbox",
            "none",
            "-s",
            "toy/healthy",
            "--option",
            f'agent_command=/usr/bin/python3 -c "{program}" {marker}',
            "--out",
            "d",
        )
        assert res.returncode == 0, res.stderr
        time.sleep(0.3)
        assert not _with_marker(marker)
    finally:
        for proc in _with_marker(marker):
            proc.kill()


def _with_marker(marker: str) -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter(["environ"]):
        try:
            if (proc.info["environ"] or {}).get("M") == marker:
                out.append(proc)
        except psutil.Error:
            continue
    return out


def test_sandboxed_agents_cannot_be_given_a_directory_that_holds_the_harness(
    itbench: CliFn, tmp_path: Path
) -> None:
    # The run directory inside the agent's directory would expose it to the agent.
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "a.py").write_text("print('{}')\n")
    itbench(
        "evaluate",
        "--agent",
        "command",
        "-s",
        "toy/healthy",
        "--option",
        f"agent_command=/usr/bin/python3 {agent_dir / 'a.py'}",
        "--out",
        str(agent_dir / "run"),
    )
    [row] = results(agent_dir / "run")
    assert row["status"] == "failed" and "overlaps" in row["error"], row


def test_the_leak_probe_tries_the_trial_s_own_domain_package(toy_bench: Bench) -> None:
    """The harness names the trial's domain package to the probe, whatever its name; the probe
    adds the core and every ``itbench*`` module it can see, never a name it cannot import."""
    from itbench.builtin.agents import _leak

    agent = _leak(AgentContext(toy_bench.domains["toy"]))
    assert agent.argv[-1] == "itbench_toy" and agent.argv[-2].endswith("leakprobe.py")
    names = leakprobe.harness_modules(["shop_domain", "not a module", "itbench_toy"])
    assert {"itbench", "shop_domain", "itbench_toy"} <= set(names)
    assert "not a module" not in names and names == sorted(names)
