"""itbench plugin module of the FinOps domain (kept cheap to import)."""

from __future__ import annotations

from typing import Any

from itbench import Domain, hookimpl


@hookimpl
def itbench_register_domains() -> list[Domain[Any, Any, Any]]:
    """Register the FinOps domain."""
    from itbench_finops.domain import FinOpsDomain

    return [FinOpsDomain()]
