"""itbench plugin module of the CISO domain (kept cheap to import)."""

from __future__ import annotations

from typing import Any

from itbench import Domain, OptionSpec, check_number, hookimpl


@hookimpl
def itbench_register_domains() -> list[Domain[Any, Any, Any]]:
    """Register the CISO domain."""
    from itbench_ciso.domain import CisoDomain

    return [CisoDomain()]


@hookimpl
def itbench_register_options() -> list[OptionSpec]:
    """Register ``--policy-engine regorus|regopy|opa`` and the domain's time limits."""
    from itbench_ciso.engine import ENGINES

    return [
        OptionSpec(
            "policy-engine",
            "policy_engine",
            "Rego engine: regorus (default) or regopy, each in a worker process, or opa (an OPA "
            "server).",
            ENGINES,
        ),
        *(
            OptionSpec(key, key, help_, check=check_number(1, 3600), flag=False)
            for key, help_ in (
                ("policy_timeout", "Seconds one policy evaluation may take (default 30)."),
                ("playbook_timeout", "Seconds a Linux evidence playbook may run (default 60)."),
                ("collector_timeout", "Seconds a cloud evidence collector may run (default 60)."),
            )
        ),
    ]
