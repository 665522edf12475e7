"""Run an agent's evidence playbook on harness-built hosts, confined and under a time limit."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from itbench.process import forget_pid, record_pid, stop_group, stop_marked
from itbench_ciso.sandbox import sandbox_problem, wrap

#: Keys that would let a play leave the harness's inventory or its local, unprivileged runs.
FORBIDDEN_KEYS = frozenset(
    {"delegate_to", "local_action", "become", "become_user", "connection", "remote_user"}
)


@dataclass
class PlayOutcome:
    """What one playbook run produced.

    Attributes:
        status: ansible-runner's status (``successful``, ``failed``, ``timeout``...), or
            ``refused`` (the playbook broke a rule) or ``error`` (it could not start).
        rc: Exit code of ansible-playbook, when it ran.
        evidence: Per host, the parsed evidence JSON (``None`` when missing or invalid).
        problems: Per host, why its evidence is missing or invalid.
        output: The tail of the playbook's output.
        sandboxed: Whether writes outside the run directory were impossible.
        seconds: Wall time.
    """

    status: str
    rc: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    output: str = ""
    sandboxed: bool = False
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        """A JSON-able summary (evidence left out)."""
        return {
            "status": self.status,
            "rc": self.rc,
            "problems": self.problems,
            "sandboxed": self.sandboxed,
            "seconds": round(self.seconds, 3),
            "output": self.output,
        }


def playbook_problem(text: str) -> str | None:
    """Why a playbook is refused before it runs, or ``None``.

    A playbook must be a YAML list of plays and may not use privilege escalation, other
    connections or delegation.
    """
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        return f"the playbook is not valid YAML{where}: {getattr(exc, 'problem', exc)}"
    if not isinstance(doc, list) or not all(isinstance(p, dict) for p in doc):
        return "the playbook must be a YAML list of plays"

    def walk(node: Any, where: str) -> str | None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in FORBIDDEN_KEYS:
                    return f"{where}: `{key}` is not allowed (runs stay local and unprivileged)"
                found = walk(value, f"{where}.{key}")
                if found:
                    return found
        elif isinstance(node, list):
            for i, value in enumerate(node):
                found = walk(value, f"{where}[{i}]")
                if found:
                    return found
        return None

    return walk(doc, "playbook")


def host_root(root: Path) -> dict[str, Any]:
    """Host variables of a host whose ``/`` is the directory ``root``."""
    return {"host_root": str(root.resolve())}


def inventory(hosts: dict[str, dict[str, Any]], evidence_dir: Path) -> dict[str, Any]:
    """The YAML inventory of ``hosts`` (name -> host variables), local connection."""
    return {
        "all": {
            "children": {
                "targets": {
                    "hosts": {
                        name: {
                            **host_vars,
                            "evidence_file": str((evidence_dir / f"{name}.json").resolve()),
                        }
                        for name, host_vars in sorted(hosts.items())
                    }
                }
            },
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
            },
        }
    }


def run_playbook(
    text: str,
    hosts: dict[str, dict[str, Any]],
    run_dir: Path,
    trial_dir: Path,
    timeout: float = 60.0,
) -> PlayOutcome:
    """Run ``text`` on ``hosts`` with ansible-runner; only ``run_dir`` is writable.

    Args:
        text: The playbook (YAML).
        hosts: Host name -> its variables (``host_root``, endpoint credentials...).
        run_dir: Fresh directory for this run (private data dir, evidence, temp files).
        trial_dir: The trial's directory (pid record for recovery).
        timeout: Seconds the playbook may run.
    """
    start = time.perf_counter()
    problem = playbook_problem(text)
    if problem is not None:
        return PlayOutcome("refused", output=problem, seconds=time.perf_counter() - start)
    shutil.rmtree(run_dir, ignore_errors=True)
    (run_dir / "project").mkdir(parents=True)
    (run_dir / "inventory").mkdir()
    evidence_dir = run_dir / "evidence"
    evidence_dir.mkdir()
    (run_dir / "project" / "playbook.yml").write_text(text, encoding="utf-8")
    (run_dir / "inventory" / "hosts.yml").write_text(
        yaml.safe_dump(inventory(hosts, evidence_dir), sort_keys=True), encoding="utf-8"
    )
    config = run_dir / "run.json"
    result = run_dir / "result.json"
    config.write_text(
        json.dumps(
            {
                "private_data_dir": str(run_dir.resolve()),
                "playbook": "playbook.yml",
                "timeout": max(1, int(timeout)),
                "result": str(result.resolve()),
                "forks": max(1, len(hosts)),
            }
        ),
        encoding="utf-8",
    )
    argv = [sys.executable, "-m", "itbench_ciso.playrun", str(config.resolve())]
    sandboxed = sandbox_problem() is None
    if sandboxed:
        argv = wrap(argv, [run_dir])
    log = run_dir / "runner.log"
    outcome = PlayOutcome("error", sandboxed=sandboxed)
    with log.open("wb") as fh:
        try:
            proc = subprocess.Popen(  # noqa: S603 - our own runner module
                argv,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            outcome.output = f"cannot start ansible-runner: {exc}"
            return outcome
        name = f"playbook-{run_dir.name}"
        record_pid(trial_dir, name, proc.pid)
        try:
            proc.wait(timeout=timeout + 20)
        except subprocess.TimeoutExpired:
            stop_group(proc.pid)
            outcome.status = "timeout"
        finally:
            stop_group(proc.pid, timeout=1)
            with contextlib.suppress(Exception):
                proc.wait(timeout=1)
            # ansible-runner starts ansible-playbook in a session of its own, out of reach of
            # the group above when a time limit cuts the run short.
            stop_marked([run_dir])
            forget_pid(trial_dir, name)
    facts: dict[str, Any] = {}
    if result.is_file():
        data = json.loads(result.read_text(encoding="utf-8"))
        outcome.status, outcome.rc = str(data.get("status")), data.get("rc")
        facts = data.get("facts") or {}
    outcome.output = _tail(run_dir, log)
    for host in hosts:
        path = evidence_dir / f"{host}.json"
        if not path.is_file():
            if host in facts:
                outcome.evidence[host] = facts[host]
            else:
                outcome.problems[host] = "no evidence: neither the fact nor the file was set"
            continue
        try:
            outcome.evidence[host] = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            outcome.problems[host] = f"evidence is not JSON: {exc}"
    outcome.seconds = time.perf_counter() - start
    return outcome


def _tail(run_dir: Path, log: Path, lines: int = 40) -> str:
    texts = []
    for stdout in sorted((run_dir / "artifacts").glob("*/stdout")):
        texts.append(stdout.read_text(errors="replace"))
    runner_log = log.read_text(errors="replace") if log.is_file() else ""
    if runner_log.strip():
        texts.append(runner_log)
    return "\n".join("\n".join(texts).splitlines()[-lines:])
