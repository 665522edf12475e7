"""The STRATUS-style agent on a live SRE scenario, driven by a scripted model.

The first mitigation is wrong (it scales a healthy service): validation sees the alerts keep
firing, the agent undoes the action through the journal and tries again with the right fix,
which validation accepts. The trial passes with two attempts, one undo and no regression.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from itbench.bench import Bench
from itbench.store import RunStore
from itbench.testing import Call, Conversation, Reply, ScriptedModel, run_scenarios

SCENARIO = "sre/smoke-cart-bad-release"
ANSWER = {
    "incident": True,
    "root_causes": ["cart"],
    "fault_type": "bad_release",
    # The spread the shop's metrics show in the fault window (see tests/test_llm_domains.py).
    "propagation": [["cart", "frontend"]],
}


def test_a_wrong_first_mitigation_is_undone_and_the_second_succeeds(tmp_path: Path) -> None:
    attempts = [
        [
            Reply([Call("scale", {"service": "catalog", "replicas": 2})]),
            Reply([Call("report_mitigation", {"summary": "more catalog"})]),
        ],
        [
            Reply([Call("rollback", {"service": "cart"})]),
            Reply([Call("report_mitigation", {"summary": "rolled back cart"})]),
        ],
    ]
    stages: list[str] = []

    def pick(conv: Conversation) -> list[Any]:
        if "report_detection" in conv.tools:
            stages.append("detection")
            return [
                Reply([Call("alerts", {})]),
                Reply(
                    [Call("report_detection", {"incident": True, "evidence": "error rate alert"})]
                ),
            ]
        if "report_mitigation" in conv.tools:
            stages.append("mitigation")
            assert "undo" not in conv.tools and "rollback" in conv.tools
            if len(attempts) == 1:  # the second attempt is told what failed
                assert "scale" in conv.text() and "were undone" in conv.text()
            return attempts.pop(0)
        stages.append("diagnosis")
        assert "rollback" not in conv.tools and "submit" in conv.tools
        return [Reply([Call("topology", {})]), Reply([Call("submit", ANSWER)])]

    run = tmp_path / "run"
    with ScriptedModel(pick) as model:
        results = run_scenarios(
            "stratus",
            [SCENARIO],
            run,
            bench=Bench(),
            options={
                "llm_model": "scripted",
                "llm_base_url": model.url,
                # Long enough quiet that a fault whose alerts flap is not taken for fixed: on a
                # busy machine missed scrapes leave the 3 s error-rate window empty for a while,
                # and 10 s of quiet once let the wrong first attempt pass.
                "stratus_validate_seconds": 90,
                "stratus_quiet_seconds": 20,
            },
        )
    result = results[SCENARIO]
    assert stages == ["detection", "diagnosis", "mitigation", "mitigation"]
    # Every part but propagation must pass: it is graded against the spread measured over the
    # five seconds after the agent starts, which a busy machine can leave empty.
    assert result.status.value in ("passed", "failed"), result.error
    parts = ("detection_pass", "localization_pass", "mitigation_pass")
    assert all(result.metrics[p] for p in parts), result.metrics
    assert result.agent_metrics == {
        "attempts": 2,
        "undos": 1,
        "regressions": 0,
        "mitigated": True,
        "model_responses": 8,
    }
    assert result.labels == ["unsandboxed"]  # plugin code runs in the harness
    trial = RunStore(run).trial_dir(result.handle)
    actions = [json.loads(line) for line in (trial / "actions.jsonl").read_text().splitlines()]
    assert [(a["tool"], a["args"]) for a in actions] == [
        ("scale", {"service": "catalog", "replicas": 2}),
        ("undo", {"of": 0}),
        ("rollback", {"service": "cart"}),
    ]
    trajectory = json.loads((trial / "trajectory.json").read_text())
    events = [s["name"] for s in trajectory["steps"] if s["kind"] == "event"]
    assert events.count("stage") == 4 and events.count("undo") == 1
    assert "validation_failed" in events and events[-1] == "validated"
    assert trajectory["agent_metrics"]["undos"] == 1


def test_bad_stratus_options_are_refused_before_any_trial(tmp_path: Path) -> None:
    from itbench.errors import UsageError

    with pytest.raises(
        UsageError, match="option stratus_attempts: 0 is not a whole number from 1 to 10"
    ):
        run_scenarios(
            "stratus",
            [SCENARIO],
            tmp_path / "run",
            options={
                "llm_model": "m",
                "llm_base_url": "http://127.0.0.1:9/v1",
                "stratus_attempts": 0,
            },
        )
    assert not (tmp_path / "run" / "results.jsonl").exists()
