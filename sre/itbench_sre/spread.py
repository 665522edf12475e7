"""How a failure really spread: the call edges that degraded during the fault window.

The evaluator grades an agent's propagation against these edges, measured from the shop's own
upstream-call metrics in Prometheus (every service counts its calls to each upstream, HTTP
services and datastores alike, by outcome, with their latency): a pre-fault baseline window
is compared with the fault window. An edge ``(upstream, caller)`` degraded when, in the fault
window, the caller made at least :data:`MIN_CALLS` calls to the upstream and

- their error ratio is at least :data:`ERROR_RATIO` and exceeds the baseline's by as much, or
- their mean latency is at least :data:`LATENCY_FACTOR` times the baseline's and
  :data:`LATENCY_S` seconds above it.

Only degraded edges connected to a root cause (through other degraded edges, in either
direction) are the fault's spread: a blip elsewhere is not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from itbench_sre import topology

#: Calls an edge needs in the fault window to be judged.
MIN_CALLS = 3
#: Error ratio (and rise over the baseline) that makes an edge degraded.
ERROR_RATIO = 0.1
#: Rise of the mean latency, seconds, that (with the factor) makes an edge degraded.
LATENCY_S = 0.15
#: Factor over the baseline's mean latency that (with the rise) makes an edge degraded: a
#: loaded machine slows every edge a little, a fault one edge a lot.
LATENCY_FACTOR = 3.0

#: ``(promql, at_epoch_seconds) -> [{"metric": {...}, "value": "..."}]``.
Query = Callable[[str, float], list[dict[str, Any]]]


def _by_edge(query: Query, expr: str, at: float) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for row in query(expr, at):
        job, up = row["metric"].get("job"), row["metric"].get("upstream")
        if job in topology.BY_NAME and up:
            try:
                out[(str(up), str(job))] = float(row["value"])
            except (TypeError, ValueError):
                continue
    return out


def window(query: Query, start: float, end: float) -> dict[tuple[str, str], dict[str, float]]:
    """Calls, errors and mean latency per edge ``(upstream, caller)`` between two times."""
    span = max(1, round(end - start))
    rng = f"[{span}s]"
    total = _by_edge(query, f"sum by (job, upstream) (increase(upstream_requests_total{rng}))", end)
    errors = _by_edge(
        query,
        f'sum by (job, upstream) (increase(upstream_requests_total{{outcome="error"}}{rng}))',
        end,
    )
    seconds = _by_edge(
        query, f"sum by (job, upstream) (increase(upstream_request_duration_seconds_sum{rng}))", end
    )
    out = {}
    for edge, calls in total.items():
        out[edge] = {
            "calls": calls,
            "error_ratio": errors.get(edge, 0.0) / calls if calls else 0.0,
            "mean_s": seconds.get(edge, 0.0) / calls if calls else 0.0,
        }
    return out


def degraded(
    fault: dict[tuple[str, str], dict[str, float]],
    base: dict[tuple[str, str], dict[str, float]],
) -> list[tuple[str, str]]:
    """The edges whose calls degraded in ``fault`` compared with ``base`` (sorted)."""
    out = []
    for edge, now in fault.items():
        if now["calls"] < MIN_CALLS:
            continue
        before = base.get(edge, {"error_ratio": 0.0, "mean_s": 0.0})
        erring = (
            now["error_ratio"] >= ERROR_RATIO
            and now["error_ratio"] - before["error_ratio"] >= ERROR_RATIO
        )
        slower = (
            now["mean_s"] >= LATENCY_FACTOR * before["mean_s"]
            and now["mean_s"] - before["mean_s"] >= LATENCY_S
        )
        if erring or slower:
            out.append(edge)
    return sorted(out)


def connected(edges: list[tuple[str, str]], roots: list[str]) -> list[tuple[str, str]]:
    """The edges in the part of ``edges`` (undirected) that touches a root.

    A root names a service, a datastore, an instance or a link ``a->b`` (both endpoints).
    """
    reach: set[str] = set()
    for root in roots:
        link = topology.parse_edge(root)
        reach |= set(link) if link else {topology.canonical(root) or root}
    chosen: set[tuple[str, str]] = set()
    grew = True
    while grew:
        grew = False
        for edge in edges:
            if edge not in chosen and (edge[0] in reach or edge[1] in reach):
                chosen.add(edge)
                reach |= set(edge)
                grew = True
    return sorted(chosen)


def measure(
    query: Query, base: tuple[float, float], fault: tuple[float, float], roots: list[str]
) -> list[tuple[str, str]]:
    """The fault's spread: degraded edges between the windows, connected to the roots."""
    if fault[1] - fault[0] < 1:
        return []
    before = window(query, *base) if base[1] - base[0] >= 1 else {}
    return connected(degraded(window(query, *fault), before), roots)
