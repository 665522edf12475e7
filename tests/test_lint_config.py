"""Lint suppressions name only rules that are enabled: any other ``noqa`` hides nothing."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Source trees of the repository (build copies and virtual environments aside).
TREES = ("itbench", "sre", "ciso", "finops", "plugins", "tests", "benchmarks", "scripts")
NOQA = re.compile(r"#\s*noqa:\s*([A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)")


def test_every_noqa_names_an_enabled_rule() -> None:
    lint = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    families = set(lint["select"])
    found: list[str] = []
    for tree in TREES:
        for path in (REPO / tree).rglob("*.py"):
            if {"build", ".venv"} & set(path.parts):
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for group in NOQA.findall(line):
                    for code in (c.strip() for c in group.split(",")):
                        family = re.match(r"[A-Z]+", code)
                        assert family is not None
                        if family.group(0) not in families:
                            found.append(f"{path.relative_to(REPO)}:{n}: {code}")
    assert not found, "noqa for rules that are not enabled:\n" + "\n".join(found)
