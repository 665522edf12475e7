"""A fault's cause in the configuration: the keys it changed, and whether they still hold.

A restart empties a leak and restarts a crash loop's count, so a clean window after the agent's
turn does not prove the cause is gone. For a fault that a configuration change made, the
evaluator also checks that every key the fault changed no longer holds the fault's value
(turned back, rolled back, or set to another value that works: the clean window judges that).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class _Absent:
    """The value of a key that a fault removed."""

    def __repr__(self) -> str:
        return "absent"


ABSENT = _Absent()


@dataclass(frozen=True)
class Cause:
    """One key a fault set: the entity, the key's path and the value the fault gave it."""

    entity: str
    path: tuple[str, ...]
    value: Any

    def describe(self) -> str:
        """The cause as text (for the trial's evaluation details)."""
        return f"{self.entity}: {'.'.join(self.path)} is still {self.value!r}"


def _leaves(doc: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    if isinstance(doc, dict) and doc:
        out: dict[tuple[str, ...], Any] = {}
        for key, value in doc.items():
            out.update(_leaves(value, (*prefix, str(key))))
        return out
    return {prefix: doc}


def changed(entity: str, before: Any, after: Any) -> list[Cause]:
    """The keys of ``entity``'s configuration that ``after`` sets differently from ``before``."""
    old, new = _leaves(before), _leaves(after)
    return [
        Cause(entity, path, new.get(path, ABSENT))
        for path in sorted(set(old) | set(new))
        if new.get(path, ABSENT) != old.get(path, ABSENT)
    ]


def value_at(doc: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` of a configuration (:data:`ABSENT` when it has none)."""
    cur = doc
    for key in path:
        if not isinstance(cur, dict) or key not in cur:
            return ABSENT
        cur = cur[key]
    return cur


def left(read: Callable[[str], Any], causes: list[Cause]) -> list[str]:
    """The causes still in place, read from the live configuration (``read(entity)``).

    A configuration that cannot be read (``None``) shows no fix: each of its causes stays.
    """
    docs: dict[str, Any] = {}
    out = []
    for c in causes:
        if c.entity not in docs:
            docs[c.entity] = read(c.entity)
        if docs[c.entity] is None:
            out.append(f"{c.entity}: its configuration cannot be read")
        elif holds(value_at(docs[c.entity], c.path), c.value):
            out.append(c.describe())
    return out


def holds(live: Any, fault: Any) -> bool:
    """Whether a live value still does what the fault's value did.

    A switch the fault turned on or off stays so for any value of the same truth (the
    services read a flag by its truth: ``1`` or ``"on"`` keeps it on); other values compare
    equal. A key taken out no longer holds (the clean window judges its default).
    """
    if live is ABSENT or fault is ABSENT:
        return live is fault
    if isinstance(fault, bool):
        return bool(live) == fault
    return bool(live == fault)
