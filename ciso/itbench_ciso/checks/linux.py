"""Linux host checks (CIS Debian and RHEL style) on host trees.

Every check has a Python ground truth on the host (:mod:`.linux_host`), violating mutations,
near misses that comply, the evidence its reference playbook collects (file contents,
permissions, directory listings and the output of real commands run against the host tree),
and reference Rego over that evidence. The first violating mutation and the first near miss
are shown on the visible hosts only; hidden hosts use the others.
"""

from __future__ import annotations

import fnmatch
import random
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from itbench_ciso.checks.base import Check, Variant, rotated
from itbench_ciso.checks.linux_host import (
    ANY6,
    AUDIT,
    CRONTAB,
    DISABLED_MODULES,
    DPKG_STATUS,
    ETC_UNITS,
    FAILLOCK,
    GROUP,
    GSHADOW,
    LOGIN_DEFS,
    LOOP6,
    MODPROBE,
    PASSWD,
    PROC_MODULES,
    PROC_TCP,
    PROC_TCP6,
    PWQUALITY,
    SHADOW,
    SSHD,
    SSHD_D,
    SUDOERS,
    SYSCTL,
    SYSCTL_D,
    SYSCTL_KEYS,
    UNITS,
    WANTS,
    Host,
    HostFile,
    Mutation,
    append,
    both,
    clean_host,
    hex4,
    hex6,
    materialise,
    mode,
    package_entry,
    playbook_for,
    prepend,
    put,
    remove,
    replace,
    tcp_line,
    unit_file,
)

__all__ = ["CHECKS", "LinuxCheck", "by_id", "clean_host", "materialise", "playbook_for", "variants"]

Commands = tuple[tuple[str, tuple[str, ...]], ...]


# --- ground truths ---------------------------------------------------------------------------


def _content(host: Host, path: str) -> str:
    f = host.get(path)
    return f.content if f is not None and f.link is None else ""


def _words(line: str) -> list[str]:
    return [w for w in re.split(r"[\s=]+", line.strip()) if w]


def sshd_effective(host: Host) -> dict[str, str]:
    """Sshd's global settings as ``sshd -T`` would show those configured (lower-case keys).

    Include lines are expanded in place (matching files in lexical order), the first value
    of a keyword wins, and everything from the first Match line on is conditional.
    """

    def lines(path: str) -> list[str]:
        out = []
        for raw in _content(host, path).split("\n"):
            w = _words(raw)
            if w and w[0].lower() == "include" and len(w) > 1:
                for inc in sorted(p for p in host if fnmatch.fnmatchcase(p, w[1])):
                    out += lines(inc)
            else:
                out.append(raw)
        return out

    seen: dict[str, str] = {}
    for raw in lines(SSHD):
        w = _words(raw)
        if not w or w[0].startswith("#"):
            continue
        key = w[0].lower()
        if key == "match":
            break
        if len(w) > 1 and key not in seen:
            seen[key] = w[1].lower()
    return seen


_SSHD_DEFAULTS = {
    "permitrootlogin": "prohibit-password",
    "permitemptypasswords": "no",
    "x11forwarding": "no",
    "maxauthtries": "6",
    "loglevel": "info",
    "hostbasedauthentication": "no",
    "ignorerhosts": "yes",
}


def sshd_ok(host: Host) -> bool:
    """The SSH server settings the requirement names."""
    cfg = {**_SSHD_DEFAULTS, **sshd_effective(host)}
    try:
        tries = int(cfg["maxauthtries"])
    except ValueError:
        return False
    return (
        cfg["permitrootlogin"] == "no"
        and cfg["permitemptypasswords"] == "no"
        and cfg["x11forwarding"] == "no"
        and tries <= 4
        and cfg["loglevel"] in ("info", "verbose")
        and cfg["hostbasedauthentication"] == "no"
        and cfg["ignorerhosts"] == "yes"
    )


def kv_last(host: Host, path: str, key: str) -> str | None:
    """The last value of ``key`` (case-sensitive) in a ``key value`` / ``key = value`` file."""
    found = None
    for line in _content(host, path).split("\n"):
        t = line.strip()
        if not t or t.startswith("#"):
            continue
        w = _words(t)
        if w[0] == key and len(w) > 1:
            found = w[1]
    return found


def int_or(value: str | None, default: int) -> int | None:
    """A setting's integer value: ``default`` when unset, ``None`` when not an integer."""
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        return None


def aging_ok(host: Host) -> bool:
    """PASS_MAX_DAYS 1..365, PASS_MIN_DAYS >= 1, PASS_WARN_AGE >= 7 (shadow-utils defaults)."""
    mx = int_or(kv_last(host, LOGIN_DEFS, "PASS_MAX_DAYS"), 99999)
    mn = int_or(kv_last(host, LOGIN_DEFS, "PASS_MIN_DAYS"), 0)
    warn = int_or(kv_last(host, LOGIN_DEFS, "PASS_WARN_AGE"), 7)
    return mx is not None and 0 < mx <= 365 and (mn or 0) >= 1 and (warn or 0) >= 7


def umask_ok(host: Host) -> bool:
    """UMASK (default 022) blocks group write and all access by others."""
    v = kv_last(host, LOGIN_DEFS, "UMASK") or "022"
    try:
        return (int(v, 8) & 0o027) == 0o027
    except ValueError:
        return False


_SYSCTL_DIRS = (
    "/etc/sysctl.d/",
    "/run/sysctl.d/",
    "/usr/local/lib/sysctl.d/",
    "/usr/lib/sysctl.d/",
)


def sysctl_configured(host: Host) -> dict[str, str]:
    """What systemd-sysctl applies: drop-ins by file name (/etc masks /usr/lib), then sysctl.conf."""
    chosen: dict[str, str] = {}
    for d in reversed(_SYSCTL_DIRS):
        for p in host:
            if p.startswith(d) and p.endswith(".conf") and "/" not in p[len(d) :]:
                chosen[p[len(d) :]] = p
    out: dict[str, str] = {}
    for path in [*(chosen[b] for b in sorted(chosen)), SYSCTL]:
        for line in _content(host, path).split("\n"):
            t = line.strip()
            if not t or t[0] in "#;":
                continue
            w = _words(t)
            if len(w) > 1:
                out[w[0]] = w[1]
    return out


def kernel_params_ok(host: Host) -> bool:
    """Each parameter configured and running with the required value."""
    conf = sysctl_configured(host)
    for key, want in SYSCTL_KEYS.items():
        running = _content(host, "/proc/sys/" + key.replace(".", "/")).strip()
        if conf.get(key) != want or running != want:
            return False
    return True


MODES = {PASSWD: 0o644, GROUP: 0o644, SHADOW: 0o640, GSHADOW: 0o640, SSHD: 0o600, CRONTAB: 0o600}


def modes_ok(host: Host) -> bool:
    """Every listed file exists with no permission bit outside its limit."""
    return all(p in host and not host[p].mode & ~allowed & 0o777 for p, allowed in MODES.items())


def uid0_ok(host: Host) -> bool:
    """No account but root has UID 0."""
    for line in _content(host, PASSWD).split("\n"):
        f = line.split(":")
        if len(f) > 2 and f[2].isdigit() and int(f[2]) == 0 and f[0] != "root":
            return False
    return True


def no_empty_passwords(host: Host) -> bool:
    """No shadow entry with an empty password field."""
    return all(
        len(f) < 2 or f[1] != ""
        for f in (line.split(":") for line in _content(host, SHADOW).split("\n") if line)
    )


def pwquality_ok(host: Host) -> bool:
    """Minlen (default 8) at least 14."""
    v = int_or(kv_last(host, PWQUALITY, "minlen"), 8)
    return v is not None and v >= 14


def faillock_ok(host: Host) -> bool:
    """Deny (default 3) between 1 and 5; unlock_time (default 600) 0 or at least 900."""
    deny = int_or(kv_last(host, FAILLOCK, "deny"), 3)
    unlock = int_or(kv_last(host, FAILLOCK, "unlock_time"), 600)
    return (
        deny is not None
        and 1 <= deny <= 5
        and unlock is not None
        and (unlock == 0 or unlock >= 900)
    )


_IDENTITY = (GROUP, PASSWD, GSHADOW, SHADOW)


def audit_watched(host: Host, path: str) -> bool:
    """A rule of /etc/audit/rules.d/*.rules watches ``path`` for writes and attribute changes."""
    for name in host:
        if not (name.startswith("/etc/audit/rules.d/") and name.endswith(".rules")):
            continue
        for line in _content(host, name).split("\n"):
            p = line.split()
            if not p or p[0].startswith("#"):
                continue
            watch = len(p) >= 4 and p[0] == "-w" and p[1] == path and p[2] == "-p"
            if watch and "w" in p[3] and "a" in p[3]:
                return True
            if p[0] == "-a" and "-F" in p:
                fields = {p[i + 1] for i, t in enumerate(p[:-1]) if t == "-F"}
                perms = [f.split("=", 1)[1] for f in fields if f.startswith("perm=")]
                if f"path={path}" in fields and any("w" in x and "a" in x for x in perms):
                    return True
    return False


def audit_ok(host: Host) -> bool:
    """Every identity file is watched."""
    return all(audit_watched(host, p) for p in _IDENTITY)


def sudo_defaults(host: Host) -> list[str]:
    """The options of sudo's ``Defaults`` lines in the order sudo reads them.

    ``@includedir`` (and the old ``#includedir``) directories are read in place, their files
    in name order, skipping names with a dot or ending in ``~`` as sudo does; for an option
    set twice, the last one wins.
    """
    options: list[str] = []

    def read(path: str) -> None:
        for line in _content(host, path).split("\n"):
            t = line.strip()
            w = t.split()
            if w and w[0] in ("@includedir", "#includedir") and len(w) > 1:
                d = w[1].rstrip("/") + "/"
                for inc in sorted(p for p in host if p.startswith(d) and "/" not in p[len(d) :]):
                    name = inc[len(d) :]
                    if "." not in name and not name.endswith("~"):
                        read(inc)
                continue
            if w and w[0] == "Defaults":
                options.extend(o for o in re.split(r"[\s,]+", t[len("Defaults") :].strip()) if o)

    read(SUDOERS)
    return options


def sudo_use_pty(host: Host) -> bool:
    """Whether sudo's effective Defaults enable use_pty (includes read in place; last wins)."""
    state = False
    for opt in sudo_defaults(host):
        if opt == "use_pty":
            state = True
        elif opt == "!use_pty":
            state = False
    return state


FORBIDDEN_PACKAGES = (
    "xinetd",
    "openbsd-inetd",
    "telnetd",
    "inetutils-telnetd",
    "rsh-server",
    "nis",
    "tftpd-hpa",
    "talkd",
)


def installed_packages(host: Host) -> set[str]:
    """Packages of the dpkg database whose state is neither not-installed nor config-files.

    A package listed twice (same architecture) has the state of its last stanza, as dpkg
    reads the database.
    """
    last: dict[tuple[str, str], list[str]] = {}
    for stanza in _content(host, DPKG_STATUS).split("\n\n"):
        fields = dict(
            line.split(": ", 1)
            for line in stanza.split("\n")
            if ": " in line and not line.startswith(" ")
        )
        if "Package" in fields:
            key = (fields["Package"], fields.get("Architecture", ""))
            last[key] = fields.get("Status", "").split()
    return {
        name
        for (name, _), status in last.items()
        if len(status) == 3 and status[2] not in ("not-installed", "config-files")
    }


def packages_ok(host: Host) -> bool:
    """None of the legacy servers is installed."""
    return not installed_packages(host) & set(FORBIDDEN_PACKAGES)


MUST_BE_ENABLED = ("auditd.service",)
MUST_NOT_BE_ENABLED = (
    "avahi-daemon.service",
    "avahi-daemon.socket",
    "cups.service",
    "cups.socket",
    "rsync.service",
    "telnet.socket",
)


def unit_state(host: Host, unit: str) -> str:
    """``enabled``, ``masked``, ``disabled`` or ``not-found``, as systemctl --root reports."""
    own = host.get(f"{ETC_UNITS}/{unit}")
    if own is not None and own.link == "/dev/null":
        return "masked"
    if f"{UNITS}/{unit}" not in host and own is None:
        return "not-found"
    for p, f in host.items():
        m = re.fullmatch(rf"{ETC_UNITS}/[^/]+\.(wants|requires)/([^/]+)", p)
        if m and m.group(2) == unit and f.link is not None:
            return "enabled"
    return "disabled"


def services_ok(host: Host) -> bool:
    """Auditd enabled; none of the unneeded services enabled."""
    return all(unit_state(host, u) == "enabled" for u in MUST_BE_ENABLED) and not any(
        unit_state(host, u) == "enabled" for u in MUST_NOT_BE_ENABLED
    )


ALLOWED_PORTS = (22, 443)


def listening(host: Host) -> list[tuple[str, int]]:
    """(address in hex, port) of every TCP socket in state LISTEN."""
    out = []
    for path in (PROC_TCP, PROC_TCP6):
        for line in _content(host, path).split("\n")[1:]:
            p = line.split()
            if len(p) > 3 and p[3] == "0A":
                addr, port = p[1].split(":")
                out.append((addr, int(port, 16)))
    return out


def _loopback(addr: str) -> bool:
    if len(addr) == 8:
        return addr[6:8] == "7F"
    if addr == "00000000000000000000000001000000":
        return True
    return addr.startswith("0000000000000000FFFF0000") and addr[30:32] == "7F"


def ports_ok(host: Host) -> bool:
    """Nothing but the allowed ports listens on a non-loopback address."""
    return all(_loopback(a) or port in ALLOWED_PORTS for a, port in listening(host))


def _socket(path: str, local: str, remote: str, state: str) -> Mutation:
    """A socket added to /proc/net/tcp or tcp6 (addresses in the kernel's hex form)."""
    return append(path, tcp_line(3 if path == PROC_TCP else 1, local, remote, state))


def _module_name(name: str) -> str:
    return name.replace("-", "_")


def modules_ok(host: Host) -> bool:
    """Every listed module not loaded and made unloadable by an install line."""
    loaded = {line.split()[0] for line in _content(host, PROC_MODULES).split("\n") if line.strip()}
    installs: dict[str, str] = {}
    for p in sorted(host):
        if p.startswith("/etc/modprobe.d/") and p.endswith(".conf"):
            for line in _content(host, p).split("\n"):
                w = line.split()
                if len(w) >= 3 and w[0] == "install":
                    installs.setdefault(_module_name(w[1]), w[2])
    return all(
        _module_name(m) not in loaded
        and installs.get(_module_name(m)) in ("/bin/false", "/bin/true")
        for m in DISABLED_MODULES
    )


# --- the check -------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinuxCheck(Check):
    """A host check.

    Attributes:
        ok: Ground truth: whether a host complies.
        bad: Named mutations that make a clean host violate (the first: visible hosts only).
        near: Named mutations that comply but look close (the first: visible hosts only).
        files: Paths or globs whose contents the evidence needs.
        modes: Paths whose permission bits the evidence needs.
        commands: Commands (name, argv with ``{{ host_root }}``) whose output it needs.
    """

    family: ClassVar[str] = "linux"
    ok: Callable[[Host], bool] = field(default=lambda host: True)
    bad: dict[str, Mutation] = field(default_factory=dict)
    near: dict[str, Mutation] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()
    commands: Commands = ()

    def violates(self, host: Host) -> bool:
        """Whether ``host`` does not meet the requirement."""
        return not self.ok(host)

    def policy(self, package: str = "compliance") -> str:
        """The reference policy."""
        return f"package {package}\n\nimport rego.v1\n\n{HELPERS.strip()}\n\n{self.rego.strip()}\n"

    def playbook(self) -> str:
        """The reference evidence playbook."""
        return playbook_for(self.files, self.modes, (), self.commands)

    def evidence_of(self, host: Host) -> dict[str, Any]:
        """The evidence the reference playbook collects (its commands run on a copy of the tree)."""
        files = {
            path: f.content
            for path, f in host.items()
            if f.link is None and any(fnmatch.fnmatchcase(path, g) for g in self.files)
        }
        out: dict[str, Any] = {"files": files}
        if self.modes:
            out["modes"] = {p: f"{host[p].mode:04o}" for p in self.modes if p in host}
        if self.commands:
            root = Path(tempfile.mkdtemp(prefix="itbench-host-"))
            try:
                materialise(host, root)
                out["commands"] = {
                    name: subprocess.run(  # fixed argv of the library
                        [a.replace("{{ host_root }}", str(root)) for a in argv],
                        capture_output=True,
                        text=True,
                        check=False,
                    ).stdout.rstrip("\n")
                    for name, argv in self.commands
                }
            finally:
                shutil.rmtree(root, ignore_errors=True)
        return out


HELPERS = r"""
lines(path) := split(input.files[path], "\n")

words(line) := [w | some w in regex.split(`[\s=]+`, trim_space(line)); w != ""]

kv_last(path, key) := vals[count(vals) - 1] if {
	vals := [w[1] |
		some line in lines(path)
		w := words(line)
		count(w) > 1
		not startswith(w[0], "#")
		w[0] == key
	]
	count(vals) > 0
}

value_or(path, key, fallback) := v if v := kv_last(path, key)

value_or(path, key, fallback) := fallback if not kv_last(path, key)
"""


CHECKS: list[LinuxCheck] = [
    LinuxCheck(
        id="linux-sshd",
        title="Ensure the SSH server is configured securely",
        requirement=(
            "Ensure the SSH server is configured securely (CIS 5.2). The SSH daemon's effective "
            "global configuration must have PermitRootLogin no, PermitEmptyPasswords no, "
            "X11Forwarding no, MaxAuthTries 4 or less, LogLevel INFO or VERBOSE, "
            "HostbasedAuthentication no and IgnoreRhosts yes."
        ),
        rego=r"""defaults := {
	"permitrootlogin": "prohibit-password",
	"permitemptypasswords": "no",
	"x11forwarding": "no",
	"maxauthtries": "6",
	"loglevel": "info",
	"hostbasedauthentication": "no",
	"ignorerhosts": "yes",
}

include_of(line) := w[1] if {
	w := words(line)
	count(w) > 1
	lower(w[0]) == "include"
}

expand(line) := [l |
	some f in sort([p | some p, _ in input.files; glob.match(include_of(line), ["/"], p)])
	some l in lines(f)
] if include_of(line)

expand(line) := [line] if not include_of(line)

config := [w |
	some line in lines("/etc/ssh/sshd_config")
	some l in expand(line)
	w := words(l)
	count(w) > 0
	not startswith(w[0], "#")
]

matches := [i | some i, w in config; lower(w[0]) == "match"]

global := [w | some i, w in config; i < min(matches)] if count(matches) > 0

global := config if count(matches) == 0

effective(key) := lower(vals[0]) if {
	vals := [w[1] | some w in global; count(w) > 1; lower(w[0]) == key]
	count(vals) > 0
}

setting(key) := v if v := effective(key)

setting(key) := defaults[key] if not effective(key)

violations contains sprintf("%s is %s", [key, setting(key)]) if {
	some key, want in {
		"permitrootlogin": "no",
		"permitemptypasswords": "no",
		"x11forwarding": "no",
		"hostbasedauthentication": "no",
		"ignorerhosts": "yes",
	}
	setting(key) != want
}

violations contains "loglevel" if not setting("loglevel") in {"info", "verbose"}

violations contains "maxauthtries" if not to_number(setting("maxauthtries")) <= 4""",
        ok=sshd_ok,
        files=(SSHD, f"{SSHD_D}/*"),
        bad={
            "PermitRootLogin yes": replace(SSHD, "PermitRootLogin no", "PermitRootLogin yes"),
            "a drop-in permits root login first": put(
                f"{SSHD_D}/50-cloud-init.conf", HostFile("PermitRootLogin yes\n", 0o600)
            ),
            "MaxAuthTries left at its default": replace(SSHD, "MaxAuthTries 4\n", ""),
            "an earlier MaxAuthTries wins": prepend(SSHD, "maxauthtries 10\n"),
            "LogLevel=QUIET": replace(SSHD, "LogLevel INFO", "LogLevel=QUIET"),
            "a drop-in enables X11 forwarding": put(
                f"{SSHD_D}/60-x11.conf", HostFile("X11Forwarding yes\n", 0o600)
            ),
            "IgnoreRhosts no": replace(SSHD, "IgnoreRhosts yes", "IgnoreRhosts no"),
        },
        near={
            "lower-case keyword": replace(SSHD, "PermitRootLogin no", "permitrootlogin no"),
            "PermitEmptyPasswords left at its default": replace(
                SSHD, "PermitEmptyPasswords no\n", ""
            ),
            "a later PermitRootLogin is ignored": append(SSHD, "PermitRootLogin yes\n"),
            "commented-out setting": prepend(SSHD, "#PermitRootLogin yes\n"),
            "a drop-in that is not included": put(
                f"{SSHD_D}/README", HostFile("PermitRootLogin yes\n", 0o600)
            ),
            "X11 forwarding inside a Match block": append(
                SSHD, "Match User backup\n    X11Forwarding yes\n"
            ),
            "MaxAuthTries 3": replace(SSHD, "MaxAuthTries 4", "MaxAuthTries 3"),
        },
    ),
    LinuxCheck(
        id="linux-file-permissions",
        title="Ensure permissions on sensitive files are configured",
        requirement=(
            "Ensure permissions on sensitive files are configured (CIS 6.1, 5.1.2, 5.2.1). "
            "These files must exist with permissions no wider than: /etc/passwd 0644, "
            "/etc/group 0644, /etc/shadow 0640, /etc/gshadow 0640, /etc/ssh/sshd_config 0600, "
            "/etc/crontab 0600."
        ),
        rego="""limits := {
	"/etc/passwd": 420,
	"/etc/group": 420,
	"/etc/shadow": 416,
	"/etc/gshadow": 416,
	"/etc/ssh/sshd_config": 384,
	"/etc/crontab": 384,
}

bits_of(m) := ((to_number(substring(m, count(m) - 3, 1)) * 64) + (to_number(substring(m, count(m) - 2, 1)) * 8)) + to_number(substring(m, count(m) - 1, 1))

violations contains path if {
	some path, _ in limits
	not input.modes[path]
}

violations contains path if {
	some path, allowed in limits
	bits.and(bits_of(input.modes[path]), bits.negate(allowed)) != 0
}""",
        ok=modes_ok,
        modes=tuple(MODES),
        bad={
            "/etc/shadow 0644": mode(SHADOW, 0o644),
            "/etc/passwd 0664": mode(PASSWD, 0o664),
            "/etc/crontab 0644": mode(CRONTAB, 0o644),
            "sshd_config 0640": mode(SSHD, 0o640),
            "/etc/gshadow 0660": mode(GSHADOW, 0o660),
            "/etc/group 0666": mode(GROUP, 0o666),
        },
        near={
            "/etc/shadow 0600": mode(SHADOW, 0o600),
            "/etc/passwd 0444": mode(PASSWD, 0o444),
            "/etc/crontab 0400": mode(CRONTAB, 0o400),
            "/etc/shadow 0000": mode(SHADOW, 0o000),
            "sshd_config 0400": mode(SSHD, 0o400),
            "/etc/gshadow 0600": mode(GSHADOW, 0o600),
        },
    ),
    LinuxCheck(
        id="linux-password-aging",
        title="Ensure password expiration is configured",
        requirement=(
            "Ensure password expiration, minimum age and expiration warning are configured "
            "(CIS 5.5.1). In /etc/login.defs PASS_MAX_DAYS must be between 1 and 365 (0 or "
            "less turns expiry off), PASS_MIN_DAYS 1 or more and PASS_WARN_AGE 7 or more. The "
            "last line that sets a key counts; a key no line sets has its default "
            "(PASS_MAX_DAYS 99999, PASS_MIN_DAYS 0, PASS_WARN_AGE 7)."
        ),
        rego="""num(key, fallback) := to_number(value_or("/etc/login.defs", key, fallback))

violations contains "PASS_MAX_DAYS" if not num("PASS_MAX_DAYS", "99999") <= 365

violations contains "PASS_MAX_DAYS" if num("PASS_MAX_DAYS", "99999") <= 0

violations contains "PASS_MIN_DAYS" if num("PASS_MIN_DAYS", "0") < 1

violations contains "PASS_WARN_AGE" if num("PASS_WARN_AGE", "7") < 7""",
        ok=aging_ok,
        files=(LOGIN_DEFS,),
        bad={
            "PASS_MAX_DAYS 99999": replace(LOGIN_DEFS, "PASS_MAX_DAYS\t90", "PASS_MAX_DAYS\t99999"),
            "PASS_MIN_DAYS 0": replace(LOGIN_DEFS, "PASS_MIN_DAYS\t1", "PASS_MIN_DAYS\t0"),
            "PASS_WARN_AGE 3": replace(LOGIN_DEFS, "PASS_WARN_AGE\t7", "PASS_WARN_AGE\t3"),
            "a later PASS_MAX_DAYS overrides": append(LOGIN_DEFS, "PASS_MAX_DAYS 400\n"),
            "PASS_MIN_DAYS commented out": replace(
                LOGIN_DEFS, "PASS_MIN_DAYS\t1", "#PASS_MIN_DAYS\t1"
            ),
            "PASS_MAX_DAYS -1": replace(LOGIN_DEFS, "PASS_MAX_DAYS\t90", "PASS_MAX_DAYS\t-1"),
        },
        near={
            "PASS_MAX_DAYS 365": replace(LOGIN_DEFS, "PASS_MAX_DAYS\t90", "PASS_MAX_DAYS 365"),
            "an earlier bad line is overridden": prepend(LOGIN_DEFS, "PASS_MAX_DAYS 99999\n"),
            "PASS_WARN_AGE left at its default": replace(LOGIN_DEFS, "PASS_WARN_AGE\t7\n", ""),
            "PASS_MIN_DAYS 7": replace(LOGIN_DEFS, "PASS_MIN_DAYS\t1", "PASS_MIN_DAYS\t7"),
            "a lower-case key is not a setting": append(LOGIN_DEFS, "pass_max_days 99999\n"),
        },
    ),
    LinuxCheck(
        id="linux-umask",
        title="Ensure default user umask is configured",
        requirement=(
            "Ensure the default user umask is 027 or more restrictive (CIS 5.5.5): the UMASK "
            "login.defs applies must deny write to the group and all access to others."
        ),
        rego="""violations contains "UMASK" if {
	u := value_or("/etc/login.defs", "UMASK", "022")
	digits := substring(concat("", ["000", u]), count(u), 3)
	g := to_number(substring(digits, 1, 1))
	o := to_number(substring(digits, 2, 1))
	not umask_ok(g, o)
}

umask_ok(g, o) if {
	bits.and(g, 2) == 2
	o == 7
}""",
        ok=umask_ok,
        files=(LOGIN_DEFS,),
        bad={
            "UMASK 022": replace(LOGIN_DEFS, "UMASK\t\t027", "UMASK\t\t022"),
            "UMASK 007": replace(LOGIN_DEFS, "UMASK\t\t027", "UMASK 007"),
            "UMASK unset": replace(LOGIN_DEFS, "UMASK\t\t027\n", ""),
            "a later UMASK 002": append(LOGIN_DEFS, "UMASK 002\n"),
            "UMASK 026": replace(LOGIN_DEFS, "UMASK\t\t027", "UMASK\t026"),
        },
        near={
            "UMASK 077": replace(LOGIN_DEFS, "UMASK\t\t027", "UMASK\t077"),
            "UMASK 0027": replace(LOGIN_DEFS, "UMASK\t\t027", "UMASK 0027"),
            "an earlier UMASK 022 is overridden": prepend(LOGIN_DEFS, "UMASK 022\n"),
            "a lower-case key is not a setting": append(LOGIN_DEFS, "umask 022\n"),
            "UMASK 037": replace(LOGIN_DEFS, "UMASK\t\t027", "UMASK 037"),
        },
    ),
    LinuxCheck(
        id="linux-kernel-parameters",
        title="Ensure network and memory kernel parameters are set",
        requirement=(
            "Ensure kernel parameters are set (CIS 3.2, 3.3, 1.5.3): net.ipv4.ip_forward = 0, "
            "net.ipv4.conf.all.accept_redirects = 0, net.ipv4.conf.all.send_redirects = 0 and "
            "kernel.randomize_va_space = 2, both in the running kernel and in the configuration "
            "applied at boot (sysctl.d and /etc/sysctl.conf)."
        ),
        rego=r"""required := {
	"net.ipv4.ip_forward": "0",
	"net.ipv4.conf.all.accept_redirects": "0",
	"net.ipv4.conf.all.send_redirects": "0",
	"kernel.randomize_va_space": "2",
}

dirs := ["/etc/sysctl.d/", "/run/sysctl.d/", "/usr/local/lib/sysctl.d/", "/usr/lib/sysctl.d/"]

dropins := {[d, name] |
	some p, _ in input.files
	some d in dirs
	startswith(p, d)
	endswith(p, ".conf")
	name := substring(p, count(d), -1)
	not contains(name, "/")
}

chosen(name) := concat("", [ds[0], name]) if ds := [d | some d in dirs; [d, name] in dropins]

ordered := array.concat(
	[chosen(name) | some name in sort({pair[1] | some pair in dropins})],
	["/etc/sysctl.conf"],
)

assignments := [w |
	some f in ordered
	some line in lines(f)
	t := trim_space(line)
	t != ""
	not startswith(t, "#")
	not startswith(t, ";")
	w := words(t)
	count(w) > 1
]

configured(key) := vals[count(vals) - 1] if {
	vals := [w[1] | some w in assignments; w[0] == key]
	count(vals) > 0
}

running(key) := trim_space(input.files[concat("/", ["/proc/sys", replace(key, ".", "/")])])

violations contains sprintf("%s configured", [key]) if {
	some key, want in required
	not configured(key) == want
}

violations contains sprintf("%s running", [key]) if {
	some key, want in required
	not running(key) == want
}""",
        ok=kernel_params_ok,
        files=(
            "/etc/sysctl.d/*",
            "/run/sysctl.d/*",
            "/usr/local/lib/sysctl.d/*",
            "/usr/lib/sysctl.d/*",
            SYSCTL,
            "/proc/sys/net/ipv4/ip_forward",
            "/proc/sys/net/ipv4/conf/all/*",
            "/proc/sys/kernel/randomize_va_space",
        ),
        bad={
            "ip_forward running as 1": put("/proc/sys/net/ipv4/ip_forward", HostFile("1\n")),
            "accept_redirects configured 1": replace(
                SYSCTL_D,
                "net.ipv4.conf.all.accept_redirects = 0",
                "net.ipv4.conf.all.accept_redirects = 1",
            ),
            "/etc/sysctl.conf overrides send_redirects": append(
                SYSCTL, "net.ipv4.conf.all.send_redirects=1\n"
            ),
            "a later drop-in lowers ASLR": put(
                "/etc/sysctl.d/99-zz-local.conf", HostFile("kernel.randomize_va_space = 1\n")
            ),
            "ip_forward not configured": replace(SYSCTL_D, "net.ipv4.ip_forward = 0\n", ""),
            "ASLR running as 0": put("/proc/sys/kernel/randomize_va_space", HostFile("0\n")),
        },
        near={
            "an earlier drop-in is overridden": put(
                "/etc/sysctl.d/10-router.conf", HostFile("net.ipv4.ip_forward = 1\n")
            ),
            "no spaces": replace(SYSCTL_D, "net.ipv4.ip_forward = 0", "net.ipv4.ip_forward=0"),
            "a ; comment": append(SYSCTL, "; net.ipv4.ip_forward = 1\n"),
            "a file that is not .conf": put(
                "/etc/sysctl.d/README", HostFile("net.ipv4.ip_forward = 1\n")
            ),
            "a vendor file masked by /etc": put(
                "/usr/lib/sysctl.d/99-hardening.conf", HostFile("net.ipv4.ip_forward = 1\n")
            ),
            "a vendor file read earlier": put(
                "/usr/lib/sysctl.d/30-net.conf", HostFile("net.ipv4.conf.all.send_redirects = 1\n")
            ),
        },
    ),
    LinuxCheck(
        id="linux-uid0-only-root",
        title="Ensure root is the only UID 0 account",
        requirement="Ensure root is the only UID 0 account (CIS 6.2.9) in /etc/passwd.",
        rego="""violations contains fields[0] if {
	some line in lines("/etc/passwd")
	fields := split(line, ":")
	count(fields) > 2
	regex.match(`^0+$`, fields[2])
	fields[0] != "root"
}""",
        ok=uid0_ok,
        files=(PASSWD,),
        bad={
            "toor with UID 0": append(PASSWD, "toor:x:0:0:backup root:/root:/bin/bash\n"),
            "deploy with UID 0": replace(PASSWD, "deploy:x:1000:1000", "deploy:x:0:1000"),
            "an account above root": prepend(PASSWD, "admin:x:0:0::/root:/bin/bash\n"),
            "UID written 00": append(PASSWD, "ops:x:00:1002::/home/ops:/bin/bash\n"),
        },
        near={
            "GID 0 only": append(PASSWD, "operator:x:11:0:operator:/root:/usr/sbin/nologin\n"),
            "UID 10": append(PASSWD, "uucp:x:10:10:uucp:/var/spool/uucp:/usr/sbin/nologin\n"),
            "root2 with UID 1002": append(PASSWD, "root2:x:1002:1002::/home/root2:/bin/bash\n"),
            "rootless with GID 0": append(PASSWD, "rootless:x:1003:0::/home/rootless:/bin/bash\n"),
            "UID 100": append(PASSWD, "svc:x:100:100::/var/lib/svc:/usr/sbin/nologin\n"),
        },
    ),
    LinuxCheck(
        id="linux-empty-passwords",
        title="Ensure password fields are not empty",
        requirement="Ensure /etc/shadow password fields are not empty (CIS 6.2.1).",
        rego="""violations contains fields[0] if {
	some line in lines("/etc/shadow")
	fields := split(line, ":")
	count(fields) > 1
	fields[1] == ""
}""",
        ok=no_empty_passwords,
        files=(SHADOW,),
        bad={
            "alice without a password": replace(
                SHADOW, "alice:$6$rounds=5000$Pp8w$Zk1mQ7eR", "alice:"
            ),
            "a guest without a password": append(SHADOW, "guest::19960:0:99999:7:::\n"),
            "root without a password": replace(SHADOW, "root:!locked:", "root::"),
            "a short entry": append(SHADOW, "svc::\n"),
        },
        near={
            "locked with !": append(SHADOW, "guest:!:19960:0:99999:7:::\n"),
            "locked with *": append(SHADOW, "svc:*:19960:0:99999:7:::\n"),
            "locked with !!": append(SHADOW, "batch:!!:19960::::::\n"),
            "a locked hash": replace(SHADOW, "alice:$6$", "alice:!$6$"),
            "password aging fields empty": append(SHADOW, "backup:*:::::::\n"),
        },
    ),
    LinuxCheck(
        id="linux-pwquality",
        title="Ensure password creation requirements are configured",
        requirement=(
            "Ensure password creation requirements are configured (CIS 5.4.1): pam_pwquality's "
            "minimum length (minlen in /etc/security/pwquality.conf) must be 14 or more."
        ),
        rego="""violations contains "minlen" if {
	not to_number(value_or("/etc/security/pwquality.conf", "minlen", "8")) >= 14
}""",
        ok=pwquality_ok,
        files=(PWQUALITY,),
        bad={
            "minlen 8": replace(PWQUALITY, "minlen = 14", "minlen = 8"),
            "minlen commented out": replace(PWQUALITY, "minlen = 14", "# minlen = 14"),
            "a later minlen=12": append(PWQUALITY, "minlen=12\n"),
            "minlen 13": replace(PWQUALITY, "minlen = 14", "minlen = 13"),
        },
        near={
            "minlen 15": replace(PWQUALITY, "minlen = 14", "minlen = 15"),
            "an earlier bad line is overridden": prepend(PWQUALITY, "minlen = 8\n"),
            "a commented bad value": append(PWQUALITY, "# minlen = 8\n"),
            "minlen=20": replace(PWQUALITY, "minlen = 14", "minlen=20"),
            "minclass lowered": replace(PWQUALITY, "minclass = 4", "minclass = 3"),
        },
    ),
    LinuxCheck(
        id="linux-faillock",
        title="Ensure lockout for failed password attempts is configured",
        requirement=(
            "Ensure lockout for failed password attempts is configured (CIS 5.4.2): "
            "pam_faillock (/etc/security/faillock.conf) must lock an account after 5 or fewer "
            "failed attempts and keep it locked for at least 900 seconds or until an "
            "administrator unlocks it."
        ),
        rego="""conf := "/etc/security/faillock.conf"

violations contains "deny" if {
	deny := to_number(value_or(conf, "deny", "3"))
	not deny_ok(deny)
}

deny_ok(deny) if {
	deny >= 1
	deny <= 5
}

violations contains "unlock_time" if {
	unlock := to_number(value_or(conf, "unlock_time", "600"))
	unlock != 0
	unlock < 900
}""",
        ok=faillock_ok,
        files=(FAILLOCK,),
        bad={
            "deny 10": replace(FAILLOCK, "deny = 5", "deny = 10"),
            "deny 0 never locks": replace(FAILLOCK, "deny = 5", "deny = 0"),
            "unlock_time 60": replace(FAILLOCK, "unlock_time = 900", "unlock_time = 60"),
            "unlock_time left at its default": replace(FAILLOCK, "unlock_time = 900\n", ""),
            "a later deny 8": append(FAILLOCK, "deny = 8\n"),
        },
        near={
            "deny 3": replace(FAILLOCK, "deny = 5", "deny = 3"),
            "deny left at its default": replace(FAILLOCK, "deny = 5\n", ""),
            "unlock_time 0": replace(FAILLOCK, "unlock_time = 900", "unlock_time = 0"),
            "unlock_time 1800": replace(FAILLOCK, "unlock_time = 900", "unlock_time = 1800"),
            "a commented bad value": append(FAILLOCK, "# deny = 10\n"),
        },
    ),
    LinuxCheck(
        id="linux-audit-identity",
        title="Ensure events that modify user/group information are collected",
        requirement=(
            "Ensure events that modify user and group information are collected (CIS "
            "4.1.3.8): the audit rules (/etc/audit/rules.d/*.rules) must watch /etc/group, "
            "/etc/passwd, /etc/gshadow and /etc/shadow for writes and attribute changes."
        ),
        rego=r"""identity := ["/etc/group", "/etc/passwd", "/etc/gshadow", "/etc/shadow"]

rules := [p |
	some f, text in input.files
	startswith(f, "/etc/audit/rules.d/")
	endswith(f, ".rules")
	some line in split(text, "\n")
	p := [w | some w in regex.split(`\s+`, trim_space(line)); w != ""]
	count(p) > 0
	not startswith(p[0], "#")
]

watched(path) if {
	some p in rules
	count(p) >= 4
	p[0] == "-w"
	p[1] == path
	p[2] == "-p"
	contains(p[3], "w")
	contains(p[3], "a")
}

watched(path) if {
	some p in rules
	p[0] == "-a"
	fields := {p[i + 1] | some i, t in p; t == "-F"; i + 1 < count(p)}
	concat("=", ["path", path]) in fields
	some f in fields
	startswith(f, "perm=")
	contains(f, "w")
	contains(substring(f, 5, -1), "a")
}

violations contains path if {
	some path in identity
	not watched(path)
}""",
        ok=audit_ok,
        files=("/etc/audit/rules.d/*",),
        bad={
            "shadow watch removed": replace(AUDIT, "-w /etc/shadow -p wa -k identity\n", ""),
            "passwd watched for reads only": replace(
                AUDIT, "-w /etc/passwd -p wa", "-w /etc/passwd -p r"
            ),
            "passwd watch commented out": replace(
                AUDIT, "-w /etc/passwd -p wa", "#-w /etc/passwd -p wa"
            ),
            "rules only in a .bak file": both(
                remove(AUDIT), put(AUDIT + ".bak", HostFile("-w /etc/passwd -p wa -k identity\n"))
            ),
            "group watch removed": replace(AUDIT, "-w /etc/group -p wa -k identity\n", ""),
            "gshadow watched for writes only": replace(
                AUDIT, "-w /etc/gshadow -p wa", "-w /etc/gshadow -p w"
            ),
        },
        near={
            "perms rwxa": replace(AUDIT, "-w /etc/shadow -p wa", "-w /etc/shadow -p rwxa"),
            "split over two files": both(
                replace(AUDIT, "-w /etc/shadow -p wa -k identity\n", ""),
                put("/etc/audit/rules.d/60-shadow.rules", HostFile("-w /etc/shadow -p aw -k id\n")),
            ),
            "a syscall rule with a path filter": both(
                replace(AUDIT, "-w /etc/gshadow -p wa -k identity\n", ""),
                append(
                    AUDIT,
                    "-a always,exit -F arch=b64 -F path=/etc/gshadow -F perm=wa -k identity\n",
                ),
            ),
            "perms aw": replace(AUDIT, "-w /etc/passwd -p wa", "-w /etc/passwd -p aw"),
            "an extra read watch": append(AUDIT, "-w /etc/shadow- -p r -k backup\n"),
        },
    ),
    LinuxCheck(
        id="linux-sudo-use-pty",
        title="Ensure sudo commands use pty",
        requirement=(
            "Ensure sudo commands use pty (CIS 5.3.2): sudo's effective Defaults, from "
            "/etc/sudoers and the files it includes, must set use_pty."
        ),
        rego=r"""included(dir) := [f |
	some f in sort([p | some p, _ in input.files; startswith(p, concat("", [dir, "/"]))])
	name := substring(f, count(dir) + 1, -1)
	not contains(name, "/")
	not contains(name, ".")
	not endswith(name, "~")
]

includedir(line) := trim_suffix(w[1], "/") if {
	w := regex.split(`\s+`, trim_space(line))
	count(w) > 1
	w[0] in {"@includedir", "#includedir"}
}

expand(line) := [l | some f in included(includedir(line)); some l in lines(f)] if includedir(line)

expand(line) := [line] if not includedir(line)

settings := [opt |
	some line in lines("/etc/sudoers")
	some l in expand(line)
	t := trim_space(l)
	parts := regex.split(`\s+`, t)
	parts[0] == "Defaults"
	some opt in regex.split(`[\s,]+`, trim_space(substring(t, 8, -1)))
	opt in {"use_pty", "!use_pty"}
]

violations contains "use_pty is not in effect" if count(settings) == 0

violations contains "use_pty is not in effect" if settings[count(settings) - 1] == "!use_pty"
""",
        ok=sudo_use_pty,
        files=(SUDOERS, "/etc/sudoers.d/*"),
        bad={
            "removed": replace(SUDOERS, "Defaults\tuse_pty\n", ""),
            "commented out": replace(SUDOERS, "Defaults\tuse_pty", "#Defaults\tuse_pty"),
            "negated later": put(
                "/etc/sudoers.d/zz-legacy", HostFile("Defaults !use_pty\n", 0o440)
            ),
            "only in a file sudo skips": both(
                replace(SUDOERS, "Defaults\tuse_pty\n", ""),
                put("/etc/sudoers.d/pty.conf", HostFile("Defaults use_pty\n", 0o440)),
            ),
            "only in sudoers.d, which is no longer included": both(
                replace(SUDOERS, "Defaults\tuse_pty\n", ""),
                replace(SUDOERS, "@includedir /etc/sudoers.d\n", ""),
                put("/etc/sudoers.d/10-pty", HostFile("Defaults use_pty\n", 0o440)),
            ),
        },
        near={
            "in sudoers.d": both(
                replace(SUDOERS, "Defaults\tuse_pty\n", ""),
                put("/etc/sudoers.d/10-pty", HostFile("Defaults use_pty\n", 0o440)),
            ),
            "in a list": replace(SUDOERS, "Defaults\tuse_pty", "Defaults\tuse_pty,log_input"),
            "legacy #includedir": both(
                replace(SUDOERS, "Defaults\tuse_pty\n", ""),
                replace(SUDOERS, "@includedir", "#includedir"),
                put("/etc/sudoers.d/10-pty", HostFile("Defaults use_pty\n", 0o440)),
            ),
            "negated, then set again": both(
                replace(SUDOERS, "Defaults\tuse_pty", "Defaults\t!use_pty"),
                put("/etc/sudoers.d/50-pty", HostFile("Defaults\tuse_pty\n", 0o440)),
            ),
            "a skipped file negates it": put(
                "/etc/sudoers.d/old.conf", HostFile("Defaults !use_pty\n", 0o440)
            ),
        },
    ),
    LinuxCheck(
        id="linux-packages",
        title="Ensure legacy network servers are not installed",
        requirement=(
            "Ensure legacy network servers are not installed (CIS 2.2): none of the packages "
            + ", ".join(FORBIDDEN_PACKAGES)
            + " may be installed."
        ),
        rego=r"""forbidden := {"xinetd", "openbsd-inetd", "telnetd", "inetutils-telnetd", "rsh-server", "nis", "tftpd-hpa", "talkd"}

violations contains name if {
	some line in split(input.commands.packages, "\n")
	parts := split(line, "\t")
	count(parts) == 2
	name := parts[0]
	name in forbidden
	status := split(parts[1], " ")
	count(status) == 3
	not status[2] in {"not-installed", "config-files"}
}""",
        ok=packages_ok,
        commands=(
            (
                "packages",
                (
                    "dpkg-query",
                    "--admindir={{ host_root }}/var/lib/dpkg",
                    "-W",
                    "-f=${Package}\\t${Status}\\n",
                ),
            ),
        ),
        bad={
            "telnetd installed": append(
                DPKG_STATUS, package_entry("telnetd", "install ok installed", "0.17-44")
            ),
            "rsh-server on hold": append(
                DPKG_STATUS, package_entry("rsh-server", "hold ok installed", "0.17-24")
            ),
            "nis unpacked": append(DPKG_STATUS, package_entry("nis", "install ok unpacked", "4.4")),
            "tftpd-hpa half-configured": append(
                DPKG_STATUS, package_entry("tftpd-hpa", "install ok half-configured", "5.2")
            ),
            "inetutils-telnetd installed": append(
                DPKG_STATUS, package_entry("inetutils-telnetd", "install ok installed", "2:2.4-2")
            ),
            "xinetd half-installed": append(
                DPKG_STATUS, package_entry("xinetd", "install reinstreq half-installed", "1:2.3.15")
            ),
        },
        near={
            "rsh-server removed, configuration kept": append(
                DPKG_STATUS, package_entry("rsh-server", "deinstall ok config-files", "0.17-24")
            ),
            "rsh-client installed": append(
                DPKG_STATUS, package_entry("rsh-client", "install ok installed", "0.17-24")
            ),
            "nis purged": append(
                DPKG_STATUS, package_entry("nis", "purge ok not-installed", "4.4")
            ),
            "tftp client installed": append(
                DPKG_STATUS, package_entry("tftp-hpa", "install ok installed", "5.2")
            ),
            "inetutils-telnet client installed": append(
                DPKG_STATUS, package_entry("inetutils-telnet", "install ok installed", "2:2.4-2")
            ),
        },
    ),
    LinuxCheck(
        id="linux-services",
        title="Ensure unneeded services are not enabled and auditing is",
        requirement=(
            "Ensure unneeded services are not in use and auditing is enabled (CIS 2.1, 4.1.1): "
            "the systemd units "
            + ", ".join(MUST_NOT_BE_ENABLED)
            + " must not be enabled, and auditd.service must be enabled."
        ),
        rego=r"""states := {parts[0]: parts[1] |
	some line in split(input.commands.units, "\n")
	parts := [w | some w in regex.split(`\s+`, trim_space(line)); w != ""]
	count(parts) >= 2
}

unneeded := {"avahi-daemon.service", "avahi-daemon.socket", "cups.service", "cups.socket", "rsync.service", "telnet.socket"}

violations contains unit if {
	some unit in unneeded
	states[unit] == "enabled"
}

violations contains "auditd.service" if not states["auditd.service"] == "enabled"
""",
        ok=services_ok,
        commands=(
            (
                "units",
                (
                    "systemctl",
                    "--root={{ host_root }}",
                    "list-unit-files",
                    "--no-legend",
                    "--no-pager",
                ),
            ),
        ),
        bad={
            "cups enabled": put(f"{WANTS}/cups.service", HostFile(link=f"{UNITS}/cups.service")),
            "avahi socket enabled": put(
                f"{ETC_UNITS}/sockets.target.wants/avahi-daemon.socket",
                HostFile(link=f"{UNITS}/avahi-daemon.socket"),
            ),
            "auditd disabled": remove(f"{WANTS}/auditd.service"),
            "auditd masked": put(f"{ETC_UNITS}/auditd.service", HostFile(link="/dev/null")),
            "rsync enabled for the graphical target": put(
                f"{ETC_UNITS}/graphical.target.wants/rsync.service",
                HostFile(link=f"{UNITS}/rsync.service"),
            ),
            "telnet socket installed and enabled": both(
                put(f"{UNITS}/telnet.socket", unit_file("telnet.socket", "sockets.target")),
                put(
                    f"{ETC_UNITS}/sockets.target.wants/telnet.socket",
                    HostFile(link=f"{UNITS}/telnet.socket"),
                ),
            ),
        },
        near={
            "cups masked": put(f"{ETC_UNITS}/cups.service", HostFile(link="/dev/null")),
            "cups-browsed enabled": both(
                put(f"{UNITS}/cups-browsed.service", unit_file("cups-browsed.service")),
                put(
                    f"{WANTS}/cups-browsed.service", HostFile(link=f"{UNITS}/cups-browsed.service")
                ),
            ),
            "auditd enabled for another target": both(
                remove(f"{WANTS}/auditd.service"),
                put(
                    f"{ETC_UNITS}/basic.target.wants/auditd.service",
                    HostFile(link=f"{UNITS}/auditd.service"),
                ),
            ),
            "rsync not installed": remove(f"{UNITS}/rsync.service"),
            "an avahi drop-in": put(
                f"{ETC_UNITS}/avahi-daemon.service.d/override.conf", HostFile("[Service]\nNice=5\n")
            ),
        },
    ),
    LinuxCheck(
        id="linux-listening-ports",
        title="Ensure only approved services are listening on the network",
        requirement=(
            "Ensure only approved services are listening on a network interface (CIS 2.4): no "
            "TCP socket may listen on a non-loopback address except on ports 22 and 443."
        ),
        rego=r"""digit(h, i) := indexof("0123456789ABCDEF", upper(substring(h, i, 1)))

hexval(h) := (((digit(h, 0) * 4096) + (digit(h, 1) * 256)) + (digit(h, 2) * 16)) + digit(h, 3)

loopback(addr) if {
	count(addr) == 8
	substring(addr, 6, 2) == "7F"
}

loopback(addr) if addr == "00000000000000000000000001000000"

loopback(addr) if {
	startswith(addr, "0000000000000000FFFF0000")
	substring(addr, 30, 2) == "7F"
}

violations contains sprintf("%s:%d", [addr, port]) if {
	some path in ["/proc/net/tcp", "/proc/net/tcp6"]
	some i, line in regex.split(`\r?\n`, input.files[path])
	i > 0
	parts := [w | some w in regex.split(`\s+`, trim_space(line)); w != ""]
	count(parts) > 3
	parts[3] == "0A"
	local := split(parts[1], ":")
	addr := local[0]
	port := hexval(local[1])
	not loopback(addr)
	not port in {22, 443}
}""",
        ok=ports_ok,
        files=(PROC_TCP, PROC_TCP6),
        bad={
            "telnet on every address": _socket(
                PROC_TCP, hex4("0.0.0.0", 23), hex4("0.0.0.0", 0), "0A"
            ),
            "8080 on every IPv6 address": _socket(PROC_TCP6, hex6(ANY6, 8080), hex6(ANY6, 0), "0A"),
            "MySQL on the host's address": _socket(
                PROC_TCP, hex4("10.0.0.11", 3306), hex4("0.0.0.0", 0), "0A"
            ),
            "Redis on a v4-mapped address": _socket(
                PROC_TCP6, hex6((0, 0, 0xFFFF, 0x0A00000B), 6379), hex6(ANY6, 0), "0A"
            ),
            "SSH on a second port": _socket(
                PROC_TCP, hex4("0.0.0.0", 2222), hex4("0.0.0.0", 0), "0A"
            ),
        },
        near={
            "Redis on loopback": _socket(
                PROC_TCP, hex4("127.0.0.1", 6379), hex4("0.0.0.0", 0), "0A"
            ),
            "metrics on IPv6 loopback": _socket(PROC_TCP6, hex6(LOOP6, 9090), hex6(ANY6, 0), "0A"),
            "an outgoing telnet connection": _socket(
                PROC_TCP, hex4("10.0.0.11", 40312), hex4("10.0.0.50", 23), "01"
            ),
            "a closed socket in TIME_WAIT": _socket(
                PROC_TCP, hex4("0.0.0.0", 8080), hex4("10.0.0.7", 51000), "06"
            ),
            "the stub resolver on 127.0.0.53": _socket(
                PROC_TCP, hex4("127.0.0.53", 53), hex4("0.0.0.0", 0), "0A"
            ),
        },
    ),
    LinuxCheck(
        id="linux-kernel-modules",
        title="Ensure unneeded filesystem and storage kernel modules are disabled",
        requirement=(
            "Ensure mounting of unneeded filesystems and USB storage is disabled (CIS 1.1.1, "
            "1.1.10): the kernel modules "
            + ", ".join(DISABLED_MODULES)
            + " must not be loaded, and modprobe must be configured (in /etc/modprobe.d/*.conf) "
            "not to load them: an install line running /bin/false or /bin/true."
        ),
        rego=r"""disabled := ["cramfs", "freevxfs", "hfs", "hfsplus", "udf", "usb-storage"]

norm(name) := replace(name, "-", "_")

loaded := {parts[0] |
	some line in split(input.files["/proc/modules"], "\n")
	parts := split(line, " ")
	parts[0] != ""
}

installs := [[norm(w[1]), w[2]] |
	some f in sort([p | some p, _ in input.files; startswith(p, "/etc/modprobe.d/"); endswith(p, ".conf")])
	some line in split(input.files[f], "\n")
	w := [x | some x in regex.split(`\s+`, trim_space(line)); x != ""]
	count(w) >= 3
	w[0] == "install"
]

install_of(m) := cmds[0] if {
	cmds := [pair[1] | some pair in installs; pair[0] == norm(m)]
	count(cmds) > 0
}

violations contains m if {
	some m in disabled
	norm(m) in loaded
}

violations contains m if {
	some m in disabled
	not install_of(m) in {"/bin/false", "/bin/true"}
}""",
        ok=modules_ok,
        files=(PROC_MODULES, "/etc/modprobe.d/*"),
        bad={
            "cramfs loaded": append(PROC_MODULES, "cramfs 20480 0 - Live 0x0000000000000000\n"),
            "udf install line removed": replace(MODPROBE, "install udf /bin/false\n", ""),
            "usb_storage loaded": append(
                PROC_MODULES, "usb_storage 77824 1 uas, Live 0x0000000000000000\n"
            ),
            "hfsplus install line commented out": replace(
                MODPROBE, "install hfsplus", "#install hfsplus"
            ),
            "rules only in a .bak file": both(
                remove(MODPROBE),
                put(MODPROBE + ".bak", HostFile("install cramfs /bin/false\n")),
            ),
            "freevxfs loaded through modprobe": replace(
                MODPROBE,
                "install freevxfs /bin/false",
                "install freevxfs /sbin/modprobe --ignore-install freevxfs",
            ),
        },
        near={
            "/bin/true instead of /bin/false": replace(
                MODPROBE, "install cramfs /bin/false", "install cramfs /bin/true"
            ),
            "usb_storage spelled with an underscore": replace(
                MODPROBE, "install usb-storage /bin/false", "install usb_storage /bin/false"
            ),
            "a blacklist-only file too": put(
                "/etc/modprobe.d/blacklist-extra.conf", HostFile("blacklist squashfs\n")
            ),
            "squashfs loaded": append(PROC_MODULES, "squashfs 69632 1 - Live 0x0000000000000000\n"),
            "tabs and extra spaces": replace(
                MODPROBE, "install udf /bin/false", "install  udf\t/bin/false"
            ),
        },
    ),
]

_BY_ID = {c.id: c for c in CHECKS}


def by_id(check_id: str) -> LinuxCheck:
    """A check of this family."""
    return _BY_ID[check_id]


def variants(
    check_id: str,
    seed: int,
    compliant: int,
    non_compliant: int,
    visible_seed: int | None = None,
    judged: LinuxCheck | None = None,
    org: Mutation | None = None,
) -> tuple[list[Variant], list[Variant]]:
    """Visible hosts (one compliant, one not) and hidden hosts of a check.

    The visible hosts show the check's first near miss and first violation; hidden compliant
    hosts carry other near misses and violations of other checks, hidden violating hosts one
    of the other violations (cycled) and sometimes a near miss.

    Args:
        check_id: The judged check.
        seed: Seed of the hidden hosts.
        compliant: Number of hidden hosts that comply.
        non_compliant: Number of hidden hosts that do not.
        visible_seed: Seed of the visible hosts (default ``seed``).
        judged: The check as the trial's organization states it (its values drawn: see
            :mod:`.hostparams`); default the library's check ``check_id``.
        org: A mutation every host gets first (the file keeping the organization's values).

    Raises:
        ValueError: a mutation does not do what it claims (a library bug).
    """
    check = judged or _BY_ID[check_id]
    hidden_rng = random.Random(f"{check_id}:hidden:{seed}")
    visible_rng = random.Random(
        f"{check_id}:visible:{seed if visible_seed is None else visible_seed}"
    )
    bad = list(check.bad.items())
    near = list(check.near.items())
    others = [
        (f"{o.id}: {lbl}", m)
        for o in CHECKS
        if o.id != check_id
        for lbl, m in list(o.bad.items())[1:]
    ]

    def build(muts: list[tuple[str, Mutation]]) -> tuple[Host, list[str]]:
        host = clean_host()
        if org is not None:
            org(host)
        notes = []
        for label, m in muts:
            m(host)
            notes.append(label)
        return host, notes

    def other(rng: random.Random) -> list[tuple[str, Mutation]]:
        picks = []
        for label, m in rng.sample(others, 3):
            probe = clean_host()
            try:
                m(probe)
            except (ValueError, KeyError):
                continue
            if check.ok(probe):
                picks.append((f"other requirement ({label})", m))
        return picks[:1]

    def make(
        name: str, muts: list[tuple[str, Mutation]], expect: bool, rng: random.Random = hidden_rng
    ) -> Variant:
        tries = [muts + other(rng) for _ in range(4)] + [muts, muts[:1]]
        for attempt in tries:
            try:
                host, notes = build(attempt)
            except (ValueError, KeyError):  # two edits of the same line do not combine
                continue
            if check.violates(host) == expect:
                return Variant(name, host, {name} if expect else set(), [name], notes)
        raise ValueError(f"{check_id}: {[m[0] for m in muts]} gives the wrong verdict")

    for label, m in check.bad.items():
        make("probe", [(label, m)], True)
    for label, m in check.near.items():
        make("probe", [(label, m)], False)
    visible = [
        make("host-a", near[:1], False, visible_rng),
        make("host-b", bad[:1], True, visible_rng),
    ]
    hidden_bad, hidden_near = rotated(hidden_rng, bad[1:]), rotated(hidden_rng, near[1:])
    hidden: list[Variant] = []
    for i in range(compliant):
        hidden.append(make("", [hidden_near[i % len(hidden_near)]], False))
    for i in range(non_compliant):
        muts = [hidden_bad[i % len(hidden_bad)]]
        if i % 2:
            muts.append(hidden_near[(i + 1) % len(hidden_near)])
        hidden.append(make("", muts, True))
    hidden_rng.shuffle(hidden)
    for i, v in enumerate(hidden):
        name = f"host-{i + 1:02d}"
        v.name = name
        v.units = [name]
        v.violating = {name} if v.violating else set()
    return visible, hidden
