"""Plugin manager factory, plugin discovery and fault-isolated hook calls."""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata as md
import os
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pluggy

from itbench import hookspecs
from itbench.markers import PROJECT

ENTRY_POINT_GROUP = "itbench"
DISABLE_AUTOLOAD_ENV = "ITBENCH_DISABLE_PLUGIN_AUTOLOAD"

#: Core plugins (name: module), registered first, in this order.
BUILTIN_PLUGINS = {
    "itbench.agents": "itbench.builtin.agents",
    "itbench.executors": "itbench.builtin.executors",
    "itbench.reporters": "itbench.report.reporters",
    "itbench.scenarios": "itbench.builtin.scenarios",
}
#: Hook implementation options itbench does not support. Hooks are called one by one in
#: registration order: wrappers would be called as plain functions, and ``tryfirst`` or
#: ``trylast`` would let a plugin registered later take a name registered before it.
UNSUPPORTED_OPTIONS = ("wrapper", "hookwrapper", "tryfirst", "trylast")
#: Options that make an implementation unusable: it is never called.
_SKIPPED_OPTIONS = ("wrapper", "hookwrapper")
_HOOK_PREFIX = "itbench_"


@dataclass
class PluginInfo:
    """Where a plugin came from."""

    name: str
    source: str  # "builtin", "entrypoint" or "option"
    distribution: str | None = None
    version: str | None = None
    module: str | None = None


@dataclass
class PluginProblem:
    """A plugin that failed to import, or whose hook raised."""

    plugin: str
    reason: str
    hook: str | None = None

    def line(self) -> str:
        """One human line naming the plugin and the reason."""
        where = f" in hook {self.hook}" if self.hook else ""
        return f"plugin {self.plugin!r}{where}: {self.reason}"


@dataclass
class PluginHost:
    """A pluggy manager plus what was learned while loading plugins."""

    pm: pluggy.PluginManager
    infos: dict[str, PluginInfo] = field(default_factory=dict)
    problems: list[PluginProblem] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def call_list(self, hook_name: str, **kwargs: Any) -> list[tuple[str, Any]]:
        """Call a registration hook implementation by implementation.

        A raising implementation is recorded in :attr:`problems` and skipped.

        Returns:
            ``(plugin name, item)`` for every item of every returned list.
        """
        out: list[tuple[str, Any]] = []
        for name, value in self.call_each(hook_name, **kwargs):
            if value is None:
                continue
            if not isinstance(value, list | tuple):
                self.problem(name, f"returned {type(value).__name__}, expected a list", hook_name)
                continue
            out.extend((name, item) for item in value)
        return out

    def call_each(self, hook_name: str, **kwargs: Any) -> list[tuple[str, Any]]:
        """Call every implementation of ``hook_name``, isolating failures.

        Implementations run in registration order (built-in plugins, entry points, then
        ``--plugin`` modules); ``tryfirst``/``trylast`` are ignored (and reported), so where a
        name can be registered once, the first registration wins. ``KeyboardInterrupt`` is
        recorded and re-raised (it is the user's); any other exception, ``SystemExit``
        included, is recorded and the implementation skipped.

        Returns:
            ``(plugin name, return value)`` of each implementation that did not raise.
        """
        results: list[tuple[str, Any]] = []
        for impl in self.ordered_impls(hook_name):
            args = {a: kwargs[a] for a in impl.argnames}
            try:
                results.append((impl.plugin_name, impl.function(**args)))
            except KeyboardInterrupt:
                self.problem(impl.plugin_name, "interrupted (KeyboardInterrupt)", hook_name)
                raise
            except BaseException as exc:
                self.problem(impl.plugin_name, f"{type(exc).__name__}: {exc}"[:500], hook_name)
        return results

    def ordered_impls(self, hook_name: str) -> list[pluggy.HookImpl]:
        """The implementations of a hook in the order :meth:`call_each` calls them."""
        rank = {name: i for i, (name, _) in enumerate(self.pm.list_name_plugin())}
        impls = [
            impl
            for impl in getattr(self.pm.hook, hook_name).get_hookimpls()
            if not any(getattr(impl, option, False) for option in _SKIPPED_OPTIONS)
        ]
        return sorted(impls, key=lambda impl: rank.get(impl.plugin_name, len(rank)))

    def problem(self, plugin: str, reason: str, hook: str | None = None) -> None:
        """Record a problem of ``plugin`` (once; repeated identical problems are kept once)."""
        problem = PluginProblem(plugin, reason, hook)
        with self._lock:
            if all(p.line() != problem.line() for p in self.problems):
                self.problems.append(problem)

    def hooks_of(self, plugin_name: str) -> list[str]:
        """Names of the hooks a plugin implements."""
        plugin = self.pm.get_plugin(plugin_name)
        if plugin is None:
            return []
        return sorted(h.name for h in self.pm.get_hookcallers(plugin) or [])


def _register(host: PluginHost, module: ModuleType | object, info: PluginInfo) -> None:
    try:
        host.pm.register(module, name=info.name)
    except Exception as exc:
        host.problem(info.name, f"failed to register: {type(exc).__name__}: {exc}")
        return
    host.infos[info.name] = info
    _check_plugin(host, info.name, module)


def _check_plugin(host: PluginHost, name: str, plugin: ModuleType | object) -> None:
    """Problems of one registered plugin: unknown hooks, unsupported options, unmarked hooks.

    Stands in for ``check_pending``, naming every offending plugin and hook instead of
    raising at the first.
    """
    for caller in host.pm.get_hookcallers(plugin) or []:
        if not caller.has_spec():
            known = [
                h
                for h in dir(host.pm.hook)
                if h.startswith(_HOOK_PREFIX) and getattr(host.pm.hook, h).has_spec()
            ]
            close = difflib.get_close_matches(caller.name, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            host.problem(name, f"implements unknown hook {caller.name}{hint}", caller.name)
            continue
        for impl in caller.get_hookimpls():
            if impl.plugin_name != name:
                continue
            for option in UNSUPPORTED_OPTIONS:
                if not getattr(impl, option, False):
                    continue
                effect = (
                    "the implementation is ignored"
                    if option in _SKIPPED_OPTIONS
                    else "ignored: plugins are called in registration order"
                )
                host.problem(
                    name,
                    f"hook option {option}=True is not supported (itbench calls each "
                    f"implementation on its own, in registration order); {effect}",
                    caller.name,
                )
    marker = f"{PROJECT}_impl"
    for attr in dir(plugin):
        if not attr.startswith(_HOOK_PREFIX):
            continue
        value = getattr(plugin, attr, None)
        if callable(value) and not hasattr(value, marker):
            host.problem(
                name, f"{attr} is not marked with @itbench.hookimpl, so it is never called", attr
            )


def _import(host: PluginHost, name: str, module_name: str) -> ModuleType | None:
    try:
        return importlib.import_module(module_name)
    except Exception as exc:
        host.problem(name, f"failed to import {module_name}: {type(exc).__name__}: {exc}")
        return None


def make_plugin_manager(
    plugins: list[str] | None = None, *, autoload: bool | None = None
) -> PluginHost:
    """Build a plugin manager with the core, entry-point and ``--plugin`` plugins.

    Args:
        plugins: Extra plugin module names (``--plugin MODULE``), registered last.
        autoload: Load entry points of group ``itbench``; by default true unless
            ``ITBENCH_DISABLE_PLUGIN_AUTOLOAD`` is set to a non-empty value other than ``0``.

    Returns:
        The plugin host; import or registration problems are in ``host.problems``.
    """
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    host = PluginHost(pm)
    core_version = _dist_version("itbench")
    for name, module_name in BUILTIN_PLUGINS.items():
        module = importlib.import_module(module_name)
        _register(host, module, PluginInfo(name, "builtin", "itbench", core_version, module_name))
    if autoload is None:
        autoload = os.environ.get(DISABLE_AUTOLOAD_ENV, "") in ("", "0")
    if autoload:
        loaded: dict[str, tuple[str | None, str]] = {}
        for ep in sorted(md.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = ep.dist
            dist_name = dist.metadata["Name"] if dist else None
            name = ep.name
            if name in loaded:
                if loaded[name] == (dist_name, ep.value):
                    continue  # the same distribution seen twice on the path
                # Another distribution under a taken name: load it too, so that whatever it
                # registers meets the first one's names and is reported, never shadows them.
                host.problem(
                    name,
                    f"entry point name {name!r} is used by distribution {dist_name!r} "
                    f"({ep.value}) and by {loaded[name][0]!r} ({loaded[name][1]})",
                )
                name = f"{ep.name}@{dist_name}"
                if name in loaded:
                    continue
            loaded[name] = (dist_name, ep.value)
            info = PluginInfo(
                name,
                "entrypoint",
                dist_name,
                dist.version if dist else None,
                ep.value,
            )
            try:
                obj = ep.load()
            except Exception as exc:
                host.problem(name, f"failed to import {ep.value}: {type(exc).__name__}: {exc}")
                continue
            _register(host, obj, info)
    for module_name in plugins or []:
        imported = _import(host, module_name, module_name)
        if imported is None:
            continue
        if host.pm.is_registered(imported):
            continue  # already loaded (through an entry point or an earlier --plugin)
        if host.pm.get_plugin(module_name) is not None:
            host.problem(
                module_name,
                f"--plugin {module_name}: a different plugin is already loaded under this name; "
                "not loaded",
            )
            continue
        _register(host, imported, PluginInfo(module_name, "option", module=module_name))
    return host


def _dist_version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None
