"""The seccomp filter of every sandbox (agents, evidence collectors): a classic BPF program.

bubblewrap installs it (``--seccomp FD``) on the program it starts; every process the program
starts inherits it. It allows every system call but:

- calls of another architecture than the machine's own (32-bit entry points) and, on x86-64,
  of the x32 ABI (numbers with bit 30 set): refused whatever the call;
- the calls of :data:`REFUSED` (EPERM): those that read or change another process (tracing,
  its memory, its descriptors, its pages, its robust futex list, comparing its resources,
  observing it through performance counters) and file handles (``open_by_handle_at`` would
  open any inode of a filesystem the sandbox shows a part of).

Signals stay allowed: a program stops its own children with them, and the sandbox's PID
namespace holds nothing else of the harness but its pid 1, which ignores them.
"""

from __future__ import annotations

import errno
import platform
import struct

#: The audit architecture of each machine the filter knows.
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
#: System calls refused with EPERM, by name, with their numbers on x86-64 and on AArch64.
REFUSED = {
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "process_madvise": (440, 440),
    "process_mrelease": (448, 448),
    "pidfd_getfd": (438, 438),
    "kcmp": (312, 272),
    "get_robust_list": (274, 100),
    "move_pages": (279, 239),
    "migrate_pages": (256, 238),
    "perf_event_open": (298, 241),
    "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265),
}
_X32_SYSCALL_BIT = 0x40000000
# BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_JMP|BPF_JGE|BPF_K, BPF_RET|BPF_K
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO
# Offsets in struct seccomp_data.
_NR, _ARCH = 0, 4


def numbers(machine: str) -> list[int]:
    """The numbers of the refused calls on ``machine`` (``x86_64`` or ``aarch64``).

    Raises:
        KeyError: an unknown machine.
    """
    if machine not in AUDIT_ARCH:
        raise KeyError(f"no seccomp filter for machine {machine!r}")
    column = list(AUDIT_ARCH).index(machine)
    return [pair[column] for pair in REFUSED.values()]


def program(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one), or ``None`` where it is not known."""
    machine = machine or platform.machine()
    arch = AUDIT_ARCH.get(machine)
    if arch is None:
        return None
    # (code, jump if true, jump if false, k); "DENY" is the last instruction.
    prog: list[tuple[int, int | str, int | str, int]] = [
        (_LD_ABS, 0, 0, _ARCH),
        (_JEQ, 0, "DENY", arch),
        (_LD_ABS, 0, 0, _NR),
    ]
    if machine == "x86_64":
        prog.append((_JGE, "DENY", 0, _X32_SYSCALL_BIT))
    prog += [(_JEQ, "DENY", 0, n) for n in numbers(machine)]
    prog += [(_RET, 0, 0, _ALLOW), (_RET, 0, 0, _ERRNO | errno.EPERM)]
    last = len(prog) - 1
    out = b""
    for i, (code, jt, jf, k) in enumerate(prog):
        t = last - i - 1 if jt == "DENY" else int(jt)
        f = last - i - 1 if jf == "DENY" else int(jf)
        out += struct.pack("=HBBI", code, t, f, k)
    return out
