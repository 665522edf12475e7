"""The pluggy markers of the ``itbench`` project: hook specifications and implementations."""

from __future__ import annotations

import pluggy

PROJECT = "itbench"

#: Marks a hook specification in :mod:`itbench.hookspecs`.
hookspec = pluggy.HookspecMarker(PROJECT)

#: Marks a plugin's hook implementation: ``@itbench.hookimpl def itbench_register_domains(): ...``.
hookimpl = pluggy.HookimplMarker(PROJECT)
