"""What the scorer reads about one trial, and what it finds about each waste item."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from itbench_finops.prices import PriceTable
from itbench_finops.seed import Seeded
from itbench_finops.spec import FinOpsSpec, FinOpsSubmission
from itbench_finops.state import Item


@dataclass(frozen=True)
class Outcome:
    """One waste item: whether it is fixed, why not, and what fixing it saves a month."""

    name: str
    fixed: bool
    why: str
    saving: float


@dataclass
class Trial:
    """Everything the scorer reads about one trial."""

    spec: FinOpsSpec
    prices: PriceTable
    ids: dict[str, str]
    initial: dict[str, Item]
    final: dict[str, Item]
    rows: list[dict[str, Any]]
    period_start: datetime
    submission: FinOpsSubmission | None
    seeded: Seeded = field(default_factory=Seeded)
    items: list[Outcome] = field(default_factory=list)
    harms: list[str] = field(default_factory=list)
    unsafe: list[str] = field(default_factory=list)
    proximity: dict[str, dict[str, Any]] = field(default_factory=dict)
    _problems: dict[str, str] | None = field(default=None, repr=False)

    @property
    def names(self) -> dict[str, str]:
        """Resource id -> the scenario's name of it."""
        return {rid: name for name, rid in self.ids.items()}

    @property
    def period_end(self) -> date:
        """The day after the billing period (the day of seeding)."""
        return (self.period_start + timedelta(days=self.spec.billing_days)).date()
