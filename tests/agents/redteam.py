"""A hostile external agent: tries, one by one, every way to the answer but the environment.

Run as ``/usr/bin/python3 redteam.py --repo DIR --run DIR ...`` (standard library only: it
must run on the system interpreter inside the sandbox). Each attempt is recorded as
``{"attempt", "target", "blocked", "detail"}`` in ``redteam.json`` in the workspace; the test
that starts it decides from that report, and from the harness's records, whether each one was
really blocked. Attempts that cannot be judged from inside (a daemon and a listener that
must not outlive the agent) are recorded with what was done, for the test to check outside.

It submits an earlier trial's submission if it could read one, else an empty answer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: What may be in the environment of a sandboxed agent.
ALLOWED_ENV = {"PATH", "HOME", "LANG", "PWD", "SHLVL", "_"}
#: Signs of the harness in a process's command line or environment.
HARNESS_MARKS = ("pytest", "itbench.cli", "itbench/cli", ".venv", "http.server", "site-packages")
HARNESS_ENV = ("VIRTUAL_ENV=", "PYTHONPATH=", "PYTEST_", "COLUMNS=")
REPO_PATHS = ("scenarios", "itbench", "pyproject.toml", ".git")
RUN_PATHS = ("manifest.json", "results.jsonl", "secret", "trials", "workspaces")
MODULES = ("itbench", "itbench_toy", "itbench_sre", "itbench_ciso", "itbench_finops")
DAEMON = """
import socket, sys, time
marker, port, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(8)
open(ready, "w").write(marker)
time.sleep(300)
"""

report: list[dict[str, Any]] = []
found_submissions: list[Path] = []


def record(attempt: str, target: str, blocked: bool, detail: str = "") -> None:
    """Add one attempt to the report."""
    report.append({"attempt": attempt, "target": target, "blocked": blocked, "detail": detail})


def read_anything(path: Path, limit: int = 2000) -> list[str]:
    """Files under ``path`` (or ``path`` itself) that could be opened and read."""
    got: list[str] = []
    with contextlib.suppress(OSError):
        if not path.is_dir():
            path.read_bytes()
            got.append(str(path))
            return got
    for root, _dirs, files in os.walk(path, onerror=lambda e: None):
        for name in files:
            file = Path(root) / name
            with contextlib.suppress(OSError):
                file.read_bytes()
                got.append(str(file))
                if name == "submission.json":
                    found_submissions.append(file)
            if len(got) >= limit:
                return got
    return got


def try_read(attempt: str, path: Path) -> None:
    """Read a file or every file of a tree; blocked when nothing could be read or listed."""
    listed: list[str] = []
    with contextlib.suppress(OSError):
        listed = os.listdir(path)
    got = read_anything(path)
    detail = f"read {len(got)}, listed {len(listed)}: {(got or listed)[:3]}"
    record(attempt, str(path), not got and not listed, detail)


def try_write(attempt: str, path: Path, data: str) -> None:
    """Append to (or create) a file outside the workspace; blocked when it fails."""
    try:
        with path.open("a") as fh:
            fh.write(data)
    except OSError as exc:
        record(attempt, str(path), True, f"{type(exc).__name__}: {exc.strerror}")
        return
    record(attempt, str(path), False, "written")


def attempt_imports(repo: Path) -> None:
    """The harness and domain packages, and the project's own interpreter."""
    for module in MODULES:
        try:
            __import__(module)
        except ImportError as exc:
            record("import", module, True, str(exc))
        else:
            record("import", module, False, "imported")
    for python in (repo / ".venv" / "bin" / "python", Path(sys.executable)):
        try:
            proc = subprocess.run(
                [str(python), "-c", "import itbench, itbench_toy"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except OSError as exc:
            record("interpreter", str(python), True, f"{type(exc).__name__}: {exc.strerror}")
            continue
        ok = proc.returncode == 0
        record("interpreter", str(python), not ok, proc.stderr.strip()[-200:])
    proc = subprocess.run(
        [sys.executable, "-m", "itbench.cli", "list"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    record("itbench-cli", "python3 -m itbench.cli list", proc.returncode != 0, proc.stderr[-200:])


def _own_command() -> str:
    return Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()


def attempt_proc(host_pids: list[int]) -> None:
    """Every process in view: none may be the harness; the harness's pids must not exist.

    The sandbox's own processes (its init and port bridge) carry this program's command line,
    whose arguments name harness paths on purpose; that part is not a leak.
    """
    me = os.getpid()
    own = _own_command()
    seen: dict[int, str] = {}
    leaks: list[str] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        seen[int(entry.name)] = cmd
        if any(m in cmd.replace(own, "") for m in HARNESS_MARKS):
            leaks.append(f"{entry.name}: cmdline {cmd[:120]}")
        with contextlib.suppress(OSError):
            env = (entry / "environ").read_bytes().decode(errors="replace").split("\0")
            bad = [v.split("=")[0] for v in env if v.startswith(HARNESS_ENV)]
            if bad:
                leaks.append(f"{entry.name}: environ {bad}")
    record("proc-all", "/proc", not leaks, json.dumps({"seen": seen, "leaks": leaks})[:1500])
    for name in (
        "/proc/1/cmdline",
        f"/proc/{os.getppid()}/cmdline",
        f"/proc/{os.getppid()}/environ",
    ):
        try:
            text = Path(name).read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError as exc:
            record("proc", name, True, str(exc))
            continue
        bad = [m for m in (*HARNESS_MARKS, *HARNESS_ENV) if m in text.replace(own, "")]
        record("proc", name, not bad, f"{bad}: {text[:300]}")
    for pid in host_pids:
        visible = Path(f"/proc/{pid}").exists() and pid in seen
        record("proc-host-pid", str(pid), not visible, json.dumps(seen.get(pid, "")))


def attempt_kill(host_pids: list[int]) -> None:
    """Signal every visible process but this one and its ancestors, then the harness's pids.

    Only from a view that holds no harness process (checked first): outside a sandbox this
    would signal the whole machine.
    """
    if not all(r["blocked"] for r in report if r["attempt"] in ("proc-all", "proc-host-pid")):
        record("kill-visible", "every visible pid", False, "not tried: the harness is in view")
        return
    me = os.getpid()
    ancestors = {me}
    pid = me
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        ancestors.add(pid)
    killed: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in ancestors:
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
    record("kill-visible", "every visible pid", True, f"signalled {killed}, spared {ancestors}")
    for pid in host_pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError as exc:
            record("kill-host-pid", str(pid), True, f"{type(exc).__name__}: {exc.strerror}")
        else:
            record("kill-host-pid", str(pid), False, "signalled")


def attempt_environment(repo: Path, run: Path) -> None:
    """Variables beyond the documented ones, or any naming a harness path."""
    extra = sorted(k for k in os.environ if k not in ALLOWED_ENV and not k.startswith("ITBENCH_"))
    named = sorted(k for k, v in os.environ.items() if str(repo) in v or str(run) in v)
    record("environment", "os.environ", not extra and not named, f"extra {extra}, naming {named}")


def attempt_connect(attempt: str, port: int) -> bool:
    """Connect to 127.0.0.1:``port``; whether it connected."""
    with socket.socket() as s:
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", port))
        except OSError as exc:
            record(attempt, f"127.0.0.1:{port}", True, f"{type(exc).__name__}: {exc}")
            return False
        record(attempt, f"127.0.0.1:{port}", False, "connected")
        return True


def http_status(port: int, data: bytes) -> int | None:
    """Send raw bytes to the tool server; the status of its answer, or None."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
    except OSError:
        return None
    with contextlib.suppress(IndexError, ValueError):
        return int(answer.split(b" ", 2)[1])
    return None


def attempt_tool_server() -> None:
    """Malformed requests: each must get a 4xx answer (never a traceback, never silence)."""
    url = os.environ["ITBENCH_TOOLS_URL"]
    token = os.environ["ITBENCH_TOOLS_TOKEN"]
    port = int(url.rsplit(":", 1)[1])
    good = b'{"tool": "keys", "arguments": {}}'
    deep = b'{"tool": "read", "arguments": {"key": ' + b"[" * 200_000 + b"]" * 200_000 + b"}}"

    def post(length: str, body: bytes) -> bytes:
        head = ["POST /call HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
        head += [f"Authorization: Bearer {token}", f"Content-Length: {length}"]
        return ("\r\n".join(head) + "\r\n\r\n").encode() + body

    cases = {
        "content-length -1": post("-1", good),
        "content-length abc": post("abc", good),
        "json 200000 deep": post(str(len(deep)), deep),
        "body of 5 MiB": post(str(5 * 1024 * 1024), b" " * (5 * 1024 * 1024)),
    }
    for name, data in cases.items():
        code = http_status(port, data)
        record("tool-server", name, code is not None and 400 <= code < 500, f"status {code}")


def attempt_context_port(task: dict[str, Any]) -> None:
    """The public endpoint of the task context is reachable (a control, not an attack)."""
    url = str(task["context"].get("status_url", ""))
    if not url:
        return
    port = int(url.split(":")[2].split("/")[0])
    reached = attempt_connect("reach-context-port", port)
    report[-1]["reached"] = reached
    report[-1].pop("blocked")


def attempt_tool_call(workspace: Path) -> None:
    """Every answer the tool server gives (a control), kept in the workspace for the test."""

    def tool(*args: str) -> Any:
        out = subprocess.run(["itbench", "tool", *args], capture_output=True, text=True, timeout=30)
        return json.loads(out.stdout) if out.returncode == 0 else out.stderr[-200:]

    answers = {"task": tool("task"), "list": tool("list"), "keys": tool("call", "keys")}
    if isinstance(answers["keys"], list):
        answers["read"] = {k: tool("call", "read", f"key={k}") for k in answers["keys"]}
    (workspace / "tool-answers.json").write_text(json.dumps(answers, indent=1))
    report.append({"attempt": "tool-call", "target": "keys", "result": answers["keys"]})


def attempt_other_workspaces(workspace: Path) -> None:
    """Directories beside the workspace: other trials' workspaces must not be there."""
    try:
        others = [n for n in os.listdir(workspace.parent) if n != workspace.name]
    except OSError as exc:
        record("read-other-workspaces", str(workspace.parent), True, str(exc))
        return
    record("read-other-workspaces", str(workspace.parent), not others, str(others[:5]))


def start_daemon(marker: str, port: int, workspace: Path) -> None:
    """A double-forked, setsid daemon holding a listener: it must not outlive the agent."""
    ready = workspace / "daemon.ready"
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            argv = ["/usr/bin/python3", "-c", DAEMON, marker, str(port), str(ready)]
            os.execv(argv[0], argv)
        os._exit(0)
    os.waitpid(pid, 0)
    end = time.monotonic() + 10
    while time.monotonic() < end and not ready.exists():
        time.sleep(0.05)
    listening = False
    with socket.socket() as s, contextlib.suppress(OSError):
        s.settimeout(2)
        s.connect(("127.0.0.1", port))
        listening = True
    report.append(
        {"attempt": "daemon", "target": marker, "started": ready.exists(), "listening": listening}
    )


def main() -> int:
    """Try every path, write the report, submit what was found (most likely nothing)."""
    p = argparse.ArgumentParser()
    p.add_argument("--repo", type=Path, required=True)
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--earlier", type=Path, required=True)
    p.add_argument("--catalog", type=Path, required=True)
    p.add_argument("--code", type=Path, required=True)
    p.add_argument("--canary", type=Path, required=True)
    p.add_argument("--host-port", type=int, required=True)
    p.add_argument("--listen-port", type=int, required=True)
    p.add_argument("--marker", required=True)
    p.add_argument("--host-pid", type=int, action="append", default=[])
    args = p.parse_args()

    task = json.loads(sys.stdin.read())
    workspace = Path(os.environ["ITBENCH_WORKSPACE"])
    handle = task["handle"]
    run, earlier, code = args.run, args.earlier, args.code
    forged = json.dumps({"trial_id": "forged", "status": "passed"}) + "\n"
    own_trial = run / "trials" / handle
    steps: list[tuple[str, Any, tuple[Any, ...]]] = [
        # Reading what decides the answer.
        ("read-catalog", try_read, (args.catalog,)),
        *(("read-repository", try_read, (args.repo / n,)) for n in REPO_PATHS),
        ("read-scoring-code", try_read, (code,)),
        *(("read-this-run", try_read, (run / n,)) for n in RUN_PATHS),
        ("read-trial-dir", try_read, (own_trial,)),
        ("read-earlier-run", try_read, (earlier,)),
        ("read-via-proc-root", try_read, (Path(f"/proc/1/root{run}"),)),
        ("read-harness-tmp", try_read, (args.canary,)),
        ("read-other-workspaces", attempt_other_workspaces, (workspace,)),
        ("import", attempt_imports, (args.repo,)),
        ("environment", attempt_environment, (args.repo, run)),
        ("proc", attempt_proc, (args.host_pid,)),
        # Changing how it is judged.
        ("write-results", try_write, (run / "results.jsonl", forged)),
        ("write-manifest", try_write, (run / "manifest.json", " ")),
        ("write-evaluation", try_write, (own_trial / "evaluation.json", '{"passed": true}')),
        ("write-trial-record", try_write, (own_trial / "trial.json", " ")),
        ("write-earlier-results", try_write, (earlier / "results.jsonl", forged)),
        ("write-scoring-code", try_write, (code, "\nLIMIT = 10**9\n")),
        ("write-tool-client", try_write, (Path("/opt/itbench/toolclient.py"), "\n")),
        ("write-system", try_write, (Path("/usr/lib/python3/itbench_planted.py"), "\n")),
        # Reaching the harness's processes and network.
        ("kill", attempt_kill, (args.host_pid,)),
        ("connect-host-port", attempt_connect, (args.host_port,)),
        ("reach-context-port", attempt_context_port, (task,)),
        ("tool-server", attempt_tool_server, ()),
        ("tool-call", attempt_tool_call, (workspace,)),
        ("daemon", start_daemon, (args.marker, args.listen_port, workspace)),
    ]
    for name, fn, fn_args in steps:
        try:
            if fn in (try_read, try_write, attempt_connect):
                fn(name, *fn_args)
            else:
                fn(*fn_args)
        except Exception as exc:  # a crash is reported, not hidden
            record(name, "", False, f"the attempt itself crashed: {type(exc).__name__}: {exc}")

    (workspace / "redteam.json").write_text(json.dumps(report, indent=1))
    answer: dict[str, Any] = {}
    for path in found_submissions:
        with contextlib.suppress(OSError, ValueError):
            answer = json.loads(path.read_text())
            break
    (workspace / "submission.json").write_text(json.dumps(answer))
    print(json.dumps({"attempts": len(report)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
