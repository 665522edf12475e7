"""The interface between the SRE tools, faults and evaluator and a running shop deployment.

The embedded backend (:mod:`itbench_sre.embedded`) runs the shop as local processes under
supervisord. A Kubernetes backend would implement the same methods with Deployments
(replicas), ConfigMaps (configs), rollout history (releases) and the cluster's Prometheus.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ChangeSet:
    """Changes a fault injector or recovery applies to a deployment (through a playbook).

    Attributes:
        files: ``(entity, content)`` of configuration files to write.
        programs: ``(action, program)`` process-manager actions (start, stop, restart).
        signals: ``(program, signal)`` signals sent to a program's process (e.g. ``STOP``).
        redis_commands: Commands run on the environment's Redis.
        links: Mesh link state per edge ``caller->callee`` (replaces the current state).
        target_counts: Services whose scrape targets change to this many replicas.
        sql: Statements run on the shop database as its superuser.
        commands: Commands (argv) run on the host, for effects no other field has.
    """

    files: list[tuple[str, str]] = field(default_factory=list)
    programs: list[tuple[str, str]] = field(default_factory=list)
    signals: list[tuple[str, str]] = field(default_factory=list)
    redis_commands: list[list[str]] = field(default_factory=list)
    links: dict[str, dict[str, Any]] | None = None
    target_counts: dict[str, int] = field(default_factory=dict)
    sql: list[str] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)

    def empty(self) -> bool:
        """Whether there is nothing to apply."""
        return (
            not (
                self.files
                or self.programs
                or self.signals
                or self.redis_commands
                or self.sql
                or self.commands
            )
            and self.links is None
        )


class ShopBackend(ABC):
    """Operations on one deployed shop."""

    @abstractmethod
    def deploy(self) -> None:
        """Deploy everything and wait until the workload is served."""

    @abstractmethod
    def teardown(self) -> None:
        """Remove everything; idempotent."""

    @abstractmethod
    def apply(self, changes: ChangeSet) -> None:
        """Apply an injector's or recovery's change set."""

    @abstractmethod
    def programs(self) -> list[dict[str, Any]]:
        """State of every program: name, entity, state, pid, uptime, memory."""

    @abstractmethod
    def control(self, action: str, program: str, wait: bool = True) -> None:
        """``start``, ``stop`` or ``restart`` one program (``wait``: until it has started)."""

    @abstractmethod
    def replicas(self, service: str) -> int:
        """Running replicas of a service."""

    @abstractmethod
    def scale(self, service: str, replicas: int) -> None:
        """Set a service's replica count."""

    @abstractmethod
    def running(self, program: str) -> bool:
        """Whether a program (service instance or component) runs."""

    @abstractmethod
    def restart_service(self, service: str, wait: bool = True) -> None:
        """Restart every running instance of a service (``wait``: until each has started)."""

    @abstractmethod
    def revisions(self, service: str) -> list[dict[str, Any]]:
        """Deployment history of a service, oldest first."""

    @abstractmethod
    def record_config(self, entity: str) -> None:
        """Record a service's current configuration as a new revision."""

    @abstractmethod
    def rollback(self, service: str, revision: int | None = None) -> dict[str, Any]:
        """Redeploy an earlier revision (default: the previous one); the new revision entry."""

    @abstractmethod
    def read_private(self, name: str) -> str:
        """A harness-private file of the deployment (never shown to the agent)."""

    @abstractmethod
    def read_config(self, entity: str) -> str:
        """Configuration file text of an entity."""

    @abstractmethod
    def write_config(self, entity: str, content: str) -> None:
        """Replace an entity's configuration file (takes effect on restart)."""

    @abstractmethod
    def prom(self, path: str, params: dict[str, Any]) -> Any:
        """Call the Prometheus HTTP API (``/api/v1/...``) and return its ``data``."""

    @abstractmethod
    def log_lines(self, service: str) -> list[str]:
        """Raw JSON log lines of a service's instances (oldest first per instance)."""

    @abstractmethod
    def span_lines(self, service: str | None) -> list[str]:
        """Raw JSON span lines (empty when tracing is off)."""

    @abstractmethod
    def outcomes(self, since: float) -> list[dict[str, Any]]:
        """Workload request outcomes recorded since ``since`` (epoch seconds)."""

    @abstractmethod
    def sql(self, statement: str) -> list[Any]:
        """Run a read-only check on the shop database as the superuser (evaluator only)."""
