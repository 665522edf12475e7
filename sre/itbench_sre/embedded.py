"""The embedded backend: the shop as local processes under one supervisord per environment."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import yaml
from itbench_sre import cgroups, pgtemplate, topology
from itbench_sre.ansible import run_playbook
from itbench_sre.app import limited
from itbench_sre.app.phrases import FEATURES_FILE, PHRASES_FILE, RELEASES_FILE, Phrasebook
from itbench_sre.backend import ChangeSet, ShopBackend
from itbench_sre.promproxy import QUERY_FLAGS
from itbench_sre.rules import alert_rules
from itbench_sre.supervisor import Supervisor

from itbench import InfrastructureError, ManagedProcess, port_open, record_pid, stop_marked

log = logging.getLogger("itbench.sre")

PROGRAM_INFRA = ("redis", "postgres", "mesh", "prometheus", "loadgen")
#: Prometheus scrape and rule evaluation interval: faults show within a second or two.
SCRAPE_INTERVAL = "500ms"
#: The shop's batch job: a report exporter that works on the database in every deployment.
JOB_PROGRAM = "reports"
#: Name of the harness-only record of an environment's paths outside its root (for recover).
HARNESS_RECORD = "harness.json"
#: Where Redis keeps its append-only file, in its working directory (Redis's default name).
REDIS_DATA = "appendonlydir"
_SHARED_NAME = re.compile(r"env-[0-9a-f]{12}")
#: Entities whose configuration the tools expose (services, Redis, Prometheus).
CONFIG_ENTITIES = tuple(s.name for s in topology.SERVICES) + ("redis", topology.DNS, "prometheus")
#: Entities whose every configuration deployment is kept as a revision.
REVISIONED = (*(s.name for s in topology.SERVICES), topology.DNS)


def service_of(program: str) -> str:
    """The entity a program belongs to (``cart-1`` -> ``cart``)."""
    base, _, idx = program.rpartition("-")
    return base if idx.isdigit() and base in topology.BY_NAME else program


class EmbeddedShop(ShopBackend):
    """One shop deployment in its own directory and port block.

    Args:
        root: Harness-private directory of this environment.
        port_base: First port of the environment's block.
        traces: Whether services record spans.
        workload_rate: Requests per second of the load generator.
        overrides: Per-service config overrides applied to the baseline deployment.
        flag_names: Per service, the name each flag goes by (drawn per trial; none: its own).
        phrasing: The wording of each of the shop's messages (drawn per trial; none: the first).
        faulty_releases: Per service, its faulty newer release (drawn; none: the next minor).
    """

    def __init__(
        self,
        root: Path,
        port_base: int,
        traces: bool = True,
        workload_rate: float = 8.0,
        overrides: dict[str, dict[str, Any]] | None = None,
        flag_names: dict[str, dict[str, str]] | None = None,
        phrasing: dict[str, int] | None = None,
        faulty_releases: dict[str, str] | None = None,
    ) -> None:
        self.root = root
        self.faulty_releases = faulty_releases or {}
        self.flag_names = flag_names or {}
        #: This trial's wording of the shop's own messages.
        self.phrases = Phrasebook(phrasing)
        self.port_base = port_base
        self.traces = traces
        self.workload_rate = workload_rate
        self.overrides = overrides or {}
        self.shop = root / "shop"
        self.ctl = root / "ctl"
        self.pg_dir: Path | None = None
        #: The environment's directory under the shared root (data the datastore user reaches).
        #: Held in memory: teardown never reads it back from a file.
        self.shared: Path | None = None
        self.supervisord: ManagedProcess | None = None
        self.held: list[Any] = []
        #: Instances of each service listed as scrape targets now (scaling changes them).
        self.target_counts: dict[str, int] = {s.name: s.replicas for s in topology.SERVICES}
        self.sup = Supervisor(self.ctl / "supervisor.sock")  # moved to a short path in deploy()
        self._torn_down = False
        self.certs: dict[str, str] = {}
        #: Whether the data volume is a small file system of its own (needs root).
        self.data_quota = False
        self._cert_files: dict[str, str] = {}
        #: The control groups of the environment's instances (:mod:`itbench_sre.cgroups`).
        self.groups: cgroups.InstanceGroups | None = None

    # --- ports -------------------------------------------------------------------------
    def port(self, offset: int) -> int:
        """Port ``offset`` of this environment's block."""
        return self.port_base + offset

    def instance_port(self, instance: str) -> int:
        """Listen port of a service instance."""
        return self.port(topology.instance_offset(instance))

    def edge_addr(self, caller: str, callee: str) -> str:
        """Address a caller uses for one upstream: a registry name for services, on the mesh."""
        host = "127.0.0.1" if callee in topology.DATASTORES else f"{callee}.svc"
        return f"{host}:{self.port(topology.edge_offset(caller, callee))}"

    def dns_records(self) -> dict[str, Any]:
        """The baseline name registry: every service's name on the mesh's address."""
        return {"records": {f"{s.name}.svc": "127.0.0.1" for s in topology.SERVICES}, "ttl_s": 1}

    def flag_name(self, service: str, flag: str) -> str:
        """The name a service's flag goes by in this deployment."""
        return self.flag_names.get(service, {}).get(flag, flag)

    def faulty_release(self, service: str) -> str:
        """The one newer release of a service that is faulty in this deployment."""
        return self.faulty_releases.get(service) or topology.BY_NAME[service].releases[-1]

    def good_release(self, service: str, rng: random.Random | None = None) -> str:
        """A newer release of a service that works (drawn with ``rng``, else the first)."""
        good = [r for r in topology.candidates(service) if r != self.faulty_release(service)]
        return rng.choice(good) if rng is not None else good[0]

    def features(self) -> dict[str, dict[str, str]]:
        """Per service, what each flag name stands for (the services' private lookup)."""
        return {
            s.name: {self.flag_name(s.name, f): f for f in topology.flags_of(s.name)}
            for s in topology.SERVICES
        }

    # --- rendering -----------------------------------------------------------------------
    def baseline_config(self, service: str) -> dict[str, Any]:
        """The baseline configuration of one service."""
        sdef = topology.BY_NAME[service]
        cfg: dict[str, Any] = {
            "service": service,
            "release": sdef.releases[0],
            "upstreams": {u: self.edge_addr(service, u) for u in sdef.upstreams},
            "timeouts": {u: (1.0 if u in topology.DATASTORES else 2.0) for u in sdef.upstreams},
            "retries": {u: 1 for u in sdef.upstreams if u not in topology.DATASTORES},
            "pool_size": 4,
            "pool_timeout": 1.0,
            "max_rps": 7 if service == "frontend" else None,
            "memory_limit_mb": 160,
            "cpu_limit": 1.0,
            "max_threads": 512,
            "max_open_files": 256,
            "flags": {},  # below, with the routine flags first
            "tracing": {"enabled": self.traces},
        }
        if service == "payment":
            cfg["serve_tls"] = {
                "cert": f"certs/{self.certs['current_cert']}",
                "key": f"certs/{self.certs['current_key']}",
            }
        if "payment" in sdef.upstreams:
            cfg["tls"] = {"payment": {"ca": f"certs/{self.certs['ca']}"}}
        if service in topology.QUEUES:
            cfg["dead_letter"] = False
        if service == "cart":
            cfg["session_cache_mb"] = 6
        if service == "catalog":
            cfg["max_concurrency"] = 16
            cfg["work_ms"] = 0
        if "postgres" in sdef.upstreams:
            user, password = pgtemplate.SERVICE_ROLES[service]
            cfg["postgres"] = {
                "user": user,
                "password": password,
                "database": pgtemplate.DB_NAME,
            }
        # Listed by name: where a flag stands says nothing about what it does.
        routine = {*topology.ROUTINE_FLAGS[service], *topology.SERVING_FLAGS.get(service, ())}
        cfg["flags"] = dict(
            sorted((self.flag_name(service, f), f in routine) for f in topology.flags_of(service))
        )
        for key, value in self.overrides.get(service, {}).items():
            cfg[key] = value
        return cfg

    def _redis_conf(self) -> str:
        return (
            f"bind 127.0.0.1\nport {self.port(topology.REDIS)}\nprotected-mode no\n"
            # Durable, as a queue's store must be: a restart keeps every queued message.
            'save ""\nappendonly yes\nappendfsync everysec\n'
            "maxmemory 64mb\nmaxmemory-policy noeviction\n"
            "databases 2\nloglevel warning\n"
        )

    def _prometheus_yml(self) -> str:
        jobs: list[dict[str, Any]] = []
        for s in topology.SERVICES:
            jobs.append(
                {
                    "job_name": s.name,
                    "file_sd_configs": [
                        {
                            "files": [f"targets/{s.name}.json"],
                            "refresh_interval": "1s",
                        }
                    ],
                }
            )
        for job in jobs:
            if job["job_name"] == "payment":
                job["scheme"] = "https"
                job["tls_config"] = {"insecure_skip_verify": True}
        jobs.append(
            {
                "job_name": "mesh",
                "static_configs": [
                    {
                        "targets": [f"127.0.0.1:{self.port(topology.MESH_METRICS)}"],
                        "labels": {"instance": "mesh"},
                    }
                ],
            }
        )
        jobs.append(
            {
                "job_name": "loadgen",
                "static_configs": [
                    {
                        "targets": [f"127.0.0.1:{self.port(topology.LOADGEN)}"],
                        "labels": {"instance": "loadgen"},
                    }
                ],
            }
        )
        cfg = {
            "global": {
                "scrape_interval": SCRAPE_INTERVAL,
                "evaluation_interval": SCRAPE_INTERVAL,
                "scrape_timeout": "450ms",
            },
            # Relative to this file: no harness path in what the agent can read.
            "rule_files": ["rules.yml"],
            "scrape_configs": jobs,
        }
        return yaml.safe_dump(cfg, sort_keys=False)

    def _targets(self, service: str, count: int) -> str:
        return json.dumps(
            [
                {"targets": [f"127.0.0.1:{self.instance_port(i)}"], "labels": {"instance": i}}
                for i in topology.instances(service, count)
            ]
        )

    def _routes(self) -> dict[str, Any]:
        routes: dict[str, Any] = {}
        for caller, callee in topology.edges():
            if callee == "redis":
                targets = [f"127.0.0.1:{self.port(topology.REDIS)}"]
            elif callee == "postgres":
                targets = [f"127.0.0.1:{self.port(topology.POSTGRES)}"]
            else:
                targets = [f"127.0.0.1:{self.instance_port(i)}" for i in topology.instances(callee)]
            routes[f"{caller}->{callee}"] = {
                "port": self.port(topology.edge_offset(caller, callee)),
                "targets": targets,
            }
        return routes

    def _programs_conf(self) -> str:
        py = sys.executable
        env = f'SHOP_HOME="{self.shop}",PYTHONUNBUFFERED="1",PYTHONDONTWRITEBYTECODE="1"'
        logs = self.ctl / "supervisor"
        blocks = []

        def program(
            name: str,
            command: str,
            *,
            autostart: bool = True,
            cwd: Path | None = None,
            extra: dict[str, str] | None = None,
        ) -> None:
            lines = [
                f"[program:{name}]",
                f"command={command}",
                f"environment={env}",
                f"autostart={'true' if autostart else 'false'}",
                "autorestart=true",
                "startsecs=1",
                "startretries=1000",
                "stopsignal=TERM",
                "stopwaitsecs=4",
                "stopasgroup=true",
                "killasgroup=true",
                f"stdout_logfile={logs / name}.out",
                "stdout_logfile_maxbytes=5MB",
                "redirect_stderr=true",
                f"directory={cwd or self.shop}",
            ]
            lines += [f"{k}={v}" for k, v in (extra or {}).items()]
            blocks.append("\n".join(lines))

        # Its working directory holds its append-only file.
        program(
            "redis", f"redis-server {self.shop / 'redis' / 'redis.conf'}", cwd=self.shop / "redis"
        )
        assert self.pg_dir is not None
        pg_extra: dict[str, str] = {"stopsignal": "INT"}
        if pgtemplate.run_user():
            pg_extra["user"] = pgtemplate.run_user() or ""
        program(
            "postgres",
            f"{pgtemplate.PG_BIN / 'postgres'} -D {self.pg_dir} -p {self.port(topology.POSTGRES)} "
            "-c listen_addresses=127.0.0.1 -c unix_socket_directories= -c max_connections=40 "
            "-c fsync=off -c synchronous_commit=off -c shared_buffers=16MB",
            cwd=self.pg_dir.parent,
            extra=pg_extra,
        )
        program(
            "mesh",
            f"{py} -m itbench_sre.app.mesh {self.ctl / 'routes.json'} {self.ctl / 'links.json'} "
            f"{self.port(topology.MESH_METRICS)}",
        )
        for s in topology.SERVICES:
            for i, inst in enumerate(topology.instances(s.name)):
                command = (
                    f"{py} -m itbench_sre.app.service config/{s.name}.json "
                    f"{inst} {self.instance_port(inst)}"
                )
                if self.groups is not None:
                    # Limited and counted by the kernel from its first instruction on.
                    dirs = " ".join(str(d) for d in self.groups.of(inst))
                    command = f"{py} -S {limited.__file__} config/{s.name}.json {dirs} -- {command}"
                program(inst, command, autostart=i < s.replicas)
        program(
            "prometheus",
            f"prometheus --config.file={self.shop / 'prometheus' / 'prometheus.yml'} "
            f"--storage.tsdb.path={self.ctl / 'tsdb'} --storage.tsdb.retention.time=2h "
            f"--web.listen-address=127.0.0.1:{self.port(topology.PROMETHEUS)} "
            f"{' '.join(QUERY_FLAGS)} "
            "--log.level=warn",
        )
        program("loadgen", f"{py} -m itbench_sre.app.loadgen {self.ctl / 'loadgen.json'}")
        program(
            JOB_PROGRAM, f"{py} -m itbench_sre.app.reports {self.ctl / 'jobs' / JOB_PROGRAM}.json"
        )
        return "\n\n".join(blocks) + "\n"

    def _supervisord_conf(self) -> str:
        sock = self.sup.socket_path
        return (
            f"[unix_http_server]\nfile={sock}\nchmod=0700\n\n"
            f"[supervisord]\nnodaemon=true\nlogfile={self.ctl / 'supervisor' / 'supervisord.log'}\n"
            f"pidfile={self.ctl / 'supervisord.pid'}\nchildlogdir={self.ctl / 'supervisor'}\n"
            "loglevel=warn\nminfds=1024\n\n"
            "[rpcinterface:supervisor]\n"
            "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n\n"
            f"[supervisorctl]\nserverurl=unix://{sock}\n\n"
            f"[include]\nfiles = {self.ctl / 'programs.conf'}\n"
        )

    def rendered(self) -> dict[str, str]:
        """Every file of the baseline deployment, by path."""
        files = {
            str(self.shop / "config" / f"{s.name}.json"): json.dumps(
                self.baseline_config(s.name), indent=2
            )
            + "\n"
            for s in topology.SERVICES
        }
        for s in topology.SERVICES:
            files[str(self.shop / "prometheus" / "targets" / f"{s.name}.json")] = self._targets(
                s.name, s.replicas
            )
        files[str(self.shop / FEATURES_FILE)] = json.dumps(self.features(), indent=1) + "\n"
        files[str(self.shop / PHRASES_FILE)] = json.dumps(self.phrases.choice) + "\n"
        faulty = {s.name: self.faulty_release(s.name) for s in topology.SERVICES}
        files[str(self.shop / RELEASES_FILE)] = json.dumps(faulty) + "\n"
        files[str(self.config_path(topology.DNS))] = json.dumps(self.dns_records(), indent=2) + "\n"
        files[str(self.shop / "redis" / "redis.conf")] = self._redis_conf()
        files[str(self.shop / "prometheus" / "prometheus.yml")] = self._prometheus_yml()
        files[str(self.shop / "prometheus" / "rules.yml")] = alert_rules()
        files[str(self.ctl / "routes.json")] = json.dumps(self._routes(), indent=1)
        files[str(self.ctl / "links.json")] = "{}\n"
        files[str(self.ctl / "loadgen.json")] = json.dumps(
            {
                "port": self.port(topology.LOADGEN),
                "targets": [
                    f"127.0.0.1:{self.instance_port(i)}" for i in topology.instances("frontend")
                ],
                "rate": self.workload_rate,
                "workers": 64,
                "timeout": 3.0,
                "outcomes": str(self.ctl / "outcomes.jsonl"),
            }
        )
        files[str(self.ctl / "programs.conf")] = self._programs_conf()
        files.update(self._cert_files)
        files[str(self.ctl / "jobs" / f"{JOB_PROGRAM}.json")] = json.dumps(self.baseline_job())
        return files

    def baseline_job(self) -> dict[str, Any]:
        """The baseline job description of the report exporter."""
        return {
            "port": self.port(topology.POSTGRES),
            "user": pgtemplate.DB_USER,
            "password": pgtemplate.DB_PASSWORD,
            "database": pgtemplate.DB_NAME,
            "connections": 1,
            "every_s": 5,
        }

    def _make_certs(self) -> None:
        import tempfile

        from itbench_sre.certs import write_certificates

        with tempfile.TemporaryDirectory(dir=self.ctl) as tmp:
            self.certs = write_certificates(Path(tmp), "payment")
            self._cert_files = {
                str(self.shop / "certs" / f.name): f.read_text() for f in Path(tmp).iterdir()
            }

    # --- lifecycle -------------------------------------------------------------------------
    def deploy(self) -> None:
        """Create the directories, start supervisord and run the deploy playbook."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o700)
        for d in (self.shop, self.ctl / "supervisor", self.ctl / "tsdb"):
            d.mkdir(parents=True, exist_ok=True)
        self.data_quota = _mount_data_volume(self.shop / "data")
        self.ctl.chmod(0o700)
        shared = pgtemplate.shared_root() / f"env-{uuid.uuid4().hex[:12]}"
        shared.mkdir(mode=0o755)
        self.shared = shared
        self.groups = cgroups.make(
            [i for s in topology.SERVICES for i in topology.instances(s.name)]
        )
        record = self.root / HARNESS_RECORD
        record.write_text(
            json.dumps({"shared": str(shared), "groups": self.groups and self.groups.record()})
        )
        record.chmod(0o600)
        # Unix socket paths are limited to ~100 bytes: the socket lives under the short shared
        # directory, in a subdirectory only the harness's user may enter.
        run = shared / "run"
        run.mkdir(mode=0o700)
        self.sup = Supervisor(run / "supervisor.sock")
        self.pg_dir = pgtemplate.make_data_dir(shared / "pgdata")
        self._make_certs()
        rendered = self.rendered()
        # The monitoring stack comes first, from the harness: Prometheus needs a few seconds
        # before its first scrape, which then overlap with the shop's deployment.
        monitoring = self.shop / "prometheus"
        for path, content in rendered.items():
            if Path(path).is_relative_to(monitoring):
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                Path(path).write_text(content)
        blocks = rendered[str(self.ctl / "programs.conf")].split("\n\n")
        (self.ctl / "programs.conf").write_text(
            "\n\n".join(b for b in blocks if b.startswith("[program:prometheus]")) + "\n"
        )
        conf = self.ctl / "supervisord.conf"
        conf.write_text(self._supervisord_conf())
        self.supervisord = ManagedProcess(
            "supervisord",
            [sys.executable, "-m", "supervisor.supervisord", "-c", str(conf)],
            self.root,
        )
        self.supervisord.start()
        end = time.monotonic() + 15
        while not self.sup.alive():
            if time.monotonic() > end or not self.supervisord.alive():
                raise InfrastructureError(
                    f"supervisord did not start: {self.supervisord.log_tail()}"
                )
            time.sleep(0.05)
        bundle = self.ctl / "release-bundle.tar.gz"
        _write_bundle(bundle, self.root, rendered)
        t0 = time.monotonic()
        run_playbook(
            "deploy",
            self.ctl / "ansible",
            {
                "bundle": str(bundle),
                "dest": str(self.root),
                "supervisor_conf": str(conf),
            },
        )
        log.debug("deploy playbook took %.2fs", time.monotonic() - t0)
        for entity in REVISIONED:
            self._add_revision(entity, json.loads(rendered[str(self.config_path(entity))]))
        self._record_children()
        self.wait_listening()

    def _record_children(self) -> None:
        for p in self.sup.processes():
            if p.get("pid"):
                record_pid(self.root, f"prog-{p['name']}", int(p["pid"]))

    def wait_listening(self, timeout: float = 40.0) -> None:
        """Wait until every baseline program listens.

        Raises:
            InfrastructureError: not ready in time.
        """
        end = time.monotonic() + timeout
        ports = [
            self.port(topology.PROMETHEUS),
            self.port(topology.REDIS),
            self.port(topology.POSTGRES),
        ]
        ports += [
            self.instance_port(i)
            for s in topology.SERVICES
            for i in topology.instances(s.name, s.replicas)
        ]
        while time.monotonic() < end:
            if all(port_open(p) for p in ports):
                break
            time.sleep(0.1)
        else:
            closed = [p - self.port_base for p in ports if not port_open(p)]
            raise InfrastructureError(f"shop not ready: port offsets {closed} closed")

    def wait_serving(self, since: float, timeout: float = 30.0) -> None:
        """Wait until the workload was served since ``since``.

        Raises:
            InfrastructureError: not served in time.
        """
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if sum(1 for o in self.outcomes(since) if o["ok"]) >= 4:
                return
            time.sleep(0.1)
        raise InfrastructureError("shop not ready: the workload is not being served")

    def scraping(self) -> bool:
        """Whether Prometheus scrapes every target listed now and has evaluated its rules."""
        if not self.prom_ready():
            return False
        try:
            up = self.prom("/api/v1/query", {"query": "count(up)"})
        except RuntimeError:
            return False
        # The targets listed now, not the baseline's: a scaled-down service lists fewer.
        want = sum(self.target_counts.values()) + 2
        return bool(up.get("result")) and float(up["result"][0]["value"][1]) >= want

    def prom_ready(self, timeout: float = 1.0) -> bool:
        """Whether Prometheus answers its readiness endpoint within ``timeout`` seconds."""
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.port(topology.PROMETHEUS)}/-/ready", timeout=timeout
            ) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def teardown(self) -> None:
        """Stop every program and supervisord, remove the database copy. Idempotent."""
        if self._torn_down:
            return
        self._torn_down = True
        self.release_held()
        if self.sup.alive():
            with contextlib.suppress(Exception):
                self.sup.stop_all()
            with contextlib.suppress(Exception):
                self.sup.shutdown()
        if self.supervisord is not None:
            self.supervisord.stop(timeout=8)
        sweep(self.root, self.shared)
        if self.groups is not None:
            self.groups.remove()
        # Redis's append-only file is no record of the trial, and a full Redis writes tens of MB.
        shutil.rmtree(self.shop / "redis" / REDIS_DATA, ignore_errors=True)
        unmount_under(self.root)

    def release_held(self) -> None:
        """Close the datastore connections the harness holds for a fault."""
        for conn in self.held:
            with contextlib.suppress(Exception):
                conn.close()
        self.held.clear()

    # --- change sets -----------------------------------------------------------------------
    def apply(self, changes: ChangeSet) -> None:
        """Apply a change set through the apply playbook."""
        if changes.empty():
            return
        files = {str(self.config_path(e)): c for e, c in changes.files}
        if changes.links is not None:
            files[str(self.ctl / "links.json")] = json.dumps(changes.links)
        for service, count in changes.target_counts.items():
            files[str(self._targets_path(service))] = self._targets(service, count)
            self.target_counts[service] = count
        bundle = ""
        if files:
            path = self.ctl / "changes" / f"{uuid.uuid4().hex[:8]}.tar.gz"
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_bundle(path, self.root, files)
            bundle = str(path)
        by_signal: dict[str, list[str]] = {}
        for prog, sig in changes.signals:
            pid = self.sup.info(prog)["pid"]
            if pid:
                by_signal.setdefault(sig, []).append(str(pid))
        by_action: dict[str, list[str]] = {}
        for action, prog in changes.programs:
            by_action.setdefault(action, []).append(prog)
        run_playbook(
            "apply",
            self.ctl / "ansible",
            {
                "bundle": bundle,
                "dest": str(self.root),
                "signals": [{"signal": k, "pids": v} for k, v in by_signal.items()],
                "programs": [{"action": k, "names": v} for k, v in by_action.items()],
                "redis_commands": changes.redis_commands,
                "redis_port": self.port(topology.REDIS),
                "sql": changes.sql,
                "commands": changes.commands,
                "pg_port": self.port(topology.POSTGRES),
                "pg_database": pgtemplate.DB_NAME,
                "supervisor_conf": str(self.ctl / "supervisord.conf"),
            },
        )
        for entity, _ in changes.files:
            self.record_config(entity)
        self._record_children()

    # --- programs --------------------------------------------------------------------------
    def programs(self) -> list[dict[str, Any]]:
        """State of every program, with its process state and memory.

        A service instance in control groups also shows its limits, memory usage, OOM kills
        and throttled CPU periods.
        """
        import psutil

        out = []
        now = time.time()
        for p in self.sup.processes():
            rec: dict[str, Any] = {
                "name": p["name"],
                "entity": service_of(p["name"]),
                "state": p["statename"],
                "pid": p["pid"] or None,
                "uptime_s": round(now - p["start"], 1) if p["statename"] == "RUNNING" else None,
            }
            if p["pid"]:
                with contextlib.suppress(psutil.Error):
                    proc = psutil.Process(p["pid"])
                    rec["process_status"] = proc.status()
                    rec["rss_mb"] = round(proc.memory_info().rss / 2**20, 1)
            # As a container platform shows them: limits, what counts against them, kills.
            group = self.groups.stats(p["name"]) if self.groups is not None else None
            if group is not None:
                rec["limits"] = group
            out.append(rec)
        return out

    def control(self, action: str, program: str, wait: bool = True) -> None:
        """Start, stop or restart one program (``wait``: until a start has succeeded)."""
        if action == "start":
            self.sup.start(program, wait)
        elif action == "stop":
            self.sup.stop(program)
        elif action == "restart":
            self.sup.stop(program)
            self.sup.start(program, wait)
        else:
            raise ValueError(f"unknown action {action!r}")
        self._record_children()

    def identity(self, program: str) -> tuple[int, float] | None:
        """``(pid, process start time)`` of a running program, or ``None``."""
        try:
            info = self.sup.info(program)
        except Exception:  # supervisord gone or not answering
            return None
        if info.get("statename") != "RUNNING" or not info.get("pid"):
            return None
        return _identity(int(info["pid"]))

    def supervisord_identity(self) -> tuple[int, float] | None:
        """``(pid, process start time)`` of the environment's supervisord, or ``None``."""
        if self.supervisord is None or not self.supervisord.alive():
            return None
        assert self.supervisord.proc is not None
        return _identity(self.supervisord.proc.pid)

    def running(self, program: str) -> bool:
        """Whether a program is in state RUNNING."""
        return bool(self.sup.info(program)["statename"] == "RUNNING")

    def replicas(self, service: str) -> int:
        """Instances of a service in state RUNNING (or starting)."""
        states = {p["name"]: p["statename"] for p in self.sup.processes()}
        return sum(
            states.get(i) in ("RUNNING", "STARTING", "BACKOFF") for i in topology.instances(service)
        )

    def scale(self, service: str, replicas: int) -> None:
        """Start or stop instances so that ``replicas`` run, and update the scrape targets."""
        sdef = topology.BY_NAME[service]
        if not 0 <= replicas <= sdef.max_replicas:
            raise ValueError(f"{service} can run 0..{sdef.max_replicas} replicas")
        for i, inst in enumerate(topology.instances(service)):
            if i < replicas:
                self.sup.start(inst)
            else:
                self.sup.stop(inst)
        self._targets_path(service).write_text(self._targets(service, replicas))
        self.target_counts[service] = replicas
        self._record_children()

    # --- revisions -------------------------------------------------------------------------
    def _revisions_path(self, service: str) -> Path:
        return self.ctl / "revisions" / f"{service}.json"

    def revisions(self, service: str) -> list[dict[str, Any]]:
        """Deployment history of a service, oldest first (revision, time, release, config)."""
        path = self._revisions_path(service)
        if not path.exists():
            return []
        data: list[dict[str, Any]] = json.loads(path.read_text())
        return data

    def _add_revision(self, service: str, config: dict[str, Any]) -> None:
        history = self.revisions(service)
        if history and history[-1]["config"] == config:
            return
        number = history[-1]["revision"] + 1 if history else 1
        history.append(
            {
                "revision": number,
                "at": round(time.time(), 3),
                "release": str(config.get("release", "")),
                "config": config,
            }
        )
        path = self._revisions_path(service)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(history))

    def record_config(self, entity: str) -> None:
        """Record the current configuration of a service as a new revision (if it changed)."""
        if entity in REVISIONED:
            with contextlib.suppress(ValueError, OSError):
                self._add_revision(entity, json.loads(self.read_config(entity)))

    def rollback(self, service: str, revision: int | None = None) -> dict[str, Any]:
        """Redeploy an earlier revision and restart the running instances.

        Args:
            service: A service or ``dns``.
            revision: The revision to redeploy; by default the one before the current one
                (the newest that differs from what runs).

        Returns:
            The revision now deployed (as a new revision entry).

        Raises:
            ValueError: no earlier revision, or no such revision, or it is what runs.
        """
        history = self.revisions(service)
        current = json.loads(self.read_config(service))
        earlier = [h for h in history if h["config"] != current]
        if revision is not None:
            numbers = [h["revision"] for h in history]
            if revision not in numbers:
                raise ValueError(f"{service} has no revision {revision} (it has {numbers})")
            earlier = [h for h in earlier if h["revision"] == revision]
            if not earlier:
                raise ValueError(f"revision {revision} of {service} is what runs")
        if not earlier:
            raise ValueError(f"{service} has no earlier revision to roll back to")
        target = earlier[-1]
        self.write_config(service, json.dumps(target["config"], indent=2) + "\n")
        self._add_revision(service, target["config"])
        if service in topology.BY_NAME:
            self.restart_service(service)
        return self.revisions(service)[-1]

    def restart_service(self, service: str, wait: bool = True) -> None:
        """Restart every running (or crash-looping) instance of a service.

        Args:
            service: The service.
            wait: Wait for each start to succeed (no wait: a crash-looping instance is simply
                left to its process manager).
        """
        states = {p["name"]: p["statename"] for p in self.sup.processes()}
        for inst in topology.instances(service):
            if states.get(inst) in ("RUNNING", "STARTING", "BACKOFF", "FATAL", "EXITED"):
                self.control("restart", inst, wait)

    # --- configs ---------------------------------------------------------------------------
    def config_path(self, entity: str) -> Path:
        """File of an entity's configuration."""
        if entity in topology.BY_NAME:
            return self.shop / "config" / f"{entity}.json"
        if entity == "redis":
            return self.shop / "redis" / "redis.conf"
        if entity == topology.DNS:
            return self.shop / "config" / "dns.json"
        if entity.startswith("shop:"):
            return self.shop / entity.removeprefix("shop:")
        if entity == "prometheus":
            return self.shop / "prometheus" / "prometheus.yml"
        if entity == "prometheus-rules":
            return self.shop / "prometheus" / "rules.yml"
        if entity.startswith("ctl:"):
            return self.ctl / entity.removeprefix("ctl:")
        raise ValueError(f"no configuration for {entity!r}")

    def _targets_path(self, service: str) -> Path:
        return self.shop / "prometheus" / "targets" / f"{service}.json"

    def read_private(self, name: str) -> str:
        """A harness-private file of the environment (never shown to the agent)."""
        return (self.ctl / name).read_text()

    def read_config(self, entity: str) -> str:
        """Configuration text of an entity."""
        return self.config_path(entity).read_text()

    def write_config(self, entity: str, content: str) -> None:
        """Replace an entity's configuration file."""
        path = self.config_path(entity)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(content)
        tmp.replace(path)

    # --- observability ---------------------------------------------------------------------
    def prom(self, path: str, params: dict[str, Any]) -> Any:
        """Call the Prometheus HTTP API and return its ``data`` field."""
        url = f"http://127.0.0.1:{self.port(topology.PROMETHEUS)}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            try:
                body = json.loads(exc.read())
            except ValueError:
                raise RuntimeError(f"Prometheus answered HTTP {exc.code}") from None
            raise RuntimeError(f"Prometheus: {body.get('error', exc.code)}") from None
        except OSError as exc:
            raise RuntimeError(f"Prometheus unreachable: {exc}") from None
        if body.get("status") != "success":
            raise RuntimeError(f"Prometheus: {body.get('error')}")
        return body["data"]

    def log_lines(self, service: str) -> list[str]:
        """Raw log lines of every instance of ``service``."""
        lines: list[str] = []
        for inst in topology.instances(service):
            path = self.shop / "logs" / f"{inst}.log"
            if path.exists():
                lines.extend(_tail(path, 4000))
        return lines

    def span_lines(self, service: str | None) -> list[str]:
        """Raw span lines of one service, or of all."""
        d = self.shop / "traces"
        if not d.is_dir():
            return []
        lines: list[str] = []
        names = topology.instances(service) if service else [p.stem for p in d.glob("*.jsonl")]
        for inst in names:
            path = d / f"{inst}.jsonl"
            if path.exists():
                lines.extend(_tail(path, 6000))
        return lines

    def outcomes(self, since: float) -> list[dict[str, Any]]:
        """Workload outcomes with ``ts >= since``."""
        path = self.ctl / "outcomes.jsonl"
        if not path.exists():
            return []
        out = []
        for line in _tail(path, 20000):
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                if rec["ts"] >= since:
                    out.append(rec)
        return out

    def pg_connect(self, user: str = "postgres") -> Any:
        """A direct superuser connection to the shop database (harness only)."""
        import pg8000.dbapi

        return pg8000.dbapi.connect(
            host="127.0.0.1",
            port=self.port(topology.POSTGRES),
            user=user,
            database=pgtemplate.DB_NAME,
            timeout=5,
            application_name="maintenance",
        )

    def sql(self, statement: str) -> list[Any]:
        """Run one statement as the superuser and return its rows."""
        conn = self.pg_connect()
        try:
            cur = conn.cursor()
            cur.execute(statement)
            return list(cur.fetchall())
        finally:
            conn.close()


def _write_bundle(path: Path, root: Path, files: dict[str, str]) -> None:
    """Pack the rendered files (paths relative to ``root``) into a deployable tarball."""
    import io
    import tarfile

    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for name, content in sorted(files.items()):
            data = content.encode()
            info = tarfile.TarInfo(str(Path(name).relative_to(root)))
            info.size = len(data)
            info.mode = 0o644
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))


def _identity(pid: int) -> tuple[int, float] | None:
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return pid, proc.create_time()
    except psutil.Error:
        return None


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _tail(path: Path, max_lines: int) -> list[str]:
    size = path.stat().st_size
    with path.open("rb") as fh:
        fh.seek(max(0, size - max_lines * 220))
        data = fh.read().decode(errors="replace")
    lines = data.splitlines()
    if size > max_lines * 220 and lines:
        lines = lines[1:]
    return lines[-max_lines:]


#: Size of each environment's data volume (receipts, audit trails, dumps).
DATA_VOLUME = "4m"


def _mount_data_volume(path: Path) -> bool:
    """Mount a small tmpfs on ``path`` (a file system with a quota); ``False`` without root."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DATA_VOLUME},mode=0755", "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def unmount_under(root: Path) -> None:
    """Unmount every file system mounted under ``root`` (a path the harness holds)."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return
    prefix = str(root.resolve()) + "/"
    for line in mounts:
        parts = line.split()
        if len(parts) > 1 and parts[1].startswith(prefix):
            subprocess.run(["umount", "-l", parts[1]], capture_output=True, check=False)


def sweep(root: Path, shared: Path | None) -> list[int]:
    """Kill every process that still belongs to the environment under ``root``.

    A process belongs to it when its command line or working directory points into ``root``
    or into the environment's ``shared`` data directory, which is then removed. Both paths
    come from the caller's memory (or :func:`recorded_shared`), never from a file of the shop.
    """
    marks = [root]
    if shared is not None:
        marks.append(shared)
    killed = stop_marked(marks)
    if shared is not None:
        shutil.rmtree(shared, ignore_errors=True)
    return killed


def recorded_groups(root: Path) -> cgroups.InstanceGroups | None:
    """The instances' control groups recorded at deploy (for recovery after a harness crash)."""
    try:
        name = json.loads((root / HARNESS_RECORD).read_text()).get("groups")
    except (OSError, ValueError, AttributeError):
        return None
    return cgroups.recorded(name)


def recorded_shared(root: Path) -> Path | None:
    """The shared data directory recorded at deploy time (for recovery after a harness crash).

    The record is a harness-only file of the trial directory; the path is accepted only when it
    has the shape deploy gives it (a direct child of the shared root named ``env-<12 hex>``).
    """
    try:
        path = Path(json.loads((root / HARNESS_RECORD).read_text())["shared"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if path.parent != pgtemplate.shared_root() or not _SHARED_NAME.fullmatch(path.name):
        return None
    return path
