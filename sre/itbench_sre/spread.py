"""How a failure really spread: the call edges that degraded while the fault was on.

The evaluator grades an agent's propagation against edges measured from the shop's own
upstream-call metrics in Prometheus (every service counts its calls to each upstream, HTTP
services and datastores alike, by outcome, with their latency). The measurement is taken once,
when the fault has become observable and before the agent's turn, so nothing the agent does
moves it:

- The **fault window** runs from the first fault's injection to its handover, less the
  settle after every restart the harness played in it (a decoy's routine change or follow-up,
  a noise restart or release, and the faults' own deployments: until the restarted instances
  run again) and after a latency blip (its length and :data:`SETTLE_S`): a restart is not the
  fault's spread, what lasts is. The environment keeps these spans
  (``SreEnvironment.quiet_spans``) and waits at handover until the window holds 10 s and
  the edges into each root carried :data:`MIN_ANCHOR_CALLS` calls in it (30 s at most).
- The **baseline window** is the healthy shop before the first change.
- Calls are counted exactly, from the counters' values at the boundaries of the windows
  (a restarted instance's counter starting again from zero), never extrapolated.

Each edge ``(upstream, caller)`` is then one of three things. A call is *bad* when it failed,
or when it took longer than :data:`SLOW_S`; failures and slow calls are tested apart.

- **degraded**: in the fault window, a share of bad calls of at least :data:`RATIO`, that
  much above the baseline's share, and significantly above it (a one-sided binomial test at
  :data:`ALPHA` against the baseline share, never taken below :data:`FLOOR`);
- **healthy**: at least :data:`MIN_CALLS` calls and no evidence of a rise (the test's p-value
  at least :data:`CLEAR`);
- **undetermined**: anything else (too few calls, a rise too small or too uncertain to tell).
  An undetermined edge is not scored either way: naming it costs nothing, leaving it out
  neither.

The fault's spread is the degraded edges a failure where the fault acts reaches towards the
shoppers (:func:`connected`); a degraded edge elsewhere is not scored either.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from itbench_sre import topology

#: Calls an edge needs in the fault window to be judged at all.
MIN_CALLS = 3
#: Share of bad calls (and its rise over the baseline) that makes an edge degraded.
RATIO = 0.1
#: Significance of the rise that makes an edge degraded (one-sided binomial test).
ALPHA = 1e-3
#: P-value at or above which an edge with enough calls is healthy.
CLEAR = 0.05
#: Lowest baseline share a rise is tested against (a healthy shop fails a call now and then).
FLOOR = 0.02
#: Baseline calls an edge needs for its own baseline share to be used (else :data:`FLOOR`).
BASE_CALLS = 20
#: A call slower than this, seconds, is slow (a bucket bound of the latency histogram).
SLOW_S = 0.25
#: Seconds after a latency blip ends that the fault window leaves out too.
SETTLE_S = 2.5
#: Calls the edges into each place the fault acts need in the fault window before it is
#: measured (a link's own edge; the callers' edges of a service, datastore or instance), so
#: that a fault dropping a share of them is told from chance on a slow edge too.
MIN_ANCHOR_CALLS = 24

#: ``(promql, at_epoch_seconds) -> [{"metric": {...}, "value": "..."}]``.
Query = Callable[[str, float], list[dict[str, Any]]]
#: An edge ``(upstream, caller)``.
Edge = tuple[str, str]

_SERIES = {
    "calls": "upstream_request_duration_seconds_count",
    "fast": f'upstream_request_duration_seconds_bucket{{le="{SLOW_S}"}}',
    "errors": 'upstream_requests_total{outcome="error"}',
}


@dataclass
class Counts:
    """Calls of one edge in a window: all, failed, and slower than :data:`SLOW_S`."""

    calls: int = 0
    errors: int = 0
    slow: int = 0

    def add(self, other: Counts) -> None:
        """Add another window's counts."""
        self.calls += other.calls
        self.errors += other.errors
        self.slow += other.slow


@dataclass
class Spread:
    """One measurement: the spread, what is not scored, and the evidence."""

    #: Degraded edges connected to a root: the fault's spread.
    edges: list[Edge] = field(default_factory=list)
    #: Edges that are not scored (undetermined, or degraded away from every root).
    unscored: list[Edge] = field(default_factory=list)
    #: Seconds of the fault window that were measured.
    seconds: float = 0.0
    #: Per edge ``"upstream->caller"``: counts in both windows and the verdict.
    evidence: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The fewest calls the edges into any root carried in the fault window.
    anchor_calls: int = 0

    def record(self) -> dict[str, Any]:
        """The measurement as JSON-ready data (for the trial's evaluation)."""
        return {
            "edges": [list(e) for e in self.edges],
            "unscored": [list(e) for e in self.unscored],
            "seconds": round(self.seconds, 3),
            "anchor_calls": self.anchor_calls,
            "evidence": self.evidence,
        }


def _snapshot(query: Query, at: float) -> dict[tuple[str, ...], float]:
    """Every edge counter's last value at ``at``, per series (staleness ignored)."""
    out: dict[tuple[str, ...], float] = {}
    for kind, selector in _SERIES.items():
        for row in query(f"last_over_time({selector}[10m])", at):
            m = row["metric"]
            job, up = m.get("job"), m.get("upstream")
            if job not in topology.BY_NAME or not up:
                continue
            try:
                out[(kind, str(job), str(m.get("instance", "")), str(up))] = float(row["value"])
            except (TypeError, ValueError):
                continue
    return out


def _between(
    before: dict[tuple[str, ...], float], after: dict[tuple[str, ...], float]
) -> dict[Edge, Counts]:
    """Calls per edge between two snapshots (a counter that went down restarted from zero)."""
    sums: dict[Edge, dict[str, float]] = {}
    for key, value in after.items():
        kind, job, _instance, up = key
        prior = before.get(key, 0.0)
        grew = value - prior if value >= prior else value
        sums.setdefault((up, job), {}).setdefault(kind, 0.0)
        sums[(up, job)][kind] += grew
    out = {}
    for edge, s in sums.items():
        calls = round(s.get("calls", 0.0))
        out[edge] = Counts(
            calls=calls,
            errors=min(calls, round(s.get("errors", 0.0))),
            slow=max(0, calls - round(s.get("fast", 0.0))),
        )
    return out


def counts(query: Query, spans: Iterable[tuple[float, float]]) -> dict[Edge, Counts]:
    """Calls per edge summed over the time spans ``(start, end)``."""
    total: dict[Edge, Counts] = {}
    cache: dict[float, dict[tuple[str, ...], float]] = {}

    def snap(at: float) -> dict[tuple[str, ...], float]:
        if at not in cache:
            cache[at] = _snapshot(query, at)
        return cache[at]

    for start, end in spans:
        if end <= start:
            continue
        for edge, c in _between(snap(start), snap(end)).items():
            total.setdefault(edge, Counts()).add(c)
    return total


def tail(k: int, n: int, p: float) -> float:
    """``P[X >= k]`` for ``X ~ Binomial(n, p)``."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return min(1.0, sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1)))


def verdict(now: Counts, base: Counts | None) -> tuple[str, dict[str, Any]]:
    """``degraded``, ``healthy`` or ``undetermined`` for one edge, with the test's figures."""
    facts: dict[str, Any] = {"calls": now.calls, "errors": now.errors, "slow": now.slow}
    if base is not None:
        facts["base"] = {"calls": base.calls, "errors": base.errors, "slow": base.slow}
    if now.calls < MIN_CALLS:
        return "undetermined", facts
    p_values = []
    degraded = False
    for bad in ("errors", "slow"):
        k = getattr(now, bad)
        share = k / now.calls
        p0 = FLOOR
        if base is not None and base.calls >= BASE_CALLS:
            p0 = max(FLOOR, getattr(base, bad) / base.calls)
        p = tail(k, now.calls, p0)
        p_values.append(p)
        if share >= RATIO and share - p0 >= RATIO and p < ALPHA:
            degraded = True
    facts["p"] = float(f"{min(p_values):.3g}")
    if degraded:
        return "degraded", facts
    if min(p_values) >= CLEAR:
        return "healthy", facts
    return "undetermined", facts


def into(root: str) -> list[Edge]:
    """The shop's edges that carry calls to ``root``.

    For a link ``a->b``, its own edge; for a service, datastore or instance, its callers'
    edges to it (all edges touching it when nothing calls it, as the shoppers' front end).
    """
    edges = [(callee, caller) for caller, callee in topology.edges()]
    link = topology.parse_edge(root)
    if link is not None:
        return [e for e in edges if e == (link[1], link[0])]
    entity = topology.canonical(root) or root
    callers = [e for e in edges if e[0] == entity]
    return callers or [e for e in edges if entity in e]


def anchor_calls(during: dict[Edge, Counts], roots: list[str]) -> int:
    """The fewest calls any root's incoming edges (:func:`into`) carry in ``during``."""
    if not roots:
        return 0
    return min(sum(during[e].calls for e in into(root) if e in during) for root in roots)


def connected(edges: list[Edge], roots: list[str]) -> list[Edge]:
    """The edges of ``edges`` a failure at ``roots`` spread along, towards the callers.

    A root names a service, a datastore, an instance or a link ``a->b``. The spread starts
    with the edges touching a root (its callers' calls to it, and its own failing calls; for
    a link, the link's own edge) and goes on from callee to caller: an edge ``(upstream,
    caller)`` joins when its upstream is a root or the caller of an edge already chosen. A
    degraded edge elsewhere (however close to the shoppers) is not the fault's.
    """
    chosen: set[Edge] = set()
    reach: set[str] = set()
    for root in roots:
        link = topology.parse_edge(root)
        if link is not None:
            edge = (link[1], link[0])
            if edge in edges:
                chosen.add(edge)
                reach.add(link[0])
            continue
        entity = topology.canonical(root) or root
        reach.add(entity)
        for edge in edges:
            if entity in edge:
                chosen.add(edge)
                reach.add(edge[1])
    grew = True
    while grew:
        grew = False
        for edge in edges:
            if edge not in chosen and edge[0] in reach:
                chosen.add(edge)
                reach.add(edge[1])
                grew = True
    return sorted(chosen)


def left_out(
    start: float, end: float, quiet: Iterable[tuple[float, float]]
) -> list[tuple[float, float]]:
    """The spans of ``[start, end]`` outside every ``quiet`` span (sorted, disjoint)."""
    spans = [(start, end)]
    for q0, q1 in sorted(quiet):
        nxt = []
        for s0, s1 in spans:
            if q1 <= s0 or q0 >= s1:
                nxt.append((s0, s1))
                continue
            if q0 > s0:
                nxt.append((s0, q0))
            if q1 < s1:
                nxt.append((q1, s1))
        spans = nxt
    return [s for s in spans if s[1] - s[0] > 0]


def measure(
    query: Query,
    base: tuple[float, float],
    fault: tuple[float, float],
    roots: list[str],
    quiet: Iterable[tuple[float, float]] = (),
) -> Spread:
    """The fault's spread between the windows, leaving out the ``quiet`` spans."""
    spans = left_out(fault[0], fault[1], quiet)
    out = Spread(seconds=sum(b - a for a, b in spans))
    if not spans:
        return out
    before = counts(query, [base]) if base[1] > base[0] else {}
    during = counts(query, spans)
    out.anchor_calls = anchor_calls(during, roots)
    degraded: list[Edge] = []
    undetermined: list[Edge] = []
    for edge in sorted(during):
        kind, facts = verdict(during[edge], before.get(edge))
        facts["verdict"] = kind
        out.evidence[topology.edge_name(edge[1], edge[0])] = facts
        if kind == "degraded":
            degraded.append(edge)
        elif kind == "undetermined":
            undetermined.append(edge)
    # An edge without a call in either window cannot be judged either.
    silent = {(callee, caller) for caller, callee in topology.edges()} - set(during)
    out.edges = connected(degraded, roots)
    out.unscored = sorted(set(undetermined) | silent | (set(degraded) - set(out.edges)))
    return out
