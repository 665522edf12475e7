"""Scaffolds for contributors: ``itbench new pack|domain|agent NAME``.

:func:`create` writes an installable distribution (``pyproject.toml``, a README with the next
steps, an example and its own tests) from the templates shipped in ``templates/``.
"""

from __future__ import annotations

from itbench.scaffold.render import KINDS, create

__all__ = ["KINDS", "create"]
