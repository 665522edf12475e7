"""Live shops: two side by side, tools and journal, inject and recover, clean teardown."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest
from itbench_sre import faults, topology
from itbench_sre.cgroups import ENV_MEMORY, ENV_THREADS
from itbench_sre.domain import SreDomain
from itbench_sre.embedded import REDIS_DATA
from itbench_sre.environment import SreEnvironment
from itbench_sre.spec import DecoySpec, SreSpec

from itbench import cgroups
from itbench.catalog import Catalog
from itbench.errors import ToolError
from itbench.process import port_open
from itbench.testing import processes_under
from itbench.tools import Toolbox

from .conftest import live


def _wait(predicate, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.3)
    return False


def test_two_shops_side_by_side_tools_and_clean_teardown(
    domain: SreDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["sre/control-latency-blip"]
    assert isinstance(spec, SreSpec)
    # Shop a has a stray client among its decoys (on the service that serves TLS).
    stray = DecoySpec(kind="stray_client", target="payment", value=-900)
    with_stray = spec.model_copy(update={"decoy_changes": [stray]})
    # Servers die with the thread that started them: the pool outlives the environments.
    pool = ThreadPoolExecutor(2)
    with pool, ExitStack() as stack:
        envs: list[SreEnvironment] = [
            stack.enter_context(live(domain, s, tmp_path / name))
            for s, name in ((with_stray, "a"), (spec, "b"))
        ]
        list(pool.map(lambda e: e.setup(), envs))
        a, b = envs
        a.inject()  # its noise (a latency blip) and its decoy
        list(pool.map(lambda e: e.wait_observable(60), envs))
        assert a.shop.port_base != b.shop.port_base
        roots = [e.shop.root for e in envs]
        ports = [p for e in envs for p in range(e.shop.port_base, e.shop.port_base + 100)]
        assert sum(port_open(p) for p in ports) >= 2 * 20

        box = Toolbox.of(a.tools())
        # The read-only API of the task context serves queries and refuses administration.
        api = a.context()["prometheus"]
        with urllib.request.urlopen(api + "/api/v1/query?query=up", timeout=10) as resp:
            assert json.loads(resp.read())["status"] == "success"
        for path in ("/api/v1/admin/tsdb/delete_series?match[]=up", "/-/reload", "/-/quit"):
            req = urllib.request.Request(api + path, data=b"", method="POST")
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(req, timeout=10)
            assert refused.value.code == 403
        # Metrics and alert rules are live in each shop's own Prometheus.
        up = box.call("query", promql="up")
        assert len(up) == sum(s.replicas for s in topology.SERVICES) + 2
        assert all(float(s["value"]) == 1 for s in up)
        rules = a.shop.prom("/api/v1/rules", {})["groups"][0]["rules"]
        assert {r["name"] for r in rules} >= {"HighErrorRate", "InstanceDown", "Saturation"}
        # A loaded machine may raise a passing latency alert: the shop settles again (the
        # stray client raises none).
        assert _wait(lambda: box.call("alerts") == [], 20)
        # The stray client is refused and logged by the instance it calls, and hurts nobody.
        assert [c.calls > 0 for c in a._strays] == [True]
        # In this trial's words (drawn per trial): the text before the skew's figure.
        refused = a.shop.phrases.say("date_refused", skew="").split("(")[0].strip()
        assert _wait(lambda: len(box.call("logs", service="payment", filter=refused)) >= 2, 10)
        assert not box.call("logs", service="payment", filter=refused, level="error")
        # Shop b's payment has no stray client: at most a harmless message now and then.
        other = b.shop.phrases.say("date_refused", skew="").split("(")[0].strip()
        assert len(Toolbox.of(b.tools()).call("logs", service="payment", filter=other)) <= 1
        count = 'sum(increase(http_requests_total{instance="payment-0",code="401"}[10s]))'
        assert _wait(
            lambda: any(float(r["value"]) >= 2 for r in box.call("query", promql=count)), 15
        )
        shop_errors = 'sum(increase(upstream_requests_total{outcome="error"}[10s])) > 0'
        # As with the alerts: a loaded machine may time a call out now and then; the shop's
        # calls run clean again within a window, the stray client's refusals notwithstanding.
        assert _wait(lambda: box.call("query", promql=shop_errors) == [], 30)
        # Yet healthy instances log, now and then, messages of the kind failures cause.
        every = [s.name for s in topology.SERVICES]

        def chatter() -> list[dict[str, object]]:
            return [
                line
                for service in every
                for line in box.call("logs", service=service, level="error", limit=20)
            ]

        assert _wait(lambda: len(chatter()) >= 2, 30)
        # ... inside the trace of a request that goes on to succeed, as a real error would be.
        assert _wait(lambda: any(line.get("trace_id") for line in chatter()), 30)
        assert box.call("query", promql=shop_errors) == []
        assert box.call("logs", service="frontend-service", limit=5)
        assert _wait(lambda: box.call("traces", service="checkout", limit=2), 10)
        # A shop seconds old has few points in the window: wait for the latest one.
        rate = "sum(rate(http_requests_total[3s]))"
        assert _wait(lambda: len(box.call("query_range", promql=rate, step_seconds=1)) == 1, 10)
        series = box.call("query_range", promql=rate, minutes=0.5, step_seconds=5)
        assert float(series[0]["values"][-1][1]) > 0
        assert series[0]["values"][-1][0] >= time.time() - 2
        cfg = box.call("read_config", entity="cart")
        assert json.loads(cfg["content"])["release"] == topology.BY_NAME["cart"].releases[0]
        # Flags go by names drawn per trial, listed by name: the routine ones and those that
        # keep a part running (its queue consumer) are on, the dormant ones and those with a
        # fault behind them off.
        flags = json.loads(cfg["content"])["flags"]
        means = a.shop.features()["cart"]
        assert list(flags) == sorted(flags) and set(flags) <= set(topology.FLAG_NAMES)
        shipped_on = {*topology.ROUTINE_FLAGS["cart"], *topology.SERVING_FLAGS["cart"]}
        assert {means[f] for f, on in flags.items() if on} == shipped_on
        assert {means[f] for f in flags} == set(topology.flags_of("cart"))
        procs = {p["name"]: p for p in box.call("processes")}
        assert set(procs) >= {"redis", "postgres", "loadgen"}
        # The batch job runs in a healthy shop too: seeing it run tells nothing.
        assert procs["reports"]["state"] == "RUNNING"

        # Actions are journaled and undone in reverse order.
        box.call("scale", service="cart", replicas=3)
        assert a.shop.replicas("cart") == 3
        box.call("edit_config", entity="cart", set={"pool_size": 6})
        assert json.loads(a.shop.read_config("cart"))["pool_size"] == 6
        box.call("undo")
        assert json.loads(a.shop.read_config("cart"))["pool_size"] == 4
        box.call("undo")
        assert a.shop.replicas("cart") == 2
        entries = a.journal.entries
        assert [e["tool"] for e in entries] == ["scale", "edit_config", "undo", "undo"]
        assert entries[0]["before"] == {"replicas": 2} and entries[0]["after"] == {"replicas": 3}
        # The history says what each revision changed; a rollback may go back several.
        box.call("edit_config", entity="cart", set={"pool_size": 5})
        box.call("edit_config", entity="cart", set={"memory_limit_mb": 176})
        revs = box.call("read_config", entity="cart")["revisions"]
        assert revs[0]["changed"] == []
        assert [r["changed"] for r in revs[-2:]] == [["pool_size"], ["memory_limit_mb"]]
        with pytest.raises(ToolError, match="no revision 99"):
            box.call("rollback", service="cart", revision=99)
        with pytest.raises(ToolError, match="is what runs"):
            box.call("rollback", service="cart", revision=revs[-1]["revision"])
        assert box.call("rollback", service="cart")["revision"] == revs[-1]["revision"] + 1
        assert json.loads(a.shop.read_config("cart"))["pool_size"] == 5  # one step back
        box.call("rollback", service="cart", revision=1)
        cfg = json.loads(a.shop.read_config("cart"))
        assert (cfg["pool_size"], cfg["memory_limit_mb"]) == (4, 160)
        assert a.journal.entries[-1]["args"] == {"service": "cart", "revision": 1}

        # A fault played by its inject playbook shows, and its recover playbook clears it.
        mech = faults.get("redis_down")
        b.shop.apply(mech.inject(b.shop, "redis", {}))
        assert _wait(lambda: any(x.get("alertname") == "HighErrorRate" for x in b.firing()), 30)
        b.shop.apply(mech.recover(b.shop, "redis", {}))
        assert _wait(lambda: not b.firing(), 30), b.firing()
    # Teardown: nothing of either shop runs, no port of either block is bound, no client calls.
    time.sleep(0.5)
    assert not any(c._thread.is_alive() for c in envs[0]._strays)
    for root in roots:
        assert processes_under(root) == []
    assert [p for p in ports if port_open(p)] == []


def test_a_dump_on_the_shared_volume_and_a_poisoned_second_queue_show_whose_they_are(
    domain: SreDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["sre/control-quiet"]
    assert isinstance(spec, SreSpec)
    with live(domain, spec, tmp_path) as env:
        env.setup()
        env.inject()
        env.wait_observable(60)
        box = Toolbox.of(env.tools())
        # Both work queues are filled by checkout and consumed: each has a depth of its own.
        queues = {q["name"]: q["consumer"] for q in box.call("topology")["queues"]}
        assert queues == {"orders": "notification", "carts": "cart"}

        def depth() -> dict[str, float]:
            rows = box.call("query", promql="max by (queue) (queue_depth)")
            return {r["metric"]["queue"]: float(r["value"]) for r in rows}

        assert _wait(lambda: set(depth()) == set(queues), 30), depth()
        assert max(depth().values()) <= 6

        # A dump of a service that never writes to the volume fills it: the writer fails, and
        # only the dump's owner's files take the space.
        def used() -> dict[str, float]:
            rows = box.call("query", promql="data_used_bytes")
            return {r["metric"]["instance"]: float(r["value"]) for r in rows}

        env.shop.apply(faults.get("disk_full").inject(env.shop, "shipping", {}))
        assert _wait(lambda: used().get("shipping-0", 0) > 2**20, 30), used()
        assert all(v < 2**20 for k, v in used().items() if k != "shipping-0"), used()
        failing = 'sum(increase(http_requests_total{job="checkout",code=~"5.."}[5s])) > 0'
        assert _wait(lambda: box.call("query", promql=failing) != [], 30)
        box.call("restart", target="shipping")
        assert _wait(lambda: used().get("shipping-0", 2**30) < 2**20, 30), used()

        # An unreadable message on the carts queue stops a cart consumer, not notification's.
        poison = faults.get("poison_message")
        env.shop.apply(poison.inject(env.shop, "cart", {}))
        assert _wait(lambda: env.holds(poison.signature("cart", {})[0]), 30)
        assert not env.holds(poison.signature("notification", {})[0])
        # Redis keeps its data across a restart: restarting it does not drop the message.
        box.call("restart", target="redis")
        time.sleep(12)
        assert env.holds(poison.signature("cart", {})[0])
        kept = env.shop.shop / "redis" / REDIS_DATA
        assert kept.is_dir()
    assert not kept.exists()  # no record of the trial, so not kept with it


@pytest.mark.skipif(cgroups.cgroups_problem() is not None, reason=str(cgroups.cgroups_problem()))
def test_memory_and_cpu_limits_below_what_a_service_needs_are_enforced_by_the_kernel(
    domain: SreDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["sre/control-quiet"]
    assert isinstance(spec, SreSpec)
    with live(domain, spec, tmp_path) as env:
        env.setup()
        box = Toolbox.of(env.tools())

        def limits(instance: str) -> dict[str, float]:
            rows = {p["name"]: p for p in box.call("processes")}
            return dict(rows[instance].get("limits") or {})

        # Each instance runs in groups of its own, limited as its configuration says.
        assert limits("currency-0")["memory_limit_mb"] == 160
        assert limits("currency-0")["cpu_limit"] == 1.0
        assert 5 < limits("currency-0")["memory_usage_mb"] < 160
        groups = env.shop.groups
        assert groups is not None and all(d.is_dir() for d in groups.of("currency-0"))
        # Together the environment's instances are bounded whatever their configurations say.
        memory = groups.dir("memory") / "memory.limit_in_bytes"
        assert int(memory.read_text()) == ENV_MEMORY
        assert int((groups.dir("pids") / "pids.max").read_text()) == ENV_THREADS
        assert limits("cart-2") == {}  # a replica that never started shows no limits
        limit = 'container_spec_memory_limit_bytes{job="currency"} == 160 * 2^20'
        assert _wait(lambda: box.call("query", promql=limit) != [], 15)
        quota = 'container_spec_cpu_quota{job="currency"} == 1e6'
        assert box.call("query", promql=quota) != []

        # A memory limit below the working set: the kernel kills each start, and no log line
        # of the service says so.
        mech = faults.get("memory_limit_too_low")
        env.shop.apply(mech.inject(env.shop, "currency", {"limit_mb": 10}))
        assert _wait(lambda: limits("currency-0").get("oom_kills", 0) >= 2, 30), limits(
            "currency-0"
        )
        assert limits("currency-0")["memory_limit_mb"] == 10
        assert _wait(lambda: env.holds(mech.signature("currency", {})[0]), 30)
        box.call("edit_config", entity="currency", set={"memory_limit_mb": 192})
        box.call("restart", target="currency")
        assert limits("currency-0")["memory_limit_mb"] == 192
        kills = limits("currency-0")["oom_kills"]
        time.sleep(3)
        assert limits("currency-0")["oom_kills"] == kills

        # A CPU quota a thousandth of a core: the instance runs, throttled in every period,
        # and is still starting long after; nothing it logs says why.
        mech = faults.get("cpu_limit_too_low")
        env.shop.apply(mech.inject(env.shop, "currency", {"cpu_limit": 0.001}))
        assert _wait(lambda: env.holds(mech.signature("currency", {})[0]), 30)
        assert _wait(lambda: limits("currency-0").get("cpu_throttled_periods", 0) >= 3, 30)
        row = {p["name"]: p for p in box.call("processes")}["currency-0"]
        assert row["state"] == "RUNNING" and row["limits"]["cpu_limit"] == 0.001, row
        assert not port_open(env.shop.instance_port("currency-0"))
        box.call("rollback", service="currency")
        assert limits("currency-0")["cpu_limit"] == 1.0
        assert _wait(lambda: port_open(env.shop.instance_port("currency-0")), 20)
        # A task limit below what the instance runs: the threads it needs are refused.
        running = int(limits("currency-0")["threads"])
        assert 2 < running < limits("currency-0")["max_threads"] == 512
        box.call("edit_config", entity="currency", set={"max_threads": running // 2})
        box.call("restart", target="currency")
        assert _wait(lambda: limits("currency-0").get("threads_refused", 0) > 0, 30), limits(
            "currency-0"
        )
        assert limits("currency-0")["max_threads"] == running // 2
    assert not any(groups.dir(c).exists() for c in ("memory", "cpu", "pids"))


def test_a_full_redis_and_a_held_lock_are_a_clients_doing_and_only_its_flag_ends_them(
    domain: SreDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """The culprit of a full Redis or a locked table is one client, and a restart is no fix.

    A snapshot writer keeps writing once Redis has room again; a lock holder takes its lock
    again when restarted. Switching the client's flag off ends either.
    """
    spec = catalog.scenarios["sre/control-quiet"]
    assert isinstance(spec, SreSpec)
    with live(domain, spec, tmp_path) as env:
        env.setup()
        box = Toolbox.of(env.tools())

        def rate(job: str, outcome: str) -> float:
            promql = (
                f'sum(rate(upstream_requests_total{{job="{job}",upstream="redis",'
                f'outcome="{outcome}"}}[5s]))'
            )
            rows = box.call("query", promql=promql)
            return float(rows[0]["value"]) if rows else 0.0

        # Redis filled by checkout's snapshots: cart's writes fail, checkout's writes fail
        # several times a second.
        mech = faults.get("redis_oom")
        name = env.shop.flag_name("checkout", "redis_snapshots")
        params = {**mech.defaults, "flag_name": name}
        env.shop.apply(mech.inject(env.shop, "checkout", params))
        [full] = mech.signature("checkout", params)
        assert _wait(lambda: env.holds(full), 40)
        assert _wait(lambda: rate("checkout", "error") > 2, 20)
        # More room alone: the snapshots land again, and keep landing.
        box.call("edit_config", entity="redis", set={"maxmemory": "256mb"})
        box.call("restart", target="redis")
        assert _wait(lambda: rate("checkout", "ok") > 2, 30)
        assert _wait(lambda: not env.holds(full), 30)
        # The flag off: checkout stops writing snapshots.
        box.call("edit_config", entity="checkout", set={f"flags.{name}": False})
        box.call("restart", target="checkout")
        assert _wait(lambda: rate("checkout", "ok") + rate("checkout", "error") < 1, 30)

        # notification keeps `products` locked: catalog's reads wait and fail.
        mech = faults.get("pg_slow_query")
        name = env.shop.flag_name("notification", "lock_products")
        params = {**mech.defaults, "flag": "lock_products", "flag_name": name}
        env.shop.apply(mech.inject(env.shop, "notification", params))
        [waits] = mech.signature("notification", params)
        assert _wait(lambda: env.holds(waits), 40)
        # Restarting the holder, or the database, takes the lock again.
        box.call("restart", target="notification")
        box.call("restart", target="postgres")
        time.sleep(8)
        assert _wait(lambda: env.holds(waits), 20)
        box.call("edit_config", entity="notification", set={f"flags.{name}": False})
        box.call("restart", target="notification")
        assert _wait(lambda: not env.holds(waits), 40)
