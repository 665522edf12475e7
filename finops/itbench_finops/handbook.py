"""The engineering handbook: shipped pages every scenario may seed, and how pages are written.

A scenario's ``documents`` become objects of the handbook bucket. Pages shared by many
scenarios (a family's conventions) ship with the package under ``data/handbook/`` and are
named by ``page``; their ``${setting}`` placeholders take the scenario's drawn settings.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any

#: ``${id:NAME}`` and ``${ip:NAME}``: a seeded resource's id and public IP.
SEEDED = re.compile(r"\$\{(id|ip):([^}]+)\}")


@functools.cache
def pages() -> dict[str, str]:
    """The shipped pages by name (the file name without ``.md``)."""
    root = resources.files("itbench_finops").joinpath("data/handbook")
    return {
        p.name[:-3]: p.read_text(encoding="utf-8") for p in root.iterdir() if p.name.endswith(".md")
    }


def shipped_page(name: str) -> str:
    """The text of the shipped page ``name``.

    Raises:
        ValueError: there is no such page (the valid names are listed).
    """
    found = pages().get(name)
    if found is None:
        raise ValueError(f"no shipped page {name!r} (pages: {', '.join(sorted(pages()))})")
    return found


def with_pages(data: dict[str, Any]) -> dict[str, Any]:
    """A scenario document whose ``documents`` hold the text of the shipped pages they name.

    Unknown pages are left for the document's own validation to report.
    """
    docs = data.get("documents")
    if not isinstance(docs, list):
        return data
    out = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get("page") and not doc.get("text"):
            text = pages().get(str(doc["page"]))
            if text is not None:
                doc = {**doc, "text": text}
        out.append(doc)
    return {**data, "documents": out}


def render_seeded(text: str, ids: dict[str, str], ips: dict[str, str]) -> str:
    """``text`` with ``${id:NAME}`` and ``${ip:NAME}`` written out (unknown ones stay)."""

    def one(m: re.Match[str]) -> str:
        table = ids if m.group(1) == "id" else ips
        return table.get(m.group(2), m.group(0))

    return SEEDED.sub(one, text)
