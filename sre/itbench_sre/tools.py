"""The agent's tools on a shop: observe and act, with an action journal.

Observation: topology, alerts, metrics, logs, traces, processes, configs. Actions: restart,
stop, start, scale, rollback, edit config, undo.

Every action is journaled with the state before and after it and an undo record; ``undo``
reverts the most recent action that has not been undone yet.
"""

from __future__ import annotations

import ipaddress
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from itbench_sre import topology
from itbench_sre.backend import ShopBackend
from itbench_sre.embedded import CONFIG_ENTITIES, JOB_PROGRAM, REVISIONED, service_of
from pydantic import Field

from itbench import Tool, ToolError

#: Entities whose configuration the agent may read and edit (the shop's services and Redis).
EDITABLE = tuple(e for e in CONFIG_ENTITIES if e not in topology.MONITORING)
#: Entities whose configuration the agent may read: the monitoring platform's is read-only.
READABLE = (*EDITABLE, "prometheus", "prometheus-rules")
_MAX_LIMIT = 500
#: Redis directives an edited configuration keeps as they are: where Redis listens, that it
#: keeps its data (the work queues) across a restart and never evicts any of it, and that it
#: writes no other file.
REDIS_FIXED = ("bind", "port", "protected-mode", "appendonly", "maxmemory-policy", "save")
#: What a Redis configuration may hold besides printable ASCII: Redis splits lines at ``\n``
#: alone, so any other line break would make the check read lines Redis does not.
_REDIS_TEXT = re.compile(r"[\x20-\x7e\t\n]*")
#: Multipliers of Redis's memory units (``1k`` is 1000 bytes, ``1kb`` 1024).
_UNITS = {"": 1, "k": 1000, "kb": 1024, "m": 10**6, "mb": 2**20, "g": 10**9, "gb": 2**30}
#: Redis directives an edited configuration may set: tuning only. Paths (``dir``,
#: ``dbfilename``, ``logfile``, ``include``, modules...) would let the datastore write or read
#: files as the harness's user, and the address must stay the shop's.
REDIS_DIRECTIVES = frozenset(
    {
        "bind",
        "port",
        "protected-mode",
        "save",
        "appendonly",
        "appendfsync",
        "maxmemory",
        "maxmemory-policy",
        "maxmemory-samples",
        "maxclients",
        "databases",
        "loglevel",
        "timeout",
        "tcp-keepalive",
        "tcp-backlog",
        "hz",
        "lazyfree-lazy-eviction",
        "lazyfree-lazy-expire",
        "lazyfree-lazy-server-del",
        "lazyfree-lazy-user-del",
        "activedefrag",
        "stop-writes-on-bgsave-error",
        "slowlog-log-slower-than",
        "slowlog-max-len",
        "latency-monitor-threshold",
    }
)


@dataclass
class ActionJournal:
    """The actions of one trial, with before/after state and undo records."""

    path: Path | None = None
    entries: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(
        self,
        tool: str,
        args: dict[str, Any],
        before: Any,
        after: Any,
        undo: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """Append one action; returns the entry."""
        with self._lock:
            entry = {
                "index": len(self.entries),
                "at": round(time.time(), 3),
                "tool": tool,
                "args": args,
                "before": before,
                "after": after,
                "undo": undo,
                "undone": False,
            }
            self.entries.append(entry)
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry, default=str) + "\n")
            return entry

    def last_undoable(self) -> dict[str, Any] | None:
        """The newest action that can still be undone."""
        for entry in reversed(self.entries):
            if entry["tool"] != "undo" and not entry["undone"] and entry["undo"] is not None:
                found: dict[str, Any] = entry
                return found
        return None

    @property
    def last_action_at(self) -> float | None:
        """When the last action happened."""
        return self.entries[-1]["at"] if self.entries else None


def set_path(doc: dict[str, Any], dotted: str, value: Any) -> None:
    """Set the dotted key ``dotted`` of a JSON configuration (its parents must exist)."""
    keys = dotted.split(".")
    cur: Any = doc
    for k in keys[:-1]:
        if not isinstance(cur, dict) or k not in cur:
            raise ToolError(f"no key {dotted!r} in the configuration (stopped at {k!r})")
        cur = cur[k]
    if not isinstance(cur, dict):
        raise ToolError(f"cannot set {dotted!r}: parent is not a mapping")
    cur[keys[-1]] = value


def _changed(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two configurations (what a revision changed)."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return [] if old == new else [prefix or "(all)"]
    out: list[str] = []
    for key in sorted({*old, *new}):
        path = f"{prefix}.{key}" if prefix else str(key)
        if key not in old or key not in new:
            out.append(path)
        else:
            out += _changed(old[key], new[key], path)
    return out


class ShopTools:
    """Tool implementations bound to one shop deployment and its journal."""

    def __init__(
        self,
        shop: ShopBackend,
        journal: ActionJournal,
        traces: bool,
        prom: Callable[[str, dict[str, Any]], Any] | None = None,
    ) -> None:
        self.shop = shop
        self.journal = journal
        self.traces_enabled = traces
        #: How the tools read Prometheus: the agent's lane (the relay's), else the shop's API.
        self.prom = prom or shop.prom

    # --- helpers -----------------------------------------------------------------------------
    def _program(self, target: str) -> list[str]:
        """Programs a target names: an instance, every instance of a service, or infrastructure.

        Raises:
            ToolError: unknown target, or one of the monitoring platform (Prometheus and the
                load generator are not operated from the shop's tools).
        """
        t = target.strip().lower()
        if t in topology.MONITORING or topology.canonical(t) in topology.MONITORING:
            raise ToolError(
                f"{t} belongs to the monitoring platform, which the shop's tools do not operate"
            )
        if t in topology.all_instances() or t in topology.DATASTORES:
            return [t]
        if t in (topology.MESH, JOB_PROGRAM):
            return [t]
        name = topology.canonical(t)
        if name in topology.BY_NAME:
            states = {p["name"]: p["state"] for p in self.shop.programs()}
            active = [
                i
                for i in topology.instances(name)
                if states.get(i) not in (None, "STOPPED", "EXITED")
            ]
            return active or topology.instances(name, topology.BY_NAME[name].replicas)
        if name in (*topology.DATASTORES, topology.MESH, JOB_PROGRAM):
            return [name]
        raise ToolError(f"unknown target {target!r}; see the processes tool for names")

    def _states(self, programs: list[str]) -> dict[str, str]:
        states = {p["name"]: p["state"] for p in self.shop.programs()}
        return {p: states.get(p, "UNKNOWN") for p in programs}

    def _control(self, action: str, programs: list[str]) -> list[str]:
        problems = []
        for prog in programs:
            try:
                self.shop.control(action, prog)
            except Exception as exc:  # reported to the agent, e.g. a crash on start
                problems.append(f"{prog}: {getattr(exc, 'faultString', exc)}")
        return problems

    @staticmethod
    def _since(seconds: float) -> float:
        return time.time() - max(1.0, min(seconds, 3600.0))

    # --- observation -------------------------------------------------------------------------
    def topology(self) -> dict[str, Any]:
        """The shop's services, replicas, call edges, datastores and monitoring components."""
        return {
            "services": [
                {
                    "name": s.name,
                    "replicas": s.replicas,
                    "max_replicas": s.max_replicas,
                    "instances": topology.instances(s.name, s.replicas),
                    "calls": list(s.upstreams),
                }
                for s in topology.SERVICES
            ],
            "datastores": list(topology.DATASTORES),
            "queues": [
                {"name": queue, "on": "redis", "producer": "checkout", "consumer": consumer}
                for consumer, queue in topology.QUEUES.items()
            ],
            "jobs": [JOB_PROGRAM],
            "monitoring": list(topology.MONITORING),
            "entry": "frontend",
            "note": "every call edge runs through the mesh proxy (entity 'mesh')",
        }

    def alerts(self, include_pending: bool = False) -> list[dict[str, Any]]:
        """Alerts of the shop's Prometheus (firing ones, plus pending ones when asked)."""
        data = self.prom("/api/v1/alerts", {})
        out = []
        for a in data.get("alerts", []):
            if a["state"] == "firing" or include_pending:
                out.append(
                    {
                        "name": a["labels"].get("alertname"),
                        "state": a["state"],
                        "labels": a["labels"],
                        "summary": a.get("annotations", {}).get("summary", ""),
                        "active_since": a.get("activeAt"),
                        "value": a.get("value"),
                    }
                )
        return out

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """Evaluate a PromQL expression (instant query) now, or at epoch seconds ``at``."""
        params: dict[str, Any] = {"query": promql}
        if at is not None:
            params["time"] = f"{float(at):.3f}"
        data = self.prom("/api/v1/query", params)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"][1]}]
        return [{"metric": r["metric"], "value": r["value"][1]} for r in data["result"]]

    def query_range(
        self, promql: str, minutes: float = 2.0, step_seconds: float = 5.0
    ) -> list[dict[str, Any]]:
        """Evaluate a PromQL expression over the last ``minutes`` (range query)."""
        # Whole milliseconds, the window a whole number of steps: the last point is now.
        step_ms = round(max(0.5, step_seconds) * 1000)
        end_ms = int(time.time() * 1000)
        steps = max(1, int(max(0.1, min(minutes, 60.0)) * 60_000 // step_ms))
        start_ms = end_ms - steps * step_ms
        data = self.prom(
            "/api/v1/query_range",
            {
                "query": promql,
                "start": f"{start_ms / 1000:.3f}",
                "end": f"{end_ms / 1000:.3f}",
                "step": f"{step_ms / 1000:.3f}",
            },
        )
        return [
            {"metric": r["metric"], "values": [[round(t, 1), v] for t, v in r["values"]]}
            for r in data["result"]
        ]

    def logs(
        self,
        service: str,
        since_seconds: float = 60.0,
        filter: str = "",  # the natural name for agents
        level: str | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        """Recent JSON log records of a service's instances, newest last.

        ``filter`` keeps records whose text contains it; ``level`` keeps one level (info,
        error, ...).
        """
        name = topology.canonical(service)
        if name not in topology.BY_NAME:
            raise ToolError(f"no logs for {service!r}: services are {', '.join(topology.BY_NAME)}")
        since = self._since(since_seconds)
        out = []
        for line in self.shop.log_lines(name):
            if filter and filter not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("ts", 0) < since or (level and rec.get("level") != level):
                continue
            out.append(rec)
        out.sort(key=lambda r: r.get("ts", 0))
        return out[-max(1, min(limit, _MAX_LIMIT)) :]

    def traces(
        self,
        service: str | None = None,
        since_seconds: float = 60.0,
        errors_only: bool = False,
        limit: int = 10,
    ) -> list[dict[str, Any]]:
        """Recent traces (spans grouped by trace id) that touch a service, newest last."""
        if not self.traces_enabled:
            raise ToolError("tracing is switched off in this environment")
        name = topology.canonical(service) if service else None
        if service and name not in topology.BY_NAME:
            raise ToolError(f"unknown service {service!r}")
        since = self._since(since_seconds)
        spans: dict[str, list[dict[str, Any]]] = {}
        for line in self.shop.span_lines(None):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("start", 0) >= since:
                spans.setdefault(rec["trace_id"], []).append(rec)
        out = []
        for tid, group in spans.items():
            if name and not any(s["service"] == name for s in group):
                continue
            if errors_only and not any(s.get("error") for s in group):
                continue
            group.sort(key=lambda s: s["start"])
            out.append({"trace_id": tid, "start": group[0]["start"], "spans": group})
        out.sort(key=lambda t: t["start"])
        return out[-max(1, min(limit, 100)) :]

    def processes(self) -> list[dict[str, Any]]:
        """Every program of the shop: state, pid, uptime, process status and memory.

        A service instance also shows its memory limit, usage and OOM kills.
        """
        return self.shop.programs()

    def read_config(self, entity: str) -> dict[str, Any]:
        """The configuration of an entity, with the revisions (and keys each changed) if any.

        Entities: a service, ``redis``, ``dns`` (the name registry), ``prometheus`` or its
        rules; services and ``dns`` come with their revision history.
        """
        name = self._entity(entity, READABLE)
        out: dict[str, Any] = {"entity": name, "content": self.shop.read_config(name)}
        if name in REVISIONED:
            history = self.shop.revisions(name)
            out["revisions"] = [
                {
                    "revision": r["revision"],
                    "at": r["at"],
                    "release": r["release"],
                    "changed": _changed(history[i - 1]["config"], r["config"]) if i else [],
                }
                for i, r in enumerate(history)
            ]
        if name in topology.BY_NAME:
            sdef = topology.BY_NAME[name]
            out["available_releases"] = sorted({sdef.releases[0], *topology.candidates(name)})
        return out

    @staticmethod
    def _entity(entity: str, allowed: tuple[str, ...]) -> str:
        e = entity.strip().lower()
        name = e if e in READABLE else topology.canonical(e)
        if name in allowed:
            return name
        if name in READABLE:
            raise ToolError(
                f"{name}'s configuration belongs to the monitoring platform and is read-only"
            )
        raise ToolError(f"no configuration for {entity!r}; entities: {', '.join(allowed)}")

    def _check_redis(self, content: str) -> None:
        """Refuse a Redis configuration that sets more than tuning, or moves or empties Redis.

        A directive left out takes Redis's default: leaving out ``appendonly`` would make Redis
        forget its data at a restart.
        """
        if not _REDIS_TEXT.fullmatch(content):
            raise ToolError("a redis configuration holds printable ASCII, tabs and newlines only")
        baseline = _directives(self.shop.read_config("redis"))
        directives = _directives(content)
        for key in directives:
            if key not in REDIS_DIRECTIVES:
                raise ToolError(f"redis directive {key!r} may not be set from here")
        # Less room than the baseline's would only make Redis refuse writes sooner; none (0)
        # is more room.
        room, least = _bytes(directives.get("maxmemory", "0")), _bytes(baseline["maxmemory"])
        if room is None:
            raise ToolError(f"redis maxmemory {directives['maxmemory']!r} is not a size")
        if room and least is not None and room < least:
            raise ToolError(f"redis maxmemory may not go below {baseline['maxmemory']}")
        for key in REDIS_FIXED:
            if directives.get(key) != baseline.get(key):
                raise ToolError(f"redis {key} must stay {baseline.get(key)!r}")

    # --- actions -----------------------------------------------------------------------------
    def restart(self, target: str) -> dict[str, Any]:
        """Restart a service (all its running instances), one instance, or a component."""
        programs = self._program(target)
        before = self._states(programs)
        problems = self._control("restart", programs)
        after = self._states(programs)
        self.journal.record("restart", {"target": target}, before, after, None)
        return {"restarted": programs, "states": after, "problems": problems}

    def stop(self, target: str) -> dict[str, Any]:
        """Stop a service's instances, one instance, or a component."""
        programs = self._program(target)
        before = self._states(programs)
        problems = self._control("stop", programs)
        after = self._states(programs)
        undo = {"op": "start", "programs": [p for p, s in before.items() if s == "RUNNING"]}
        self.journal.record("stop", {"target": target}, before, after, undo)
        return {"stopped": programs, "states": after, "problems": problems}

    def start(self, target: str) -> dict[str, Any]:
        """Start a stopped service, instance or component."""
        programs = self._program(target)
        before = self._states(programs)
        problems = self._control("start", programs)
        after = self._states(programs)
        undo = {"op": "stop", "programs": [p for p, s in before.items() if s != "RUNNING"]}
        self.journal.record("start", {"target": target}, before, after, undo)
        return {"started": programs, "states": after, "problems": problems}

    def scale(self, service: str, replicas: int) -> dict[str, Any]:
        """Run ``replicas`` instances of a service."""
        name = topology.canonical(service)
        if name not in topology.BY_NAME:
            raise ToolError(f"unknown service {service!r}")
        before = self.shop.replicas(name)
        try:
            self.shop.scale(name, replicas)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        after = self.shop.replicas(name)
        self.journal.record(
            "scale",
            {"service": name, "replicas": replicas},
            {"replicas": before},
            {"replicas": after},
            {"op": "scale", "service": name, "replicas": before},
        )
        return {"service": name, "replicas": after}

    def rollback(
        self,
        service: str,
        revision: Annotated[
            int | None,
            Field(
                description="A revision number from read_config's history; by default the "
                "newest revision that differs from the running one (so repeating a default "
                "rollback swaps between the last two)."
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Redeploy an earlier revision of a service (restarted) or of the registry ``dns``."""
        name = topology.canonical(service)
        if name not in REVISIONED:
            raise ToolError(f"unknown service {service!r} (or dns)")
        if revision is not None and (isinstance(revision, bool) or not isinstance(revision, int)):
            raise ToolError(f"revision must be a revision number, got {revision!r}")
        before = self.shop.read_config(name)
        try:
            entry = self.shop.rollback(name, revision)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        after = self.shop.read_config(name)
        self.journal.record(
            "rollback",
            {"service": name} if revision is None else {"service": name, "revision": revision},
            {"config": before},
            {"config": after},
            {"op": "config", "entity": name, "content": before, "restart": True},
        )
        return {"service": name, "revision": entry["revision"], "release": entry["release"]}

    def edit_config(
        self,
        entity: str,
        set: dict[str, Any] | None = None,  # the natural name for agents
        content: str | None = None,
    ) -> dict[str, Any]:
        """Change an entity's configuration; it takes effect when the entity is restarted.

        ``set`` maps dotted keys to new values (JSON configurations) or directives to values
        (Redis's); ``content`` replaces the whole file.
        """
        name = self._entity(entity, EDITABLE)
        if (set is None) == (content is None):
            raise ToolError("give exactly one of 'set' or 'content'")
        before = self.shop.read_config(name)
        if set is not None and name == "redis":
            new = _set_directives(before, set)
        elif set is not None:
            try:
                doc = json.loads(before)
            except ValueError:
                raise ToolError(f"{name}'s configuration is not JSON: use 'content'") from None
            for key, value in set.items():
                set_path(doc, key, value)
            new = json.dumps(doc, indent=2) + "\n"
        else:
            new = str(content)
        if name == "redis":
            self._check_redis(new)
        else:
            _check_addresses(name, new)
        self.shop.write_config(name, new)
        self.shop.record_config(name)
        self.journal.record(
            "edit_config",
            {"entity": name, "set": set, "content": content},
            {"config": before},
            {"config": new},
            {"op": "config", "entity": name, "content": before, "restart": False},
        )
        return {"entity": name, "written": True, "note": "restart the entity to apply"}

    def undo(self) -> dict[str, Any]:
        """Revert the most recent action that has not been undone yet."""
        entry = self.journal.last_undoable()
        if entry is None:
            raise ToolError("nothing to undo")
        rec = entry["undo"]
        op = rec["op"]
        if op == "start":
            self._control("start", rec["programs"])
        elif op == "stop":
            self._control("stop", rec["programs"])
        elif op == "scale":
            self.shop.scale(rec["service"], rec["replicas"])
        elif op == "config":
            self.shop.write_config(rec["entity"], rec["content"])
            self.shop.record_config(rec["entity"])
            if rec.get("restart") and rec["entity"] in topology.BY_NAME:
                self.shop.restart_service(rec["entity"])
        entry["undone"] = True
        self.journal.record("undo", {"of": entry["index"]}, None, None, None)
        return {"undone": entry["index"], "tool": entry["tool"], "args": entry["args"]}


_NAME = re.compile(r"[a-z][a-z0-9-]*\.svc")


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_addresses(entity: str, content: str) -> None:
    """Refuse a configuration that sends the shop's traffic off this machine.

    Registry records must name loopback addresses; service upstreams must be registry names
    or loopback addresses.
    """
    try:
        doc = json.loads(content)
    except ValueError:
        return  # the service itself refuses an unreadable configuration
    if not isinstance(doc, dict):
        return
    if entity == topology.DNS:
        records = doc.get("records", {})
        for name, address in records.items() if isinstance(records, dict) else ():
            if not _NAME.fullmatch(str(name)) or not _loopback(str(address)):
                raise ToolError(
                    f"dns record {name!r} -> {address!r}: names end in .svc and addresses are "
                    "loopback (127.0.0.0/8)"
                )
        return
    upstreams = doc.get("upstreams", {})
    for name, address in upstreams.items() if isinstance(upstreams, dict) else ():
        host = str(address).rpartition(":")[0]
        if not (_NAME.fullmatch(host) or _loopback(host)):
            raise ToolError(
                f"upstream {name!r} -> {address!r}: an address is a registry name (NAME.svc) or "
                "a loopback address, with a port"
            )


def _set_directives(text: str, changes: dict[str, Any]) -> str:
    """A Redis configuration with each directive of ``changes`` set (replaced or added)."""
    want = {str(k).lower(): str(v) for k, v in changes.items()}
    lines, done = [], set()
    for line in text.rstrip("\n").split("\n"):
        words = line.strip().split(None, 1)
        key = words[0].lower() if words else ""
        if key not in want:
            lines.append(line)
        elif key not in done:  # the first line of a directive takes the value, others go
            lines.append(f"{key} {want[key]}")
            done.add(key)
    lines += [f"{k} {v}" for k, v in want.items() if k not in done]
    return "\n".join(lines) + "\n"


def _bytes(size: str) -> int | None:
    """A Redis memory size (``64mb``, ``1gb``, ``65536``) in bytes, or ``None``."""
    match = re.fullmatch(r"(\d+)([kmg]b?)?", size.strip().lower())
    if match is None:
        return None
    return int(match.group(1)) * _UNITS[match.group(2) or ""]


def _directives(text: str) -> dict[str, str]:
    r"""Directive name -> rest of the line of a Redis configuration (the last one wins).

    Lines are split as Redis splits them, at ``\n`` alone (:data:`_REDIS_TEXT` keeps out the
    characters Python would also break a line at).
    """
    out: dict[str, str] = {}
    for line in text.split("\n"):
        words = line.strip().split(None, 1)
        if words and not words[0].startswith("#"):
            out[words[0].lower()] = words[1].strip() if len(words) > 1 else ""
    return out


def build_tools(
    shop: ShopBackend,
    journal: ActionJournal,
    traces: bool,
    prom: Callable[[str, dict[str, Any]], Any] | None = None,
) -> list[Tool]:
    """The agent's tools on ``shop``, reading Prometheus with ``prom`` (default the shop's)."""
    t = ShopTools(shop, journal, traces, prom)
    observe: list[Callable[..., Any]] = [
        t.topology,
        t.alerts,
        t.query,
        t.query_range,
        t.logs,
        t.processes,
        t.read_config,
    ]
    if traces:
        observe.insert(5, t.traces)
    act: list[Callable[..., Any]] = [
        t.restart,
        t.stop,
        t.start,
        t.scale,
        t.rollback,
        t.edit_config,
        t.undo,
    ]
    return [Tool.from_function(f) for f in observe] + [
        Tool.from_function(f, action=True) for f in act
    ]


__all__ = ["ActionJournal", "ShopTools", "build_tools", "service_of"]
