"""Built-in catalog: the repository's ``scenarios/`` directory, when present."""

from __future__ import annotations

from pathlib import Path

from itbench.markers import hookimpl

#: ``scenarios/`` beside the ``itbench`` package in a source checkout (editable install).
REPO_CATALOG = Path(__file__).resolve().parents[2] / "scenarios"


@hookimpl
def itbench_register_catalog_paths() -> list[Path]:
    """Register the repository's scenario catalog."""
    return [REPO_CATALOG] if REPO_CATALOG.is_dir() else []
