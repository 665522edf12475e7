"""What every check of the library is: a requirement with its reference policy, and a variant."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, ClassVar

#: Rego header of every reference policy (Rego v1).
HEADER = "import rego.v1\n"


@dataclass(frozen=True)
class Check:
    """One requirement of the library.

    Attributes:
        id: Stable id (the scenario's ``check`` field).
        title: One line.
        rego: Body of the reference policy (rules after the package line and imports); it
            defines ``violations``.
        requirement: The requirement text handed to the agent.
    """

    family: ClassVar[str] = ""
    id: str
    title: str
    rego: str
    requirement: str = ""

    def policy(self, package: str = "compliance") -> str:
        """The full reference policy in ``package``."""
        return f"package {package}\n\n{HEADER}\n{self.rego.strip()}\n"


@dataclass
class Variant:
    """One system (cluster snapshot, host or account) the agent's artifacts are judged on.

    Attributes:
        name: Variant name inside the trial (``v1``, ``visible``...).
        data: Family-specific content (pods, a host tree, an account plan).
        violating: Ground truth: ids of violating resources (a host or account uses its
            variant name as the one id).
        units: Every resource id that is judged (violating or not).
        notes: What the variant exercises (for the trial's artifacts).
    """

    name: str
    data: Any
    violating: set[str]
    units: list[str]
    notes: list[str] = field(default_factory=list)

    @property
    def compliant(self) -> bool:
        """Whether nothing in the variant violates the requirement."""
        return not self.violating


def rotated(rng: random.Random, items: list[Any]) -> list[Any]:
    """``items`` from a random start: each trial's hidden variants lead with other mutations."""
    k = rng.randrange(len(items)) if items else 0
    return items[k:] + items[:k]
