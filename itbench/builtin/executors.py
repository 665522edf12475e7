"""Built-in executor: local parallel trials."""

from __future__ import annotations

from itbench.executors import ExecutorSpec, LocalExecutor
from itbench.markers import hookimpl


@hookimpl
def itbench_register_executors() -> list[ExecutorSpec]:
    """Register the local executor."""
    return [ExecutorSpec("local", LocalExecutor, "Parallel trials in this process (--workers).")]
