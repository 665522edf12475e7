"""Faults of the mesh and the name registry.

Latency, loss, resets, partitions, gray failures, flapping links and broken records.
"""

from __future__ import annotations

import json
from typing import Any

from itbench_sre import topology
from itbench_sre.backend import ChangeSet
from itbench_sre.embedded import EmbeddedShop
from itbench_sre.faults.base import (
    Check,
    Mechanism,
    Param,
    _clear_links,
    _config_cause,
    _edge_errors,
    _edge_parts,
    _link,
    _register,
    _same,
    upstream_errors,
    upstream_slow,
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
