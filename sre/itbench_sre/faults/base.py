"""The fault library's types and helpers: checks, parameters, mechanisms, the registry."""

from __future__ import annotations

import json
import secrets
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
    "memory_limit",
    "cpu_throttling",
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


def _targets_with(*flags: str) -> tuple[str, ...]:
    """The services that have every one of ``flags`` (flags with a fault behind them)."""
    return tuple(s for s, have in topology.FLAGS.items() if all(f in have for f in flags))


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
