"""What an agent can read names nothing, and tampering with monitoring never passes a trial.

Live shops and real Prometheus, supervisord and service processes throughout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest
from itbench_sre import agents, faults, scoring, topology
from itbench_sre.cgroups import CONTROLLERS
from itbench_sre.domain import SreDomain
from itbench_sre.environment import SreEnvironment
from itbench_sre.spec import DecoySpec, FaultSpec, SreSpec
from itbench_sre.tools import READABLE

from itbench.agents import Agent, AgentSpec
from itbench.bench import Bench
from itbench.catalog import Catalog
from itbench.errors import ToolError
from itbench.models import RunConfig, Submission, TaskView, TrialStatus
from itbench.runner import Runner
from itbench.testing import bare_task, processes_under
from itbench.tools import Toolbox

from .conftest import live

#: Scenarios whose faults left self-describing artefacts before (a paused process, a job that
#: ran only with the fault, a certificate swap) and one of the network family.
LEAK_CHECKED = ["sre/hung-process", "sre/pg-slow-query", "sre/edge-reset"]
#: What the read-only Prometheus endpoint serves, read as a PromQL client would.
PROM_PATHS = (
    "/api/v1/rules",
    "/api/v1/alerts",
    "/api/v1/targets/metadata",
    "/api/v1/metadata",
    "/api/v1/label/__name__/values",
    "/api/v1/label/job/values",
    "/api/v1/status/buildinfo",
    "/api/v1/query?query=ALERTS",
)


def _wait(predicate: Any, timeout: float, step: float = 0.3) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return False


class Reader(Agent):
    """Calls every read-only tool broadly and keeps what it saw (task view and workspace too)."""

    seen: dict[str, str] = {}

    def run(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Read everything there is to read, then submit nothing."""
        out: dict[str, Any] = {"task": json.loads(task.model_dump_json())}
        calls: list[tuple[str, dict[str, Any]]] = [
            ("topology", {}),
            ("alerts", {"include_pending": True}),
            ("processes", {}),
            ("query", {"promql": '{__name__=~".+"}'}),
            ("query", {"promql": "ALERTS"}),
            ("query_range", {"promql": "up", "minutes": 1, "step_seconds": 5}),
            ("traces", {"limit": 100}),
            ("traces", {"errors_only": True, "limit": 100}),
        ]
        calls += [("logs", {"service": s.name, "limit": 500}) for s in topology.SERVICES]
        calls += [("read_config", {"entity": e}) for e in READABLE]
        for name, args in calls:
            try:
                out[f"{name} {json.dumps(args)}"] = toolbox.call(name, **args)
            except ToolError as exc:
                out[f"{name} {json.dumps(args)}"] = f"error: {exc}"
        api = task.context["prometheus"]
        for path in PROM_PATHS:
            with urllib.request.urlopen(api + path, timeout=10) as resp:
                out[f"prometheus {path}"] = json.loads(resp.read())
        files = {}
        for path in Path(task.workspace).rglob("*"):
            if path.is_file():
                files[str(path)] = path.read_text(errors="replace")
        out["workspace"] = {"path": str(task.workspace), "files": files}
        Reader.seen[task.handle] = json.dumps(out, default=str)
        return None


def _first_alike(catalog: Catalog, name: str) -> SreSpec:
    """A problem with each fault pinned to its own mechanism, none of its look-alikes."""
    spec = catalog.scenarios[name]
    assert isinstance(spec, SreSpec)
    return spec.model_copy(update={"faults": [f.alternatives()[0] for f in spec.faults]})


def _forbidden(spec: SreSpec) -> list[str]:
    words = {spec.id, spec.id.split("/", 1)[1], spec.title}
    for m in spec.mechanisms():
        words |= {m, m.replace("_", "-"), m.replace("_", " ")}
    return sorted(w.lower() for w in words)


def test_nothing_an_agent_reads_names_the_scenario(catalog: Catalog, tmp_path: Path) -> None:
    """Task view, every read-only tool's output and the workspace name no scenario or fault."""
    bench = Bench()
    bench.agents["test/reader"] = AgentSpec("test/reader", lambda ctx: Reader())
    Reader.seen.clear()
    config = RunConfig(agent="test/reader", scenarios=LEAK_CHECKED, workers=2)
    outcome = Runner(bench, config, tmp_path / "run").run()
    assert {r.scenario_id for r in outcome.results} == set(LEAK_CHECKED)
    assert all(r.status is TrialStatus.failed for r in outcome.results), [
        (r.scenario_id, r.status, r.error) for r in outcome.results
    ]
    assert len(Reader.seen) == len(LEAK_CHECKED)
    specs = [catalog.scenarios[s] for s in LEAK_CHECKED]
    forbidden = sorted({w for s in specs for w in _forbidden(s)})  # type: ignore[arg-type]
    for text in Reader.seen.values():
        seen = json.loads(text)
        # The fault-type vocabulary is public and the same in every trial.
        assert seen["task"]["context"].pop("fault_types") == list(faults.FAULT_TYPES)
        procs = {p["name"]: p for p in seen["processes {}"]}
        # The batch job runs in every deployment; no process is in a state naming a fault.
        assert procs["reports"]["state"] == "RUNNING"
        assert all(p.get("process_status") != "stopped" for p in procs.values())
        blob = json.dumps(seen).lower()
        assert len(blob) > 50_000  # the tools did answer
        assert seen["prometheus /api/v1/rules"]["data"]["groups"]
        for word in forbidden:
            assert word not in blob, word
        # No harness path either: configs name files relative to the shop, and the endpoint
        # serves no status page that names the server's files or flags.
        shown = json.dumps({k: v for k, v in seen.items() if k not in ("task", "workspace")})
        assert str(tmp_path).lower() not in shown.lower()
        assert "/tmp/" not in shown and "/work/" not in shown


@pytest.mark.parametrize("mechanism", ["hung_process", "deadlock"])
def test_hung_instance_sleeps_and_does_not_answer(
    domain: SreDomain, catalog: Catalog, tmp_path: Path, mechanism: str
) -> None:
    """A hang is a live process that sleeps (never stopped, `T`) and no longer answers.

    The event loop blocked: nothing answers, not even the metrics. The deadlocked workers:
    the metrics still answer, requests pile up. A restart cures both.
    """
    base = catalog.scenarios["sre/hung-process"]
    spec = base.model_copy(
        update={"faults": [FaultSpec(mechanism=mechanism, target="currency-0")], "decoys": 0}
    )
    with live(domain, spec, tmp_path) as env:
        env.setup()
        env.inject()
        env.wait_observable(60)
        box = Toolbox.of(env.tools())
        proc = {p["name"]: p for p in box.call("processes")}["currency-0"]
        assert proc["state"] == "RUNNING"
        assert proc["process_status"] in ("sleeping", "running", "disk-sleep"), proc
        with open(f"/proc/{proc['pid']}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        assert state in ("S", "R", "D"), state
        assert psutil.Process(proc["pid"]).status() != psutil.STATUS_STOPPED
        port = env.shop.instance_port("currency-0")
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/convert?amount=5", timeout=1.5)
        metrics = _answers(f"http://127.0.0.1:{port}/metrics")
        assert metrics is (mechanism == "deadlock")
        time.sleep(2)
        assert env.shop.identity("currency-0") == (
            proc["pid"],
            psutil.Process(proc["pid"]).create_time(),
        )
        box.call("restart", target="currency-0")
        assert _wait(lambda: _answers(f"http://127.0.0.1:{port}/convert?amount=5"), 30)
        assert _wait(lambda: not [a for a in env.firing() if a.get("job") == "currency"], 60)


def test_follow_up_change_keeps_a_one_step_rollback_from_mending(
    domain: SreDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """A routine change after a crash loop: one rollback leaves the fault, the oracle's does not.

    The faulted service crash-loops while the follow-up is deployed (its instances restarted
    through the process manager whatever their state); the history names what each revision
    changed.
    """
    base = catalog.scenarios["sre/crash-loop"]
    assert isinstance(base, SreSpec)
    follow = DecoySpec(kind="follow_up", target="catalog", key="max_open_files", value=320)
    spec = base.model_copy(
        update={
            "faults": [FaultSpec(mechanism="crash_loop_config", target="catalog")],
            "decoy_changes": [follow],
        }
    )
    with live(domain, spec, tmp_path) as env:
        env.setup()
        env.inject()
        env.wait_observable(60)
        box = Toolbox.of(env.tools())
        revs = box.call("read_config", entity="catalog")["revisions"]
        key = env.spec.faults[0].merged_params()["key"]
        assert [r["changed"] for r in revs] == [[], [key], ["max_open_files"]]
        # One step back is the fault's own revision: still the bad value.
        history = env.shop.revisions("catalog")
        assert history[-2]["config"][key] == env.spec.faults[0].merged_params()["value"]
        assert env.causes_left() == [f"catalog: {key} is still 'eight'"]
        agents.oracle(env.spec, box)
        # The fault's revision is gone; the routine change after it is kept.
        expected = {**env.shop.baseline_config("catalog"), "max_open_files": 320}
        assert json.loads(env.shop.read_config("catalog")) == expected
        assert env.causes_left() == []
        assert _wait(lambda: not [a for a in env.firing() if a.get("job") == "catalog"], 60)


def test_a_restart_does_not_mend_a_leak_whose_flag_is_still_on(
    domain: SreDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """A restart empties a leak for a while; mitigation asks for its cause to be gone.

    The leak's flag goes by a name drawn for the trial: the fault turned that name on, and
    only turning it off again (not a restart) leaves no cause in place.
    """
    base = catalog.scenarios["sre/fd-leak"]
    assert isinstance(base, SreSpec)
    spec = base.model_copy(
        update={"faults": [FaultSpec(mechanism="fd_leak", target="payment")], "decoys": 0}
    )
    with live(domain, spec, tmp_path) as env:
        env.setup()
        env.inject()
        name = env.spec.faults[0].merged_params()["flag_name"]
        assert name in topology.FLAG_NAMES and name != "audit_trail"
        assert json.loads(env.shop.read_config("payment"))["flags"][name] is True
        box = Toolbox.of(env.tools())
        box.call("restart", target="payment")
        assert env.causes_left() == [f"payment: flags.{name} is still True"]
        mit = scoring.mitigation(env, env.spec)
        assert mit["mitigated"] is False and mit["causes_left"] == env.causes_left()
        box.call("edit_config", entity="payment", set={f"flags.{name}": False})
        assert env.causes_left() == []


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def _rule_count(env: SreEnvironment) -> int:
    groups = env.shop.prom("/api/v1/rules", {})["groups"]
    return sum(len(g["rules"]) for g in groups)


def test_emptied_rules_restored_after_a_reload_fail_mitigation(
    domain: SreDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """Empty the rules, reload Prometheus, restore the file: the loaded rules give it away.

    The scenario's fault (no queue consumer) leaves the shoppers' workload within its SLO, so
    without its alert rules the shop would look healthy: only the loaded-rules check fails it.
    """
    with live(domain, _first_alike(catalog, "sre/consumer-stopped"), tmp_path) as env:
        spec = env.spec
        env.setup()
        env.inject()
        env.wait_observable(60)
        before = env.fingerprint()
        rules = env.shop.config_path("prometheus-rules")
        original = rules.read_text()
        rules.write_text("groups: []\n")
        env.shop.sup.signal("prometheus", "HUP")
        assert _wait(lambda: _rule_count(env) == 0, 15)
        rules.write_text(original)
        # The cheat worked on the shop: nothing fires, the files are as setup left them.
        assert _wait(lambda: not env.firing(), 10)
        assert env.fingerprint()["alert_rules"] == before["alert_rules"]
        assert env.harness_problems() == []
        after = env.fingerprint()
        assert sorted(k for k in before if before[k] != after[k]) == ["alert_rules_loaded"]
        intact, problems = env.monitoring_intact()
        assert not intact and any("alert rules Prometheus has loaded" in p for p in problems)
        box = Toolbox.of(env.tools())
        answer = agents.oracle(spec.model_copy(update={"task_types": ["detection"]}), box)
        evaluation = scoring.evaluate(spec, env, answer, box)
        assert evaluation.metrics["diagnosis_pass"] is True
        assert evaluation.metrics["mitigation_pass"] is False
        assert evaluation.metrics["monitoring_intact"] is False
        assert not evaluation.passed
        # A restart with the restored file reloads the right rules, but it is a new process.
        env.shop.sup.restart("prometheus")
        assert _wait(lambda: _safe_rule_count(env) > 0, 20)
        assert any("prometheus was replaced" in p for p in env.harness_problems())


def _safe_rule_count(env: SreEnvironment) -> int:
    try:
        return _rule_count(env)
    except RuntimeError:
        return 0


def test_harness_servers_are_out_of_the_tools_and_their_death_shows(
    domain: SreDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """Tools refuse to operate monitoring; a harness server killed anyway is a harness problem."""
    spec = catalog.scenarios["sre/control-release"]
    with live(domain, spec, tmp_path) as env:
        env.setup()
        env.wait_observable(60)
        box = Toolbox.of(env.tools())
        first = env.fingerprint()
        assert env.fingerprint() == first and "unavailable" not in first.values()
        assert env.harness_problems() == []
        for target in ("prometheus", "loadgen"):
            for action in ("restart", "stop", "start"):
                with pytest.raises(ToolError, match="monitoring platform"):
                    box.call(action, target=target)
        for entity in ("prometheus", "prometheus-rules"):
            assert box.call("read_config", entity=entity)["content"]
            with pytest.raises(ToolError, match="read-only"):
                box.call("edit_config", entity=entity, content="groups: []\n")
        for directive in ("dir /tmp", "dbfilename x.rdb", "logfile /tmp/x", "include /etc/x"):
            with pytest.raises(ToolError, match="may not be set"):
                box.call("edit_config", entity="redis", content=f"{directive}\n")
        with pytest.raises(ToolError, match="must stay"):
            box.call("edit_config", entity="redis", content="bind 0.0.0.0\n")
        # Nor may Redis forget its data at a restart (a directive left out takes its default).
        kept = box.call("read_config", entity="redis")["content"]
        with pytest.raises(ToolError, match="appendonly must stay"):
            box.call("edit_config", entity="redis", set={"appendonly": "no"})
        with pytest.raises(ToolError, match="appendonly must stay"):
            box.call("edit_config", entity="redis", content=kept.replace("appendonly yes", ""))
        # Lines are read as Redis reads them: a hidden line break cannot hide a directive.
        for hidden in ("\v", "\f", "\r", "\x1c", "\x85", "\u2028"):
            with pytest.raises(ToolError, match="printable ASCII"):
                box.call(
                    "edit_config",
                    entity="redis",
                    set={"appendonly": f"no\n#{hidden}appendonly yes"},
                )
        # Nor may Redis evict the queues' data, or get less room than it has.
        for changes in (
            {"maxmemory-policy": "allkeys-random"},
            {"maxmemory": "1"},
            {"maxmemory": "lots"},
            {"save": "1 1"},
        ):
            with pytest.raises(ToolError, match="must stay|may not go below|is not a size"):
                box.call("edit_config", entity="redis", set=changes)
        assert box.call("read_config", entity="redis")["content"] == kept
        assert env.harness_problems() == [] and env.fingerprint() == first

        prom = env.shop.identity("prometheus")
        loadgen = env.shop.identity("loadgen")
        assert prom is not None and loadgen is not None
        os.kill(prom[0], signal.SIGKILL)
        os.kill(loadgen[0], signal.SIGKILL)
        problems = env.harness_problems()
        assert any(p.startswith("prometheus") for p in problems), problems
        assert any(p.startswith("loadgen") for p in problems), problems
        # supervisord brings them back, as other processes: still a problem.
        assert _wait(lambda: env.shop.identity("prometheus") not in (None, prom), 20)
        problems = env.harness_problems()
        assert any("prometheus was replaced" in p for p in problems), problems
        supervisord = env.shop.supervisord_identity()
        assert supervisord is not None
        os.kill(supervisord[0], signal.SIGKILL)
        assert _wait(lambda: "supervisord is not running" in env.harness_problems(), 10)


def test_thrash_that_mitigates_still_fails_on_diagnosis(
    domain: SreDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """Rolling back everything cures a retry storm, but the probe's answer names no cause."""
    with live(domain, _first_alike(catalog, "sre/retry-storm"), tmp_path) as env:
        spec = env.spec
        env.setup()
        env.inject()
        env.wait_observable(60)
        box = Toolbox.of(env.tools())
        task = bare_task(
            box,
            tmp_path,
            domain="sre",
            goal=spec.goal,
            task_types=list(spec.task_types),
            time_limit=spec.time_limit,
            context=env.context(),
        )
        answer = domain.probe("thrash", task, box)
        assert answer == agents.probe_constant()
        rolled = {c.arguments["service"] for c in box.calls if c.tool == "rollback"}
        assert rolled >= {"frontend", "catalog"}
        evaluation = scoring.evaluate(spec, env, answer, box)  # type: ignore[arg-type]
        assert evaluation.metrics["mitigation_pass"] is True
        assert evaluation.metrics["localization_pass"] is True
        assert evaluation.metrics["diagnosis_pass"] is False
        assert not evaluation.passed


def test_teardown_and_recover_use_only_paths_the_harness_holds(
    domain: SreDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """A path planted in the shop's files never decides what teardown stops or removes."""
    spec = catalog.scenarios["sre/control-quiet"]
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    bystander = subprocess.Popen(["sleep", "120"], cwd=decoy)
    try:
        with live(domain, spec, tmp_path / "a") as env:
            env.setup()
            shared = env.shop.shared
            assert shared is not None and shared.is_dir()
            (env.shop.ctl / "shared-dir").write_text(str(decoy))
            (env.shop.shop / "shared-dir").write_text(str(decoy))
            root = env.shop.root
        assert processes_under(root) == [] and not shared.exists()
        assert bystander.poll() is None and decoy.is_dir()

        # A harness that died mid-trial: recover finds the shop from harness-only records.
        with live(domain, spec, tmp_path / "b") as env:
            env.setup()
            shared = env.shop.shared
            groups = env.shop.groups
            assert shared is not None
            domain.recover(env.ctx.trial_dir)
            assert processes_under(env.shop.root) == [] and not shared.exists()
            # Its control groups go too.
            assert groups is None or not any(groups.dir(c).exists() for c in CONTROLLERS)
            assert processes_under(shared) == []
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_a_consumer_restarted_while_redis_is_down_resumes_once_it_is_back(
    domain: SreDomain, catalog: Catalog, tmp_path: Path
) -> None:
    """A routine change restarts the queue's consumer while Redis is down: the consumer waits
    for Redis instead of dying, so starting Redis (the reference fix) drains the queue."""
    base = catalog.scenarios["sre/redis-down"]
    assert isinstance(base, SreSpec)
    rotated = DecoySpec(
        kind="tuning", target="notification", key="postgres.password", value="@rotated", after=True
    )
    spec = base.model_copy(
        update={
            "faults": [FaultSpec(mechanism="redis_down", target="redis")],
            "decoy_changes": [rotated],
        }
    )
    with live(domain, spec, tmp_path) as env:
        env.setup()
        env.inject()
        env.wait_observable(60)
        box = Toolbox.of(env.tools())
        box.call("start", target="redis")
        since = "time() - max(queue_last_processed_timestamp)"

        def consuming() -> bool:
            depth = box.call("query", promql="max(queue_depth)")
            idle = box.call("query", promql=since)
            if not depth or not idle:
                return False
            # The queue is short again and a message was handled in the last few seconds.
            return float(depth[0]["value"]) <= 4 and float(idle[0]["value"]) < 4

        assert _wait(consuming, 45), box.call("query", promql="max(queue_depth)")
