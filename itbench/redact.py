"""Hiding harness paths in what an agent is shown: tool results, tool errors, messages.

Domain tools must never name a harness path, but a tool's failure message may quote one
(``FileNotFoundError: /srv/runs/crash-loop/trials/...``), and a run directory is named by the
user, so its path can name the scenario. Every channel that hands tool output to an agent (the
HTTP tool server, the MCP server, the model loop) passes it through a :class:`Redactor` first,
as a second line of defence.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: What a hidden path is replaced with.
HIDDEN = "<hidden>"
#: Paths shorter than this are not worth hiding (and ``/`` or ``/tmp`` would hide everything).
_MIN_LENGTH = 8


class Redactor:
    """Replaces every occurrence of some paths (as given and resolved) with :data:`HIDDEN`.

    Args:
        paths: The paths an agent must not see (run directory, trial directory, catalogs, code).
    """

    def __init__(self, paths: Iterable[Path | str]) -> None:
        forms: set[str] = set()
        for path in paths:
            for form in (str(path), os.path.realpath(path)):
                form = form.rstrip("/")
                if len(form) >= _MIN_LENGTH:
                    forms.add(form)
                    # As it appears inside a JSON string (quotes, backslashes, control chars).
                    forms.add(json.dumps(form, ensure_ascii=False)[1:-1])
        ordered = sorted(forms, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def text(self, value: str) -> str:
        """``value`` with every hidden path replaced."""
        if self._pattern is None:
            return value
        return self._pattern.sub(HIDDEN, value)

    def data(self, value: Any) -> Any:
        """JSON-able ``value`` with every hidden path in its strings replaced."""
        if self._pattern is None:
            return value
        text = json.dumps(value, ensure_ascii=False, default=str)
        if self._pattern.search(text) is None:
            return value
        return json.loads(self._pattern.sub(HIDDEN, text))

    def bytes(self, value: bytes) -> bytes:
        """A UTF-8 JSON document with every hidden path replaced."""
        if self._pattern is None:
            return value
        text = value.decode("utf-8", "surrogateescape")
        return self._pattern.sub(HIDDEN, text).encode("utf-8", "surrogateescape")


#: A redactor that hides nothing.
NOTHING = Redactor(())
