"""itbench plugin module of the CISO domain (kept cheap to import)."""

from __future__ import annotations

from itbench import hookimpl
from itbench.domain import Domain


@hookimpl
def itbench_register_domains() -> list[Domain]:
    """Register the CISO domain."""
    from itbench_ciso.domain import CisoDomain

    return [CisoDomain()]
