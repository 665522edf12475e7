"""The organization's own parameters of a Linux host requirement, drawn per trial.

The listening-ports check allows the ports the organization approves: every trial draws them
from its secret-derived seed, the file under ``/etc`` that lists them on every host (its path
and format) and how the requirement words it. Hidden hosts listen on an approved port the
catalog's default would flag, on a port next to an approved one and on other unlisted ports,
so a policy written from the catalog's text alone fails.
"""

from __future__ import annotations

import dataclasses
import random
import re
from dataclasses import dataclass
from pathlib import Path

from itbench_ciso.checks import linux
from itbench_ciso.checks.linux_host import (
    ANY6,
    PROC_TCP,
    PROC_TCP6,
    Host,
    HostFile,
    Mutation,
    append,
    hex4,
    hex6,
    tcp_line,
)

#: The check with parameters.
CHECK = "linux-listening-ports"
#: Ports every host listens on (its SSH daemon and web server): always approved.
BASE = (22, 443)
#: Ports an organization may approve besides.
POOL = (3000, 5432, 6443, 8443, 9100, 9200)
#: Files that may list them.
PATHS = (
    "/etc/corp/approved-ports",
    "/etc/security/listen-allowlist.conf",
    "/etc/compliance/network-ports.list",
    "/etc/org/baseline/ports.conf",
)
#: How the file lists them.
FORMATS = {
    "lines": "one port per line, `#` starts a comment",
    "assignment": "a line `allowed_ports = ` followed by the ports separated by spaces",
    "csv": "the ports on one line, separated by commas",
}
#: The requirement in several phrasings.
PHRASINGS = (
    "Ensure only approved services are listening on a network interface (CIS 2.4): no TCP "
    "socket may listen on a non-loopback address except on a port the organization approves. "
    "Every host lists the approved ports in `{path}` ({shape}).",
    "Only approved ports may listen on a network interface: a TCP socket listening on an "
    "address other than loopback must use a port listed in the file `{path}` of the host "
    "({shape}).",
    "Listening services are restricted to the organization's approved ports, which each host "
    "keeps in `{path}` ({shape}); no TCP socket may listen on any other port on a "
    "non-loopback address.",
)
_PATH = re.compile(r"`(/etc/[^`]+)`")


@dataclass(frozen=True)
class HostParams:
    """One trial's approved ports.

    Attributes:
        ports: The approved ports (the base ones included).
        path: The file listing them on every host.
        shape: Its format (a key of :data:`FORMATS`).
        phrasing: Index into :data:`PHRASINGS`.
        decoy_path: Another of :data:`PATHS`, listing other ports.
        decoy_ports: The ports it lists (ports the organization does not approve among them).
        stale: Whether a package manager's copy of an older list (``.dpkg-old``) lies beside
            the file, listing the decoy's ports.
    """

    ports: tuple[int, ...]
    path: str
    shape: str
    phrasing: int
    decoy_path: str = ""
    decoy_ports: tuple[int, ...] = ()
    stale: bool = False

    def requirement(self) -> str:
        """The requirement as the trial states it."""
        return PHRASINGS[self.phrasing].format(path=self.path, shape=FORMATS[self.shape])

    def content(self, ports_: tuple[int, ...] | None = None, head: str = "") -> str:
        """The file listing the ports (or ``ports_``, under the comment ``head``)."""
        ports = [str(p) for p in (self.ports if ports_ is None else ports_)]
        head = head or "# Approved listening ports (network baseline), ticket NET-2041\n"
        if self.shape == "lines":
            return head + "".join(f"{p}\n" for p in ports)
        if self.shape == "assignment":
            return head + f"allowed_ports = {' '.join(ports)}\n"
        return head + ",".join(ports) + "\n"

    def install(self) -> Mutation:
        """The mutation giving a host the file."""

        def mutate(host: Host) -> None:
            host[self.path] = HostFile(self.content(), 0o644)
            if self.decoy_path:
                head = "# Listening ports of the lab hosts (not the baseline)\n"
                host[self.decoy_path] = HostFile(self.content(self.decoy_ports, head), 0o644)
            if self.stale:
                old = HostFile(self.content(self.decoy_ports), 0o644)
                host[f"{self.path}.dpkg-old"] = old

        return mutate

    def check(self) -> linux.LinuxCheck:
        """The check with these ports: ground truth, mutations and reference policy."""
        return derive(self.ports)


def draw(check_id: str, rng: random.Random) -> HostParams | None:
    """A trial's parameters of ``check_id`` (None for a check without any)."""
    if check_id != CHECK:
        return None
    extra = rng.sample(POOL, rng.choice((1, 2)))
    ports = list(BASE) + extra
    rng.shuffle(ports)
    path = rng.choice(PATHS)
    shape = rng.choice(sorted(FORMATS))
    phrasing = rng.randrange(len(PHRASINGS))
    # Another list on every host: every port of the pool the organization leaves out, and more.
    decoy = [*BASE, *(p for p in POOL if p not in extra), *rng.sample((23, 3306, 8080), 2)]
    rng.shuffle(decoy)
    decoy_path = rng.choice([p for p in PATHS if p != path])
    return HostParams(
        ports=tuple(ports),
        path=path,
        shape=shape,
        phrasing=phrasing,
        decoy_path=decoy_path,
        decoy_ports=tuple(decoy),
        stale=rng.random() < 0.5,
    )


def _listen(path: str, address: str, port: int) -> Mutation:
    if path == PROC_TCP:
        return append(path, tcp_line(3, hex4(address, port), hex4("0.0.0.0", 0), "0A"))
    return append(path, tcp_line(1, hex6(ANY6, port), hex6(ANY6, 0), "0A"))


def derive(ports: tuple[int, ...]) -> linux.LinuxCheck:
    """The listening-ports check approving ``ports``."""
    base = linux.by_id(CHECK)
    ok = set(ports)
    extra = [p for p in ports if p not in BASE]
    e0, e1 = extra[0], extra[-1]
    above = next(p for p in range(e0 + 1, 65536) if p not in ok)
    out = [p for p in POOL if p not in ok]

    def approved(host: Host) -> bool:
        return all(linux._loopback(a) or p in ok for a, p in linux.listening(host))

    bad = {
        f"{out[0]} on every address": _listen(PROC_TCP, "0.0.0.0", out[0]),
        f"{above}, next to an approved port, on every IPv6 address": _listen(PROC_TCP6, "", above),
        "MySQL on the host's address": _listen(PROC_TCP, "10.0.0.11", 3306),
        f"{out[-1]} on the host's address": _listen(PROC_TCP, "10.0.0.11", out[-1]),
        "telnet on every address": _listen(PROC_TCP, "0.0.0.0", 23),
    }
    near = {
        f"approved {e0} on every address": _listen(PROC_TCP, "0.0.0.0", e0),
        f"approved {e1} on every IPv6 address": _listen(PROC_TCP6, "", e1),
        f"approved {e0} on the host's address": _listen(PROC_TCP, "10.0.0.11", e0),
        "Redis on loopback": _listen(PROC_TCP, "127.0.0.1", 6379),
        f"{out[0]} on loopback": _listen(PROC_TCP, "127.0.0.1", out[0]),
    }
    allowed = ", ".join(str(p) for p in sorted(ok))
    rego = base.rego.replace("not port in {22, 443}", f"not port in {{{allowed}}}")
    if rego == base.rego:
        raise ValueError(f"{CHECK}: the reference policy no longer names its default ports")
    return dataclasses.replace(base, rego=rego, ok=approved, bad=bad, near=near)


class ParamsError(ValueError):
    """The approved ports cannot be read where the requirement says they are."""


def read(requirement: str, host_root: Path) -> tuple[int, ...] | None:
    """The ports the requirement's file lists on the host tree at ``host_root``.

    Returns:
        The ports, or None when the requirement names no file.

    Raises:
        ParamsError: the file is missing or lists no port (naming the file and why).
    """
    m = _PATH.search(requirement)
    if m is None:
        return None
    path = host_root / m.group(1).lstrip("/")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ParamsError(f"{path}: cannot be read ({exc.strerror})") from exc
    ports = [int(p) for line in text.splitlines() for p in re.findall(r"\d+", line.split("#")[0])]
    if not ports:
        raise ParamsError(f"{path}: lists no port")
    return tuple(ports)
