"""The oracle: the library's reference artifacts for the scenario's check."""

from __future__ import annotations

from itbench import TaskView, Toolbox, ToolError
from itbench_ciso.spec import CisoSpec, CisoSubmission


def reference(spec: CisoSpec) -> CisoSubmission:
    """The reference submission of ``spec`` (reads the ground truth)."""
    from itbench_ciso.checks import all_checks

    check = all_checks()[spec.check]
    if spec.family == "kubernetes":
        return CisoSubmission(policy=check.policy())
    if spec.family == "policy-update":
        from itbench_ciso.families.kubernetes import updated_set

        assert spec.changed is not None
        return CisoSubmission(policies=updated_set(spec.policy_set, spec.changed, spec.check))
    if spec.family == "linux":
        from itbench_ciso.checks.linux import LinuxCheck

        assert isinstance(check, LinuxCheck)
        return CisoSubmission(playbook=check.playbook(), policy=check.policy())
    from itbench_ciso.checks.cloud import CloudCheck

    assert isinstance(check, CloudCheck)
    return CisoSubmission(collector=check.collector(), policy=check.policy())


def solve(spec: CisoSpec, task: TaskView, toolbox: Toolbox) -> CisoSubmission:
    """Submit the reference artifacts after checking that the policy compiles with the engine."""
    sub = reference(spec)
    if (
        sub.policy is not None
        and "evaluate_policy" in toolbox.tools
        and spec.family == "kubernetes"
    ):
        result = toolbox.call("evaluate_policy", policy=sub.policy)
        if not result.get("compiles"):
            raise ToolError(f"reference policy does not compile: {result.get('error')}")
    return sub
