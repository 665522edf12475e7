"""The limits an instance's launcher reads from its configuration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from itbench_sre.app.limited import (
    DEFAULT_CORES,
    DEFAULT_MB,
    DEFAULT_THREADS,
    MAX_CORES,
    MAX_MB,
    MAX_THREADS,
    PERIOD_US,
    limits,
)
from itbench_sre.tools import _bytes


@pytest.mark.parametrize(
    ("config", "memory_mb", "cores", "threads"),
    [
        ({"memory_limit_mb": 10, "cpu_limit": 0.5, "max_threads": 64}, 10, 0.5, 64),
        ({}, DEFAULT_MB, DEFAULT_CORES, DEFAULT_THREADS),
        # What a service would refuse to start with takes the default here.
        (
            {"memory_limit_mb": "lots", "cpu_limit": True, "max_threads": None},
            DEFAULT_MB,
            DEFAULT_CORES,
            DEFAULT_THREADS,
        ),
        ({"memory_limit_mb": -5, "cpu_limit": 0}, DEFAULT_MB, DEFAULT_CORES, DEFAULT_THREADS),
        ([1, 2], DEFAULT_MB, DEFAULT_CORES, DEFAULT_THREADS),
        # More than the kernel would take is capped, not an error that stops the start.
        (
            {"memory_limit_mb": 1e12, "cpu_limit": 1e9, "max_threads": 1e9},
            MAX_MB,
            MAX_CORES,
            MAX_THREADS,
        ),
        # The kernel's smallest quota is a millisecond per period.
        ({"cpu_limit": 1e-6}, DEFAULT_MB, 1000 / PERIOD_US, DEFAULT_THREADS),
        ({"max_threads": 0.5}, DEFAULT_MB, DEFAULT_CORES, 1),
    ],
)
def test_a_configuration_gives_its_limits_or_the_defaults(
    tmp_path: Path, config: Any, memory_mb: float, cores: float, threads: int
) -> None:
    path = tmp_path / "service.json"
    path.write_text(json.dumps(config))
    assert limits(path) == (int(memory_mb * 2**20), int(cores * PERIOD_US), threads)


def test_an_unreadable_configuration_gives_the_defaults(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    default = (DEFAULT_MB * 2**20, int(DEFAULT_CORES * PERIOD_US), DEFAULT_THREADS)
    assert limits(tmp_path / "bad.json") == default
    assert limits(tmp_path / "missing.json") == default


@pytest.mark.parametrize(
    ("size", "expected"),
    [("64mb", 64 * 2**20), ("1GB", 2**30), ("65536", 65536), ("2k", 2000), ("0", 0)],
)
def test_a_redis_size_is_read_with_redis_units(size: str, expected: int) -> None:
    assert _bytes(size) == expected


@pytest.mark.parametrize("size", ["", "lots", "-1", "1tb", "1.5gb"])
def test_a_redis_size_redis_would_not_read_is_none(size: str) -> None:
    assert _bytes(size) is None
