"""Registers this package's scenario directory with itbench."""

from __future__ import annotations

from pathlib import Path

from itbench import hookimpl


@hookimpl
def itbench_register_catalog_paths() -> list[Path]:
    """The scenarios shipped in this package."""
    return [Path(__file__).parent / "scenarios"]
