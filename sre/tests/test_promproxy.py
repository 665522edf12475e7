"""The agents' Prometheus relay under attack: a real Prometheus behind the real relay."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from itbench_sre.promproxy import AGENT_SLOTS, MAX_BODY, QUERY_FLAGS, PrometheusProxy

pytestmark = pytest.mark.skipif(shutil.which("prometheus") is None, reason="needs prometheus")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[PrometheusProxy]:
    """A Prometheus with one alert rule, and the relay agents reach it through."""
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: [rules.yml]\nscrape_configs: []\n"
    )
    (tmp_path / "rules.yml").write_text(
        "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: vector(1)\n"
    )
    prom_port = _free_port()
    prom = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
            *QUERY_FLAGS,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    proxy = PrometheusProxy(_free_port(), prom_port, read_timeout=1.0)
    try:
        end = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/-/ready", timeout=1):
                    break
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.1)
        proxy.start()
        yield proxy
    finally:
        proxy.stop()
        prom.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            prom.wait(timeout=10)


def _raw(proxy: PrometheusProxy, request: bytes, body: bytes = b"") -> bytes:
    """Send ``request`` and ``body``, end the sending side, read the whole answer."""
    with socket.create_connection(("127.0.0.1", proxy.listen_port), timeout=15) as s:
        s.sendall(request)
        with contextlib.suppress(OSError):  # the relay may answer before the body is sent
            s.sendall(body)
            s.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_negative_length_does_not_lift_the_body_cap(relay: PrometheusProxy) -> None:
    """``Content-Length: -1`` made the relay read the body to its end, however large.

    A cheating agent streams gigabytes into the harness's own process this way (the memory of
    every trial it runs beside) and makes Prometheus parse them.
    """
    body = b"query=" + b"1" * (4 * MAX_BODY)
    head = (
        b"POST /api/v1/query HTTP/1.0\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        b"Content-Length: -1\r\n\r\n"
    )
    answer = _raw(relay, head, body)
    assert answer.split(b"\r\n", 1)[0].split()[1] == b"400", answer[:300]
    assert b"forbidden" in answer, answer[:300]  # the relay's refusal, not Prometheus's


def test_an_unreadable_length_is_answered(relay: PrometheusProxy) -> None:
    """A length that is not a number gets an answer, not a dropped connection."""
    head = b"POST /api/v1/query HTTP/1.0\r\nContent-Length: many\r\n\r\n"
    answer = _raw(relay, head, b"query=up")
    assert answer.split(b"\r\n", 1)[0].split()[1] == b"400", answer[:300]
    assert b"forbidden" in answer, answer[:300]


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/status/flags",
        "/api/v1/status/config",
        "/api/v1/targets",
        "/federate?match[]=up",
        "/api/v1/admin/tsdb/snapshot",
        "/-/quit",
        "/api/v1/label/..%2F..%2Fstatus%2Fflags/values",
        "/api/v1/label/x/values/../../../status/flags",
        "/api/v1/write",
    ],
)
def test_harness_facing_endpoints_stay_out_of_reach(relay: PrometheusProxy, path: str) -> None:
    """No spelling of a path reaches the server's flags (harness paths), config or writes."""
    answer = _raw(relay, f"GET {path} HTTP/1.0\r\n\r\n".encode())
    assert b"storage.tsdb.path" not in answer and b"rule_files" not in answer
    assert answer.split(b"\r\n", 1)[0].split()[1] in (b"403", b"404"), answer[:300]


def test_rules_never_name_their_files(relay: PrometheusProxy) -> None:
    """The rules answer drops the rule files' paths, also for a query string."""
    answer = _raw(relay, b"GET /api/v1/rules?type=alert HTTP/1.0\r\n\r\n")
    assert b'"groups"' in answer and b"rules.yml" not in answer


def test_a_silent_connection_is_hung_up(relay: PrometheusProxy) -> None:
    """Connections that never finish their request are closed, not kept by harness threads.

    Without a read timeout every half-sent request held a thread of the harness's process
    forever: an agent could open them by the thousand and starve every trial it runs beside.
    """
    with socket.create_connection(("127.0.0.1", relay.listen_port), timeout=15) as s:
        s.sendall(b"GET /api/v1/query?query=up HTTP/1.0\r\n")
        start = time.monotonic()
        assert s.recv(1024) == b""
        assert time.monotonic() - start < 10


# --- what the agent leaves behind -----------------------------------------------------------


def _slow_query(window: str) -> str:
    """A range query that keeps one core of Prometheus busy for seconds (no series needed)."""
    now = int(time.time())
    return urllib.parse.urlencode(
        {
            "query": f"quantile_over_time(0.5, vector(time())[{window}:100ms])",
            "start": now - 3 * 3600,
            "end": now,
            "step": 1,
        }
    )


def _upstream(relay: PrometheusProxy) -> str:
    return f"http://127.0.0.1:{relay.upstream_port}"


def _running(relay: PrometheusProxy) -> int:
    """Queries Prometheus is executing or queueing now (its own gauge)."""
    with urllib.request.urlopen(_upstream(relay) + "/metrics", timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith("prometheus_engine_queries "):
                return int(float(line.split()[1]))
    raise AssertionError("Prometheus exports no prometheus_engine_queries")


def _judge_query(relay: PrometheusProxy) -> float:
    """Seconds the evaluator's direct query takes (its client gives up after 5 s)."""
    start = time.monotonic()
    url = _upstream(relay) + "/api/v1/query?query=vector(1)"
    with urllib.request.urlopen(url, timeout=5) as resp:
        assert json.loads(resp.read())["status"] == "success"
    return time.monotonic() - start


def test_slow_queries_an_agent_leaves_never_hold_the_evaluator(relay: PrometheusProxy) -> None:
    """16 slow queries sent through the relay and abandoned: the judge's queries still answer.

    The relay used to forward all 16 to a Prometheus that runs four queries at once and keep
    them open after the agent was gone; the evaluator's first query waited behind them and
    timed out, which turned the agent's failure into an excluded ``error``.
    """
    target = f"GET /api/v1/query_range?{_slow_query('30m')} HTTP/1.0\r\n\r\n".encode()
    flood: list[socket.socket] = []
    try:
        for _ in range(16):
            flood.append(socket.create_connection(("127.0.0.1", relay.listen_port)))
            flood[-1].sendall(target)
        seen: list[int] = []
        end = time.monotonic() + 4
        while time.monotonic() < end and (len(seen) < 10 or max(seen) < AGENT_SLOTS):
            seen.append(_running(relay))
            time.sleep(0.05)
        # The agent has every slot it may get, never more; the evaluator finds one free.
        assert max(seen) == AGENT_SLOTS, seen
        assert _judge_query(relay) < 2
    finally:
        for conn in flood:  # the agent exits with its queries in flight
            conn.close()
    left = relay.end_turn()
    assert len(left) == 1 and "Prometheus" in left[0], left
    assert int(left[0].split()[0]) >= 1, left
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", relay.listen_port), timeout=2)
    with pytest.raises(RuntimeError, match="turn is over"):
        relay.read("/api/v1/query", {"query": "vector(1)"})
    assert max(_judge_query(relay) for _ in range(5)) < 2
    # What waited for a slot never reached Prometheus.
    time.sleep(1)
    assert _running(relay) <= AGENT_SLOTS


def test_the_agent_cannot_lift_the_relays_query_timeout(relay: PrometheusProxy) -> None:
    """Queries go to Prometheus with the relay's ``timeout``, whatever the agent asks for."""
    strict = PrometheusProxy(relay.listen_port + 1, relay.upstream_port, query_timeout=0.001)
    query = _slow_query("2m")
    with strict.exchange("GET", "/api/v1/query_range", query + "&timeout=3600") as resp:
        answer = json.loads(resp.read())
    assert answer.get("errorType") == "timeout", str(answer)[:300]
    body = (query + "&timeout=3600").encode()
    with strict.exchange("POST", "/api/v1/query_range", "timeout=3600", body) as resp:
        answer = json.loads(resp.read())
    assert answer.get("errorType") == "timeout", str(answer)[:300]
    # The relay's own default leaves an ordinary query alone.
    assert relay.read("/api/v1/query", {"query": "vector(1)", "timeout": "0.001"})["result"]
