"""A hostile command agent in the real sandbox: every path to the answer or the judge is shut.

The agent (``tests/agents/redteam.py``, run by the system interpreter) tries each path of the
threat model in turn and writes what happened to ``redteam.json`` in its workspace. This
test checks that report and, from outside, what the agent cannot judge itself: harness
records unchanged, no daemon or listener left, harness processes alive.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import select
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import CliFn, results, trial_dir

from itbench.testing import free_port as _free_port

AGENT = Path(__file__).parent / "agents" / "redteam.py"
REPO = Path(__file__).parents[1]
SCENARIOS = {
    "toy/healthy": "Healthy registry",
    "toy/registry-alpha-1": "Corrupted registry key alpha",
}
KEYS = {"toy/healthy": ["alpha", "beta"], "toy/registry-alpha-1": ["alpha", "beta", "gamma"]}
#: Every attempt the agent must have made and found blocked.
BLOCKED = {
    "read-catalog",
    "read-repository",
    "read-scoring-code",
    "read-this-run",
    "read-trial-dir",
    "read-earlier-run",
    "read-via-proc-root",
    "read-harness-tmp",
    "read-other-workspaces",
    "import",
    "interpreter",
    "itbench-cli",
    "environment",
    "proc-all",
    "proc",
    "proc-host-pid",
    "write-results",
    "write-manifest",
    "write-evaluation",
    "write-trial-record",
    "write-earlier-results",
    "write-scoring-code",
    "write-tool-client",
    "write-system",
    "kill-visible",
    "kill-host-pid",
    "connect-host-port",
    "tool-server",
}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _port_free_on_host(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@pytest.fixture
def private_site(plugin_site: Path, tmp_path: Path) -> Path:
    """A copy of the installed test plugins, so the run's scoring code is this test's own."""
    site = tmp_path / "site"
    shutil.copytree(plugin_site, site, symlinks=True)
    return site


def test_a_red_team_agent_is_blocked_on_every_path(
    itbench: CliFn, tmp_path: Path, private_site: Path
) -> None:
    env = {"PYTHONPATH": str(private_site)}
    pattern = [arg for s in SCENARIOS for arg in ("-s", s)]
    earlier, run = tmp_path / "earlier", tmp_path / "run"
    res = itbench("evaluate", "--agent", "oracle", *pattern, "--out", str(earlier), env=env)
    assert res.returncode == 0, res.stderr
    assert {r["status"] for r in results(earlier)} == {"passed"}
    earlier_files = {p: _sha(p) for p in earlier.rglob("*") if p.is_file()}
    code = private_site / "itbench_toy" / "domain.py"
    code_sha = _sha(code)
    canary = Path("/tmp") / f"itbench-canary-{secrets.token_hex(4)}"  # the harness's /tmp
    canary.write_text("harness-only\n")
    marker = f"itbench-redteam-{secrets.token_hex(6)}"
    listen_port = _free_port()
    host = socket.socket()
    host.bind(("127.0.0.1", 0))
    host.listen(8)
    host.setblocking(False)
    stand_in = subprocess.Popen(["sleep", "120"])  # a harness process the agent must not reach
    command = [
        "/usr/bin/python3",
        str(AGENT),
        f"--repo={REPO}",
        f"--run={run}",
        f"--earlier={earlier}",
        f"--catalog={private_site / 'itbench_toy' / 'scenarios'}",
        f"--code={code}",
        f"--canary={canary}",
        f"--host-port={host.getsockname()[1]}",
        f"--listen-port={listen_port}",
        f"--marker={marker}",
        f"--host-pid={stand_in.pid}",
    ]
    try:
        res = itbench(
            "evaluate",
            "--agent",
            "command",
            *pattern,
            "--option",
            f"agent_command={' '.join(command)}",
            "--option",
            "harness_server=1",
            "--out",
            str(run),
            env=env,
        )
        assert res.returncode == 0, res.stderr
        rows = results(run)
        # Nothing passed, nothing turned into an error, and no harness server was lost.
        assert sorted(r["scenario_id"] for r in rows) == sorted(SCENARIOS)
        outcomes = [(r["status"], r["error"]) for r in rows]
        assert outcomes == [("failed", None)] * 2, _diagnose(run, rows)
        assert all(r["labels"] == [] for r in rows)
        for row in rows:
            _check_trial(run, row, marker)
        # From outside: no daemon, no listener, harness processes alive, records unchanged.
        time.sleep(0.3)
        alive = [
            p.pid
            for p in psutil.process_iter(["cmdline"])
            if marker in " ".join(p.info["cmdline"] or [])
        ]
        assert not alive
        assert _port_free_on_host(listen_port)
        assert not select.select([host], [], [], 0)[0], "a connection reached the host port"
        assert stand_in.poll() is None
        assert canary.read_text() == "harness-only\n"
        assert _sha(code) == code_sha
        assert {p: _sha(p) for p in earlier.rglob("*") if p.is_file()} == earlier_files
        lines = (run / "results.jsonl").read_text().splitlines()
        assert len(lines) == 2 and "forged" not in "".join(lines)
        report = itbench("report", str(run), env=env)
        assert report.returncode == 0, report.stderr
    finally:
        stand_in.kill()
        stand_in.wait()
        host.close()
        canary.unlink(missing_ok=True)


def _check_trial(run: Path, row: dict[str, Any], marker: str) -> None:
    """One trial of the red-team run: every attempt blocked, nothing naming the scenario."""
    trial = trial_dir(run, row["trial_id"])
    workspace = run / "workspaces" / row["handle"]
    attempts = json.loads((workspace / "redteam.json").read_text())
    open_paths = [a for a in attempts if "blocked" in a and not a["blocked"]]
    assert not open_paths, json.dumps(open_paths, indent=1)
    assert {a["attempt"] for a in attempts if "blocked" in a} >= BLOCKED
    by_name = {a["attempt"]: a for a in attempts}
    # The tools and the public endpoint work: the blocks are not just a dead network.
    assert by_name["tool-call"]["result"] == KEYS[row["scenario_id"]]
    answers = json.loads((workspace / "tool-answers.json").read_text())
    assert answers["task"]["handle"] == row["handle"] and len(answers["read"]) == len(
        answers["keys"]
    )
    assert by_name["reach-context-port"]["reached"] is True
    assert by_name["daemon"]["started"] and by_name["daemon"]["listening"]
    assert marker in by_name["daemon"]["target"]
    tool_server = [a for a in attempts if a["attempt"] == "tool-server"]
    assert [a["detail"] for a in tool_server] == [
        "status 400",
        "status 400",
        "status 400",
        "status 413",
    ]
    # The harness's records are its own.
    assert json.loads((trial / "trial.json").read_text()) == {
        "trial_id": row["trial_id"],
        "handle": row["handle"],
    }
    assert json.loads((trial / "evaluation.json").read_text())["passed"] is False
    assert not (trial / "invalid.txt").exists()
    # Nothing the agent saw names its scenario: task view, tool answers, workspace, output.
    seen = [trial / "task.json", trial / "tools.jsonl", trial / "agent.stdout"]
    seen += [trial / "agent.stderr", *(p for p in workspace.rglob("*") if p.is_file())]
    text = "\n".join(p.read_text(errors="replace") for p in seen)
    for scenario_id, title in SCENARIOS.items():
        for secret in (scenario_id, title, row["trial_id"], scenario_id.replace("/", ".")):
            assert secret not in text, (secret, row["scenario_id"])


def _diagnose(run: Path, rows: list[dict[str, Any]]) -> str:
    """The outcomes and the agent's last words, for a failure message."""
    out = []
    for row in rows:
        trial = run / "trials" / row["handle"]
        tail = [
            (trial / name).read_text(errors="replace")[-800:]
            for name in ("agent.stderr", "error.txt", "invalid.txt")
            if (trial / name).exists()
        ]
        out.append(f"{row['scenario_id']}: {row['status']} {row['error']!r} {tail}")
    return "\n".join(out)
