"""Probe agents every CISO scenario must fail: a constant answer, and one that flags everything.

``constant`` submits fixed, plausible artifacts without looking at anything: a policy on a
field most requirements never mention and an evidence collection that gathers nothing.
``thrash`` runs the cheapest evidence collection through the tools and submits a policy that
reports a violation for every pod, host or account (for a policy set: every policy of it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from itbench import TaskView, Toolbox
from itbench_ciso.spec import CisoSubmission

_HEAD = "package compliance\n\nimport rego.v1\n\n"
_POD = '{"kind": "Pod", "namespace": pod.metadata.namespace, "name": pod.metadata.name}'

#: Pods whose images are not pulled on every start (no requirement of the library says so).
CONSTANT_POD_POLICY = (
    _HEAD
    + f"violations contains {_POD} if {{\n"
    + "\tsome pod in input.items\n\tsome c in pod.spec.containers\n"
    + '\tc.imagePullPolicy != "Always"\n}\n'
)
#: A verdict on a field an empty evidence document never has: never a violation.
CONSTANT_SYSTEM_POLICY = _HEAD + 'violations contains "weak setting" if input.weak == true\n'
#: Every object of the snapshot.
ALL_PODS_POLICY = (
    _HEAD
    + 'violations contains {"kind": o.kind, "namespace": object.get(o.metadata, "namespace", ""), '
    + '"name": o.metadata.name} if {\n\tsome o in input.items\n}\n'
)
#: Every host or account.
ALWAYS_POLICY = _HEAD + 'violations contains "non-compliant"\n'
#: Collects nothing: an empty evidence document per host or account.
EMPTY_PLAYBOOK = """---
- hosts: all
  gather_facts: false
  tasks:
    - name: Record the evidence
      ansible.builtin.set_fact:
        evidence: {}
"""
EMPTY_COLLECTOR = "print('{}')\n"

_PACKAGE = re.compile(r"^package\s+([A-Za-z_][\w.]*)", re.MULTILINE)


def family_of(tool_names: Iterable[str]) -> str:
    """The family of a trial, told by its tools."""
    names = set(tool_names)
    if "read_policies" in names:
        return "policy-update"
    if "kubectl_get" in names:
        return "kubernetes"
    if "run_collector" in names:
        return "cloud"
    return "linux"


def constant(task: TaskView) -> CisoSubmission:
    """Fixed artifacts chosen by the family alone."""
    family = family_of(t.name for t in task.tools)
    if family == "kubernetes":
        return CisoSubmission(policy=CONSTANT_POD_POLICY)
    if family == "policy-update":
        return CisoSubmission(policies={"policy.rego": CONSTANT_POD_POLICY})
    if family == "cloud":
        return CisoSubmission(collector=EMPTY_COLLECTOR, policy=CONSTANT_SYSTEM_POLICY)
    return CisoSubmission(playbook=EMPTY_PLAYBOOK, policy=CONSTANT_SYSTEM_POLICY)


def thrash(task: TaskView, toolbox: Toolbox) -> CisoSubmission:
    """The cheapest evidence collection, run once, and a policy that flags everything."""
    family = family_of(toolbox.tools)
    if family == "kubernetes":
        toolbox.call("evaluate_policy", policy=ALL_PODS_POLICY)
        return CisoSubmission(policy=ALL_PODS_POLICY)
    if family == "policy-update":
        policies = {}
        for name, source in dict(toolbox.call("read_policies")).items():
            found = _PACKAGE.search(str(source))
            package = found.group(1) if found else "compliance"
            policies[name] = ALL_PODS_POLICY.replace("package compliance", f"package {package}")
        return CisoSubmission(policies=policies)
    if family == "cloud":
        toolbox.call("run_collector", script=EMPTY_COLLECTOR)
        return CisoSubmission(collector=EMPTY_COLLECTOR, policy=ALWAYS_POLICY)
    toolbox.call("run_playbook", playbook=EMPTY_PLAYBOOK)
    return CisoSubmission(playbook=EMPTY_PLAYBOOK, policy=ALWAYS_POLICY)
