"""The organization's conventions: drawn values and the wordings of handbook rules.

Two kinds of entries of ``data/conventions.yaml`` make the handbook a different text on every
trial while the judge reads the same draw:

- ``values``: organization-wide conventions (tag keys, the winner when two rules conflict, a
  commitment's term) with their alternatives. A scenario that uses ``${name}`` of one of them
  without declaring it as a setting gets it as a setting, drawn like its own.
- ``wordings``: every rule a shipped page states as ``${rule:NAME}``, in several phrasings.
  Which phrasing a trial serves is the setting ``say_NAME`` (the phrasing's index); the
  phrasing's own ``${setting}`` placeholders then take the drawn values.

No model imports: the placeholders module and the spec use it while validating.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any

import yaml

#: ``${rule:NAME}``: the drawn wording of the handbook rule NAME.
RULE = re.compile(r"\$\{rule:([A-Za-z0-9_]+)\}")
#: A plain ``${name}`` or ``${name.key}`` placeholder (the name only).
_NAME = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:\.[A-Za-z_][A-Za-z0-9_]*)?\}")
#: The prefix of the setting that picks a rule's wording.
SAY = "say_"
_FILE = "data/conventions.yaml"


@functools.cache
def table() -> dict[str, dict[str, list[Any]]]:
    """``{"values": {name: alternatives}, "wordings": {rule: phrasings}}``.

    Raises:
        ValueError: the file is malformed (named with the entry and the reason).
    """
    raw = yaml.safe_load(resources.files("itbench_finops").joinpath(_FILE).read_text())
    out: dict[str, dict[str, list[Any]]] = {"values": {}, "wordings": {}}
    for section, least in (("values", 2), ("wordings", 3)):
        entries = (raw or {}).get(section)
        if not isinstance(entries, dict):
            raise ValueError(f"{_FILE}: {section}: must map names to lists")
        for name, options in entries.items():
            if not isinstance(options, list) or len(options) < least:
                raise ValueError(f"{_FILE}: {section}.{name}: needs at least {least} alternatives")
            if section == "wordings" and not all(isinstance(o, str) and o for o in options):
                raise ValueError(f"{_FILE}: wordings.{name}: every phrasing must be a text")
            out[section][str(name)] = options
    return out


def wording(rule: str, index: int) -> str:
    """Phrasing ``index`` of ``rule``.

    Raises:
        ValueError: no such rule or phrasing (the valid ones are named).
    """
    phrasings = table()["wordings"].get(rule)
    if phrasings is None:
        raise ValueError(
            f"no handbook rule {rule!r} in {_FILE} (rules: {', '.join(table()['wordings'])})"
        )
    if not 0 <= index < len(phrasings):
        raise ValueError(f"rule {rule!r} has {len(phrasings)} phrasings, not one numbered {index}")
    return str(phrasings[index])


def expand_rules(text: str, values: dict[str, Any]) -> str:
    """``text`` with each ``${rule:NAME}`` replaced by the phrasing ``values['say_NAME']``.

    A rule without a drawn phrasing takes its first.
    """

    def one(m: re.Match[str]) -> str:
        return wording(m.group(1), int(values.get(SAY + m.group(1), 0)))

    return RULE.sub(one, text)


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in (*_strings(k), *_strings(v))]
    return []


def implied_settings(data: dict[str, Any]) -> dict[str, list[Any]]:
    """The settings a scenario document uses without declaring them.

    Each ``${rule:NAME}`` adds ``say_NAME`` (the indices of its phrasings); each ``${name}``
    of an organization-wide convention, in the document or in a phrasing it uses, adds the
    convention's alternatives. A setting the scenario declares keeps the scenario's own.
    """
    declared = data.get("settings") if isinstance(data.get("settings"), dict) else {}
    texts = [
        s
        for key in ("resources", "candidates", "documents", "truth")
        for s in _strings(data.get(key))
    ]
    rules = sorted({r for t in texts for r in RULE.findall(t)})
    out: dict[str, list[Any]] = {}
    for rule in rules:
        phrasings = table()["wordings"].get(rule)
        if phrasings is None:
            continue  # the spec's check of placeholders names it
        texts += [str(p) for p in phrasings]
        out[SAY + rule] = list(range(len(phrasings)))
    values = table()["values"]
    for name in sorted({n for t in texts for n in _NAME.findall(t)}):
        if name in values:
            out[name] = list(values[name])
    return {k: v for k, v in out.items() if k not in (declared or {})}


def rule_problems(data: dict[str, Any]) -> list[str]:
    """``${rule:NAME}`` placeholders of a scenario document whose rule has no wordings.

    Each problem names the field (``documents.N`` with the page's key) and the rule.
    """
    known = set(table()["wordings"])
    out = []
    for i, doc in enumerate(data.get("documents") or []):
        text = doc.get("text") if isinstance(doc, dict) else None
        key = doc.get("key") if isinstance(doc, dict) else None
        for rule in sorted(set(RULE.findall(text if isinstance(text, str) else "")) - known):
            out.append(
                f"documents.{i} ({key}): ${{rule:{rule}}} has no wordings in {_FILE} "
                f"(rules: {', '.join(sorted(known))})"
            )
    return out
