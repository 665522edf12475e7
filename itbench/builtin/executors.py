"""Built-in executor: local parallel trials."""

from __future__ import annotations

from itbench import hookimpl
from itbench.executors import ExecutorSpec, LocalExecutor


@hookimpl
def itbench_register_executors() -> list[ExecutorSpec]:
    """Register the local executor."""
    return [ExecutorSpec("local", LocalExecutor, "Parallel trials in this process (--workers).")]
