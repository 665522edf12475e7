"""A Linux host as a filesystem tree, the files real tools read, and how to collect evidence.

A host maps absolute paths to files (content, mode, symlink target), materialised under a
directory that stands for the host's ``/``. Besides configuration files it carries the state
the usual commands read: the package database (``dpkg-query --admindir=<root>/var/lib/dpkg``),
systemd unit files and their links (``systemctl --root=<root> list-unit-files``), and the
kernel's view under ``proc/`` (``/proc/net/tcp`` as ``netstat`` reads it, ``/proc/modules`` as
``lsmod`` reads it, ``/proc/sys`` as ``sysctl`` reads it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass
class HostFile:
    """One file of a host tree."""

    content: str = ""
    mode: int = 0o644
    link: str | None = None


Host = dict[str, HostFile]
Mutation = Callable[[Host], None]

SSHD = "/etc/ssh/sshd_config"
SSHD_D = "/etc/ssh/sshd_config.d"
LOGIN_DEFS = "/etc/login.defs"
SYSCTL = "/etc/sysctl.conf"
SYSCTL_D = "/etc/sysctl.d/99-hardening.conf"
VENDOR_SYSCTL = "/usr/lib/sysctl.d/50-default.conf"
PASSWD = "/etc/passwd"
SHADOW = "/etc/shadow"
GROUP = "/etc/group"
GSHADOW = "/etc/gshadow"
CRONTAB = "/etc/crontab"
PWQUALITY = "/etc/security/pwquality.conf"
FAILLOCK = "/etc/security/faillock.conf"
AUDIT = "/etc/audit/rules.d/50-identity.rules"
SUDOERS = "/etc/sudoers"
DPKG_STATUS = "/var/lib/dpkg/status"
UNITS = "/usr/lib/systemd/system"
ETC_UNITS = "/etc/systemd/system"
WANTS = f"{ETC_UNITS}/multi-user.target.wants"
PROC_TCP = "/proc/net/tcp"
PROC_TCP6 = "/proc/net/tcp6"
PROC_MODULES = "/proc/modules"
MODPROBE = "/etc/modprobe.d/cis.conf"

_SSHD_CLEAN = """# Managed by the platform team
Include /etc/ssh/sshd_config.d/*.conf

Port 22
AddressFamily any
ListenAddress 0.0.0.0
HostKey /etc/ssh/ssh_host_ed25519_key
SyslogFacility AUTH
LogLevel INFO
PermitRootLogin no
MaxAuthTries 4
PubkeyAuthentication yes
HostbasedAuthentication no
IgnoreRhosts yes
PasswordAuthentication no
PermitEmptyPasswords no
KbdInteractiveAuthentication no
UsePAM yes
X11Forwarding no
ClientAliveInterval 300
Subsystem sftp /usr/lib/openssh/sftp-server
"""

_LOGIN_DEFS_CLEAN = """# Password aging controls
MAIL_DIR	/var/mail
PASS_MAX_DAYS	90
PASS_MIN_DAYS	1
PASS_WARN_AGE	7
UID_MIN                  1000
UID_MAX                 60000
UMASK		027
ENCRYPT_METHOD SHA512
"""

SYSCTL_KEYS = {
    "net.ipv4.ip_forward": "0",
    "net.ipv4.conf.all.accept_redirects": "0",
    "net.ipv4.conf.all.send_redirects": "0",
    "kernel.randomize_va_space": "2",
}

_PASSWD_CLEAN = """root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
bin:x:2:2:bin:/bin:/usr/sbin/nologin
sshd:x:105:65534::/run/sshd:/usr/sbin/nologin
_chrony:x:106:112:Chrony daemon:/var/lib/chrony:/usr/sbin/nologin
deploy:x:1000:1000:Deployment user:/home/deploy:/bin/bash
alice:x:1001:1001:Alice Operator:/home/alice:/bin/bash
"""

_SHADOW_CLEAN = """root:!locked::0:99999:7:::
daemon:*:19700:0:99999:7:::
bin:*:19700:0:99999:7:::
sshd:!:19700::::::
_chrony:!:19700::::::
deploy:$6$rounds=5000$Jq2k$0d9xH3Kp:19950:1:90:7:::
alice:$6$rounds=5000$Pp8w$Zk1mQ7eR:19951:1:90:7:::
"""

_AUDIT_CLEAN = """## Identity changes
-w /etc/group -p wa -k identity
-w /etc/passwd -p wa -k identity
-w /etc/gshadow -p wa -k identity
-w /etc/shadow -p wa -k identity
"""

_PACKAGES = [
    ("base-files", "install ok installed", "12.4"),
    ("openssh-server", "install ok installed", "1:9.2p1-2"),
    ("auditd", "install ok installed", "1:3.0.9-1"),
    ("chrony", "install ok installed", "4.3-2"),
    ("sudo", "install ok installed", "1.9.13p3-1"),
    ("telnet", "install ok installed", "0.17+2.4-2"),
    ("rsync", "install ok installed", "3.2.7-1"),
]


def package_entry(name: str, status: str, version: str) -> str:
    """One stanza of the dpkg status database."""
    return (
        f"Package: {name}\nStatus: {status}\nPriority: optional\nSection: net\n"
        f"Installed-Size: 120\nMaintainer: Debian Maintainers <pkg@debian.example>\n"
        f"Architecture: amd64\nVersion: {version}\nDescription: {name} package\n\n"
    )


def unit_file(name: str, wanted_by: str | None = "multi-user.target") -> HostFile:
    """A systemd unit file (with an [Install] section when ``wanted_by`` is given)."""
    section = "Socket" if name.endswith(".socket") else "Service"
    body = (
        "ListenStream=23\nAccept=yes\n" if section == "Socket" else f"ExecStart=/usr/sbin/{name}\n"
    )
    install = f"\n[Install]\nWantedBy={wanted_by}\n" if wanted_by else ""
    return HostFile(f"[Unit]\nDescription={name}\n\n[{section}]\n{body}{install}")


def tcp_line(i: int, local: str, remote: str, state: str) -> str:
    """One line of /proc/net/tcp or tcp6 (addresses already in the kernel's hex form)."""
    return (
        f"{i:4d}: {local} {remote} {state} 00000000:00000000 00:00000000 00000000"
        f"     0        0 {20000 + i} 1 0000000000000000 100 0 0 10 0\n"
    )


TCP_HEAD = (
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt"
    "   uid  timeout inode\n"
)


def hex4(address: str, port: int) -> str:
    """An IPv4 address and port as /proc/net/tcp writes them (address little-endian)."""
    parts = [int(p) for p in address.split(".")]
    return "".join(f"{p:02X}" for p in reversed(parts)) + f":{port:04X}"


def hex6(words: tuple[int, int, int, int], port: int) -> str:
    """An IPv6 address (four 32-bit words) and port as /proc/net/tcp6 writes them."""
    out = ""
    for w in words:
        out += "".join(f"{b:02X}" for b in w.to_bytes(4, "big")[::-1])
    return f"{out}:{port:04X}"


ANY6 = (0, 0, 0, 0)
LOOP6 = (0, 0, 0, 1)

_MODULES_CLEAN = """ext4 1003520 2 - Live 0x0000000000000000
mbcache 16384 1 ext4, Live 0x0000000000000000
jbd2 192512 1 ext4, Live 0x0000000000000000
nf_tables 344064 0 - Live 0x0000000000000000
vfat 24576 1 - Live 0x0000000000000000
fat 98304 1 vfat, Live 0x0000000000000000
"""

DISABLED_MODULES = ("cramfs", "freevxfs", "hfs", "hfsplus", "udf", "usb-storage")


def clean_host() -> Host:
    """A host that satisfies every check of the library."""
    host: Host = {
        SSHD: HostFile(_SSHD_CLEAN, 0o600),
        f"{SSHD_D}/10-crypto.conf": HostFile(
            "Ciphers aes256-gcm@openssh.com,aes128-gcm@openssh.com\n", 0o600
        ),
        LOGIN_DEFS: HostFile(_LOGIN_DEFS_CLEAN, 0o644),
        SYSCTL: HostFile("# See sysctl.d(5) for the drop-in directories.\n"),
        SYSCTL_D: HostFile("".join(f"{k} = {v}\n" for k, v in SYSCTL_KEYS.items())),
        VENDOR_SYSCTL: HostFile("kernel.sysrq = 16\nfs.protected_symlinks = 1\n"),
        PASSWD: HostFile(_PASSWD_CLEAN, 0o644),
        SHADOW: HostFile(_SHADOW_CLEAN, 0o640),
        GROUP: HostFile("root:x:0:\nsudo:x:27:alice\ndeploy:x:1000:\nalice:x:1001:\n", 0o644),
        GSHADOW: HostFile("root:*::\nsudo:*::alice\ndeploy:!::\nalice:!::\n", 0o640),
        CRONTAB: HostFile("SHELL=/bin/sh\nPATH=/usr/sbin:/usr/bin:/sbin:/bin\n", 0o600),
        PWQUALITY: HostFile("# Configuration for pam_pwquality\nminlen = 14\nminclass = 4\n"),
        FAILLOCK: HostFile("# pam_faillock\ndeny = 5\nunlock_time = 900\n"),
        AUDIT: HostFile(_AUDIT_CLEAN, 0o640),
        SUDOERS: HostFile(
            "Defaults\tenv_reset\nDefaults\tuse_pty\nroot\tALL=(ALL:ALL) ALL\n"
            "%sudo\tALL=(ALL:ALL) ALL\n@includedir /etc/sudoers.d\n",
            0o440,
        ),
        "/etc/sudoers.d/deploy": HostFile(
            "deploy ALL=(root) NOPASSWD: /usr/bin/systemctl\n", 0o440
        ),
        DPKG_STATUS: HostFile("".join(package_entry(*p) for p in _PACKAGES)),
        PROC_TCP: HostFile(
            TCP_HEAD
            + tcp_line(0, hex4("0.0.0.0", 22), hex4("0.0.0.0", 0), "0A")
            + tcp_line(1, hex4("127.0.0.1", 25), hex4("0.0.0.0", 0), "0A")
            + tcp_line(2, hex4("10.0.0.11", 22), hex4("10.0.0.99", 51544), "01")
        ),
        PROC_TCP6: HostFile(
            TCP_HEAD.replace("local_address", "local_address                         ")
            + tcp_line(0, hex6(ANY6, 443), hex6(ANY6, 0), "0A")
        ),
        PROC_MODULES: HostFile(_MODULES_CLEAN),
        MODPROBE: HostFile(
            "".join(f"install {m} /bin/false\nblacklist {m}\n" for m in DISABLED_MODULES)
        ),
        "/etc/hostname": HostFile("app-server\n"),
    }
    for key, value in SYSCTL_KEYS.items():
        host["/proc/sys/" + key.replace(".", "/")] = HostFile(value + "\n")
    for unit in ("ssh.service", "auditd.service", "chrony.service"):
        host[f"{UNITS}/{unit}"] = unit_file(unit)
        host[f"{WANTS}/{unit}"] = HostFile(link=f"{UNITS}/{unit}")
    for unit in ("cups.service", "avahi-daemon.service", "rsync.service"):
        host[f"{UNITS}/{unit}"] = unit_file(unit)
    host[f"{UNITS}/avahi-daemon.socket"] = unit_file("avahi-daemon.socket", "sockets.target")
    return host


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


# --- mutations ---------------------------------------------------------------------------------


def edit(path: str, fn: Callable[[str], str]) -> Mutation:
    """Change a file's content."""

    def mutate(host: Host) -> None:
        host[path] = dataclasses.replace(host[path], content=fn(host[path].content))

    return mutate


def replace(path: str, old: str, new: str) -> Mutation:
    """Replace the first ``old`` of a file (it must be there)."""

    def fn(text: str) -> str:
        if old not in text:
            raise ValueError(f"{path}: {old!r} not found")
        return text.replace(old, new, 1)

    return edit(path, fn)


def append(path: str, text: str) -> Mutation:
    """Add lines at the end of a file."""
    return edit(path, lambda t: t + text)


def prepend(path: str, text: str) -> Mutation:
    """Add lines at the start of a file."""
    return edit(path, lambda t: text + t)


def mode(path: str, bits: int) -> Mutation:
    """Change a file's permission bits."""

    def mutate(host: Host) -> None:
        host[path] = dataclasses.replace(host[path], mode=bits)

    return mutate


def put(path: str, f: HostFile) -> Mutation:
    """Add or replace a file."""

    def mutate(host: Host) -> None:
        host[path] = f

    return mutate


def remove(path: str) -> Mutation:
    """Remove a file."""

    def mutate(host: Host) -> None:
        if path not in host:
            raise KeyError(path)
        host.pop(path)

    return mutate


def both(*muts: Mutation) -> Mutation:
    """Several mutations in order."""

    def mutate(host: Host) -> None:
        for m in muts:
            m(host)

    return mutate


# --- evidence playbooks ----------------------------------------------------------------------


def _yaml_list(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def playbook_for(
    files: tuple[str, ...],
    modes: tuple[str, ...] = (),
    listing: tuple[str, ...] = (),
    commands: tuple[tuple[str, tuple[str, ...]], ...] = (),
) -> str:
    """An evidence playbook setting the host fact ``evidence``.

    File contents come through lookups, modes through stat, listings through find, and
    command outputs (``commands``: name and argv, ``{{ host_root }}`` allowed) through the
    command module.
    """
    tasks = []
    if modes:
        # One find per host, not a stat per file: each module run costs a Python start.
        tasks.append(
            """    - name: Read the permissions of the files the requirement concerns
      ansible.builtin.find:
        paths: "{{ stat_paths | map('dirname') | unique | map('regex_replace', '^', host_root) | list }}"
        patterns: "{{ stat_paths | map('basename') | unique | list }}"
        file_type: any
        hidden: true
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
    if commands:
        argvs = "\n".join(
            "          - name: "
            + name
            + "\n            argv: ["
            + ", ".join(f"'{a}'" for a in argv)
            + "]"
            for name, argv in commands
        )
        tasks.append(
            f"""    - name: Run the commands the requirement needs
      ansible.builtin.command:
        argv: "{{{{ item.argv }}}}"
      loop:
{argvs}
      register: ran
      changed_when: false
      failed_when: false
"""
        )
    parts = [
        "files: \"{{ dict(found | map('regex_replace', '^' ~ (host_root | regex_escape), '')"
        " | zip(query('ansible.builtin.file', *found, rstrip=false))) }}\""
    ]
    if modes:
        parts.append(
            "modes: \"{{ dict(stats.files | map(attribute='path')"
            " | map('regex_replace', '^' ~ (host_root | regex_escape), '')"
            " | zip(stats.files | map(attribute='mode'))) | dict2items"
            " | selectattr('key', 'in', stat_paths) | items2dict }}\""
        )
    if listing:
        parts.append(
            "entries: \"{{ listed.files | map(attribute='path')"
            " | map('regex_replace', '^' ~ (host_root | regex_escape), '') | sort }}\""
        )
    if commands:
        parts.append(
            "commands: \"{{ dict(ran.results | map(attribute='item.name')"
            " | zip(ran.results | map(attribute='stdout'))) }}\""
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
