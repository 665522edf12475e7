"""The oracle: the library's reference artifacts for the scenario's check."""

from __future__ import annotations

import json
from pathlib import Path

from itbench import TaskView, Toolbox, ToolError
from itbench_ciso.spec import CisoSpec, CisoSubmission


def reference(
    spec: CisoSpec, requirement: str | None = None, workspace: Path | None = None
) -> CisoSubmission:
    """The reference submission of ``spec`` (reads the ground truth).

    Args:
        spec: The scenario.
        requirement: The requirement as the trial states it (a Kubernetes trial adds the
            organization's waivers, which the reference policy then honours).
        workspace: The trial's workspace: where the organization's values are read (from the
            visible snapshot or a document) when the requirement names a place for them.
            Without it the policy keeps the catalog's defaults.
    """
    from itbench_ciso.checks import (
        cloud,
        cloudparams,
        cloudreference,
        k8s,
        linux,
        orgparams,
        waivers,
    )

    policy = k8s.by_id(spec.check).policy() if spec.check.startswith("k8s-") else ""
    if requirement and workspace is not None and spec.check in orgparams.KINDS:
        from itbench_ciso.families.kubernetes import SNAPSHOT_FILE

        snapshot = json.loads((workspace / SNAPSHOT_FILE).read_text(encoding="utf-8"))
        values = orgparams.read(requirement, snapshot, workspace)
        if values is not None:
            policy = orgparams.policy(spec.check, values)
    if spec.family == "kubernetes":
        return CisoSubmission(policy=waivers.policy_for(requirement or "", policy))
    if spec.family == "policy-update":
        from itbench_ciso.families.kubernetes import updated_set

        assert spec.changed is not None
        return CisoSubmission(
            policies=updated_set(spec.policy_set, spec.changed, spec.check, policy)
        )
    if spec.family == "linux":
        from itbench_ciso.checks import hostparams, linuxparams

        host_check = linux.by_id(spec.check)
        hosts = sorted((workspace / "hosts").iterdir()) if workspace is not None else []
        ports = (
            hostparams.read(requirement or "", hosts[0])
            if hosts and spec.check == hostparams.CHECK
            else None
        )
        if ports is not None:
            host_check = hostparams.derive(ports)
        elif hosts:
            host_check = (
                linuxparams.derive_from(spec.check, requirement or "", hosts[0]) or host_check
            )
        return CisoSubmission(playbook=host_check.playbook(), policy=host_check.policy())
    if requirement and spec.check in cloudparams.CHECKS:
        script, rego = cloudreference.reference(spec.check, requirement, workspace)
        return CisoSubmission(collector=script, policy=rego)
    account_check = cloud.by_id(spec.check)
    return CisoSubmission(collector=account_check.collector(), policy=account_check.policy())


def solve(spec: CisoSpec, task: TaskView, toolbox: Toolbox) -> CisoSubmission:
    """Submit the reference artifacts after checking that the policy compiles with the engine."""
    sub = reference(spec, str(task.context.get("requirement") or ""), task.workspace)
    if (
        sub.policy is not None
        and "evaluate_policy" in toolbox.tools
        and spec.family == "kubernetes"
    ):
        result = toolbox.call("evaluate_policy", policy=sub.policy)
        if not result.get("compiles"):
            raise ToolError(f"reference policy does not compile: {result.get('error')}")
    return sub
