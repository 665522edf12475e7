"""What a run records about the code and machine that produced it."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as md
import importlib.util
import os
import platform
import socket
import subprocess
from collections.abc import Iterable
from pathlib import Path

from itbench.models import HostInfo
from itbench.plugins import PluginHost

#: Files whose content can change how a trial is judged.
_CODE_SUFFIXES = (".py", ".yaml", ".yml", ".json", ".rego", ".j2", ".cfg", ".toml")


def package_versions(host: PluginHost) -> dict[str, str]:
    """Versions of Python, itbench and every plugin distribution."""
    out = {"python": platform.python_version()}
    for info in host.infos.values():
        if info.distribution and info.version:
            out[info.distribution] = info.version
    for name in ("pluggy", "pydantic"):
        with contextlib.suppress(md.PackageNotFoundError):
            out[name] = md.version(name)
    return out


def _package_dir(module: str) -> Path | None:
    top = module.split(".")[0]
    with contextlib.suppress(ImportError, ValueError):
        spec = importlib.util.find_spec(top)
        if spec is not None and spec.submodule_search_locations:
            return Path(next(iter(spec.submodule_search_locations)))
        if spec is not None and spec.origin:
            return Path(spec.origin)
    return None


def code_dirs(host: PluginHost) -> dict[str, Path]:
    """The top-level package (or module file) of itbench and of every plugin, by name."""
    out: dict[str, Path] = {}
    for name in ["itbench", *(i.module or "" for i in host.infos.values())]:
        top = name.split(".")[0]
        if top and top not in out and (path := _package_dir(top)) is not None:
            out[top] = path
    return out


def _counts(parts: tuple[str, ...]) -> bool:
    """Whether a file (its path's parts) is one :func:`tree_hash` covers."""
    return "__pycache__" not in parts and parts[-1].endswith(_CODE_SUFFIXES)


def _digest(files: Iterable[tuple[tuple[str, ...], bytes]]) -> str:
    digest = hashlib.sha256()
    for parts, content in sorted(files):
        digest.update("/".join(parts).encode() + b"\0")
        digest.update(content + b"\0")
    return digest.hexdigest()


def tree_hash(path: Path) -> str:
    """sha256 over the names and contents of a package's source and data files."""
    if path.is_file():
        return _digest([((path.name,), path.read_bytes())])
    files = (f for f in path.rglob("*") if f.is_file() and _counts(f.relative_to(path).parts))
    return _digest((f.relative_to(path).parts, f.read_bytes()) for f in files)


def revision_hashes(revision: str, dirs: dict[str, Path]) -> dict[str, str]:
    """:func:`tree_hash` of each package as committed at ``revision`` of this checkout.

    Returns:
        The hashes of the packages that lie inside this checkout, when it holds ``revision``
        (none without a checkout or the revision).
    """
    top = _git(["rev-parse", "--show-toplevel"], _checkout())
    if top is None or _git(["cat-file", "-e", f"{revision}^{{commit}}"], _checkout()) is None:
        return {}
    root = Path(top.strip()).resolve()
    out = {}
    for name, path in sorted(dirs.items()):
        if not path.resolve().is_relative_to(root):
            continue
        rel = path.resolve().relative_to(root)
        files = _committed_files(root, revision, rel)
        if files is None:
            continue
        if path.is_file():
            out[name] = _digest([((path.name,), content) for _, content in files])
        else:
            out[name] = _digest((p.relative_to(rel).parts, c) for p, c in files if _counts(p.parts))
    return out


def in_checkout(path: Path) -> bool:
    """Whether ``path`` lies inside the checkout itbench is installed from."""
    top = _git(["rev-parse", "--show-toplevel"], _checkout())
    return top is not None and path.resolve().is_relative_to(Path(top.strip()).resolve())


def _committed_files(root: Path, revision: str, rel: Path) -> list[tuple[Path, bytes]] | None:
    """Path and content of each file under ``rel`` at ``revision`` (one ``git cat-file``)."""
    listing = _git(["ls-tree", "-r", "-z", revision, "--", str(rel)], root)
    if listing is None:
        return None
    entries = []
    for item in listing.split("\0"):
        if not item:
            continue
        meta, name = item.split("\t", 1)
        mode, kind, oid = meta.split()
        if kind == "blob" and mode != "120000":
            entries.append((Path(name), oid))
    try:
        proc = subprocess.run(
            ["git", "cat-file", "--batch"],
            input="".join(f"{oid}\n" for _, oid in entries).encode(),
            capture_output=True,
            timeout=60,
            check=True,
            cwd=root,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    out, data, at = [], proc.stdout, 0
    for path, _ in entries:
        header_end = data.index(b"\n", at)
        size = int(data[at:header_end].split()[2])
        out.append((path, data[header_end + 1 : header_end + 1 + size]))
        at = header_end + 1 + size + 1
    return out


def code_hashes(dirs: dict[str, Path]) -> dict[str, str]:
    """:func:`tree_hash` of each package of :func:`code_dirs`."""
    return {name: tree_hash(path) for name, path in sorted(dirs.items())}


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        proc = subprocess.run(
            ["git", *args], capture_output=True, text=True, timeout=5, check=False, cwd=cwd
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _checkout() -> Path:
    return Path(__file__).resolve().parent


def git_revision() -> str | None:
    """The git revision of the checkout itbench is installed from, if any."""
    out = _git(["rev-parse", "HEAD"], _checkout())
    return out.strip() or None if out else None


def git_dirty() -> bool | None:
    """Whether that checkout has uncommitted changes to tracked files (``None``: no checkout)."""
    out = _git(["status", "--porcelain", "--untracked-files=no"], _checkout())
    return None if out is None else bool(out.strip())


def host_info() -> HostInfo:
    """Facts about this machine."""
    memory = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return HostInfo(
        hostname=socket.gethostname(),
        platform=platform.platform(),
        python=platform.python_version(),
        cpus=os.cpu_count() or 1,
        memory_bytes=memory,
    )
