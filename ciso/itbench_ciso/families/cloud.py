"""Cloud account posture: the agent's collector gathers evidence, its Rego policy judges it."""

from __future__ import annotations

import json
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from itbench import Evaluation, InfrastructureError, IntegrityError, Tool, port_open
from itbench_ciso.ansible import PlayOutcome, run_playbook
from itbench_ciso.aws import DEFAULT_CREDENTIALS, REGION, MotoServer
from itbench_ciso.checks import cloud, cloudparams
from itbench_ciso.collector import Collected, Collector, collector_env, run_collector
from itbench_ciso.contracts import CLOUD
from itbench_ciso.engine import PACKAGE, RULE
from itbench_ciso.families import Runtime, timer
from itbench_ciso.ports import PORT_AWS
from itbench_ciso.scoring import evaluation, judge_verdicts, nonempty
from itbench_ciso.spec import CisoSubmission

#: Seconds a collector may run, unless ``--option collector_timeout=S`` says otherwise.
COLLECTOR_TIMEOUT = 60.0


class CloudRuntime(Runtime):
    """A moto server: the visible account during the agent's turn, hidden ones when judging.

    The trial's organization parameters (:mod:`itbench_ciso.checks.cloudparams`), where it
    keeps them and how the requirement words them are drawn per trial.
    """

    #: The requirement with the organization's parameters (none until set-up draws them).
    _org_requirement = ""
    #: The regions the trial's accounts operate in.
    _regions: tuple[str, ...] = cloud.REGIONS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server = MotoServer(self.ctx.port(PORT_AWS), self.ctx.trial_dir)
        #: The judge's fresh endpoint, made ready during the agent's turn (see :meth:`judge`).
        self.spare: MotoServer | None = None
        self.runs = 0
        self.last_evidence: Any = {}
        self.warm: dict[str, Collector] = {}

    @property
    def timeout(self) -> float:
        """The collector time limit of this run."""
        return float(self.ctx.options.get("collector_timeout", COLLECTOR_TIMEOUT))

    def setup(self) -> None:
        """Start the endpoint and create the visible account's resources."""
        plan = self.spec.variants
        org = cloudparams.draw(self.spec.check, random.Random(self.ctx.secret_seed("ciso:org")))
        judged, prepare = org.derived() if org is not None else (None, None)
        if org is not None:
            self._org_requirement = org.requirement()
            self._regions = org.regions
            for rel, text in org.documents().items():
                doc = self.workspace / rel
                doc.parent.mkdir(parents=True, exist_ok=True)
                doc.write_text(text, encoding="utf-8")
        visible, self.hidden = cloud.variants(
            self.spec.check,
            self.hidden_seed,
            plan.compliant,
            plan.non_compliant,
            visible_seed=self.visible_seed,
            judged=judged,
            org=prepare,
        )
        self.visible = visible
        rng = random.Random(self.ctx.secret_seed("ciso:hidden-accounts"))
        #: Hidden variant name -> its account id.
        self.accounts = {v.name: f"{rng.randrange(10**11, 10**12)}" for v in self.hidden}
        # The hidden accounts made from now on, beside the visible one and during the agent's
        # turn, in a server that binds the port only once the agent's server is gone.
        self.spare = self._endpoint(
            "aws-endpoint-judge",
            [(a, v.data, a[-8:]) for v, a in zip(self.hidden, self.accounts.values(), strict=True)],
        )
        self.spare.launch()
        # The visible account made inside the server before it binds (no client of the
        # harness pays for boto3 calls), then served at once.
        self.server = self._endpoint(
            "aws-endpoint",
            [(DEFAULT_CREDENTIALS.account_id, visible.data, f"{self.visible_seed % 100000:05d}")],
        )
        self.server.launch()
        try:
            self.server.activate()
        except InfrastructureError as exc:
            raise InfrastructureError(f"making the visible account failed: {exc}") from None
        self._check_identity()
        # The judge's collectors too: each account's sandbox imports boto3 during the turn.
        for v in self.hidden:
            self.warm[v.name] = Collector(
                self.ctx.trial_dir / "collector-runs" / f"judge-{v.name}",
                self.ctx.trial_dir,
                self.server.port,
            )
            self.warm[v.name].start()

    def _check_identity(self) -> None:
        """The port must be answered by the endpoint the harness started (not a usurper)."""
        found = self.server.identity_problems()
        if found:
            raise InfrastructureError("; ".join(found))

    def _endpoint(self, name: str, accounts: list[tuple[str, Any, str]]) -> MotoServer:
        """A standby endpoint on the trial's port that makes ``(account, plan, suffix)``s."""
        return MotoServer(
            self.ctx.port(PORT_AWS),
            self.ctx.trial_dir,
            name=name,
            preload=cloud.SERVICES,
            standby=True,
            seed=(
                f"{cloud.__name__}:{cloud.seed_accounts.__name__}",
                [{"account": a, "plan": p, "suffix": x} for a, p, x in accounts],
            ),
        )

    def teardown(self) -> None:
        """Stop the endpoints (killed: they keep nothing worth a clean exit) and collectors."""
        try:
            self.server.stop(timeout=0)
        finally:
            try:
                if self.spare is not None:
                    self.spare.stop(timeout=0)
            finally:
                self._close_warm()

    def _close_warm(self) -> None:
        warm, self.warm = self.warm, {}
        for collector in warm.values():
            collector.close()

    def _fresh_server(self) -> bool:
        """Replace the agent's endpoint by a fresh one on the same port (no state survives).

        The spare launched at setup, holding the hidden accounts, when it is still waiting and
        the port is free once the agent's server stopped (returns ``True``); otherwise a new,
        empty server (returns ``False``).
        """
        self.server.stop(timeout=0)
        spare, self.spare = self.spare, None
        if port_open(self.server.port):
            if spare is not None:
                spare.stop()
            raise InfrastructureError(
                f"port {self.server.port} of the AWS endpoint is held by a process the harness "
                "did not start"
            )
        if spare is not None and spare.alive():
            try:
                spare.activate()
            except InfrastructureError:
                spare.stop()
            else:
                self.server = spare
                self._check_identity()
                return True
        elif spare is not None:
            spare.stop()
        self.server = MotoServer(self.server.port, self.ctx.trial_dir, preload=cloud.SERVICES)
        self.server.start()
        self._check_identity()
        return False

    def harness_problems(self) -> list[str]:
        """The AWS endpoint must still be the server setup started, listening on its port."""
        if not self.server.alive():
            return [f"the AWS endpoint (moto server on port {self.server.port}) is gone"]
        if not port_open(self.server.port):
            return [f"the AWS endpoint (moto server) no longer listens on {self.server.port}"]
        return self.server.identity_problems()

    def _collect(self, script: str, account: str, label: str) -> Collected:
        creds = self.server.account(account)
        run_dir = self.ctx.trial_dir / "collector-runs" / label
        return run_collector(
            script, creds, self.server.url, run_dir, self.ctx.trial_dir, self.timeout
        )

    def _judge_collect(self, script: str, name: str, account: str) -> Collected:
        """Run the collector on a hidden account, in its sandbox started at setup if alive."""
        collector = self.warm.pop(name, None)
        if collector is not None and collector.alive():
            try:
                env = collector_env(self.server.account(account), self.server.url, collector.jail)
                out = collector.run(script, env, self.timeout)
            finally:
                collector.close()
            if not collector.lost:
                return out
        elif collector is not None:
            collector.close()
        # Its sandbox died before the script came: a fresh one, as the agent's runs have.
        return self._collect(script, account, f"judge-{name}")

    def tools(self) -> list[Tool]:
        """``run_collector`` on the visible account and ``evaluate_policy``."""

        def run_collector(script: str) -> dict[str, Any]:
            """Run a Python evidence collector on the visible account, as the harness will.

            Returns its parsed JSON evidence (or the problem) and the end of its stderr.
            """
            self.runs += 1
            out = self._collect(script, DEFAULT_CREDENTIALS.account_id, f"agent-{self.runs}")
            if out.ok:
                self.last_evidence = out.evidence
            return {"evidence": out.evidence, "problem": out.problem, "stderr": out.stderr}

        def run_playbook(playbook: str) -> dict[str, Any]:
            """Run an Ansible evidence playbook on the visible account, as the harness will.

            Returns the status, the account's evidence and the end of the output.
            """
            self.runs += 1
            hosts = {"account": self._host_vars(DEFAULT_CREDENTIALS.account_id)}
            out = self._play(playbook, hosts, f"agent-{self.runs}")
            if "account" in out.evidence:
                self.last_evidence = out.evidence["account"]
            return {
                "status": out.status,
                "evidence": out.evidence.get("account"),
                "problems": out.problems,
                "output": out.output,
            }

        return [
            Tool.from_function(run_collector),
            Tool.from_function(run_playbook),
            self.policy_tool(lambda: self.last_evidence),
        ]

    def _host_vars(self, account: str) -> dict[str, Any]:
        creds = self.server.account(account)
        return {
            "aws_environment": creds.env(self.server.url),
            "aws_endpoint_url": self.server.url,
            "aws_region": REGION,
        }

    def _play(self, playbook: str, hosts: dict[str, dict[str, Any]], label: str) -> PlayOutcome:
        run_dir = self.ctx.trial_dir / "playbook-runs" / label
        outcome = run_playbook(
            playbook, hosts, run_dir, self.ctx.trial_dir, self.timeout, ports=(self.server.port,)
        )
        self.save(f"playbook-runs/{label}.json", json.dumps(outcome.summary(), indent=1))
        return outcome

    def context(self) -> dict[str, Any]:
        """Endpoint, credentials and the contract."""
        creds = DEFAULT_CREDENTIALS
        return {
            "requirement": self._org_requirement or self.spec.requirement,
            "endpoint_url": self.server.url,
            "account_id": creds.account_id,
            "regions": list(self._regions),
            "environment_variables": creds.env(self.server.url),
            "contract": CLOUD.contract,
            "collector_timeout": self.timeout,
        }

    def judge(self, submission: CisoSubmission | None) -> Evaluation:
        """Reset the endpoint, create the hidden accounts, collect from each and judge."""
        start = timer()
        script = submission.collector if submission else None
        playbook = submission.playbook if submission else None
        policy = submission.policy if submission else None
        if not (script or playbook) or not policy:
            return self._nothing(start, "a collector or a playbook, and a policy, are required")
        modules = {"policy.rego": policy}
        error = self.compile_policy(modules)
        # A fresh server: nothing the agent did to the endpoint (its state, its configuration
        # through moto's own API) reaches the hidden accounts.
        seeded = self._fresh_server()
        accounts = self.accounts

        def seed(v: Any) -> None:
            creds = self.server.account(accounts[v.name])
            cloud.seed(
                lambda s, region=REGION: self.server.client(s, creds, region),
                v.data,
                accounts[v.name][-8:],
            )

        try:
            if not seeded:
                with ThreadPoolExecutor(max_workers=3) as pool:
                    list(pool.map(seed, self.hidden))
        except Exception as exc:
            raise InfrastructureError(
                f"seeding the hidden accounts failed: {type(exc).__name__}: {exc}"
            ) from exc
        if script:
            with ThreadPoolExecutor(max_workers=3) as pool:
                collected = dict(
                    zip(
                        [v.name for v in self.hidden],
                        pool.map(
                            lambda v: self._judge_collect(script, v.name, accounts[v.name]),
                            self.hidden,
                        ),
                        strict=True,
                    )
                )
        else:
            assert playbook is not None
            self._close_warm()
            hosts = {v.name: self._host_vars(accounts[v.name]) for v in self.hidden}
            played = self._play(playbook, hosts, "judge")
            collected = {
                v.name: Collected(
                    evidence=played.evidence.get(v.name),
                    problem=None if v.name in played.evidence else played.problems.get(v.name),
                    stderr=played.output if v.name not in played.evidence else "",
                    sandboxed=played.sandboxed,
                )
                for v in self.hidden
            }
        self.save(
            "collector-runs/judge.json",
            json.dumps(
                {
                    n: {"problem": c.problem, "stderr": c.stderr, "seconds": round(c.seconds, 3)}
                    for n, c in collected.items()
                },
                indent=1,
            ),
        )
        ok = [n for n, c in collected.items() if c.ok]
        extra = {
            "evidence_collected": round(len(ok) / len(self.hidden), 4),
            "sandboxed": all(c.sandboxed for c in collected.values()),
        }
        if error is not None:
            ev = self._nothing(start, error)
            ev.metrics.update(extra)
            return ev
        answers = dict(
            zip(
                ok,
                self.engine.judge_query(
                    modules, f"data.{PACKAGE}.{RULE}", [collected[n].evidence for n in ok]
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
                errors.append(collected[v.name].problem)
            else:
                verdicts.append(None if a.error else nonempty(a.value))
                errors.append(a.error)
        # The evidence came from the harness's endpoint only if it still holds the port.
        found = self.harness_problems()
        if found:
            raise IntegrityError("; ".join(found))
        conf, judgements = judge_verdicts(self.hidden, verdicts, errors)
        return evaluation(
            conf,
            judgements,
            compiles=True,
            engine=self.engine.name,
            seconds=timer() - start,
            extra=extra,
        )
