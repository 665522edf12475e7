"""What each scenario family asks of the agent: what it does, what it submits, the contract.

One record per value of the spec's ``family``: the goal's instructions and the task context's
contract are taken from here, and the generated reference documents them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FamilyContract:
    """The agent's side of one scenario family.

    Attributes:
        name: The family (the spec's ``family``).
        checks: The library family its ``check`` (and ``policy_set``) ids are drawn from.
        submit: The submission fields it is judged on: at least one field of every group
            must be set (a group of several fields is a choice).
        instructions: What the goal tells the agent after the requirement.
        contract: What the task context states about the artifacts and how they are run.
    """

    name: str
    checks: str
    submit: tuple[tuple[str, ...], ...]
    instructions: str
    contract: str

    def fields(self) -> list[str]:
        """Every submission field the family reads."""
        return [name for group in self.submit for name in group]

    def submission_text(self) -> str:
        """The :attr:`submit` groups in words (for the reference)."""
        parts = [
            f"`{group[0]}`" if len(group) == 1 else "either " + " or ".join(f"`{f}`" for f in group)
            for group in self.submit
        ]
        return " and ".join(parts)


KUBERNETES = FamilyContract(
    name="kubernetes",
    checks="kubernetes",
    submit=(("policy",),),
    instructions=(
        "Automate the check: write a Rego policy that returns every object of a cluster "
        "snapshot that violates the requirement, and no other object. It will be run on other "
        "clusters than the one you can inspect. The task context gives the policy contract."
    ),
    contract=(
        "Submit `policy`: a Rego v1 module (`package compliance`, `import rego.v1`). Its "
        "input is the document `kubectl get namespaces,pods,deployments,cronjobs,services,"
        "serviceaccounts,configmaps,networkpolicies,roles,rolebindings,clusterroles,"
        "clusterrolebindings --all-namespaces -o json` prints (`input.items` are the objects "
        "of every kind). It must define the set `violations` holding one entry per violating "
        'object: {"kind": ..., "namespace": ..., "name": ...} (namespace "" for cluster-scoped '
        "objects). It is judged on other clusters than the one shown: every violating object "
        "must be returned and no other. Rego is evaluated as OPA does with "
        "--strict-builtin-errors (an error of a built-in function fails the evaluation)."
    ),
)

LINUX = FamilyContract(
    name="linux",
    checks="linux",
    submit=(("playbook",), ("policy",)),
    instructions=(
        "Automate the check: write an Ansible playbook that collects the evidence from each "
        "host of the inventory as JSON, and a Rego policy that reports a violation for a host "
        "exactly when the host does not meet the requirement. Both will be run on other hosts "
        "than the ones you can inspect. The task context gives the contract."
    ),
    contract=(
        "Submit `playbook` (an Ansible playbook, YAML) and `policy` (a Rego v1 module, `package "
        "compliance`, `import rego.v1`). The harness writes an inventory (group `targets`, "
        "connection local) whose hosts carry two variables: `host_root`, the directory that stands "
        "for the host's `/` (read `{{ host_root }}/etc/...`; it is read-only), and `evidence_file`. "
        "The playbook must deliver one JSON evidence document per host: either set the host fact "
        "`evidence` (ansible.builtin.set_fact) or write the JSON to `{{ evidence_file }}`. The "
        "policy gets that document as `input` and must define the set `violations`: non-empty "
        "exactly when the host does not meet the requirement. The playbook runs with a time limit, "
        "may not use become/delegate_to/connection, and may write only inside its own run "
        "directory."
    ),
)

CLOUD = FamilyContract(
    name="cloud",
    checks="cloud",
    submit=(("policy",), ("collector", "playbook")),
    instructions=(
        "Automate the check: write a Python evidence collector (boto3 against the endpoint in "
        "the task context, JSON on stdout) and a Rego policy that reports a violation exactly "
        "when the account does not meet the requirement. Both will be run on other accounts "
        "than the one you can inspect. The task context gives the contract."
    ),
    contract=(
        "Submit `policy` (a Rego v1 module, `package compliance`, `import rego.v1`) and either "
        "`collector` (a Python 3 script) or `playbook` (an Ansible playbook). The harness runs the "
        "collector once per account with AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, "
        "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN and AWS_DEFAULT_REGION set (boto3 and the AWS "
        "CLI pick them up); it must print one JSON document, the evidence, on stdout. A playbook "
        "instead runs once, on an inventory with one host per account (connection local) whose "
        "variable `aws_environment` holds those environment variables (use it as a task's "
        "`environment`); it must set the host fact `evidence` or write the JSON to "
        "`{{ evidence_file }}`. The policy gets an account's evidence as `input` and must define "
        "the set `violations`: non-empty exactly when the account does not meet the requirement. "
        "Collectors and playbooks run with a time limit, may write only in their own run "
        "directory and reach only the endpoint. The task context lists the regions the "
        "accounts operate in."
    ),
)

POLICY_UPDATE = FamilyContract(
    name="policy-update",
    checks="kubernetes",
    submit=(("policies",),),
    instructions=(
        "The requirement above replaces an existing one. Update the policy set in your "
        "workspace: change the policy concerned so it enforces the new requirement, and leave "
        "every other policy's results unchanged. Submit the whole set."
    ),
    contract=(
        "Submit `policies`: the whole policy set as file name -> Rego source, with the "
        "same file names and packages. Each module `package compliance.<name>` defines "
        'the set `violations` of violating objects {"kind": ..., "namespace": ..., '
        '"name": ...} over the cluster snapshot (`input.items`: objects of every kind, as '
        "`kubectl get ... --all-namespaces -o json` prints them). "
        "Change the policy the new requirement concerns so that it enforces the new "
        "requirement; every other policy must keep giving exactly the same results."
    ),
)

#: Every family, by name (the order of the reference).
CONTRACTS: dict[str, FamilyContract] = {
    c.name: c for c in (KUBERNETES, LINUX, CLOUD, POLICY_UPDATE)
}
