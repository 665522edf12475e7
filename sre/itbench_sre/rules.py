"""The shop's Prometheus alerting rules (error rate, latency, availability, saturation, queue)."""

from __future__ import annotations

import yaml

#: Rate window of every rule: six scrapes at the 500 ms interval.
W = "3s"
_ERR = f'sum by (job) (rate(http_requests_total{{code=~"5.."}}[{W}]))'
_ALL = f"sum by (job) (rate(http_requests_total[{W}]))"

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
        "expr": "histogram_quantile(0.95, sum by (job, le) "
        f"(rate(http_request_duration_seconds_bucket[{W}]))) > 0.5",
        "for": "1s",
        "labels": {"severity": "warning", "category": "latency"},
        "annotations": {"summary": "p95 latency of {{ $labels.job }} above 500ms"},
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
        "annotations": {"summary": "no backend accepts connections on {{ $labels.edge }}"},
    },
    {
        "alert": "PoolSaturated",
        "expr": "max by (job) (pool_connections_in_use / pool_connections_max) >= 1",
        "for": "3s",
        "labels": {"severity": "warning", "category": "saturation"},
        "annotations": {"summary": "datastore pool of {{ $labels.job }} is exhausted"},
    },
    {
        "alert": "CpuSaturated",
        "expr": f'max by (job) (rate(process_cpu_seconds_total{{job!~"loadgen|mesh"}}[{W}])) > 0.4',
        "for": "2s",
        "labels": {"severity": "warning", "category": "saturation"},
        "annotations": {"summary": "{{ $labels.job }} uses more than 40% of a core"},
    },
    {
        "alert": "MemoryHigh",
        "expr": 'max by (job) (process_resident_memory_bytes{job!~"loadgen|mesh"}) > 110e6',
        "for": "1s",
        "labels": {"severity": "warning", "category": "saturation"},
        "annotations": {"summary": "{{ $labels.job }} uses more than 110 MB"},
    },
    {
        "alert": "InstanceRestarting",
        "expr": "max by (job) (changes(process_start_time_seconds[20s])) >= 3",
        "for": "0s",
        "labels": {"severity": "warning", "category": "availability"},
        "annotations": {"summary": "{{ $labels.job }} restarted repeatedly"},
    },
    {
        "alert": "QueueBacklog",
        "expr": "max(queue_depth) > 8",
        "for": "2s",
        "labels": {"severity": "warning", "category": "queue"},
        "annotations": {"summary": "order confirmations are piling up"},
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
