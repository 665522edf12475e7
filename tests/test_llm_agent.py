"""The ``llm`` agent's loop and settings on the in-memory toy domain, with a scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import CliFn

from itbench import prompts as prompts_module
from itbench.bench import Bench
from itbench.errors import UsageError
from itbench.prompts import default_prompt
from itbench.report.dataset import frames_of
from itbench.report.leaderboard import summarize_run
from itbench.store import RunStore
from itbench.testing import Call, Conversation, Fail, Reply, ScriptedModel, run_scenarios
from itbench.trajectory import read

SCENARIO = "toy/registry-alpha-1"
RIGHT = [
    Reply([Call("keys", {})]),
    lambda conv: Reply([Call("read", {"key": k}) for k in conv.last("keys")]),
    Reply([Call("write", {"key": "alpha", "value": 1})]),
    Reply([Call("submit", {"key": "alpha"})]),
]


def _run(
    bench: Bench, tmp_path: Path, script: list[Any], **options: Any
) -> tuple[Any, ScriptedModel]:
    with ScriptedModel(lambda conv: list(script)) as model:
        results = run_scenarios(
            "llm",
            [SCENARIO],
            tmp_path / "run",
            bench=bench,
            options={"llm_model": "scripted-model", "llm_base_url": model.url, **options},
        )
    return results[SCENARIO], model


def test_a_right_script_passes_without_a_price_and_with_every_call_journaled(
    toy_bench: Bench, tmp_path: Path
) -> None:
    result, model = _run(toy_bench, tmp_path, RIGHT)
    assert result.status.value == "passed", result.error
    assert result.tool_calls == 5 and result.steps == 1
    assert result.usage.input_tokens == 400 and result.usage.cost_usd is None  # no price known
    assert result.labels == []
    request = model.requests[0]
    assert [t["function"]["name"] for t in request["tools"]] == ["keys", "read", "write", "submit"]
    submit = request["tools"][-1]["function"]["parameters"]
    assert submit["properties"]["key"] and submit["type"] == "object"
    assert (
        request["messages"][0]["role"] == "system"
        and "One value of the registry" in request["messages"][1]["content"]
    )
    # The toy domain ships no prompt of its own: the model is told the default one.
    assert request["messages"][0]["content"] == default_prompt()


def test_a_given_price_costs_the_tokens(toy_bench: Bench, tmp_path: Path) -> None:
    result, _ = _run(toy_bench, tmp_path, RIGHT, llm_price_input=2.0, llm_price_output=10.0)
    assert result.usage.cost_usd == pytest.approx((400 * 2.0 + 80 * 10.0) / 1e6)


def test_server_errors_are_retried_then_given_up(toy_bench: Bench, tmp_path: Path) -> None:
    result, model = _run(
        toy_bench, tmp_path, [Fail(500, retry_after=0), Fail(503, retry_after=0)], llm_retries=1
    )
    # Failing past its retries, the model is unavailable: not the agent's failure.
    assert result.status.value == "unavailable"
    assert result.error is not None and "model is unavailable" in result.error
    assert "HTTP 503" in result.error and len(model.requests) == 2
    trajectory = read(RunStore(tmp_path / "run").trial_dir(result.handle))
    assert [s.name for s in trajectory.steps if s.kind == "event"] == ["retry"]


def test_a_refusing_server_is_not_retried(toy_bench: Bench, tmp_path: Path) -> None:
    result, model = _run(toy_bench, tmp_path, [Fail(401, retry_after=None, message="bad key")])
    assert (
        result.status.value == "failed" and result.error is not None and "HTTP 401" in result.error
    )
    assert len(model.requests) == 1


def test_the_step_limit_ends_the_trial_after_a_last_call(toy_bench: Bench, tmp_path: Path) -> None:
    result, model = _run(toy_bench, tmp_path, [Reply(content="thinking")] * 5, llm_max_steps=3)
    assert result.status.value == "failed" and len(model.requests) == 3
    last = model.requests[-1]["messages"]
    assert "This is your last turn: call submit now" in last[-1]["content"]
    assert "Continue with the tools" in last[-2]["content"]
    trajectory = read(RunStore(tmp_path / "run").trial_dir(result.handle))
    assert trajectory.steps[-1].kind == "event" and trajectory.steps[-1].name == "step_limit"


def test_refused_submissions_are_bounded(toy_bench: Bench, tmp_path: Path) -> None:
    bad = Reply([Call("submit", {"key": "alpha", "unknown": 1})])
    result, model = _run(toy_bench, tmp_path, [bad, bad, bad], llm_submit_retries=1)
    assert result.status.value == "failed" and len(model.requests) == 2
    answer = model.requests[1]["messages"][-1]["content"]
    assert answer.startswith("submission refused: unknown: Extra inputs are not permitted")


def test_unknown_tools_and_non_object_arguments_are_answered(
    toy_bench: Bench, tmp_path: Path
) -> None:
    script = [Reply([Call("delete_everything", {}), Call("read", "[1, 2]")]), *RIGHT]
    result, model = _run(toy_bench, tmp_path, script)
    assert result.status.value == "passed", result.error
    answers = [m["content"] for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert answers[0].startswith(
        "error: unknown tool 'delete_everything'; tools: keys, read, write, submit"
    )
    assert (
        answers[1]
        == "error: the arguments must be a JSON object; call read again with a JSON object"
    )
    assert result.tool_calls == 5  # neither reached the toolbox


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "the llm agent needs a model: --model NAME"),
        ({"llm_model": "m"}, "no API key: set $OPENAI_API_KEY"),
        (
            {"llm_model": "m", "llm_base_url": "http://127.0.0.1:9/v1", "llm_temperature": "hot"},
            "option llm_temperature: 'hot' is not a number from 0 to 2",
        ),
        (
            {"llm_model": "m", "llm_base_url": "http://127.0.0.1:9/v1", "llm_max_step": 3},
            "unknown option llm_max_step",
        ),
        (
            {
                "llm_model": "m",
                "llm_base_url": "http://127.0.0.1:9/v1",
                "llm_system_prompt": "/nonexistent",
            },
            "option llm_system_prompt: /nonexistent is not a file",
        ),
    ],
)
def test_bad_settings_are_refused_before_any_trial(
    toy_bench: Bench,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    options: dict[str, Any],
    message: str,
) -> None:
    for name in ("OPENAI_API_KEY", "ITBENCH_LLM_MODEL", "ITBENCH_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(UsageError, match=message.replace("$", r"\$")):
        run_scenarios("llm", [SCENARIO], tmp_path / "run", bench=toy_bench, options=options)
    assert not (tmp_path / "run" / "manifest.json").exists()


def test_the_flags_set_the_settings_the_manifest_records(itbench: CliFn, tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.md"
    prompt.write_text("Be brief.")
    with ScriptedModel(lambda conv: list(RIGHT)) as model:
        res = itbench(
            "evaluate",
            "--agent",
            "llm",
            "-s",
            SCENARIO,
            "--model",
            "m1",
            "--base-url",
            model.url,
            "--temperature",
            "0.7",
            "--max-steps",
            "9",
            "--option",
            f"llm_system_prompt={prompt}",
            "--out",
            "run",
        )
    assert res.returncode == 0, res.stderr
    options = json.loads((tmp_path / "run" / "manifest.json").read_text())["config"]["options"]
    assert (
        options["llm_model"] == "m1"
        and options["llm_temperature"] == 0.7
        and options["llm_max_steps"] == 9
    )
    assert options["llm_base_url"] == model.url and options["llm_api_key_env"] == "OPENAI_API_KEY"
    assert (
        model.requests[0]["temperature"] == 0.7
        and model.requests[0]["messages"][0]["content"] == "Be brief."
    )
    # The model fills the model column of the run's frames and of its leaderboard summary.
    store = RunStore(tmp_path / "run")
    manifest = store.read_manifest()
    frames = frames_of([(manifest, store.iter_results(manifest))])
    assert list(frames.trials["model"]) == ["m1"]
    assert summarize_run("llm-m1", tmp_path / "run", "v").model == "m1"
    missing = itbench(
        "evaluate", "--agent", "llm", "-s", SCENARIO, "--out", "run2", env={"OPENAI_API_KEY": ""}
    )
    assert missing.returncode == 2 and "the llm agent needs a model: --model NAME" in missing.stderr


def test_the_conversation_key_tells_trials_apart(toy_bench: Bench, tmp_path: Path) -> None:
    seen: list[str] = []

    def pick(conv: Conversation) -> list[Any]:
        seen.append(conv.messages[1]["content"])
        return list(RIGHT)

    with ScriptedModel(pick) as model:
        results = run_scenarios(
            "llm",
            [SCENARIO],
            tmp_path / "run",
            bench=toy_bench,
            trials=2,
            options={"llm_model": "m", "llm_base_url": model.url},
        )
    assert len(seen) == 2 and len(results) == 1
    assert all(r.status.value == "passed" for r in RunStore(tmp_path / "run").results())


def test_each_domain_of_the_repository_owns_its_system_prompt() -> None:
    """SRE, CISO and FinOps each tell a model about their own work; the core keeps only the
    default prompt for domains without one."""
    domains = Bench(autoload=True).domains
    prompts = {name: domains[name].system_prompt() for name in ("sre", "ciso", "finops")}
    assert len(set(prompts.values())) == 3
    assert all(p != default_prompt() and len(p.split()) > 50 for p in prompts.values())
    shipped = Path(prompts_module.__file__).parent
    assert sorted(p.name for p in shipped.glob("*.md")) == ["default.md"]


def test_runs_of_two_models_and_two_labelled_programs_are_four_rows(
    itbench: CliFn, tmp_path: Path
) -> None:
    """Tables group by the run's label: the agent with its model by default, or --label."""
    with ScriptedModel(lambda conv: list(RIGHT)) as model:
        for name in ("m1", "m2"):
            res = itbench(
                "evaluate",
                "--agent",
                "llm",
                "-s",
                SCENARIO,
                "--model",
                name,
                "--base-url",
                model.url,
                "--out",
                f"llm-{name}",
            )
            assert res.returncode == 0, res.stderr
    for label in ("solver-v1", "solver-v2"):
        res = itbench(
            "evaluate",
            "--agent",
            "toy/solver",
            "-s",
            SCENARIO,
            "--label",
            label,
            "--out",
            label,
        )
        assert res.returncode == 0, res.stderr
    runs = ["llm-m1", "llm-m2", "solver-v1", "solver-v2"]
    report = itbench("report", *runs, "--json")
    assert report.returncode == 0, report.stderr
    agents = {row["agent"] for row in report.json()["summary"]}  # type: ignore[index]
    assert {"llm (m1)", "llm (m2)", "solver-v1", "solver-v2"} <= {a.split(" [")[0] for a in agents}
    assert len(agents) == 4
    compare = itbench("compare", "llm-m1", "llm-m2")
    assert compare.returncode == 0, compare.stderr
    assert "A = llm (m1)" in compare.stdout and "B = llm (m2)" in compare.stdout
    bad = itbench("evaluate", "--agent", "noop", "-s", SCENARIO, "--label", "x[1]", "--out", "b")
    assert bad.returncode == 2 and "label" in bad.stderr and not (tmp_path / "b").exists()


def test_an_unreachable_model_is_its_own_status_and_out_of_the_score(
    itbench: CliFn, tmp_path: Path
) -> None:
    """A model API that refuses connections ends trials ``unavailable``, with the reason;
    reports show them apart and leave them out of the pass rate."""
    with ScriptedModel(lambda conv: list(RIGHT)) as model:
        ok = itbench(
            "evaluate",
            "--agent",
            "llm",
            "-s",
            SCENARIO,
            "--model",
            "m",
            "--base-url",
            model.url,
            "--out",
            "run",
            "--option",
            "llm_retries=1",
        )
        assert ok.returncode == 0, ok.stderr
        closed = model.url  # the server stops at the end of the block
    gone = itbench(
        "evaluate",
        "--agent",
        "llm",
        "-s",
        SCENARIO,
        "--model",
        "m",
        "--base-url",
        closed,
        "--out",
        "gone",
        "--option",
        "llm_retries=1",
    )
    assert gone.returncode == 0, gone.stderr
    [row] = [json.loads(line) for line in (tmp_path / "gone" / "results.jsonl").open()]
    assert row["status"] == "unavailable" and "model is unavailable" in row["error"]
    assert "APIConnectionError" in row["error"]
    report = itbench("report", "run", "gone", "--json")
    rows = report.json()["summary"]  # type: ignore[index]
    assert [(r["trials"], r["scored"], r["unavailable"], r["pass_rate"]) for r in rows] == [
        (2, 1, 1, 1.0)
    ]
