"""The AWS endpoint of one FinOps environment: the core's moto server running our endpoint."""

from __future__ import annotations

from pathlib import Path

from itbench.moto import ACCESS_KEY, REGION, SECRET_KEY
from itbench.moto import DEFAULT_ACCOUNT as MANAGEMENT_ACCOUNT
from itbench.moto import MotoServer as _MotoServer

__all__ = ["ACCESS_KEY", "MANAGEMENT_ACCOUNT", "REGION", "SECRET_KEY", "MotoServer"]


class MotoServer(_MotoServer):
    """moto plus the Budgets operations of :mod:`itbench_finops.endpoint`.

    Args:
        port: TCP port on 127.0.0.1 (from the trial's block).
        trial_dir: The trial's artifact directory (log and pid file).
    """

    def __init__(self, port: int, trial_dir: Path) -> None:
        super().__init__(port, trial_dir, module="itbench_finops.endpoint")
