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


def tree_hash(path: Path) -> str:
    """sha256 over the names and contents of a package's source and data files."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(path.rglob("*"))
    for f in files:
        if "__pycache__" in f.parts or not f.is_file() or not f.name.endswith(_CODE_SUFFIXES):
            continue
        digest.update(str(f.relative_to(path) if f != path else f.name).encode() + b"\0")
        digest.update(f.read_bytes() + b"\0")
    return digest.hexdigest()


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
