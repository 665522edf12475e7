"""A plugin whose registration hooks raise."""

from itbench import hookimpl


@hookimpl
def itbench_register_agents():
    raise RuntimeError("agent table is corrupt")


@hookimpl
def itbench_register_catalog_paths():
    raise RuntimeError("catalog unavailable")
