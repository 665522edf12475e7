"""What journaling a program's endpoint requests costs the relay (goal: under 0.1 ms a request).

Measures, in the same run, the wall time of a burst of HTTP requests (one keep-alive
connection, a JSON answer of about 4 KB each, as a PromQL or AWS client gets) sent through
:class:`itbench.netbridge.Relay`:

- baseline: the relay copying bytes only;
- watched: the same relay with an :class:`itbench.httpwatch.HttpWatcher` reading both
  directions and reporting each exchange, as the command agent's sandbox runs it.

Prints the median of each over interleaved rounds, per request, and the ratio watched /
baseline.

Run: .venv/bin/python benchmarks/core_relay_watch.py [--runs N] [--requests N]
"""

from __future__ import annotations

import argparse
import http.client
import socket
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from itbench import netbridge
from itbench.httpwatch import HttpWatcher

BODY = b'{"status":"success","data":' + b'"x"' * 1300 + b"}"


class _Api(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def setup(self) -> None:
        super().setup()
        # As Prometheus's and moto's servers do: no 40 ms wait between head and body.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)


class _Unix(http.client.HTTPConnection):
    """An HTTP connection through the relay's socket (its first line names the port)."""

    def __init__(self, path: str, port: int) -> None:
        super().__init__("localhost")
        self.path, self.port_line = path, f"{port}\n".encode()

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)
        self.sock.sendall(self.port_line)


def burst(path: str, port: int, requests: int) -> float:
    """Seconds for ``requests`` GETs over one connection through the relay at ``path``."""
    conn = _Unix(path, port)
    start = time.perf_counter()
    for i in range(requests):
        conn.request("GET", f"/api/v1/query?query=up{i}")
        resp = conn.getresponse()
        assert resp.status == 200 and len(resp.read()) == len(BODY)
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def main() -> None:
    """Run the interleaved rounds and print the medians and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--requests", type=int, default=400)
    args = parser.parse_args()
    api = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    port = api.server_address[1]
    seen: list[object] = []
    with tempfile.TemporaryDirectory() as tmp:
        plain = netbridge.Relay(str(Path(tmp) / "plain.sock"), [port])
        watched = netbridge.Relay(
            str(Path(tmp) / "watched.sock"), [port], lambda p: HttpWatcher(p, seen.append)
        )
        times: dict[str, list[float]] = {"baseline": [], "watched": []}
        burst(plain.path, port, 20)  # warm-up
        for _ in range(args.runs):
            times["baseline"].append(burst(plain.path, port, args.requests))
            times["watched"].append(burst(watched.path, port, args.requests))
        plain.stop()
        watched.stop()
    api.shutdown()
    assert len(seen) == args.runs * args.requests, len(seen)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratios = [w / b for w, b in zip(times["watched"], times["baseline"], strict=True)]
    for name, value in med.items():
        print(f"{name}: {value * 1000 / args.requests:.3f} ms per request (median of {args.runs})")
    added = (med["watched"] - med["baseline"]) * 1000 / args.requests
    print(f"added by the watcher: {added:.3f} ms per request")
    print(f"ratio watched/baseline: {statistics.median(ratios):.3f} (median of the pairs)")


if __name__ == "__main__":
    main()
