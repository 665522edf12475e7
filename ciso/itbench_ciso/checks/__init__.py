"""The check library: hidden-variant generators with known verdicts, and reference artifacts.

Per requirement: variants of systems with their ground truth, and the reference evidence
collection and policy. Read only by the evaluator and the oracle. :mod:`.base` defines a check
and a variant; :mod:`.k8s`, :mod:`.linux` and :mod:`.cloud` hold the checks of each family.
"""

from __future__ import annotations

from functools import cache

from itbench_ciso.checks import cloud, k8s, linux
from itbench_ciso.checks.base import Check

#: Families of the library, in the order of the reference.
FAMILIES = ("kubernetes", "linux", "cloud")


@cache
def all_checks() -> dict[str, Check]:
    """Every check of the library, by id."""
    out: dict[str, Check] = {}
    for checks in (k8s.LIBRARY, linux.CHECKS, cloud.CHECKS):
        for check in checks:
            if check.id in out:
                raise ValueError(f"duplicate check id {check.id}")
            out[check.id] = check
    return out


def ids_of(family: str) -> list[str]:
    """Ids of the checks of a library family (``kubernetes``, ``linux``, ``cloud``)."""
    return [cid for cid, check in all_checks().items() if check.family == family]
