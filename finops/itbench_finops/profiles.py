"""Hourly usage histories with a daily and weekly shape and noise, deterministic per seed."""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta

from itbench_finops.spec import Profile


def hour_floor(t: datetime) -> datetime:
    """``t`` truncated to the hour."""
    return t.replace(minute=0, second=0, microsecond=0)


def business_hour(t: datetime) -> bool:
    """Whether ``t`` falls in weekday business hours (08:00-20:00 UTC)."""
    return t.weekday() < 5 and 8 <= t.hour < 20


def series(
    profile: Profile,
    end: datetime,
    days: int,
    seed: int,
    *,
    business_only: bool = False,
    first: datetime | None = None,
    last: datetime | None = None,
) -> list[tuple[datetime, float]]:
    """Hourly ``(timestamp, value)`` points of the ``days`` days before ``end``.

    The points have exactly ``profile.mean`` as mean and ``profile.peak`` as maximum; the most
    recent ``profile.quiet_days`` days have no points, nor has any hour before ``first`` (the
    resource did not exist) or from ``last`` on (it stopped).

    Args:
        profile: Mean, peak and quiet days.
        end: The hour after the last point.
        days: Length of the history.
        seed: Seed of the noise.
        business_only: Only weekday business hours carry points.
        first: The resource's creation (no point before its next hour).
        last: When the resource stopped (no point from its hour on).
    """
    rng = random.Random(seed)
    start = hour_floor(end) - timedelta(days=days)
    if first is not None:
        start = max(start, hour_floor(first) + timedelta(hours=1))
    stop = hour_floor(end) - timedelta(days=profile.quiet_days)
    if last is not None:
        stop = min(stop, hour_floor(last))
    stamps: list[datetime] = []
    raw: list[float] = []
    t = start
    while t < stop:
        if not business_only or business_hour(t):
            daily = math.sin(2 * math.pi * (t.hour - 9) / 24)
            weekly = 0.7 if t.weekday() >= 5 else 1.0
            raw.append(weekly * (1.0 + 0.6 * daily) + rng.gauss(0, 0.08))
            stamps.append(t)
        t += timedelta(hours=1)
    if not raw:
        return []
    raw_mean = sum(raw) / len(raw)
    raw_max = max(raw)
    spread = raw_max - raw_mean
    k = (profile.peak - profile.mean) / spread if spread > 0 else 0.0
    values = [max(0.0, profile.mean + (r - raw_mean) * k) for r in raw]
    # Clamping at zero can shift the mean slightly; the peak stays exact.
    return list(zip(stamps, values, strict=True))
