"""The port relay between a sandbox and the host: allow list, connection cap, clean stop."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from itbench import netbridge


def _upstream() -> tuple[socket.socket, list[socket.socket]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(512)
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    return server, accepted


def _connect(path: Path, header: bytes) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(path))
    with contextlib.suppress(BrokenPipeError):  # a refused connection may be closed already
        conn.sendall(header)
    return conn


def _closed_unrelayed(conn: socket.socket) -> bool:
    conn.settimeout(5)
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:
        return True


def test_only_allowed_ports_are_relayed(tmp_path: Path) -> None:
    server, accepted = _upstream()
    port = server.getsockname()[1]
    relay = netbridge.Relay(str(tmp_path / "r.sock"), [port])
    try:
        good = _connect(tmp_path / "r.sock", f"{port}\n".encode())
        good.sendall(b"ping")
        deadline = time.monotonic() + 5
        while not accepted and time.monotonic() < deadline:
            time.sleep(0.01)
        assert accepted and accepted[0].recv(4) == b"ping"
        for header in (
            b"22\n",
            b"+1\n",
            b"99999999999\n",
            b"/etc/passwd\n",
            f" {port}x\n".encode(),
        ):
            bad = _connect(tmp_path / "r.sock", header)
            assert _closed_unrelayed(bad), header
            bad.close()
        assert len(accepted) == 1
        assert 22 in relay.refused
    finally:
        relay.stop()
        server.close()


def test_a_connection_flood_is_capped_and_stop_closes_live_connections(tmp_path: Path) -> None:
    server, accepted = _upstream()
    port = server.getsockname()[1]
    relay = netbridge.Relay(str(tmp_path / "r.sock"), [port])
    threads_before = threading.active_count()
    conns = [_connect(tmp_path / "r.sock", f"{port}\n".encode()) for _ in range(300)]
    try:
        time.sleep(1.0)
        # Two pump threads per carried connection at most, for the capped number of them.
        assert len(accepted) <= netbridge.MAX_CONNECTIONS
        assert threading.active_count() - threads_before <= 2 * netbridge.MAX_CONNECTIONS + 2
    finally:
        relay.stop()
    deadline = time.monotonic() + 5
    while threading.active_count() > threads_before + 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= threads_before + 1
    for c in conns:
        c.close()
    server.close()


class _Api(BaseHTTPRequestHandler):
    """A keep-alive HTTP/1.1 endpoint: plain, chunked, HEAD and form answers."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_GET(self) -> None:
        if self.path.startswith("/chunked"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
            return
        self.send_response(200)
        self.send_header("Content-Length", "13")
        self.end_headers()
        self.wfile.write(b"HTTP/1.1 500 ")  # a body that looks like a head

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "10")
        self.end_headers()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(400 if "Action" not in str(self.headers) else 200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"no")


def test_http_exchanges_to_an_endpoint_are_reported_without_queries_credentials_or_bodies(
    tmp_path: Path,
) -> None:
    """One keep-alive connection with plain, chunked, HEAD and AWS requests (a form body sent
    after its head), then a connection that is not HTTP: each exchange is reported in order
    with its method, path, action, service and status; the bytes pass unchanged."""
    from http.server import ThreadingHTTPServer

    from itbench.httpwatch import HttpWatcher

    api = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    port = api.server_address[1]
    seen: list[dict[str, object]] = []
    relay = netbridge.Relay(
        str(tmp_path / "r.sock"),
        [port],
        lambda p: HttpWatcher(p, lambda e: seen.append(e.record())),
    )
    form = b"Action=DescribeInstances&Version=2016-11-15&Token=s3cret"
    signed = (
        b"Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261207/us-east-1/ec2/"
        b"aws4_request, SignedHeaders=host, Signature=f00d\r\n"
    )
    try:
        conn = _connect(tmp_path / "r.sock", f"{port}\n".encode())
        conn.settimeout(10)
        stream = conn.makefile("rb")

        def answer(head: bool = False) -> bytes:
            status = stream.readline()
            length, chunked = 0, False
            while (line := stream.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                length = int(value) if name.lower() == "content-length" else length
                chunked = chunked or "chunked" in line.decode().lower()
            if chunked:
                body = b""
                while (size := int(stream.readline().strip(), 16)) > 0:
                    body += stream.read(size)
                    stream.readline()
                stream.readline()
                return status + body
            return status + (stream.read(length) if length and not head else b"")

        conn.sendall(b"GET /api/v1/query?query=up&token=s3cret HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer() == b"HTTP/1.1 200 OK\r\nHTTP/1.1 500 "
        conn.sendall(b"GET /chunked HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer().endswith(b"hello world")
        conn.sendall(b"HEAD /bucket/key HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer(head=True).startswith(b"HTTP/1.1 200")
        conn.sendall(
            b"POST / HTTP/1.1\r\nHost: x\r\n" + signed
            + b"Content-Type: application/x-www-form-urlencoded\r\n"
            + f"Content-Length: {len(form)}\r\n\r\n".encode()
        )  # fmt: skip
        time.sleep(0.2)
        conn.sendall(form)
        assert answer().startswith(b"HTTP/1.1 400")
        conn.sendall(
            b"POST /ssm HTTP/1.1\r\nHost: x\r\nX-Amz-Target: AmazonSSM.GetParameter\r\n"
            b"Content-Type: application/x-amz-json-1.1\r\nContent-Length: 2\r\n\r\n{}"
        )
        assert answer().startswith(b"HTTP/1.1 400")
        conn.close()
        other = _connect(tmp_path / "r.sock", f"{port}\n".encode())
        other.sendall(b"\x16\x03\x01\x00\x05hello\r\n\r\n")
        other.settimeout(10)
        assert other.recv(100)  # relayed: the server answers (its refusal)
        other.close()
    finally:
        relay.stop()
        api.shutdown()
    timings = [r.pop("seconds") for r in seen]
    assert seen == [
        {"port": port, "method": "GET", "path": "/api/v1/query", "status": 200},
        {"port": port, "method": "GET", "path": "/chunked", "status": 200},
        {"port": port, "method": "HEAD", "path": "/bucket/key", "status": 200},
        {
            "port": port,
            "method": "POST",
            "path": "/",
            "action": "DescribeInstances",
            "service": "ec2",
            "status": 400,
        },
        {"port": port, "method": "POST", "path": "/ssm", "action": "GetParameter", "status": 400},
    ]
    assert all(isinstance(t, float) and t >= 0 for t in timings)
    assert not any(w in str(seen) for w in ("s3cret", "AKIDEXAMPLE", "f00d", "query=", "Token"))


def test_the_watcher_reads_requests_as_servers_do_and_stays_bounded_against_crafted_ones() -> None:
    """Crafted requests a hostile program may send: loose request lines, a folded length,
    conflicting actions, a doubled slash and a non-ASCII length are read as the server reads
    them; an oversized head and a pile of unanswered requests end the watching, said once."""
    from itbench.httpwatch import MAX_HEAD, MAX_PENDING, HttpWatcher

    def watch(*sends: bytes, answers: int = 0) -> tuple[list[dict[str, object]], list[int]]:
        seen: list[dict[str, object]] = []
        lost: list[int] = []
        w = HttpWatcher(80, lambda e: seen.append(e.record()), lost.append)
        for data in sends:
            w.sent(data)
        for _ in range(answers):
            w.received(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        for r in seen:
            r.pop("seconds")
        return seen, lost

    seen, lost = watch(
        b"POST  /?Action=DescribeSnapshots HTTP/1.2\r\nX-Amz-Target: AmazonEC2.DescribeVolumes\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 24\r\n\r\n"
        b"Action=DescribeAddresses",
        b"GET\t//moto-api/ HTTP/1.1\r\n\r\n",
        b"POST /x HTTP/1.1\r\nContent-Length:\r\n 22\r\n\r\nGET /fake HTTP/1.1\r\n\r\n",
        answers=3,
    )
    assert seen == [
        {
            "port": 80,
            "method": "POST",
            "path": "/",
            "action": "DescribeVolumes|DescribeSnapshots|DescribeAddresses",
            "status": 200,
        },
        {"port": 80, "method": "GET", "path": "//moto-api/", "status": 200},
        {"port": 80, "method": "POST", "path": "/x", "status": 200},
    ]
    assert lost == []
    slow = b"POST /x HTTP/1.1\r\nAuthorization: AWS4-HMAC-SHA256 " + b"Credential=" * 11_000
    assert watch(slow[:65_000], slow[65_000:] + b"\r\n\r\n", answers=1) == ([], [80])
    assert len(slow) > MAX_HEAD
    # A length that is no ASCII number frames no body (the server refuses it, answered).
    odd = watch(b"POST /x HTTP/1.1\r\nContent-Length: \xc2\xb2\r\n\r\n", answers=1)
    assert odd == ([{"port": 80, "method": "POST", "path": "/x", "status": 200}], [])
    pile = b"GET /fake HTTP/1.1\r\n\r\n" * (MAX_PENDING + 10)
    assert watch(pile) == ([], [80])
