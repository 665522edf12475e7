"""Baseline templates: artifacts for common requirement wordings, chosen by keywords."""

from __future__ import annotations

from dataclasses import dataclass

from itbench.models import TaskView
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


def pick(task: TaskView) -> CisoSubmission | None:
    """The first template of the task's family whose keywords all occur in the goal."""
    family = str(task.context.get("family", ""))
    text = task.goal.lower()
    for tpl in TEMPLATES:
        if tpl.family == family and all(k in text for k in tpl.keywords):
            return CisoSubmission(policy=tpl.policy, playbook=tpl.playbook, collector=tpl.collector)
    return None
