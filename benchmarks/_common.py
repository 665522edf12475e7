"""Shared helpers of the benchmark scripts: repeated timing and the toy test plugin."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "tests" / "plugins" / "itbench-toy"


def use_toy_plugin() -> None:
    """Make the toy domain importable (it is a test fixture, not installed)."""
    if str(TOY) not in sys.path:
        sys.path.insert(0, str(TOY))


def median_time(fn: Callable[[], object], repeat: int = 7) -> tuple[float, list[float]]:
    """Median wall time of ``fn`` over ``repeat`` runs, and every sample."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), samples
