"""The shop's static topology: services, replicas, call edges, port layout and entity aliases."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from itbench_sre.app.queues import QUEUES as QUEUES

#: Datastores and infrastructure entities that are not HTTP services of the shop.
DATASTORES = ("redis", "postgres")
MONITORING = ("prometheus", "loadgen")
MESH = "mesh"
#: The shop's name registry (a configuration entity: names of upstreams to addresses).
DNS = "dns"
EDGE_SEP = "->"
#: The shop's batch job (a report exporter working on the database); not a baseline service.
JOB = "reports"


@dataclass(frozen=True)
class ServiceDef:
    """One service of the shop.

    Attributes:
        name: Service name (also its Prometheus job).
        replicas: Replicas running in the baseline deployment.
        max_replicas: Replicas the deployment can scale to.
        upstreams: Services and datastores it calls.
        releases: Releases available for deployment, oldest first: the first is deployed, the
            last is the next minor release.
        patch: A routine patch release of the deployed one (always compatible).
    """

    name: str
    replicas: int
    max_replicas: int
    upstreams: tuple[str, ...]
    releases: tuple[str, ...]
    patch: str = ""


SERVICES: tuple[ServiceDef, ...] = (
    ServiceDef(
        "frontend",
        2,
        3,
        ("catalog", "recommendation", "cart", "checkout"),
        ("3.1.0", "3.2.0"),
        "3.1.1",
    ),
    ServiceDef("catalog", 1, 2, ("postgres",), ("1.7.2", "1.8.0"), "1.7.3"),
    ServiceDef("recommendation", 1, 2, ("catalog",), ("0.9.0", "0.9.1"), "0.9.0.1"),
    ServiceDef("cart", 2, 3, ("redis",), ("2.0.3", "2.1.0"), "2.0.4"),
    ServiceDef(
        "checkout",
        1,
        2,
        ("cart", "payment", "shipping", "currency", "postgres", "redis"),
        ("4.0.1", "4.1.0"),
        "4.0.2",
    ),
    ServiceDef("payment", 1, 2, ("currency",), ("2.3.1", "2.4.0"), "2.3.2"),
    ServiceDef("shipping", 1, 2, ("currency",), ("1.2.0", "1.3.0"), "1.2.1"),
    ServiceDef("currency", 1, 2, (), ("5.0.0", "5.1.0"), "5.0.1"),
    ServiceDef("notification", 1, 1, ("redis", "postgres"), ("1.0.4", "1.1.0"), "1.0.5"),
)

BY_NAME: dict[str, ServiceDef] = {s.name: s for s in SERVICES}


def _bump(release: str) -> str:
    """The release after ``release`` in its last component (``2.1.0`` -> ``2.1.1``)."""
    head, _, last = release.rpartition(".")
    return f"{head}.{int(last) + 1}"


def candidates(service: str) -> tuple[str, ...]:
    """The newer releases a service can deploy: its patch, the next minor and its patch.

    Each trial draws which one of them is faulty (the others work), so a release's number
    says nothing about it; without a draw, the next minor is.
    """
    sdef = BY_NAME[service]
    return (sdef.patch, sdef.releases[-1], _bump(sdef.releases[-1]))


#: Flags on in every baseline deployment: shipped features whose code paths work (a flag that is
#: on is no cause by itself).
ROUTINE_FLAGS: dict[str, tuple[str, ...]] = {
    "frontend": ("promo_banner", "new_header"),
    "catalog": ("search_suggestions",),
    "cart": ("saved_for_later",),
    "currency": ("rate_cache",),
    "recommendation": ("trending_first",),
    "checkout": ("address_autocomplete",),
    "payment": ("receipt_email",),
    "shipping": ("eco_option",),
    "notification": ("digest_mode",),
}

#: Feature flags of each service's configuration with a fault behind them (all off in the
#: baseline deployment).
FLAGS: dict[str, tuple[str, ...]] = {
    "catalog": (
        "dynamic_pricing",
        "regional_prices",
        "audit_trail",
        "statement_cache",
        "lock_products",
        "lock_orders",
    ),
    "cart": ("session_cache", "audit_trail", "background_refresh", "redis_snapshots"),
    "currency": ("precise_rounding", "background_refresh"),
    "recommendation": ("personalized", "background_refresh"),
    "checkout": (
        "gift_wrap",
        "delivery_slots",
        "audit_trail",
        "redis_snapshots",
        "lock_products",
        "lock_orders",
    ),
    "payment": ("audit_trail",),
    "shipping": ("background_refresh",),
    "notification": ("redis_snapshots", "lock_products", "lock_orders"),
}

#: Flags each service ships on that keep a part of it running: switched off, that part stops
#: (each work queue's consumer). Under a drawn name like every flag, so
#: switching one off looks like switching a routine flag off.
SERVING_FLAGS: dict[str, tuple[str, ...]] = {service: ("queue_consumer",) for service in QUEUES}

#: Flags each service ships off that do nothing when switched on (a harmless new feature).
DORMANT_FLAGS: dict[str, tuple[str, ...]] = {
    s.name: (f"{s.name}_dormant_1", f"{s.name}_dormant_2") for s in SERVICES
}

#: The names a flag goes by in a service's configuration. Each trial draws, for each service,
#: a distinct name for each of its flags (routine, dormant and those with a fault behind them):
#: a name says nothing about what the flag does, and a name that is harmless in one trial is
#: the fault's in another.
FLAG_NAMES: tuple[str, ...] = (
    "adaptive_sizing",
    "async_writes",
    "batch_mode",
    "beta_search",
    "bundle_offers",
    "compact_payloads",
    "deep_links",
    "edge_prefetch",
    "express_lane",
    "fast_path",
    "geo_routing",
    "instant_quotes",
    "lazy_images",
    "live_refresh",
    "loyalty_points",
    "quick_view",
    "request_journal",
    "rich_receipts",
    "smart_cache",
    "tiered_rates",
    "v2_renderer",
    "warm_start",
    "wishlist_sync",
    "zero_copy",
)


def flags_of(service: str) -> tuple[str, ...]:
    """Every flag of a service by its own name: routine, serving, with a fault behind it, dormant."""
    return (
        *ROUTINE_FLAGS[service],
        *SERVING_FLAGS.get(service, ()),
        *FLAGS.get(service, ()),
        *DORMANT_FLAGS[service],
    )


# --- port layout inside a trial's block ---------------------------------------------------
PORTS_PER_ENV = 100
PROMETHEUS, REDIS, POSTGRES, LOADGEN, MESH_METRICS, PROM_API = 0, 1, 2, 3, 4, 5
_INSTANCE_BASE = 10
_EDGE_BASE = 50


def instances(service: str, count: int | None = None) -> list[str]:
    """Instance names ``<service>-<i>`` of a service (all possible replicas by default)."""
    sdef = BY_NAME[service]
    n = sdef.max_replicas if count is None else count
    return [f"{service}-{i}" for i in range(n)]


def all_instances() -> list[str]:
    """Every possible instance of every service, in a stable order."""
    return [i for s in SERVICES for i in instances(s.name)]


def instance_offset(instance: str) -> int:
    """Port offset of a service instance."""
    return _INSTANCE_BASE + all_instances().index(instance)


def edges() -> list[tuple[str, str]]:
    """Every call edge ``(caller, callee)``; each runs through its own mesh port."""
    return [(s.name, u) for s in SERVICES for u in s.upstreams]


def edge_offset(caller: str, callee: str) -> int:
    """Port offset of the mesh listener for one edge."""
    return _EDGE_BASE + edges().index((caller, callee))


def entities() -> list[str]:
    """Every entity the agent may name as a root cause (call edges ``a->b`` too, see below)."""
    return [s.name for s in SERVICES] + list(DATASTORES) + [MESH, JOB, DNS]


def edge_name(caller: str, callee: str) -> str:
    """The entity name of a call edge."""
    return f"{caller}{EDGE_SEP}{callee}"


def parse_edge(text: str) -> tuple[str, str] | None:
    """``(caller, callee)`` of an edge name ``a->b`` (names canonicalized), or ``None``."""
    if EDGE_SEP not in text:
        return None
    left, _, right = text.partition(EDGE_SEP)
    a, b = canonical(left), canonical(right)
    return (a, b) if a and b else None


_ALIAS_SUFFIX = re.compile(r"(-service|-svc|service|svc|-server|server|-db|db)$")
_EXTRA_ALIASES = {
    "productcatalog": "catalog",
    "product-catalog": "catalog",
    "productcatalogservice": "catalog",
    "recommendations": "recommendation",
    "pg": "postgres",
    "postgresql": "postgres",
    "database": "postgres",
    "queue": "redis",
    "notifications": "notification",
    "email": "notification",
}


def canonical(name: str) -> str | None:
    """Map an entity name, alias or replica name to its canonical entity (``None`` if unknown).

    ``cart``, ``cart-service``, ``cartservice`` and ``cart-1`` all map to ``cart``.
    """
    n = name.strip().lower().replace("_", "-")
    known = set(entities())
    for _ in range(3):
        if n in known:
            return n
        if n in _EXTRA_ALIASES:
            return _EXTRA_ALIASES[n]
        m = re.fullmatch(r"(.+?)-\d+", n)
        if m:
            n = m.group(1)
            continue
        stripped = _ALIAS_SUFFIX.sub("", n)
        if stripped == n:
            break
        n = stripped
    return n if n in known else _EXTRA_ALIASES.get(n)


def hops(a: str, b: str) -> int | None:
    """Undirected distance between two entities in the call graph (``None`` if unconnected)."""
    adj: dict[str, set[str]] = {e: set() for e in entities()}
    for c, u in [*edges(), (JOB, "postgres")]:
        adj[c].add(u)
        adj[u].add(c)
    if a not in adj or b not in adj:
        return None
    seen = {a: 0}
    todo = deque([a])
    while todo:
        cur = todo.popleft()
        if cur == b:
            return seen[cur]
        for nxt in adj[cur]:
            if nxt not in seen:
                seen[nxt] = seen[cur] + 1
                todo.append(nxt)
    return None


def propagation_chain(root: str) -> list[tuple[str, str]]:
    """Edges ``(from, to)`` along which a failure of ``root`` propagates to its callers."""
    out: list[tuple[str, str]] = []
    todo = deque([root])
    seen = {root}
    while todo:
        cur = todo.popleft()
        for caller, callee in edges():
            if callee == cur:
                out.append((cur, caller))
                if caller not in seen:
                    seen.add(caller)
                    todo.append(caller)
    return out
