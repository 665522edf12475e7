"""itbench plugin module of the FinOps domain (kept cheap to import)."""

from __future__ import annotations

from itbench import Domain, hookimpl


@hookimpl
def itbench_register_domains() -> list[Domain]:
    """Register the FinOps domain."""
    from itbench_finops.domain import FinOpsDomain

    return [FinOpsDomain()]
