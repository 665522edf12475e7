"""Run an agent's Python evidence collector against one account, confined and time-limited."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from itbench.process import forget_pid, record_pid, stop_group
from itbench_ciso.aws import Credentials
from itbench_ciso.sandbox import sandbox_problem, wrap


@dataclass
class Collected:
    """The outcome of one collector run."""

    evidence: Any = None
    problem: str | None = None
    stderr: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether the collector printed one JSON document."""
        return self.problem is None


def run_collector(
    script: str,
    creds: Credentials,
    endpoint: str,
    run_dir: Path,
    trial_dir: Path,
    timeout: float = 60.0,
) -> Collected:
    """Run ``script`` with the account's credentials in the environment; parse its stdout.

    Only ``run_dir`` (its working directory) is writable when the sandbox is available.
    """
    start = time.perf_counter()
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    path = run_dir / "collector.py"
    path.write_text(script, encoding="utf-8")
    env = {
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        "HOME": str(run_dir),
        "LANG": "C.UTF-8",
        "TMPDIR": str(run_dir),
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_CONFIG_FILE": str(run_dir / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(run_dir / "no-aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        **creds.env(endpoint),
    }
    argv = [sys.executable, str(path)]
    if sandbox_problem() is None:
        argv = wrap(argv, [run_dir])
    out = Collected()
    try:
        proc = subprocess.Popen(  # noqa: S603 - runs the submitted collector, confined
            argv,
            cwd=run_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        return Collected(problem=f"cannot start the collector: {exc}")
    name = f"collector-{run_dir.name}"
    record_pid(trial_dir, name, proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(proc.pid)
        with contextlib.suppress(Exception):
            stdout, stderr = proc.communicate(timeout=2)
        out.problem = f"the collector exceeded its time limit of {timeout:g}s"
        stdout, stderr = b"", b""
    finally:
        stop_group(proc.pid, timeout=1)
        forget_pid(trial_dir, name)
    out.stderr = stderr.decode(errors="replace")[-2000:]
    (run_dir / "stdout.txt").write_bytes(stdout)
    (run_dir / "stderr.txt").write_bytes(stderr)
    if out.problem is None:
        if proc.returncode != 0:
            out.problem = f"the collector exited with {proc.returncode}"
        else:
            try:
                out.evidence = json.loads(stdout.decode(errors="replace"))
            except json.JSONDecodeError as exc:
                out.problem = f"the collector's output is not one JSON document: {exc}"
    out.seconds = time.perf_counter() - start
    return out
