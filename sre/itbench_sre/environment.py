"""The SRE environment of one trial: deploy the shop, inject faults and noise, expose tools."""

from __future__ import annotations

import hashlib
import json
import random
import secrets
import threading
import time
from pathlib import Path
from typing import Any

import yaml
from itbench_sre import cause, faults, spread, topology
from itbench_sre.backend import ChangeSet
from itbench_sre.embedded import JOB_PROGRAM, REVISIONED, EmbeddedShop
from itbench_sre.promproxy import PrometheusProxy
from itbench_sre.spec import (
    ALERT_BLIP_DELAY_MS,
    BLIP_DELAY_MS,
    RENEWED,
    RESOLVED,
    ROTATED,
    DecoySpec,
    NoiseSpec,
    SreSpec,
)
from itbench_sre.stray import StrayClient
from itbench_sre.tools import ActionJournal, build_tools, set_path

from itbench import Environment, InfrastructureError, Tool, TrialContext

#: The fault's measured spread of each live trial, by trial handle. In the harness's memory
#: only: the oracle reads its own trial's to submit the spread the evaluator measured.
HANDOVER: dict[str, list[tuple[str, str]]] = {}
#: Seconds of fault window (less the settles it leaves out) the handover waits for, so that
#: every edge the workload calls about once a second has calls enough to be judged.
MIN_WINDOW_S = 10.0
#: Seconds of fault window after which the handover measures whatever calls the fault's edges
#: carried (:data:`spread.MIN_ANCHOR_CALLS` is waited for until then).
MAX_WINDOW_S = 30.0
#: Seconds between two counts of the fault's edges' calls while the handover waits for them.
_COUNT_EVERY_S = 1.0
#: Seconds after a restarted instance runs again that its callers' calls may still fail.
_SETTLE_TAIL_S = 1.5
#: Longest settle after a change (a crash-looping service never runs again).
_SETTLE_MAX_S = 8.0
#: Seconds the measurement waits at handover for the scrape that ends its window.
_LAST_SCRAPE_S = 0.6
#: Seconds between two changes of the injection (decoys and faults), drawn per change: long
#: enough for restarted instances to serve again, and no gap that sets the faults apart.
_PAUSE_S = (1.0, 2.5)
#: Seconds a check of a signature counts as shown after it last held.
_HELD_S = 10.0
#: Files whose change means monitoring was tampered with.
MONITORING_FILES = ("prometheus", "prometheus-rules")
#: Programs of the harness that the evaluator relies on (never operated by the agent's tools).
HARNESS_PROGRAMS = ("prometheus", "loadgen")
#: What a digest of a monitoring input is when Prometheus cannot tell it.
UNAVAILABLE = "unavailable"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _rules_view(groups: list[dict[str, Any]]) -> str:
    """The loaded alert rules as Prometheus reports them, without their evaluation state."""
    keep = ("type", "name", "query", "duration", "labels", "annotations")
    view = [
        {
            "name": g.get("name"),
            "file": Path(str(g.get("file", ""))).name,
            "interval": g.get("interval"),
            "rules": [{k: r.get(k) for k in keep} for r in g.get("rules", [])],
        }
        for g in groups
    ]
    return json.dumps(view, sort_keys=True)


class SreEnvironment(Environment):
    """A shop deployment with the scenario's faults.

    Args:
        spec: The scenario.
        ctx: The trial context (directory and port block).
    """

    def __init__(self, spec: SreSpec, ctx: TrialContext) -> None:
        self.spec = spec
        self.ctx = ctx
        self.shop = EmbeddedShop(
            ctx.trial_dir / "env",
            ctx.port_base,
            traces=spec.traces,
            workload_rate=spec.workload_rate,
            flag_names=spec.flag_names,
            phrasing=spec.phrasing,
            faulty_releases=spec.faulty_releases,
        )
        self.journal = ActionJournal(ctx.trial_dir / "actions.jsonl")
        self.baseline: dict[str, Any] = {}
        self.injected_at: float | None = None
        self.observable_at: float | None = None
        self._timers: list[threading.Timer] = []
        self._settlers: list[threading.Thread] = []
        self._strays: list[StrayClient] = []
        self.trigger_until = 0.0
        #: (pid, start time) of each harness server, taken at the end of setup.
        self.identities: dict[str, tuple[int, float] | None] = {}
        self.proxy = PrometheusProxy(ctx.port(topology.PROM_API), ctx.port(topology.PROMETHEUS))
        self.serving_since: float | None = None
        self.quiet_until: float | None = None
        #: The fault's spread, measured at handover (``None``: a control, or not yet).
        self.spread: spread.Spread | None = None
        #: Spans the spread's fault window leaves out: the settle after each change the
        #: harness played that is no fault (decoys, follow-ups, noise).
        self.quiet_spans: list[tuple[float, float]] = []
        #: When the handover last counted the calls on the fault's edges (monotonic).
        self._counted_at = -1e9
        #: The configuration keys the faults set (mitigation checks they no longer hold).
        self.causes: list[cause.Cause] = []

    # --- lifecycle ---------------------------------------------------------------------------
    def setup(self) -> None:
        """Deploy the shop and wait until the workload is served."""
        start = time.time()
        self.shop.deploy()
        self.shop.wait_serving(start)
        self.serving_since = time.time()
        self.proxy.start()
        self.baseline = {
            "replicas": {s.name: s.replicas for s in topology.SERVICES},
            "files": {e: _digest(self.shop.read_config(e)) for e in MONITORING_FILES},
            "loaded": self._wait_rules_loaded(),
            "loadgen": _digest(self.shop.read_private("loadgen.json")),
            "products": self._count("products"),
        }
        # A program serves before supervisord calls it RUNNING (after its startsecs), so the
        # identities are taken once every harness server has reached that state.
        end = time.monotonic() + 10
        while True:
            self.identities = self._harness_identities()
            missing = [name for name, ident in self.identities.items() if ident is None]
            if not missing:
                break
            if time.monotonic() > end:
                raise InfrastructureError(f"harness servers not running after setup: {missing}")
            time.sleep(0.1)

    def _loaded(self) -> dict[str, str]:
        """Digests of the alert rules and configuration Prometheus has loaded (its HTTP API)."""
        out = {}
        try:
            out["rules"] = _digest(_rules_view(self.shop.prom("/api/v1/rules", {})["groups"]))
        except (RuntimeError, KeyError, TypeError):
            out["rules"] = UNAVAILABLE
        try:
            out["config"] = _digest(str(self.shop.prom("/api/v1/status/config", {})["yaml"]))
        except (RuntimeError, KeyError, TypeError):
            out["config"] = UNAVAILABLE
        return out

    def _wait_rules_loaded(self, timeout: float = 20.0) -> dict[str, str]:
        """The loaded digests once Prometheus serves every rule of the rules file."""
        want = len(yaml.safe_load(self.shop.read_config("prometheus-rules"))["groups"][0]["rules"])
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                groups = self.shop.prom("/api/v1/rules", {})["groups"]
                if sum(len(g.get("rules", [])) for g in groups) == want:
                    loaded = self._loaded()
                    if UNAVAILABLE not in loaded.values():
                        return loaded
            except (RuntimeError, KeyError, TypeError):
                pass
            time.sleep(0.2)
        raise InfrastructureError("Prometheus did not load the alert rules")

    def _harness_identities(self) -> dict[str, tuple[int, float] | None]:
        out = {"supervisord": self.shop.supervisord_identity()}
        for program in HARNESS_PROGRAMS:
            out[program] = self.shop.identity(program)
        return out

    def _count(self, table: str) -> int | None:
        try:
            return int(self.shop.sql(f"SELECT count(*) FROM {table}")[0][0])
        except Exception:  # a broken database simply has no count
            return None

    def inject(self) -> None:
        """Play the noise, the decoy history, then the faults."""
        self.quiet_until = time.time()
        for noise in self.spec.noise:
            self._noise(noise)
        pace = random.Random(self.ctx.secret_seed("sre-pace"))
        changes = 0

        def pause() -> None:
            # Between any two changes (none before the first): the revision times show no gap
            # around the faults.
            nonlocal changes
            if changes:
                time.sleep(pace.uniform(*_PAUSE_S))
            changes += 1

        before = [d for d in self.spec.decoy_changes if not d.after and d.kind != "follow_up"]
        for decoy in before:
            pause()
            self._decoy(decoy)
        self.trigger_until = 0.0
        self.injected_at = None
        for f in self.spec.faults:
            pause()
            self.injected_at = self.injected_at or time.time()
            mech = faults.get(f.mechanism)
            params = f.merged_params()
            change = mech.inject(self.shop, f.chosen, params)
            if mech.config_cause:
                for entity, content in change.files:
                    if entity in REVISIONED:
                        before = json.loads(self.shop.read_config(entity))
                        self.causes += cause.changed(entity, before, json.loads(content))
            # The deployment's own restart is no lasting effect of the fault either.
            self._quiet([program for program, sig in change.signals if sig == "TERM"])
            self.shop.apply(change)
            if mech.trigger is not None:
                self.shop.apply(mech.trigger(self.shop, f.chosen, params))
                seconds = float(params.get("trigger_seconds", 5))
                self.trigger_until = max(self.trigger_until, time.time() + seconds)
                timer = threading.Timer(seconds, self._clear_blip)
                timer.daemon = True
                timer.start()
                self._timers.append(timer)
        # Routine changes after the faults (on another service, or a follow-up on a faulted
        # one): neither the newest revision nor the last restart names the cause.
        for decoy in self.spec.decoy_changes:
            if decoy.after or decoy.kind == "follow_up":
                pause()
                self._decoy(decoy)
        # The workload's offered rate is part of the problem (a surge): what tampering is
        # judged against is what the faults left.
        self.baseline["loadgen"] = _digest(self.shop.read_private("loadgen.json"))

    def _quiet(self, instances: list[str] | None = None, seconds: float = 0.0) -> None:
        """Leave the settle after a change about to be played out of the spread's window.

        For a change that restarts ``instances``, the settle lasts until each of them runs as a
        new process, and :data:`_SETTLE_TAIL_S` more (its callers' calls in flight), at most
        :data:`_SETTLE_MAX_S` (a crash-looping service never comes back); for a blip, its
        ``seconds`` and :data:`spread.SETTLE_S` more.
        """
        start = time.time()
        if instances is None:
            self.quiet_spans.append((start, start + seconds + spread.SETTLE_S))
            return
        if not instances:
            return
        before = {i: self.shop.identity(i) for i in instances}
        index = len(self.quiet_spans)
        self.quiet_spans.append((start, start + _SETTLE_MAX_S))

        def settle() -> None:
            while time.time() < start + _SETTLE_MAX_S and not self.shop._torn_down:
                now = {i: self.shop.identity(i) for i in instances}
                if all(now[i] is not None and now[i] != before[i] for i in instances):
                    end = min(start + _SETTLE_MAX_S, time.time() + _SETTLE_TAIL_S)
                    self.quiet_spans[index] = (start, end)
                    return
                time.sleep(0.1)

        thread = threading.Thread(target=settle, name="sre-settle", daemon=True)
        thread.start()
        self._settlers.append(thread)

    def _decoy(self, decoy: DecoySpec) -> None:
        """Play one decoy: a routine change deployed, or a stray client started."""
        if decoy.kind == "stray_client":
            client = StrayClient(
                decoy.target,
                self.shop.instance_port(topology.instances(decoy.target, 1)[0]),
                float(decoy.value),
                tls="serve_tls" in self.shop.baseline_config(decoy.target),
            )
            self._strays.append(client)
            client.start()
            return
        if decoy.kind == "registry":
            records = json.loads(self.shop.read_config(topology.DNS))
            if decoy.key == "alias":
                records["records"][f"{decoy.value}-next.svc"] = "127.0.0.1"
            else:
                records[decoy.key] = decoy.value
            self.shop.apply(ChangeSet(files=[(topology.DNS, json.dumps(records, indent=2) + "\n")]))
            return
        cfg = json.loads(self.shop.read_config(decoy.target))
        if decoy.kind == "patch_release":
            # A newer release that works: its number alone says nothing.
            pick = random.Random(self.ctx.secret_seed(f"sre-release-{decoy.target}"))
            cfg["release"] = self.shop.good_release(decoy.target, pick)
        elif decoy.value == RESOLVED:
            # The upstream by address rather than by name: the same mesh endpoint.
            upstream = decoy.key.removeprefix("upstreams.")
            _host, _, port = str(cfg["upstreams"][upstream]).rpartition(":")
            cfg["upstreams"][upstream] = f"127.0.0.1:{port}"
        elif decoy.value == RENEWED:
            cfg["serve_tls"] = {
                "cert": f"certs/{self.shop.certs['renewed_cert']}",
                "key": f"certs/{self.shop.certs['renewed_key']}",
            }
        elif decoy.value != ROTATED:
            set_path(cfg, decoy.key, decoy.value)
        restarted = topology.instances(decoy.target, topology.BY_NAME[decoy.target].replicas)
        self._quiet(restarted)
        if decoy.value == ROTATED:
            # The database learns the new password first; open sessions keep theirs, and the
            # restarted instances log in with the new one.
            secret = secrets.token_hex(8)
            role = cfg["postgres"]["user"]
            self.shop.apply(ChangeSet(sql=[f"ALTER ROLE {role} PASSWORD '{secret}'"]))
            cfg["postgres"]["password"] = secret
        if decoy.kind == "follow_up":
            # The faulted service may be crash-looping: its instances are restarted through the
            # process manager, whatever their state, rather than signalled by pid.
            self.shop.apply(ChangeSet(files=[(decoy.target, json.dumps(cfg, indent=2) + "\n")]))
            self.shop.restart_service(decoy.target, wait=False)
            return
        self.shop.apply(
            ChangeSet(
                files=[(decoy.target, json.dumps(cfg, indent=2) + "\n")],
                signals=[
                    (i, "TERM")
                    for i in topology.instances(
                        decoy.target, topology.BY_NAME[decoy.target].replicas
                    )
                ],
            )
        )

    def _noise(self, noise: NoiseSpec) -> None:
        if noise.kind == "restart_replica":
            self._quiet([noise.target or ""])
            self.shop.apply(ChangeSet(programs=[("restart", noise.target or "")]))
        elif noise.kind == "compatible_release":
            self._decoy(DecoySpec(kind="patch_release", target=noise.target or ""))
        elif noise.kind in ("latency_blip", "alert_blip"):
            self._quiet(seconds=noise.seconds)
            delay = BLIP_DELAY_MS if noise.kind == "latency_blip" else ALERT_BLIP_DELAY_MS
            self.shop.apply(ChangeSet(links={noise.target or "": {"delay_ms": delay}}))
            timer = threading.Timer(noise.seconds, self._clear_blip)
            timer.daemon = True
            timer.start()
            self._timers.append(timer)

    def _clear_blip(self) -> None:
        if self.shop._torn_down:
            return
        try:
            self.shop.apply(ChangeSet(links=self._fault_links()))
        except Exception as exc:  # a timer thread: nobody to raise to
            # Teardown may have begun meanwhile (the supervisor's socket gone): then there is
            # nothing left to clear.
            if not self.shop._torn_down:
                self.ctx.log.warning("could not clear a transient link change: %s", exc)

    def _fault_links(self) -> dict[str, dict[str, Any]]:
        links: dict[str, dict[str, Any]] = {}
        for f in self.spec.faults:
            mech = faults.get(f.mechanism)
            change = mech.inject(self.shop, f.chosen, f.merged_params())
            if change.links:
                links.update(change.links)
        return links

    def firing(self) -> list[dict[str, str]]:
        """Labels of the alerts firing now."""
        data = self.shop.prom("/api/v1/alerts", {})
        return [a["labels"] for a in data.get("alerts", []) if a["state"] == "firing"]

    def holds(self, check: faults.Check) -> bool:
        """Whether one observable condition of a fault holds now."""
        if check.promql:
            try:
                return bool(self.shop.prom("/api/v1/query", {"query": check.promql})["result"])
            except (RuntimeError, KeyError):
                return False
        since = time.time() - 10
        text = self.shop.phrases.wording(check.log_text)
        for line in reversed(self.shop.log_lines(check.log_service)):
            if text in line:
                try:
                    return float(json.loads(line).get("ts", 0)) >= since
                except ValueError:
                    continue
        return False

    def wait_observable(self, timeout: float) -> None:
        """Wait until every fault shows its observable signature (control: a scraped shop).

        Readiness never looks at alerts: some faults raise none at handover, and a control
        may start with a noise alert firing (then the readiness waits for it).
        """
        end = time.monotonic() + timeout
        checks = [
            faults.get(f.mechanism).signature(f.chosen, f.merged_params()) for f in self.spec.faults
        ]
        blips = [n for n in self.spec.noise if n.kind == "alert_blip"]
        missing: list[str] = []
        # When each check last held: an intermittent effect (a flapping link, sparse failing
        # calls) counts as shown for a while.
        held: dict[faults.Check, float] = {}
        shown = False
        while time.monotonic() < end:
            if not self.shop.scraping():
                time.sleep(0.25)
                continue
            if checks:
                # A fault with a transient trigger is observable only once it outlived it.
                if time.time() < self.trigger_until + 2:
                    time.sleep(0.25)
                    continue
                now = time.monotonic()
                for check in {c for group in checks for c in group}:
                    if self.holds(check):
                        held[check] = now
                missing = [
                    c.describe()
                    for group in checks
                    for c in group
                    if now - held.get(c, -1e9) > _HELD_S
                ]
                # Once shown, the signature need not hold again while the spread's window
                # fills (a leak that exhausted its limit may no longer be scraped).
                shown = shown or not missing
                window = self._window_s()
                if shown and window < MIN_WINDOW_S:
                    missing = [f"{MIN_WINDOW_S:g} s of the spread's window"]
                elif shown and window < MAX_WINDOW_S and not self._calls_enough(now):
                    missing = [f"{spread.MIN_ANCHOR_CALLS} calls on the fault's edges"]
                elif shown:
                    self.observable_at = time.time()
                    self._measure_spread()
                    return
            else:
                try:
                    firing = self.firing()
                except RuntimeError:
                    firing = []
                if not blips or firing:
                    self.observable_at = time.time()
                    return
                missing = ["the noise's alert"]
            time.sleep(0.25)
        raise InfrastructureError(
            f"fault not observable within {timeout:.0f}s; missing: {', '.join(missing) or 'scrapes'}"
        )

    def _window_s(self) -> float:
        """Seconds of the spread's fault window so far."""
        if self.injected_at is None:
            return 0.0
        spans = spread.left_out(self.injected_at, time.time(), self.quiet_spans)
        return sum(b - a for a, b in spans)

    def _calls_enough(self, now: float) -> bool:
        """Whether the edges into the fault's anchors carried calls enough to be judged.

        Counted at most every :data:`_COUNT_EVERY_S`; always true for faults whose spread is
        not scored.
        """
        if not any(faults.get(f.mechanism).spread for f in self.spec.faults):
            return True
        if now - self._counted_at < _COUNT_EVERY_S:
            return False
        self._counted_at = now
        if self.injected_at is None:
            return True
        spans = spread.left_out(self.injected_at, time.time(), self.quiet_spans)
        try:
            during = spread.counts(self._query_at, spans)
        except (RuntimeError, KeyError, TypeError):
            return False
        return spread.anchor_calls(during, self._anchors()) >= spread.MIN_ANCHOR_CALLS

    def _measure_spread(self) -> None:
        """Measure the fault's spread at handover, before the agent can act on the shop.

        The fault window runs from the first fault's injection to now, less the settle after
        every decoy and noise change; the baseline window from when the shop served until the
        first change.
        """
        if self.injected_at is None or self.serving_since is None:
            return
        time.sleep(_LAST_SCRAPE_S)
        end = self.observable_at or time.time()
        for thread in self._settlers:
            thread.join(timeout=max(0.0, _SETTLE_MAX_S))
        base = (self.serving_since, self.quiet_until or self.injected_at)
        try:
            self.spread = spread.measure(
                self._query_at,
                base,
                (self.injected_at, end),
                self._anchors(),
                self.quiet_spans,
            )
        except (RuntimeError, KeyError, TypeError) as exc:
            raise InfrastructureError(f"cannot measure the fault's spread: {exc}") from exc

    def _anchors(self) -> list[str]:
        """Where the faults' spread starts: each fault's root, or its mechanism's anchors."""
        out: list[str] = []
        for f in self.spec.faults:
            mech = faults.get(f.mechanism)
            if mech.anchors is not None:
                out += mech.anchors(f.chosen, f.merged_params())
            else:
                out.append(mech.root(f.chosen))
        return out

    def agent_started(self) -> None:
        """Publish the measured spread for the oracle (harness memory only)."""
        if self.spread is not None:
            HANDOVER[self.ctx.trial_id] = list(self.spread.edges)

    def agent_finished(self) -> list[str]:
        """Close the agent's lane to Prometheus (relay and tools) and abort what is in flight."""
        return self.proxy.end_turn()

    def _query_at(self, promql: str, at: float) -> list[dict[str, Any]]:
        data = self.shop.prom("/api/v1/query", {"query": promql, "time": f"{at:.3f}"})
        return [{"metric": r["metric"], "value": r["value"][1]} for r in data.get("result", [])]

    def tools(self) -> list[Tool]:
        """The agent's tools (they read Prometheus through the agent's lane, the relay's)."""
        return build_tools(self.shop, self.journal, self.spec.traces, self.proxy.read)

    def context(self) -> dict[str, Any]:
        """Public facts: entity names, fault-type vocabulary, SLO and answer format."""
        return {
            "system": "a web shop of HTTP services with Redis, PostgreSQL, work queues, "
            "a mesh proxy on every call edge, Prometheus and a load generator",
            "entities": topology.entities(),
            "edges": [topology.edge_name(c, u) for c, u in topology.edges()],
            "prometheus": self.proxy.url,
            "fault_types": list(faults.FAULT_TYPES),
            "slo": {
                "success_ratio": self.spec.slo.success_ratio,
                "p95_ms": self.spec.slo.p95_ms,
            },
            "traces": self.spec.traces,
            "answer": "incident: true/false; root_causes: the root-cause entities, most likely "
            "first (a network link as its edge caller->callee); fault_type; propagation: "
            "[[from, to], ...] the call edges that degraded, from the cause towards the shoppers",
            "batch_job": JOB_PROGRAM,
        }

    def teardown(self) -> None:
        """Stop everything (idempotent)."""
        for timer in self._timers:
            timer.cancel()
        for client in self._strays:
            client.stop()
        self.proxy.stop()
        HANDOVER.pop(self.ctx.trial_id, None)
        self.shop.teardown()

    # --- integrity ---------------------------------------------------------------------------
    def fingerprint(self) -> dict[str, str]:
        """Digests of what the evaluator judges by: ground truth, SLO, monitoring, workload.

        The alert rules and scrape configuration count twice: as files and as what Prometheus
        has loaded (its HTTP API), so a file restored after a reload still shows.
        """
        loaded = self._loaded()
        return {
            "ground_truth": _digest(self.spec.truth().model_dump_json()),
            "slo": _digest(self.spec.slo.model_dump_json()),
            "task_types": _digest(json.dumps(list(self.spec.task_types))),
            "alert_rules": self._file_digest("prometheus-rules"),
            "alert_rules_loaded": loaded["rules"],
            "scrape_config": self._file_digest("prometheus"),
            "scrape_config_loaded": loaded["config"],
            "loadgen_config": self._private_digest("loadgen.json"),
        }

    def _file_digest(self, entity: str) -> str:
        try:
            return _digest(self.shop.read_config(entity))
        except OSError:
            return UNAVAILABLE

    def _private_digest(self, name: str) -> str:
        try:
            return _digest(self.shop.read_private(name))
        except OSError:
            return UNAVAILABLE

    def harness_problems(self) -> list[str]:
        """Harness servers (supervisord, Prometheus, load generator) dead or replaced since setup.

        The agent's tools never start, stop or restart them, so any change is tampering.
        """
        if not self.identities:
            return []
        problems = []
        now = self._harness_identities()
        for name, before in self.identities.items():
            after = now.get(name)
            if after is None:
                problems.append(f"{name} is not running")
            elif after != before:
                problems.append(f"{name} was replaced (pid {before and before[0]} -> {after[0]})")
        if now.get("supervisord") is not None and not self.shop.sup.alive():
            problems.append("supervisord does not answer")
        if now.get("prometheus") is not None and not any(
            self.shop.prom_ready(timeout=5) for _ in range(3)
        ):
            problems.append("prometheus does not answer")
        return problems

    # --- evaluation helpers ------------------------------------------------------------------
    def monitoring_intact(self) -> tuple[bool, list[str]]:
        """Whether alert rules, scrape config, Prometheus and the load generator are untouched.

        Compares the files and what Prometheus has loaded (``/api/v1/rules``,
        ``/api/v1/status/config``) with what setup left.
        """
        problems = []
        for entity in MONITORING_FILES:
            if self._file_digest(entity) != self.baseline["files"][entity]:
                problems.append(f"{entity} configuration changed")
        loaded = self._loaded()
        if loaded["rules"] != self.baseline["loaded"]["rules"]:
            problems.append("the alert rules Prometheus has loaded differ from setup's")
        if loaded["config"] != self.baseline["loaded"]["config"]:
            problems.append("the configuration Prometheus has loaded differs from setup's")
        if self._private_digest("loadgen.json") != self.baseline["loadgen"]:
            problems.append("load generator configuration changed")
        for program in HARNESS_PROGRAMS:
            if not self.shop.running(program):
                problems.append(f"{program} is not running")
        return not problems, problems

    def causes_left(self) -> list[str]:
        """The faults' configuration changes still in place (an unreadable one counts)."""

        def read(entity: str) -> Any:
            try:
                return json.loads(self.shop.read_config(entity))
            except (OSError, ValueError):
                return None

        return cause.left(read, self.causes)

    def regressions(self) -> list[str]:
        """Baseline services below their replicas, or data the workload relies on gone."""
        problems = []
        for service, want in self.baseline.get("replicas", {}).items():
            have = self.shop.replicas(service)
            if have < want:
                problems.append(f"{service} runs {have} of {want} baseline replicas")
        for program in ("redis", "postgres", "mesh"):
            if not self.shop.running(program):
                problems.append(f"{program} is not running")
        products = self._count("products")
        if self.baseline.get("products") is not None and products != self.baseline["products"]:
            problems.append(
                f"products table holds {products} rows, baseline {self.baseline['products']}"
            )
        return problems

    def workload(self, since: float, until: float) -> dict[str, Any]:
        """Success ratio and p95 latency of the workload between two times."""
        rows = [o for o in self.shop.outcomes(since) if o["ts"] <= until]
        if not rows:
            return {"requests": 0, "success_ratio": 0.0, "p95_ms": None}
        ok = sum(1 for o in rows if o["ok"])
        lat = sorted(o["ms"] for o in rows)
        p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
        return {"requests": len(rows), "success_ratio": ok / len(rows), "p95_ms": p95}


def trial_root(trial_dir: Path) -> Path:
    """The environment directory of a trial."""
    return trial_dir / "env"
