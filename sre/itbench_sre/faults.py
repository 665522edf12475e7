"""The fault library: parametrized mechanisms with inject, recover, ground truth and a fix.

Every mechanism turns (target, params) into a :class:`ChangeSet` that the apply playbook plays
on the deployment; recovery is another change set. Ground truth (root-cause entity, fault type,
propagation chain, expected alerts) is derived here, so scenario files only name a mechanism,
a target and parameters. Nothing here is visible to the agent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from itbench_sre import topology
from itbench_sre.backend import ChangeSet
from itbench_sre.embedded import JOB_PROGRAM, EmbeddedShop

#: Fault types an agent may name (the vocabulary is public; which one applies is not).
FAULT_TYPES = (
    "crash_loop",
    "process_hang",
    "wrong_upstream",
    "auth_failure",
    "feature_flag",
    "bad_release",
    "memory_leak",
    "cpu_saturation",
    "network_latency",
    "packet_loss",
    "connection_reset",
    "network_partition",
    "datastore_down",
    "datastore_oom",
    "connection_exhaustion",
    "slow_query",
    "pool_exhaustion",
    "retry_storm",
    "capacity_loss",
    "consumer_stopped",
    "certificate_expired",
)

#: A closed port inside every environment's block (nothing listens there).
DEAD_PORT_OFFSET = 99

Fix = list[tuple[str, dict[str, Any]]]


@dataclass(frozen=True)
class Expectation:
    """An alert the fault must raise: its name and, optionally, the job it is about."""

    alert: str
    job: str | None = None


@dataclass
class Mechanism:
    """One fault mechanism.

    Attributes:
        name: Id used by scenario files.
        fault_type: One of :data:`FAULT_TYPES`.
        targets: Allowed targets (services, instances, edges ``a->b``, datastores).
        inject: ``(shop, target, params) -> ChangeSet``.
        recover: ``(shop, target, params) -> ChangeSet`` restoring the baseline.
        root: Root-cause entity of a target.
        aliases: Extra names accepted for the root cause.
        alerts: Alerts expected while the fault is active.
        fix: Reference fix as tool calls, or ``None`` when no tool can mitigate the fault.
        defaults: Default parameters.
        trigger: A transient change played after ``inject`` and taken back (links cleared)
            after ``params["trigger_seconds"]``; the fault must outlive it.
    """

    name: str
    fault_type: str
    targets: tuple[str, ...]
    inject: Callable[[EmbeddedShop, str, dict[str, Any]], ChangeSet]
    recover: Callable[[EmbeddedShop, str, dict[str, Any]], ChangeSet]
    root: Callable[[str], str]
    alerts: Callable[[str], list[Expectation]]
    fix: Callable[[str, dict[str, Any]], Fix] | None
    defaults: dict[str, Any] = field(default_factory=dict)
    aliases: Callable[[str], list[str]] = lambda target: []
    trigger: Callable[[EmbeddedShop, str, dict[str, Any]], ChangeSet] | None = None

    @property
    def mitigable(self) -> bool:
        """Whether the agent's tools can mitigate this fault."""
        return self.fix is not None


# --- helpers ----------------------------------------------------------------------------------


def _config(shop: EmbeddedShop, service: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(shop.read_config(service))
    return data


def _dump(cfg: dict[str, Any]) -> str:
    return json.dumps(cfg, indent=2) + "\n"


def _running_instances(service: str) -> list[str]:
    return topology.instances(service, topology.BY_NAME[service].replicas)


def _deploy(shop: EmbeddedShop, service: str, cfg: dict[str, Any]) -> ChangeSet:
    """A config deployment: write the file and restart the baseline instances by signal."""
    return ChangeSet(
        files=[(service, _dump(cfg))],
        signals=[(i, "TERM") for i in _running_instances(service)],
    )


def _restore(shop: EmbeddedShop, service: str, params: dict[str, Any]) -> ChangeSet:
    return _deploy(shop, service, shop.baseline_config(service))


def _config_change(
    mutate: Callable[[dict[str, Any], EmbeddedShop, str, dict[str, Any]], None],
) -> Callable[[EmbeddedShop, str, dict[str, Any]], ChangeSet]:
    def inject(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
        cfg = _config(shop, target)
        mutate(cfg, shop, target, params)
        return _deploy(shop, target, cfg)

    return inject


def _same(target: str) -> str:
    return target


def _errors(target: str) -> list[Expectation]:
    return [Expectation("HighErrorRate", target)]


def _rollback(target: str, params: dict[str, Any]) -> Fix:
    return [("rollback", {"service": target})]


def _set_and_restart(changes: dict[str, Any]) -> Callable[[str, dict[str, Any]], Fix]:
    def fix(target: str, params: dict[str, Any]) -> Fix:
        return [
            ("edit_config", {"entity": target, "set": changes}),
            ("restart", {"target": target}),
        ]

    return fix


# --- mechanisms -------------------------------------------------------------------------------


def _bad_value(cfg: dict[str, Any], shop: EmbeddedShop, target: str, p: dict[str, Any]) -> None:
    cfg[p["key"]] = p["value"]


def _wrong_upstream(
    cfg: dict[str, Any], shop: EmbeddedShop, target: str, p: dict[str, Any]
) -> None:
    cfg["upstreams"][p["upstream"]] = f"127.0.0.1:{shop.port(DEAD_PORT_OFFSET)}"


def _wrong_password(
    cfg: dict[str, Any], shop: EmbeddedShop, target: str, p: dict[str, Any]
) -> None:
    cfg["postgres"]["password"] = p["password"]


def _flag_on(cfg: dict[str, Any], shop: EmbeddedShop, target: str, p: dict[str, Any]) -> None:
    cfg["flags"][p["flag"]] = True


def _new_release(cfg: dict[str, Any], shop: EmbeddedShop, target: str, p: dict[str, Any]) -> None:
    cfg["release"] = topology.BY_NAME[target].releases[-1]


def _small_pool(cfg: dict[str, Any], shop: EmbeddedShop, target: str, p: dict[str, Any]) -> None:
    cfg["pool_size"] = p["pool_size"]
    cfg["pool_timeout"] = p["pool_timeout"]


def _no_consumer(cfg: dict[str, Any], shop: EmbeddedShop, target: str, p: dict[str, Any]) -> None:
    cfg["consume"] = False


def _lapsed_cert(cfg: dict[str, Any], shop: EmbeddedShop, target: str, p: dict[str, Any]) -> None:
    certs = shop.shop / "certs"
    cfg["serve_tls"] = {
        "cert": str(certs / shop.certs["lapsed_cert"]),
        "key": str(certs / shop.certs["lapsed_key"]),
    }


def _edge_parts(target: str) -> tuple[str, str]:
    caller, _, callee = target.partition("->")
    return caller, callee


def _link(kind: str) -> Callable[[EmbeddedShop, str, dict[str, Any]], ChangeSet]:
    def inject(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
        value = params.get(kind, True)
        return ChangeSet(links={target: {kind: value}})

    return inject


def _clear_links(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    return ChangeSet(links={})


def _edge_alerts(alert: str) -> Callable[[str], list[Expectation]]:
    def alerts(target: str) -> list[Expectation]:
        return [Expectation(alert, _edge_parts(target)[0])]

    return alerts


def _edge_aliases(target: str) -> list[str]:
    return [target, topology.MESH]


_JOB_FILE = f"ctl:jobs/{JOB_PROGRAM}.json"


def _job(shop: EmbeddedShop, job: dict[str, Any]) -> ChangeSet:
    """A new job description for the report exporter, which runs in every deployment.

    The exporter re-reads its description by itself: nothing restarts or appears, only what
    the job does on the database changes.
    """
    base = {**shop.baseline_job(), **job}
    return ChangeSet(files=[(_JOB_FILE, json.dumps(base))])


def _restore_job(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    return ChangeSet(files=[(_JOB_FILE, json.dumps(shop.baseline_job()))])


def _fill_redis(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    script = (
        "for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do "
        "redis.call('SET', 'sess:' .. i, string.rep('x', 1024)) end return 1"
    )
    batches = int(params["megabytes"]) // 8
    return ChangeSet(
        redis_commands=[
            ["EVAL", script, "0", str(b * 8192), str((b + 1) * 8192 - 1)] for b in range(batches)
        ]
    )


MECHANISMS: dict[str, Mechanism] = {}


def _register(m: Mechanism) -> None:
    assert m.fault_type in FAULT_TYPES, m.fault_type
    MECHANISMS[m.name] = m


_register(
    Mechanism(
        "crash_loop_config",
        "crash_loop",
        ("catalog", "cart", "currency", "shipping", "payment", "recommendation"),
        _config_change(_bad_value),
        _restore,
        _same,
        lambda t: [Expectation("InstanceDown", t)],
        _rollback,
        defaults={"key": "pool_size", "value": "eight"},
    )
)
_register(
    Mechanism(
        "hung_process",
        "process_hang",
        ("currency-0", "catalog-0", "shipping-0", "recommendation-0", "payment-0"),
        # The reload signal: the service's reload handler stops its listener from inside the
        # loop that serves it (socketserver's shutdown() called from the serving thread), so
        # the process stays alive and sleeping but never answers again until restarted.
        lambda shop, t, p: ChangeSet(signals=[(t, "HUP")]),
        lambda shop, t, p: ChangeSet(programs=[("restart", t)]),
        lambda t: t.rsplit("-", 1)[0],
        lambda t: [Expectation("InstanceDown", t.rsplit("-", 1)[0])],
        lambda t, p: [("restart", {"target": t})],
        aliases=lambda t: [t],
    )
)
_register(
    Mechanism(
        "wrong_upstream",
        "wrong_upstream",
        ("checkout", "shipping", "payment", "recommendation", "frontend"),
        _config_change(_wrong_upstream),
        _restore,
        _same,
        lambda t: [Expectation("UpstreamErrors", t)],
        _rollback,
        defaults={"upstream": "currency"},
    )
)
_register(
    Mechanism(
        "wrong_credentials",
        "auth_failure",
        ("catalog", "checkout"),
        _config_change(_wrong_password),
        _restore,
        _same,
        _errors,
        _rollback,
        defaults={"password": "shop-sandbox-pw-2"},
    )
)
_register(
    Mechanism(
        "feature_flag",
        "feature_flag",
        ("catalog", "checkout"),
        _config_change(_flag_on),
        _restore,
        _same,
        _errors,
        lambda t, p: _set_and_restart({f"flags.{p['flag']}": False})(t, p),
        defaults={"flag": "dynamic_pricing"},
    )
)
_register(
    Mechanism(
        "bad_release",
        "bad_release",
        ("cart", "payment", "catalog"),
        _config_change(_new_release),
        _restore,
        _same,
        lambda t: [Expectation("HighErrorRate" if t != "catalog" else "HighLatency", t)],
        _rollback,
    )
)
_register(
    Mechanism(
        "memory_leak",
        "memory_leak",
        ("cart",),
        _config_change(_flag_on),
        _restore,
        _same,
        lambda t: [Expectation("MemoryHigh", t)],
        lambda t, p: _set_and_restart({"flags.session_cache": False})(t, p),
        defaults={"flag": "session_cache"},
    )
)
_register(
    Mechanism(
        "cpu_saturation",
        "cpu_saturation",
        ("currency", "recommendation"),
        _config_change(_flag_on),
        _restore,
        _same,
        lambda t: [Expectation("CpuSaturated", t), Expectation("HighLatency", t)],
        lambda t, p: _set_and_restart({f"flags.{p['flag']}": False})(t, p),
        defaults={"flag": "precise_rounding"},
    )
)
_EDGES = tuple(f"{c}->{u}" for c, u in topology.edges() if u not in topology.DATASTORES)
_register(
    Mechanism(
        "edge_latency",
        "network_latency",
        _EDGES,
        _link("delay_ms"),
        _clear_links,
        lambda t: _edge_parts(t)[1],
        _edge_alerts("HighLatency"),
        None,
        defaults={"delay_ms": 700},
        aliases=_edge_aliases,
    )
)
_register(
    Mechanism(
        "edge_loss",
        "packet_loss",
        _EDGES,
        _link("loss"),
        _clear_links,
        lambda t: _edge_parts(t)[1],
        _edge_alerts("UpstreamErrors"),
        None,
        defaults={"loss": 0.6},
        aliases=_edge_aliases,
    )
)
_register(
    Mechanism(
        "edge_reset",
        "connection_reset",
        _EDGES,
        _link("reset"),
        _clear_links,
        lambda t: _edge_parts(t)[1],
        _edge_alerts("UpstreamErrors"),
        None,
        defaults={"reset": 0.6},
        aliases=_edge_aliases,
    )
)
_register(
    Mechanism(
        "network_partition",
        "network_partition",
        _EDGES,
        _link("cut"),
        _clear_links,
        lambda t: _edge_parts(t)[1],
        _edge_alerts("UpstreamErrors"),
        None,
        aliases=_edge_aliases,
    )
)
_register(
    Mechanism(
        "redis_down",
        "datastore_down",
        ("redis",),
        lambda shop, t, p: ChangeSet(programs=[("stop", "redis")]),
        lambda shop, t, p: ChangeSet(programs=[("start", "redis")]),
        _same,
        lambda t: [Expectation("HighErrorRate", "cart")],
        lambda t, p: [("start", {"target": "redis"})],
    )
)
_register(
    Mechanism(
        "redis_oom",
        "datastore_oom",
        ("redis",),
        _fill_redis,
        lambda shop, t, p: ChangeSet(redis_commands=[["FLUSHALL"]]),
        _same,
        lambda t: [Expectation("HighErrorRate", "cart")],
        lambda t, p: [("restart", {"target": "redis"})],
        defaults={"megabytes": 72},
    )
)
_register(
    Mechanism(
        "pg_connection_exhaustion",
        "connection_exhaustion",
        ("postgres",),
        lambda shop, t, p: _job(shop, {"connections": int(p["connections"])}),
        _restore_job,
        _same,
        lambda t: [Expectation("HighErrorRate", "catalog")],
        lambda t, p: [("stop", {"target": JOB_PROGRAM})],
        defaults={"connections": 40},
        aliases=lambda t: [JOB_PROGRAM],
    )
)
_register(
    Mechanism(
        "pg_slow_query",
        "slow_query",
        ("postgres",),
        lambda shop, t, p: _job(shop, {"connections": 1, "lock_table": p["table"]}),
        _restore_job,
        _same,
        lambda t: [Expectation("HighErrorRate", "catalog")],
        lambda t, p: [("stop", {"target": JOB_PROGRAM})],
        defaults={"table": "products"},
        aliases=lambda t: [JOB_PROGRAM],
    )
)
_register(
    Mechanism(
        "pool_too_small",
        "pool_exhaustion",
        ("catalog",),
        _config_change(_small_pool),
        _restore,
        _same,
        _errors,
        lambda t, p: _set_and_restart({"pool_size": 4, "pool_timeout": 1.0})(t, p),
        defaults={"pool_size": 1, "pool_timeout": 0.01},
    )
)
_register(
    Mechanism(
        "replicas_scaled_down",
        "capacity_loss",
        ("frontend",),
        lambda shop, t, p: ChangeSet(
            programs=[("stop", i) for i in topology.instances(t)[int(p["replicas"]) :]],
            target_counts={t: int(p["replicas"])},
        ),
        lambda shop, t, p: ChangeSet(
            programs=[("start", i) for i in _running_instances(t)],
            target_counts={t: topology.BY_NAME[t].replicas},
        ),
        _same,
        _errors,
        lambda t, p: [("scale", {"service": t, "replicas": topology.BY_NAME[t].replicas})],
        defaults={"replicas": 1},
    )
)
_register(
    Mechanism(
        "queue_consumer_stopped",
        "consumer_stopped",
        ("notification",),
        _config_change(_no_consumer),
        _restore,
        _same,
        lambda t: [Expectation("QueueBacklog")],
        _rollback,
    )
)
_register(
    Mechanism(
        "expired_certificate",
        "certificate_expired",
        ("payment",),
        _config_change(_lapsed_cert),
        _restore,
        _same,
        lambda t: [Expectation("UpstreamErrors", "checkout")],
        _rollback,
    )
)


def _storm_clients(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    client = _config(shop, target)
    client["timeouts"]["catalog"] = params["timeout"]
    client["retries"]["catalog"] = params["retries"]
    server = _config(shop, "catalog")
    server["max_concurrency"] = params["catalog_workers"]
    server["work_ms"] = params["catalog_work_ms"]
    first = _deploy(shop, target, client)
    second = _deploy(shop, "catalog", server)
    return ChangeSet(files=first.files + second.files, signals=first.signals + second.signals)


def _storm_recover(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    first = _restore(shop, target, params)
    second = _restore(shop, "catalog", params)
    return ChangeSet(
        files=first.files + second.files, signals=first.signals + second.signals, links={}
    )


_register(
    Mechanism(
        "retry_storm",
        "retry_storm",
        ("frontend",),
        _storm_clients,
        _storm_recover,
        _same,
        lambda t: [Expectation("UpstreamErrors", t)],
        lambda t, p: [("rollback", {"service": t}), ("rollback", {"service": "catalog"})],
        defaults={
            "timeout": 0.3,
            "retries": 4,
            "catalog_workers": 2,
            "catalog_work_ms": 100,
            "trigger_delay_ms": 500,
            "trigger_seconds": 6,
        },
        aliases=lambda t: [],
        trigger=lambda shop, t, p: ChangeSet(
            links={f"{t}->catalog": {"delay_ms": p["trigger_delay_ms"]}}
        ),
    )
)


def get(name: str) -> Mechanism:
    """The mechanism called ``name``.

    Raises:
        KeyError: unknown mechanism.
    """
    return MECHANISMS[name]


def propagation(root: str) -> list[tuple[str, str]]:
    """Edges ``(from, to)`` along which a failure of ``root`` reaches the shoppers."""
    return topology.propagation_chain(root)
