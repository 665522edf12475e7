"""Linux hosts: the agent's Ansible playbook collects evidence, its Rego policy judges it."""

from __future__ import annotations

import json
import random
import shutil
from typing import Any

import yaml

from itbench import Evaluation, Tool
from itbench_ciso.ansible import PlayOutcome, inventory, run_playbook
from itbench_ciso.checks import hostparams, linux, linuxparams
from itbench_ciso.checks.base import Variant
from itbench_ciso.contracts import LINUX
from itbench_ciso.engine import PACKAGE, RULE
from itbench_ciso.families import Runtime, timer
from itbench_ciso.scoring import evaluation, judge_verdicts, nonempty
from itbench_ciso.spec import CisoSubmission

#: Seconds a playbook may run, unless ``--option playbook_timeout=S`` says otherwise.
PLAYBOOK_TIMEOUT = 60.0


class LinuxRuntime(Runtime):
    """Visible hosts in the workspace; hidden hosts built only when judging."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.visible_hosts: list[Variant] = []
        self.last_evidence: dict[str, Any] = {}
        self.runs = 0

    @property
    def timeout(self) -> float:
        """The playbook time limit of this run."""
        return float(self.ctx.options.get("playbook_timeout", PLAYBOOK_TIMEOUT))

    #: The requirement with the organization's parameters (none until set-up draws them).
    _org_requirement = ""

    @property
    def requirement(self) -> str:
        """The requirement as this trial states it (with where its organization's values are)."""
        return self._org_requirement or self.spec.requirement

    def setup(self) -> None:
        """Build the visible hosts and their inventory in the workspace."""
        plan = self.spec.variants
        seed = self.ctx.secret_seed("ciso:org")
        org: hostparams.HostParams | linuxparams.LinuxParams | None = hostparams.draw(
            self.spec.check, random.Random(seed)
        ) or linuxparams.draw(self.spec.check, random.Random(seed))
        if org is not None:
            self._org_requirement = org.requirement()
        self.visible_hosts, self.hidden = linux.variants(
            self.spec.check,
            self.hidden_seed,
            plan.compliant,
            plan.non_compliant,
            visible_seed=self.visible_seed,
            judged=org.check() if org is not None else None,
            org=org.install() if org is not None else None,
        )
        roots = {}
        for v in self.visible_hosts:
            root = self.workspace / "hosts" / v.name
            linux.materialise(v.data, root)
            roots[v.name] = root
        self.roots = roots
        (self.workspace / "evidence").mkdir(exist_ok=True)
        host_vars = {name: {"host_root": str(root)} for name, root in roots.items()}
        (self.workspace / "inventory.yml").write_text(
            yaml.safe_dump(inventory(host_vars, str(self.workspace / "evidence")), sort_keys=True),
            encoding="utf-8",
        )

    def _run(self, playbook: str, hosts: list[Variant], label: str) -> PlayOutcome:
        """Run ``playbook`` on fresh copies of ``hosts``, shown where the visible hosts are."""
        self.runs += 1
        run = f"{label}-{self.runs}"
        trees = self.ctx.trial_dir / "playbook-runs" / f"{run}-hosts"
        shutil.rmtree(trees, ignore_errors=True)
        roots = {}
        for v in hosts:
            roots[v.name] = trees / v.name
            linux.materialise(v.data, roots[v.name])
        outcome = run_playbook(
            playbook,
            {name: {} for name in roots},
            self.ctx.trial_dir / "playbook-runs" / run,
            self.ctx.trial_dir,
            self.timeout,
            roots=roots,
            roots_at=str(self.workspace / "hosts"),
        )
        self.save(f"playbook-runs/{run}.json", json.dumps(outcome.summary(), indent=1))
        return outcome

    def tools(self) -> list[Tool]:
        """``run_playbook`` on the visible hosts and ``evaluate_policy``."""

        def run_playbook(playbook: str) -> dict[str, Any]:
            """Run an Ansible playbook (YAML text) on the visible hosts, as the harness will.

            Returns the status, each host's evidence and the end of the output.
            """
            out = self._run(playbook, self.visible_hosts, "agent")
            self.last_evidence = dict(out.evidence)
            return {
                "status": out.status,
                "rc": out.rc,
                "evidence": out.evidence,
                "problems": out.problems,
                "output": out.output,
            }

        def default_input() -> Any:
            return next(iter(self.last_evidence.values()), {})

        return [Tool.from_function(run_playbook), self.policy_tool(default_input)]

    def context(self) -> dict[str, Any]:
        """Hosts, inventory and the contract."""
        return {
            "requirement": self.requirement,
            "hosts": {name: str(root) for name, root in self.roots.items()},
            "inventory": str(self.workspace / "inventory.yml"),
            "contract": LINUX.contract,
            "playbook_timeout": self.timeout,
        }

    def judge(self, submission: CisoSubmission | None) -> Evaluation:
        """Run the playbook on freshly built hidden hosts, then the policy on each evidence."""
        start = timer()
        playbook = submission.playbook if submission else None
        policy = submission.policy if submission else None
        if not playbook or not policy:
            return self._nothing(start, "playbook and policy are both required")
        modules = {"policy.rego": policy}
        error = self.compile_policy(modules)
        outcome = self._run(playbook, self.hidden, "judge")
        roots = [v.name for v in self.hidden]
        collected = sum(h in outcome.evidence for h in roots)
        extra = {
            "evidence_collected": round(collected / len(roots), 4),
            "playbook_succeeded": outcome.status == "successful",
            "playbook_seconds": round(outcome.seconds, 3),
            "sandboxed": outcome.sandboxed,
        }
        if error is not None:
            ev = self._nothing(start, error)
            ev.metrics.update(extra)
            return ev
        names = [v.name for v in self.hidden if v.name in outcome.evidence]
        answers = dict(
            zip(
                names,
                self.engine.judge_query(
                    modules, f"data.{PACKAGE}.{RULE}", [outcome.evidence[n] for n in names]
                ),
                strict=True,
            )
        )
        verdicts: list[bool | None] = []
        errors: list[str | None] = []
        for v in self.hidden:
            a = answers.get(v.name)
            if a is None:
                verdicts.append(None)
                errors.append(outcome.problems.get(v.name, "no evidence"))
            else:
                verdicts.append(None if a.error else nonempty(a.value))
                errors.append(a.error)
        conf, judgements = judge_verdicts(self.hidden, verdicts, errors)
        return evaluation(
            conf,
            judgements,
            compiles=True,
            engine=self.engine.name,
            seconds=timer() - start,
            extra=extra,
            details={"playbook": outcome.summary()},
        )
