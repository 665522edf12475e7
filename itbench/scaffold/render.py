"""Render a scaffold's templates into a new distribution directory."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from itbench.errors import UsageError

#: The kinds of scaffold, each a directory of templates.
KINDS = ("pack", "domain", "agent")
TEMPLATES = Path(__file__).parent / "templates"
SUFFIX = ".tmpl"

_NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
_MAX_NAME = 24
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
#: Names the core and its domains already use for a domain, an agent or a package.
RESERVED = frozenset(
    {"itbench", "sre", "ciso", "finops", "noop", "oracle", "baseline", "command", "probe"}
)


def names_for(name: str) -> dict[str, str]:
    """The values of a scaffold's placeholders for ``name``.

    Returns:
        ``name`` (the domain, the agent or the pack's id prefix), ``module`` (the import
        package), ``dist`` (the distribution) and ``key`` (the prefix of its option keys).
    """
    key = name.replace("-", "_")
    return {"name": name, "module": f"itbench_{key}", "dist": f"itbench-{name}", "key": key}


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name) or len(name) > _MAX_NAME:
        raise UsageError(
            f"invalid name {name!r}: use lowercase letters, digits and single hyphens, "
            f"starting with a letter, at most {_MAX_NAME} characters (for example 'kv-store')"
        )
    if name in RESERVED:
        raise UsageError(f"the name {name!r} is taken by itbench itself; choose another")
    module = names_for(name)["module"]
    if importlib.util.find_spec(module) is not None:
        raise UsageError(f"a package {module!r} is already installed; choose another name")


def create(kind: str, name: str, directory: Path) -> Path:
    """Write the scaffold ``kind`` for ``name`` as the new directory ``directory/name``.

    Args:
        kind: ``pack`` (scenarios for existing domains), ``domain`` (a new domain with a
            live environment) or ``agent`` (an in-process Python agent).
        name: The new domain's or agent's name, or the pack's scenario-id prefix.
        directory: Where the distribution's directory is created (it must exist).

    Returns:
        The created distribution's directory.

    Raises:
        UsageError: an unknown kind, an invalid or taken name, a missing ``directory`` or an
            existing ``directory/name``.
    """
    if kind not in KINDS:
        raise UsageError(f"unknown scaffold kind {kind!r}; choose one of {', '.join(KINDS)}")
    _check_name(name)
    if not directory.is_dir():
        raise UsageError(f"no directory {directory}")
    target = directory / name
    if target.exists():
        raise UsageError(f"{target} already exists; choose another name or directory")
    values = names_for(name)
    root = TEMPLATES / kind
    files = sorted(p for p in root.rglob(f"*{SUFFIX}") if p.is_file())
    rendered = {_destination(p.relative_to(root), values): _render(p, values) for p in files}
    target.mkdir()
    for rel, text in rendered.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return target


def _destination(rel: Path, values: dict[str, str]) -> Path:
    parts = [
        p.replace("__module__", values["module"]).replace("__name__", values["name"])
        for p in rel.parts
    ]
    return Path(*parts).with_name(parts[-1].removesuffix(SUFFIX))


def _render(template: Path, values: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"{template}: unknown placeholder {{{{{key}}}}}")
        return values[key]

    return _PLACEHOLDER.sub(value, template.read_text(encoding="utf-8"))
