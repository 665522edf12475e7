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
from urllib.parse import urlparse

from itbench import forget_pid, record_pid, stop_group, stopped
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


#: The program a collector's sandbox starts with: it imports boto3 (what most collectors
#: import first), then waits for one line, ``{"env": ..., "path": ...}``, and runs the script
#: at ``path`` as ``__main__`` with exactly that environment. Started ahead of its script, a
#: collector pays for its imports while the agent works.
BOOTSTRAP = """\
import json, os, sys
try:
    import boto3  # noqa: F401 - a warm-up only
except ImportError:
    pass
line = sys.stdin.readline()
if not line:
    sys.exit(0)
job = json.loads(line)
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
os.close(null)
os.environ.clear()
os.environ.update(job["env"])
sys.argv = [job["path"]]
sys.orig_argv = [sys.executable, job["path"]]
sys.path[0] = os.path.dirname(job["path"])


def _run(path):
    # In the real __main__ module, emptied: `import __main__` finds the script's names.
    import builtins

    with open(path, "rb") as fh:
        code = compile(fh.read(), path, "exec")
    names = sys.modules["__main__"].__dict__
    names.clear()
    names.update(__name__="__main__", __file__=path, __builtins__=builtins, __doc__=None,
                 __package__=None, __spec__=None, __loader__=None, __cached__=None)
    exec(code, names)


_run(job["path"])
"""


class Collector:
    """One sandboxed run of an agent's Python evidence collector, started before its script.

    The sandbox (:mod:`itbench_ciso.sandbox`) makes its run directory the only writable place,
    the endpoint's port the only one of the network it reaches, and gives it an environment of
    the account's variables alone (nothing of the harness's). :meth:`start` makes the sandbox
    and its Python ready; :meth:`run` hands it the script and the account.

    Args:
        run_dir: The run's directory (emptied).
        trial_dir: The trial's directory (pid files).
        port: The endpoint's TCP port on 127.0.0.1.
    """

    def __init__(self, run_dir: Path, trial_dir: Path, port: int | None) -> None:
        self.run_dir = run_dir
        self.trial_dir = trial_dir
        self.jail = Jail(run_dir, ports=[port] if port else [])
        self.name = f"collector-{run_dir.name}"
        self.out_path = run_dir.parent / f"{run_dir.name}.stdout"
        self.err_path = run_dir.parent / f"{run_dir.name}.stderr"
        self._stack = contextlib.ExitStack()
        self._proc: subprocess.Popen[bytes] | None = None
        self._problem: str | None = None
        #: Whether its sandbox was found gone when the script came (no run took place).
        self.lost = False

    def start(self) -> Collector:
        """Make the sandbox and start its Python (which then waits for the script)."""
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.run_dir.mkdir(parents=True)
        boot = self.jail.helper("bootstrap.py", BOOTSTRAP)
        # Outputs go to files the program cannot reach (its writes are capped by the sandbox).
        self._stack.enter_context(self.jail.running())
        fout = self._stack.enter_context(self.out_path.open("wb"))
        ferr = self._stack.enter_context(self.err_path.open("wb"))
        env = {"PYTHONDONTWRITEBYTECODE": "1"}
        try:
            self._proc = self.jail.popen(
                [sys.executable, boot], env, stdin=subprocess.PIPE, stdout=fout, stderr=ferr
            )
        except OSError as exc:
            self._problem = f"cannot start the collector: {exc}"
            self.close()
            return self
        record_pid(self.trial_dir, self.name, self._proc.pid)
        return self

    def alive(self) -> bool:
        """Whether its Python still waits for the script."""
        return self._proc is not None and self._proc.poll() is None

    def run(self, script: str, env: dict[str, str], timeout: float = 60.0) -> Collected:
        """Run ``script`` with ``env`` (the account's variables); parse its stdout."""
        start = time.perf_counter()
        out = Collected(sandboxed=self.jail.confined, problem=self._problem)
        proc = self._proc
        if proc is None or out.problem is not None:
            out.problem = out.problem or "the collector was not started"
            return out
        if proc.poll() is not None:
            # Gone already: a write could still land in the pipe (a sandbox child may hold its
            # end), so it is caught here, not by a broken pipe.
            self.lost = True
            out.problem = f"the collector's sandbox exited with {proc.returncode} before its run"
            self.close()
            return out
        path = self.run_dir / "collector.py"
        # Readable by the sandbox's uid whatever the harness's umask (the directory is its).
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o444)
            fh.write(script.encode())
        job = {"env": self.jail.environment(env), "path": self.jail.inside(path)}
        try:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(job).encode() + b"\n")
            proc.stdin.close()
            halted = stopped.wait(proc, timeout) if self.jail.confined else None
            if not self.jail.confined:
                proc.wait(timeout=timeout)
            if halted is not None:
                out.problem = f"the collector's sandbox cannot end: {halted}"
        except BrokenPipeError:
            proc.wait()
            self.lost = True
            out.problem = f"the collector's sandbox exited with {proc.returncode} before its run"
        except subprocess.TimeoutExpired:
            out.problem = f"the collector exceeded its time limit of {timeout:g}s"
        finally:
            self.close()
        out.stderr = _tail(self.err_path, OUTPUT_TAIL)
        if out.problem is None:
            size = self.out_path.stat().st_size
            if proc.returncode != 0:
                out.problem = f"the collector exited with {proc.returncode}"
            elif size > OUTPUT_CAP:
                out.problem = (
                    f"the collector printed {size} bytes; evidence is at most {OUTPUT_CAP}"
                )
            else:
                try:
                    out.evidence = json.loads(self.out_path.read_bytes().decode(errors="replace"))
                except (json.JSONDecodeError, RecursionError) as exc:
                    out.problem = f"the collector's output is not one JSON document: {exc}"
        out.seconds = time.perf_counter() - start
        return out

    def close(self) -> None:
        """Stop the sandbox's processes and release it (idempotent)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_group(proc.pid, timeout=1)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=2)
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            forget_pid(self.trial_dir, self.name)
        self._stack.close()


def run_collector(
    script: str,
    creds: Credentials,
    endpoint: str,
    run_dir: Path,
    trial_dir: Path,
    timeout: float = 60.0,
) -> Collected:
    """Run ``script`` with the account's credentials in the environment; parse its stdout.

    A :class:`Collector` started and run at once.
    """
    collector = Collector(run_dir, trial_dir, urlparse(endpoint).port).start()
    return collector.run(script, collector_env(creds, endpoint, collector.jail), timeout)


def collector_env(creds: Credentials, endpoint: str, jail: Jail) -> dict[str, str]:
    """A collector's environment: the account's variables and no AWS file of anyone's."""
    return {
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_CONFIG_FILE": f"{jail.run}/no-aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": f"{jail.run}/no-aws-credentials",
        "AWS_EC2_METADATA_DISABLED": "true",
        **creds.env(endpoint),
    }


def _tail(path: Path, size: int) -> str:
    """The last ``size`` bytes of ``path`` as text."""
    with path.open("rb") as fh:
        fh.seek(0, 2)
        fh.seek(max(0, fh.tell() - size))
        return fh.read().decode(errors="replace")
