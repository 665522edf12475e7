"""Run an agent's Python evidence collector against one account, confined and time-limited."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from itbench import forget_pid, record_pid, stop_group
from itbench_ciso.aws import Credentials
from itbench_ciso.sandbox import Jail

#: Bytes of a collector's stdout parsed at most (evidence is a small JSON document).
OUTPUT_CAP = 8 * 1024 * 1024
#: Bytes of its stderr shown in tool results.
OUTPUT_TAIL = 2000


@dataclass
class Collected:
    """The outcome of one collector run."""

    evidence: Any = None
    problem: str | None = None
    stderr: str = ""
    seconds: float = 0.0
    sandboxed: bool = False

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

    The collector runs in the sandbox of :mod:`itbench_ciso.sandbox`: its run directory is
    the only writable place, the endpoint's port the only one of the network it reaches, and
    its environment holds only the account's variables (nothing of the harness's).
    """
    start = time.perf_counter()
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    path = run_dir / "collector.py"
    path.write_text(script, encoding="utf-8")
    port = urlparse(endpoint).port
    jail = Jail(run_dir, ports=[port] if port else [])
    env = {
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_CONFIG_FILE": f"{jail.run}/no-aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": f"{jail.run}/no-aws-credentials",
        "AWS_EC2_METADATA_DISABLED": "true",
        **creds.env(endpoint),
    }
    out = Collected(sandboxed=jail.confined)
    name = f"collector-{run_dir.name}"
    # Outputs go to files the program cannot reach (its writes are capped by the sandbox).
    out_path = run_dir.parent / f"{run_dir.name}.stdout"
    err_path = run_dir.parent / f"{run_dir.name}.stderr"
    with jail.running(), out_path.open("wb") as fout, err_path.open("wb") as ferr:
        try:
            proc = jail.popen([sys.executable, jail.inside(path)], env, stdout=fout, stderr=ferr)
        except OSError as exc:
            out.problem = f"cannot start the collector: {exc}"
            return out
        record_pid(trial_dir, name, proc.pid)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            out.problem = f"the collector exceeded its time limit of {timeout:g}s"
        finally:
            stop_group(proc.pid, timeout=1)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=2)
            forget_pid(trial_dir, name)
    out.stderr = _tail(err_path, OUTPUT_TAIL)
    if out.problem is None:
        size = out_path.stat().st_size
        if proc.returncode != 0:
            out.problem = f"the collector exited with {proc.returncode}"
        elif size > OUTPUT_CAP:
            out.problem = f"the collector printed {size} bytes; evidence is at most {OUTPUT_CAP}"
        else:
            try:
                out.evidence = json.loads(out_path.read_bytes().decode(errors="replace"))
            except (json.JSONDecodeError, RecursionError) as exc:
                out.problem = f"the collector's output is not one JSON document: {exc}"
    out.seconds = time.perf_counter() - start
    return out


def _tail(path: Path, size: int) -> str:
    """The last ``size`` bytes of ``path`` as text."""
    with path.open("rb") as fh:
        fh.seek(0, 2)
        fh.seek(max(0, fh.tell() - size))
        return fh.read().decode(errors="replace")
