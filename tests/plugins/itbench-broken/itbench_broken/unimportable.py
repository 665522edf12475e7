"""A plugin module that cannot be imported."""

import itbench_no_such_module  # noqa: F401
