"""Markdown of the scenario families and the check library, for the generated reference."""

from __future__ import annotations

import re

from itbench_ciso.checks import FAMILIES, all_checks
from itbench_ciso.checks.base import Check
from itbench_ciso.contracts import CONTRACTS

#: Where a requirement's first sentence ends (its remaining sentences spell out file syntax).
_SENTENCE_END = re.compile(r"(?<=\.)\s+")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def requires(check: Check) -> str:
    """One line of what ``check`` requires: its requirement's first sentence (or its title)."""
    text = check.requirement.strip()
    return _SENTENCE_END.split(text, maxsplit=1)[0] if text else check.title


def families_section() -> str:
    """Each scenario family: where its checks come from, what it submits, its contract."""
    lines = [
        "The spec's `family` decides which checks `check` may name, what the agent submits "
        "and the contract its task context states.",
        "",
        "| family | checks from | submission |",
        "|---|---|---|",
    ]
    lines += [f"| `{c.name}` | {c.checks} | {c.submission_text()} |" for c in CONTRACTS.values()]
    for c in CONTRACTS.values():
        lines += ["", f"### `{c.name}`", "", f"Contract: {_cell(c.contract)}"]
    return "\n".join(lines)


def checks_section() -> str:
    """Every check id of the library by family: what it requires and what scenarios submit."""
    lines = ["The valid values of `check` (and of `policy_set` and `changed`), by family."]
    for family in FAMILIES:
        users = [c for c in CONTRACTS.values() if c.checks == family]
        submits = "; ".join(f"`{c.name}` submits {c.submission_text()}" for c in users)
        lines += [
            "",
            f"### {family}",
            "",
            f"Scenario families: {submits}.",
            "",
            "| check | family | requires |",
            "|---|---|---|",
        ]
        lines += [
            f"| `{check.id}` | {family} | {_cell(requires(check))} |"
            for check in all_checks().values()
            if check.family == family
        ]
    return "\n".join(lines)


def library_sections() -> dict[str, str]:
    """The CISO sections of the reference: heading -> Markdown."""
    return {"Scenario families": families_section(), "Check library": checks_section()}
