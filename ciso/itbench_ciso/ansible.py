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

from itbench import forget_pid, record_pid, stop_group, stopped
from itbench_ciso import playrun
from itbench_ciso.sandbox import Jail, read_back

#: Bytes of a result or evidence file read back at most.
RESULT_LIMIT = 8 * 1024 * 1024
#: Lines of output shown.
OUTPUT_LINES = 40

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


def _ansible_yaml(text: str) -> Any:
    """``text`` parsed as ansible-playbook parses it (its tags included)."""
    from ansible.parsing.yaml.loader import AnsibleLoader  # slow import; only the check needs it

    loader = AnsibleLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def playbook_problem(text: str) -> str | None:
    """Why a playbook is refused before it runs, or ``None``.

    A playbook must be a YAML list of plays and may not use privilege escalation, other
    connections or delegation. It is read by Ansible's own loader, so Ansible's tags
    (``!unsafe``, ``!vault``) are accepted as Ansible accepts them.
    """
    try:
        doc = _ansible_yaml(text)
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


def inventory(
    hosts: dict[str, dict[str, Any]], evidence_dir: str, interpreter: str | None = None
) -> dict[str, Any]:
    """The YAML inventory of ``hosts`` (name -> host variables), local connection.

    Args:
        hosts: Host name -> its variables.
        evidence_dir: Directory of the hosts' ``evidence_file`` (as the playbook sees it).
        interpreter: ``ansible_python_interpreter`` (the runs' own interpreter).
    """
    common: dict[str, Any] = {"ansible_connection": "local"}
    if interpreter is not None:
        common["ansible_python_interpreter"] = interpreter
    return {
        "all": {
            "children": {
                "targets": {
                    "hosts": {
                        name: {**host_vars, "evidence_file": f"{evidence_dir}/{name}.json"}
                        for name, host_vars in sorted(hosts.items())
                    }
                }
            },
            "vars": common,
        }
    }


def run_playbook(
    text: str,
    hosts: dict[str, dict[str, Any]],
    run_dir: Path,
    trial_dir: Path,
    timeout: float = 60.0,
    *,
    roots: dict[str, Path] | None = None,
    roots_at: str = "/hosts",
    ports: tuple[int, ...] = (),
) -> PlayOutcome:
    """Run ``text`` on ``hosts`` with ansible-runner in the sandbox; only ``run_dir`` is writable.

    Args:
        text: The playbook (YAML).
        hosts: Host name -> its variables (endpoint credentials...).
        run_dir: Fresh directory for this run (private data dir, evidence, temp files).
        trial_dir: The trial's directory (pid record for recovery).
        timeout: Seconds the playbook may run.
        roots: Host name -> the directory that stands for its ``/`` (shown read-only at
            ``roots_at/<name>`` and given as the host variable ``host_root``): fresh copies
            made for this run, which it gives to the sandbox's uid.
        roots_at: Where the host trees appear to the playbook.
        ports: TCP ports of 127.0.0.1 the playbook may reach.
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
    jail = Jail(run_dir, ports=ports)
    host_vars = {}
    for name, variables in hosts.items():
        host_vars[name] = dict(variables)
        if roots and name in roots:
            # Fresh copies for this run: the program reads them as their owner.
            host_vars[name]["host_root"] = jail.mount(roots[name], f"{roots_at}/{name}", own=True)
    (run_dir / "project" / "playbook.yml").write_text(text, encoding="utf-8")
    (run_dir / "inventory" / "hosts.yml").write_text(
        yaml.safe_dump(
            inventory(host_vars, jail.inside(evidence_dir), sys.executable), sort_keys=True
        ),
        encoding="utf-8",
    )
    config = run_dir / "run.json"
    result = run_dir / "result.json"
    config.write_text(
        json.dumps(
            {
                "private_data_dir": jail.run,
                "playbook": "playbook.yml",
                "timeout": max(1, int(timeout)),
                "result": jail.inside(result),
                "forks": max(1, len(hosts)),
            }
        ),
        encoding="utf-8",
    )
    runner = jail.helper("playrun.py", Path(playrun.__file__).read_text(encoding="utf-8"))
    log = run_dir.parent / f"{run_dir.name}.log"
    outcome = PlayOutcome("error", sandboxed=jail.confined)
    name = f"playbook-{run_dir.name}"
    halted: str | None = None
    with jail.running(), log.open("wb") as fh:
        try:
            proc = jail.popen(
                [sys.executable, runner, jail.inside(config)], {}, stdout=fh, stderr=fh
            )
        except OSError as exc:
            outcome.output = f"cannot start ansible-runner: {exc}"
            return outcome
        record_pid(trial_dir, name, proc.pid)
        try:
            if jail.confined:
                halted = stopped.wait(proc, timeout + 20)
            else:
                proc.wait(timeout=timeout + 20)
        except subprocess.TimeoutExpired:
            outcome.status = "timeout"
        finally:
            # The sandbox's PID namespace ends with it: nothing the playbook started survives.
            stop_group(proc.pid, timeout=1)
            with contextlib.suppress(Exception):
                proc.wait(timeout=1)
            forget_pid(trial_dir, name)
    facts: dict[str, Any] = {}
    output = ""
    if halted is not None:
        # Stopped or traced: it would never have ended; nothing it left counts.
        outcome.status = "failed"
        outcome.output = f"the playbook's sandbox cannot end: {halted}"
        outcome.problems = {host: outcome.output for host in hosts}
        outcome.seconds = time.perf_counter() - start
        return outcome
    if outcome.status != "timeout":
        try:
            data = json.loads(read_back(run_dir, "result.json", RESULT_LIMIT))
            outcome.status, outcome.rc = str(data.get("status")), data.get("rc")
            facts = data.get("facts") or {}
            output = str(data.get("output") or "")
        except FileNotFoundError:
            pass
        except (OSError, ValueError, RecursionError, AttributeError) as exc:
            output = f"the runner's result is unreadable: {exc}"
    outcome.output = "\n".join([*output.splitlines(), *_tail(log).splitlines()][-OUTPUT_LINES:])
    for host in hosts:
        try:
            raw = read_back(run_dir, f"evidence/{host}.json", RESULT_LIMIT)
        except FileNotFoundError:
            if host in facts:
                outcome.evidence[host] = facts[host]
            else:
                outcome.problems[host] = "no evidence: neither the fact nor the file was set"
            continue
        except OSError as exc:
            outcome.problems[host] = f"evidence file refused: {exc.strerror or exc}"
            continue
        try:
            outcome.evidence[host] = json.loads(raw.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            outcome.problems[host] = f"evidence is not JSON: {exc}"
    outcome.seconds = time.perf_counter() - start
    return outcome


def _tail(log: Path, size: int = 16384) -> str:
    """The end of the runner's own log (outside the run directory)."""
    try:
        with log.open("rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - size))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""
