"""A bench: plugins loaded, their registrations collected, the catalog on demand."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from itbench.agents import AgentSpec
from itbench.catalog import Catalog, ScenarioLoader
from itbench.domain import AnyDomain, Domain
from itbench.executors import ExecutorSpec
from itbench.options import OptionSpec
from itbench.plugins import PluginHost, make_plugin_manager
from itbench.report.reporters import ReporterSpec

T = TypeVar("T")

#: Kinds whose contested names refuse a run: they decide what runs and how it is judged.
REFUSED_WHEN_CONTESTED = ("agent", "domain", "executor")
#: Names that end up in paths, trial ids and file names must have a safe form.
_NAME_FORMS = {
    "domain": (
        re.compile(r"[a-z][a-z0-9_-]*"),
        "a lowercase letter then letters, digits, '_', '-'",
    ),
    "agent": (
        re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)*"),
        "segments of letters, digits, '.', '_', '-' joined by '/'",
    ),
}


class Bench:
    """Everything the CLI and the runner need from the plugins.

    Args:
        plugins: Extra plugin modules (``--plugin``).
        scenario_paths: Extra catalog directories (``--scenario-path``).
        autoload: Whether to load entry-point plugins (default: unless disabled by env var).
    """

    def __init__(
        self,
        plugins: Sequence[str] = (),
        scenario_paths: Sequence[str | Path] = (),
        autoload: bool | None = None,
    ) -> None:
        self.host: PluginHost = make_plugin_manager(list(plugins), autoload=autoload)
        self.extra_paths = [Path(p) for p in scenario_paths]
        #: ``(kind, name)`` registered by more than one plugin: plugin names, first one first.
        self.contested: dict[tuple[str, str], list[str]] = {}
        #: ``(kind, name)``: the plugin whose registration is used.
        self.owners: dict[tuple[str, str], str] = {}

    def registered(self, hook: str, kind: str, cls: type[T]) -> dict[str, T]:
        """The items a registration hook returned, by name; the first registration wins.

        Items that are not ``cls`` instances, have no name or repeat a name are reported as
        problems of the plugin that returned them and left out.
        """
        out: dict[str, T] = {}
        for plugin, item in self.host.call_list(hook):
            if not isinstance(item, cls):
                self.host.problem(
                    plugin,
                    f"registered {type(item).__name__} {_shown(item)}; expected {cls.__name__}",
                    hook,
                )
                continue
            try:
                name = getattr(item, "name", None)
            except Exception as exc:
                self.host.problem(plugin, f"the name of a {kind} raised {type(exc).__name__}", hook)
                continue
            if not isinstance(name, str) or not name:
                self.host.problem(
                    plugin, f"registered a {kind} without a name: {_shown(item)}", hook
                )
                continue
            form = _NAME_FORMS.get(kind)
            if form is not None and not form[0].fullmatch(name):
                self.host.problem(
                    plugin, f"{kind} name {name[:80]!r} is not {form[1]}; ignored", hook
                )
                continue
            if name in out:
                first = self.owners[(kind, name)]
                self.contested.setdefault((kind, name), [first]).append(plugin)
                effect = (
                    "runs that use it are refused until only one registration is left"
                    if kind in REFUSED_WHEN_CONTESTED
                    else "the first registration is used"
                )
                self.host.problem(
                    plugin,
                    f"{kind} {name!r} is already registered by plugin {self._origin(first)}; "
                    f"{effect} (this plugin is {self._origin(plugin)}; uninstall or rename one)",
                    hook,
                )
                continue
            out[name] = item
            self.owners[(kind, name)] = plugin
        return out

    def _origin(self, plugin: str) -> str:
        """A plugin by name with where it came from: its distribution, or a module given."""
        info = self.host.infos.get(plugin)
        if info is None:
            return repr(plugin)
        if info.distribution:
            version = f" {info.version}" if info.version else ""
            return f"{plugin!r} (distribution {info.distribution}{version})"
        return f"{plugin!r} (module {info.module or plugin}, loaded with --plugin)"

    def contested_names(self, kind: str, names: Iterable[str]) -> list[str]:
        """Lines for each of ``names`` of ``kind`` that more than one plugin registered."""
        return [
            f"{kind} {name!r} is registered by plugins {', '.join(map(self._origin, plugins))}"
            for name in sorted(set(names))
            if (plugins := self.contested.get((kind, name)))
        ]

    @cached_property
    def domains(self) -> dict[str, AnyDomain]:
        """Registered domains by name."""
        found: dict[str, Any] = self.registered("itbench_register_domains", "domain", Domain)
        return found

    @cached_property
    def agents(self) -> dict[str, AgentSpec]:
        """Registered agents by name."""
        return self.registered("itbench_register_agents", "agent", AgentSpec)

    @cached_property
    def executors(self) -> dict[str, ExecutorSpec]:
        """Registered executors by name."""
        return self.registered("itbench_register_executors", "executor", ExecutorSpec)

    @cached_property
    def reporters(self) -> dict[str, ReporterSpec]:
        """Registered reporters by name."""
        return self.registered("itbench_register_reporters", "reporter", ReporterSpec)

    @cached_property
    def options(self) -> dict[str, OptionSpec]:
        """Registered run flags by name."""
        return self.registered("itbench_register_options", "option", OptionSpec)

    @cached_property
    def catalog_paths(self) -> list[Path]:
        """Catalog directories: plugin-registered first, then ``--scenario-path`` ones."""
        paths: list[Path] = []
        for plugin, item in self.host.call_list("itbench_register_catalog_paths"):
            if isinstance(item, str | Path):
                paths.append(Path(item))
            else:
                self.host.problem(
                    plugin,
                    f"registered {type(item).__name__} {_shown(item)}; expected a Path",
                    "itbench_register_catalog_paths",
                )
        return paths + self.extra_paths

    @cached_property
    def catalog(self) -> Catalog:
        """The loaded scenario catalog."""
        return ScenarioLoader(self.domains).load(self.catalog_paths)

    def problem_lines(self) -> list[str]:
        """One line per plugin problem seen so far."""
        return [p.line() for p in self.host.problems]


def _shown(item: object) -> str:
    """``repr(item)`` cut to 80 characters, or a placeholder when its ``__repr__`` raises."""
    try:
        return f"{item!r:.80}"
    except Exception:
        return f"<{type(item).__name__} whose repr raised>"
