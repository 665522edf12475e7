"""The shop's Prometheus alerting rules: symptoms per service, never a fault type.

Errors, latency, availability and saturation of a service, errors towards a dependency and the
shoppers' own error rate. Several fault mechanisms raise each alert, so an alert's name says what
hurts, not why.
"""

from __future__ import annotations

import yaml

#: Rate window of every rule: six scrapes at the 500 ms interval.
W = "3s"
_ERR = f'sum by (job) (rate(http_requests_total{{code=~"5.."}}[{W}]))'
_ALL = f"sum by (job) (rate(http_requests_total[{W}]))"
_SHOP = 'job!~"loadgen|mesh"'


def _share(expr: str, resource: str) -> str:
    return f'label_replace({expr}, "resource", "{resource}", "", "")'


#: Utilization of each resource a service can run out of, 1 meaning exhausted.
SATURATION = " or ".join(
    (
        _share(f"rate(process_cpu_seconds_total{{{_SHOP}}}[{W}]) / 0.4", "cpu"),
        _share(f"process_resident_memory_bytes{{{_SHOP}}} / 110e6", "memory"),
        _share("pool_connections_in_use / pool_connections_max", "pool"),
        _share(f"process_open_fds{{{_SHOP}}} / process_max_fds / 0.8", "fds"),
        _share(f"process_threads{{{_SHOP}}} / 150", "threads"),
        _share("queue_depth / 8", "queue"),
        _share("(1 - disk_free_bytes / disk_size_bytes) / 0.95", "disk"),
    )
)

RULES: list[dict[str, object]] = [
    {
        "alert": "HighErrorRate",
        "expr": f"({_ERR} / {_ALL}) > 0.05 and {_ERR} > 0.2",
        "for": "1s",
        "labels": {"severity": "critical", "category": "errors"},
        "annotations": {"summary": "{{ $labels.job }} answers more than 5% errors"},
    },
    {
        "alert": "HighLatency",
        # Over a longer window than errors and at the SLO's bound: a loaded machine's jitter
        # is no incident.
        "expr": "histogram_quantile(0.95, sum by (job, le) "
        "(rate(http_request_duration_seconds_bucket[5s]))) > 1",
        "for": "2s",
        "labels": {"severity": "warning", "category": "latency"},
        "annotations": {"summary": "p95 latency of {{ $labels.job }} above 1s"},
    },
    {
        "alert": "InstanceDown",
        "expr": 'up{job!="loadgen"} == 0',
        "for": "1s",
        "labels": {"severity": "critical", "category": "availability"},
        "annotations": {"summary": "{{ $labels.instance }} cannot be scraped"},
    },
    {
        "alert": "UpstreamErrors",
        "expr": "sum by (job, upstream) "
        f'(rate(upstream_requests_total{{outcome="error"}}[{W}])) > 0.2',
        "for": "1s",
        "labels": {"severity": "warning", "category": "errors"},
        "annotations": {"summary": "{{ $labels.job }} fails calling {{ $labels.upstream }}"},
    },
    {
        "alert": "DependencyUnreachable",
        "expr": f'sum by (edge) (rate(mesh_connections_total{{outcome="refused"}}[{W}])) > 0',
        "for": "1s",
        "labels": {"severity": "critical", "category": "availability"},
        "annotations": {"summary": "no backend answers on {{ $labels.edge }}"},
    },
    {
        # One symptom for every kind of exhausted resource: no alert name tells which one.
        "alert": "Saturation",
        "expr": f"max by (job) ({SATURATION}) >= 1",
        "for": "2s",
        "labels": {"severity": "warning", "category": "saturation"},
        "annotations": {"summary": "{{ $labels.job }} is running out of a resource"},
    },
    {
        "alert": "InstanceRestarting",
        "expr": "max by (job) (changes(process_start_time_seconds[20s])) >= 3",
        "for": "0s",
        "labels": {"severity": "warning", "category": "availability"},
        "annotations": {"summary": "{{ $labels.job }} restarted repeatedly"},
    },
    {
        "alert": "WorkloadErrors",
        "expr": 'sum(rate(loadgen_requests_total{outcome="error"}[5s])) '
        "/ sum(rate(loadgen_requests_total[5s])) > 0.05 "
        'and sum(rate(loadgen_requests_total{outcome="error"}[5s])) > 0.2',
        "for": "1s",
        "labels": {"severity": "critical", "category": "slo"},
        "annotations": {"summary": "shoppers see more than 5% failed requests"},
    },
]


def alert_rules() -> str:
    """The rules file text."""
    return yaml.safe_dump({"groups": [{"name": "shop", "rules": RULES}]}, sort_keys=False)
