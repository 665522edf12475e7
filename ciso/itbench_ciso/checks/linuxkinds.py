"""What the organization's values of each Linux host check mean (see :mod:`.linuxparams`).

Per check: the values' pool, the settings a host needs to comply with them, and the check
they give: its ground truth, its reference policy, and violations and near misses that turn
on the values (a setting the catalog's limit allows and the organization's does not, a value
just inside the organization's limit).
"""

from __future__ import annotations

import dataclasses
import json
import random
import re

from itbench_ciso.checks import linux
from itbench_ciso.checks.linux_host import (
    FAILLOCK,
    LOGIN_DEFS,
    PWQUALITY,
    SSHD,
    SSHD_D,
    SUDOERS,
    Host,
    HostFile,
    Mutation,
    append,
    both,
    edit,
    prepend,
    put,
)
from itbench_ciso.checks.linuxvalues import Kind, Param, Values


def setkey(path: str, key: str, value: str, sep: str = "\t") -> Mutation:
    """Set the last line of ``key`` in a ``key value`` file to ``value`` (or add one)."""

    def fn(text: str) -> str:
        found = list(re.finditer(rf"^{re.escape(key)}[ \t=].*$", text, flags=re.M))
        line = f"{key}{sep}{value}"
        if not found:
            return text + line + "\n"
        m = found[-1]
        return text[: m.start()] + line + text[m.end() :]

    return edit(path, fn)


def unset(path: str, key: str) -> Mutation:
    """Remove every line setting ``key``."""
    return edit(path, lambda t: re.sub(rf"^{re.escape(key)}[ \t=].*\n", "", t, flags=re.M))


def _rego_set(values: list[str] | tuple[str, ...]) -> str:
    return "{" + ", ".join(json.dumps(v) for v in values) + "}"


# --- password aging ------------------------------------------------------------------------


def _aging_draw(rng: random.Random) -> Values:
    return (
        str(rng.choice((30, 45, 60, 90, 120, 180))),
        str(rng.choice((2, 3, 5, 7))),
        str(rng.choice((10, 14, 21))),
    )


def _aging_decoy(rng: random.Random, values: Values) -> Values:
    mx = rng.choice([m for m in (60, 90, 180, 365) if str(m) != values[0]])
    return (str(mx), "1", "7")


def _aging_setup(values: Values) -> Mutation:
    mx, mn, warn = values
    return both(
        setkey(LOGIN_DEFS, "PASS_MAX_DAYS", mx),
        setkey(LOGIN_DEFS, "PASS_MIN_DAYS", mn),
        setkey(LOGIN_DEFS, "PASS_WARN_AGE", warn),
    )


def _aging_derive(values: Values) -> linux.LinuxCheck:
    mx, mn, warn = (int(v) for v in values)

    def ok(host: Host) -> bool:
        a = linux.int_or(linux.kv_last(host, LOGIN_DEFS, "PASS_MAX_DAYS"), 99999)
        b = linux.int_or(linux.kv_last(host, LOGIN_DEFS, "PASS_MIN_DAYS"), 0)
        c = linux.int_or(linux.kv_last(host, LOGIN_DEFS, "PASS_WARN_AGE"), 7)
        return a is not None and 0 < a <= mx and (b or 0) >= mn and (c or 0) >= warn

    rego = f"""num(key, fallback) := to_number(value_or("/etc/login.defs", key, fallback))

violations contains "PASS_MAX_DAYS" if not num("PASS_MAX_DAYS", "99999") <= {mx}

violations contains "PASS_MAX_DAYS" if num("PASS_MAX_DAYS", "99999") <= 0

violations contains "PASS_MIN_DAYS" if num("PASS_MIN_DAYS", "0") < {mn}

violations contains "PASS_WARN_AGE" if num("PASS_WARN_AGE", "7") < {warn}"""
    bad = {
        "PASS_MAX_DAYS 99999": setkey(LOGIN_DEFS, "PASS_MAX_DAYS", "99999"),
        "PASS_MAX_DAYS 365, the catalog's limit": setkey(LOGIN_DEFS, "PASS_MAX_DAYS", "365"),
        f"a later PASS_MAX_DAYS {mx + 1}": append(LOGIN_DEFS, f"PASS_MAX_DAYS {mx + 1}\n"),
        "PASS_MIN_DAYS 1": setkey(LOGIN_DEFS, "PASS_MIN_DAYS", "1"),
        "PASS_WARN_AGE 7": setkey(LOGIN_DEFS, "PASS_WARN_AGE", "7"),
    }
    near = {
        f"PASS_MAX_DAYS {mx - 10}": setkey(LOGIN_DEFS, "PASS_MAX_DAYS", str(mx - 10), " "),
        "an earlier PASS_MAX_DAYS 99999 is overridden": prepend(
            LOGIN_DEFS, "PASS_MAX_DAYS 99999\n"
        ),
        f"PASS_MIN_DAYS {mn + 1}": setkey(LOGIN_DEFS, "PASS_MIN_DAYS", str(mn + 1)),
        f"PASS_WARN_AGE {warn + 7}": setkey(LOGIN_DEFS, "PASS_WARN_AGE", str(warn + 7), " "),
        "a lower-case key is not a setting": append(LOGIN_DEFS, "pass_max_days 99999\n"),
    }
    base = linux.by_id("linux-password-aging")
    return dataclasses.replace(base, rego=rego, ok=ok, bad=bad, near=near)


AGING = Kind(
    check="linux-password-aging",
    params=(
        Param(
            "the maximum password age in days",
            ("pass_max_days", "max_password_age", "password.max_age_days"),
        ),
        Param(
            "the minimum password age in days",
            ("pass_min_days", "min_password_age", "password.min_age_days"),
        ),
        Param(
            "the days of warning before a password expires",
            ("pass_warn_age", "password_warn_days", "password.expiry_warning"),
        ),
    ),
    rules=(
        "Ensure password expiration, minimum age and expiration warning are configured (CIS "
        "5.5.1) with the organization's limits: in /etc/login.defs PASS_MAX_DAYS must be "
        "between 1 and the organization's maximum age, PASS_MIN_DAYS at least its minimum age "
        "and PASS_WARN_AGE at least its warning days. The last line that sets a key counts; a "
        "key no line sets has its default (PASS_MAX_DAYS 99999, PASS_MIN_DAYS 0, PASS_WARN_AGE 7).",
        "Password aging (CIS 5.5.1) follows the organization's baseline, not the benchmark's "
        "numbers: /etc/login.defs must set PASS_MAX_DAYS to 1 or more and no more than the "
        "maximum age the organization allows, PASS_MIN_DAYS to at least its minimum age and "
        "PASS_WARN_AGE to at least its warning period (the last line of a key counts; unset "
        "keys default to 99999, 0 and 7).",
    ),
    draw=_aging_draw,
    decoy=_aging_decoy,
    setup=_aging_setup,
    derive=_aging_derive,
)


# --- umask ------------------------------------------------------------------------------------


def _umask_derive(values: Values) -> linux.LinuxCheck:
    want = values[0]
    mask = int(want, 8)

    def ok(host: Host) -> bool:
        v = linux.kv_last(host, LOGIN_DEFS, "UMASK") or "022"
        try:
            return (int(v, 8) & mask) == mask
        except ValueError:
            return False

    rego = f"""want := "{want}"

violations contains "UMASK" if {{
	u := value_or("/etc/login.defs", "UMASK", "022")
	digits := substring(concat("", ["000", u]), count(u), 3)
	some i in numbers.range(0, 2)
	w := to_number(substring(want, i, 1))
	bits.and(to_number(substring(digits, i, 1)), w) != w
}}"""
    bad = {
        "UMASK 022": setkey(LOGIN_DEFS, "UMASK", "022", "\t\t"),
        "UMASK 027, the catalog's value": setkey(LOGIN_DEFS, "UMASK", "027", " "),
        "a later UMASK 027": append(LOGIN_DEFS, "UMASK 027\n"),
        "UMASK 007": setkey(LOGIN_DEFS, "UMASK", "007", " "),
        "UMASK unset": unset(LOGIN_DEFS, "UMASK"),
    }
    near = {
        "UMASK 077": setkey(LOGIN_DEFS, "UMASK", "077", "\t"),
        f"UMASK 0{want}": setkey(LOGIN_DEFS, "UMASK", f"0{want}", " "),
        "an earlier UMASK 022 is overridden": prepend(LOGIN_DEFS, "UMASK 022\n"),
        "a lower-case key is not a setting": append(LOGIN_DEFS, "umask 022\n"),
        "UMASK 0077": setkey(LOGIN_DEFS, "UMASK", "0077", " "),
    }
    base = linux.by_id("linux-umask")
    return dataclasses.replace(base, rego=rego, ok=ok, bad=bad, near=near)


UMASK = Kind(
    check="linux-umask",
    params=(
        Param(
            "the organization's default umask (octal)", ("umask", "default_umask", "login.umask")
        ),
    ),
    rules=(
        "Ensure the default user umask is configured (CIS 5.5.5) at least as restrictively as "
        "the organization's umask: the UMASK login.defs applies (default 022; the last line "
        "counts) must deny every permission bit the organization's umask denies.",
        "The default umask (CIS 5.5.5) follows the organization's baseline: every bit set in "
        "the organization's umask must also be set in the UMASK of /etc/login.defs (the last "
        "line that sets it counts; unset means 022).",
    ),
    draw=lambda rng: (rng.choice(("077", "037", "067")),),
    decoy=lambda rng, values: ("027",),
    setup=lambda values: setkey(LOGIN_DEFS, "UMASK", values[0], "\t\t"),
    derive=_umask_derive,
)


# --- pwquality --------------------------------------------------------------------------------


def _pwq_derive(values: Values) -> linux.LinuxCheck:
    length, classes = int(values[0]), int(values[1])

    def ok(host: Host) -> bool:
        a = linux.int_or(linux.kv_last(host, PWQUALITY, "minlen"), 8)
        b = linux.int_or(linux.kv_last(host, PWQUALITY, "minclass"), 0)
        return a is not None and a >= length and b is not None and b >= classes

    rego = f"""conf := "/etc/security/pwquality.conf"

violations contains "minlen" if not to_number(value_or(conf, "minlen", "8")) >= {length}

violations contains "minclass" if not to_number(value_or(conf, "minclass", "0")) >= {classes}"""
    bad = {
        "minlen 8": setkey(PWQUALITY, "minlen", "8", " = "),
        "minlen 14, the catalog's minimum": setkey(PWQUALITY, "minlen", "14", " = "),
        f"a later minlen={length - 1}": append(PWQUALITY, f"minlen={length - 1}\n"),
        f"minclass {classes - 1}": setkey(PWQUALITY, "minclass", str(classes - 1), " = "),
        "minclass commented out": edit(PWQUALITY, lambda t: t.replace("minclass", "# minclass")),
    }
    near = {
        f"minlen {length + 2}": setkey(PWQUALITY, "minlen", str(length + 2), " = "),
        "an earlier bad line is overridden": prepend(PWQUALITY, "minlen = 8\n"),
        "a commented bad value": append(PWQUALITY, "# minlen = 8\n"),
        "minclass=4": setkey(PWQUALITY, "minclass", "4", "="),
        f"minlen={length + 10}": setkey(PWQUALITY, "minlen", str(length + 10), "="),
    }
    base = linux.by_id("linux-pwquality")
    return dataclasses.replace(base, rego=rego, ok=ok, bad=bad, near=near)


PWQUALITY_KIND = Kind(
    check="linux-pwquality",
    params=(
        Param("the minimum password length", ("minlen", "password_min_length", "pwquality.minlen")),
        Param(
            "the minimum number of character classes",
            ("minclass", "password_min_classes", "pwquality.minclass"),
        ),
    ),
    rules=(
        "Ensure password creation requirements are configured (CIS 5.4.1) to the "
        "organization's standard: in /etc/security/pwquality.conf minlen (default 8) must be at "
        "least the organization's minimum length and minclass (default 0) at least its minimum "
        "number of character classes; the last line of a key counts.",
        "pam_pwquality (CIS 5.4.1) enforces the organization's password rules: the minlen and "
        "minclass that /etc/security/pwquality.conf sets (last line wins; unset minlen is 8, "
        "unset minclass 0) may not be below the organization's minimum length and classes.",
    ),
    draw=lambda rng: (str(rng.choice((15, 16, 18, 20))), str(rng.choice((3, 4)))),
    decoy=lambda rng, values: (rng.choice(("14", "12")), "2"),
    setup=lambda values: both(
        setkey(PWQUALITY, "minlen", values[0], " = "),
        setkey(PWQUALITY, "minclass", values[1], " = "),
    ),
    derive=_pwq_derive,
)


# --- faillock ---------------------------------------------------------------------------------


def _faillock_derive(values: Values) -> linux.LinuxCheck:
    deny, unlock = int(values[0]), int(values[1])

    def ok(host: Host) -> bool:
        d = linux.int_or(linux.kv_last(host, FAILLOCK, "deny"), 3)
        u = linux.int_or(linux.kv_last(host, FAILLOCK, "unlock_time"), 600)
        return d is not None and 1 <= d <= deny and u is not None and (u == 0 or u >= unlock)

    rego = f"""conf := "/etc/security/faillock.conf"

violations contains "deny" if {{
	deny := to_number(value_or(conf, "deny", "3"))
	not deny_ok(deny)
}}

deny_ok(deny) if {{
	deny >= 1
	deny <= {deny}
}}

violations contains "unlock_time" if {{
	unlock := to_number(value_or(conf, "unlock_time", "600"))
	unlock != 0
	unlock < {unlock}
}}"""
    bad = {
        "deny 10": setkey(FAILLOCK, "deny", "10", " = "),
        "deny 5, the catalog's limit": setkey(FAILLOCK, "deny", "5", " = "),
        "unlock_time 900, the catalog's minimum": setkey(FAILLOCK, "unlock_time", "900", " = "),
        f"unlock_time {unlock - 300}": setkey(FAILLOCK, "unlock_time", str(unlock - 300), " = "),
        f"a later deny = {deny + 1}": append(FAILLOCK, f"deny = {deny + 1}\n"),
    }
    near = {
        f"deny {deny - 1}": setkey(FAILLOCK, "deny", str(deny - 1), " = "),
        "unlock_time 0": setkey(FAILLOCK, "unlock_time", "0", " = "),
        f"unlock_time {unlock + 600}": setkey(FAILLOCK, "unlock_time", str(unlock + 600), " = "),
        "a commented bad value": append(FAILLOCK, "# deny = 10\n"),
        "an earlier bad line is overridden": prepend(FAILLOCK, "deny = 10\n"),
    }
    base = linux.by_id("linux-faillock")
    return dataclasses.replace(base, rego=rego, ok=ok, bad=bad, near=near)


FAILLOCK_KIND = Kind(
    check="linux-faillock",
    params=(
        Param(
            "the failed attempts that lock an account",
            ("deny", "faillock_deny", "lockout.attempts"),
        ),
        Param(
            "the seconds an account stays locked",
            ("unlock_time", "faillock_unlock_seconds", "lockout.duration"),
        ),
    ),
    rules=(
        "Ensure lockout for failed password attempts is configured (CIS 5.4.2) as the "
        "organization requires: pam_faillock (/etc/security/faillock.conf, default deny 3 and "
        "unlock_time 600, the last line of a key counts) must lock an account after no more "
        "failed attempts than the organization's number (and at least 1), and keep it locked "
        "for at least the organization's time or until an administrator unlocks it "
        "(unlock_time 0).",
        "Account lockout (CIS 5.4.2) uses the organization's numbers: faillock.conf's deny "
        "(default 3) must be between 1 and the organization's attempts, and its unlock_time "
        "(default 600) 0 or at least the organization's lock time; the last line of a key "
        "counts.",
    ),
    draw=lambda rng: (str(rng.choice((3, 4))), str(rng.choice((1200, 1800, 3600)))),
    decoy=lambda rng, values: ("5", "900"),
    setup=lambda values: both(
        setkey(FAILLOCK, "deny", values[0], " = "),
        setkey(FAILLOCK, "unlock_time", values[1], " = "),
    ),
    derive=_faillock_derive,
)


# --- sshd -------------------------------------------------------------------------------------

CIPHERS = (
    "aes256-gcm@openssh.com",
    "aes128-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes256-ctr",
    "aes192-ctr",
    "aes128-ctr",
)
CRYPTO = f"{SSHD_D}/10-crypto.conf"


def _sshd_draw(rng: random.Random) -> Values:
    ciphers = rng.sample(CIPHERS, rng.choice((2, 3)))
    return (str(rng.choice((2, 3))), str(rng.choice((60, 120, 180, 240))), ",".join(ciphers))


def _sshd_setup(values: Values) -> Mutation:
    tries, alive, ciphers = values

    def mutate(host: Host) -> None:
        text = host[SSHD].content
        text = re.sub(r"^MaxAuthTries .*$", f"MaxAuthTries {tries}", text, flags=re.M)
        text = re.sub(r"^ClientAliveInterval .*$", f"ClientAliveInterval {alive}", text, flags=re.M)
        host[SSHD] = dataclasses.replace(host[SSHD], content=text)
        host[CRYPTO] = HostFile(f"Ciphers {ciphers}\n", 0o600)

    return mutate


def _sshd_derive(values: Values) -> linux.LinuxCheck:
    tries, alive = int(values[0]), int(values[1])
    approved = values[2].split(",")
    outside = [c for c in CIPHERS if c not in approved] + ["aes128-cbc"]
    base = linux.by_id("linux-sshd")

    def ok(host: Host) -> bool:
        if not linux.sshd_ok(host):
            return False
        cfg = linux.sshd_effective(host)
        n = linux.int_or(cfg.get("maxauthtries", "6"), 6)
        a = linux.int_or(cfg.get("clientaliveinterval", "0"), 0)
        used = cfg.get("ciphers")
        return (
            n is not None
            and n <= tries
            and a is not None
            and 1 <= a <= alive
            and used is not None
            and all(c in approved for c in used.split(","))
        )

    rego = base.rego.replace("<= 4", f"<= {tries}")
    if rego == base.rego:
        raise ValueError("linux-sshd: the reference policy no longer names MaxAuthTries 4")
    rego += f"""

approved_ciphers := {_rego_set(approved)}

alive_ok if {{
	n := to_number(setting("clientaliveinterval"))
	n >= 1
	n <= {alive}
}}

violations contains "clientaliveinterval" if not alive_ok

violations contains "ciphers" if not effective("ciphers")

violations contains sprintf("cipher %s", [c]) if {{
	some c in split(effective("ciphers"), ",")
	not approved_ciphers[c]
}}"""

    def crypto(cs: list[str]) -> Mutation:
        return put(CRYPTO, HostFile(f"Ciphers {','.join(cs)}\n", 0o600))

    bad = {
        "PermitRootLogin yes": edit(
            SSHD, lambda t: t.replace("PermitRootLogin no", "PermitRootLogin yes")
        ),
        "MaxAuthTries 4, the catalog's limit": edit(
            SSHD, lambda t: re.sub(r"^MaxAuthTries .*$", "MaxAuthTries 4", t, flags=re.M)
        ),
        "ClientAliveInterval 300": edit(
            SSHD,
            lambda t: re.sub(r"^ClientAliveInterval .*$", "ClientAliveInterval 300", t, flags=re.M),
        ),
        f"the ciphers add {outside[0]}": crypto([*approved, outside[0]]),
        f"an earlier drop-in allows {outside[1]}": put(
            f"{SSHD_D}/05-legacy.conf", HostFile(f"Ciphers {outside[1]},{approved[0]}\n", 0o600)
        ),
    }
    near = {
        "MaxAuthTries 1": edit(
            SSHD, lambda t: re.sub(r"^MaxAuthTries .*$", "MaxAuthTries 1", t, flags=re.M)
        ),
        f"only {approved[-1]}": crypto([approved[-1]]),
        f"ClientAliveInterval {alive // 2}": edit(
            SSHD,
            lambda t: re.sub(
                r"^ClientAliveInterval .*$", f"clientaliveinterval {alive // 2}", t, flags=re.M
            ),
        ),
        f"a later drop-in allows {outside[0]} (the first value counts)": put(
            f"{SSHD_D}/90-extra.conf", HostFile(f"Ciphers {outside[0]}\n", 0o600)
        ),
        "MaxAuthTries 6 inside a Match block": append(
            SSHD, "Match User backup\n    MaxAuthTries 6\n"
        ),
    }
    return dataclasses.replace(base, rego=rego, ok=ok, bad=bad, near=near)


SSHD_KIND = Kind(
    check="linux-sshd",
    params=(
        Param(
            "the highest MaxAuthTries allowed",
            ("max_auth_tries", "sshd_max_auth_tries", "ssh.maxauthtries"),
        ),
        Param(
            "the longest ClientAliveInterval in seconds",
            ("client_alive_max", "sshd_client_alive_interval", "ssh.clientaliveinterval"),
        ),
        Param(
            "the approved ciphers",
            ("approved_ciphers", "sshd_ciphers", "ssh.ciphers"),
            is_list=True,
        ),
    ),
    rules=(
        "Ensure the SSH server is configured securely (CIS 5.2) to the organization's "
        "standard. The SSH daemon's effective global configuration (sshd_config and the files "
        "it includes; the first value of a keyword counts, Match blocks are not global) must "
        "have PermitRootLogin no, PermitEmptyPasswords no, X11Forwarding no, LogLevel INFO or "
        "VERBOSE, HostbasedAuthentication no and IgnoreRhosts yes; MaxAuthTries (default 6) no "
        "higher than the organization's limit; ClientAliveInterval (default 0) between 1 and "
        "the organization's longest interval; and a Ciphers setting naming only approved "
        "ciphers.",
        "The SSH daemon (CIS 5.2) must follow the organization's baseline: in its effective "
        "global configuration (includes expanded in place, first value wins, nothing from the "
        "first Match line on) PermitRootLogin, PermitEmptyPasswords, X11Forwarding and "
        "HostbasedAuthentication are no, IgnoreRhosts is yes, LogLevel is INFO or VERBOSE, "
        "MaxAuthTries (default 6) is at most the organization's number, ClientAliveInterval "
        "(default 0) is 1 or more and at most its interval, and Ciphers is set and lists no "
        "cipher outside the organization's approved ones.",
    ),
    draw=_sshd_draw,
    decoy=lambda rng, values: ("4", "300", ",".join(CIPHERS)),
    setup=_sshd_setup,
    derive=_sshd_derive,
)


# --- sudo -------------------------------------------------------------------------------------

SUDO_LOGS = (
    "/var/log/sudo.log",
    "/var/log/sudo/sudo.log",
    "/var/log/audit/sudo.log",
    "/var/log/secure/sudo-commands.log",
)


def sudo_logfile(host: Host) -> str | None:
    """The logfile sudo's effective Defaults set (includes read in place; the last wins)."""
    found: str | None = None
    for opt in linux.sudo_defaults(host):
        if opt.startswith("logfile="):
            found = opt[len("logfile=") :].strip('"')
    return found


def _sudo_derive(values: Values) -> linux.LinuxCheck:
    path = values[0]
    other = next(p for p in SUDO_LOGS if p != path)
    base = linux.by_id("linux-sudo-use-pty")

    def ok(host: Host) -> bool:
        return linux.sudo_use_pty(host) and sudo_logfile(host) == path

    rego = (
        base.rego
        + f"""
logfiles := [trim(substring(opt, 8, -1), `"`) |
	some line in lines("/etc/sudoers")
	some l in expand(line)
	t := trim_space(l)
	parts := regex.split(`\\s+`, t)
	parts[0] == "Defaults"
	some opt in regex.split(`[\\s,]+`, trim_space(substring(t, 8, -1)))
	startswith(opt, "logfile=")
]

violations contains "no logfile" if count(logfiles) == 0

violations contains "another logfile" if logfiles[count(logfiles) - 1] != {json.dumps(path)}
"""
    )
    main = f'Defaults\tlogfile="{path}"\n'

    def dropin(name: str, text: str) -> Mutation:
        return put(f"/etc/sudoers.d/{name}", HostFile(text, 0o440))

    bad = {
        "use_pty removed": edit(SUDOERS, lambda t: t.replace("Defaults\tuse_pty\n", "")),
        "the logfile line removed": edit(SUDOERS, lambda t: t.replace(main, "")),
        f"logging to {other}": edit(SUDOERS, lambda t: t.replace(path, other)),
        f"a later drop-in logs to {other}": dropin("zz-logging", f"Defaults logfile={other}\n"),
        "the logfile only in a file sudo skips": both(
            edit(SUDOERS, lambda t: t.replace(main, "")),
            dropin("logging.conf", f'Defaults logfile="{path}"\n'),
        ),
    }
    near = {
        "in a list with use_pty": edit(
            SUDOERS,
            lambda t: t.replace(main, "").replace(
                "Defaults\tuse_pty", f"Defaults\tuse_pty,logfile={path}"
            ),
        ),
        f"an earlier logfile {other} is overridden": edit(
            SUDOERS, lambda t: f"Defaults logfile={other}\n" + t
        ),
        "the logfile in sudoers.d": both(
            edit(SUDOERS, lambda t: t.replace(main, "")),
            dropin("20-logging", f'Defaults\tlogfile="{path}"\n'),
        ),
        f"a skipped file logs to {other}": dropin("old.conf", f"Defaults logfile={other}\n"),
        "log_input too": edit(SUDOERS, lambda t: t + "Defaults\tlog_input\n"),
    }
    return dataclasses.replace(base, rego=rego, ok=ok, bad=bad, near=near)


SUDO_KIND = Kind(
    check="linux-sudo-use-pty",
    params=(
        Param("the sudo log file", ("sudo_logfile", "sudo.log_path", "privileged_command_log")),
    ),
    rules=(
        "Ensure sudo commands use pty and sudo logs to the organization's file (CIS 5.3.2, "
        "5.3.3): sudo's effective Defaults, from /etc/sudoers and the files it includes (the "
        "last setting counts), must set use_pty, and their logfile must be the organization's "
        "sudo log file.",
        "Sudo (CIS 5.3.2, 5.3.3) runs commands in a pseudo-terminal and logs where the "
        "organization says: the effective Defaults of /etc/sudoers and what it includes (last "
        "one wins) enable use_pty and set logfile to the organization's sudo log file.",
    ),
    draw=lambda rng: (rng.choice(SUDO_LOGS),),
    decoy=lambda rng, values: (rng.choice([p for p in SUDO_LOGS if p != values[0]]),),
    setup=lambda values: edit(
        SUDOERS,
        lambda t: t.replace(
            "Defaults\tuse_pty\n", f'Defaults\tuse_pty\nDefaults\tlogfile="{values[0]}"\n'
        ),
    ),
    derive=_sudo_derive,
)


KINDS: dict[str, Kind] = {
    k.check: k for k in (AGING, UMASK, PWQUALITY_KIND, FAILLOCK_KIND, SSHD_KIND, SUDO_KIND)
}
