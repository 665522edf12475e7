"""A client of one supervisord's XML-RPC interface over its unix socket."""

from __future__ import annotations

import http.client
import socket
import xmlrpc.client
from pathlib import Path
from typing import Any


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.path)
        self.sock = sock


class _UnixTransport(xmlrpc.client.Transport):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__()
        self._path = path
        self._timeout = timeout

    def make_connection(self, host: Any) -> http.client.HTTPConnection:
        return _UnixConnection(self._path, self._timeout)


class Supervisor:
    """Process control of one environment's supervisord.

    Args:
        socket_path: The ``[unix_http_server]`` socket of that supervisord.
        timeout: Seconds per call.
    """

    def __init__(self, socket_path: Path, timeout: float = 15.0) -> None:
        self.socket_path = socket_path
        self.timeout = timeout

    def _proxy(self) -> Any:
        return xmlrpc.client.ServerProxy(
            "http://localhost", transport=_UnixTransport(str(self.socket_path), self.timeout)
        )

    def alive(self) -> bool:
        """Whether supervisord answers."""
        try:
            return bool(self._proxy().supervisor.getState()["statecode"] == 1)
        except (OSError, xmlrpc.client.Error):
            return False

    def processes(self) -> list[dict[str, Any]]:
        """``getAllProcessInfo``: name, statename, pid, start, exitstatus, ..."""
        return list(self._proxy().supervisor.getAllProcessInfo())

    def info(self, name: str) -> dict[str, Any]:
        """State of one program."""
        return dict(self._proxy().supervisor.getProcessInfo(name))

    def start(self, name: str, wait: bool = True) -> None:
        """Start a program (no error when it already runs)."""
        try:
            self._proxy().supervisor.startProcess(name, wait)
        except xmlrpc.client.Fault as exc:
            if "ALREADY_STARTED" not in exc.faultString:
                raise

    def stop(self, name: str, wait: bool = True) -> None:
        """Stop a program (no error when it is not running)."""
        try:
            self._proxy().supervisor.stopProcess(name, wait)
        except xmlrpc.client.Fault as exc:
            if "NOT_RUNNING" not in exc.faultString:
                raise

    def restart(self, name: str) -> None:
        """Stop then start a program."""
        self.stop(name)
        self.start(name)

    def signal(self, name: str, sig: str) -> None:
        """Send a signal (e.g. ``HUP``) to a program."""
        self._proxy().supervisor.signalProcess(name, sig)

    def stop_all(self) -> None:
        """Stop every program, waiting for them."""
        self._proxy().supervisor.stopAllProcesses(True)

    def shutdown(self) -> None:
        """Ask supervisord to exit."""
        self._proxy().supervisor.shutdown()
