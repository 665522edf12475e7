"""The fault library: parametrized mechanisms with inject, recover, ground truth and a fix.

Every mechanism turns (target, params) into a :class:`ChangeSet` that the apply playbook plays
on the deployment; recovery is another change set. Ground truth (root-cause entity, fault type,
propagation chain, expected alerts) is derived here, so scenario files only name a mechanism,
a target and parameters. Nothing here is visible to the agent.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from itbench_sre import topology
from itbench_sre.backend import ChangeSet
from itbench_sre.embedded import JOB_PROGRAM, EmbeddedShop

from itbench import InfrastructureError

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
    "fd_leak",
    "thread_leak",
    "connection_leak",
    "clock_skew",
    "traffic_surge",
    "slow_consumer",
    "poison_message",
    "schema_migration",
    "gray_failure",
    "dns_misconfiguration",
    "partial_failure",
    "disk_full",
    "cascading_timeout",
)

#: A closed port inside every environment's block (nothing listens there).
DEAD_PORT_OFFSET = 99

Fix = list[tuple[str, dict[str, Any]]]


#: Window of the rates in signatures (ten scrapes).
RATE = "5s"


@dataclass(frozen=True)
class Check:
    """One observable condition of a fault.

    A PromQL expression that returns a sample, or a log record of a service that contains a
    text.

    A fault is observable when every check of its signature holds at once.
    """

    promql: str = ""
    log_service: str = ""
    #: The message's first wording (``app/phrases.py``); each trial words it its own way.
    log_text: str = ""
    #: What the message says, for the docs (never its wording: that varies per trial).
    log_meaning: str = ""

    def describe(self) -> str:
        """The condition as text (for the reference and the README)."""
        if self.promql:
            return f"`{self.promql}`"
        return f"a log record of `{self.log_service}` saying {self.log_meaning or 'so'}"


def errors_of(job: str, at_least: int = 3) -> Check:
    """The service answered errors recently (slow failing requests make a sparse rate)."""
    return Check(
        f'sum(increase(http_requests_total{{job="{job}",code=~"5..|401"}}[10s])) >= {at_least}'
    )


def upstream_errors(job: str, upstream: str, at_least: int = 2) -> Check:
    """Calls of ``job`` to ``upstream`` failed recently."""
    return Check(
        f'sum(increase(upstream_requests_total{{job="{job}",upstream="{upstream}",outcome="error"}}'
        f"[10s])) >= {at_least}"
    )


def upstream_slow(job: str, upstream: str, seconds: float) -> Check:
    """Calls of ``job`` to ``upstream`` take longer than ``seconds`` on average."""
    sel = f'{{job="{job}",upstream="{upstream}"}}'
    return Check(
        f"sum(rate(upstream_request_duration_seconds_sum{sel}[{RATE}])) / "
        f"sum(rate(upstream_request_duration_seconds_count{sel}[{RATE}])) > {seconds}"
    )


def unscraped(selector: str) -> Check:
    """A target of ``selector`` could not be scraped in the last seconds."""
    return Check(f"min_over_time(up{{{selector}}}[5s]) == 0")


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
        signature: The fault's observable signature (every check holds while it is active).
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
    signature: Callable[[str, dict[str, Any]], list[Check]]
    fix: Callable[[str, dict[str, Any]], Fix] | None
    summary: str
    params: tuple[Param, ...] = ()
    aliases: Callable[[str], list[str]] = lambda target: []
    trigger: Callable[[EmbeddedShop, str, dict[str, Any]], ChangeSet] | None = None
    #: What the signature means, in words (the README's table).
    observable: str = ""
    #: Whether the spread of this mechanism is measured reliably enough to score the
    #: propagation (``benchmarks/sre_retest.py``); when not, a diagnosis is judged without it.
    spread: bool = True
    #: Where the fault's spread starts, when not at its root: ``(target, params) -> entities``
    #: (the name registry's fault spreads from the service whose record broke).
    anchors: Callable[[str, dict[str, Any]], list[str]] | None = None
    #: Configuration keys (prefixes) the fault sets on its target that no routine change
    #: following it may touch (besides those no follow-up touches at all).
    keys: tuple[str, ...] = ()
    #: Configuration keys (prefixes) no routine change of any service may touch while the
    #: fault is on its target (a rotated database password needs the database up).
    held: Callable[[str], tuple[str, ...]] = lambda target: ()

    @property
    def config_cause(self) -> bool:
        """Whether the fault's cause is a configuration change (mitigation turns it back)."""
        return bool(getattr(self.inject, "config_cause", False))

    @property
    def mitigable(self) -> bool:
        """Whether the agent's tools can mitigate this fault."""
        return self.fix is not None

    @property
    def follow_up(self) -> bool:
        """Whether a routine change may follow the fault on its service.

        So it may for a configuration change of a service that a rollback mends, with no
        transient trigger.
        """
        return (
            self.fix is _rollback
            and self.trigger is None
            and all(t in topology.BY_NAME for t in self.targets)
        )

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


Injector = Callable[[EmbeddedShop, str, dict[str, Any]], ChangeSet]


def _config_cause(inject: Injector) -> Injector:
    """Mark an injector whose cause is the configuration it writes (see ``cause.py``)."""
    inject.config_cause = True  # type: ignore[attr-defined]
    return inject


def _config_change(
    mutate: Callable[[dict[str, Any], EmbeddedShop, str, dict[str, Any]], None],
) -> Injector:
    @_config_cause
    def inject(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
        cfg = _config(shop, target)
        mutate(cfg, shop, target, params)
        return _deploy(shop, target, cfg)

    return inject


def _same(target: str) -> str:
    return target


def _errors(target: str, params: dict[str, Any]) -> list[Check]:
    return [errors_of(target)]


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


#: How a wrong upstream address is wrong.
UPSTREAM_FORMS = ("address", "port", "name")


def _wrong_upstream(
    cfg: dict[str, Any], shop: EmbeddedShop, target: str, p: dict[str, Any]
) -> None:
    upstream = p["upstream"]
    right = shop.edge_addr(target, upstream).rsplit(":", 1)[1]
    dead = shop.port(DEAD_PORT_OFFSET)
    cfg["upstreams"][upstream] = {
        "address": f"127.0.0.1:{dead}",
        "port": f"{upstream}.svc:{dead}",
        "name": f"{upstream}-legacy.svc:{right}",
    }[p.get("form", "address")]


def _wrong_password(
    cfg: dict[str, Any], shop: EmbeddedShop, target: str, p: dict[str, Any]
) -> None:
    # Shaped like every password of the shop (a rotation draws one the same way).
    cfg["postgres"]["password"] = p["password"] or secrets.token_hex(8)


def _flag_key(p: dict[str, Any]) -> str:
    """The configuration name of a fault's flag in its trial (drawn; else the flag's own)."""
    return str(p.get("flag_name") or p["flag"])


def _flag_on(cfg: dict[str, Any], shop: EmbeddedShop, target: str, p: dict[str, Any]) -> None:
    cfg["flags"][_flag_key(p)] = True


def _new_release(cfg: dict[str, Any], shop: EmbeddedShop, target: str, p: dict[str, Any]) -> None:
    cfg["release"] = shop.faulty_release(target)


def _small_pool(cfg: dict[str, Any], shop: EmbeddedShop, target: str, p: dict[str, Any]) -> None:
    cfg["pool_size"] = p["pool_size"]
    cfg["pool_timeout"] = p["pool_timeout"]


def _no_consumer(cfg: dict[str, Any], shop: EmbeddedShop, target: str, p: dict[str, Any]) -> None:
    cfg["flags"][_flag_key(p)] = False


def _lapsed_cert(cfg: dict[str, Any], shop: EmbeddedShop, target: str, p: dict[str, Any]) -> None:
    cfg["serve_tls"] = {
        "cert": f"certs/{shop.certs['lapsed_cert']}",
        "key": f"certs/{shop.certs['lapsed_key']}",
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


def _edge_errors(target: str, params: dict[str, Any]) -> list[Check]:
    return [upstream_errors(*_edge_parts(target))]


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


def _flags_of(kind: dict[str, tuple[str, ...]]) -> Callable[[str], tuple[str, ...]]:
    """The flags of each target whose code paths have one effect (errors, CPU, memory)."""

    def choices(target: str) -> tuple[str, ...]:
        return kind.get(target, ())

    return choices


_ERROR_FLAGS = _flags_of(
    {"catalog": ("dynamic_pricing", "regional_prices"), "checkout": ("gift_wrap", "delivery_slots")}
)
_CPU_FLAGS = _flags_of({"currency": ("precise_rounding",), "recommendation": ("personalized",)})
_MEMORY_FLAGS = _flags_of({"cart": ("session_cache",)})


def _callees(target: str) -> tuple[str, ...]:
    """The HTTP services ``target`` calls (its datastore connections are no upstream URLs)."""
    return tuple(u for u in topology.BY_NAME[target].upstreams if u not in topology.DATASTORES)


def _fewer_replicas(target: str) -> tuple[int, ...]:
    """Replica counts below the baseline that still leave the service serving."""
    return tuple(range(1, topology.BY_NAME[target].replicas))


_FLAG_MEANING = "Feature flag turned on (a flag of the target's configuration)."
_FLAG_NAME = Param(
    "flag_name",
    str,
    "",
    "The name the flag goes by in the trial's configuration (drawn per trial; empty: the "
    "flag's own name).",
)


def _flag_fix(target: str, params: dict[str, Any]) -> Fix:
    return _set_and_restart({f"flags.{_flag_key(params)}": False})(target, params)


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
        lambda t, p: [unscraped(f'job="{t}"')],
        _rollback,
        summary="Deploys a configuration with a value the service cannot parse: every "
        "instance exits at start.",
        observable="the service's targets cannot be scraped; its instances keep restarting; "
        "its log says the configuration is invalid",
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
        lambda t, p: [unscraped(f'instance="{t}"')],
        lambda t, p: [("restart", {"target": t})],
        summary="One instance stops answering while its process stays alive, until restarted.",
        aliases=lambda t: [t],
        observable="the instance cannot be scraped while its process runs (state S) with a "
        "long uptime; its callers time out",
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
        lambda t, p: [upstream_errors(t, p["upstream"])],
        _rollback,
        summary="Deploys a configuration that points one upstream of the service at a wrong "
        "address: a closed port or a name that does not resolve.",
        observable="the service's calls to that upstream fail (connection refused, or the name "
        "does not resolve) since its configuration changed, while the upstream's other callers "
        "succeed",
        params=(
            Param(
                "upstream",
                str,
                "currency",
                "The upstream service whose address is wrong.",
                choices=_callees,
            ),
            Param(
                "form",
                str,
                "address",
                "How the address is wrong: a stale IP address (`address`), the right name on a "
                "closed port (`port`), or a retired name that does not resolve (`name`).",
                choices=lambda t: UPSTREAM_FORMS,
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
        params=(
            Param(
                "password",
                str,
                "",
                "The wrong password deployed (empty: a fresh one, shaped like the shop's).",
            ),
        ),
        observable="the service's database queries are refused at authentication since its configuration changed",
        keys=("postgres.",),
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
        _flag_fix,
        summary="Turns on a feature flag whose code path fails requests.",
        params=(
            Param("flag", str, "dynamic_pricing", _FLAG_MEANING, choices=_ERROR_FLAGS),
            _FLAG_NAME,
        ),
        observable="the service answers errors on the flag's code path since its configuration changed",
    )
)
_register(
    Mechanism(
        "bad_release",
        "bad_release",
        ("cart", "payment", "catalog", "shipping", "recommendation"),
        _config_change(_new_release),
        _restore,
        _same,
        lambda t, p: [
            errors_of(t) if t != "catalog" else upstream_slow("frontend", "catalog", 0.2)
        ],
        _rollback,
        observable="the service answers errors (catalog: slow answers) since its release changed",
        summary="Deploys the service's faulty newer release (drawn per trial among its newer "
        "releases; errors, catalog's is slow).",
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
        lambda t, p: [Check(f'max(process_resident_memory_bytes{{job="{t}"}}) > 95e6')],
        _flag_fix,
        observable="the service's resident memory climbs to its limit; the instance is killed "
        "and restarted",
        summary="Turns on a cache that grows with the traffic: the service's memory climbs.",
        params=(
            Param("flag", str, "session_cache", _FLAG_MEANING, choices=_MEMORY_FLAGS),
            _FLAG_NAME,
        ),
        spread=False,
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
        lambda t, p: [Check(f'max(rate(process_cpu_seconds_total{{job="{t}"}}[{RATE}])) > 0.3')],
        _flag_fix,
        observable="the service burns a large share of a core and answers slowly",
        summary="Turns on a feature flag whose code path burns CPU on every request.",
        params=(
            Param("flag", str, "precise_rounding", _FLAG_MEANING, choices=_CPU_FLAGS),
            _FLAG_NAME,
        ),
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
        _same,
        lambda t, p: [upstream_slow(*_edge_parts(t), 0.4)],
        None,
        summary="The mesh delays every request on one call edge.",
        params=(Param("delay_ms", float, 700, "Delay added per request, ms.", minimum=0),),
        observable="the caller's calls to the callee are slow while the callee's own latency "
        "and its other callers are normal",
    )
)
_register(
    Mechanism(
        "edge_loss",
        "packet_loss",
        _EDGES,
        _link("loss"),
        _clear_links,
        _same,
        _edge_errors,
        None,
        summary="The mesh drops a share of the connections on one call edge.",
        params=(Param("loss", float, 0.6, "Share of connections dropped.", minimum=0, maximum=1),),
        observable="a share of the caller's calls to the callee fail (connection closed) while "
        "the callee serves its other callers",
    )
)
_register(
    Mechanism(
        "edge_reset",
        "connection_reset",
        _EDGES,
        _link("reset"),
        _clear_links,
        _same,
        _edge_errors,
        None,
        summary="The mesh resets a share of the connections on one call edge.",
        params=(Param("reset", float, 0.6, "Share of connections reset.", minimum=0, maximum=1),),
        observable="a share of the caller's calls to the callee fail (connection reset) while "
        "the callee serves its other callers",
    )
)
_register(
    Mechanism(
        "network_partition",
        "network_partition",
        _EDGES,
        _link("cut"),
        _clear_links,
        _same,
        _edge_errors,
        None,
        summary="The mesh cuts one call edge: requests vanish and the caller times out.",
        observable="every call of the caller to the callee times out; the callee sees none of them",
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
        lambda t, p: [errors_of("cart")],
        lambda t, p: [("start", {"target": "redis"})],
        observable="Redis is stopped; its clients' calls fail (connection refused)",
        summary="Stops Redis.",
    )
)
#: A client of each datastore whose errors show it is gone.
_CLIENT = {"redis": "cart", "postgres": "catalog"}
_register(
    Mechanism(
        "datastore_down",
        "datastore_down",
        topology.DATASTORES,
        lambda shop, t, p: ChangeSet(programs=[("stop", t)]),
        lambda shop, t, p: ChangeSet(programs=[("start", t)]),
        _same,
        lambda t, p: [errors_of(_CLIENT[t])],
        lambda t, p: [("start", {"target": t})],
        observable="one datastore is stopped; its clients' calls to it fail (connection refused) "
        "while the other datastore serves",
        summary="Stops a datastore (Redis or PostgreSQL).",
        held=lambda t: ("postgres.",) if t == "postgres" else (),
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
        lambda t, p: [errors_of("cart")],
        lambda t, p: [("restart", {"target": "redis"})],
        observable="Redis refuses writes for want of memory, in its clients' logs",
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
        lambda t, p: [errors_of("catalog")],
        lambda t, p: [("stop", {"target": JOB_PROGRAM})],
        summary=f"The batch job `{JOB_PROGRAM}` holds many PostgreSQL sessions and exhausts "
        "the server's connection slots.",
        observable="PostgreSQL's clients fail to connect for want of connection slots while no service's "
        "open files grow",
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
        lambda t, p: [errors_of("catalog")],
        lambda t, p: [("stop", {"target": JOB_PROGRAM})],
        summary=f"The batch job `{JOB_PROGRAM}` holds an exclusive lock on a table, so "
        "queries on it wait.",
        observable="queries on the locked table time out in the catalog's log; its pool stays busy",
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
        observable="the service's database pool is always in use and requests fail waiting for a connection",
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
        observable="fewer replicas than usual run; they refuse requests beyond their capacity",
        spread=False,
    )
)
_register(
    Mechanism(
        "queue_consumer_stopped",
        "consumer_stopped",
        tuple(topology.QUEUES),
        _config_change(_no_consumer),
        _restore,
        _same,
        lambda t, p: [Check(f'max(queue_depth{{queue="{topology.QUEUES[t]}"}}) > 6')],
        _rollback,
        observable="one work queue grows and nothing consumes it; shoppers are unaffected",
        summary="Deploys a configuration of a queue's consumer with the flag that runs its "
        "consumer switched off: the queue backs up.",
        params=(
            Param(
                "flag",
                str,
                "queue_consumer",
                "The flag that runs the consumer (switched off).",
                choices=lambda t: topology.SERVING_FLAGS.get(t, ()),
            ),
            _FLAG_NAME,
        ),
        spread=False,
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
        lambda t, p: [upstream_errors("checkout", "payment")],
        _rollback,
        observable="checkout's calls to payment fail the TLS handshake (certificate expired)",
        summary="Deploys a lapsed TLS certificate: the service's callers fail the handshake.",
    )
)


@_config_cause
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
        lambda t, p: [upstream_errors(t, "catalog")],
        lambda t, p: [("rollback", {"service": t}), ("rollback", {"service": "catalog"})],
        observable="the service's calls to catalog keep timing out and being retried after the "
        "transient slowdown ended",
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
        # The storm overloads catalog: its failure spreads from there to its callers.
        anchors=lambda t, p: [t, "catalog"],
    )
)


# --- resource leaks, hangs, time, traffic, queues, schema, replicas, names -------------------


def _targets_with(flag: str) -> tuple[str, ...]:
    return tuple(s for s, flags in topology.FLAGS.items() if flag in flags)


_register(
    Mechanism(
        "deadlock",
        "process_hang",
        ("currency-0", "catalog-0", "shipping-0", "payment-0", "cart-0", "cart-1"),
        # The diagnostics signal switches on detailed request statistics, whose lock order
        # is the reverse of their flusher's: the request workers deadlock within moments.
        lambda shop, t, p: ChangeSet(signals=[(t, "USR1")]),
        lambda shop, t, p: ChangeSet(programs=[("restart", t)]),
        lambda t: t.rsplit("-", 1)[0],
        lambda t, p: [
            Check(f'inflight_requests{{instance="{t}"}} > 3'),
            # A counter series exists only once a request completed: an instance that deadlocks
            # before its first answer has none, and a scraped instance without one serves 0/s.
            Check(
                f'(sum(rate(http_requests_total{{instance="{t}"}}[{RATE}])) '
                f'or sum(up{{instance="{t}"}} == 1) * 0) < 0.05'
            ),
        ],
        lambda t, p: [("restart", {"target": t})],
        summary="The request workers of one instance deadlock on two locks; the process "
        "lives, sleeps and still answers its metrics endpoint.",
        aliases=lambda t: [t],
        observable="the instance is scraped (up) but serves no request: its in-flight requests "
        "pile up and its request rate drops to zero; callers time out",
    )
)


def _flag_leak(
    name: str, flag: str, signature: Callable[[str], list[Check]], summary: str, observable: str
) -> Mechanism:
    """A leak that a flag turns on (its fix: the flag off and a restart)."""
    return Mechanism(
        name,
        name,
        _targets_with(flag),
        _config_change(_flag_on),
        _restore,
        _same,
        lambda t, p: signature(t),
        _flag_fix,
        summary=summary,
        params=(Param("flag", str, flag, _FLAG_MEANING, choices=lambda t: (flag,)), _FLAG_NAME),
        observable=observable,
        # Observable by its resource long before calls fail: nothing to measure at handover.
        spread=False,
    )


_register(
    _flag_leak(
        "fd_leak",
        "audit_trail",
        # Over the last two minutes: a busy service can exhaust its descriptors within
        # seconds, and one that has cannot answer a scrape any more.
        lambda t: [
            Check(
                f'max(max_over_time(process_open_fds{{job="{t}"}}[2m]) '
                f'/ max_over_time(process_max_fds{{job="{t}"}}[2m])) > 0.6'
            )
        ],
        "Turns on an audit trail that opens files per request and never closes them: the "
        "service runs out of file descriptors.",
        "the service's open file descriptors climb to its limit; then it fails to accept "
        "connections and to reach its datastores",
    )
)
_register(
    _flag_leak(
        "thread_leak",
        "background_refresh",
        lambda t: [Check(f'max(process_threads{{job="{t}"}}) > 120')],
        "Turns on a background refresh that starts a thread per request and never ends it: "
        "threads pile up and compete for the interpreter.",
        "the service's thread count climbs without bound; its CPU and latency rise",
    )
)
_register(
    _flag_leak(
        "connection_leak",
        "statement_cache",
        lambda t: [Check(f'max(process_open_fds{{job="{t}"}}) > 36'), errors_of(t)],
        "Turns on a statement cache that opens a database session per request and keeps it: "
        "PostgreSQL runs out of connection slots for every client.",
        "the leaking service's open descriptors (its sessions) grow; every database client "
        "then fails to connect for want of connection slots",
    )
)


def _skew(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    return ChangeSet(
        files=[(f"shop:run/clock/{target}", f"{float(params['offset_s'])}\n")],
        signals=[(target, "USR2")],
    )


_register(
    Mechanism(
        "clock_skew",
        "clock_skew",
        ("checkout-0", "payment-0", "shipping-0", "recommendation-0", "frontend-0"),
        _skew,
        lambda shop, t, p: ChangeSet(programs=[("restart", t)]),
        lambda t: t.rsplit("-", 1)[0],
        lambda t, p: [
            Check(
                f'sum(rate(http_requests_total{{instance="{t}",code="401"}}[{RATE}])) > 0.1 or '
                f'sum(rate(upstream_requests_total{{instance="{t}",outcome="error"}}[{RATE}]))'
                " > 0.1"
            )
        ],
        lambda t, p: [("restart", {"target": t})],
        summary="The instance's clock jumps by `offset_s`: it refuses its callers' requests, and "
        "the services it calls refuse its own, as dated outside the allowed window (until a "
        "restart re-syncs it).",
        params=(
            Param(
                "offset_s", float, 320, "Clock step, seconds (beyond the 30 s window).", minimum=31
            ),
        ),
        aliases=lambda t: [t],
        observable="the instance answers 401 to its callers and its own upstream calls get 401 "
        "(their dates outside its allowed window) while everything else is served; its log "
        "timestamps are off by the step",
    )
)


def _surge(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    cfg = json.loads(shop.read_private("loadgen.json"))
    cfg["rate"] = round(shop.workload_rate * float(params["factor"]), 2)
    return ChangeSet(files=[("ctl:loadgen.json", json.dumps(cfg))])


def _surge_end(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    cfg = json.loads(shop.read_private("loadgen.json"))
    cfg["rate"] = shop.workload_rate
    return ChangeSet(files=[("ctl:loadgen.json", json.dumps(cfg))])


_register(
    Mechanism(
        "traffic_surge",
        "traffic_surge",
        ("frontend",),
        _surge,
        _surge_end,
        _same,
        lambda t, p: [
            Check(f'sum(rate(http_requests_total{{job="{t}",code="503"}}[{RATE}])) > 0.3')
        ],
        lambda t, p: [("scale", {"service": t, "replicas": topology.BY_NAME[t].max_replicas})],
        summary="The shoppers' traffic grows by `factor`: the service's replicas shed what "
        "exceeds their capacity.",
        params=(Param("factor", float, 2.0, "Traffic multiplier.", minimum=1.5, maximum=2.4),),
        observable="the service's request rate rises well above its usual level and it sheds "
        "load (refuses requests beyond its capacity) on every replica",
        spread=False,
    )
)
_register(
    Mechanism(
        "slow_consumer",
        "slow_consumer",
        ("notification",),
        _config_change(_new_release),
        _restore,
        _same,
        lambda t, p: [Check(f'max(queue_depth{{queue="{topology.QUEUES[t]}"}}) > 4')],
        _rollback,
        summary="Deploys the consumer's newest release, which takes most of a second per "
        "message: it keeps consuming, slower than orders arrive.",
        observable="the order queue grows while the consumer keeps handling messages, slower "
        "than checkout produces them",
        spread=False,
    )
)


def _poison(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    return ChangeSet(redis_commands=[["LPUSH", topology.QUEUES[target], '{"order": "', "x"]])


_register(
    Mechanism(
        "poison_message",
        "poison_message",
        tuple(topology.QUEUES),
        _poison,
        lambda shop, t, p: ChangeSet(
            redis_commands=[["DEL", f"{topology.QUEUES[t]}:processing"]],
            programs=[("restart", t)],
        ),
        _same,
        # The log, not the scrapes: a consumer that dies on its first message lives too
        # briefly to be scraped between restarts.
        lambda t, p: [
            Check(
                log_service=t,
                log_text="cannot read order message",
                log_meaning="its consumer cannot read a queued order message",
            )
        ],
        lambda t, p: _set_and_restart({"dead_letter": True})(t, p),
        summary="An unreadable message reaches a work queue: its consumer exits on it, "
        "finds it again at every start and never gets past it.",
        observable="a queue's consumer restarts again and again, each time logging that it "
        "cannot read a queued message",
        spread=False,
    )
)
_RENAMES = {
    "orders": ("shipping_cents", "shipping_fee_cents"),
    "products": ("price_cents", "price"),
}


def _migrate(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    old, new = _RENAMES[params["table"]]
    return ChangeSet(sql=[f"ALTER TABLE {params['table']} RENAME COLUMN {old} TO {new}"])


def _unmigrate(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    old, new = _RENAMES[params["table"]]
    return ChangeSet(sql=[f"ALTER TABLE {params['table']} RENAME COLUMN {new} TO {old}"])


_register(
    Mechanism(
        "schema_migration",
        "schema_migration",
        ("postgres",),
        _migrate,
        _unmigrate,
        _same,
        lambda t, p: [errors_of("checkout" if p["table"] == "orders" else "catalog")],
        None,
        summary="A schema migration renames a column that a service's queries still use.",
        params=(
            Param(
                "table",
                str,
                "orders",
                "Table migrated (orders breaks checkout's inserts, products catalog's reads).",
                choices=lambda t: tuple(_RENAMES),
            ),
        ),
        observable="the queries of the table's users fail against a table whose shape "
        "changed under them; no service's configuration or release changed",
    )
)


def _slow_path(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    return ChangeSet(
        links={f"@127.0.0.1:{shop.instance_port(target)}": {"delay_ms": params["delay_ms"]}}
    )


_register(
    Mechanism(
        "gray_failure",
        "gray_failure",
        ("cart-0", "cart-1", "frontend-0", "frontend-1"),
        _slow_path,
        _clear_links,
        lambda t: t.rsplit("-", 1)[0],
        lambda t, p: (
            [upstream_slow("checkout" if t.startswith("cart") else "loadgen", "cart", 0.1)]
            if t.startswith("cart")
            else [
                Check(
                    "histogram_quantile(0.9, sum by (le) (rate(loadgen_request_duration_seconds_bucket[5s]))) > 0.3"
                )
            ]
        ),
        None,
        summary="The path to one replica is slow while the replica is healthy by its own "
        "metrics (its served latency, errors, CPU and memory are normal).",
        params=(
            Param("delay_ms", float, 280, "Delay on the path to the replica, ms.", minimum=50),
        ),
        aliases=lambda t: [t],
        observable="callers see about half of their calls to the service take longer, while the "
        "service's own latency histogram is normal; traces show the gap between the caller's "
        "client span and the replica's server span; no alert fires",
    )
)


def _flapping(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    return ChangeSet(links={target: {"reset": params["reset"], "flap_s": params["period_s"]}})


_register(
    Mechanism(
        "flapping_link",
        "connection_reset",
        _EDGES,
        _flapping,
        _clear_links,
        _same,
        _edge_errors,
        None,
        summary="One call edge resets most connections every other `period_s` seconds: the "
        "failure comes and goes.",
        params=(
            Param(
                "reset", float, 0.7, "Share of connections reset while on.", minimum=0, maximum=1
            ),
            Param("period_s", float, 8, "Seconds on, then as many off.", minimum=2),
        ),
        observable="the caller's calls to the callee fail in bursts that start and stop; "
        "alerts fire and resolve in turn",
        spread=False,
    )
)


@_config_cause
def _dns(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    records = json.loads(shop.read_config(topology.DNS))
    name = f"{params['name']}.svc"
    if params["record"] == "missing":
        records["records"].pop(name, None)
    else:
        records["records"][name] = "127.0.0.2"
    return ChangeSet(files=[(topology.DNS, json.dumps(records, indent=2) + "\n")])


def _undns(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    return ChangeSet(files=[(topology.DNS, json.dumps(shop.dns_records(), indent=2) + "\n")])


def _callers(name: str) -> list[str]:
    return [c for c, u in topology.edges() if u == name]


_register(
    Mechanism(
        "dns_misconfiguration",
        "dns_misconfiguration",
        (topology.DNS,),
        _dns,
        _undns,
        _same,
        lambda t, p: [upstream_errors(c, p["name"]) for c in _callers(p["name"])[:1]],
        lambda t, p: [("rollback", {"service": topology.DNS})],
        summary="A change of the name registry drops a service's record or points it at a "
        "wrong address: its callers cannot reach it.",
        params=(
            Param(
                "name",
                str,
                "payment",
                "The service whose name record changes.",
                choices=lambda t: tuple(s.name for s in topology.SERVICES if _callers(s.name)),
            ),
            Param(
                "record",
                str,
                "wrong",
                "`wrong` (a wrong address) or `missing` (no record).",
                choices=lambda t: ("wrong", "missing"),
            ),
        ),
        observable="every caller of one service fails to reach it (name does not resolve, or "
        "connection refused) while the service itself is healthy",
        anchors=lambda t, p: [str(p["name"])],
    )
)


def _rotate(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    """A Redis password rotation whose rollout restarted every client instance but ``target``."""
    secret = str(params["password"])
    files = []
    signals = []
    for service in ("cart", "checkout", "notification"):
        cfg = _config(shop, service)
        cfg["redis_password"] = secret
        files.append((service, _dump(cfg)))
        signals += [(i, "TERM") for i in _running_instances(service) if i != target]
    return ChangeSet(
        # Sessions opened before the rotation stay authenticated until they are dropped.
        redis_commands=[
            ["CONFIG", "SET", "requirepass", secret],
            ["-a", secret, "--no-auth-warning", "CLIENT", "KILL", "TYPE", "normal"],
        ],
        files=files,
        signals=signals,
    )


def _unrotate(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    restored = [_restore(shop, s, params) for s in ("cart", "checkout", "notification")]
    return ChangeSet(
        redis_commands=[["-a", str(params["password"]), "CONFIG", "SET", "requirepass", ""]],
        files=[f for r in restored for f in r.files],
        signals=[x for r in restored for x in r.signals],
    )


_register(
    Mechanism(
        "partial_rollout",
        "partial_failure",
        ("cart-0", "cart-1"),
        _rotate,
        _unrotate,
        lambda t: t.rsplit("-", 1)[0],
        lambda t, p: [
            Check(
                f'sum(increase(upstream_requests_total{{instance="{t}",upstream="redis",'
                'outcome="error"}[10s])) >= 1'
            )
        ],
        lambda t, p: [("restart", {"target": t})],
        summary="A Redis password rotation is rolled out to every client instance but one: "
        "that replica of two keeps the old credentials and fails its requests.",
        params=(Param("password", str, "rotated-7f3a", "The new Redis password."),),
        aliases=lambda t: [t],
        observable="one replica of the service fails its Redis calls (authentication required) "
        "while the other serves; the service's error rate is about half its traffic",
    )
)


#: The service that writes to the shared data volume (its order receipts).
WRITER = "checkout"


def _fill(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    """A crash dump left on the data volume, as large as the space left."""
    if not shop.data_quota:
        raise InfrastructureError("a full disk needs the data volume's quota (run as root)")
    data = shop.shop / "data"
    dump = data / f"{target}-0" / "core.1.dump"
    # The space left is read when the dump is written, and the shop keeps writing meanwhile:
    # a smaller dump, with more room left, if one does not fit.
    fill = (
        "for margin in 2048 65536 262144 1048576; do "
        f'n=$(( $(stat -f -c "%a*%S" {data}) - margin )); '
        f'[ "$n" -gt 0 ] && fallocate -l "$n" {dump} && exit 0; '
        "done; exit 1"
    )
    return ChangeSet(commands=[["mkdir", "-p", str(dump.parent)], ["sh", "-c", fill]])


def _unfill(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    return ChangeSet(
        commands=[["rm", "-f", str(shop.shop / "data" / f"{target}-0" / "core.1.dump")]]
    )


_register(
    Mechanism(
        "disk_full",
        "disk_full",
        tuple(s.name for s in topology.SERVICES),
        _fill,
        _unfill,
        _same,
        lambda t, p: [
            Check(f'min(disk_free_bytes{{job="{WRITER}"}}) < 65536'),
            Check(f'max(data_used_bytes{{instance="{t}-0"}}) > 1048576'),
            errors_of(WRITER, 2),
        ],
        lambda t, p: [("restart", {"target": t})],
        summary="A crash dump the service left behind fills the shop's shared data volume: the "
        "service that writes to it (the order receipts) fails for want of space until the "
        "dump's owner restarts and removes its stale dump.",
        observable="the shared data volume's free space is near zero and its writer's writes "
        "fail for want of space, while one instance's own files take the volume",
        anchors=lambda t, p: [WRITER],
    )
)
_register(
    Mechanism(
        "cascading_timeout",
        "cascading_timeout",
        ("currency",),
        _config_change(_new_release),
        _restore,
        _same,
        lambda t, p: [upstream_slow("payment", t, 0.4)],
        _rollback,
        summary="Deploys the service's faulty newer release, which answers in most of a second: "
        "below its own latency alert, but its callers' chained calls exceed their callers' "
        "timeouts, which fail and retry up the chain.",
        observable="the deepest service is slower (within its own alert), its callers slower "
        "still, and the callers at the top of the chain time out; the alerts fire above the "
        "cause",
    )
)


def get(name: str) -> Mechanism:
    """The mechanism called ``name``.

    Raises:
        KeyError: unknown mechanism.
    """
    return MECHANISMS[name]


def propagation(root: str) -> list[tuple[str, str]]:
    """Edges ``(from, to)`` along which a failure of ``root`` can reach the shoppers.

    A link ``a->b`` fails its caller first: ``(b, a)``, then up from ``a``.
    """
    edge = topology.parse_edge(root)
    if edge is not None:
        return [(edge[1], edge[0]), *topology.propagation_chain(edge[0])]
    return topology.propagation_chain(root)
