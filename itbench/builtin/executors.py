"""Built-in executors: local threads or processes, and Ray tasks (with the ``ray`` extra)."""

from __future__ import annotations

from itbench.cluster import ADDRESS_OPTION, RayExecutor
from itbench.executors import ExecutorSpec, LocalExecutor
from itbench.markers import hookimpl
from itbench.options import OptionSpec
from itbench.process_executor import ProcessExecutor


@hookimpl
def itbench_register_executors() -> list[ExecutorSpec]:
    """Register the local, the process and the Ray executors."""
    return [
        ExecutorSpec("local", LocalExecutor, "Parallel trials in this process (--workers)."),
        ExecutorSpec(
            "processes",
            ProcessExecutor,
            "Parallel trials, each worker a process of its own (--workers; uses every core).",
        ),
        ExecutorSpec(
            "ray",
            RayExecutor,
            "Each trial a Ray task, on a local instance or a cluster (--address; itbench[ray]).",
        ),
    ]


@hookimpl
def itbench_register_options() -> list[OptionSpec]:
    """``--address ADDR``: the Ray cluster the ray executor joins."""
    return [OptionSpec("address", ADDRESS_OPTION, "Ray cluster address (--executor ray).")]
