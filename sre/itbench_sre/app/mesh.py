"""The shop's service mesh: a user-space TCP proxy with one listener per call edge.

``python -m itbench_sre.app.mesh ROUTES LINKS``: ``ROUTES`` (JSON) maps an edge name to its
listen port and target addresses (replicas, tried round-robin). ``LINKS`` (JSON, re-read every
half second) holds the state of the network links under the mesh, per edge: extra delay,
loss and reset probabilities, whether the link is cut and, with ``flap_s``, whether the state
holds only every other period of that many seconds; and per backend address (``@host:port``)
the extra delay of the path to that one backend. The links file belongs to the environment's
operator, not to the shop.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import select
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from prometheus_client import Counter, start_http_server

CONNS = Counter("mesh_connections_total", "Connections proxied per edge", ["edge", "outcome"])

_links: dict[str, dict[str, Any]] = {}


def _watch_links(path: Path) -> None:
    global _links
    mtime = 0.0
    while True:
        try:
            m = path.stat().st_mtime
            if m != mtime:
                _links = json.loads(path.read_text() or "{}")
                mtime = m
        except (OSError, ValueError):
            pass
        time.sleep(0.3)


def _connect(
    targets: list[str], rr: itertools.count[int]
) -> tuple[socket.socket, str] | tuple[None, None]:
    start = next(rr)
    for i in range(len(targets)):
        addr = targets[(start + i) % len(targets)]
        host, _, port = addr.rpartition(":")
        try:
            return socket.create_connection((host, int(port)), timeout=1.0), addr
        except OSError:
            continue
    return None, None


def _active(link: dict[str, Any]) -> dict[str, Any]:
    """The link state in force now (nothing during the quiet half of a flapping period)."""
    period = float(link.get("flap_s", 0) or 0)
    if period and int(time.time() / period) % 2:
        return {}
    return link


def _reset(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _serve(edge: str, client: socket.socket, targets: list[str], rr: itertools.count[int]) -> None:
    link = _active(_links.get(edge, {}))
    try:
        if link.get("cut"):
            # A cut link: packets vanish, the caller sees only its own timeout.
            client.settimeout(60)
            while client.recv(65536):
                pass
            client.close()
            return
        if random.random() < float(link.get("loss", 0)):
            client.close()
            return
        if random.random() < float(link.get("reset", 0)):
            _reset(client)
            return
        upstream, addr = _connect(targets, rr)
        if upstream is None:
            CONNS.labels(edge=edge, outcome="refused").inc()
            _reset(client)
            return
        CONNS.labels(edge=edge, outcome="ok").inc()
        _pump(edge, client, upstream, f"@{addr}")
    except OSError:
        client.close()


def _pump(edge: str, client: socket.socket, upstream: socket.socket, path: str) -> None:
    client.setblocking(True)
    upstream.setblocking(True)
    socks = [client, upstream]
    try:
        while True:
            ready, _, _ = select.select(socks, [], [], 30)
            if not ready:
                return
            for s in ready:
                data = s.recv(65536)
                if not data:
                    return
                if s is client:
                    delay = float(_active(_links.get(edge, {})).get("delay_ms", 0)) / 1000
                    delay += float(_links.get(path, {}).get("delay_ms", 0)) / 1000
                    if delay:
                        time.sleep(delay)
                    upstream.sendall(data)
                else:
                    client.sendall(data)
    except OSError:
        return
    finally:
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()


def _listen(edge: str, port: int, targets: list[str]) -> None:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(128)
    rr = itertools.count()
    while True:
        client, _ = srv.accept()
        threading.Thread(target=_serve, args=(edge, client, targets, rr), daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    """Start one listener per edge and proxy until killed."""
    args = argv if argv is not None else sys.argv[1:]
    routes = json.loads(Path(args[0]).read_text())
    start_http_server(int(args[2]), addr="127.0.0.1")
    threading.Thread(target=_watch_links, args=(Path(args[1]),), daemon=True).start()
    threads = []
    for edge, route in routes.items():
        t = threading.Thread(
            target=_listen, args=(edge, int(route["port"]), list(route["targets"])), daemon=True
        )
        t.start()
        threads.append(t)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
