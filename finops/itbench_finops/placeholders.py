"""``${name}`` placeholders of scenario documents and their substitution (no model imports).

A scenario's ``settings`` map placeholder names to alternatives; :func:`settle` writes one
choice of them into a scenario document (a dict), which the spec then validates.
"""

from __future__ import annotations

import re
from typing import Any

from itbench_finops.conventions import expand_rules

SETTINGS_PROBLEM = "settings must map each placeholder name to a non-empty list of alternatives"
#: A setting's placeholder: ``${name}``, or ``${name.key}`` for a key of a mapping value.
PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)\}")
#: Fields of a scenario document the settings never touch (the task and the catalog's view).
_FIXED = frozenset({"id", "domain", "title", "description", "goal", "tags", "params", "settings"})


_MISSING = object()


def _lookup(values: dict[str, Any], ref: str) -> Any:
    name, _, key = ref.partition(".")
    value = values.get(name, _MISSING)
    if key:
        return value.get(key, _MISSING) if isinstance(value, dict) else _MISSING
    return value


def _substitute(node: Any, values: dict[str, Any]) -> Any:
    if isinstance(node, str):
        node = expand_rules(node, values)
        whole = PLACEHOLDER.fullmatch(node)
        if whole and _lookup(values, whole.group(1)) is not _MISSING:
            return _lookup(values, whole.group(1))

        def one(m: re.Match[str]) -> str:
            value = _lookup(values, m.group(1))
            return m.group(0) if value is _MISSING else str(value)

        return PLACEHOLDER.sub(one, node)
    if isinstance(node, list):
        return [_substitute(v, values) for v in node]
    if isinstance(node, dict):
        return {_substitute(k, values): _substitute(v, values) for k, v in node.items()}
    return node


def settle(data: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The scenario document with each ``${name}`` of ``values`` substituted, without settings.

    Each ``${rule:NAME}`` first becomes the phrasing ``values['say_NAME']`` of the rule (see
    :mod:`itbench_finops.conventions`), whose placeholders are then substituted too. A string
    that is exactly one placeholder takes the value with its type.
    """
    return {
        k: (v if k in _FIXED else _substitute(v, values))
        for k, v in data.items()
        if k != "settings"
    }


def unknown_placeholders(data: dict[str, Any], settings: set[str]) -> list[str]:
    """``${name}`` placeholders left in a scenario document's strings that no setting defines."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, str):
            found.update(PLACEHOLDER.findall(node))
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, dict):
            for v in node.values():
                walk(v)

    for key in ("resources", "candidates", "documents", "truth"):
        walk(data.get(key))
    return sorted(f for f in found if f.partition(".")[0] not in settings)
