"""``probe/leak``: an agent that looks for the answer everywhere but the environment.

It runs as an external program (sandboxed like any other) and tries every read path an agent
chasing a leaderboard would: the task view and environment variables for scenario names, the
file system for catalogs, installed itbench packages, run directories (manifests, results,
earlier submissions and evaluations, secrets, ``ctl/`` state), ``/proc`` for the harness's
processes and their command lines, and every loopback port for servers it was not given. It
prints one JSON line per finding on standard error and, when it found an earlier submission, submits it; a
scenario that it passes is invalid. Standard library only: it is bound into the sandbox alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import pkgutil
import socket
import sys
from pathlib import Path

#: Names that belong to the harness's private state, never to an agent's world.
SECRET_NAMES = {
    "manifest.json",
    "results.jsonl",
    "evaluation.json",
    "secret",
    "scenario.yaml",
    "ground_truth.json",
    "hidden",
    "ctl",
}
#: Task view fields that would name the scenario.
SCENARIO_FIELDS = ("scenario_id", "title", "params", "family", "source", "trial_id")
DOCUMENTED_ENV = {"PATH", "HOME", "LANG", "PWD", "SHLVL", "_"}
_WALK_LIMIT = 50_000


def finding(kind: str, where: str, detail: str = "") -> dict[str, str]:
    """One thing found, printed as a JSON line."""
    item = {"kind": kind, "where": where, "detail": detail[:200]}
    print(json.dumps({"leak": item}), file=sys.stderr, flush=True)
    return item


def check_task(found: list[dict[str, str]]) -> dict[str, object]:
    """Scenario-naming fields in the task view."""
    task: dict[str, object] = {}
    with contextlib.suppress(OSError, ValueError, KeyError):
        task = json.loads(Path(os.environ["ITBENCH_TASK"]).read_text())
    for name in SCENARIO_FIELDS:
        if name in task:
            found.append(finding("task-field", name, str(task[name])))
    return task


def check_environment(found: list[dict[str, str]]) -> None:
    """Variables beyond the documented ones (the harness's environment)."""
    for key in os.environ:
        if key not in DOCUMENTED_ENV and not key.startswith("ITBENCH_"):
            found.append(finding("environment", key))


def harness_modules(given: list[str]) -> list[str]:
    """The harness's packages to try.

    Those named on the command line (the trial's domain, as the harness passes it), the core,
    and any ``itbench*`` module on the path.
    """
    names = {"itbench", *given}
    with contextlib.suppress(Exception):
        names |= {m.name for m in pkgutil.iter_modules() if m.name.startswith("itbench")}
    return sorted(n for n in names if n.isidentifier())


def check_imports(found: list[dict[str, str]], modules: list[str]) -> None:
    """The installed harness and domain packages (catalog, oracles, scoring)."""
    for module in modules:
        try:
            __import__(module)
        except Exception:  # any failure to import is the expected block
            continue
        found.append(finding("import", module))


def check_processes(found: list[dict[str, str]]) -> None:
    """Processes outside the agent's own program (the harness, its servers)."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        with contextlib.suppress(OSError):
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if "itbench" in cmd and "netbridge.py" not in cmd and "leakprobe" not in cmd:
                found.append(finding("process", entry.name, cmd))
            env = (entry / "environ").read_bytes().decode(errors="replace")
            if "VIRTUAL_ENV" in env or "ITBENCH_OPA_URL" in env:
                found.append(finding("process-environ", entry.name))


def check_files(found: list[dict[str, str]], workspace: Path) -> list[Path]:
    """Harness files anywhere on the visible file system; returns earlier submissions."""
    submissions: list[Path] = []
    seen = 0
    skip = {"/proc", "/sys", "/dev", "/usr", str(workspace)}
    for root, dirs, files in os.walk("/", onerror=lambda e: None):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in skip]
        seen += len(files) + len(dirs)
        if seen > _WALK_LIMIT:
            break
        for name in files + dirs:
            path = Path(root) / name
            if name in SECRET_NAMES or (name.endswith(".yaml") and "scenarios" in path.parts):
                found.append(finding("file", str(path)))
            if name == "submission.json":
                submissions.append(path)
                found.append(finding("file", str(path)))
            if name.startswith(("itbench_", "itbench-")) and "site-packages" in root:
                found.append(finding("package", str(path)))
    for site in [Path("/usr/local"), *Path("/usr/lib").glob("python3*/*-packages")]:
        with contextlib.suppress(OSError):
            for entry in os.listdir(site):
                if entry.startswith(("itbench", "itbench_")):
                    found.append(finding("package", str(site / entry)))
    for up in list(workspace.parents)[:3]:
        with contextlib.suppress(OSError):
            for entry in os.listdir(up):
                if entry in SECRET_NAMES or entry == "trials":
                    found.append(finding("run-dir", str(up / entry)))
    return submissions


def check_ports(found: list[dict[str, str]], allowed: set[int]) -> None:
    """Loopback servers the agent was not given (harness servers, other trials)."""
    for port in range(1, 65536):
        if port in allowed:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.05)
            # A connect from an ephemeral port to itself succeeds with nobody listening.
            if s.connect_ex(("127.0.0.1", port)) == 0 and s.getsockname()[1] != port:
                found.append(finding("port", str(port)))


def main() -> int:
    """Try every path, print findings, submit an earlier submission if one was found."""
    found: list[dict[str, str]] = []
    task = check_task(found)
    workspace = Path(os.environ.get("ITBENCH_WORKSPACE", os.getcwd()))
    check_environment(found)
    check_imports(found, harness_modules(sys.argv[1:]))
    check_processes(found)
    submissions = check_files(found, workspace)
    allowed = set()
    url = os.environ.get("ITBENCH_TOOLS_URL", "")
    with contextlib.suppress(ValueError):
        allowed.add(int(url.rsplit(":", 1)[1]))
    text = json.dumps(task.get("context", {}))
    for piece in text.replace('"', " ").replace("/", " ").split():
        host, _, port = piece.partition(":")
        if host in ("127.0.0.1", "localhost") and port.isdigit():
            allowed.add(int(port))
    check_ports(found, allowed)
    (workspace / "leaks.json").write_text(json.dumps(found, indent=1))
    for path in submissions:
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(path.read_text())
            if isinstance(data, dict):
                (workspace / "submission.json").write_text(json.dumps(data))
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
