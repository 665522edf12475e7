"""A bench session: plugins loaded, their registrations collected, the catalog on demand."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

from itbench.agents import AgentSpec
from itbench.domain import Domain
from itbench.executors import ExecutorSpec
from itbench.options import OptionSpec
from itbench.plugins import PluginHost, make_plugin_manager
from itbench.registry import Catalog, ScenarioLoader
from itbench.reporters import ReporterSpec


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

    def _unique(self, hook: str, kind: str) -> dict[str, object]:
        out: dict[str, object] = {}
        for plugin, item in self.host.call_list(hook):
            name = getattr(item, "name", None)
            if not isinstance(name, str):
                self.host._problem(plugin, f"registered a {kind} without a name: {item!r}", hook)
                continue
            if name in out:
                self.host._problem(plugin, f"{kind} {name!r} is already registered; ignored", hook)
                continue
            out[name] = item
        return out

    @cached_property
    def domains(self) -> dict[str, Domain]:
        """Registered domains by name."""
        return {
            k: v
            for k, v in self._unique("itbench_register_domains", "domain").items()
            if isinstance(v, Domain)
        }

    @cached_property
    def agents(self) -> dict[str, AgentSpec]:
        """Registered agents by name."""
        return {
            k: v
            for k, v in self._unique("itbench_register_agents", "agent").items()
            if isinstance(v, AgentSpec)
        }

    @cached_property
    def executors(self) -> dict[str, ExecutorSpec]:
        """Registered executors by name."""
        items = self._unique("itbench_register_executors", "executor")
        return {k: v for k, v in items.items() if isinstance(v, ExecutorSpec)}

    @cached_property
    def reporters(self) -> dict[str, ReporterSpec]:
        """Registered reporters by name."""
        items = self._unique("itbench_register_reporters", "reporter")
        return {k: v for k, v in items.items() if isinstance(v, ReporterSpec)}

    @cached_property
    def options(self) -> dict[str, OptionSpec]:
        """Registered run flags by name."""
        items = self._unique("itbench_register_options", "option")
        return {k: v for k, v in items.items() if isinstance(v, OptionSpec)}

    @cached_property
    def catalog_paths(self) -> list[Path]:
        """Catalog directories: plugin-registered first, then ``--scenario-path`` ones."""
        paths = [Path(p) for _, p in self.host.call_list("itbench_register_catalog_paths")]
        return paths + self.extra_paths

    @cached_property
    def catalog(self) -> Catalog:
        """The loaded scenario catalog."""
        return ScenarioLoader(self.domains).load(self.catalog_paths)

    def problem_lines(self) -> list[str]:
        """One line per plugin problem seen so far."""
        return [p.line() for p in self.host.problems]
