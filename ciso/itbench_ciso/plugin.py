"""itbench plugin module of the CISO domain (kept cheap to import)."""

from __future__ import annotations

from typing import Any

from itbench import Domain, OptionSpec, hookimpl


@hookimpl
def itbench_register_domains() -> list[Domain[Any, Any, Any]]:
    """Register the CISO domain."""
    from itbench_ciso.domain import CisoDomain

    return [CisoDomain()]


@hookimpl
def itbench_register_options() -> list[OptionSpec]:
    """Register ``--policy-engine regorus|regopy|opa``."""
    from itbench_ciso.engine import ENGINES

    return [
        OptionSpec(
            "policy-engine",
            "policy_engine",
            "Rego engine: regorus (default) or regopy, each in a worker process, or opa (an OPA "
            "server).",
            ENGINES,
        )
    ]
