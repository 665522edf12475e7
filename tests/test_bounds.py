"""The sandbox's bounds: their options, the seccomp program and the workspace's copy back."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from conftest import CliFn

from itbench import seccomp
from itbench.bounds import MEMORY_LIMIT, Bounds
from itbench.workspace_fs import copy_back


def test_bounds_take_sizes_with_suffixes_and_name_a_wrong_option() -> None:
    b = Bounds.from_options({"agent_memory": "512M", "agent_workspace_size": 64 * 1024**2})
    assert b.limits.memory == 512 * 1024**2 and b.workspace.size == 64 * 1024**2
    assert Bounds.from_options({}).limits.memory == MEMORY_LIMIT
    for key, value in [("agent_memory", "lots"), ("agent_pids", 0), ("agent_cpus", True)]:
        with pytest.raises(ValueError, match=f"option {key}: "):
            Bounds.from_options({key: value})
    with pytest.raises(ValueError, match="agent_workspace_size: .* less than agent_memory"):
        Bounds.from_options({"agent_memory": "1G", "agent_workspace_size": "1G"})


def test_a_wrong_bound_stops_the_run_before_any_trial(itbench: CliFn, tmp_path: Path) -> None:
    res = itbench(
        "evaluate",
        "--agent",
        "command",
        "-s",
        "toy/healthy",
        "--option",
        "agent_command=/bin/true",
        "--option",
        "agent_pids=-3",
        "--out",
        "r",
    )
    assert res.returncode != 0
    assert "agent_pids" in res.stderr and not (tmp_path / "r" / "results.jsonl").exists()


def test_the_filter_refuses_every_listed_call_on_both_machines() -> None:
    for machine, arch in seccomp.AUDIT_ARCH.items():
        program = seccomp.program(machine)
        assert program is not None
        code = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
        assert code[1][3] == arch and code[-1][3] == 0x00050000 | 1  # EPERM
        refused = {k for op, _, _, k in code if op == 0x15}  # JEQ
        assert set(seccomp.numbers(machine)) | {arch} == refused
        # Every refused call jumps to the last instruction, every other falls through to allow.
        for i, (op, jt, _, k) in enumerate(code):
            if op == 0x15 and k != arch:
                assert i + jt + 1 == len(code) - 1
    assert seccomp.program("s390x") is None


def test_the_copy_back_keeps_the_smallest_files_within_the_cap(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    (src / "d").mkdir(parents=True)
    dest.mkdir()
    for name, size in [("a.bin", 400), ("d/b.bin", 100), ("c.bin", 300), ("submission.json", 10)]:
        (src / name).write_bytes(b"x" * size)
    (src / "link").symlink_to("/etc/shadow")
    os.mkfifo(src / "pipe")
    kept = copy_back(src, dest, 500)
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == [
        "c.bin",
        "d",
        "d/b.bin",
        "link",
        "submission.json",
    ]
    assert (dest / "link").is_symlink() and os.readlink(dest / "link") == "/etc/shadow"
    assert (kept.files, kept.bytes, kept.cut) == (3, 410, [("a.bin", 400)])
