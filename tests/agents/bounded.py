"""A hostile agent against the sandbox's bounds: ``bounded.py MODE [ARG]``.

Modes: ``fill N`` writes files of 1 MiB until N MiB or a full disk; ``hog N`` allocates and
touches N MiB; ``forkbomb`` forks until refused; ``ptrace`` attaches to pid 1; ``mountinfo``
copies ``/proc/self/mountinfo`` and pid 1's command line; ``sleep`` waits. Each reports in ``report.json`` of its
workspace (when it lives to) and submits "no incident".
"""

import ctypes
import json
import os
import sys
import time
from pathlib import Path

mode = sys.argv[1]
arg = int(sys.argv[2]) if len(sys.argv) > 2 else 0
report: dict = {"mode": mode}


def save() -> None:
    with open("report.json", "w") as fh:
        json.dump(report, fh)


if mode == "fill":
    os.makedirs("fill", exist_ok=True)
    written, error = 0, None
    block = os.urandom(1 << 20)
    for i in range(arg):
        try:
            with open(f"fill/{i:05d}.bin", "wb") as fh:
                fh.write(block)
            written += 1
        except OSError as exc:
            error = exc.strerror
            break
    if os.path.exists(f"fill/{written:05d}.bin"):  # room for the report
        os.remove(f"fill/{written:05d}.bin")
    report.update(written_mib=written, error=error)
elif mode == "hog":
    chunks = []
    for _ in range(arg):
        chunk = bytearray(1 << 20)
        for i in range(0, len(chunk), 4096):
            chunk[i] = 1
        chunks.append(chunk)
    report["allocated_mib"] = arg
elif mode == "forkbomb":
    children, error = [], None
    for _ in range(arg):
        try:
            pid = os.fork()
        except OSError as exc:
            error = exc.strerror
            break
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children.append(pid)
    report.update(forked=len(children), error=error)
elif mode == "ptrace":
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    attach = libc.ptrace(16, 1, None, None)  # PTRACE_ATTACH
    report.update(attach=attach, errno=ctypes.get_errno())
    status = Path("/proc/self/status").read_text().splitlines()
    report["seccomp"] = [line.split()[1] for line in status if line.startswith("Seccomp:")]
elif mode == "mountinfo":
    report["mountinfo"] = Path("/proc/self/mountinfo").read_text()
    report["cgroup"] = Path("/proc/self/cgroup").read_text()
    report["pid1"] = Path("/proc/1/cmdline").read_bytes().decode(errors="replace")
elif mode == "sleep":
    save()
    time.sleep(arg)
save()
print(json.dumps({"no_incident": True}))
