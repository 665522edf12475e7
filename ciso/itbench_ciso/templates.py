"""Baseline templates: artifacts for common requirement wordings, chosen by keywords."""

from __future__ import annotations

from dataclasses import dataclass

from itbench import TaskView
from itbench_ciso.checks.cloud import collector_for
from itbench_ciso.checks.linux import playbook_for
from itbench_ciso.spec import CisoSubmission

_K8S_HEAD = """package compliance

import rego.v1

"""


def _pod_rule(cond: str) -> str:
    return (
        _K8S_HEAD
        + 'violations contains {"kind": "Pod", "namespace": pod.metadata.namespace, '
        + '"name": pod.metadata.name} if {\n\tsome pod in input.items\n'
        + cond
        + "\n}\n"
    )


@dataclass(frozen=True)
class Template:
    """Artifacts used when every keyword occurs in the requirement (case-insensitive)."""

    family: str
    keywords: tuple[str, ...]
    policy: str
    playbook: str | None = None
    collector: str | None = None


TEMPLATES: list[Template] = [
    Template("kubernetes", ("hostnetwork",), _pod_rule("\tpod.spec.hostNetwork == true")),
    Template("kubernetes", ("hostpid",), _pod_rule("\tpod.spec.hostPID == true")),
    Template("kubernetes", ("hostipc",), _pod_rule("\tpod.spec.hostIPC == true")),
    Template("kubernetes", ("hostpath",), _pod_rule("\tsome v in pod.spec.volumes\n\tv.hostPath")),
    # Looks only at regular containers: misses init containers.
    Template(
        "kubernetes",
        ("privileged",),
        _pod_rule("\tsome c in pod.spec.containers\n\tc.securityContext.privileged == true"),
    ),
    # Only an explicit `:latest` tag: misses untagged images.
    Template(
        "kubernetes",
        ("pinned",),
        _pod_rule('\tsome c in pod.spec.containers\n\tendswith(c.image, ":latest")'),
    ),
    Template(
        "kubernetes",
        ("default` namespace",),
        _pod_rule('\tpod.metadata.namespace == "default"'),
    ),
    # Only literal `true`: misses pods where the field is absent.
    Template(
        "kubernetes",
        ("automountserviceaccounttoken",),
        _pod_rule("\tpod.spec.automountServiceAccountToken == true"),
    ),
    Template(
        "kubernetes",
        ("secretkeyref",),
        _pod_rule("\tsome c in pod.spec.containers\n\tsome e in c.env\n\te.valueFrom.secretKeyRef"),
    ),
]


_HEAD = "package compliance\n\nimport rego.v1\n\n"

_MODE_POLICY = (
    _HEAD
    + """violations contains path if {
	some path, mode in input.modes
	bits.and(to_number(substring(mode, count(mode) - 1, 1)), 7) != 0
}
"""
)

TEMPLATES += [
    # Reads the whole file and expects the exact line: wrong on lower-case keywords, the
    # `Keyword=value` form and on a first value that differs from a later one.
    Template(
        "linux",
        ("permitrootlogin",),
        _HEAD
        + """violations contains "PermitRootLogin" if {
	not regex.match(`(?m)^PermitRootLogin\\s+no\\s*$`, input.files["/etc/ssh/sshd_config"])
}
""",
        playbook=playbook_for(("/etc/ssh/sshd_config",), (), ()),
    ),
    # Any permission for "other": right for files whose limit forbids all access by others.
    Template(
        "linux",
        ("/etc/shadow", "permissions"),
        _MODE_POLICY,
        playbook=playbook_for((), ("/etc/shadow",), ()),
    ),
    # No permission for group or others: exactly the crontab requirement.
    Template(
        "linux",
        ("/etc/crontab", "permissions"),
        _HEAD
        + """violations contains path if {
	some path, mode in input.modes
	digits := substring(mode, count(mode) - 2, 2)
	digits != "00"
}

violations contains "/etc/crontab" if not input.modes["/etc/crontab"]
""",
        playbook=playbook_for((), ("/etc/crontab",), ()),
    ),
    Template(
        "cloud",
        ("password policy",),
        _HEAD
        + """violations contains "weak" if not input.password_policy.MinimumPasswordLength >= 14
""",
        collector=collector_for(("password_policy",)),
    ),
    # Only rules that open exactly port 22: misses wide ranges and all-traffic rules.
    Template(
        "cloud",
        ("ssh",),
        _HEAD
        + """violations contains sg.id if {
	some sg in input.security_groups
	some rule in sg.ingress
	rule.from_port == 22
	"0.0.0.0/0" in rule.cidrs
}
""",
        collector=collector_for(("security_groups",)),
    ),
    Template(
        "cloud",
        ("versioning",),
        _HEAD
        + """violations contains b.name if {
	some b in input.buckets
	b.versioning == "Suspended"
}
""",
        collector=collector_for(("buckets",)),
    ),
]


def pick(task: TaskView) -> CisoSubmission | None:
    """The first template of the task's family whose keywords all occur in the goal."""
    from itbench_ciso.probes import family_of

    family = family_of(t.name for t in task.tools)
    text = task.goal.lower()
    for tpl in TEMPLATES:
        if tpl.family == family and all(k in text for k in tpl.keywords):
            return CisoSubmission(policy=tpl.policy, playbook=tpl.playbook, collector=tpl.collector)
    return None
