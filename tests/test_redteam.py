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
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import ITBENCH, CliFn, _env, processes_pointing_into, results, trial_dir

from itbench.agents import Agent
from itbench.bounds import bounds_problem
from itbench.cgroups import CONTROLLERS, parent_dir
from itbench.errors import ToolError
from itbench.mcpserver import MAX_BODY as MCP_MAX_BODY
from itbench.mcpserver import McpServer
from itbench.models import Submission, TaskView
from itbench.submit import Submitter
from itbench.testing import bare_task
from itbench.testing import free_port as _free_port
from itbench.tools import Tool, Toolbox
from itbench.toolserver import ToolServer

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


# --- trust after the trial: records, leaderboard entries, verification ----------------------
#
# The submitter holds the run directory: these forgeries edit its files after the run, some
# naively, some rebuilding the results chain with the run's own secret.


def _toy(toy_bench: Any, out: Path, agent: str, trials: int = 1) -> Path:
    from itbench.models import RunConfig
    from itbench.runner import Runner

    Runner(toy_bench, RunConfig(agent=agent, scenarios=["toy/*"], trials=trials), out).run()
    return out


def _rechain(run: Path, edit: Any = None) -> None:
    """Rewrite a run's results chain with its own secret, after ``edit(manifest, lines)``."""
    from itbench import chain
    from itbench.store import RunStore, manifest_fields

    store = RunStore(run)
    manifest = json.loads(store.manifest_path.read_text())
    lines = [json.loads(x) for x in store.results_path.read_text().splitlines()]
    if edit is not None:
        edit(manifest, lines)
    store.manifest_path.write_text(json.dumps(manifest))
    parsed = store.read_manifest()
    key = store.chain_key(parsed)
    head = chain.start(key, manifest_fields(parsed))
    out = []
    for line in lines:
        head = chain.link(key, head, line)
        out.append(json.dumps({**line, "chain": head}) + "\n")
    store.results_path.write_text("".join(out))


def _flip_to_passed(run: Path, *, records: bool) -> None:
    """Every failed trial made passed; with ``records`` its evaluation.json too."""
    for path in (run / "trials").glob("*/evaluation.json"):
        if records:
            data = json.loads(path.read_text())
            path.write_text(json.dumps({**data, "passed": True}))

    def edit(_: dict[str, Any], lines: list[dict[str, Any]]) -> None:
        for line in lines:
            if line["status"] == "failed":
                line["status"] = "passed"
            if records and line["handle"]:
                evaluation = run / "trials" / line["handle"] / "evaluation.json"
                line["record_sha256"] = hashlib.sha256(evaluation.read_bytes()).hexdigest()

    _rechain(run, edit)


def test_an_edited_results_line_is_refused_by_report_resume_and_add(
    toy_bench: Any, tmp_path: Path
) -> None:
    """A failed line edited to passed: report, --resume and leaderboard add name line and field."""
    from itbench.errors import RunDirError
    from itbench.models import RunConfig
    from itbench.report import frames
    from itbench.report.leaderboard import add_run
    from itbench.runner import Runner

    run = _toy(toy_bench, tmp_path / "r", "noop")
    path = run / "results.jsonl"
    lines = path.read_text().splitlines()
    n = next(i for i, x in enumerate(lines) if json.loads(x)["status"] == "failed")
    lines[n] = lines[n].replace('"status":"failed"', '"status":"passed"')
    path.write_text("".join(x + "\n" for x in lines))
    before = path.read_bytes()
    expected = f"results.jsonl:{n + 1}: field 'chain'"
    with pytest.raises(RunDirError, match=expected):
        frames([run])
    with pytest.raises(RunDirError, match=expected):
        Runner(toy_bench, RunConfig(agent="noop", scenarios=["toy/*"]), run).run(resume=True)
    with pytest.raises(RunDirError, match=expected):
        add_run(run, tmp_path / "board", "forged", "0.1.0", toy_bench, provenance=False)
    assert path.read_bytes() == before and not (tmp_path / "board" / "runs" / "forged").exists()


def test_a_rechained_line_still_disagrees_with_its_evaluation_record(
    toy_bench: Any, tmp_path: Path
) -> None:
    """The chain rebuilt with the run's secret: the line's status is not its record's verdict."""
    from itbench.errors import RunDirError
    from itbench.report import frames
    from itbench.report.leaderboard import add_run

    run = _toy(toy_bench, tmp_path / "r", "noop")
    _flip_to_passed(run, records=False)
    with pytest.raises(RunDirError, match=r"results.jsonl:\d+: field 'status': passed, but"):
        frames([run])
    with pytest.raises(RunDirError, match="field 'status'"):
        add_run(run, tmp_path / "board", "forged", "0.1.0", toy_bench, provenance=False)
    # A removed record is no way out.
    for path in (run / "trials").glob("*/evaluation.json"):
        path.unlink()
    with pytest.raises(RunDirError, match="field 'record_sha256'"):
        frames([run])


def test_an_edited_manifest_is_refused(toy_bench: Any, tmp_path: Path) -> None:
    """Labels removed and the sandbox turned on in the manifest: the chain starts elsewhere;
    rebuilt with the secret, the labels are not the agent's registration's."""
    from itbench.errors import RunDirError
    from itbench.report.leaderboard import add_run

    run = _toy(toy_bench, tmp_path / "r", "toy/solver")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["labels"] == ["unsandboxed"]
    manifest.update(labels=[])
    manifest["config"]["sandbox"] = "bwrap"
    (run / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RunDirError, match=r"results.jsonl:1: field 'chain'"):
        add_run(run, tmp_path / "board", "a", "0.1.0", toy_bench, provenance=False)

    def unlabel(_: dict[str, Any], lines: list[dict[str, Any]]) -> None:
        for line in lines:
            line["labels"] = []

    _rechain(run, unlabel)
    with pytest.raises(RunDirError, match=r"manifest.json: field 'labels': \[\] but agent"):
        add_run(run, tmp_path / "board", "b", "0.1.0", toy_bench, provenance=False)


def test_a_patched_scorer_or_dirty_tree_is_refused_by_add(toy_bench: Any, tmp_path: Path) -> None:
    """A run whose package hashes are not its revision's source, or made from a dirty tree."""
    from itbench.errors import RunDirError
    from itbench.report.leaderboard import add_run

    run = _toy(toy_bench, tmp_path / "r", "toy/solver")

    def patched(manifest: dict[str, Any], _: list[dict[str, Any]]) -> None:
        manifest.update(git_dirty=False)
        manifest["package_hashes"]["itbench"] = "0" * 64

    _rechain(run, patched)
    with pytest.raises(RunDirError, match=r"field 'package_hashes.itbench': 000000000000… is not"):
        add_run(run, tmp_path / "board", "a", "0.1.0", toy_bench)
    _rechain(run, lambda manifest, _: manifest.update(git_dirty=True))
    with pytest.raises(RunDirError, match="field 'git_dirty': the run was made from a tree"):
        add_run(run, tmp_path / "board", "b", "0.1.0", toy_bench)


def test_an_edited_committed_entry_is_refused_by_the_board(toy_bench: Any, tmp_path: Path) -> None:
    """An entry's line edited and the summary's two sha256 recomputed: off the entry's chain."""
    from itbench.report.leaderboard import add_run, build

    run = _toy(toy_bench, tmp_path / "r", "noop")
    board = tmp_path / "board"
    entry = add_run(run, board, "noop", "0.1.0", toy_bench, provenance=False)
    summary = json.loads((entry / "summary.json").read_text())
    assert summary["chain_key"] and any("chain" in c for c in summary["checks"])
    assert summary["reproduce"].startswith("itbench evaluate --agent noop -s 'toy/*' --trials 1")
    assert build(board, toy_bench.catalog.scenarios, toy_bench)[1] == []
    results_file = entry / "results.jsonl"
    results_file.write_text(results_file.read_text().replace('"failed"', '"passed"'))
    for name, field in (("results.jsonl", "results_sha256"), ("manifest.json", "manifest_sha256")):
        summary[field] = hashlib.sha256((entry / name).read_bytes()).hexdigest()
    (entry / "summary.json").write_text(json.dumps(summary))
    _, refused = build(board, toy_bench.catalog.scenarios, toy_bench)
    assert len(refused) == 1 and "results.jsonl:1: field 'chain'" in refused[0], refused


def test_verify_disputes_a_forged_entry_and_verifies_an_honest_one(
    toy_bench: Any, tmp_path: Path
) -> None:
    """A forger with the secret rebuilds records and chain: every check of the files holds, and
    only re-running trials shows the claim false."""
    from itbench.report.leaderboard import add_run, build
    from itbench.report.verify import verify_entry

    board = tmp_path / "board"
    forged = _toy(toy_bench, tmp_path / "forged", "noop", trials=3)
    _flip_to_passed(forged, records=True)
    add_run(forged, board, "forged", "0.1.0", toy_bench, provenance=False)
    honest = _toy(toy_bench, tmp_path / "honest", "toy/solver", trials=2)
    add_run(honest, board, "honest", "0.1.0", toy_bench, provenance=False)
    files, refused = build(board, toy_bench.catalog.scenarios, toy_bench)
    assert refused == []
    rows = {r["entry"]: r for r in json.loads(files[board / "overall.json"])["rows"]}
    assert rows["forged"]["pass_rate"] == 1.0 and rows["forged"]["verified"] == "unverified"
    check = verify_entry(board / "runs" / "forged", toy_bench, 10, tmp_path / "v1")
    assert check.status == "disputed", check
    assert check.rerun == 10 and check.claimed_passed == 10 and check.p_value is not None
    assert check.rerun_passed < 10
    check = verify_entry(board / "runs" / "honest", toy_bench, 6, tmp_path / "v2")
    assert check.status == "verified" and check.rerun_passed == check.claimed_passed == 6, check
    files, _ = build(board, toy_bench.catalog.scenarios, toy_bench)
    rows = {r["entry"]: r for r in json.loads(files[board / "overall.json"])["rows"]}
    assert rows["forged"]["verified"] == "disputed" and rows["honest"]["verified"] == "verified"
    assert "| disputed |" in files[board / "overall.md"]
    # A verification of other files proves nothing: the entry replaced, it is unverified again.
    (board / "runs" / "honest" / "verification.json").write_text(
        (board / "runs" / "forged" / "verification.json")
        .read_text()
        .replace('"disputed"', '"verified"')
    )
    files, _ = build(board, toy_bench.catalog.scenarios, toy_bench)
    rows = {r["entry"]: r for r in json.loads(files[board / "overall.json"])["rows"]}
    assert rows["honest"]["verified"] == "unverified"


def test_fisher_exact_test_matches_known_values() -> None:
    from itbench.report.verify import fisher_greater

    # 10 of 10 claimed against 2 of 10: C(12,10)/C(20,10).
    assert fisher_greater(10, 10, 2, 10) == pytest.approx(66 / 184756)
    assert fisher_greater(3, 10, 3, 10) > 0.5
    assert fisher_greater(0, 5, 5, 5) == 1.0


# --- relays: what the agent floods or leaves behind -------------------------------------------
#
# The harness's own relays (tool server, MCP endpoint) under a hostile client in a process of its
# own, and the runner's end of the agent's turn: nothing the agent sends or leaves in flight may
# grow the harness's memory or reach the judge.

#: A client in a process of its own: ``N`` connections at once, each sending a body of
#: ``SIZE`` bytes to ``PATH`` (announced, or chunked when ``MODE`` is ``chunked``); prints the
#: status line each got (read before the body when announced, after it when chunked). With
#: ``MODE`` ``wide`` the body is a JSON-RPC call of about ``SIZE`` bytes of tiny values.
FLOOD = r"""
import json, socket, sys, threading
port, path, token, n, size, mode = sys.argv[1:7]
port, n, size = int(port), int(n), int(size)
got = []
wide = (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read",'
        b'"arguments":{"key":[' + b",".join([b"{}"] * (size // 3)) + b']}}}')
def one():
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    framing = "Transfer-Encoding: chunked" if mode == "chunked" else f"Content-Length: {size}"
    if mode == "wide":
        framing = f"Content-Length: {len(wide)}"
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"{framing}\r\n\r\n")
    s.sendall(head.encode())
    status, todo = None, size
    if mode == "wide":
        s.sendall(wide)
        todo = 0
    if mode == "announced":
        try:
            status = s.recv(200).split(b"\r\n", 1)[0].decode()
        except OSError as exc:
            status = f"no answer: {exc}"
    chunk, sent = b" " * 2**20, 0
    if mode == "chunked":
        chunk = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    s.settimeout(2)
    try:
        while sent < todo:
            s.sendall(chunk)
            sent += 2**20
        if mode == "chunked":
            s.sendall(b"0\r\n\r\n")
    except OSError:
        pass
    if status is None:
        try:
            s.settimeout(10)
            status = s.recv(200).split(b"\r\n", 1)[0].decode()
        except OSError as exc:
            status = f"no answer: {exc}"
    got.append(status)
    s.close()
threads = [threading.Thread(target=one) for _ in range(n)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(got))
"""


def _peak_growth_kib(flood: list[str]) -> tuple[int, list[str]]:
    """Run ``flood`` (the client's argv tail); this process's peak memory growth and the answers."""
    status = Path("/proc/self/status")

    def field(name: str) -> int:
        return int(status.read_text().split(f"{name}:", 1)[1].split()[0])

    Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from now
    before = field("VmRSS")
    res = subprocess.run(
        [sys.executable, "-c", FLOOD, *flood], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return field("VmHWM") - before, json.loads(res.stdout)


def _slow_toolbox(release: threading.Event) -> Toolbox:
    def wait() -> str:
        """Wait until released."""
        release.wait(30)
        return "released"

    def read(key: str) -> str:
        """Read a key."""
        return key

    return Toolbox.of([Tool.from_function(wait), Tool.from_function(read)])


@pytest.mark.parametrize(
    ("mode", "status"),
    [("announced", "413 Request Entity Too Large"), ("chunked", "411 Length Required")],
)
def test_an_mcp_flood_of_large_requests_is_refused_unread(
    tmp_path: Path, mode: str, status: str
) -> None:
    """16 requests of 64 MiB each: each refused from its headers, the harness stays small.

    Such a flood grew the harness by 218 MiB: a body without a length was read up to the
    endpoint's limit before it was refused, every request at once.
    """
    box = _slow_toolbox(threading.Event())
    task = bare_task(box, tmp_path, output_schema={})
    server = McpServer(box, task, Submitter(Submission, {}, set(box.tools))).start()
    try:
        growth, answers = _peak_growth_kib(
            [str(server.port), "/mcp", server.token, "16", str(64 * 2**20), mode]
        )
    finally:
        server.stop()
    assert answers == [f"HTTP/1.1 {status}"] * 16, answers
    assert growth < 16 * 1024, f"the harness grew by {growth} KiB"
    assert MCP_MAX_BODY <= 4 * 2**20


def test_an_mcp_flood_of_bodies_of_tiny_values_is_refused_before_parsing(tmp_path: Path) -> None:
    """16 calls of 3.6 MB each, a million `{}` apiece: parsed, each would take ~90 MB."""
    box = _slow_toolbox(threading.Event())
    task = bare_task(box, tmp_path, output_schema={})
    server = McpServer(box, task, Submitter(Submission, {}, set(box.tools))).start()
    try:
        growth, answers = _peak_growth_kib(
            [str(server.port), "/mcp", server.token, "16", str(3_600_000), "wide"]
        )
    finally:
        server.stop()
    assert answers == ["HTTP/1.1 400 Bad Request"] * 16, answers
    # The bodies themselves are held while checked (16 x 3.6 MB at most), never parsed.
    assert growth < 96 * 1024, f"the harness grew by {growth} KiB"


@pytest.mark.parametrize(
    ("mode", "status"),
    [("announced", "413 Request Entity Too Large"), ("chunked", "411 Length Required")],
)
def test_a_tool_server_flood_of_large_requests_is_refused_unread(
    tmp_path: Path, mode: str, status: str
) -> None:
    """The same floods against the tool server: refused from the headers, the harness stays small."""
    box = _slow_toolbox(threading.Event())
    server = ToolServer(box, bare_task(box, tmp_path)).start()
    try:
        port = server.url.rsplit(":", 1)[1]
        growth, answers = _peak_growth_kib(
            [port, "/call", server.token, "16", str(64 * 2**20), mode]
        )
    finally:
        server.stop()
    assert answers == [f"HTTP/1.0 {status}"] * 16, answers
    assert growth < 16 * 1024, f"the harness grew by {growth} KiB"


def test_a_tool_request_in_flight_when_the_turn_ends_gets_nothing(tmp_path: Path) -> None:
    """A call still running when the tool server stops is answered by nobody; nothing connects.

    The server used to stop listening only: the handler of a call in flight answered it after
    the agent's turn, to whatever still held the connection.
    """
    release = threading.Event()
    box = _slow_toolbox(release)
    server = ToolServer(box, bare_task(box, tmp_path)).start()
    port = int(server.url.rsplit(":", 1)[1])
    body = json.dumps({"tool": "wait", "arguments": {}}).encode()
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        conn.sendall(
            f"POST /call HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.token}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        end = time.monotonic() + 5
        while box.running != 1 and time.monotonic() < end:
            time.sleep(0.01)
        assert box.running == 1
        box.close()
        server.stop()
        start = time.monotonic()
        try:
            answer = conn.recv(200)
        except ConnectionResetError:
            answer = b""
        assert answer == b"" and time.monotonic() - start < 2
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2)
        with pytest.raises(ToolError, match="tools are closed"):
            box.call("read", key="a")
    finally:
        release.set()
        conn.close()
    assert box.wait_idle(5)


class _Leaver(Agent):
    """Starts a tool call that does not return, submits a wrong answer and leaves."""

    def run(self, task: TaskView, toolbox: Toolbox) -> dict[str, Any]:
        """Leave one call in flight."""
        threading.Thread(target=toolbox.call, args=("wait",), daemon=True).start()
        end = time.monotonic() + 5
        while toolbox.running == 0 and time.monotonic() < end:
            time.sleep(0.01)
        return {"key": "beta"}


def test_an_evaluation_that_fails_after_the_agent_left_work_is_invalid(
    toy_bench: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The evaluator cannot measure after the agent left calls in flight: ``invalid``, not error.

    An ``error`` is excluded from every score: an agent that loads what the judge reads and
    leaves could turn its failure into a trial that does not count. Without anything left in
    flight the same failure stays an ``error`` (infrastructure).
    """
    from itbench_toy.domain import ToyEnvironment

    from itbench import trial as trial_module
    from itbench.agents import AgentSpec
    from itbench.errors import InfrastructureError
    from itbench.models import RunConfig, TrialStatus
    from itbench.runner import Runner

    release = threading.Event()
    tools = ToyEnvironment.tools
    turn_ended: list[bool] = []
    finished = ToyEnvironment.agent_finished

    def with_wait(self: ToyEnvironment) -> list[Tool]:
        def wait() -> str:
            """Wait until released."""
            release.wait(30)
            return "released"

        return [*tools(self), Tool.from_function(wait)]

    def noted(self: ToyEnvironment) -> list[str]:
        turn_ended.append(True)
        return finished(self)

    def unmeasurable(*args: Any) -> Any:
        assert turn_ended, "evaluated before the agent's turn was ended"
        raise InfrastructureError("cannot measure: Prometheus unreachable: timed out")

    monkeypatch.setattr(ToyEnvironment, "tools", with_wait)
    monkeypatch.setattr(ToyEnvironment, "agent_finished", noted)
    monkeypatch.setattr(trial_module, "TURN_DRAIN", 0.2)
    monkeypatch.setattr(toy_bench.domains["toy"], "evaluate", unmeasurable)
    toy_bench.agents["test/leaver"] = AgentSpec("test/leaver", lambda ctx: _Leaver())
    try:
        config = RunConfig(agent="test/leaver", scenarios=["toy/registry-alpha-1"])
        [left] = Runner(toy_bench, config, tmp_path / "left").run().results
        config = RunConfig(agent="baseline", scenarios=["toy/registry-alpha-1"])
        [clean] = Runner(toy_bench, config, tmp_path / "clean").run().results
    finally:
        release.set()
    assert left.status is TrialStatus.invalid, (left.status, left.error)
    assert left.error is not None
    assert "1 tool call(s) still running" in left.error and "timed out" in left.error
    assert clean.status is TrialStatus.error and "timed out" in (clean.error or "")
    assert len(turn_ended) == 2


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


def _groups_left(before: set[str], timeout: float = 180) -> set[str]:
    """The sandbox groups made since ``before`` that stay (none, when all were removed).

    Groups are made below a shared parent, so other harnesses on this machine make and
    remove theirs meanwhile; a group a finished harness left stays for good, so what is
    left once the others' groups are gone is what ours left.
    """
    end = time.monotonic() + timeout
    while (left := _own_cgroups() - before) and time.monotonic() < end:
        time.sleep(0.5)
    return left


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
    assert _groups_left(before) == set()


@needs_bounds
def test_a_memory_hog_is_killed_at_its_limit_and_fails(itbench: CliFn, tmp_path: Path) -> None:
    """Allocating and touching more than the memory limit: OOM-killed, the trial failed."""
    before = _own_cgroups()
    row = _hostile(itbench, tmp_path / "run", "hog 600")
    assert row["status"] == "failed"
    assert "memory limit" in row["error"] and "killed" in row["error"], row["error"]
    assert row["timings"]["agent"] < 20
    assert _groups_left(before) == set()


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
    """A run named after its scenario: the agent's mountinfo and pid 1 must not show that name."""
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
    # pid 1 is bubblewrap, its options read from a descriptor: no bound host path on show.
    pid1 = report["pid1"].split("\0")
    assert "--args" in pid1 and "--bind" not in pid1, pid1
    for secret in (name, str(tmp_path), "itbench-sandbox", row["handle"]):
        assert not any(secret in word for word in pid1), (secret, pid1)


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
        # The bounds were in place: a group is new (other harnesses' groups come and go).
        assert _mounts_under(run) and _own_cgroups() - before
    finally:
        proc.kill()
        proc.wait()
    res = itbench("cleanup", str(run))
    assert res.returncode == 0, res.stderr
    assert _mounts_under(run) == []
    assert set(_mounts_under(Path("/tmp/itbench-sandbox-"))) <= set(private)
    assert _groups_left(before) == set()


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


def test_verify_reruns_the_command_agent_program_kept_with_the_entry(
    toy_bench: Any, tmp_path: Path
) -> None:
    """The program named only by the command (no agent_dir option) is kept with the entry, and
    the re-run runs that copy: the original may be gone or changed since."""
    from itbench.models import RunConfig
    from itbench.report.leaderboard import add_run
    from itbench.report.verify import verify_entry
    from itbench.runner import Runner

    program = tmp_path / "prog"
    program.mkdir()
    shutil.copy(Path(__file__).parent / "agents" / "toy_cli_agent.py", program / "agent.py")
    options = {"agent_command": f"/usr/bin/python3 {program / 'agent.py'}"}
    config = RunConfig(agent="command", scenarios=["toy/registry-*"], options=options)
    Runner(toy_bench, config, tmp_path / "r").run()
    entry = add_run(tmp_path / "r", tmp_path / "board", "cli", "0.1.0", toy_bench, provenance=False)
    assert (entry / "agent" / "agent.py").is_file()
    shutil.rmtree(program)
    check = verify_entry(entry, toy_bench, 3, tmp_path / "v")
    assert check.status == "verified" and check.rerun_passed == check.claimed_passed == 3, check
