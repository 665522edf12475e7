"""When each resource of a trial was created, stopped, changed and began its spike.

One timeline serves the seeding (the creation, launch, snapshot and state-transition times the
account shows), the metric history (no datapoints before a resource existed or after it
stopped), the handbook's dates and the truth's start date: they cannot disagree. The billing
export follows the same days (:mod:`itbench_finops.billing` bills a resource created ``k``
days ago for the last ``k`` days of the period).

A resource without a creation age was created long before the billing period (a drawn number
of days), an instance stopped without a stop age stopped before the period began.
"""

from __future__ import annotations

import random
import re
import zlib
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from itbench_finops.spec import (
    Bucket,
    FinOpsSpec,
    Instance,
    NatGateway,
    Resource,
    Snapshot,
    Volume,
)

#: ``${date:NAME}`` (the day NAME's event started) and ``${date:+N}`` / ``${date:-N}`` (today
#: plus or minus N days) in documents.
DATE = re.compile(r"\$\{date:([^}]+)\}")


@dataclass(frozen=True)
class Events:
    """The times of one resource.

    Attributes:
        created: Creation or launch time.
        stopped: When an instance stopped (None: it runs).
        changed: When an instance's type last changed (None: never in the period).
        spike: When its usage spike began (None: no spike).
    """

    created: datetime
    stopped: datetime | None = None
    changed: datetime | None = None
    spike: datetime | None = None

    @property
    def started(self) -> datetime:
        """When the resource's most recent cost change began (its anomaly's start)."""
        return self.spike or self.changed or self.created


def _days_before(now: datetime, days: int, minute: int) -> datetime:
    """Midnight ``days`` days before ``now``'s day, plus ``minute`` minutes."""
    day = now.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=days)
    return day + timedelta(minutes=minute)


def created_days(r: Resource) -> int | None:
    """The resource's declared age in days, or None (created before the billing period)."""
    if isinstance(r, Volume | Snapshot):
        return r.created_days_ago
    return r.launched_days_ago


class Timeline:
    """The events of every resource of a spec, as of ``now``.

    Args:
        spec: The concrete scenario.
        now: The seeding time (the end of the billing period is its day).
        seed: The trial's seed (the ages of old resources).
    """

    def __init__(self, spec: FinOpsSpec, now: datetime, seed: int) -> None:
        self.spec = spec
        self.now = now
        self.events: dict[str, Events] = {}
        for r in spec.resources:
            rng = random.Random(seed ^ zlib.crc32(r.name.encode()))
            self.events[r.name] = self._events(r, rng)

    def _events(self, r: Resource, rng: random.Random) -> Events:
        days = created_days(r)
        period = self.spec.billing_days
        if days is None:
            days = period + rng.randint(20, 400)
        created = _days_before(self.now, days, rng.randint(1, 50))
        stopped = changed = spike = None
        if isinstance(r, Instance):
            if r.state == "stopped":
                ago = r.stopped_days_ago
                if ago is None:
                    ago = min(days - 1, period + rng.randint(3, 60))
                stopped = _days_before(self.now, max(ago, 0), rng.randint(60, 20 * 60))
                if ago == 0:
                    stopped = min(stopped, self.now - timedelta(minutes=30))
            if r.changed_days_ago is not None and r.previous_type:
                changed = _days_before(self.now, r.changed_days_ago, rng.randint(1, 50))
        if isinstance(r, Bucket | NatGateway | Instance) and r.spike_days:
            spike = _days_before(self.now, r.spike_days, 0)
        return Events(created, stopped, changed, spike)

    def spike_extra(self, r: Bucket | NatGateway | Instance, t: datetime) -> float:
        """The spike's extra usage per day at time ``t`` (its ramp on the first days), or 0."""
        spike = self.of(r.name).spike
        if spike is None or t < spike:
            return 0.0
        j = (t.date() - spike.date()).days
        return r.spike_ramp[j] if j < len(r.spike_ramp) else r.spike_gb_day

    def of(self, name: str) -> Events:
        """The events of the resource ``name``."""
        return self.events[name]

    def render(self, text: str) -> str:
        """``text`` with its ``${date:...}`` placeholders written as ISO dates."""

        def one(m: re.Match[str]) -> str:
            ref = m.group(1)
            if ref[:1] in "+-" and ref[1:].isdigit():
                return (self.now.date() + timedelta(days=int(ref))).isoformat()
            events = self.events.get(ref)
            return events.started.date().isoformat() if events else m.group(0)

        return DATE.sub(one, text)

    def start_date(self, name: str) -> date:
        """The day the cost change of ``name`` began."""
        return self.of(name).started.date()


def start_date(spec: FinOpsSpec, period_end: date, name: str) -> date:
    """The day the cost change of ``name`` began, for a billing period ending ``period_end``."""
    now = datetime(period_end.year, period_end.month, period_end.day, 12, tzinfo=UTC)
    return Timeline(spec, now, 0).start_date(name)
