"""The fault library: parametrized mechanisms with inject, recover, ground truth and a fix.

Every mechanism turns (target, params) into a :class:`ChangeSet` that the apply playbook plays
on the deployment; recovery is another change set. Ground truth (root-cause entity, fault type,
propagation chain, expected alerts) is derived here, so scenario files only name a mechanism,
a target and parameters. Nothing here is visible to the agent.

One module per fault family (services, network, datastores, capacity, queues); the
registry and the types are in :mod:`base`.
"""

from __future__ import annotations

from itbench_sre.faults import capacity, datastores, network, queues, services
from itbench_sre.faults.base import (
    DEAD_PORT_OFFSET,
    FAULT_TYPES,
    MECHANISMS,
    RATE,
    TYPE_NAMES,
    UPSTREAM_FORMS,
    Check,
    Fix,
    Injector,
    Mechanism,
    Param,
    errors_of,
    get,
    propagation,
    unscraped,
    upstream_errors,
    upstream_slow,
)

__all__ = [
    "Check",
    "DEAD_PORT_OFFSET",
    "FAULT_TYPES",
    "Fix",
    "Injector",
    "MECHANISMS",
    "Mechanism",
    "Param",
    "RATE",
    "TYPE_NAMES",
    "UPSTREAM_FORMS",
    "errors_of",
    "get",
    "propagation",
    "unscraped",
    "upstream_errors",
    "upstream_slow",
]

#: The family modules, imported for their registrations.
FAMILIES = (services, network, datastores, capacity, queues)
