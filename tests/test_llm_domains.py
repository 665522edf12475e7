"""The ``llm`` agent on one scenario of each domain, driven by a scripted Chat Completions server.

Each scenario runs twice, in two runs: with a script whose answers are right (it must pass), then
with one whose answers are wrong (it must fail). The right scripts also exercise the protocol:
a 429 before success, parallel tool calls, a malformed tool call, a refused submission. The
same run feeds the trajectory and inspect export tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from itbench_ciso.checks import waivers
from itbench_ciso.checks.k8s import CHECKS
from itbench_finops.domain import FinOpsDomain
from itbench_finops.draw import concrete

from itbench.bench import Bench
from itbench.chat import PriceTable
from itbench.store import RunStore
from itbench.testing import Call, Conversation, Fail, Reply, ScriptedModel, run_scenarios

SCENARIOS = {
    "sre": "sre/smoke-cart-bad-release",
    "ciso": "ciso/k8s-secret-env",
    "finops": "finops/idle-orphans",
}
MODEL = "gpt-4o-mini"
# The requirement's reference policy, as a model that got it right would write it: it honours
# the waivers the trial's requirement states (its goal's first line).
GOOD_POLICY = next(c for c in CHECKS if c.id == "k8s-secret-env").policy()


def _good_policy(conv: Conversation) -> str:
    lines = [
        line
        for m in conv.messages
        if isinstance(m.get("content"), str)
        for line in m["content"].splitlines()
        if line.startswith("Requirement: ")
    ]
    return waivers.policy_for(lines[0], GOOD_POLICY)


EVERY_POD = """package compliance

import rego.v1

violations contains {"kind": "Pod", "namespace": pod.metadata.namespace, "name": pod.metadata.name} if {
\tsome pod in input.items
}
"""
SRE_ANSWER = {
    "incident": True,
    "root_causes": ["cart"],
    "fault_type": "bad_release",
    # What the shop's metrics show degrading: the shoppers' calls to the cart (the faulty
    # release fails some cart writes; checkout only reads the cart).
    "propagation": [["cart", "frontend"]],
}


def _domain(conv: Conversation) -> str:
    tools = set(conv.tools)
    return "sre" if "rollback" in tools else "ciso" if "evaluate_policy" in tools else "finops"


def _aws(tool: str, service: str, operation: str, **params: Any) -> Call:
    return Call(tool, {"service": service, "operation": operation, "params": params})


def _finops_deletes(removable: set[str]) -> Any:
    """The step that deletes what the three descriptions found, by the names it was told."""

    def step(conv: Conversation) -> Reply:
        volumes, addresses, balancers = conv.results("aws_describe")[-3:]
        calls = [
            *(
                _aws("aws_call", "ec2", "DeleteVolume", VolumeId=v["VolumeId"])
                for v in volumes["Volumes"]
            ),
            *(
                _aws("aws_call", "ec2", "ReleaseAddress", AllocationId=a["AllocationId"])
                for a in addresses["Addresses"]
            ),
            *(
                _aws(
                    "aws_call", "elbv2", "DeleteLoadBalancer", LoadBalancerArn=b["LoadBalancerArn"]
                )
                for b in balancers["LoadBalancers"]
                if b["LoadBalancerName"] in removable
            ),
        ]
        return Reply(calls)

    return step


# The FinOps trials get this draw (the script must know the answer): four waste items among
# look-alikes the conventions keep.
FINOPS_FORMS = {
    "batch-07": "standby",
    "scratch-3": "old",
    "restore-tmp": "ticket_closed",
    "ip-web-2": "loose",
    "backup-2024": "held",
    "lb-api": "empty",
    "reporting-db": "replica",
}


def scripts(bench: Bench) -> dict[str, list[list[Any]]]:
    """Per domain: the right script (trial 0), then the wrong one (trial 1)."""
    spec: Any = concrete(bench.catalog.scenarios[SCENARIOS["finops"]], FINOPS_FORMS)
    removable = set(spec.truth.waste)
    kinds = {r.name: r.kind for r in spec.resources}
    names = {
        k: sorted(n for n in removable if kinds[n] == k)
        for k in ("volume", "address", "load_balancer")
    }

    def by_name(kind: str) -> list[dict[str, Any]]:
        return [{"Name": "tag:Name", "Values": names[kind]}]

    finops_right = [
        Reply(
            [
                _aws("aws_describe", "ec2", "DescribeVolumes", Filters=by_name("volume")),
                _aws("aws_describe", "ec2", "DescribeAddresses", Filters=by_name("address")),
                _aws("aws_describe", "elbv2", "DescribeLoadBalancers"),
            ]
        ),
        _finops_deletes(removable),
        Reply([Call("submit", {"incident": True, "notes": "removed the idle resources"})]),
    ]
    return {
        "ciso": [
            [
                Fail(429, retry_after=0),
                Reply([Call("kubectl_get", {"resource": "pods"})], content="Looking at the pods."),
                Reply([Call("evaluate_policy", '{"policy": "package compliance')]),
                Reply([Call("submit", {"policy": 42})]),
                lambda conv: Reply([Call("evaluate_policy", {"policy": _good_policy(conv)})]),
                lambda conv: Reply([Call("submit", {"policy": _good_policy(conv)})]),
            ],
            [Reply([Call("submit", {"policy": EVERY_POD})])],
        ],
        "sre": [
            [
                Reply([Call("alerts", {}), Call("read_config", {"entity": "cart"})]),
                Reply([Call("rollback", {"service": "cart"})]),
                Reply([Call("submit", SRE_ANSWER)]),
            ],
            [
                Reply([Call("rollback", {"service": "cart"})]),
                Reply([Call("submit", {**SRE_ANSWER, "root_causes": ["payment"]})]),
            ],
        ],
        "finops": [finops_right, [Reply([Call("submit", {"incident": False})])]],
    }


class Run:
    """The module's two runs (right scripts, wrong scripts) and what the model server saw.

    Results are keyed by (scenario, 0) for the right run and (scenario, 1) for the wrong one.
    """

    def __init__(self, right: Path, wrong: Path, model: ScriptedModel) -> None:
        self.dir = right
        self.dirs = (right, wrong)
        self.stores = (RunStore(right), RunStore(wrong))
        self.results = {
            (r.scenario_id, index): r
            for index, store in enumerate(self.stores)
            for r in store.results()
        }
        self.requests = model.requests
        self.store = self.stores[0]

    def trial_dir(self, scenario: str, index: int) -> Path:
        return self.stores[index].trial_dir(self.results[(scenario, index)].handle)


@pytest.fixture(scope="module")
def llm_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    drawn = FinOpsDomain.draw

    def chosen(self: FinOpsDomain, spec: Any, ctx: Any) -> tuple[Any, dict[str, Any]]:
        if spec.id == SCENARIOS["finops"]:
            return concrete(spec, FINOPS_FORMS), {"forms": FINOPS_FORMS}
        return drawn(self, spec, ctx)

    FinOpsDomain.draw = chosen  # type: ignore[method-assign]
    try:
        yield _llm_run(tmp_path_factory)
    finally:
        FinOpsDomain.draw = drawn  # type: ignore[method-assign]


def _llm_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    bench = Bench()
    queues = scripts(bench)
    base = tmp_path_factory.mktemp("llm")
    runs = (base / "run-named-after-its-scenarios", base / "wrong-answers")

    def pick(conv: Conversation) -> list[Any]:
        return queues[_domain(conv)].pop(0)

    with ScriptedModel(pick) as model:
        for run_dir in runs:  # each script queue holds the right script, then the wrong one
            run_scenarios(
                "llm",
                list(SCENARIOS.values()),
                run_dir,
                bench=bench,
                # The three domains' trials at once: the CISO and FinOps ones end while the
                # SRE shop still starts, before anything of it is measured.
                workers=len(SCENARIOS),
                options={
                    "llm_model": MODEL,
                    "llm_base_url": model.url,
                    "llm_tool_output_chars": 2000,
                },
            )
        assert model.errors == []
    return Run(*runs, model)


def test_right_answers_pass_and_wrong_ones_fail(llm_run: Run) -> None:
    outcome = {key: (r.status.value, r.error) for key, r in llm_run.results.items()}
    for scenario in SCENARIOS.values():
        assert outcome[(scenario, 1)][0] == "failed", outcome
        assert outcome[(scenario, 0)][0] == "passed", outcome
    # SRE: the propagation is graded against the spread measured at handover.
    sre = llm_run.results[(SCENARIOS["sre"], 0)].metrics
    assert sre["propagation_scored"] and sre["propagation_f1"] >= 0.7, sre


def test_tokens_cost_and_settings_are_recorded(llm_run: Run) -> None:
    price = PriceTable.load().find(MODEL)
    assert price is not None
    for r in llm_run.results.values():
        responses = r.agent_metrics["model_responses"]
        assert isinstance(responses, int) and responses >= 1
        assert r.usage.input_tokens == 100 * responses
        assert r.usage.output_tokens == 20 * responses
        assert r.usage.cost_usd == pytest.approx(price.cost(100 * responses, 20 * responses))
        assert r.labels == []  # the model acts only through the toolbox
    manifests = [store.read_manifest() for store in llm_run.stores]
    options = manifests[0].config.options
    assert options["llm_model"] == MODEL and options["llm_temperature"] == 0.0
    assert options["llm_max_steps"] == 40
    # Each trial's requests carry its recorded temperature and its public seed.
    seeds = {seed for m in manifests for seed in m.seeds.values()}
    assert {b["seed"] for b in llm_run.requests} == seeds
    assert {b["temperature"] for b in llm_run.requests} == {0.0}


def test_protocol_troubles_are_survived_and_recorded(llm_run: Run) -> None:
    from itbench.trajectory import read

    trajectory = read(llm_run.trial_dir(SCENARIOS["ciso"], 0))
    events = [s.name for s in trajectory.steps if s.kind == "event"]
    assert events == ["retry", "malformed_call", "submit_rejected", "submit"], events
    tool_messages = [m.content or "" for m in trajectory.messages() if m.role == "tool"]
    assert tool_messages[0].endswith("narrow the call to see the rest]")
    assert "[truncated: showing the first 2000 of" in tool_messages[0]
    assert "not valid JSON" in tool_messages[1]
    assert "submission refused: policy: Input should be a valid string" in tool_messages[2]
    assert [s.tool for s in trajectory.tool_steps()] == ["kubectl_get", "evaluate_policy"]
    submitted = trajectory.submission["policy"] if trajectory.submission else ""
    assert submitted.startswith(
        GOOD_POLICY.replace("violations contains", "raw_violations contains")
    )
    assert "waived_namespaces" in submitted
    assert trajectory.version == "1.0" and trajectory.model == MODEL
    # The model was asked to keep going after the parallel calls of SRE: all answered.
    sre = read(llm_run.trial_dir(SCENARIOS["sre"], 0))
    first = sre.messages()[2]
    assert first.role == "assistant" and [c.name for c in first.tool_calls] == [
        "alerts",
        "read_config",
    ]


def test_the_model_is_shown_no_harness_path_or_scenario_name(llm_run: Run, tmp_path: Path) -> None:
    bench = Bench()
    seen = json.dumps(llm_run.requests)
    secrets = {p for d in llm_run.dirs for p in (str(d), d.name, str(d.resolve()))}
    for scenario in SCENARIOS.values():
        spec = bench.catalog.scenarios[scenario]
        secrets |= {spec.id, spec.id.split("/")[1], *filter(None, [spec.title])}
    for (scenario, index), r in llm_run.results.items():
        secrets |= {r.trial_id, str(llm_run.trial_dir(scenario, index))}
    assert not [s for s in secrets if s in seen]


def test_trajectory_command_prints_a_trial(llm_run: Run) -> None:
    from click.testing import CliRunner

    from itbench.cli import cli

    trial = llm_run.trial_dir(SCENARIOS["ciso"], 0)
    out = CliRunner().invoke(cli, ["trajectory", str(trial)])
    assert out.exit_code == 0, out.output
    assert "ciso/k8s-secret-env" in out.output and MODEL in out.output
    assert "retry" in out.output and "kubectl_get" in out.output and "submit" in out.output
    as_json = CliRunner().invoke(cli, ["trajectory", str(trial), "--json"])
    assert json.loads(as_json.output)["format"] == "itbench-trajectory"
    # A run directory is not a trial directory: the answer names its trials.
    wrong = CliRunner().invoke(cli, ["trajectory", str(llm_run.dir)])
    assert wrong.exit_code == 2 and "ciso.k8s-secret-env__llm__0" in wrong.output


def test_inspect_export_is_read_back_by_inspect(llm_run: Run, tmp_path: Path) -> None:
    from click.testing import CliRunner
    from inspect_ai.analysis import samples_df
    from inspect_ai.log import read_eval_log

    from itbench.cli import cli

    right, wrong = llm_run.dirs
    out = CliRunner().invoke(
        cli, ["export", "--format", "inspect", str(right), str(wrong), "--out", str(tmp_path)]
    )
    assert out.exit_code == 0, out.output
    versions = json.loads((right / "manifest.json").read_text())["catalog_versions"]
    logs = {}
    for path in tmp_path.glob("*.eval"):  # one log per run and domain
        log = read_eval_log(str(path))
        assert log.status == "success" and log.eval.model == MODEL
        assert log.samples is not None and len(log.samples) == 1
        domain = log.eval.task.removeprefix("itbench/")
        assert log.eval.task_version == versions[domain]
        assert log.results is not None
        logs[(domain, log.results.scores[0].metrics["accuracy"].value)] = (path, log)
    # The wrong answers pass nothing; the right ones everything.
    assert sorted(logs) == sorted((d, a) for d in SCENARIOS for a in (0.0, 1.0))
    path, log = logs[("ciso", 1.0)]
    assert log.samples is not None
    [ciso] = log.samples
    assert ciso.id == SCENARIOS["ciso"]
    assert ciso.epoch == 1 and ciso.scores is not None and ciso.scores["itbench"].value == 1.0
    roles = [m.role for m in ciso.messages]
    assert roles[:3] == ["system", "user", "assistant"] and "tool" in roles
    result = llm_run.results[(SCENARIOS["ciso"], 0)]
    assert ciso.model_usage[MODEL].input_tokens == result.usage.input_tokens
    # Every numeric metric is a score of its own, and its mean is in the log's results.
    numeric = {k: float(v) for k, v in result.metrics.items() if isinstance(v, bool | int | float)}
    assert numeric and {k: ciso.scores[k].value for k in numeric} == numeric
    assert set(numeric) <= {s.name for s in log.results.scores}
    # The transcript: a model event per response, a tool event per call, in order.
    assert log.samples is not None
    model_events = [e for e in ciso.events if e.event == "model"]
    tool_events = [e for e in ciso.events if e.event == "tool"]
    assert len(model_events) == roles.count("assistant")
    assert model_events[0].output.usage is not None and model_events[0].input
    assert "kubectl_get" in [e.function for e in tool_events]
    assert ciso.events.index(model_events[0]) < ciso.events.index(tool_events[0])
    frame = samples_df(str(path))
    assert len(frame) == 1
