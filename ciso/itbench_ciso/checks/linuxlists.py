"""Organization lists of the Linux host checks (see :mod:`.linuxparams`).

The catalog's control names a fixed list (legacy packages, unneeded services, kernel modules,
kernel parameters, file modes, audited files); the organization adds its own entries, drawn
per trial. Hidden hosts break an entry only the organization lists, so a policy holding the
catalog's list alone misses them.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re

from itbench_ciso.checks import linux
from itbench_ciso.checks.linux_host import (
    AUDIT,
    DISABLED_MODULES,
    DPKG_STATUS,
    ETC_UNITS,
    MODPROBE,
    PASSWD,
    PROC_MODULES,
    SHADOW,
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
    edit,
    mode,
    package_entry,
    put,
    remove,
    unit_file,
)
from itbench_ciso.checks.linuxkinds import _rego_set
from itbench_ciso.checks.linuxvalues import Kind, Param, Values


def _split(value: str) -> list[str]:
    return [v for v in value.split(",") if v]


def _sample(rng: random.Random, pool: tuple[str, ...], k: int) -> str:
    return ",".join(rng.sample(pool, k))


def _other(rng: random.Random, pool: tuple[str, ...], values: Values) -> Values:
    """Another draw of the same size from ``pool`` (not the same set)."""
    while True:
        other = tuple(_sample(rng, pool, len(_split(v))) for v in values)
        if other != values:
            return other


# --- packages ---------------------------------------------------------------------------------

EXTRA_PACKAGES = ("snmpd", "ftp", "talk", "rpcbind", "ldap-utils", "telnet", "nfs-kernel-server")
REQUIRED_PACKAGES = ("aide", "auditd", "chrony", "apparmor", "sudo", "libpam-pwquality")


def status(name: str, state: str, add: bool = True) -> Mutation:
    """Give package ``name`` the dpkg status ``state`` (its stanza edited, or a new one).

    Args:
        name: The package.
        state: Its three status words.
        add: Whether to add a stanza for a package the database does not list.
    """

    def fn(text: str) -> str:
        pat = rf"(?m)^(Package: {re.escape(name)}\nStatus: )[^\n]*"
        if re.search(pat, text):
            return re.sub(pat, lambda m: m.group(1) + state, text)
        return text + package_entry(name, state, "1.0-1") if add else text

    return edit(DPKG_STATUS, fn)


def _packages_setup(values: Values) -> Mutation:
    return both(
        *(status(p, "deinstall ok config-files", add=False) for p in _split(values[0])),
        *(status(p, "install ok installed") for p in _split(values[1])),
    )


def _packages_derive(values: Values) -> linux.LinuxCheck:
    extra, required = _split(values[0]), _split(values[1])
    forbidden = [*linux.FORBIDDEN_PACKAGES, *extra]
    other = next(p for p in EXTRA_PACKAGES if p not in extra)

    def ok(host: Host) -> bool:
        have = linux.installed_packages(host)
        return not have & set(forbidden) and set(required) <= have

    rego = f"""forbidden := {_rego_set(forbidden)}

required := {_rego_set(required)}

installed contains parts[0] if {{
	some line in split(input.commands.packages, "\\n")
	parts := split(line, "\\t")
	count(parts) == 2
	st := split(parts[1], " ")
	count(st) == 3
	not st[2] in {{"not-installed", "config-files"}}
}}

violations contains name if {{
	some name in forbidden
	installed[name]
}}

violations contains name if {{
	some name in required
	not installed[name]
}}"""
    bad = {
        "telnetd installed": status("telnetd", "install ok installed"),
        f"{extra[0]} installed": status(extra[0], "install ok installed"),
        f"{extra[-1]} half-configured": status(extra[-1], "install ok half-configured"),
        f"required {required[0]} removed, configuration kept": status(
            required[0], "deinstall ok config-files"
        ),
        f"required {required[-1]} purged": status(required[-1], "purge ok not-installed"),
    }
    near = {
        "rsh-client installed": status("rsh-client", "install ok installed"),
        f"{extra[0]} removed, configuration kept": status(extra[0], "deinstall ok config-files"),
        f"{other} installed": status(other, "install ok installed"),
        "nis purged": status("nis", "purge ok not-installed"),
        f"required {required[0]} on hold": status(required[0], "hold ok installed"),
    }
    base = linux.by_id("linux-packages")
    return dataclasses.replace(base, rego=rego, ok=ok, bad=bad, near=near)


PACKAGES = Kind(
    check="linux-packages",
    params=(
        Param(
            "the other packages the organization forbids",
            ("forbidden_packages", "packages.deny", "banned_packages"),
            is_list=True,
        ),
        Param(
            "the packages every host must have",
            ("required_packages", "packages.require", "mandatory_packages"),
            is_list=True,
        ),
    ),
    rules=(
        "Ensure legacy network servers and the packages the organization forbids are not "
        "installed, and the packages it requires are (CIS 2.2): none of "
        + ", ".join(linux.FORBIDDEN_PACKAGES)
        + " nor any package of the organization's forbidden list may be installed (a package "
        "whose dpkg state is neither not-installed nor config-files counts as installed), and "
        "every package of its required list must be.",
        "Software on the host follows the organization's package baseline (CIS 2.2): the "
        "legacy servers "
        + ", ".join(linux.FORBIDDEN_PACKAGES)
        + " and every package the organization forbids must be absent (dpkg state "
        "not-installed or config-files), and every package it requires must be installed.",
    ),
    draw=lambda rng: (
        _sample(rng, EXTRA_PACKAGES, rng.choice((2, 3))),
        _sample(rng, REQUIRED_PACKAGES, 2),
    ),
    decoy=lambda rng, values: (
        _other(rng, EXTRA_PACKAGES, values[:1]) + _other(rng, REQUIRED_PACKAGES, values[1:])
    ),
    setup=_packages_setup,
    derive=_packages_derive,
)


# --- services ---------------------------------------------------------------------------------

EXTRA_UNITS = (
    "snmpd.service",
    "nfs-server.service",
    "bluetooth.service",
    "ModemManager.service",
    "apache2.service",
    "postfix.service",
)
REQUIRED_UNITS = ("chrony.service", "ssh.service", "rsyslog.service", "apparmor.service")


def _enable(unit: str, target: str = "multi-user.target") -> Mutation:
    return put(f"{ETC_UNITS}/{target}.wants/{unit}", HostFile(link=f"{UNITS}/{unit}"))


def _services_setup(values: Values) -> Mutation:
    def mutate(host: Host) -> None:
        for unit in EXTRA_UNITS + REQUIRED_UNITS:
            host.setdefault(f"{UNITS}/{unit}", unit_file(unit))
        for unit in _split(values[1]):
            _enable(unit)(host)

    return mutate


def _services_derive(values: Values) -> linux.LinuxCheck:
    extra, required = _split(values[0]), _split(values[1])
    banned = [*linux.MUST_NOT_BE_ENABLED, *extra]
    needed = [*linux.MUST_BE_ENABLED, *required]
    other = next(u for u in EXTRA_UNITS if u not in extra)

    def ok(host: Host) -> bool:
        return all(linux.unit_state(host, u) == "enabled" for u in needed) and not any(
            linux.unit_state(host, u) == "enabled" for u in banned
        )

    rego = f"""states := {{parts[0]: parts[1] |
	some line in split(input.commands.units, "\\n")
	parts := [w | some w in regex.split(`\\s+`, trim_space(line)); w != ""]
	count(parts) >= 2
}}

unneeded := {_rego_set(banned)}

needed := {_rego_set(needed)}

violations contains unit if {{
	some unit in unneeded
	states[unit] == "enabled"
}}

violations contains unit if {{
	some unit in needed
	not states[unit] == "enabled"
}}"""
    bad = {
        "cups enabled": _enable("cups.service"),
        f"{extra[0]} enabled": _enable(extra[0]),
        f"{extra[-1]} enabled for the graphical target": _enable(extra[-1], "graphical.target"),
        f"required {required[0]} disabled": remove(f"{WANTS}/{required[0]}"),
        f"required {required[-1]} masked": put(
            f"{ETC_UNITS}/{required[-1]}", HostFile(link="/dev/null")
        ),
    }
    near = {
        "cups masked": put(f"{ETC_UNITS}/cups.service", HostFile(link="/dev/null")),
        f"{other} enabled": _enable(other),
        f"{extra[0]} masked": put(f"{ETC_UNITS}/{extra[0]}", HostFile(link="/dev/null")),
        "rsync not installed": remove(f"{UNITS}/rsync.service"),
        f"required {required[0]} enabled for another target": both(
            remove(f"{WANTS}/{required[0]}"), _enable(required[0], "basic.target")
        ),
    }
    base = linux.by_id("linux-services")
    return dataclasses.replace(base, rego=rego, ok=ok, bad=bad, near=near)


SERVICES = Kind(
    check="linux-services",
    params=(
        Param(
            "the other units that must not be enabled",
            ("disabled_units", "services.forbidden", "banned_services"),
            is_list=True,
        ),
        Param(
            "the other units that must be enabled",
            ("enabled_units", "services.required", "mandatory_services"),
            is_list=True,
        ),
    ),
    rules=(
        "Ensure unneeded services are not in use and required ones are (CIS 2.1, 4.1.1): "
        "the systemd units "
        + ", ".join(linux.MUST_NOT_BE_ENABLED)
        + " and every unit the organization bans must not be enabled, and auditd.service and "
        "every unit the organization requires must be enabled.",
        "Services follow the organization's baseline (CIS 2.1, 4.1.1): auditd.service and the "
        "organization's required units are enabled; none of "
        + ", ".join(linux.MUST_NOT_BE_ENABLED)
        + " nor of the units the organization bans is enabled.",
    ),
    draw=lambda rng: (_sample(rng, EXTRA_UNITS, 2), _sample(rng, REQUIRED_UNITS, 2)),
    decoy=lambda rng, values: (
        _other(rng, EXTRA_UNITS, values[:1]) + _other(rng, REQUIRED_UNITS, values[1:])
    ),
    setup=_services_setup,
    derive=_services_derive,
)


# --- kernel modules ---------------------------------------------------------------------------

EXTRA_MODULES = ("squashfs", "jffs2", "dccp", "sctp", "rds", "tipc")


def _loaded(name: str) -> Mutation:
    return append(PROC_MODULES, f"{name} 20480 0 - Live 0x0000000000000000\n")


def _install_line(name: str, new: str) -> Mutation:
    return edit(MODPROBE, lambda t: t.replace(f"install {name} /bin/false\n", new))


def _modules_derive(values: Values) -> linux.LinuxCheck:
    extra = _split(values[0])
    disabled = [*DISABLED_MODULES, *extra]
    other = next(m for m in EXTRA_MODULES if m not in extra)
    base = linux.by_id("linux-kernel-modules")

    def ok(host: Host) -> bool:
        loaded = {
            ln.split()[0] for ln in linux._content(host, PROC_MODULES).split("\n") if ln.strip()
        }
        installs: dict[str, str] = {}
        for p in sorted(host):
            if p.startswith("/etc/modprobe.d/") and p.endswith(".conf"):
                for line in linux._content(host, p).split("\n"):
                    w = line.split()
                    if len(w) >= 3 and w[0] == "install":
                        installs.setdefault(w[1].replace("-", "_"), w[2])
        return all(
            m.replace("-", "_") not in loaded
            and installs.get(m.replace("-", "_")) in ("/bin/false", "/bin/true")
            for m in disabled
        )

    rego, n = re.subn(r"(?m)^disabled := \[.*\]$", f"disabled := {json.dumps(disabled)}", base.rego)
    if n != 1:
        raise ValueError("linux-kernel-modules: the reference policy no longer lists its modules")
    bad = {
        "cramfs loaded": _loaded("cramfs"),
        f"{extra[0]} loaded": _loaded(extra[0]),
        f"{extra[-1]} install line removed": _install_line(extra[-1], ""),
        f"{extra[0]} install line commented out": _install_line(
            extra[0], f"#install {extra[0]} /bin/false\n"
        ),
        f"{extra[-1]} loaded": _loaded(extra[-1]),
    }
    near = {
        "/bin/true instead of /bin/false": _install_line("cramfs", "install cramfs /bin/true\n"),
        f"{other} loaded": _loaded(other),
        "tabs and extra spaces": _install_line("udf", "install  udf\t/bin/false\n"),
        f"{extra[0]} made unloadable with /bin/true": _install_line(
            extra[0], f"install {extra[0]} /bin/true\n"
        ),
        "a blacklist-only file too": put(
            "/etc/modprobe.d/blacklist-extra.conf", HostFile(f"blacklist {other}\n")
        ),
    }
    return dataclasses.replace(base, rego=rego, ok=ok, bad=bad, near=near)


MODULES = Kind(
    check="linux-kernel-modules",
    params=(
        Param(
            "the other kernel modules to disable",
            ("disabled_modules", "kernel.modules_blocked", "blacklisted_modules"),
            is_list=True,
        ),
    ),
    rules=(
        "Ensure unneeded filesystem, storage and network kernel modules are disabled (CIS "
        "1.1.1, 1.1.10, 3.4): the modules "
        + ", ".join(DISABLED_MODULES)
        + " and every module the organization lists must not be loaded, and modprobe must be "
        "configured (in /etc/modprobe.d/*.conf) not to load them: an install line running "
        "/bin/false or /bin/true (a dash and an underscore in a name are the same).",
        "Kernel modules the organization does not use stay out of the kernel (CIS 1.1.1, "
        "1.1.10, 3.4): "
        + ", ".join(DISABLED_MODULES)
        + " and the organization's own list must neither appear in /proc/modules nor be "
        "loadable: the first install line for each in /etc/modprobe.d/*.conf must run "
        "/bin/false or /bin/true.",
    ),
    draw=lambda rng: (_sample(rng, EXTRA_MODULES, 2),),
    decoy=lambda rng, values: _other(rng, EXTRA_MODULES, values),
    setup=lambda values: append(
        MODPROBE, "".join(f"install {m} /bin/false\nblacklist {m}\n" for m in _split(values[0]))
    ),
    derive=_modules_derive,
)


# --- kernel parameters ------------------------------------------------------------------------

#: Parameters an organization may add: the value it requires and a wrong one.
EXTRA_SYSCTL = {
    "net.ipv4.tcp_syncookies": ("1", "0"),
    "net.ipv4.conf.all.rp_filter": ("1", "0"),
    "net.ipv4.icmp_echo_ignore_broadcasts": ("1", "0"),
    "net.ipv4.conf.all.log_martians": ("1", "0"),
    "kernel.kptr_restrict": ("2", "1"),
    "fs.suid_dumpable": ("0", "2"),
    "kernel.dmesg_restrict": ("1", "0"),
    "net.ipv4.conf.default.accept_source_route": ("0", "1"),
}


def _proc(key: str) -> str:
    return "/proc/sys/" + key.replace(".", "/")


def _sysctl_pairs(value: str) -> dict[str, str]:
    return dict(p.split("=", 1) for p in _split(value))


def _sysctl_draw(rng: random.Random) -> Values:
    keys = rng.sample(sorted(EXTRA_SYSCTL), 2)
    return (",".join(f"{k}={EXTRA_SYSCTL[k][0]}" for k in keys),)


def _sysctl_decoy(rng: random.Random, values: Values) -> Values:
    while True:
        other = _sysctl_draw(rng)
        if other != values:
            return other


def _sysctl_setup(values: Values) -> Mutation:
    pairs = _sysctl_pairs(values[0])
    return both(
        append(SYSCTL_D, "".join(f"{k} = {v}\n" for k, v in pairs.items())),
        *(put(_proc(k), HostFile(v + "\n")) for k, v in pairs.items()),
    )


def _sysctl_derive(values: Values) -> linux.LinuxCheck:
    pairs = _sysctl_pairs(values[0])
    (k0, v0), (k1, v1) = list(pairs.items())[:2]
    w0, w1 = EXTRA_SYSCTL[k0][1], EXTRA_SYSCTL[k1][1]
    required = {**SYSCTL_KEYS, **pairs}
    base = linux.by_id("linux-kernel-parameters")

    def ok(host: Host) -> bool:
        conf = linux.sysctl_configured(host)
        return all(
            conf.get(k) == want and linux._content(host, _proc(k)).strip() == want
            for k, want in required.items()
        )

    body = ",\n".join(f"\t{json.dumps(k)}: {json.dumps(v)}" for k, v in required.items())
    rego, n = re.subn(r"(?s)^required := \{.*?\n\}", f"required := {{\n{body},\n}}", base.rego)
    if n != 1:
        raise ValueError("linux-kernel-parameters: the reference policy no longer lists its keys")
    line0 = f"{k0} = {v0}\n"
    bad = {
        "ip_forward running as 1": put("/proc/sys/net/ipv4/ip_forward", HostFile("1\n")),
        f"{k0} running as {w0}": put(_proc(k0), HostFile(w0 + "\n")),
        f"{k1} not configured": edit(SYSCTL_D, lambda t: t.replace(f"{k1} = {v1}\n", "")),
        f"a later drop-in sets {k0} to {w0}": put(
            "/etc/sysctl.d/99-zz-local.conf", HostFile(f"{k0} = {w0}\n")
        ),
        f"{k1} configured {w1}": edit(
            SYSCTL_D, lambda t: t.replace(f"{k1} = {v1}", f"{k1} = {w1}")
        ),
    }
    near = {
        f"{k0} without spaces": edit(SYSCTL_D, lambda t: t.replace(line0, f"{k0}={v0}\n")),
        f"an earlier drop-in sets {k0} to {w0}": put(
            "/etc/sysctl.d/10-tuning.conf", HostFile(f"{k0} = {w0}\n")
        ),
        f"a ; comment setting {k1}": append(SYSCTL, f"; {k1} = {w1}\n"),
        f"a file that is not .conf sets {k0}": put("/etc/sysctl.d/README", HostFile(line0)),
        f"{k1} in a vendor file masked by /etc": put(
            "/usr/lib/sysctl.d/99-hardening.conf", HostFile(f"{k1} = {w1}\n")
        ),
    }
    files = (*base.files, *(_proc(k) for k in sorted(EXTRA_SYSCTL)))
    return dataclasses.replace(base, rego=rego, ok=ok, bad=bad, near=near, files=files)


SYSCTL_KIND = Kind(
    check="linux-kernel-parameters",
    params=(
        Param(
            "the other kernel parameters required, each as name=value",
            ("sysctl_required", "kernel.parameters", "required_sysctls"),
            is_list=True,
        ),
    ),
    rules=(
        "Ensure kernel parameters are set (CIS 3.2, 3.3, 1.5.3): net.ipv4.ip_forward = 0, "
        "net.ipv4.conf.all.accept_redirects = 0, net.ipv4.conf.all.send_redirects = 0, "
        "kernel.randomize_va_space = 2 and every parameter the organization requires, with "
        "its value, both in the running kernel and in the configuration applied at boot "
        "(sysctl.d and /etc/sysctl.conf).",
        "The kernel runs with the organization's parameters (CIS 3.2, 3.3, 1.5.3): besides "
        "net.ipv4.ip_forward = 0, net.ipv4.conf.all.accept_redirects = 0, "
        "net.ipv4.conf.all.send_redirects = 0 and kernel.randomize_va_space = 2, each "
        "parameter the organization lists must have its value under /proc/sys and in what "
        "systemd-sysctl applies at boot (the sysctl.d drop-ins, then /etc/sysctl.conf).",
    ),
    draw=_sysctl_draw,
    decoy=_sysctl_decoy,
    setup=_sysctl_setup,
    derive=_sysctl_derive,
)


# --- file permissions -------------------------------------------------------------------------

#: Limits an organization may tighten, and to what.
TIGHTER = {
    "/etc/shadow": ("0600", "0400"),
    "/etc/gshadow": ("0600", "0400"),
    "/etc/crontab": ("0400",),
    "/etc/ssh/sshd_config": ("0400",),
    "/etc/passwd": ("0444",),
    "/etc/group": ("0444",),
}


def _modes_draw(rng: random.Random) -> Values:
    limits = {p: f"{m:04o}" for p, m in linux.MODES.items()}
    for p in rng.sample(sorted(TIGHTER), rng.choice((2, 3))):
        limits[p] = rng.choice(TIGHTER[p])
    return (",".join(f"{p}={m}" for p, m in limits.items()),)


def _modes_derive(values: Values) -> linux.LinuxCheck:
    limits = {p: int(m, 8) for p, m in _sysctl_pairs(values[0]).items()}
    tight = [p for p, m in limits.items() if m != linux.MODES.get(p)]
    t0, t1 = tight[0], tight[-1]
    base = linux.by_id("linux-file-permissions")

    def ok(host: Host) -> bool:
        return all(p in host and not host[p].mode & ~lim & 0o777 for p, lim in limits.items())

    body = ",\n".join(f"\t{json.dumps(p)}: {m}" for p, m in limits.items())
    rego, n = re.subn(r"(?s)^limits := \{.*?\n\}", f"limits := {{\n{body},\n}}", base.rego)
    if n != 1:
        raise ValueError("linux-file-permissions: the reference policy no longer lists limits")
    bad = {
        "/etc/shadow 0644": mode("/etc/shadow", 0o644),
        f"{t0} at the catalog's {linux.MODES[t0]:04o}": mode(t0, linux.MODES[t0]),
        f"{t1} at the catalog's {linux.MODES[t1]:04o}": mode(t1, linux.MODES[t1]),
        "/etc/group 0666": mode("/etc/group", 0o666),
        "/etc/passwd 0664": mode("/etc/passwd", 0o664),
    }
    near = {
        "/etc/shadow 0000": mode("/etc/shadow", 0o000),
        f"{t0} 0400": mode(t0, 0o400),
        "/etc/passwd 0444": mode("/etc/passwd", 0o444),
        "sshd_config 0400": mode("/etc/ssh/sshd_config", 0o400),
        "/etc/gshadow 0000": mode("/etc/gshadow", 0o000),
    }
    return dataclasses.replace(base, rego=rego, ok=ok, bad=bad, near=near)


def _modes_setup(values: Values) -> Mutation:
    return both(*(mode(p, int(m, 8)) for p, m in _sysctl_pairs(values[0]).items()))


MODES_KIND = Kind(
    check="linux-file-permissions",
    params=(
        Param(
            "each sensitive file's widest permissions, as path=mode",
            ("file_modes", "permissions.max", "sensitive_file_modes"),
            is_list=True,
        ),
    ),
    rules=(
        "Ensure permissions on sensitive files are configured (CIS 6.1, 5.1.2, 5.2.1) to the "
        "organization's limits: every file the organization lists must exist with no "
        "permission bit outside the mode it allows.",
        "Sensitive files (CIS 6.1, 5.1.2, 5.2.1) are protected as the organization's baseline "
        "says: each listed file exists and its permission bits stay within the listed mode.",
    ),
    draw=_modes_draw,
    decoy=lambda rng, values: (",".join(f"{p}={m:04o}" for p, m in linux.MODES.items()),),
    setup=_modes_setup,
    derive=_modes_derive,
)


# --- audit rules ------------------------------------------------------------------------------

EXTRA_WATCHES = (
    "/etc/sudoers",
    "/etc/security/opasswd",
    "/etc/hosts",
    "/etc/login.defs",
    "/etc/security/faillock.conf",
    "/etc/sudoers.d",
)


def _watch(path: str, new: str) -> Mutation:
    return edit(AUDIT, lambda t: t.replace(f"-w {path} -p wa -k identity\n", new))


def _audit_derive(values: Values) -> linux.LinuxCheck:
    extra = _split(values[0])
    watched = ["/etc/group", "/etc/passwd", "/etc/gshadow", "/etc/shadow", *extra]
    other = next(p for p in EXTRA_WATCHES if p not in extra)
    e0, e1 = extra[0], extra[-1]
    base = linux.by_id("linux-audit-identity")

    def ok(host: Host) -> bool:
        return all(linux.audit_watched(host, p) for p in watched)

    rego, n = re.subn(r"(?m)^identity := \[.*\]$", f"identity := {json.dumps(watched)}", base.rego)
    if n != 1:
        raise ValueError("linux-audit-identity: the reference policy no longer lists its files")
    bad = {
        "shadow watch removed": _watch("/etc/shadow", ""),
        f"{e0} watch removed": _watch(e0, ""),
        f"{e1} watched for reads only": _watch(e1, f"-w {e1} -p r -k identity\n"),
        f"{e0} watch commented out": _watch(e0, f"#-w {e0} -p wa -k identity\n"),
        f"{e1} watched for writes only": _watch(e1, f"-w {e1} -p w -k identity\n"),
    }
    near = {
        "perms rwxa": _watch("/etc/shadow", "-w /etc/shadow -p rwxa -k identity\n"),
        f"{e0} through a syscall rule": _watch(
            e0, f"-a always,exit -F arch=b64 -F path={e0} -F perm=wa -k identity\n"
        ),
        f"an extra read watch on {other}": append(AUDIT, f"-w {other} -p r -k extra\n"),
        f"{e1} perms aw": _watch(e1, f"-w {e1} -p aw -k identity\n"),
        f"{e0} in a second rules file": both(
            _watch(e0, ""),
            put("/etc/audit/rules.d/60-org.rules", HostFile(f"-w {e0} -p wa -k org\n")),
        ),
    }
    return dataclasses.replace(base, rego=rego, ok=ok, bad=bad, near=near)


AUDIT_KIND = Kind(
    check="linux-audit-identity",
    params=(
        Param(
            "the other files to watch",
            ("audit_watch_files", "audit.watched", "identity_files"),
            is_list=True,
        ),
    ),
    rules=(
        "Ensure events that modify user and group information, and the files the organization "
        "lists, are collected (CIS 4.1.3.8): the audit rules (/etc/audit/rules.d/*.rules) must "
        "watch /etc/group, /etc/passwd, /etc/gshadow, /etc/shadow and every listed file for "
        "writes and attribute changes (a -w watch or a syscall rule with path and perm "
        "filters).",
        "Auditing covers identity files and the organization's list (CIS 4.1.3.8): each of "
        "/etc/group, /etc/passwd, /etc/gshadow, /etc/shadow and the files the organization "
        "names is watched for writes and attribute changes by a rule of "
        "/etc/audit/rules.d/*.rules.",
    ),
    draw=lambda rng: (_sample(rng, EXTRA_WATCHES, 2),),
    decoy=lambda rng, values: _other(rng, EXTRA_WATCHES, values),
    setup=lambda values: append(
        AUDIT, "".join(f"-w {p} -p wa -k identity\n" for p in _split(values[0]))
    ),
    derive=_audit_derive,
)

KINDS: dict[str, Kind] = {
    k.check: k for k in (PACKAGES, SERVICES, MODULES, SYSCTL_KIND, MODES_KIND, AUDIT_KIND)
}


# --- accounts ---------------------------------------------------------------------------------

#: Break-glass accounts an organization may allow UID 0.
BREAK_GLASS = ("toor", "breakglass", "rescue", "recovery", "emergency")


def _uid0_derive(values: Values) -> linux.LinuxCheck:
    allowed = _split(values[0])
    other = next(a for a in BREAK_GLASS if a not in allowed)
    a0, a1 = allowed[0], allowed[-1]
    base = linux.by_id("linux-uid0-only-root")

    def ok(host: Host) -> bool:
        for line in linux._content(host, PASSWD).split("\n"):
            f = line.split(":")
            uid0 = len(f) > 2 and f[2].isdigit() and int(f[2]) == 0
            if uid0 and f[0] not in ("root", *allowed):
                return False
        return True

    rego = f"""allowed_uid0 := {_rego_set(["root", *allowed])}

violations contains fields[0] if {{
	some line in lines("/etc/passwd")
	fields := split(line, ":")
	count(fields) > 2
	regex.match(`^0+$`, fields[2])
	not allowed_uid0[fields[0]]
}}"""

    def account(name: str, uid: str = "0") -> Mutation:
        return append(PASSWD, f"{name}:x:{uid}:0:break-glass:/root:/bin/bash\n")

    bad = {
        "toor2 with UID 0": account("toor2"),
        f"unlisted {other} with UID 0": account(other),
        f"{a0}-old with UID 0": account(f"{a0}-old"),
        "deploy with UID 0": edit(PASSWD, lambda t: t.replace("deploy:x:1000:", "deploy:x:0:")),
        f"{a1.upper()} (another name) with UID 00": account(a1.upper(), "00"),
    }
    near = {
        f"{a0} with UID 0": account(a0),
        f"{a1} with UID 00": account(a1, "00"),
        f"{other} with UID 1005": account(other, "1005"),
        "GID 0 only": append(PASSWD, "operator:x:11:0:operator:/root:/usr/sbin/nologin\n"),
        f"{a0} above root": edit(PASSWD, lambda t: f"{a0}:x:0:0::/root:/bin/bash\n" + t),
    }
    return dataclasses.replace(base, rego=rego, ok=ok, bad=bad, near=near)


UID0 = Kind(
    check="linux-uid0-only-root",
    params=(
        Param(
            "the break-glass accounts allowed UID 0",
            ("uid0_allowed", "accounts.uid0_exempt", "break_glass_accounts"),
            is_list=True,
        ),
    ),
    rules=(
        "Ensure root is the only UID 0 account (CIS 6.2.9), apart from the break-glass "
        "accounts the organization has approved: no other account of /etc/passwd may have UID "
        "0 (written with any number of zeros).",
        "Only root and the organization's approved break-glass accounts may have UID 0 in "
        "/etc/passwd (CIS 6.2.9); any other account whose UID field is all zeros violates.",
    ),
    draw=lambda rng: (_sample(rng, BREAK_GLASS, rng.choice((1, 2))),),
    decoy=lambda rng, values: _other(rng, BREAK_GLASS, values),
    setup=lambda values: append(
        PASSWD, "".join(f"{a}:x:0:0:break-glass:/root:/bin/bash\n" for a in _split(values[0]))
    ),
    derive=_uid0_derive,
)


#: System accounts an organization may require to be locked (all in the clean shadow file).
LOCKED_POOL = ("daemon", "bin", "sshd", "_chrony", "deploy")


def _locked(field: str) -> bool:
    return field.startswith(("!", "*"))


def _shadow_set(name: str, password: str) -> Mutation:
    return edit(
        SHADOW, lambda t: re.sub(rf"(?m)^{re.escape(name)}:[^:]*:", f"{name}:{password}:", t)
    )


def _empty_derive(values: Values) -> linux.LinuxCheck:
    must_lock = _split(values[0])
    other = next(a for a in LOCKED_POOL if a not in must_lock)
    a0, a1 = must_lock[0], must_lock[-1]
    base = linux.by_id("linux-empty-passwords")

    def ok(host: Host) -> bool:
        entries = [ln.split(":") for ln in linux._content(host, SHADOW).split("\n") if ln]
        empty = any(len(f) > 1 and f[1] == "" for f in entries)
        unlocked = any(len(f) > 1 and f[0] in must_lock and not _locked(f[1]) for f in entries)
        return not empty and not unlocked

    rego = f"""must_be_locked := {_rego_set(must_lock)}

violations contains fields[0] if {{
	some line in lines("/etc/shadow")
	fields := split(line, ":")
	count(fields) > 1
	fields[1] == ""
}}

violations contains fields[0] if {{
	some line in lines("/etc/shadow")
	fields := split(line, ":")
	count(fields) > 1
	must_be_locked[fields[0]]
	not startswith(fields[1], "!")
	not startswith(fields[1], "*")
}}"""
    bad = {
        "a guest without a password": append(SHADOW, "guest::19960:0:99999:7:::\n"),
        f"{a0} with a password hash": _shadow_set(a0, "$6$rounds=5000$Xy7q$Mn3bV8sT"),
        f"{a1} unlocked with a hash": _shadow_set(a1, "$y$j9T$Qw2e$Rt5yU8iO"),
        f"{a0} without a password": _shadow_set(a0, ""),
        f"{a1} with a plain-looking value": _shadow_set(a1, "x"),
    }
    near = {
        f"{a0} locked with !!": _shadow_set(a0, "!!"),
        f"{other} with a password hash": _shadow_set(other, "$6$rounds=5000$Ab1c$De2fG3hI"),
        f"{a1} with a locked hash": _shadow_set(a1, "!$6$rounds=5000$Zz9y$Xx8wV7u"),
        f"{a0} locked with *": _shadow_set(a0, "*"),
        "a locked guest": append(SHADOW, "guest:!:19960:0:99999:7:::\n"),
    }
    return dataclasses.replace(base, rego=rego, ok=ok, bad=bad, near=near)


EMPTY = Kind(
    check="linux-empty-passwords",
    params=(
        Param(
            "the accounts whose password must be locked",
            ("locked_accounts", "accounts.must_lock", "no_login_accounts"),
            is_list=True,
        ),
    ),
    rules=(
        "Ensure /etc/shadow password fields are not empty (CIS 6.2.1), and that every account "
        "the organization lists has a locked password: its field must start with ! or *.",
        "No account of /etc/shadow may have an empty password field (CIS 6.2.1); besides, the "
        "password field of each account on the organization's list must be locked (starting "
        "with ! or *).",
    ),
    draw=lambda rng: (_sample(rng, LOCKED_POOL, 2),),
    decoy=lambda rng, values: _other(rng, LOCKED_POOL, values),
    setup=lambda values: both(*(_shadow_set(a, "!") for a in _split(values[0]))),
    derive=_empty_derive,
)

KINDS.update({k.check: k for k in (UID0, EMPTY)})
