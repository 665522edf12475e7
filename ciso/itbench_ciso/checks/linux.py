"""Linux host checks (CIS RHEL style) on host filesystem trees.

A host is a mapping of absolute paths to files (content, mode, symlink target) materialised
under a directory that stands for the host's ``/``. Every check has a Python predicate on the
host (ground truth), mutations that make a clean host violate, near misses that comply, the
paths its evidence needs, and reference Rego over the evidence the reference playbook writes:
``{"files": {"/etc/...": {"type": "file"|"link"|"directory", "mode": "0644",
"content": "..."}}}``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from itbench_ciso.checks.base import Check, Variant


@dataclass
class HostFile:
    """One file of a host tree."""

    content: str = ""
    mode: int = 0o644
    link: str | None = None


Host = dict[str, HostFile]
Mutation = Callable[[Host], None]

SSHD = "/etc/ssh/sshd_config"
LOGIN_DEFS = "/etc/login.defs"
SYSCTL = "/etc/sysctl.conf"
SYSCTL_D = "/etc/sysctl.d/99-hardening.conf"
PASSWD = "/etc/passwd"
SHADOW = "/etc/shadow"
CRONTAB = "/etc/crontab"
PWQUALITY = "/etc/security/pwquality.conf"
FAILLOCK = "/etc/security/faillock.conf"
AUDIT = "/etc/audit/rules.d/50-identity.rules"
SUDOERS = "/etc/sudoers"
WANTS = "/etc/systemd/system/multi-user.target.wants"

_SSHD_CLEAN = """# Managed by the platform team
Port 22
AddressFamily any
ListenAddress 0.0.0.0
HostKey /etc/ssh/ssh_host_ed25519_key
SyslogFacility AUTHPRIV
LogLevel INFO
PermitRootLogin no
MaxAuthTries 4
PubkeyAuthentication yes
PasswordAuthentication no
PermitEmptyPasswords no
KbdInteractiveAuthentication no
UsePAM yes
X11Forwarding no
ClientAliveInterval 300
Subsystem sftp /usr/libexec/openssh/sftp-server
"""

_LOGIN_DEFS_CLEAN = """# Password aging controls
MAIL_DIR	/var/spool/mail
PASS_MAX_DAYS	90
PASS_MIN_DAYS	1
PASS_WARN_AGE	7
UID_MIN                  1000
UID_MAX                 60000
UMASK		027
ENCRYPT_METHOD SHA512
"""

_SYSCTL_D_CLEAN = """# Kernel hardening
kernel.randomize_va_space = 2
net.ipv4.ip_forward = 0
net.ipv4.conf.all.accept_redirects = 0
net.ipv4.conf.default.accept_redirects = 0
net.ipv4.conf.all.send_redirects = 0
"""

_PASSWD_CLEAN = """root:x:0:0:root:/root:/bin/bash
bin:x:1:1:bin:/bin:/sbin/nologin
daemon:x:2:2:daemon:/sbin:/sbin/nologin
sshd:x:74:74:Privilege-separated SSH:/usr/share/empty.sshd:/sbin/nologin
chrony:x:992:987:chrony system user:/var/lib/chrony:/sbin/nologin
deploy:x:1000:1000:Deployment user:/home/deploy:/bin/bash
alice:x:1001:1001:Alice Operator:/home/alice:/bin/bash
"""

_SHADOW_CLEAN = """root:!locked::0:99999:7:::
bin:*:19700:0:99999:7:::
daemon:*:19700:0:99999:7:::
sshd:!!:19700::::::
chrony:!!:19700::::::
deploy:$6$rounds=5000$Jq2k$0d9xH3Kp:19950:1:90:7:::
alice:$6$rounds=5000$Pp8w$Zk1mQ7eR:19951:1:90:7:::
"""

_AUDIT_CLEAN = """## Identity changes
-w /etc/group -p wa -k identity
-w /etc/passwd -p wa -k identity
-w /etc/shadow -p wa -k identity
-w /etc/gshadow -p wa -k identity
"""


def clean_host() -> Host:
    """A host that satisfies every check of the library."""
    return {
        SSHD: HostFile(_SSHD_CLEAN, 0o600),
        LOGIN_DEFS: HostFile(_LOGIN_DEFS_CLEAN, 0o644),
        SYSCTL: HostFile("# System default settings live in /usr/lib/sysctl.d/00-system.conf.\n"),
        SYSCTL_D: HostFile(_SYSCTL_D_CLEAN),
        PASSWD: HostFile(_PASSWD_CLEAN, 0o644),
        SHADOW: HostFile(_SHADOW_CLEAN, 0o640),
        "/etc/group": HostFile("root:x:0:\nwheel:x:10:alice\ndeploy:x:1000:\nalice:x:1001:\n"),
        CRONTAB: HostFile("SHELL=/bin/bash\nPATH=/sbin:/bin:/usr/sbin:/usr/bin\n", 0o600),
        PWQUALITY: HostFile("# Configuration for pam_pwquality\nminlen = 14\nminclass = 4\n"),
        FAILLOCK: HostFile("# pam_faillock\ndeny = 5\nunlock_time = 900\n"),
        AUDIT: HostFile(_AUDIT_CLEAN, 0o640),
        SUDOERS: HostFile(
            "Defaults   !visiblepw\nDefaults   use_pty\nroot ALL=(ALL) ALL\n%wheel ALL=(ALL) ALL\n",
            0o440,
        ),
        "/etc/sudoers.d/deploy": HostFile(
            "deploy ALL=(root) NOPASSWD: /usr/bin/systemctl\n", 0o440
        ),
        f"{WANTS}/sshd.service": HostFile(link="/usr/lib/systemd/system/sshd.service"),
        f"{WANTS}/auditd.service": HostFile(link="/usr/lib/systemd/system/auditd.service"),
        f"{WANTS}/chronyd.service": HostFile(link="/usr/lib/systemd/system/chronyd.service"),
        "/etc/hostname": HostFile("app-server\n"),
    }


def materialise(host: Host, root: Path) -> None:
    """Write ``host`` under ``root`` (directories 0755)."""
    for path, f in sorted(host.items()):
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if f.link is not None:
            target.symlink_to(f.link)
        else:
            target.write_text(f.content, encoding="utf-8")
            target.chmod(f.mode)


# --- parsing (the Rego helpers below implement the same rules) ------------------------------

_SPLIT = re.compile(r"[\s=]+")


def _lines(text: str, comments: str = "#") -> list[list[str]]:
    out = []
    for line in text.split("\n"):
        t = line.strip()
        if not t or t[0] in comments:
            continue
        out.append(_SPLIT.split(t))
    return out


def sshd_value(host: Host, key: str) -> str | None:
    """The first value of an sshd keyword (case-insensitive); ``None`` when unset."""
    f = host.get(SSHD)
    for parts in _lines(f.content if f else ""):
        if parts[0].lower() == key.lower() and len(parts) > 1:
            return parts[1]
    return None


def kv_value(host: Host, path: str, key: str) -> str | None:
    """The last value of ``key`` in a ``key value`` or ``key = value`` file."""
    f = host.get(path)
    found = None
    for parts in _lines(f.content if f else ""):
        if parts[0] == key and len(parts) > 1:
            found = parts[1]
    return found


def sysctl_value(host: Host, key: str) -> str | None:
    """The effective value of a sysctl key over /etc/sysctl.d/*.conf (by name) then sysctl.conf."""
    files = sorted(p for p in host if p.startswith("/etc/sysctl.d/") and p.endswith(".conf"))
    found = None
    for path in [*files, SYSCTL]:
        f = host.get(path)
        if f is None or f.link is not None:
            continue
        for parts in _lines(f.content, "#;"):
            if parts[0] == key and len(parts) > 1:
                found = parts[1]
    return found


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def mode_too_open(host: Host, path: str, allowed: int) -> bool:
    """Whether ``path`` is missing or has permission bits outside ``allowed``."""
    f = host.get(path)
    return f is None or bool(f.mode & ~allowed & 0o777)


def _passwd(host: Host) -> list[list[str]]:
    return [line.split(":") for line in host[PASSWD].content.splitlines() if line.strip()]


def _shadow(host: Host) -> list[list[str]]:
    return [line.split(":") for line in host[SHADOW].content.splitlines() if line.strip()]


def audit_watches(host: Host, path: str) -> bool:
    """Whether some rules file of /etc/audit/rules.d watches ``path`` for writes and attributes."""
    for name, f in host.items():
        if not (name.startswith("/etc/audit/rules.d/") and name.endswith(".rules")):
            continue
        for parts in (line.split() for line in f.content.splitlines()):
            watch = len(parts) >= 4 and parts[0] == "-w" and parts[1] == path
            if watch and parts[2] == "-p" and "w" in parts[3] and "a" in parts[3]:
                return True
    return False


def enabled_units(host: Host) -> set[str]:
    """Unit names linked from any /etc/systemd/system/*.wants directory."""
    out = set()
    for name in host:
        m = re.fullmatch(r"/etc/systemd/system/[^/]+\.wants/([^/]+)", name)
        if m:
            out.add(m.group(1))
    return out


def sudo_use_pty(host: Host) -> bool:
    """Whether /etc/sudoers or a file of /etc/sudoers.d sets ``Defaults use_pty``."""
    for name, f in host.items():
        if name == SUDOERS or name.startswith("/etc/sudoers.d/"):
            for line in f.content.splitlines():
                parts = line.split()
                if (
                    len(parts) >= 2
                    and parts[0] == "Defaults"
                    and "use_pty" in [p.strip(",") for p in parts[1:]]
                ):
                    return True
    return False


# --- Rego ----------------------------------------------------------------------------------

HELPERS = r"""
content(path) := input.files[path]

rows(path) := [parts |
	some line in regex.split(`\r?\n`, content(path))
	t := trim_space(line)
	t != ""
	not startswith(t, "#")
	parts := regex.split(`[\s=]+`, t)
]

sshd_values(key) := [parts[1] |
	some parts in rows("/etc/ssh/sshd_config")
	lower(parts[0]) == lower(key)
	count(parts) > 1
]

sshd(key) := sshd_values(key)[0]

kv_values(path, key) := [parts[1] |
	some parts in rows(path)
	parts[0] == key
	count(parts) > 1
]

kv(path, key) := vals[count(vals) - 1] if {
	vals := kv_values(path, key)
	count(vals) > 0
}

sysctl_files := array.concat(
	sort([p |
		input.files[p]
		startswith(p, "/etc/sysctl.d/")
		endswith(p, ".conf")
	]),
	["/etc/sysctl.conf"],
)

sysctl_values(key) := [parts[1] |
	some f in sysctl_files
	input.files[f]
	some line in regex.split(`\r?\n`, content(f))
	t := trim_space(line)
	t != ""
	not startswith(t, "#")
	not startswith(t, ";")
	parts := regex.split(`[\s=]+`, t)
	parts[0] == key
	count(parts) > 1
]

sysctl(key) := vals[count(vals) - 1] if {
	vals := sysctl_values(key)
	count(vals) > 0
}

mode_bits(m) := ((to_number(substring(m, count(m) - 3, 1)) * 64) + (to_number(substring(m, count(m) - 2, 1)) * 8)) + to_number(substring(m, count(m) - 1, 1))

too_open(path, allowed) if not input.modes[path]

too_open(path, allowed) if bits.and(mode_bits(input.modes[path]), bits.negate(allowed)) != 0
"""


def _rego_lit(value: str) -> str:
    return '"' + value.replace('"', '\\"') + '"'


def _sshd_rule(key: str, ok: list[str]) -> str:
    allowed = ", ".join(_rego_lit(v) for v in ok)
    return (
        f'violations contains "{key} is not set to {"/".join(ok)}" if {{\n'
        f"\tnot lower(sshd({_rego_lit(key)})) in {{{allowed}}}\n}}"
    )


def _num_rule(expr: str, label: str, cond: str) -> str:
    return (
        f'violations contains "{label}" if not to_number({expr}) {cond}\n\n'
        f'violations contains "{label}" if not {expr}'
    )


@dataclass(frozen=True)
class LinuxCheck(Check):
    """A host check.

    Attributes:
        violates: Ground-truth predicate on a host.
        bad: Named mutations that make a clean host violate.
        near: Named mutations that comply but look close.
        files: Paths or globs whose file contents the evidence needs.
        modes: Paths whose permission bits the evidence needs.
        listing: Directories whose entries (symlinks included) the evidence needs.
    """

    family: ClassVar[str] = "linux"
    violates: Callable[[Host], bool] = field(default=lambda host: False)
    bad: dict[str, Mutation] = field(default_factory=dict)
    near: dict[str, Mutation] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()
    listing: tuple[str, ...] = ()

    def policy(self, package: str = "compliance") -> str:
        """The reference policy with the family's helpers."""
        body = f"{HELPERS.strip()}\n\n{self.rego.strip()}"
        return f"package {package}\n\nimport rego.v1\n\n{body}\n"

    def playbook(self) -> str:
        """The reference evidence playbook."""
        return playbook_for(self.files, self.modes, self.listing)

    def evidence_of(self, host: Host) -> dict[str, Any]:
        """The evidence the reference playbook collects from ``host`` (without Ansible)."""
        files = {
            path: f.content
            for path, f in host.items()
            if f.link is None and any(fnmatch.fnmatchcase(path, g) for g in self.files)
        }
        modes = {p: f"{host[p].mode:04o}" for p in self.modes if p in host}
        prefixes = tuple(d.rstrip("/") + "/" for d in self.listing)
        entries = sorted(p for p in host if self.listing and p.startswith(prefixes))
        out: dict[str, Any] = {"files": files}
        if self.modes:
            out["modes"] = modes
        if self.listing:
            out["entries"] = entries
        return out


def _yaml_list(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def playbook_for(files: tuple[str, ...], modes: tuple[str, ...], listing: tuple[str, ...]) -> str:
    """An evidence playbook setting the host fact ``evidence``.

    File contents come through lookups, modes through stat and listings through find.
    """
    tasks = []
    if modes:
        tasks.append(
            """    - name: Read the permissions of the files the requirement concerns
      ansible.builtin.stat:
        path: "{{ host_root }}{{ item }}"
        get_checksum: false
      loop: "{{ stat_paths }}"
      register: stats
"""
        )
    if listing:
        tasks.append(
            """    - name: List the directories the requirement concerns
      ansible.builtin.find:
        paths: "{{ listing | map('regex_replace', '^', host_root) | list }}"
        file_type: any
        recurse: true
        hidden: true
      register: listed
"""
        )
    parts = [
        "files: \"{{ dict(found | map('regex_replace', '^' ~ (host_root | regex_escape), '')"
        " | zip(query('ansible.builtin.file', *found, rstrip=false))) }}\""
    ]
    if modes:
        parts.append(
            "modes: \"{{ dict(stats.results | selectattr('stat.exists') | map(attribute='item')"
            " | zip(stats.results | selectattr('stat.exists') | map(attribute='stat.mode'))) }}\""
        )
    if listing:
        parts.append(
            "entries: \"{{ listed.files | map(attribute='path')"
            " | map('regex_replace', '^' ~ (host_root | regex_escape), '') | sort }}\""
        )
    body = "\n".join(f"          {p}" for p in parts)
    return f"""---
- name: Collect compliance evidence
  hosts: all
  gather_facts: false
  vars:
    globs: {_yaml_list(files)}
    stat_paths: {_yaml_list(modes)}
    listing: {_yaml_list(listing)}
    found: "{{{{ query('ansible.builtin.fileglob', *(globs | map('regex_replace', '^', host_root))) }}}}"
  tasks:
{"".join(tasks)}    - name: Record the evidence
      ansible.builtin.set_fact:
        evidence:
{body}
"""


def _edit(path: str, fn: Callable[[str], str]) -> Mutation:
    def mutate(host: Host) -> None:
        host[path] = dataclasses.replace(host[path], content=fn(host[path].content))

    return mutate


def _replace(path: str, old: str, new: str) -> Mutation:
    def fn(text: str) -> str:
        if old not in text:
            raise ValueError(f"{path}: {old!r} not found")
        return text.replace(old, new, 1)

    return _edit(path, fn)


def _append(path: str, text: str) -> Mutation:
    return _edit(path, lambda t: t + text)


def _prepend(path: str, text: str) -> Mutation:
    return _edit(path, lambda t: text + t)


def _mode(path: str, mode: int) -> Mutation:
    def mutate(host: Host) -> None:
        host[path] = dataclasses.replace(host[path], mode=mode)

    return mutate


def _add(path: str, f: HostFile) -> Mutation:
    def mutate(host: Host) -> None:
        host[path] = f

    return mutate


def _remove(path: str) -> Mutation:
    def mutate(host: Host) -> None:
        host.pop(path, None)

    return mutate


def _both(*muts: Mutation) -> Mutation:
    def mutate(host: Host) -> None:
        for m in muts:
            m(host)

    return mutate


def _sshd_check(
    cid: str,
    key: str,
    ok: list[str],
    bad_value: str,
    requirement: str,
    title: str,
    literal: str | None = None,
) -> LinuxCheck:
    line = f"{key} {literal or ok[0]}"
    return LinuxCheck(
        id=cid,
        title=title,
        requirement=requirement + _SSHD_NOTE,
        rego=_sshd_rule(key, ok),
        violates=lambda h: (sshd_value(h, key) or "").lower() not in ok,
        files=(SSHD,),
        bad={
            f"{key} {bad_value}": _replace(SSHD, line, f"{key} {bad_value}"),
            "keyword removed": _replace(SSHD, line + "\n", ""),
            "only a commented-out setting": _replace(SSHD, line, f"#{line}"),
            "a later compliant line does not count": _both(
                _replace(SSHD, line + "\n", ""),
                _prepend(SSHD, f"{key} {bad_value}\n"),
                _append(SSHD, line + "\n"),
            ),
        },
        near={
            "lower-case keyword": _replace(SSHD, line, f"{key.lower()} {ok[0]}"),
            "key=value form": _replace(SSHD, line, f"{key}={ok[0]}"),
            "a later non-compliant line is ignored": _append(SSHD, f"{key} {bad_value}\n"),
            "non-compliant value commented out": _prepend(SSHD, f"# {key} {bad_value}\n"),
        },
    )


_SSHD_NOTE = (
    " sshd reads /etc/ssh/sshd_config: keywords are case-insensitive, `Keyword value` and "
    "`Keyword=value` are both valid, lines starting with # are comments, and for each "
    "keyword the first value given wins."
)

_DEFS_NOTE = (
    " /etc/login.defs holds `KEY value` lines (keys are case-sensitive, # starts a comment, "
    "the last occurrence of a key wins); an absent key violates."
)

_SYSCTL_NOTE = (
    " The configured value is the one set by /etc/sysctl.d/*.conf, read in lexical order of "
    "file name, then /etc/sysctl.conf; lines are `key = value`, # and ; start comments, the "
    "last assignment wins; an unset key violates."
)

_KV_NOTE = " The file holds `key = value` lines (# starts a comment, the last value wins); an absent key violates."


def _defs_check(
    cid: str, key: str, good: int, bad: int, boundary: int, cmp: str, title: str, req: str
) -> LinuxCheck:
    current = f"{key}\t{good}"
    threshold = boundary

    def ok(v: int | None) -> bool:
        return v is not None and (v <= threshold if cmp == "<=" else v >= threshold)

    return LinuxCheck(
        id=cid,
        title=title,
        requirement=req + _DEFS_NOTE,
        rego=_num_rule(
            f'kv("/etc/login.defs", "{key}")', f"{key} out of range", f"{cmp} {threshold}"
        ),
        violates=lambda h: not ok(_int(kv_value(h, LOGIN_DEFS, key))),
        files=(LOGIN_DEFS,),
        bad={
            f"{key} {bad}": _replace(LOGIN_DEFS, current, f"{key}\t{bad}"),
            "key commented out": _replace(LOGIN_DEFS, current, f"#{current}"),
            "a later line overrides": _append(LOGIN_DEFS, f"{key} {bad}\n"),
        },
        near={
            f"{key} {boundary} (boundary)": _replace(LOGIN_DEFS, current, f"{key} {boundary}"),
            "earlier bad line overridden": _prepend(LOGIN_DEFS, f"{key} {bad}\n"),
        },
    )


def _sysctl_check(cid: str, key: str, good: str, bad: str, title: str, req: str) -> LinuxCheck:
    line = f"{key} = {good}"
    return LinuxCheck(
        id=cid,
        title=title,
        requirement=req + _SYSCTL_NOTE,
        rego=f'violations contains "{key} is not {good}" if not sysctl("{key}") == "{good}"',
        violates=lambda h: sysctl_value(h, key) != good,
        files=("/etc/sysctl.d/*", SYSCTL),
        bad={
            f"{key} = {bad}": _replace(SYSCTL_D, line, f"{key} = {bad}"),
            "/etc/sysctl.conf overrides": _append(SYSCTL, f"{key}={bad}\n"),
            "a later drop-in overrides": _add(
                "/etc/sysctl.d/99-zz-local.conf", HostFile(f"{key} = {bad}\n")
            ),
            "not set anywhere": _replace(SYSCTL_D, line + "\n", ""),
        },
        near={
            "an earlier drop-in is overridden": _add(
                "/etc/sysctl.d/10-vendor.conf", HostFile(f"{key} = {bad}\n")
            ),
            "no spaces": _replace(SYSCTL_D, line, f"{key}={good}"),
            "bad value in a ; comment": _append(SYSCTL, f"; {key} = {bad}\n"),
            "a non-.conf file is ignored": _add(
                "/etc/sysctl.d/README", HostFile(f"{key} = {bad}\n")
            ),
        },
    )


def _mode_check(cid: str, path: str, allowed: int, bad: int, strict: int, title: str) -> LinuxCheck:
    return LinuxCheck(
        id=cid,
        title=title,
        requirement=(
            f"{path} must exist and its permissions must be {allowed:04o} or more restrictive "
            "(no permission bit outside " + f"{allowed:04o})."
        ),
        rego=f'violations contains "{path} permissions too open" if too_open("{path}", {allowed})',
        violates=lambda h: mode_too_open(h, path, allowed),
        modes=(path,),
        bad={
            f"mode {bad:04o}": _mode(path, bad),
            "group-writable": _mode(path, allowed | 0o020),
            "world-writable": _mode(path, allowed | 0o002),
            **({"world-readable": _mode(path, allowed | 0o004)} if not allowed & 0o004 else {}),
        },
        near={f"mode {strict:04o}": _mode(path, strict), "mode 0400": _mode(path, 0o400)},
    )


def _kv_check(
    cid: str,
    path: str,
    key: str,
    cmp: str,
    good: int,
    bad: int,
    boundary: int,
    title: str,
    req: str,
) -> LinuxCheck:
    line = f"{key} = {good}"

    def ok(v: int | None) -> bool:
        return v is not None and (v <= good if cmp == "<=" else v >= good)

    return LinuxCheck(
        id=cid,
        title=title,
        requirement=req + _KV_NOTE,
        rego=_num_rule(f'kv("{path}", "{key}")', f"{key} out of range", f"{cmp} {good}"),
        violates=lambda h: not ok(_int(kv_value(h, path, key))),
        files=(path,),
        bad={
            f"{key} = {bad}": _replace(path, line, f"{key} = {bad}"),
            "commented out": _replace(path, line, f"# {line}"),
            "a later line overrides": _append(path, f"{key}={bad}\n"),
        },
        near={
            f"{key} = {boundary} (boundary)": _replace(path, line, f"{key} = {boundary}"),
            "an earlier bad line is overridden": _prepend(path, f"{key} = {bad}\n"),
        },
    )


def _at_most(value: int | None, limit: int) -> bool:
    return value is not None and value <= limit


def _uid0_ok(h: Host) -> bool:
    return all(p[0] == "root" for p in _passwd(h) if len(p) > 2 and p[2] == "0")


def _no_empty_pw(h: Host) -> bool:
    return all(len(p) > 1 and p[1] != "" for p in _shadow(h))


def _umask_ok(h: Host) -> bool:
    v = kv_value(h, LOGIN_DEFS, "UMASK")
    try:
        return v is not None and (int(v, 8) & 0o027) == 0o027
    except ValueError:
        return False


_SERVICES = ("avahi-daemon.service", "cups.service", "telnet.socket", "rsh.socket")

CHECKS: list[LinuxCheck] = [
    _sshd_check(
        "linux-ssh-root-login",
        "PermitRootLogin",
        ["no"],
        "yes",
        "SSH must not permit root logins: sshd's PermitRootLogin must be `no`.",
        "SSH root login disabled",
    ),
    _sshd_check(
        "linux-ssh-password-auth",
        "PasswordAuthentication",
        ["no"],
        "yes",
        "SSH password authentication must be disabled: sshd's PasswordAuthentication must be `no`.",
        "SSH password authentication disabled",
    ),
    _sshd_check(
        "linux-ssh-empty-passwords",
        "PermitEmptyPasswords",
        ["no"],
        "yes",
        "SSH must refuse empty passwords: sshd's PermitEmptyPasswords must be explicitly `no`.",
        "SSH empty passwords refused",
    ),
    _sshd_check(
        "linux-ssh-x11",
        "X11Forwarding",
        ["no"],
        "yes",
        "SSH X11 forwarding must be disabled: sshd's X11Forwarding must be explicitly `no`.",
        "SSH X11 forwarding disabled",
    ),
    _sshd_check(
        "linux-ssh-loglevel",
        "LogLevel",
        ["info", "verbose"],
        "QUIET",
        "SSH must log enough: sshd's LogLevel must be explicitly INFO or VERBOSE.",
        "SSH log level",
        literal="INFO",
    ),
    LinuxCheck(
        id="linux-ssh-max-auth-tries",
        title="SSH MaxAuthTries at most 4",
        requirement="SSH must limit authentication attempts: sshd's MaxAuthTries must be set to 4 or less."
        + _SSHD_NOTE,
        rego=_num_rule('sshd("MaxAuthTries")', "MaxAuthTries above 4", "<= 4"),
        violates=lambda h: not _at_most(_int(sshd_value(h, "MaxAuthTries")), 4),
        files=(SSHD,),
        bad={
            "MaxAuthTries 6": _replace(SSHD, "MaxAuthTries 4", "MaxAuthTries 6"),
            "unset": _replace(SSHD, "MaxAuthTries 4\n", ""),
            "first value 10": _prepend(SSHD, "MaxAuthTries 10\n"),
        },
        near={
            "MaxAuthTries 3": _replace(SSHD, "MaxAuthTries 4", "MaxAuthTries 3"),
            "later value ignored": _append(SSHD, "MaxAuthTries 10\n"),
            "lower-case keyword": _replace(SSHD, "MaxAuthTries 4", "maxauthtries 2"),
        },
    ),
    _mode_check("linux-sshd-config-mode", SSHD, 0o600, 0o644, 0o400, "sshd_config permissions"),
    _defs_check(
        "linux-pass-max-days",
        "PASS_MAX_DAYS",
        90,
        99999,
        365,
        "<=",
        "Password expiration",
        "Passwords must expire: PASS_MAX_DAYS in /etc/login.defs must be 365 or less.",
    ),
    _defs_check(
        "linux-pass-min-days",
        "PASS_MIN_DAYS",
        1,
        0,
        1,
        ">=",
        "Minimum password age",
        "Passwords must have a minimum age: PASS_MIN_DAYS in /etc/login.defs must be 1 or more.",
    ),
    _defs_check(
        "linux-pass-warn-age",
        "PASS_WARN_AGE",
        7,
        3,
        7,
        ">=",
        "Password expiry warning",
        "Users must be warned before their password expires: PASS_WARN_AGE in /etc/login.defs "
        "must be 7 or more.",
    ),
    LinuxCheck(
        id="linux-umask",
        title="Default umask 027 or stricter",
        requirement=(
            "The default umask must be 027 or more restrictive: UMASK in /etc/login.defs, read "
            "as an octal number, must include the bits 027 (077 is fine, 022 is not)." + _DEFS_NOTE
        ),
        rego="""violations contains "UMASK not restrictive enough" if not umask_ok

umask_ok if {
	u := kv("/etc/login.defs", "UMASK")
	bits.and(mode_bits(concat("", ["000", u])), 23) == 23
}""",
        violates=lambda h: not _umask_ok(h),
        files=(LOGIN_DEFS,),
        bad={
            "UMASK 022": _replace(LOGIN_DEFS, "UMASK\t\t027", "UMASK\t\t022"),
            "UMASK 007": _replace(LOGIN_DEFS, "UMASK\t\t027", "UMASK 007"),
            "unset": _replace(LOGIN_DEFS, "UMASK\t\t027\n", ""),
        },
        near={
            "UMASK 077": _replace(LOGIN_DEFS, "UMASK\t\t027", "UMASK\t077"),
            "UMASK 0027": _replace(LOGIN_DEFS, "UMASK\t\t027", "UMASK 0027"),
        },
    ),
    _sysctl_check(
        "linux-sysctl-ip-forward",
        "net.ipv4.ip_forward",
        "0",
        "1",
        "IP forwarding disabled",
        "The host must not route packets: net.ipv4.ip_forward must be configured to 0.",
    ),
    _sysctl_check(
        "linux-sysctl-aslr",
        "kernel.randomize_va_space",
        "2",
        "1",
        "Full address space layout randomisation",
        "Address space layout randomisation must be full: kernel.randomize_va_space must be "
        "configured to 2.",
    ),
    _sysctl_check(
        "linux-sysctl-redirects",
        "net.ipv4.conf.all.accept_redirects",
        "0",
        "1",
        "ICMP redirects refused",
        "ICMP redirects must not be accepted: net.ipv4.conf.all.accept_redirects must be "
        "configured to 0.",
    ),
    _mode_check("linux-shadow-mode", SHADOW, 0o640, 0o644, 0o600, "/etc/shadow permissions"),
    _mode_check("linux-passwd-mode", PASSWD, 0o644, 0o664, 0o444, "/etc/passwd permissions"),
    _mode_check("linux-crontab-mode", CRONTAB, 0o600, 0o644, 0o400, "/etc/crontab permissions"),
    LinuxCheck(
        id="linux-uid0-only-root",
        title="Only root has UID 0",
        requirement=(
            "Root must be the only UID 0 account: no account other than `root` in /etc/passwd "
            "(name:password:UID:GID:...) may have UID 0."
        ),
        rego="""violations contains name if {
	some line in regex.split(`\\r?\\n`, content("/etc/passwd"))
	fields := split(line, ":")
	count(fields) > 2
	fields[2] == "0"
	name := fields[0]
	name != "root"
}""",
        violates=lambda h: not _uid0_ok(h),
        files=(PASSWD,),
        bad={
            "toor with UID 0": _append(PASSWD, "toor:x:0:0:backup root:/root:/bin/bash\n"),
            "service account UID 0": _replace(PASSWD, "deploy:x:1000:1000", "deploy:x:0:1000"),
        },
        near={
            "GID 0 only": _append(PASSWD, "operator:x:11:0:operator:/root:/sbin/nologin\n"),
            "UID 10": _append(PASSWD, "uucp:x:10:14:uucp:/var/spool/uucp:/sbin/nologin\n"),
            "UID 1000 named root2": _append(PASSWD, "root2:x:1002:1002::/home/root2:/bin/bash\n"),
        },
    ),
    LinuxCheck(
        id="linux-empty-passwords",
        title="No empty password fields",
        requirement=(
            "No account may have an empty password: the second field of every line of "
            "/etc/shadow (name:password:...) must not be empty (locked values like `!` or `*` "
            "are fine)."
        ),
        rego="""violations contains fields[0] if {
	some line in regex.split(`\\r?\\n`, content("/etc/shadow"))
	fields := split(line, ":")
	count(fields) > 1
	fields[1] == ""
}""",
        violates=lambda h: not _no_empty_pw(h),
        files=(SHADOW,),
        bad={
            "alice without password": _replace(
                SHADOW, "alice:$6$rounds=5000$Pp8w$Zk1mQ7eR", "alice:"
            ),
            "new account without password": _append(SHADOW, "guest::19960:0:99999:7:::\n"),
        },
        near={
            "locked with !": _append(SHADOW, "guest:!:19960:0:99999:7:::\n"),
            "locked with *": _append(SHADOW, "svc:*:19960:0:99999:7:::\n"),
        },
    ),
    _kv_check(
        "linux-pwquality-minlen",
        PWQUALITY,
        "minlen",
        ">=",
        14,
        8,
        15,
        "Password minimum length",
        "Passwords must be at least 14 characters: minlen in /etc/security/pwquality.conf must be 14 or more.",
    ),
    _kv_check(
        "linux-faillock-deny",
        FAILLOCK,
        "deny",
        "<=",
        5,
        10,
        3,
        "Account lockout after failed logins",
        "Accounts must lock after repeated failures: deny in /etc/security/faillock.conf must "
        "be set to 5 or less.",
    ),
    LinuxCheck(
        id="linux-audit-identity",
        title="Audit changes to passwd and shadow",
        requirement=(
            "Changes to user identities must be audited: the rules files "
            "/etc/audit/rules.d/*.rules must contain a watch `-w <file> -p <perms>` whose perms "
            "include both w and a, for /etc/passwd and for /etc/shadow (# starts a comment)."
        ),
        rego="""violations contains path if {
	some path in ["/etc/passwd", "/etc/shadow"]
	not watched(path)
}

watched(path) if {
	some f, text in input.files
	startswith(f, "/etc/audit/rules.d/")
	endswith(f, ".rules")
	some line in regex.split(`\\r?\\n`, text)
	parts := regex.split(`\\s+`, trim_space(line))
	count(parts) >= 4
	parts[0] == "-w"
	parts[1] == path
	parts[2] == "-p"
	contains(parts[3], "w")
	contains(parts[3], "a")
}""",
        violates=lambda h: not (audit_watches(h, PASSWD) and audit_watches(h, SHADOW)),
        files=("/etc/audit/rules.d/*",),
        bad={
            "shadow watch removed": _replace(AUDIT, "-w /etc/shadow -p wa -k identity\n", ""),
            "passwd watched for reads only": _replace(
                AUDIT, "-w /etc/passwd -p wa", "-w /etc/passwd -p r"
            ),
            "passwd watch commented out": _replace(
                AUDIT, "-w /etc/passwd -p wa", "#-w /etc/passwd -p wa"
            ),
            "rules only in a .bak file": _both(
                _remove(AUDIT),
                _add("/etc/audit/rules.d/50-identity.rules.bak", HostFile(_AUDIT_CLEAN)),
            ),
        },
        near={
            "perms rwxa": _replace(AUDIT, "-w /etc/shadow -p wa", "-w /etc/shadow -p rwxa"),
            "split over two files": _both(
                _replace(AUDIT, "-w /etc/shadow -p wa -k identity\n", ""),
                _add(
                    "/etc/audit/rules.d/60-shadow.rules", HostFile("-w /etc/shadow -p aw -k id\n")
                ),
            ),
        },
    ),
    LinuxCheck(
        id="linux-services-disabled",
        title="Unneeded network services disabled",
        requirement=(
            "Unneeded network services must not be enabled: none of "
            + ", ".join(_SERVICES)
            + " may be enabled, that is linked from any /etc/systemd/system/*.wants/ directory."
        ),
        rego="violations contains unit if {\n\tsome path in input.entries\n"
        "\tregex.match(`^/etc/systemd/system/[^/]+\\.wants/[^/]+$`, path)\n"
        '\tparts := split(path, "/")\n\tunit := parts[count(parts) - 1]\n\tunit in {'
        + ", ".join(f'"{s}"' for s in _SERVICES)
        + "}\n}",
        violates=lambda h: bool(enabled_units(h) & set(_SERVICES)),
        listing=("/etc/systemd/system",),
        bad={
            "cups enabled": _add(
                f"{WANTS}/cups.service", HostFile(link="/usr/lib/systemd/system/cups.service")
            ),
            "avahi enabled for sockets.target": _add(
                "/etc/systemd/system/sockets.target.wants/avahi-daemon.service",
                HostFile(link="/usr/lib/systemd/system/avahi-daemon.service"),
            ),
            "telnet socket enabled": _add(
                "/etc/systemd/system/sockets.target.wants/telnet.socket",
                HostFile(link="/usr/lib/systemd/system/telnet.socket"),
            ),
        },
        near={
            "cups-browsed look-alike": _add(
                f"{WANTS}/cups-browsed.service",
                HostFile(link="/usr/lib/systemd/system/cups-browsed.service"),
            ),
            "masked unit": _add("/etc/systemd/system/cups.service", HostFile(link="/dev/null")),
        },
    ),
    LinuxCheck(
        id="linux-sudo-use-pty",
        title="sudo runs commands in a pseudo terminal",
        requirement=(
            "sudo must run commands in a pseudo terminal: /etc/sudoers or a file of "
            "/etc/sudoers.d must contain a `Defaults` line listing `use_pty` (# starts a comment)."
        ),
        rego="""violations contains "use_pty is not set" if not use_pty

use_pty if {
	some f, text in input.files
	sudoers_file(f)
	some line in regex.split(`\\r?\\n`, text)
	parts := regex.split(`[\\s,]+`, trim_space(line))
	parts[0] == "Defaults"
	"use_pty" in parts
}

sudoers_file("/etc/sudoers")

sudoers_file(f) if startswith(f, "/etc/sudoers.d/")""",
        violates=lambda h: not sudo_use_pty(h),
        files=(SUDOERS, "/etc/sudoers.d/*"),
        bad={
            "removed": _replace(SUDOERS, "Defaults   use_pty\n", ""),
            "commented out": _replace(SUDOERS, "Defaults   use_pty", "#Defaults   use_pty"),
            "negated": _replace(SUDOERS, "Defaults   use_pty", "Defaults   !use_pty"),
        },
        near={
            "in sudoers.d": _both(
                _replace(SUDOERS, "Defaults   use_pty\n", ""),
                _add("/etc/sudoers.d/10-pty", HostFile("Defaults use_pty\n", 0o440)),
            ),
            "in a list": _replace(SUDOERS, "Defaults   use_pty", "Defaults   requiretty, use_pty"),
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
) -> tuple[list[Variant], list[Variant]]:
    """Visible hosts (one compliant, one not) and hidden hosts of a check.

    Every hidden compliant host carries near misses and violations of other checks; every
    hidden violating host one of the check's violations (cycled) and possibly a near miss.

    Args:
        check_id: The judged check.
        seed: Seed of the hidden hosts.
        compliant: Number of hidden compliant hosts.
        non_compliant: Number of hidden violating hosts.
        visible_seed: Seed of the visible hosts (default ``seed``); a separate seed keeps the
            visible hosts from telling anything about the hidden ones.

    Raises:
        ValueError: a mutation does not do what it claims (a library bug).
    """
    check = _BY_ID[check_id]
    hidden_rng = random.Random(f"{check_id}:hidden:{seed}")
    visible_rng = random.Random(
        f"{check_id}:visible:{seed if visible_seed is None else visible_seed}"
    )
    bad = list(check.bad.items())
    near = list(check.near.items())
    others = [(f"{o.id}: {lbl}", m) for o in CHECKS if o.id != check_id for lbl, m in o.bad.items()]

    def build(muts: list[tuple[str, Mutation]]) -> tuple[Host, list[str]]:
        host = clean_host()
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
            if not check.violates(probe):
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

    visible = [
        make("host-a", near[:1], False, visible_rng),
        make("host-b", bad[:1], True, visible_rng),
    ]
    hidden: list[Variant] = []
    for i in range(compliant):
        hidden.append(make("", [near[(i + 1) % len(near)]] if i else [], False))
    for i in range(non_compliant):
        muts = [bad[i % len(bad)]]
        if i % 2 and near:
            muts.append(near[i % len(near)])
        hidden.append(make("", muts, True))
    hidden_rng.shuffle(hidden)
    for i, v in enumerate(hidden):
        name = f"host-{i + 1:02d}"
        v.name = name
        v.units = [name]
        v.violating = {name} if v.violating else set()
    return visible, hidden
