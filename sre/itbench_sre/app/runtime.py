"""Shared runtime of the shop's services: JSON logs, W3C trace context, metrics, upstream calls."""

from __future__ import annotations

import http.client
import json
import os
import random
import secrets
import ssl
import threading
import time
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from itbench_sre.app.phrases import Phrasebook
from prometheus_client import Counter, Gauge, Histogram

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0)

REQUESTS = Counter("http_requests_total", "HTTP requests served", ["route", "code"])
LATENCY = Histogram(
    "http_request_duration_seconds", "HTTP request latency", ["route"], buckets=BUCKETS
)
UPSTREAM = Counter("upstream_requests_total", "Calls to upstreams", ["upstream", "outcome"])
UPSTREAM_LATENCY = Histogram(
    "upstream_request_duration_seconds", "Upstream call latency", ["upstream"], buckets=BUCKETS
)
INFLIGHT = Gauge("inflight_requests", "Requests being served")
INFO = Gauge("app_info", "Release of the running instance", ["release"])
THREADS = Gauge("process_threads", "Threads of the process")
THREADS.set_function(threading.active_count)
#: Largest difference between a request's date and the receiver's clock, seconds.
DATE_WINDOW_S = 30.0
DATE_HEADER = "X-Request-Date"

_trace: ContextVar[tuple[str, str] | None] = ContextVar("trace", default=None)


class UpstreamError(Exception):
    """An upstream call failed after its retries."""

    def __init__(self, upstream: str, reason: str, status: int = 502) -> None:
        super().__init__(f"upstream {upstream} failed: {reason}")
        self.upstream = upstream
        self.status = status


@dataclass
class Runtime:
    """Per-instance runtime state: identity, config, log and span files."""

    service: str
    instance: str
    config: dict[str, Any]
    env_dir: Path

    def __post_init__(self) -> None:
        self._log_lock = threading.Lock()
        #: Seconds this instance's clock is ahead of the host's (set by the time daemon).
        self.clock_offset = 0.0
        self.names = NameRegistry(self.env_dir / "config" / "dns.json")
        logs = self.env_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        self._log = (logs / f"{self.instance}.log").open("a", encoding="utf-8", buffering=1)
        self.tracing = bool(self.config.get("tracing", {}).get("enabled", True))
        self._spans = None
        if self.tracing:
            spans = self.env_dir / "traces"
            spans.mkdir(parents=True, exist_ok=True)
            self._spans = (spans / f"{self.instance}.jsonl").open(
                "a", encoding="utf-8", buffering=1
            )
        INFO.labels(release=str(self.config.get("release", "unknown"))).set(1)
        #: This trial's wording of the shop's own messages.
        self.phrases = Phrasebook.load(self.env_dir)

    def say(self, key: str, **fields: Any) -> str:
        """A message of the shop in this trial's words (see :mod:`phrases`)."""
        return self.phrases.say(key, **fields)

    def now(self) -> float:
        """This instance's wall clock."""
        return time.time() + self.clock_offset

    def step_clock(self) -> None:
        """Take the clock step the time daemon left for this instance (seconds, a number)."""
        path = self.env_dir / "run" / "clock" / self.instance
        try:
            self.clock_offset = float(path.read_text().strip() or 0)
        except (OSError, ValueError):
            return
        self.log("warning", self.say("clock_stepped"), offset_s=self.clock_offset)

    def date_problem(self, header: str | None) -> str | None:
        """Why a request's date is refused (too far from this clock), or ``None``."""
        if header is None:
            return None
        try:
            skew = float(header) - self.now()
        except ValueError:
            return "malformed request date"
        if abs(skew) > DATE_WINDOW_S:
            return self.say("date_refused", skew=f"{skew:+.0f}")
        return None

    # --- logs -------------------------------------------------------------------------
    def log(self, level: str, msg: str, **fields: Any) -> None:
        """Write one JSON log line."""
        ctx = _trace.get()
        rec = {
            "ts": round(self.now(), 3),
            "level": level,
            "service": self.service,
            "instance": self.instance,
            "msg": msg,
        }
        if ctx:
            rec["trace_id"] = ctx[0]
        rec.update(fields)
        with self._log_lock:
            self._log.write(json.dumps(rec) + "\n")

    # --- traces -----------------------------------------------------------------------
    def start_span(self, traceparent: str | None) -> tuple[str, str, str | None]:
        """Begin a server span from an incoming ``traceparent``; returns (trace, span, parent)."""
        trace_id, parent = None, None
        if traceparent:
            parts = traceparent.split("-")
            if len(parts) == 4 and len(parts[1]) == 32 and len(parts[2]) == 16:
                trace_id, parent = parts[1], parts[2]
        trace_id = trace_id or secrets.token_hex(16)
        span_id = secrets.token_hex(8)
        _trace.set((trace_id, span_id))
        return trace_id, span_id, parent

    def record_span(
        self,
        name: str,
        kind: str,
        trace_id: str,
        span_id: str,
        parent: str | None,
        start: float,
        status: int | str,
        **attrs: Any,
    ) -> None:
        """Append one finished span to this instance's span file."""
        if self._spans is None:
            return
        rec = {
            "trace_id": trace_id,
            "span_id": span_id,
            "parent_id": parent,
            "service": self.service,
            "instance": self.instance,
            "name": name,
            "kind": kind,
            "start": round(start, 4),
            "duration_ms": round((time.time() - start) * 1000, 2),
            "status": status,
            "error": not (isinstance(status, int) and status < 500),
            **attrs,
        }
        with self._log_lock:
            self._spans.write(json.dumps(rec) + "\n")

    # --- upstream calls -----------------------------------------------------------------
    def call(
        self, upstream: str, method: str, path: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Call an upstream HTTP service with the configured timeout and retries.

        Raises:
            UpstreamError: every attempt failed.
        """
        addr = self.config["upstreams"][upstream]
        name, _, port = addr.rpartition(":")
        timeout = float(self.config.get("timeouts", {}).get(upstream, 2.0))
        retries = int(self.config.get("retries", {}).get(upstream, 0))
        tls = self.config.get("tls", {}).get(upstream)
        ctx = _trace.get()
        last = "no attempt"
        status = 502
        for attempt in range(retries + 1):
            span_id = secrets.token_hex(8)
            start = time.time()
            headers = {"Content-Type": "application/json", DATE_HEADER: f"{self.now():.3f}"}
            if ctx:
                headers["traceparent"] = f"00-{ctx[0]}-{span_id}-01"
            outcome = "error"
            try:
                host = self.names.resolve(name)
                conn: http.client.HTTPConnection
                if tls:
                    sslctx = ssl.create_default_context(cafile=tls["ca"])
                    sslctx.check_hostname = False
                    conn = http.client.HTTPSConnection(
                        host, int(port), timeout=timeout, context=sslctx
                    )
                else:
                    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
                try:
                    payload = json.dumps(body).encode() if body is not None else None
                    conn.request(method, path, body=payload, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                if resp.status < 400 or resp.status == 404:
                    outcome = "ok" if resp.status < 400 else "client_error"
                    answer: dict[str, Any] = json.loads(data or b"{}")
                    return answer
                last = f"HTTP {resp.status}: {_reason(data)}"
                status = 502
            except TimeoutError:
                last = f"timeout after {timeout:g}s"
                status = 504
            except (OSError, http.client.HTTPException, ValueError) as exc:
                last = f"{type(exc).__name__}: {exc}"
                status = 502
            finally:
                UPSTREAM.labels(upstream=upstream, outcome=outcome).inc()
                UPSTREAM_LATENCY.labels(upstream=upstream).observe(time.time() - start)
                if ctx:
                    self.record_span(
                        f"{method} {upstream}{path.split('?')[0]}",
                        "client",
                        ctx[0],
                        span_id,
                        ctx[1],
                        start,
                        "ok" if outcome != "error" else "error",
                        upstream=upstream,
                        attempt=attempt,
                    )
            if attempt < retries:
                time.sleep(0.02 * (attempt + 1) * random.random())
        self.log(
            "error", self.say("call_failed", upstream=upstream), upstream=upstream, reason=last
        )
        raise UpstreamError(upstream, last, status)


def _reason(data: bytes) -> str:
    try:
        return str(json.loads(data).get("error", ""))[:200]
    except (ValueError, AttributeError):
        return ""


def observe_datastore(upstream: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` as one call to a datastore, counted in the upstream-call metrics."""
    start = time.time()
    outcome = "error"
    try:
        result = fn(*args, **kwargs)
        outcome = "ok"
        return result
    finally:
        UPSTREAM.labels(upstream=upstream, outcome=outcome).inc()
        UPSTREAM_LATENCY.labels(upstream=upstream).observe(time.time() - start)


class NameRegistry:
    """The shop's name registry: service names (``catalog.svc``) to addresses.

    Re-read when the file changes; a name missing from it does not resolve. Addresses that
    are no registry name (``127.0.0.1``) resolve to themselves.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mtime = -1.0
        self._checked = 0.0
        self._records: dict[str, str] = {}
        self._lock = threading.Lock()

    def resolve(self, name: str) -> str:
        """The address of ``name``.

        Raises:
            OSError: the name does not resolve.
        """
        if not name.endswith(".svc"):
            return name
        with self._lock:
            now = time.monotonic()
            if now - self._checked > 1.0:
                self._checked = now
                try:
                    mtime = self.path.stat().st_mtime
                    if mtime != self._mtime:
                        data = json.loads(self.path.read_text())
                        self._records = {str(k): str(v) for k, v in data["records"].items()}
                        self._mtime = mtime
                except (OSError, ValueError, KeyError, AttributeError):
                    pass
            address = self._records.get(name)
        if address is None:
            raise OSError(f"name {name} does not resolve")
        return address


class TokenBucket:
    """Admission limit of one instance (requests per second, with a small burst)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.tokens = rate
        self.at = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> bool:
        """Whether one request may be admitted now."""
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.rate, self.tokens + (now - self.at) * self.rate)
            self.at = now
            if self.tokens >= 1:
                self.tokens -= 1
                return True
            return False


def env_dir() -> Path:
    """The environment directory of this process (set by the process manager)."""
    return Path(os.environ["SHOP_HOME"])
