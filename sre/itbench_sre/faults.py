"""The fault library: parametrized mechanisms with inject, recover, ground truth and a fix.

Every mechanism turns (target, params) into a :class:`ChangeSet` that the apply playbook plays
on the deployment; recovery is another change set. Ground truth (root-cause entity, fault type,
propagation chain, expected alerts) is derived here, so scenario files only name a mechanism,
a target and parameters. Nothing here is visible to the agent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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


#: How the reference and the error messages name a parameter's type.
TYPE_NAMES: dict[type, str] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    object: "any",
}


@dataclass(frozen=True)
class Param:
    """One parameter of a mechanism.

    Attributes:
        name: Key in a fault's ``params``.
        kind: Its type: ``bool``, ``int``, ``float`` (integers accepted), ``str`` or ``object``
            (anything).
        default: Value used when the scenario does not set it.
        meaning: What it changes.
        minimum: Smallest valid number, if bounded.
        maximum: Largest valid number, if bounded.
        choices: The valid values for a target, when only some values make the fault work.
    """

    name: str
    kind: type
    default: Any
    meaning: str
    minimum: float | None = None
    maximum: float | None = None
    choices: Callable[[str], tuple[Any, ...]] | None = None

    @property
    def type_name(self) -> str:
        """The type's name in the reference and in errors."""
        return TYPE_NAMES[self.kind]

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` has this parameter's type (``True`` is no number)."""
        if self.kind is object:
            return True
        if isinstance(value, bool):
            return self.kind is bool
        if self.kind is float:
            return isinstance(value, int | float)
        return isinstance(value, self.kind)

    def bounds(self) -> str:
        """The bounds as text (``>= 0, <= 1``), empty when unbounded."""
        parts = []
        if self.minimum is not None:
            parts.append(f">= {self.minimum:g}")
        if self.maximum is not None:
            parts.append(f"<= {self.maximum:g}")
        return ", ".join(parts)

    def problem(self, mechanism: str, target: str, value: Any) -> str | None:
        """Why ``value`` is not valid for this parameter on ``target``, or ``None``."""
        where = f"parameter {self.name!r} of {mechanism}"
        if not self.accepts(value):
            return f"{where} must be {self.type_name}, got {value!r} ({type(value).__name__})"
        low, high = self.minimum, self.maximum
        if (low is not None and value < low) or (high is not None and value > high):
            return f"{where} must be {self.bounds()}, got {value!r}"
        if self.choices is not None:
            valid = self.choices(target)
            if value not in valid:
                listed = ", ".join(repr(v) for v in valid) or "none"
                return f"{where} on {target} must be one of {listed}, got {value!r}"
        return None


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
        summary: What the fault does to the shop (for scenario authors).
        params: The parameters a scenario may set, each with its default.
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
    summary: str
    params: tuple[Param, ...] = ()
    aliases: Callable[[str], list[str]] = lambda target: []
    trigger: Callable[[EmbeddedShop, str, dict[str, Any]], ChangeSet] | None = None

    @property
    def mitigable(self) -> bool:
        """Whether the agent's tools can mitigate this fault."""
        return self.fix is not None

    @property
    def defaults(self) -> dict[str, Any]:
        """Default value of every parameter."""
        return {p.name: p.default for p in self.params}

    def param_problems(self, target: str, params: Mapping[str, Any]) -> list[str]:
        """Why ``params`` (a fault's own, defaults filled in) are not valid on ``target``."""
        known = {p.name: p for p in self.params}
        valid = ", ".join(known) or "none"
        problems = [
            f"unknown parameter {name!r} for {self.name} (valid: {valid})"
            for name in params
            if name not in known
        ]
        for p in self.params:
            problem = p.problem(self.name, target, params.get(p.name, p.default))
            if problem is not None:
                problems.append(problem if p.name in params else f"{problem} (the default)")
        return problems


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


def _flags(target: str) -> tuple[str, ...]:
    return topology.FLAGS.get(target, ())


def _callees(target: str) -> tuple[str, ...]:
    """The HTTP services ``target`` calls (its datastore connections are no upstream URLs)."""
    return tuple(u for u in topology.BY_NAME[target].upstreams if u not in topology.DATASTORES)


def _fewer_replicas(target: str) -> tuple[int, ...]:
    """Replica counts below the baseline that still leave the service serving."""
    return tuple(range(1, topology.BY_NAME[target].replicas))


_FLAG_MEANING = "Feature flag turned on (a flag of the target's configuration)."

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
        summary="Deploys a configuration with a value the service cannot parse: every "
        "instance exits at start.",
        params=(
            Param("key", str, "pool_size", "Top-level configuration key that is overwritten."),
            Param("value", object, "eight", "The unparseable value written to `key`."),
        ),
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
        summary="One instance stops answering while its process stays alive, until restarted.",
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
        summary="Deploys a configuration that points one upstream of the service at a closed port.",
        params=(
            Param(
                "upstream",
                str,
                "currency",
                "The upstream service whose address is wrong.",
                choices=_callees,
            ),
        ),
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
        summary="Deploys a configuration with a wrong PostgreSQL password: the service's "
        "database queries fail.",
        params=(Param("password", str, "shop-sandbox-pw-2", "The wrong password deployed."),),
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
        summary="Turns on a feature flag whose code path fails requests.",
        params=(Param("flag", str, "dynamic_pricing", _FLAG_MEANING, choices=_flags),),
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
        summary="Deploys the service's newest release, which is faulty (errors; catalog's is "
        "slow).",
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
        summary="Turns on a cache that grows with the traffic: the service's memory climbs.",
        params=(Param("flag", str, "session_cache", _FLAG_MEANING, choices=_flags),),
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
        summary="Turns on a feature flag whose code path burns CPU on every request.",
        params=(Param("flag", str, "precise_rounding", _FLAG_MEANING, choices=_flags),),
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
        summary="The mesh delays every request on one call edge.",
        params=(Param("delay_ms", float, 700, "Delay added per request, ms.", minimum=0),),
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
        summary="The mesh drops a share of the connections on one call edge.",
        params=(Param("loss", float, 0.6, "Share of connections dropped.", minimum=0, maximum=1),),
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
        summary="The mesh resets a share of the connections on one call edge.",
        params=(Param("reset", float, 0.6, "Share of connections reset.", minimum=0, maximum=1),),
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
        summary="The mesh cuts one call edge: requests vanish and the caller times out.",
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
        summary="Stops Redis.",
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
        summary="Fills Redis past its memory limit (no eviction): its writes fail.",
        params=(Param("megabytes", int, 72, "Data written, MB (in steps of 8).", minimum=8),),
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
        summary=f"The batch job `{JOB_PROGRAM}` holds many PostgreSQL sessions and exhausts "
        "the server's connection slots.",
        params=(Param("connections", int, 40, "Sessions the job keeps open.", minimum=1),),
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
        summary=f"The batch job `{JOB_PROGRAM}` holds an exclusive lock on a table, so "
        "queries on it wait.",
        params=(
            Param(
                "table",
                str,
                "products",
                "Table locked (the expected alert is catalog's, which reads `products`).",
            ),
        ),
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
        summary="Deploys a configuration with a tiny database pool and acquire timeout.",
        params=(
            Param("pool_size", int, 1, "Connections in the pool.", minimum=1),
            Param("pool_timeout", float, 0.01, "Pool acquire timeout, seconds.", minimum=0),
        ),
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
        summary="Stops replicas of the service: the rest cannot carry the load.",
        params=(
            Param(
                "replicas",
                int,
                1,
                "Replicas left running (fewer than the baseline, at least one).",
                choices=_fewer_replicas,
            ),
        ),
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
        summary="Deploys a configuration with the queue consumer off: the queue backs up.",
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
        summary="Deploys a lapsed TLS certificate: the service's callers fail the handshake.",
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
        summary="Gives the service short timeouts and many retries towards catalog and shrinks "
        "catalog's capacity; a transient delay on the edge starts a retry storm that outlives "
        "it.",
        params=(
            Param("timeout", float, 0.3, "The service's timeout for catalog, seconds.", minimum=0),
            Param("retries", int, 4, "The service's retries towards catalog.", minimum=0),
            Param("catalog_workers", int, 2, "Requests catalog serves at once.", minimum=1),
            Param("catalog_work_ms", int, 100, "Catalog's work per request, ms.", minimum=0),
            Param("trigger_delay_ms", int, 500, "Transient edge delay, ms.", minimum=0),
            Param("trigger_seconds", float, 6, "How long the edge delay lasts.", minimum=0),
        ),
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
