"""Background shoppers: ``python -m itbench_sre.app.loadgen CONFIG``.

Sends a request mix arriving at a steady rate (an open workload) to the frontend replicas
(a client-side load balancer that skips replicas refusing connections) and appends every
request's outcome to a JSON-lines file: the workload oracle of the evaluator. Also exports its
own Prometheus metrics.
"""

from __future__ import annotations

import http.client
import itertools
import json
import queue
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

from prometheus_client import Counter, Histogram, start_http_server

SHOPPED = Counter("loadgen_requests_total", "Workload requests", ["route", "outcome"])
SHOP_LATENCY = Histogram(
    "loadgen_request_duration_seconds",
    "Workload request latency",
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0),
)

MIX = (("home", 40), ("product", 25), ("cart", 20), ("checkout", 15))


def _request(
    targets: list[str], rr: itertools.count[int], kind: str, user: str, timeout: float
) -> int:
    method, path, body = "GET", "/", None
    if kind == "product":
        path = f"/product/{random.randint(1, 20)}"
    elif kind == "cart":
        method, path, body = "POST", "/cart", {"user": user, "item": random.randint(1, 20)}
    elif kind == "checkout":
        method, path, body = "POST", "/checkout", {"user": user}
    start = next(rr)
    for i in range(len(targets)):
        host, _, port = targets[(start + i) % len(targets)].rpartition(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        try:
            conn.connect()
        except ConnectionRefusedError:
            conn.close()
            continue
        except OSError:
            conn.close()
            return 0
        try:
            payload = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            return resp.status
        except (OSError, http.client.HTTPException):
            return 0
        finally:
            conn.close()
    return 0


def _watch(path: Path, cfg: dict[str, Any]) -> None:
    """Follow the offered rate of the configuration file (the shoppers' traffic)."""
    while True:
        time.sleep(1.0)
        try:
            cfg["rate"] = float(json.loads(path.read_text())["rate"])
        except (OSError, ValueError, KeyError, TypeError):
            continue


def _arrivals(cfg: dict[str, Any], pending: queue.Queue[str]) -> None:
    """Shoppers arrive at the offered rate whatever the shop's latency (an open workload).

    A slow or hung service therefore cannot starve the other routes of their traffic, as it
    would if each shopper waited for the last answer before the next request. When every
    sender is busy the arrival waits for one (the queue is bounded).
    """
    kinds = [k for k, w in MIX for _ in range(w)]
    rnd = random.Random(0)
    while True:
        time.sleep(rnd.expovariate(float(cfg["rate"])))
        pending.put(rnd.choice(kinds))


def _sender(
    cfg: dict[str, Any],
    pending: queue.Queue[str],
    out: Any,
    lock: threading.Lock,
    rr: itertools.count[int],
    n: int,
) -> None:
    rnd = random.Random(n)
    while True:
        kind = pending.get()
        t0 = time.time()
        status = _request(
            cfg["targets"], rr, kind, f"user{rnd.randint(1, 50)}", float(cfg["timeout"])
        )
        elapsed = time.time() - t0
        ok = 200 <= status < 400
        SHOPPED.labels(route=kind, outcome="ok" if ok else "error").inc()
        SHOP_LATENCY.observe(elapsed)
        rec = {
            "ts": round(t0, 3),
            "route": kind,
            "status": status,
            "ok": ok,
            "ms": round(elapsed * 1000, 1),
        }
        with lock:
            out.write(json.dumps(rec) + "\n")


def main(argv: list[str] | None = None) -> None:
    """Shop forever."""
    args = argv if argv is not None else sys.argv[1:]
    cfg = json.loads(Path(args[0]).read_text())
    start_http_server(int(cfg["port"]), addr="127.0.0.1")
    out = Path(cfg["outcomes"]).open("a", encoding="utf-8", buffering=1)  # noqa: SIM115 - open for the life of the process
    lock = threading.Lock()
    rr = itertools.count()
    senders = int(cfg["workers"])
    pending: queue.Queue[str] = queue.Queue(maxsize=senders)
    threading.Thread(target=_watch, args=(Path(args[0]), cfg), daemon=True).start()
    threads = [
        threading.Thread(target=_sender, args=(cfg, pending, out, lock, rr, i), daemon=True)
        for i in range(senders)
    ]
    threads.append(threading.Thread(target=_arrivals, args=(cfg, pending), daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
