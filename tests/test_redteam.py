"""A hostile command agent in the real sandbox: every path to the answer or the judge is shut.

The agent (``tests/agents/redteam.py``, run by the system interpreter) tries each path of the
threat model in turn and writes what happened to ``redteam.json`` in its workspace. This
test checks that report and, from outside, what the agent cannot judge itself: harness
records unchanged, no daemon or listener left, harness processes alive.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import ITBENCH, CliFn, _env, processes_pointing_into, results, trial_dir

from itbench.bounds import bounds_problem
from itbench.cgroups import CONTROLLERS, parent_dir
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


# --- bounds: disk, memory, processes, tracing and the mount table ---------------------------
#
# Each test runs a hostile agent (``tests/agents/bounded.py``) through the real CLI, the real
# sandbox and real control groups, on the cheap toy scenario, with small bounds.

BOUNDED = Path(__file__).parent / "agents" / "bounded.py"
#: Small bounds for the tests (the defaults are far larger).
SMALL = {
    "agent_memory": 256 * 1024**2,
    "agent_pids": 48,
    "agent_cpus": 1.0,
    "agent_workspace_size": 24 * 1024**2,
    "agent_workspace_files": 4096,
    "agent_workspace_keep": 6 * 1024**2,
}
needs_bounds = pytest.mark.skipif(
    bounds_problem() is not None or shutil.which("bwrap") is None,
    reason=f"no bounds here: {bounds_problem()}",
)


def _hostile(
    itbench: CliFn, run: Path, mode: str, *, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Run ``bounded.py MODE`` on toy/healthy with :data:`SMALL` bounds; its one result."""
    options = {**SMALL, **(extra or {})}
    args = ["evaluate", "--agent", "command", "-s", "toy/healthy", "--out", str(run)]
    args += ["--option", f"agent_command=/usr/bin/python3 {BOUNDED} {mode}"]
    for key, value in options.items():
        args += ["--option", f"{key}={value}"]
    res = itbench(*args)
    assert res.returncode == 0, res.stderr
    [row] = results(run)
    return row


def _report(run: Path, row: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads((run / "workspaces" / row["handle"] / "report.json").read_text()))


def _own_cgroups() -> set[str]:
    """The sandbox groups below this process's own, in every bounded controller."""
    return {
        f"{c}/{p.name}"
        for c in CONTROLLERS
        for p in parent_dir(c).iterdir()
        if p.name.startswith("itbench-")
    }


def _mounts_under(path: Path) -> list[str]:
    return [
        line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(path) in line
    ]


@needs_bounds
def test_a_workspace_filler_stops_at_its_bound_and_the_run_dir_keeps_the_cap(
    itbench: CliFn, tmp_path: Path
) -> None:
    """3 GiB in many files became: a full workspace at its bound, a capped copy, a result."""
    before = _own_cgroups()
    run = tmp_path / "run"
    row = _hostile(itbench, run, "fill 200")
    report = _report(run, row)
    # The bound held: the agent got ENOSPC below its size, and still submitted.
    assert report["error"] == os.strerror(errno.ENOSPC)
    assert 10 <= report["written_mib"] < 24
    assert (row["status"], row["error"]) == ("passed", None)
    # The run directory keeps at most the cap, and says what it cut.
    workspace = run / "workspaces" / row["handle"]
    kept = sum(p.stat().st_size for p in workspace.rglob("*") if p.is_file())
    assert kept <= SMALL["agent_workspace_keep"]
    assert (workspace / "report.json").is_file() and (workspace / "task.json").is_file()
    cut = (trial_dir(run, row["trial_id"]) / "workspace-cut.txt").read_text()
    assert "fill/" in cut and "report.json" not in cut
    # The bounds are recorded, and nothing of the sandbox is left.
    assert row["bounds"] == SMALL and row["labels"] == []
    assert json.loads((run / "manifest.json").read_text())["bounds"] == SMALL
    assert _mounts_under(run) == []
    assert _own_cgroups() <= before


@needs_bounds
def test_a_memory_hog_is_killed_at_its_limit_and_fails(itbench: CliFn, tmp_path: Path) -> None:
    """Allocating and touching more than the memory limit: OOM-killed, the trial failed."""
    before = _own_cgroups()
    row = _hostile(itbench, tmp_path / "run", "hog 600")
    assert row["status"] == "failed"
    assert "memory limit" in row["error"] and "killed" in row["error"], row["error"]
    assert row["timings"]["agent"] < 20
    assert _own_cgroups() <= before


@needs_bounds
def test_a_fork_bomb_stops_at_the_process_limit(itbench: CliFn, tmp_path: Path) -> None:
    """Forking without end: refused at the pids limit, the program goes on and submits."""
    run = tmp_path / "run"
    row = _hostile(itbench, run, "forkbomb 1000")
    report = _report(run, row)
    assert report["error"] == os.strerror(errno.EAGAIN)
    assert 10 < report["forked"] < SMALL["agent_pids"]
    assert row["status"] == "passed"
    left = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if str(BOUNDED) in (p.info["cmdline"] or []) and "forkbomb" in (p.info["cmdline"] or [])
    ]
    assert left == [] and processes_pointing_into(run) == []


@needs_bounds
def test_tracing_the_sandboxs_pid_1_is_refused(itbench: CliFn, tmp_path: Path) -> None:
    """PTRACE_ATTACH to pid 1, then a valid submission and exit: refused, the trial ends."""
    run = tmp_path / "run"
    row = _hostile(itbench, run, "ptrace")
    report = _report(run, row)
    assert (report["attach"], report["errno"]) == (-1, errno.EPERM)
    assert report["seccomp"] == ["2"]  # the filter is on
    assert (row["status"], row["error"]) == ("passed", None)
    assert row["timings"]["agent"] < 10


@needs_bounds
@pytest.mark.parametrize("which", ["bubblewrap", "pid 1"])
def test_a_stopped_bubblewrap_fails_the_trial_at_once(
    plugin_site: Path, tmp_path: Path, which: str
) -> None:
    """Stopped from outside (the agent cannot), bubblewrap never ends: failed at once."""
    run = tmp_path / "run"
    marker = f"sleep-{secrets.token_hex(4)}"
    args = ["evaluate", "--agent", "command", "-s", "toy/healthy", "--out", str(run)]
    args += ["--option", f"agent_command=/usr/bin/python3 {BOUNDED} sleep 60 {marker}"]
    proc = subprocess.Popen(
        [*ITBENCH, *args],
        cwd=tmp_path,
        env=_env(plugin_site, None),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        outer = _wait_for_bwrap(marker)
        target = outer.pid if which == "bubblewrap" else outer.children()[0].pid
        os.kill(target, signal.SIGSTOP)
        stopped_at = time.monotonic()
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr
        assert time.monotonic() - stopped_at < 15
    finally:
        proc.kill()
    [row] = results(run)
    assert row["status"] == "failed"
    assert "stopped" in row["error"] and f"pid {target}" in row["error"], row["error"]
    assert which in row["error"]
    assert not psutil.pid_exists(target) or psutil.Process(target).status() == "zombie"


def _wait_for_bwrap(marker: str, timeout: float = 30) -> psutil.Process:
    """The outer bubblewrap whose command line holds ``marker``, once its pid 1 runs."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for p in psutil.process_iter(["name", "cmdline"]):
            if p.info["name"] != "bwrap" or marker not in (p.info["cmdline"] or []):
                continue
            with contextlib.suppress(psutil.Error):
                parent = p.parent()
                # The outer one (its parent is the harness), once it runs pid 1, the bridge
                # and the agent.
                outer = parent is not None and parent.name() != "bwrap"
                if outer and len(p.children(recursive=True)) >= 3:
                    return p
        time.sleep(0.1)
    raise AssertionError(f"no sandbox with {marker} started")


@needs_bounds
def test_the_mount_table_names_no_host_path(itbench: CliFn, tmp_path: Path) -> None:
    """A run named after its scenario: the agent's mountinfo must not show that name."""
    name = f"k8s-host-namespaces-{secrets.token_hex(4)}"
    run = tmp_path / name
    row = _hostile(itbench, run, "mountinfo")
    report = _report(run, row)
    mountinfo, cgroup = report["mountinfo"], report["cgroup"]
    assert "/tmp/itbench-workspaces/" in mountinfo  # it is the real table
    for secret in (name, str(tmp_path), "/workspaces/", row["handle"] + "/", "itbench-sandbox"):
        assert secret not in mountinfo, secret
    # Every other bind is at its own path (/usr, /etc files, devices, the agent's directory),
    # a file of bubblewrap's own, or the system's (/etc/localtime links into /usr).
    for line in mountinfo.splitlines():
        root, point = line.split()[3:5]
        assert root in ("/", point, point.removeprefix("/dev")) or root.startswith(
            ("/bindfile", "/usr/")
        ), line
    # Its cgroup namespace starts at its own groups.
    assert all(line.endswith(":/") for line in cgroup.splitlines()), cgroup


@needs_bounds
def test_a_killed_harness_leaves_no_mount_or_group_after_cleanup(
    itbench: CliFn, plugin_site: Path, tmp_path: Path
) -> None:
    """The harness dies mid-turn: its tmpfs over the workspace and its groups are recovered."""
    before, private = _own_cgroups(), _mounts_under(Path("/tmp/itbench-sandbox-"))
    run = tmp_path / "run"
    marker = f"sleep-{secrets.token_hex(4)}"
    args = ["evaluate", "--agent", "command", "-s", "toy/healthy", "--out", str(run)]
    args += ["--option", f"agent_command=/usr/bin/python3 {BOUNDED} sleep 60 {marker}"]
    proc = subprocess.Popen(
        [*ITBENCH, *args], cwd=tmp_path, env=_env(plugin_site, None), stderr=subprocess.DEVNULL
    )
    try:
        _wait_for_bwrap(marker)
        assert _mounts_under(run) and _own_cgroups() > before  # the bounds were in place
    finally:
        proc.kill()
        proc.wait()
    res = itbench("cleanup", str(run))
    assert res.returncode == 0, res.stderr
    assert _mounts_under(run) == []
    assert set(_mounts_under(Path("/tmp/itbench-sandbox-"))) <= set(private)
    assert _own_cgroups() <= before


@needs_bounds
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
def test_without_writable_control_groups_the_run_warns_once_and_is_labelled_unbounded(
    plugin_site: Path, tmp_path: Path
) -> None:
    """A harness whose memory controller is read-only (its own mount namespace) still runs."""
    run = tmp_path / "run"
    command = [*ITBENCH, "evaluate", "--agent", "command", "-s", "toy/healthy", "--trials", "2"]
    command += ["--option", f"agent_command=/usr/bin/python3 {BOUNDED} mountinfo"]
    command += ["--out", str(run)]
    script = 'mount -o remount,bind,ro /sys/fs/cgroup/memory && exec "$@"'
    res = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script, "sh", *command],
        cwd=tmp_path,
        env=_env(plugin_site, None),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    warnings = [line for line in res.stderr.splitlines() if "run unbounded" in line]
    assert len(warnings) == 1 and "/sys/fs/cgroup/memory" in warnings[0], res.stderr
    rows = results(run)
    assert [(r["status"], r["labels"], r["bounds"]) for r in rows] == [
        ("passed", ["unbounded"], {})
    ] * 2
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["labels"] == ["unbounded"] and manifest["bounds"] == {}
