"""Run an agent's program with the whole filesystem read-only except a few directories.

The program runs in a private mount namespace (``unshare --mount``) in which every mount is
remounted read-only and only the given directories are bind-mounted writable. A write
anywhere else fails with "Read-only file system". Where mount namespaces are not available
(no privilege), :func:`sandbox_problem` says why and callers fall back to running unconfined.

Run as ``python -m itbench_ciso.sandbox --rw DIR [--rw DIR ...] -- PROGRAM ARGS...`` inside
``unshare --mount --propagation private``; :func:`wrap` builds that command line.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path


@cache
def sandbox_problem() -> str | None:
    """Why the sandbox cannot be used here, or ``None`` when it can."""
    if os.environ.get("ITBENCH_CISO_NO_SANDBOX"):
        return "disabled by ITBENCH_CISO_NO_SANDBOX"
    unshare = shutil.which("unshare")
    if unshare is None:
        return "the `unshare` program (util-linux) is not installed"
    probe = subprocess.run(
        [unshare, "--mount", "--propagation", "private", "--", "mount", "--bind", "/", "/"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    if probe.returncode != 0:
        return f"mount namespaces are not permitted: {probe.stderr.strip() or probe.returncode}"
    return None


def wrap(argv: list[str], writable: list[Path]) -> list[str]:
    """The command line that runs ``argv`` with only ``writable`` directories writable."""
    unshare = shutil.which("unshare") or "unshare"
    rw: list[str] = []
    for d in writable:
        rw += ["--rw", str(d.resolve())]
    return [
        unshare,
        "--mount",
        "--propagation",
        "private",
        "--",
        sys.executable,
        "-m",
        "itbench_ciso.sandbox",
        *rw,
        "--",
        *argv,
    ]


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            if len(fields) > 4:
                points.append(fields[4].replace("\\040", " "))
    return points


def _mount(*args: str) -> int:
    return subprocess.run(["mount", *args], capture_output=True, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    """Enter the read-only view and exec the program (run inside a new mount namespace)."""
    parser = argparse.ArgumentParser(prog="itbench_ciso.sandbox")
    parser.add_argument("--rw", action="append", default=[], help="A writable directory.")
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    program = [a for a in args.program if a != "--"] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("no program given")
    writable = [d for d in args.rw if Path(d).is_dir()]
    for d in writable:  # separate mounts first, so the read-only pass below skips them
        if _mount("--bind", d, d) != 0:
            print(f"sandbox: cannot bind {d}", file=sys.stderr)
            return 125
    keep = set(writable)
    # Python's multiprocessing (Ansible's workers) needs /dev/shm: give it a private, empty
    # tmpfs that vanishes with the namespace, so nothing written there outlives the run.
    if (
        Path("/dev/shm").is_dir()
        and _mount("-t", "tmpfs", "-o", "size=64m", "tmpfs", "/dev/shm") == 0
    ):
        keep.add("/dev/shm")
    for point in _mount_points():
        if point in keep or point.startswith(("/proc", "/sys")):
            continue
        _mount("-o", "remount,bind,ro", point)
    probe = Path("/usr/.itbench-sandbox-probe")
    try:
        probe.touch()
    except OSError:
        pass
    else:
        probe.unlink()
        print("sandbox: the filesystem is still writable; refusing to run", file=sys.stderr)
        return 125
    os.execvp(program[0], program)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
