"""A sandboxed agent's workspace as a bounded file system, and what the run directory keeps.

During the agent's turn the workspace is a tmpfs of :attr:`Bound.size` bytes and
:attr:`Bound.files` inodes, mounted by the harness (as root) over the workspace's directory in
the run directory, so the harness's tools read what the agent writes at the path they know; the
sandbox binds that tmpfs, whose root names no host path (``/proc/self/mountinfo`` shows ``/``).
Its pages are charged to the memory group of the process that writes them (the agent's, see
:mod:`itbench.cgroups`). A full workspace is ``ENOSPC`` to the agent, nothing else.

When the turn ends the tmpfs is unmounted from the workspace and copied into the directory it
covered: regular files (smallest first, then by path), directories and symbolic links (as
links, never followed), up to :attr:`Bound.keep` bytes and :data:`KEEP_ENTRIES` entries; what
does not fit is listed in :data:`CUT_FILE` of the trial directory. Then the tmpfs goes.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

#: Entries (files, directories, links) copied back at most.
KEEP_ENTRIES = 10_000
#: The trial directory's list of what was not kept (absent when everything was).
CUT_FILE = "workspace-cut.txt"
#: Lines of :data:`CUT_FILE` at most (then a count of the rest).
CUT_LINES = 1000
#: The trial directory's note of its sandbox's mount points (removed with them).
MOUNTS_FILE = "mounts.txt"
#: How the name of a sandbox's private directory under /tmp begins.
PRIVATE_PREFIX = "itbench-sandbox-"
_MS_BIND, _MNT_DETACH = 4096, 2
_MS_NOSUID, _MS_NODEV = 2, 4


@dataclass(frozen=True)
class Bound:
    """The workspace's bounds.

    Attributes:
        size: Bytes the tmpfs holds.
        files: Inodes the tmpfs holds.
        keep: Bytes of regular files copied back into the run directory at most.
    """

    size: int
    files: int
    keep: int


@dataclass
class Kept:
    """What the copy back kept and cut."""

    files: int = 0
    bytes: int = 0
    cut: list[tuple[str, int]] = field(default_factory=list)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def mount_fs(source: str, target: Path, fstype: str | None, flags: int, data: str | None) -> None:
    """mount(2): a file system of ``fstype`` (``None``: a bind of ``source``) on ``target``.

    Raises:
        OSError: the kernel refused (the message names the target and the reason).
    """
    libc = _libc()
    if (
        libc.mount(
            source.encode(),
            str(target).encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        )
        != 0
    ):
        err = ctypes.get_errno()
        raise OSError(err, f"cannot mount {fstype or source} on {target}: {os.strerror(err)}")


def unmount_fs(target: Path) -> None:
    """Detach the file system mounted on ``target`` (lazily: open files keep it until closed).

    Raises:
        OSError: nothing is mounted there, or the kernel refused.
    """
    if _libc().umount2(str(target).encode(), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot unmount {target}: {os.strerror(err)}")


def unmount_all(path: Path) -> None:
    """Unmount whatever is mounted on ``path`` (what a killed harness left over a workspace)."""
    for _ in range(8):
        if not os.path.ismount(path):
            return
        with contextlib.suppress(OSError):
            unmount_fs(path)


def note_mounts(trial_dir: Path, points: list[Path]) -> None:
    """Note the sandbox's mount points (innermost first) for :func:`unmount_noted`."""
    path = trial_dir / MOUNTS_FILE
    if points:
        path.write_text("".join(f"{p}\n" for p in points), encoding="utf-8")
    else:
        path.unlink(missing_ok=True)


def unmount_noted(trial_dir: Path) -> None:
    """Unmount and remove what a killed harness left of a sandbox's private directory."""
    note = trial_dir / MOUNTS_FILE
    try:
        points = [Path(p) for p in note.read_text(encoding="utf-8").splitlines()]
    except OSError:
        return
    # Only what a sandbox mounts: its private directory under /tmp and what lies in it.
    ours = [
        p
        for p in points
        if len(p.parts) >= 3
        and p.parts[:2] == ("/", "tmp")
        and p.parts[2].startswith(PRIVATE_PREFIX)
    ]
    for point in ours:
        unmount_all(point)
    for point in ours:
        if len(point.parts) == 3:
            shutil.rmtree(point, ignore_errors=True)
    note.unlink()


class BoundedWorkspace:
    """The tmpfs standing for one workspace during a turn.

    Args:
        workspace: The workspace's directory (resolved).
        stage: An empty directory where the tmpfs is mounted too (for the copy back).
        bound: Its bounds.
        uid: The agent's uid, which owns the tmpfs and everything copied into it.
    """

    def __init__(self, workspace: Path, stage: Path, bound: Bound, uid: int) -> None:
        self.workspace, self.stage, self.bound, self.uid = workspace, stage, bound, uid
        self.mounted: list[Path] = []

    def mount(self) -> None:
        """Mount the tmpfs, copy the workspace in and mount it over the workspace.

        Raises:
            OSError: a mount failed (whatever was mounted is unmounted).
        """
        options = f"size={self.bound.size},nr_inodes={self.bound.files},mode=0700"
        options += f",uid={self.uid},gid={self.uid}"
        try:
            mount_fs("itbench", self.stage, "tmpfs", _MS_NOSUID | _MS_NODEV, options)
            self.mounted.append(self.stage)
            shutil.copytree(self.workspace, self.stage, symlinks=True, dirs_exist_ok=True)
            for entry in self.stage.rglob("*"):
                os.chown(entry, self.uid, self.uid, follow_symlinks=False)
            mount_fs(str(self.stage), self.workspace, None, _MS_BIND, None)
            self.mounted.append(self.workspace)
        except OSError:
            self.unmount()
            raise

    def unmount(self) -> None:
        """Unmount whatever is mounted, without copying. Idempotent."""
        while self.mounted:
            path = self.mounted.pop()
            with contextlib.suppress(OSError):
                unmount_fs(path)

    def restore(self, trial_dir: Path | None) -> Kept:
        """Copy the workspace back into the run directory (within bounds), then unmount.

        Args:
            trial_dir: Where :data:`CUT_FILE` goes when something was cut.
        """
        if self.workspace not in self.mounted:
            return Kept()
        unmount_fs(self.workspace)
        self.mounted.remove(self.workspace)
        for entry in list(self.workspace.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        kept = copy_back(self.stage, self.workspace, self.bound.keep)
        self.unmount()
        if kept.cut and trial_dir is not None:
            lines = [f"{size}\t{path}" for path, size in kept.cut[:CUT_LINES]]
            if len(kept.cut) > CUT_LINES:
                lines.append(f"... and {len(kept.cut) - CUT_LINES} more")
            head = (
                f"# Not kept of the workspace (kept {kept.files} files, {kept.bytes} bytes; "
                f"at most {self.bound.keep} bytes and {KEEP_ENTRIES} entries): bytes, path\n"
            )
            (trial_dir / CUT_FILE).write_text(head + "\n".join(lines) + "\n", encoding="utf-8")
        return kept


def copy_back(source: Path, dest: Path, keep: int) -> Kept:
    """Copy the agent's tree ``source`` into ``dest``: smallest files first, within ``keep``.

    Links are copied as links, never followed; anything but files, directories and links (a
    pipe, a socket) is left out. Entries past :data:`KEEP_ENTRIES` and files past ``keep``
    bytes are cut (and listed in the result).
    """
    files: list[tuple[int, str]] = []
    others: list[str] = []
    for root, dirs, names in os.walk(source):
        dirs.sort()
        rel = os.path.relpath(root, source)
        for name in [*dirs, *names]:
            path = os.path.normpath(os.path.join(rel, name))
            info = os.lstat(os.path.join(root, name))
            if stat.S_ISREG(info.st_mode):
                files.append((info.st_size, path))
            elif stat.S_ISDIR(info.st_mode) or stat.S_ISLNK(info.st_mode):
                others.append(path)
    kept = Kept()
    entries = 0
    for path in sorted(others):  # parents before their children
        entries += 1
        if entries > KEEP_ENTRIES:
            kept.cut.append((path, 0))
            continue
        src, dst = source / path, dest / path
        if not dst.parent.is_dir() or dst.parent.is_symlink():
            kept.cut.append((path, 0))
        elif src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            dst.mkdir(mode=0o700)
            os.chmod(dst, src.stat().st_mode & 0o777)
    for size, path in sorted(files):
        entries += 1
        dst = dest / path
        if entries > KEEP_ENTRIES or kept.bytes + size > keep or not _plain_dir(dest, path):
            kept.cut.append((path, size))
            continue
        _copy_file(source / path, dst, size)
        kept.files += 1
        kept.bytes += size
    return kept


def _plain_dir(dest: Path, path: str) -> bool:
    """Whether every parent of ``path`` under ``dest`` is a directory that is not a link."""
    parent = dest
    for part in Path(path).parts[:-1]:
        parent = parent / part
        if parent.is_symlink() or not parent.is_dir():
            return False
    return True


def _copy_file(src: Path, dst: Path, size: int) -> None:
    """Copy at most ``size`` bytes of ``src`` (never a link) into the new file ``dst``."""
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fin:
        mode = os.fstat(fin.fileno()).st_mode & 0o777
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with os.fdopen(os.open(dst, flags, 0o600), "wb") as fout:
            left = size
            while left > 0 and (chunk := fin.read(min(left, 1 << 20))):
                fout.write(chunk)
                left -= len(chunk)
            os.fchmod(fout.fileno(), mode)
