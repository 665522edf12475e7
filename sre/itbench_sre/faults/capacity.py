"""Faults of capacity: replicas, surges, retry storms, a full volume and a low memory limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from itbench_sre import topology
from itbench_sre.backend import ChangeSet
from itbench_sre.embedded import EmbeddedShop
from itbench_sre.faults.base import (
    RATE,
    Check,
    Mechanism,
    Param,
    _config,
    _config_cause,
    _config_change,
    _deploy,
    _errors,
    _fewer_replicas,
    _register,
    _restore,
    _rollback,
    _running_instances,
    _same,
    errors_of,
    unscraped,
    upstream_errors,
)

from itbench import InfrastructureError

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


#: The service that writes to the shared data volume (its order receipts).
WRITER = "checkout"


def _dumper(target: str) -> str:
    """The instance of ``target`` whose crash dump fills the volume."""
    return topology.instances(target)[0]


def _dump_file(shop: EmbeddedShop, target: str) -> Path:
    """Where the crash dump lies: the dumping instance's own directory on the volume."""
    return shop.shop / "data" / _dumper(target) / "core.1.dump"


def _fill(shop: EmbeddedShop, target: str, params: dict[str, Any]) -> ChangeSet:
    """A crash dump left on the data volume, as large as the space left."""
    if not shop.data_quota:
        raise InfrastructureError("a full disk needs the data volume's quota (run as root)")
    data = shop.shop / "data"
    dump = _dump_file(shop, target)
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
    return ChangeSet(commands=[["rm", "-f", str(_dump_file(shop, target))]])


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
            Check(f'max(data_used_bytes{{instance="{_dumper(t)}"}}) > 1048576'),
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


#: Services whose instances a limit too low takes out without taking the shop down.
_LIMITED = ("catalog", "cart", "currency", "shipping", "payment", "recommendation")


def _limit_too_low(
    name: str, fault_type: str, key: str, param: Param, summary: str, observable: str
) -> Mechanism:
    """A mechanism that deploys a configuration whose limit ``key`` is ``param``'s value."""

    def set_limit(cfg: dict[str, Any], shop: EmbeddedShop, target: str, p: dict[str, Any]) -> None:
        cfg[key] = param.kind(p[param.name])

    return Mechanism(
        name,
        fault_type,
        _LIMITED,
        _config_change(set_limit),
        _restore,
        _same,
        lambda t, p: [unscraped(f'job="{t}"')],
        _rollback,
        summary=summary,
        observable=observable,
        params=(param,),
        keys=(key,),
    )


_register(
    _limit_too_low(
        "memory_limit_too_low",
        "memory_limit",
        "memory_limit_mb",
        Param(
            "limit_mb",
            int,
            10,
            "The memory limit deployed, MiB (below any instance's working set).",
            minimum=1,
            choices=lambda t: (8, 10, 12),
        ),
        summary="Deploys a configuration whose memory limit is below what the service needs "
        "to start: the kernel's OOM killer kills every instance as it starts.",
        observable="the service's targets cannot be scraped; its instances keep restarting, "
        "each killed for memory (the OOM kills its memory group counts) without logging an "
        "error",
    )
)


_register(
    _limit_too_low(
        "cpu_limit_too_low",
        "cpu_throttling",
        "cpu_limit",
        Param(
            "cpu_limit",
            float,
            0.001,
            "The CPU limit deployed, in cores (a start takes minutes under it).",
            minimum=0.001,
            choices=lambda t: (0.001, 0.0015, 0.002),
        ),
        summary="Deploys a configuration whose CPU limit is a small fraction of what the "
        "service needs to start: the kernel throttles each instance in every period, and it "
        "is still starting minutes later.",
        observable="the service's targets cannot be scraped; its instances keep running without "
        "answering or logging, the kernel throttling them in nearly every period they run in",
    )
)
