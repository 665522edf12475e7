"""An honest heuristic CISO agent: a keyword-to-Rego table, no model, no ground truth.

It reads only what any agent gets: the goal text, the tool list and the task context (the task
view on standard input). It picks artifacts from a table keyed on the requirement's words,
the way an engineer would script the common CIS checks in an afternoon, and submits them.
Run it sandboxed::

    itbench evaluate --agent command \\
        --option agent_command='python3 benchmarks/agents/ciso_heuristic.py' -s 'ciso/*'

Only the standard library of the system's python3 is used (that is all the sandbox has); tools
are called over the protocol of ``itbench/toolclient.py``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.request
from typing import Any

HEAD = "package compliance\n\nimport rego.v1\n\n"

K8S_HELPERS = """
ident(o) := {"kind": o.kind, "namespace": object.get(o.metadata, "namespace", ""), "name": o.metadata.name}

pod_spec(o) := o.spec if o.kind == "Pod"

pod_spec(o) := o.spec.template.spec if o.spec.template.spec

containers(spec) := array.concat(object.get(spec, "containers", []), object.get(spec, "initContainers", []))

builtin_role(o) if o.metadata.name in {"admin", "edit", "view", "cluster-admin"}

builtin_role(o) if startswith(o.metadata.name, "system:")
"""


def _wl(cond: str) -> str:
    return f"violations contains ident(o) if {{\n\tsome o in input.items\n\tspec := pod_spec(o)\n{cond}\n}}\n"


def _ctr(cond: str) -> str:
    return _wl(f"\tsome c in containers(spec)\n{cond}")


def _roles(cond: str) -> str:
    return (
        "violations contains ident(o) if {\n\tsome o in input.items\n"
        '\to.kind in {"Role", "ClusterRole"}\n\tnot builtin_role(o)\n\tsome r in o.rules\n'
        f"{cond}\n}}\n"
    )


#: (words that must all occur in the requirement, rules), most specific first.
_K8S: list[tuple[tuple[str, ...], str]] = [
    (
        ("host", "namespace"),
        "\n".join(_wl(f"\tspec.{f} == true") for f in ("hostNetwork", "hostPID", "hostIPC")),
    ),
    (("privilegeescalation",), _ctr("\tnot c.securityContext.allowPrivilegeEscalation == false")),
    (("privileged",), _ctr("\tc.securityContext.privileged == true")),
    (
        ("root",),
        _ctr(
            "\tnot c.securityContext.runAsNonRoot == true\n\tnot spec.securityContext.runAsNonRoot == true"
        )
        + _ctr("\tc.securityContext.runAsUser == 0")
        + _wl("\tspec.securityContext.runAsUser == 0"),
    ),
    (
        ("capabilities assigned",),
        _ctr('\tcount(object.get(c, ["securityContext", "capabilities", "add"], [])) > 0')
        + _ctr('\tnot "ALL" in object.get(c, ["securityContext", "capabilities", "drop"], [])'),
    ),
    (
        ("added capabilities",),
        _ctr('\tsome cap in c.securityContext.capabilities.add\n\tcap != "NET_BIND_SERVICE"'),
    ),
    (("hostpath",), _wl("\tsome v in spec.volumes\n\tv.hostPath")),
    (
        ("seccomp",),
        _wl('\tnot spec.securityContext.seccompProfile.type in {"RuntimeDefault", "Localhost"}'),
    ),
    (("service account tokens",), _wl("\tnot spec.automountServiceAccountToken == false")),
    (
        ("default service account",),
        _wl('\tobject.get(spec, "serviceAccountName", "default") == "default"'),
    ),
    (
        ("default namespace",),
        'violations contains ident(o) if {\n\tsome o in input.items\n\to.metadata.namespace == "default"\n'
        '\tnot o.metadata.name == "kubernetes"\n}\n',
    ),
    (
        ("pinned",),
        _ctr('\tnot contains(c.image, "@")\n\tendswith(c.image, ":latest")')
        + _ctr(
            '\tnot contains(c.image, "@")\n\tparts := split(c.image, "/")\n\tnot contains(parts[count(parts) - 1], ":")'
        ),
    ),
    (("limit",), _ctr("\tnot c.resources.limits.cpu") + _ctr("\tnot c.resources.limits.memory")),
    (
        ("secrets as environment",),
        _ctr("\tsome e in c.env\n\te.valueFrom.secretKeyRef")
        + _ctr("\tsome f in c.envFrom\n\tf.secretRef"),
    ),
    (("hostport",), _ctr('\tsome p in c.ports\n\tobject.get(p, "hostPort", 0) > 0')),
    (("read-only",), _ctr("\tnot c.securityContext.readOnlyRootFilesystem == true")),
    (
        ("cluster-admin",),
        'violations contains ident(o) if {\n\tsome o in input.items\n\to.kind in {"ClusterRoleBinding", "RoleBinding"}\n'
        '\to.roleRef.name == "cluster-admin"\n\tsome s in o.subjects\n\ts.name != "system:masters"\n}\n',
    ),
    (
        ("access to secrets",),
        _roles('\t"secrets" in r.resources\n\tsome v in r.verbs\n\tv in {"get", "list", "watch"}'),
    ),
    (
        ("wildcard",),
        _roles('\tsome k in ["apiGroups", "resources", "verbs"]\n\t"*" in object.get(r, k, [])'),
    ),
    (("create pods",), _roles('\t"pods" in r.resources\n\t"create" in r.verbs')),
    (("impersonate",), _roles('\tsome v in r.verbs\n\tv in {"bind", "impersonate", "escalate"}')),
    (
        ("network policies",),
        'violations contains ident(o) if {\n\tsome o in input.items\n\to.kind == "Namespace"\n'
        '\tnot startswith(o.metadata.name, "kube-")\n\tnot has_policy(o.metadata.name)\n}\n\n'
        'has_policy(ns) if {\n\tsome p in input.items\n\tp.kind == "NetworkPolicy"\n\tp.metadata.namespace == ns\n}\n',
    ),
    (
        ("external ip",),
        'violations contains ident(o) if {\n\tsome o in input.items\n\to.kind == "Service"\n'
        '\tcount(object.get(o.spec, "externalIPs", [])) > 0\n}\n',
    ),
    (
        ("configmap",),
        'violations contains ident(o) if {\n\tsome o in input.items\n\to.kind == "ConfigMap"\n'
        "\tsome k, _ in o.data\n\tregex.match(`(?i)(password|secret|token|key)`, k)\n}\n",
    ),
]


_K8S_FIRST = ("read-only", "default namespace", "impersonate", "service account tokens")
K8S = sorted(
    _K8S, key=lambda e: _K8S_FIRST.index(e[0][0]) if e[0][0] in _K8S_FIRST else len(_K8S_FIRST)
)


def _k8s_policy(text: str, package: str = "compliance") -> str | None:
    squashed = text.lower().replace(" ", "")
    for words, rules in K8S:
        if all(w in text.lower() or w.replace(" ", "") in squashed for w in words):
            return f"package {package}\n\nimport rego.v1\n\n{K8S_HELPERS.strip()}\n\n{rules}"
    return None


# --- Linux ---------------------------------------------------------------------------------------


def _playbook(files: list[str], modes: list[str]) -> str:
    globs = json.dumps(files)
    stat = json.dumps(modes)
    return f"""---
- hosts: all
  gather_facts: false
  vars:
    globs: {globs}
    found: "{{{{ query('ansible.builtin.fileglob', *(globs | map('regex_replace', '^', host_root))) }}}}"
  tasks:
    - name: Stat
      ansible.builtin.stat:
        path: "{{{{ host_root }}}}{{{{ item }}}}"
      loop: {stat}
      register: stats
    - name: Evidence
      ansible.builtin.set_fact:
        evidence:
          files: "{{{{ dict(found | map('regex_replace', '^' ~ (host_root | regex_escape), '') | zip(query('ansible.builtin.file', *found, rstrip=false))) }}}}"
          modes: "{{{{ dict(stats.results | selectattr('stat.exists') | map(attribute='item') | zip(stats.results | selectattr('stat.exists') | map(attribute='stat.mode'))) }}}}"
          links: "{{{{ query('ansible.builtin.fileglob', host_root ~ '/etc/systemd/system/*.wants/*') | map('basename') | list }}}}"
"""


LINES = 'lines(p) := split(input.files[p], "\\n")\n\nwords(l) := [w | some w in regex.split(`[\\\\s=]+`, trim_space(l)); w != ""]\n\n'

_LINUX: list[tuple[tuple[str, ...], list[str], str]] = [
    (
        ("ssh",),
        ["/etc/ssh/sshd_config"],
        LINES
        + 'first(k) := vals[0] if {\n\tvals := [lower(w[1]) | some l in lines("/etc/ssh/sshd_config"); w := words(l); count(w) > 1; lower(w[0]) == k]\n\tcount(vals) > 0\n}\n\n'
        + 'violations contains k if {\n\tsome k, want in {"permitrootlogin": "no", "permitemptypasswords": "no", "x11forwarding": "no", "hostbasedauthentication": "no", "ignorerhosts": "yes"}\n\tnot first(k) == want\n}\n\n'
        + 'violations contains "loglevel" if not first("loglevel") in {"info", "verbose"}\n\n'
        + 'violations contains "maxauthtries" if not to_number(first("maxauthtries")) <= 4\n',
    ),
    (
        ("permissions",),
        [],
        "limit(p) := to_number(m) if {\n\tsome p2, m in input.limits\n\tp2 == p\n}\n\n"
        'digits(m) := [to_number(d) | some d in split(substring(m, count(m) - 3, 3), "")]\n\n'
        "violations contains p if {\n\tsome p, m in input.modes\n\tsome i, d in digits(m)\n"
        "\tlim := digits(input.limits[p])[i]\n\tbits.and(d, bits.negate(lim)) != 0\n}\n",
    ),
    (
        ("pass_max_days",),
        ["/etc/login.defs"],
        LINES
        + 'last(k) := vals[count(vals) - 1] if {\n\tvals := [w[1] | some l in lines("/etc/login.defs"); w := words(l); count(w) > 1; w[0] == k]\n\tcount(vals) > 0\n}\n\n'
        + 'violations contains "max" if not to_number(last("PASS_MAX_DAYS")) <= 365\n\n'
        + 'violations contains "min" if not to_number(last("PASS_MIN_DAYS")) >= 1\n\n'
        + 'violations contains "warn" if not to_number(last("PASS_WARN_AGE")) >= 7\n',
    ),
    (
        ("umask",),
        ["/etc/login.defs"],
        LINES
        + 'last(k) := vals[count(vals) - 1] if {\n\tvals := [w[1] | some l in lines("/etc/login.defs"); w := words(l); count(w) > 1; w[0] == k]\n\tcount(vals) > 0\n}\n\n'
        + 'violations contains "umask" if not last("UMASK") in {"027", "0027", "077", "0077", "037", "0037"}\n',
    ),
    (
        ("net.ipv4.ip_forward",),
        ["/etc/sysctl.d/*.conf", "/etc/sysctl.conf"],
        LINES
        + 'files := array.concat(sort([p | some p, _ in input.files; startswith(p, "/etc/sysctl.d/")]), ["/etc/sysctl.conf"])\n\n'
        + 'value(k) := vals[count(vals) - 1] if {\n\tvals := [w[1] | some f in files; input.files[f]; some l in lines(f); not startswith(trim_space(l), "#"); w := words(l); count(w) > 1; w[0] == k]\n\tcount(vals) > 0\n}\n\n'
        + 'violations contains k if {\n\tsome k, v in {"net.ipv4.ip_forward": "0", "net.ipv4.conf.all.accept_redirects": "0", "net.ipv4.conf.all.send_redirects": "0", "kernel.randomize_va_space": "2"}\n\tnot value(k) == v\n}\n',
    ),
    (
        ("uid 0",),
        ["/etc/passwd"],
        'violations contains f[0] if {\n\tsome l in split(input.files["/etc/passwd"], "\\n")\n\tf := split(l, ":")\n\tcount(f) > 2\n\tf[2] == "0"\n\tf[0] != "root"\n}\n',
    ),
    (
        ("password fields",),
        ["/etc/shadow"],
        'violations contains f[0] if {\n\tsome l in split(input.files["/etc/shadow"], "\\n")\n\tf := split(l, ":")\n\tcount(f) > 1\n\tf[1] == ""\n}\n',
    ),
    (
        ("minlen",),
        ["/etc/security/pwquality.conf"],
        LINES
        + 'vals := [w[1] | some l in lines("/etc/security/pwquality.conf"); w := words(l); count(w) > 1; w[0] == "minlen"]\n\n'
        + 'violations contains "minlen" if count(vals) == 0\n\nviolations contains "minlen" if to_number(vals[count(vals) - 1]) < 14\n',
    ),
    (
        ("faillock",),
        ["/etc/security/faillock.conf"],
        LINES
        + 'last(k) := vals[count(vals) - 1] if {\n\tvals := [w[1] | some l in lines("/etc/security/faillock.conf"); w := words(l); count(w) > 1; w[0] == k]\n\tcount(vals) > 0\n}\n\n'
        + 'violations contains "deny" if not to_number(last("deny")) <= 5\n\n'
        + 'violations contains "unlock" if not to_number(last("unlock_time")) >= 900\n',
    ),
    (
        ("audit",),
        ["/etc/audit/rules.d/*.rules"],
        'watched(p) if {\n\tsome f, t in input.files\n\tsome l in split(t, "\\n")\n\tw := regex.split(`\\\\s+`, trim_space(l))\n\tcount(w) >= 4\n\tw[0] == "-w"\n\tw[1] == p\n\tcontains(w[3], "w")\n\tcontains(w[3], "a")\n}\n\n'
        'violations contains p if {\n\tsome p in ["/etc/group", "/etc/passwd", "/etc/gshadow", "/etc/shadow"]\n\tnot watched(p)\n}\n',
    ),
    (
        ("use_pty",),
        ["/etc/sudoers", "/etc/sudoers.d/*"],
        'on if {\n\tsome f, t in input.files\n\tsome l in split(t, "\\n")\n\tstartswith(trim_space(l), "Defaults")\n\tregex.match(`(^|[\\\\s,])use_pty`, l)\n}\n\n'
        'violations contains "use_pty" if not on\n',
    ),
    (
        ("installed",),
        ["/var/lib/dpkg/status"],
        'violations contains name if {\n\tsome stanza in split(input.files["/var/lib/dpkg/status"], "\\n\\n")\n'
        '\tsome l in split(stanza, "\\n")\n\tstartswith(l, "Package: ")\n\tname := substring(l, 9, -1)\n'
        '\tname in {"xinetd", "openbsd-inetd", "telnetd", "inetutils-telnetd", "rsh-server", "nis", "tftpd-hpa", "talkd"}\n'
        '\tcontains(stanza, "installed")\n}\n',
    ),
    (
        ("systemd",),
        [],
        'violations contains u if {\n\tsome u in input.links\n\tu in {"avahi-daemon.service", "avahi-daemon.socket", "cups.service", "cups.socket", "rsync.service", "telnet.socket"}\n}\n\n'
        'violations contains "auditd" if not "auditd.service" in input.links\n',
    ),
    (
        ("listening",),
        ["/proc/net/tcp", "/proc/net/tcp6"],
        'violations contains l if {\n\tsome f, t in input.files\n\tsome l in split(t, "\\n")\n'
        '\tw := regex.split(`\\\\s+`, trim_space(l))\n\tcount(w) > 3\n\tw[3] == "0A"\n\tlocal := split(w[1], ":")\n'
        '\tnot local[0] == "0100007F"\n\tnot local[0] == "00000000000000000000000001000000"\n\tnot local[1] in {"0016", "01BB"}\n}\n',
    ),
    (
        ("modprobe",),
        ["/proc/modules", "/etc/modprobe.d/*.conf"],
        'disabled(m) if {\n\tsome f, t in input.files\n\tstartswith(f, "/etc/modprobe.d/")\n\tsome l in split(t, "\\n")\n'
        '\tw := regex.split(`\\\\s+`, trim_space(l))\n\tw[0] == "install"\n\tw[1] == m\n}\n\n'
        'violations contains m if {\n\tsome m in ["cramfs", "freevxfs", "hfs", "hfsplus", "udf", "usb-storage"]\n\tnot disabled(m)\n}\n\n'
        'violations contains m if {\n\tsome m in ["cramfs", "freevxfs", "hfs", "hfsplus", "udf", "usb-storage"]\n\tcontains(input.files["/proc/modules"], m)\n}\n',
    ),
]

_FIRST = ("permissions", "systemd", "modprobe", "listening", "installed")
LINUX = sorted(_LINUX, key=lambda e: _FIRST.index(e[0][0]) if e[0][0] in _FIRST else len(_FIRST))

# --- cloud ------------------------------------------------------------------------------------------

COLLECTOR = """import json, boto3
from botocore.exceptions import ClientError
REGIONS = {regions!r}
out = {{}}
s3 = boto3.client("s3")
buckets = []
for b in s3.list_buckets()["Buckets"]:
    n = b["Name"]
    e = {{"name": n, "uris": [g["Grantee"].get("URI") for g in s3.get_bucket_acl(Bucket=n)["Grants"]]}}
    try:
        e["block"] = s3.get_public_access_block(Bucket=n)["PublicAccessBlockConfiguration"]
    except ClientError:
        e["block"] = {{}}
    try:
        e["sse"] = s3.get_bucket_encryption(Bucket=n)["ServerSideEncryptionConfiguration"]["Rules"][0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"]
    except ClientError:
        e["sse"] = None
    e["versioning"] = s3.get_bucket_versioning(Bucket=n).get("Status")
    buckets.append(e)
out["buckets"] = buckets
out["rules"] = []
out["volumes"] = []
out["ebs_default"] = {{}}
for r in REGIONS:
    ec2 = boto3.client("ec2", region_name=r)
    for sg in ec2.describe_security_groups()["SecurityGroups"]:
        for p in sg.get("IpPermissions", []):
            out["rules"].append({{"id": sg["GroupId"], "from": p.get("FromPort"), "to": p.get("ToPort"),
                "cidrs": [x["CidrIp"] for x in p.get("IpRanges", [])] + [x["CidrIpv6"] for x in p.get("Ipv6Ranges", [])]}})
    out["volumes"] += [{{"id": v["VolumeId"], "region": r, "encrypted": v["Encrypted"]}} for v in ec2.describe_volumes()["Volumes"]]
    out["ebs_default"][r] = ec2.get_ebs_encryption_by_default()["EbsEncryptionByDefault"]
iam = boto3.client("iam")
users = []
for u in iam.list_users()["Users"]:
    n = u["UserName"]
    try:
        iam.get_login_profile(UserName=n)
        console = True
    except ClientError:
        console = False
    users.append({{"name": n, "console": console, "mfa": len(iam.list_mfa_devices(UserName=n)["MFADevices"]),
        "active": len([k for k in iam.list_access_keys(UserName=n)["AccessKeyMetadata"] if k["Status"] == "Active"])}})
out["users"] = users
try:
    out["password_policy"] = iam.get_account_password_policy()["PasswordPolicy"]
except ClientError:
    out["password_policy"] = {{}}
ct = boto3.client("cloudtrail")
out["trails"] = [{{"multi": t.get("IsMultiRegionTrail"), "logging": ct.get_trail_status(Name=t["TrailARN"]).get("IsLogging")}}
    for t in ct.describe_trails()["trailList"]]
print(json.dumps(out))
"""

CLOUD: list[tuple[tuple[str, ...], str]] = [
    (
        ("acl",),
        'violations contains b.name if {\n\tsome b in input.buckets\n\tsome u in b.uris\n\tu in {"http://acs.amazonaws.com/groups/global/AllUsers", "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"}\n}\n',
    ),
    (
        ("block public access",),
        'violations contains b.name if {\n\tsome b in input.buckets\n\tsome k in ["BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets"]\n\tnot b.block[k] == true\n}\n',
    ),
    (
        ("kms",),
        'violations contains b.name if {\n\tsome b in input.buckets\n\tb.sse != "aws:kms"\n}\n\nviolations contains b.name if {\n\tsome b in input.buckets\n\tb.sse == null\n}\n',
    ),
    (
        ("versioning",),
        'violations contains b.name if {\n\tsome b in input.buckets\n\tnot b.versioning == "Enabled"\n}\n',
    ),
    (
        ("ebs",),
        "violations contains v.id if {\n\tsome v in input.volumes\n\tnot v.encrypted\n}\n\nviolations contains v.region if {\n\tsome v in input.volumes\n\tnot input.ebs_default[v.region]\n}\n",
    ),
    (
        ("administration ports",),
        'violations contains r.id if {\n\tsome r in input.rules\n\tsome c in r.cidrs\n\tc in {"0.0.0.0/0", "::/0"}\n\tsome p in [22, 3389]\n\tr.from <= p\n\tp <= r.to\n}\n',
    ),
    (
        ("multi-factor",),
        "violations contains u.name if {\n\tsome u in input.users\n\tu.console\n\tu.mfa == 0\n}\n",
    ),
    (
        ("access key",),
        "violations contains u.name if {\n\tsome u in input.users\n\tu.active > 1\n}\n",
    ),
    (
        ("cloudtrail",),
        'violations contains "trail" if {\n\tnot ok\n}\n\nok if {\n\tsome t in input.trails\n\tt.multi\n\tt.logging\n}\n',
    ),
    (
        ("password policy",),
        'violations contains "length" if {\n\tnot input.password_policy.MinimumPasswordLength >= 14\n}\n',
    ),
]


def pick(table: list[tuple[tuple[str, ...], Any]], text: str) -> Any:
    """The first entry whose words all occur in ``text``."""
    low = text.lower()
    for words, value in table:
        if all(w in low for w in words):
            return value
    return None


class Tools:
    """The trial's tool server (protocol of itbench/toolclient.py)."""

    def __init__(self) -> None:
        self.url = os.environ["ITBENCH_TOOLS_URL"].rstrip("/")
        self.token = os.environ["ITBENCH_TOOLS_TOKEN"]

    def call(self, tool: str, **arguments: Any) -> Any:
        """Call ``tool``; its result, or None when it failed."""
        req = urllib.request.Request(
            self.url + "/call",
            data=json.dumps({"tool": tool, "arguments": arguments}).encode(),
            method="POST",
        )
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=300) as resp:  # loopback
            body = json.loads(resp.read())
        return body.get("result") if body.get("ok") else None


def requirement(task: dict[str, Any]) -> str:
    """The requirement: from the task context, else the goal."""
    return str((task.get("context") or {}).get("requirement") or task.get("goal") or "")


def solve(task: dict[str, Any], tools: Tools) -> dict[str, Any]:
    """Artifacts for the task, chosen from the tables."""
    names = {t["name"] for t in task.get("tools", [])}
    text = requirement(task)
    if "read_policies" in names:
        return update(text, tools)
    if "kubectl_get" in names:
        policy = _k8s_policy(text)
        if policy:
            tools.call("evaluate_policy", policy=policy)
        return {"policy": policy} if policy else {}
    if "run_collector" in names:
        regions = (task.get("context") or {}).get("regions") or ["us-east-1"]
        body = pick(CLOUD, text)
        collector = COLLECTOR.format(regions=list(regions))
        tools.call("run_collector", script=collector)
        return {"collector": collector, "policy": HEAD + body} if body else {}
    entry = None
    for words, files, body in LINUX:
        if all(w in text.lower() for w in words):
            entry = (files, body)
            break
    if entry is None:
        return {}
    files, body = entry
    limits = {p: m for p, m in re.findall(r"(/etc/[\w./-]+) (0[0-7]{3})", text)}
    modes = list(limits)
    playbook = _playbook(files or ["/etc/hostname"], modes)
    if limits:
        body = body.replace("input.limits", json.dumps(limits))
    tools.call("run_playbook", playbook=playbook)
    return {"playbook": playbook, "policy": HEAD + body}


def update(text: str, tools: Tools) -> dict[str, Any]:
    """Rewrite the policy of the set whose requirement shares the most words with ``text``."""
    policies = tools.call("read_policies") or {}
    words = set(re.findall(r"[a-z]{4,}", text.lower()))
    best, score = None, -1
    for name, source in policies.items():
        first = source.split("\n", 1)[0].lower()
        overlap = len(words & set(re.findall(r"[a-z]{4,}", first)))
        if overlap > score:
            best, score = name, overlap
    out = dict(policies)
    if best is not None:
        package = re.search(r"^package\s+(\S+)", policies[best], re.MULTILINE)
        policy = _k8s_policy(text, package.group(1) if package else "compliance")
        if policy:
            out[best] = policy
    return {"policies": out}


def main() -> int:
    """Read the task, solve, print the submission."""
    task = json.load(sys.stdin)
    print(json.dumps(solve(task, Tools())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
