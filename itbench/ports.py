"""Port blocks for trials, exclusive across threads and across itbench processes."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from itbench.errors import InfrastructureError

#: Ports are handed out in units of this size; a trial takes as many consecutive units as it needs.
UNIT = 100
FIRST_PORT = int(os.environ.get("ITBENCH_PORT_BASE", "20000"))


def _ephemeral_first(default: int = 32768) -> int:
    """The first port the kernel gives outgoing connections (Linux; ``default`` elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


# Below the kernel's range for outgoing connections: a client socket that happens to take a
# trial's port (any HTTP call of the harness) would keep its server from binding it.
_EPHEMERAL = _ephemeral_first()
LAST_PORT = min(60000, _EPHEMERAL) if _EPHEMERAL > FIRST_PORT else 60000


def _lock_dir() -> Path:
    d = Path(os.environ.get("ITBENCH_PORT_LOCKS", Path(tempfile.gettempdir()) / "itbench-ports"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class PortBlock:
    """A held block of ports; :meth:`release` gives it back."""

    base: int
    count: int
    _handles: list[IO[bytes]]

    def release(self) -> None:
        """Release the block's locks. Idempotent."""
        for fh in self._handles:
            with contextlib.suppress(OSError):
                fcntl.flock(fh, fcntl.LOCK_UN)
                fh.close()
        self._handles.clear()


class PortAllocator:
    """Hands out port blocks nobody else holds, checked free by binding each port once.

    Locks are ``flock`` files, so blocks stay exclusive between itbench processes and are
    freed by the kernel if a process dies.
    """

    def __init__(self, first: int = FIRST_PORT, last: int = LAST_PORT) -> None:
        self.first = first
        self.last = last
        self._mutex = threading.Lock()
        self._next = first

    def acquire(self, count: int) -> PortBlock:
        """Reserve ``count`` consecutive free ports (at least one unit).

        Raises:
            InfrastructureError: no free block.
        """
        units = max(1, -(-count // UNIT))
        size = units * UNIT
        with self._mutex:
            span = self.last - self.first - size
            for step in range(0, max(span, 0) + 1, UNIT):
                base = self.first + (self._next - self.first + step) % (span + UNIT)
                block = self._try(base, units, count)
                if block is not None:
                    self._next = base + size
                    return block
        raise InfrastructureError(f"no free block of {count} ports in {self.first}-{self.last}")

    def _try(self, base: int, units: int, count: int) -> PortBlock | None:
        handles: list[IO[bytes]] = []
        for u in range(units):
            fh = (_lock_dir() / f"{base + u * UNIT}.lock").open("ab")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.close()
                PortBlock(base, count, handles).release()
                return None
            handles.append(fh)
        block = PortBlock(base, count, handles)
        if not all(_bindable(p) for p in range(base, base + count)):
            block.release()
            return None
        return block
