"""Fuzzed submissions: each domain's model through the runner's check, and the command agent's.

Whatever an agent hands in (any JSON value, the domain's fields with values of any type,
unknown fields, numbers that JSON cannot carry), the runner's check either accepts a
submission of the domain's model, written to ``submission.json`` so that it reads back the
same, or fails the trial with ``invalid submission`` naming the field and the reason. The
``command`` agent's ``submission.json`` and standard output are read without ever raising
anything but a clear error naming the file.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import CliFn, results
from fuzzing import budget, deep_json, json_values, names
from hypothesis import given
from hypothesis import strategies as st
from pydantic import model_validator

from itbench.bench import Bench
from itbench.command import MAX_FILE, CommandAgent, SubmissionFileError
from itbench.models import RunConfig, TrialStatus
from itbench.plan import PlannedTrial
from itbench.runner import Runner
from itbench.trial import TrialRun

DOMAINS = ("toy", "sre", "ciso", "finops")


@pytest.fixture(scope="module")
def runner(plugin_site: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    """A runner over the real domains (entry points) and the toy one."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(plugin_site))
        bench = Bench(plugins=["itbench_toy.plugin"])
        assert set(DOMAINS) <= set(bench.domains)
        yield Runner(bench, RunConfig(agent="noop"), tmp_path_factory.mktemp("run"))


def trial_run(runner: Runner, domain: str) -> TrialRun:
    """A trial of a scenario of ``domain`` as the runner makes it, with its directory."""
    spec = next(s for s in runner.bench.catalog.scenarios.values() if s.domain == domain)
    trial = TrialRun(runner, PlannedTrial(f"{domain}__noop__0", spec, "noop", 0, 0))
    trial.trial_dir.mkdir(parents=True)
    return trial


@st.composite
def submissions(draw: st.DrawFn, fields: list[str]) -> Any:
    """Anything an agent could return: any JSON value, or the model's fields with any values."""
    if draw(st.integers(0, 4)) == 0:
        return draw(json_values())
    keys = draw(st.lists(st.sampled_from(fields), unique=True, max_size=len(fields)))
    out = {k: draw(json_values(6)) for k in keys}
    if draw(st.integers(0, 3)) == 0:
        out[draw(names)] = draw(json_values(4))
    return out


def _top(loc: str) -> str:
    return loc.split(".", 1)[0]


@pytest.mark.parametrize("domain", DOMAINS)
@budget(60)
@given(data=st.data())
def test_the_runner_accepts_a_valid_submission_or_names_the_field_and_reason(
    runner: Runner, domain: str, data: Any
) -> None:
    trial = trial_run(runner, domain)
    model = trial.domain.submission_model
    raw = data.draw(submissions(sorted(model.model_fields)), label="submission")
    got = trial._check_submission(raw)
    if raw is None:  # no submission at all: nothing to check, the evaluator judges the state
        assert got is None and trial.error is None
        return
    if got is None:
        assert trial.status is TrialStatus.failed
        assert trial.error and trial.error.startswith("invalid submission: field '"), trial.error
        field = trial.error.split("'", 2)[1]
        keys = set(raw) if isinstance(raw, dict) else set()
        assert _top(field) in keys | set(model.model_fields) | {"(submission)"}, trial.error
        assert not (trial.trial_dir / "submission.json").exists()
        return
    assert isinstance(got, model) and trial.error is None
    written = (trial.trial_dir / "submission.json").read_text(encoding="utf-8")
    # What was judged is what was written: the file reads back as the same submission.
    assert model.model_validate_json(written) == got
    json.loads(written)  # plain JSON: no NaN or Infinity


@pytest.mark.parametrize("domain", DOMAINS)
def test_submission_objects_built_without_validation_are_checked_too(
    runner: Runner, domain: str
) -> None:
    trial = trial_run(runner, domain)
    model = trial.domain.submission_model
    field = next(k for k in model.model_fields if k != "notes")
    raw = model.model_construct(**{field: object()})
    assert trial._check_submission(raw) is None
    assert trial.status is TrialStatus.failed and trial.error
    assert trial.error.startswith(f"invalid submission: field '{field}'"), trial.error


def test_a_submission_model_that_raises_fails_the_trial_never_the_harness(runner: Runner) -> None:
    trial = trial_run(runner, "toy")

    class Buggy(trial.domain.submission_model):  # type: ignore[name-defined,misc]
        @model_validator(mode="after")
        def _bug(self) -> Any:
            raise TypeError("a bug of the plugin")

    trial.domain = copy.copy(trial.domain)
    trial.domain.submission_model = Buggy
    assert trial._check_submission({"key": "alpha"}) is None
    assert trial.status is TrialStatus.failed
    assert trial.error == "invalid submission: TypeError: a bug of the plugin"


files = st.one_of(
    st.binary(max_size=300),
    json_values().map(lambda v: json.dumps(v).encode()),
    deep_json(500, 100_000).map(str.encode),
    st.sampled_from([b"", b"{", b"\xff\xfe{}", b"NaN", b'{"a": NaN}', b"[]", b"null", b"{}"]),
)
stdout_lines = st.lists(
    st.one_of(
        st.text(max_size=80).map(lambda t: t.replace("\n", " ")),
        json_values().map(json.dumps),
        deep_json(500, 50_000),
    ),
    max_size=6,
)


@budget(150)
@given(
    file=st.one_of(st.none(), files),
    kind=st.sampled_from(["file", "file", "symlink", "directory", "fifo", "huge"]),
    lines=stdout_lines,
)
def test_the_command_agent_reads_its_submission_or_names_the_file_and_reason(
    tmp_path_factory: pytest.TempPathFactory, file: bytes | None, kind: str, lines: list[str]
) -> None:
    ws = tmp_path_factory.mktemp("ws")
    stdout = ws / "agent.stdout"
    stdout.write_text("\n".join(lines) + "\n", encoding="utf-8")
    target = ws / "submission.json"
    if file is not None:
        if kind == "symlink":
            (ws / "elsewhere.json").write_bytes(b"{}")
            target.symlink_to(ws / "elsewhere.json")
        elif kind == "directory":
            target.mkdir()
        elif kind == "fifo":
            os.mkfifo(target)
        elif kind == "huge":
            target.write_bytes(b'{"notes": "' + b"x" * MAX_FILE + b'"}')
        else:
            target.write_bytes(file)
    try:
        got = CommandAgent._submission(target, stdout)
    except SubmissionFileError as exc:
        assert file is not None, "no submission.json, yet it was blamed"
        assert str(exc).startswith("submission.json: ") and len(str(exc)) > 20, exc
        return
    if file is None:
        # No file: the last line of standard output that is a JSON object, else nothing.
        objects = [
            v for v in map(_object_or_none, stdout.read_text().splitlines()) if v is not None
        ]
        assert got == (objects[-1] if objects else None)
    else:
        assert kind == "file" and isinstance(got, dict) and got == json.loads(file)


def _object_or_none(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


AGENT = """\
import json, pathlib, sys
json.load(sys.stdin)
counter = pathlib.Path(sys.argv[1])
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
open("submission.json", "w").write(json.loads(pathlib.Path(sys.argv[2]).read_text())[n])
"""

#: What the agent writes in its successive trials, and what its trial's error must say.
MALFORMED = [
    ("[" * 100_000, "submission.json: JSON nested too deeply"),
    ('{"key": "alpha"', "submission.json: not JSON"),
    ("[1, 2]", "submission.json: must be a JSON object"),
    ('{"key": 7}', "invalid submission: field 'key'"),
    ('{"commitment": 1}', "invalid submission: field 'commitment': Extra inputs"),
]


def test_a_command_agents_malformed_submission_fails_its_trial_with_the_reason(
    itbench: CliFn, tmp_path: Path
) -> None:
    agent = tmp_path / "agent" / "write.py"
    agent.parent.mkdir()
    agent.write_text(AGENT)
    contents = tmp_path / "agent" / "contents.json"
    contents.write_text(json.dumps([c for c, _ in MALFORMED]))
    run = tmp_path / "run"
    res = itbench(
        "evaluate",
        "--agent",
        "command",
        "-s",
        "toy/registry-alpha-1",
        "--trials",
        str(len(MALFORMED)),
        "--sandbox",
        "none",
        "--option",
        f"agent_command=python3 {agent} {tmp_path / 'count'} {contents}",
        "--out",
        str(run),
    )
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    rows = sorted(results(run), key=lambda r: r["trial_index"])
    for row, (_, reason) in zip(rows, MALFORMED, strict=True):
        assert row["status"] == "failed" and reason in row["error"], row["error"]
