"""One instance of a shop service: ``python -m itbench_sre.app.service CONFIG INSTANCE PORT``."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import random
import resource
import signal
import ssl
import sys
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import psutil
from itbench_sre.app.limited import fields
from itbench_sre.app.phrases import CHATTER_MEAN_S, FEATURES_FILE, RELEASES_FILE, Phrasebook
from itbench_sre.app.queues import QUEUES
from itbench_sre.app.runtime import (
    DATE_HEADER,
    INFLIGHT,
    LATENCY,
    REQUESTS,
    Runtime,
    TokenBucket,
    UpstreamError,
    env_dir,
    observe_datastore,
)
from prometheus_client import Gauge, generate_latest

POOL_IN_USE = Gauge("pool_connections_in_use", "Datastore connections in use")
POOL_MAX = Gauge("pool_connections_max", "Datastore pool size")
QUEUE_DEPTH = Gauge("queue_depth", "Messages waiting in a work queue", ["queue"])
QUEUE_PROCESSED = Gauge("queue_last_processed_timestamp", "When a message was last handled")
DISK_FREE = Gauge("disk_free_bytes", "Free space of the data volume")
DISK_SIZE = Gauge("disk_size_bytes", "Size of the data volume")
MEMORY_USAGE = Gauge(
    "container_memory_usage_bytes", "Memory this instance's group uses, as its limit counts it"
)
MEMORY_LIMIT = Gauge("container_spec_memory_limit_bytes", "This instance's memory limit")
OOM_KILLS = Gauge(
    "container_oom_events_total", "Times the kernel's OOM killer killed this instance's process"
)
CPU_QUOTA = Gauge("container_spec_cpu_quota", "CPU time this instance may use per period, µs")
CPU_PERIOD = Gauge("container_spec_cpu_period", "Length of this instance's CPU period, µs")
CPU_PERIODS = Gauge("container_cpu_cfs_periods_total", "Periods this instance had work to run in")
CPU_THROTTLED = Gauge(
    "container_cpu_cfs_throttled_periods_total", "Periods in which this instance was throttled"
)
CPU_THROTTLED_S = Gauge(
    "container_cpu_cfs_throttled_seconds_total", "Time this instance spent throttled, seconds"
)
DATA_USED = Gauge("data_used_bytes", "Space this instance's own files take on the data volume")


class HttpError(Exception):
    """An error answer of a handler."""

    def __init__(self, status: int, msg: str) -> None:
        super().__init__(msg)
        self.status = status


class PgPool:
    """A small PostgreSQL connection pool with an acquire timeout."""

    def __init__(self, rt: Runtime, upstream: str = "postgres") -> None:
        self.rt = rt
        addr = rt.config["upstreams"][upstream]
        self.host, _, port = addr.rpartition(":")
        self.port = int(port)
        self.size = int(rt.config.get("pool_size", 4))
        self.timeout = float(rt.config.get("pool_timeout", 1.0))
        self.db = rt.config["postgres"]
        self.recycle = float(rt.config.get("pool_recycle_s", 3.0))
        self.free: queue.LifoQueue[Any] = queue.LifoQueue()
        self.sem = threading.BoundedSemaphore(self.size)
        self.used = 0
        POOL_MAX.set(self.size)

    def _connect(self) -> Any:
        import pg8000.dbapi

        return pg8000.dbapi.connect(
            host=self.host,
            port=self.port,
            user=self.db["user"],
            password=self.db["password"],
            database=self.db["database"],
            timeout=float(self.rt.config.get("timeouts", {}).get("postgres", 2.0)),
            application_name=self.rt.instance,
        )

    def query(self, sql: str, args: tuple[Any, ...] = (), fetch: bool = True) -> list[Any]:
        """Run one statement on a pooled connection (one call to the datastore)."""
        return list(observe_datastore("postgres", self._query, sql, args, fetch))

    def side_connection(self) -> Any:
        """A connection outside the pool, for statements that keep their own session."""
        return self._connect()

    def hold_lock(self, table: str) -> None:
        """Take a pooled connection for good and hold a table lock in a transaction left open.

        The session stays idle in its transaction until the process ends; every other
        session's statements on the table wait. Runs until then, opening the session again
        when the database drops it.
        """
        self.sem.acquire()
        self.used += 1
        POOL_IN_USE.set(self.used)
        while True:
            try:
                conn = self._connect()
                conn.cursor().execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
                while True:  # the transaction is never committed
                    time.sleep(1.0)
                    conn.cursor().execute("SELECT 1")
            except Exception:  # the database is away or dropped the session: take it again
                time.sleep(1.0)

    def _query(self, sql: str, args: tuple[Any, ...], fetch: bool) -> list[Any]:
        if not self.sem.acquire(timeout=self.timeout):
            raise HttpError(503, self.rt.say("pool_exhausted"))
        self.used += 1
        POOL_IN_USE.set(self.used)
        conn = None
        try:
            try:
                conn = self.free.get_nowait()
                if time.monotonic() - conn._born > self.recycle:
                    conn.close()
                    conn = None
            except queue.Empty:
                conn = None
            if conn is None:
                conn = self._connect()
                conn._born = time.monotonic()
            cur = conn.cursor()
            cur.execute(sql, args)
            rows = cur.fetchall() if fetch else []
            conn.commit()
            self.free.put(conn)
            conn = None
            return list(rows)
        except HttpError:
            raise
        except Exception as exc:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
            raise HttpError(
                500, f"{self.rt.say('database_error')}: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            self.used -= 1
            POOL_IN_USE.set(self.used)
            self.sem.release()


#: Cache shards of a route, each kept fresh by its own refresher thread.
REFRESH_SHARDS = 3


def _refresher(path: str, shard: int) -> None:
    """Keep one shard of a route's cached answer fresh (until the process ends)."""
    while True:
        time.sleep(0.2)
        _spin(0.0005)


class Stats:
    """Per-route request counters, with a detailed mode that also keeps per-route timings.

    The detailed mode takes the timing table's lock while holding the counters' lock, and
    its flusher takes them in the opposite order.
    """

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.timings: dict[str, float] = {}
        self.counts_lock = threading.Lock()
        self.timings_lock = threading.Lock()
        self.detailed = False

    def count(self, path: str) -> None:
        """Count one request of ``path``."""
        with self.counts_lock:
            self.counts[path] = self.counts.get(path, 0) + 1
            if self.detailed:
                time.sleep(0.002)
                with self.timings_lock:
                    self.timings[path] = time.time()

    def flush(self) -> None:
        """Fold the timings into the counters every few milliseconds (detailed mode only)."""
        while True:
            time.sleep(0.005 if self.detailed else 0.25)
            if not self.detailed:
                continue
            with self.timings_lock:
                time.sleep(0.002)
                with self.counts_lock:
                    self.timings.clear()

    def diagnose(self) -> None:
        """Switch the detailed mode on (the operator's diagnostics signal; a repeat keeps it)."""
        self.detailed = True


#: CPU-bound work runs in two slots at most: a request beyond them waits without contending
#: for the interpreter, so a saturated service keeps answering its scrapes.
_CPU_SLOTS = threading.BoundedSemaphore(2)


def _spin(seconds: float) -> float:
    """Spend ``seconds`` of this thread's CPU time on decimal arithmetic."""
    x = Decimal(1)
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        for _ in range(200):
            x = (x * Decimal("1.0000001")).quantize(Decimal("0.000001"))
    return float(x)


def _burn(seconds: float) -> float:
    """A request's CPU-bound work, in one of the process's CPU slots."""
    with _CPU_SLOTS:
        return _spin(seconds)


def _redis(rt: Runtime) -> Any:
    import redis

    host, _, port = rt.config["upstreams"]["redis"].rpartition(":")
    return redis.Redis(
        host=host,
        port=int(port),
        socket_timeout=float(rt.config.get("timeouts", {}).get("redis", 1.0)),
        socket_connect_timeout=1.0,
        max_connections=int(rt.config.get("pool_size", 4)) * 4,
        password=rt.config.get("redis_password") or None,
        decode_responses=True,
    )


#: This process's wording of the shop's messages (its instance's, once it has started).
WORDS = [Phrasebook()]


def _redis_call(fn: Any, *args: Any) -> Any:
    try:
        return observe_datastore("redis", fn, *args)
    except Exception as exc:
        raise HttpError(500, f"{WORDS[0].say('redis_error')}: {type(exc).__name__}: {exc}") from exc


def _regressed(rt: Runtime, release: str) -> bool:
    """Whether ``release`` is the one of this service with a regression (drawn per trial)."""
    try:
        lookup = json.loads((rt.env_dir / RELEASES_FILE).read_text())
        return bool(lookup.get(rt.service) == release)
    except (OSError, ValueError, AttributeError):
        return False  # no drawn lookup: no release of this deployment has a regression


def _features(rt: Runtime) -> dict[str, str]:
    """What each flag name of this service stands for (none known: the names themselves)."""
    try:
        lookup = json.loads((rt.env_dir / FEATURES_FILE).read_text())
        return {str(k): str(v) for k, v in lookup.get(rt.service, {}).items()}
    except (OSError, ValueError, AttributeError):
        return {}


#: Seconds between two audit segments (see :meth:`Shop._audit_segments`).
AUDIT_SEGMENT_S = 0.25
#: Tables a feature of a service may keep locked (``lock_<table>``, see ``PgPool.hold_lock``).
LOCKED_TABLES = ("products", "orders")
#: Seconds between two state snapshots an instance stores in Redis (see :meth:`Shop._snapshots`).
SNAPSHOT_S = 0.25
#: Size of one snapshot, bytes.
SNAPSHOT_BYTES = 64 * 1024


class Shop:
    """Routes of every service kind; each instance uses the routes of its own service."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        #: Each flag by what it stands for (the trial names it; the lookup is private).
        self.flags: dict[str, Any] = {
            _features(rt).get(name, name): on for name, on in rt.config.get("flags", {}).items()
        }
        self.release = str(rt.config.get("release", "0"))
        #: Whether the deployed release has a regression (the trial's private lookup).
        self.regressed = _regressed(rt, self.release)
        self.pg = PgPool(rt) if "postgres" in rt.config.get("upstreams", {}) else None
        self.redis = _redis(rt) if "redis" in rt.config.get("upstreams", {}) else None
        self.cache: list[bytes] = []
        rate = rt.config.get("max_rps")
        self.bucket = TokenBucket(float(rate)) if rate else None
        workers = rt.config.get("max_concurrency")
        self.workers = threading.BoundedSemaphore(int(workers)) if workers else None
        self.work_s = float(rt.config.get("work_ms") or 0) / 1000
        #: Files and sessions kept open by the audit trail and the statement cache.
        self.kept: list[Any] = []
        self.stats = Stats()
        if self.flags.get("audit_trail"):
            threading.Thread(target=self._audit_segments, daemon=True).start()
        if self.flags.get("redis_snapshots") and self.redis is not None:
            threading.Thread(target=self._snapshots, daemon=True).start()
        for table in LOCKED_TABLES:
            if self.flags.get(f"lock_{table}") and self.pg is not None:
                threading.Thread(target=self.pg.hold_lock, args=(table,), daemon=True).start()

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        """Dispatch one request; returns a JSON-able answer or raises ``HttpError``."""
        fn = getattr(self, f"r_{self.rt.service}", None)
        if fn is None:
            raise HttpError(404, "no such route")
        if self.bucket is not None and not self.bucket.take():
            raise HttpError(503, self.rt.say("over_capacity"))
        self.stats.count(path)
        if self.flags.get("audit_trail"):
            self._audit(method, path)
        if self.flags.get("background_refresh"):
            # One refresher per shard of the route's cache, never stopped.
            for shard in range(REFRESH_SHARDS):
                threading.Thread(target=_refresher, args=(path, shard), daemon=True).start()
        if self.flags.get("statement_cache") and self.pg is not None:
            try:
                self.kept.append(self.pg.side_connection())
            except Exception as exc:  # the database refuses: the request fails
                raise HttpError(
                    500, f"{self.rt.say('database_error')}: {type(exc).__name__}: {exc}"
                ) from None
        if self.workers is None:
            return fn(method, path, query, body)
        with self.workers:
            if self.work_s:
                time.sleep(self.work_s)
            return fn(method, path, query, body)

    def _audit_segments(self) -> None:
        """Start a new audit segment file a few times a second, keeping the old one open.

        The trail leaks with time as well as with requests, so a service with few callers
        runs out of descriptors too.
        """
        trail = self.rt.env_dir / "data" / self.rt.instance
        n = 0
        while True:
            time.sleep(AUDIT_SEGMENT_S)
            n += 1
            try:
                trail.mkdir(parents=True, exist_ok=True)
                self.kept.append((trail / f"audit-segment-{n % 8}.log").open("a"))
            except OSError:
                continue

    def _snapshots(self) -> None:
        """Store a snapshot of the instance's state in Redis a few times a second, never expired.

        Each is a key of its own without a time to live: under a no-eviction policy Redis
        fills up to its memory limit and then refuses every client's writes.
        """
        assert self.redis is not None
        blob = b"z" * SNAPSHOT_BYTES
        while True:
            time.sleep(SNAPSHOT_S)
            # A key of its own each time, a restart included: what is stored only grows.
            key = f"snap:{self.rt.instance}:{time.time_ns()}"
            try:
                observe_datastore("redis", self.redis.set, key, blob)
            except Exception:  # Redis refuses or is away: the next snapshot tries again
                continue

    def _audit(self, method: str, path: str) -> None:
        """Append the request to the audit trail (one handle per record file)."""
        trail = self.rt.env_dir / "data" / self.rt.instance
        try:
            trail.mkdir(parents=True, exist_ok=True)
            for part in ("request", "meta", "index"):
                fh = (trail / f"audit-{part}.log").open("a", encoding="utf-8")
                fh.write(f"{self.rt.now():.3f} {method} {path}\n")
                fh.flush()
                self.kept.append(fh)
        except OSError as exc:
            raise HttpError(500, f"{self.rt.say('audit')}: {type(exc).__name__}: {exc}") from None

    # --- frontend -------------------------------------------------------------------
    def r_frontend(self, method: str, path: str, q: dict[str, str], body: Any) -> Any:
        """Entry point: home page, product pages, cart additions and checkout."""
        rt = self.rt
        if path == "/" and method == "GET":
            products = rt.call("catalog", "GET", "/products")
            recs = rt.call("recommendation", "GET", "/recommendations")
            return {"products": len(products.get("products", [])), "recs": recs.get("ids", [])}
        if path.startswith("/product/") and method == "GET":
            return rt.call("catalog", "GET", "/products/" + path.rsplit("/", 1)[1])
        if path == "/cart" and method == "POST":
            user = body.get("user", "anon")
            return rt.call("cart", "POST", f"/cart/{user}", {"item": body.get("item", 1)})
        if path == "/checkout" and method == "POST":
            return rt.call("checkout", "POST", "/checkout", body)
        raise HttpError(404, "no such route")

    # --- catalog --------------------------------------------------------------------
    def r_catalog(self, method: str, path: str, q: dict[str, str], body: Any) -> Any:
        """Products from PostgreSQL."""
        assert self.pg is not None
        slow = self.regressed
        if path == "/products":
            sql = "SELECT id, name, price_cents FROM products ORDER BY id"
            if slow:
                sql = "SELECT id, name, price_cents, pg_sleep(0.04) FROM products ORDER BY id"
            rows = self.pg.query(sql)
            return {"products": [{"id": r[0], "name": r[1], "price": r[2]} for r in rows]}
        if path.startswith("/products/"):
            pid = int(path.rsplit("/", 1)[1]) if path.rsplit("/", 1)[1].isdigit() else 0
            rows = self.pg.query("SELECT id, name, price_cents FROM products WHERE id = %s", (pid,))
            if not rows:
                raise HttpError(404, "unknown product")
            price = rows[0][2]
            try:
                if self.flags.get("dynamic_pricing"):
                    price = self._price_rules()[rows[0][1]]
                if self.flags.get("regional_prices"):
                    price = int(price * self.rt.config["price_regions"]["default"])
            except KeyError as exc:
                raise HttpError(500, f"KeyError: {exc}") from None
            return {"id": rows[0][0], "name": rows[0][1], "price": price}
        raise HttpError(404, "no such route")

    def _price_rules(self) -> dict[str, int]:
        rules = self.rt.config.get("pricing_rules") or {}
        return {str(k): int(v) for k, v in rules.items()}

    # --- recommendation -------------------------------------------------------------
    def r_recommendation(self, method: str, path: str, q: dict[str, str], body: Any) -> Any:
        """A few product ids, from the catalog."""
        products = self.rt.call("catalog", "GET", "/products").get("products", [])
        if self.regressed and random.random() < 0.5:
            # The next release ranks with a model file it does not ship.
            raise HttpError(500, self.rt.say("ranking_failed", count=len(products)))
        ids = [p["id"] for p in products]
        random.shuffle(ids)
        if self.flags.get("personalized"):
            _burn(0.3)
            ids.sort()
        return {"ids": ids[:3]}

    # --- cart -----------------------------------------------------------------------
    def r_cart(self, method: str, path: str, q: dict[str, str], body: Any) -> Any:
        """Per-user carts in Redis."""
        assert self.redis is not None
        user = path.rsplit("/", 1)[1]
        key = f"cart:{user}"
        if self.flags.get("session_cache"):
            self.cache.append(b"s" * (int(self.rt.config.get("session_cache_mb", 6)) * 2**20))
        if method == "GET":
            return {"items": [int(x) for x in _redis_call(self.redis.lrange, key, 0, -1)]}
        if method == "POST":
            item = int(body.get("item", 1))
            if self.regressed and item % 3 == 0:
                raise HttpError(500, self.rt.say("cart_entry", item=item))
            _redis_call(self.redis.rpush, key, item)
            _redis_call(self.redis.expire, key, 600)
            return {"ok": True}
        if method == "DELETE":
            _redis_call(self.redis.delete, key)
            return {"ok": True}
        raise HttpError(405, "method not allowed")

    # --- checkout -------------------------------------------------------------------
    def r_checkout(self, method: str, path: str, q: dict[str, str], body: Any) -> Any:
        """Places an order: cart, currency, payment, shipping, database, queue."""
        assert self.pg is not None and self.redis is not None
        rt = self.rt
        user = body.get("user", "anon")
        if self.flags.get("gift_wrap") and not self.rt.config.get("wrapping_options"):
            raise HttpError(500, "KeyError: 'wrapping_options'")
        if self.flags.get("delivery_slots") and not self.rt.config.get("slot_calendar"):
            raise HttpError(500, "KeyError: 'slot_calendar'")
        items = rt.call("cart", "GET", f"/cart/{user}").get("items", []) or [1]
        total = 100 * len(items) + random.randint(0, 99)
        conv = rt.call("currency", "GET", f"/convert?amount={total}&to=EUR")
        pay = rt.call("payment", "POST", "/charge", {"amount": conv["amount"], "user": user})
        ship = rt.call("shipping", "GET", f"/quote?items={len(items)}")
        rows = self.pg.query(
            "INSERT INTO orders (username, total_cents, shipping_cents) VALUES (%s, %s, %s) "
            "RETURNING id",
            (user, int(conv["amount"]), int(ship["cost"])),
        )
        order = rows[0][0]
        self._receipt(order, user, int(conv["amount"]))
        message = json.dumps({"order": order, "user": user})
        for name in QUEUES.values():
            QUEUE_DEPTH.labels(name).set(int(_redis_call(self.redis.rpush, name, message)))
        rt.call("cart", "DELETE", f"/cart/{user}")
        return {"order": order, "payment": pay.get("id")}

    def _receipt(self, order: int, user: str, amount: int) -> None:
        """Keep the order's receipt on the data volume."""
        receipts = self.rt.env_dir / "data" / "receipts"
        try:
            receipts.mkdir(parents=True, exist_ok=True)
            (receipts / f"{order}.json").write_text(
                json.dumps({"order": order, "user": user, "amount": amount})
            )
        except OSError as exc:
            raise HttpError(500, f"{self.rt.say('receipt')}: {type(exc).__name__}: {exc}") from None

    # --- payment --------------------------------------------------------------------
    def r_payment(self, method: str, path: str, q: dict[str, str], body: Any) -> Any:
        """Charges an amount."""
        amount = Decimal(str(body.get("amount", 0)))
        if self.regressed:
            cents = int(amount) % 100
            if cents >= 50:
                raise HttpError(500, self.rt.say("charge_rejected", amount=amount))
        self.rt.call("currency", "GET", f"/convert?amount={amount}&to=USD")
        return {"id": f"pay-{random.randint(10**5, 10**6)}", "amount": str(amount)}

    # --- shipping -------------------------------------------------------------------
    def r_shipping(self, method: str, path: str, q: dict[str, str], body: Any) -> Any:
        """Quotes a shipping cost."""
        items = int(q.get("items", "1"))
        if self.regressed and random.random() < 0.5:
            # The next release looks carriers up in a table it expects to be migrated.
            raise HttpError(500, self.rt.say("quote_failed", items=items))
        conv = self.rt.call("currency", "GET", f"/convert?amount={500 + 50 * items}&to=EUR")
        return {"cost": conv["amount"]}

    # --- currency -------------------------------------------------------------------
    def r_currency(self, method: str, path: str, q: dict[str, str], body: Any) -> Any:
        """Converts an amount."""
        amount = float(q.get("amount", "0"))
        rate = {"EUR": 0.92, "USD": 1.0, "GBP": 0.79}.get(q.get("to", "USD"), 1.0)
        if self.flags.get("precise_rounding"):
            _burn(0.2)
        if self.regressed:
            # The next release refreshes its rates from the reference table on every call.
            time.sleep(0.7)
        return {"amount": int(amount * rate)}

    # --- notification (HTTP side) -----------------------------------------------------
    def r_notification(self, method: str, path: str, q: dict[str, str], body: Any) -> Any:
        """Queue status (the consumer runs in the background)."""
        return {"queued": QUEUE_DEPTH.labels(QUEUES["notification"])._value.get()}

    def consume(self, name: str) -> None:
        """Background consumer of the service's work queue ``name`` (:data:`QUEUES`).

        Reliable queue: a message moves to ``NAME:processing`` while it is handled, so a
        consumer that dies mid-message finds it again at start. With ``dead_letter`` on, a
        message that cannot be read moves to ``NAME:dead`` instead.
        """
        assert self.redis is not None
        # Only the confirmations' newer release is slow at its work.
        work_s = 0.9 if self.regressed and self.rt.service == "notification" else 0.0
        recovered = False
        while True:
            try:
                if not recovered:
                    # Inside the loop: a consumer started while Redis is down waits for it
                    # rather than dying, and takes up what it left mid-message once it answers.
                    for item in _redis_call(self.redis.lrange, f"{name}:processing", 0, -1):
                        self._deliver(name, item, work_s)
                    recovered = True
                QUEUE_DEPTH.labels(name).set(self.redis.llen(name))
                item = self.redis.blmove(name, f"{name}:processing", 1, "LEFT", "RIGHT")
                if item is None:
                    QUEUE_PROCESSED.set(time.time())
                    continue
                self._deliver(name, item, work_s)
            except Exception as exc:  # keep consuming after datastore hiccups
                self.rt.log(
                    "error", self.rt.say("consumer_error"), reason=f"{type(exc).__name__}: {exc}"
                )
                time.sleep(0.5)

    def _deliver(self, name: str, item: str, work_s: float) -> None:
        """Handle one message, then drop it from the processing list.

        Notification sends the order's confirmation; cart archives the checked-out cart.
        """
        assert self.redis is not None
        try:
            msg = json.loads(item)
            order, user = int(msg["order"]), str(msg["user"])
        except (ValueError, KeyError, TypeError) as exc:
            if self.rt.config.get("dead_letter"):
                self.redis.lpush(f"{name}:dead", item)
                self.redis.lrem(f"{name}:processing", 1, item)
                self.rt.log("warning", self.rt.say("moved_aside"), reason=str(exc))
                return
            self.rt.log(
                "fatal", self.rt.say("unreadable_order"), reason=f"{type(exc).__name__}: {exc}"
            )
            os._exit(70)
        if work_s:
            time.sleep(work_s)
        if self.pg is not None:
            self.pg.query(
                "INSERT INTO notifications (order_id, username) VALUES (%s, %s)",
                (order, user),
                fetch=False,
            )
            done = "order confirmation sent"
        else:
            self.redis.hset(f"{name}:archived", str(order), user)
            self.redis.expire(f"{name}:archived", 600)
            done = "checked-out cart archived"
        self.redis.lrem(f"{name}:processing", 1, item)
        QUEUE_PROCESSED.set(time.time())
        self.rt.log("info", done, order=order)


def _handler(rt: Runtime, shop: Shop) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _serve(self, method: str) -> None:
            url = urlparse(self.path)
            if url.path == "/metrics":
                data = generate_latest()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            if url.path == "/health":
                self._answer(200, {"status": "ok", "release": shop.release})
                return
            route = _route(url.path)
            start = time.time()
            trace_id, span_id, parent = rt.start_span(self.headers.get("traceparent"))
            _chatter_in_request(rt, method, route)
            INFLIGHT.inc()
            status = 200
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}") if length else {}
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                refused = rt.date_problem(self.headers.get(DATE_HEADER))
                if refused:
                    raise HttpError(401, refused)
                answer = shop.handle(method, url.path, query, body)
            except HttpError as exc:
                status, answer = exc.status, {"error": str(exc)}
            except UpstreamError as exc:
                status, answer = exc.status, {"error": str(exc)}
            except Exception as exc:  # any bug is a 500 for the caller
                status, answer = 500, {"error": f"{type(exc).__name__}: {exc}"}
            finally:
                INFLIGHT.dec()
            elapsed = time.time() - start
            REQUESTS.labels(route=route, code=str(status)).inc()
            LATENCY.labels(route=route).observe(elapsed)
            # A refused request (its date outside the window) is the caller's problem, logged as
            # a warning with the reason.
            level = "error" if status >= 500 else "warning" if status == 401 else "info"
            fields: dict[str, Any] = {
                "method": method,
                "route": route,
                "status": status,
                "duration_ms": round(elapsed * 1000, 1),
            }
            if status >= 500 or status == 401:
                fields["error"] = answer.get("error")
            rt.log(level, "request", **fields)
            rt.record_span(f"{method} {route}", "server", trace_id, span_id, parent, start, status)
            with contextlib.suppress(OSError):
                self._answer(status, answer)

        def _answer(self, status: int, answer: Any) -> None:
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

    return Handler


def _route(path: str) -> str:
    parts = [p for p in path.split("/") if p]
    return "/" + "/".join(":id" if p.isdigit() or i > 0 else p for i, p in enumerate(parts))


def _validate(cfg: dict[str, Any], path: Path) -> None:
    for key, kind in (("service", str), ("release", str), ("upstreams", dict)):
        if not isinstance(cfg.get(key), kind):
            raise SystemExit(f"{path}: field {key!r} must be a {kind.__name__}")
    for key in ("pool_size", "max_rps", "memory_limit_mb", "cpu_limit", "max_threads"):
        if key in cfg and cfg[key] is not None and not isinstance(cfg[key], int | float):
            raise SystemExit(f"{path}: field {key!r} must be a number, got {cfg[key]!r}")
    for name, value in cfg.get("timeouts", {}).items():
        if not isinstance(value, int | float) or value <= 0:
            raise SystemExit(f"{path}: timeouts.{name} must be a positive number")


def _data_volume(rt: Runtime) -> None:
    """Remove this instance's stale crash dumps and export the data volume's space."""
    mine = rt.env_dir / "data" / rt.instance
    for dump in mine.glob("*.dump") if mine.is_dir() else ():
        with contextlib.suppress(OSError):
            dump.unlink()
    data = rt.env_dir / "data"

    def stat(field: str) -> float:
        try:
            st = os.statvfs(data)
        except OSError:
            return 0.0
        return float(getattr(st, field) * st.f_frsize)

    def used() -> float:
        total = 0
        for root, _dirs, files in os.walk(mine):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(root, name)).st_blocks * 512
        return float(total)

    DISK_FREE.set_function(lambda: stat("f_bavail"))
    DISK_SIZE.set_function(lambda: stat("f_blocks"))
    DATA_USED.set_function(used)


def _reader(group: Path) -> Callable[..., Callable[[], float]]:
    """Readers of one control group's figures (a whole file, or one field of it)."""

    def read(name: str, key: str = "", scale: float = 1.0) -> Callable[[], float]:
        def value() -> float:
            try:
                text = (group / name).read_text()
            except OSError:
                return 0.0
            if not key:
                return float(text.strip() or 0) * scale
            return float(fields(text).get(key, 0)) * scale

        return value

    return read


def _container_metrics() -> bool:
    """Export the instance's control groups' figures, as a container platform's exporter does.

    Returns whether the instance runs in a memory group (the kernel enforces its limit).
    """
    memory, cpu = os.environ.get("SHOP_MEMORY_GROUP"), os.environ.get("SHOP_CPU_GROUP")
    if cpu:
        read = _reader(Path(cpu))
        CPU_QUOTA.set_function(read("cpu.cfs_quota_us"))
        CPU_PERIOD.set_function(read("cpu.cfs_period_us"))
        CPU_PERIODS.set_function(read("cpu.stat", "nr_periods"))
        CPU_THROTTLED.set_function(read("cpu.stat", "nr_throttled"))
        CPU_THROTTLED_S.set_function(read("cpu.stat", "throttled_time", 1e-9))
    if memory:
        read = _reader(Path(memory))
        MEMORY_USAGE.set_function(read("memory.usage_in_bytes"))
        MEMORY_LIMIT.set_function(read("memory.limit_in_bytes"))
        OOM_KILLS.set_function(read("memory.oom_control", "oom_kill"))
    return bool(memory)


def _memory_watch(rt: Runtime) -> None:
    limit = rt.config.get("memory_limit_mb")
    if not limit:
        return
    proc = psutil.Process()
    while True:
        rss = proc.memory_info().rss / 2**20
        if rss > float(limit):
            rt.log("error", rt.say("memory_exit"), rss_mb=round(rss, 1), limit_mb=limit)
            os._exit(137)
        time.sleep(0.25)


#: The route a service's harmless failure messages name.
_CHATTER_ROUTES = {
    "frontend": "/",
    "catalog": "/products/:id",
    "recommendation": "/recommendations",
    "cart": "/cart/:id",
    "checkout": "/checkout",
    "payment": "/charge",
    "shipping": "/quote",
    "currency": "/convert",
    "notification": "/",
}


#: Harmless messages waiting for the next request, which logs them in its own trace.
_CHATTER: queue.SimpleQueue[tuple[str, str, dict[str, Any]]] = queue.SimpleQueue()


def _chatter(rt: Runtime) -> None:
    """Now and then, a harmless message of the kind failures cause (see :mod:`phrases`).

    The next request logs it inside its own trace (a request that then succeeds), as a
    transient failure that a retry or a fallback absorbed would be; one no request took by
    the next message is logged on its own.
    """
    rng = random.Random()
    route = _CHATTER_ROUTES.get(rt.service, "/")
    upstreams = sorted(rt.config.get("upstreams", {}))
    db_user = str((rt.config.get("postgres") or {}).get("user", "shop"))
    while True:
        time.sleep(rng.expovariate(1 / CHATTER_MEAN_S))
        with contextlib.suppress(queue.Empty):
            while True:
                level, msg, fields = _CHATTER.get_nowait()
                rt.log(level, msg, **fields)
        _CHATTER.put(rt.phrases.chatter(rng, route, upstreams, db_user))


def _chatter_in_request(rt: Runtime, method: str, route: str) -> None:
    """Log a waiting harmless message in the current request's trace, if one waits."""
    with contextlib.suppress(queue.Empty):
        level, msg, fields = _CHATTER.get_nowait()
        if "route" in fields:
            fields = {**fields, "method": method, "route": route}
        rt.log(level, msg, **fields)


def main(argv: list[str] | None = None) -> None:
    """Run one service instance until killed."""
    args = argv if argv is not None else sys.argv[1:]
    cfg_path, instance, port = Path(args[0]), args[1], int(args[2])
    try:
        cfg = json.loads(cfg_path.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{cfg_path}: cannot read config: {exc}") from None
    try:
        _validate(cfg, cfg_path)
    except SystemExit as exc:
        logs = env_dir() / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with (logs / f"{instance}.log").open("a") as fh:
            rec = {
                "ts": round(time.time(), 3),
                "level": "fatal",
                "service": cfg.get("service"),
                "instance": instance,
                "msg": f"invalid configuration: {exc}",
            }
            fh.write(json.dumps(rec) + "\n")
        raise
    files = cfg.get("max_open_files")
    if files:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(int(files), hard), hard))
    rt = Runtime(cfg["service"], instance, cfg, env_dir())
    WORDS[0] = rt.phrases
    _data_volume(rt)
    shop = Shop(rt)
    reload = threading.Event()
    holder: list[ThreadingHTTPServer] = []

    def on_hangup(signum: int, frame: Any) -> None:
        reload.set()
        if holder:
            # From the serving thread itself (the handler runs there): the reload hangs.
            holder[0].shutdown()

    # Every operator signal has its handler before the port is bound: a signal sent as soon
    # as the instance listens never meets the default action (which ends the process).
    signal.signal(signal.SIGUSR1, lambda signum, frame: shop.stats.diagnose())
    signal.signal(signal.SIGUSR2, lambda signum, frame: rt.step_clock())
    signal.signal(signal.SIGHUP, on_hangup)
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(rt, shop))
    holder.append(server)
    server.daemon_threads = True
    server.request_queue_size = 64
    tls = cfg.get("serve_tls")
    if tls:
        sslctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sslctx.load_cert_chain(tls["cert"], tls["key"])
        server.socket = sslctx.wrap_socket(server.socket, server_side=True)
    if not _container_metrics():  # else the kernel enforces the memory limit
        threading.Thread(target=_memory_watch, args=(rt,), daemon=True).start()
    threading.Thread(target=_chatter, args=(rt,), daemon=True).start()
    threading.Thread(target=shop.stats.flush, daemon=True).start()
    if rt.service in QUEUES and shop.flags.get("queue_consumer", True):
        threading.Thread(target=shop.consume, args=(QUEUES[rt.service],), daemon=True).start()
    rt.log("info", "started", release=shop.release, port=port)
    while True:
        server.serve_forever()
        if not reload.is_set():
            break
        reload.clear()
        with contextlib.suppress(OSError, ValueError):
            rt.config.update(json.loads(cfg_path.read_text()))
        rt.log("info", "configuration reloaded", release=shop.release)


if __name__ == "__main__":
    main()
