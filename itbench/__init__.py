"""itbench: a push-button benchmark harness for AI agents doing IT work."""

from __future__ import annotations

import pluggy

__version__ = "0.1.0"

#: Marker for plugin hook implementations: ``@itbench.hookimpl def itbench_register_domains(): ...``.
hookimpl = pluggy.HookimplMarker("itbench")

__all__ = ["__version__", "hookimpl"]
