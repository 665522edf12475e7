"""Fuzzed run directories: reports and ``--resume`` refuse what is broken, and lose nothing.

A real finished run of the toy domain is copied and broken at random: results lines torn,
duplicated, dropped, blank, of garbage bytes, of another run or of trials the run does not
hold, with fields of any value; a manifest missing, of garbage, cut short, with fields of any
value or not matching the results; a secret missing, of garbage or not the manifest's. Then
``report``'s frames and ``--resume`` (the real runner) either succeed, with every planned
trial recorded exactly once and the earlier results kept byte for byte, or refuse with an
error naming the file, the field and the reason, and change nothing.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import CliFn
from fuzzing import budget, json_values, names
from hypothesis import event, given
from hypothesis import strategies as st

from itbench.bench import Bench
from itbench.errors import RunDirError, UsageError
from itbench.models import RunConfig, TrialResult
from itbench.report import frames
from itbench.runner import Runner
from itbench.store import MANIFEST, RESULTS, SECRET, RunStore

TRIALS = 8  # toy/* (4 scenarios) x 2


@pytest.fixture(scope="module")
def bench(plugin_site: Path) -> Iterator[Bench]:
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(plugin_site))
        yield Bench(plugins=["itbench_toy.plugin"], autoload=False)


@pytest.fixture(scope="module")
def runs(bench: Bench, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two finished runs of the same trials: the one to break and a foreign one (other run id)."""
    root = tmp_path_factory.mktemp("runs")
    for name in ("run", "other"):
        config = RunConfig(agent="oracle", scenarios=["toy/*"], trials=2)
        outcome = Runner(bench, config, root / name).run()
        assert len(outcome.results) == TRIALS
    return root / "run", root / "other"


class Lines(list[bytes]):
    """The lines of a results file (shown by their count in a failing example)."""

    def __repr__(self) -> str:
        return f"<{len(self)} lines>"


def _lines(run: Path) -> Lines:
    return Lines((run / RESULTS).read_bytes().splitlines(keepends=True))


def _with_field(line: bytes, key: str, value: Any) -> bytes:
    data = json.loads(line)
    data[key] = value
    return json.dumps(data).encode() + b"\n"


@st.composite
def broken_results(draw: st.DrawFn, original: list[bytes], foreign: list[bytes]) -> bytes:
    """The results file after one to four random mishaps."""
    lines = list(original)
    # Half the files only lost lines or gained blank ones: those a resume must complete.
    harmful = ["dup", "foreign_run", "foreign_trial", "garbage"] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["drop", "blank", *harmful]))
        if op in ("drop", "dup") and not lines:
            continue
        at = draw(st.integers(0, len(lines)))
        if op == "dup":
            lines.insert(at, lines[draw(st.integers(0, len(lines) - 1))])
        elif op == "drop":
            del lines[min(at, len(lines) - 1)]
        elif op == "foreign_run":
            lines.insert(at, draw(st.sampled_from(foreign)))
        elif op == "foreign_trial":
            line = draw(st.sampled_from(original))
            lines.insert(at, _with_field(line, "trial_id", draw(names)))
        elif op == "garbage":
            junk = draw(st.binary(min_size=1, max_size=60)).replace(b"\n", b"")
            lines.insert(at, junk + b"\n")
        else:
            lines.insert(at, draw(st.sampled_from([b"\n", b"  \n", b"\r\n", b"\t\n"])))
    data = b"".join(lines)
    if draw(st.booleans()):
        # Torn: the harness died while writing the last line.
        data += draw(st.sampled_from(original))[: draw(st.integers(1, 200))].rstrip(b"\n")
    return data


@st.composite
def field_edits(draw: st.DrawFn, original: list[bytes]) -> bytes:
    """One result line with one top-level field dropped or given any value."""
    lines = list(original)
    i = draw(st.integers(0, len(lines) - 1))
    data = json.loads(lines[i])
    key = draw(st.sampled_from(sorted(data)))
    if draw(st.booleans()):
        del data[key]
    else:
        data[key] = draw(json_values(6))
    lines[i] = json.dumps(data).encode() + b"\n"
    return b"".join(lines)


def _expected_error(data: bytes, run_id: str, planned: set[str], original: list[bytes]) -> bool:
    """Whether a results file must be refused: a complete line not a result of this run, a
    trial recorded twice, or lines that are not the run's first lines as written (the results
    chain: an edited value, a line removed or moved); a torn last line and blank lines are no
    results."""
    seen: set[str] = set()
    # Compared as canonical text: 1, 1.0 and true are equal in Python, not on the chain.
    written = [json.dumps(json.loads(line), sort_keys=True) for line in original]
    kept = 0
    for raw in data.splitlines(keepends=True):
        if not raw.endswith(b"\n") or not raw.strip():
            continue
        try:
            result = TrialResult.model_validate_json(raw)
        except ValueError:
            return True
        if result.trial_id in seen or result.trial_id not in planned or result.run_id != run_id:
            return True
        if kept >= len(written) or json.dumps(json.loads(raw), sort_keys=True) != written[kept]:
            return True
        kept += 1
        seen.add(result.trial_id)
    return False


def _complete(data: bytes) -> bytes:
    return data[: data.rfind(b"\n") + 1]


def _snapshot(run: Path) -> dict[str, bytes | None]:
    return {
        name: (run / name).read_bytes() if (run / name).is_file() else None
        for name in (MANIFEST, RESULTS, SECRET)
    }


def _assert_names_a_file(exc: Exception, run: Path) -> None:
    """The error starts with the file of the run it is about, and says why."""
    text = str(exc)
    files = [str(r / n) for r in (run, run.resolve()) for n in (MANIFEST, RESULTS, SECRET)]
    assert any(text.startswith(f) for f in files), text
    reason = text.split(": ", 1)[1] if ": " in text else ""
    assert len(reason) > 8 and "Traceback" not in text, text


def resume(bench: Bench, run: Path) -> Exception | None:
    """Resume ``run`` with the real runner; the refusal, or ``None`` when it ran."""
    try:
        manifest = RunStore(run).read_manifest()
        Runner(bench, manifest.config, run).run(resume=True)
    except (RunDirError, UsageError) as exc:
        return exc
    return None


def check_resumed(run: Path, before: dict[str, bytes | None]) -> None:
    """After a resume that ran: every trial once, the earlier complete lines kept as they were."""
    after = (run / RESULTS).read_bytes()
    old = _complete(before[RESULTS] or b"")
    assert after.startswith(old), "earlier results were rewritten"
    ids = Counter(json.loads(line)["trial_id"] for line in after.splitlines() if line.strip())
    assert len(ids) == TRIALS and set(ids.values()) == {1}, ids
    assert len(frames([run]).trials) == TRIALS
    assert _snapshot(run)[MANIFEST] == before[MANIFEST] and _snapshot(run)[SECRET] == before[SECRET]


def _copy(runs: tuple[Path, Path], tmp: Path) -> Path:
    run = tmp / "run"
    shutil.copytree(runs[0], run, symlinks=True)
    return run


@pytest.fixture(scope="module")
def fresh_run(
    runs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[], Path]:
    """A maker of copies of the finished run, one per example."""
    return lambda: _copy(runs, tmp_path_factory.mktemp("copy"))


def _run_id(run: Path) -> str:
    return str(json.loads((run / MANIFEST).read_text())["run_id"])


def _planned(run: Path) -> set[str]:
    return set(json.loads((run / MANIFEST).read_text())["seeds"])


@budget(30)
@given(data=st.data())
def test_broken_results_are_refused_by_line_and_field_or_resumed_without_loss(
    bench: Bench, runs: tuple[Path, Path], fresh_run: Callable[[], Path], data: Any
) -> None:
    run = fresh_run()
    original, foreign = _lines(run), _lines(runs[1])
    broken = data.draw(
        st.one_of(broken_results(original, foreign), field_edits(original)), label="results"
    )
    (run / RESULTS).write_bytes(broken)
    refuse = _expected_error(broken, _run_id(run), _planned(run), original)
    before = _snapshot(run)
    # The report reads the same lines (a torn last one is no result).
    try:
        frames([run])
        assert not refuse, "a results file that must be refused was read"
    except RunDirError as exc:
        assert refuse, exc
        _assert_names_a_file(exc, run)
        # The line, the field and the reason.
        assert re.search(rf"{RESULTS}:\d+: field '[^']+': \S", str(exc)), exc
    refused = resume(bench, run)
    event("refused" if refused is not None else "resumed")
    if refused is not None:
        assert refuse, refused
        _assert_names_a_file(refused, run)
        assert re.search(rf"{RESULTS}:\d+: field '[^']+': \S", str(refused)), refused
        assert _snapshot(run) == before, "a refused resume changed the run"
    else:
        assert not refuse, "a results file that must be refused was resumed"
        check_resumed(run, before)


@st.composite
def manifest_edits(draw: st.DrawFn, manifest: dict[str, Any]) -> bytes:
    """The manifest after one random mishap."""
    text = json.dumps(manifest, indent=2).encode()
    ops = ["garbage", "cut", "field", "drop", "run_id", "seeds", "trials", "scenarios", "sha"]
    op = draw(st.sampled_from([*ops, "harmless", "harmless", "harmless"]))
    if op == "garbage":
        return draw(st.binary(max_size=100))
    if op == "cut":
        return text[: draw(st.integers(0, len(text) - 1))]
    data = json.loads(text)
    if op == "harmless":
        # What describes the run but does not decide its trials: a resume goes on.
        key, value = draw(
            st.sampled_from(
                [
                    ("git_revision", None),
                    ("git_dirty", True),
                    ("packages", {}),
                    ("package_hashes", {"x": "y"}),
                    ("created_at", "2001-01-01T00:00:00Z"),
                ]
            )
        )
        data[key] = value
    elif op == "field":
        data[draw(st.sampled_from(sorted(data)))] = draw(json_values(6))
    elif op == "drop":
        del data[draw(st.sampled_from(sorted(data)))]
    elif op == "run_id":
        data["run_id"] = draw(names)
    elif op == "seeds":
        seeds = data["seeds"]
        trial = draw(st.sampled_from(sorted(seeds)))
        edit = draw(st.sampled_from(["drop", "add", "change"]))
        if edit == "drop":
            del seeds[trial]
        elif edit == "add":
            seeds[draw(names)] = draw(st.integers(0, 2**31))
        else:
            seeds[trial] = seeds[trial] + draw(st.integers(1, 10))
    elif op == "trials":
        data["config"]["trials"] = draw(st.sampled_from([1, 3, 4]))
    elif op == "scenarios":
        ids = data["scenario_ids"]
        ids.append(draw(st.one_of(st.sampled_from(ids), names.map(lambda n: f"toy/{n}"))))
    else:
        data["secret_sha256"] = draw(st.text("0123456789abcdef", min_size=64, max_size=64))
    return json.dumps(data).encode()


@budget(20)
@given(data=st.data())
def test_a_broken_manifest_or_secret_is_refused_by_file_and_field_and_changes_nothing(
    bench: Bench, fresh_run: Callable[[], Path], data: Any
) -> None:
    run = fresh_run()
    # A trial or two still to run, so a resume that goes through has something to append.
    lines = _lines(run)
    keep = data.draw(st.integers(len(lines) - 2, len(lines)), label="results kept")
    (run / RESULTS).write_bytes(b"".join(lines[:keep]))
    target = data.draw(st.sampled_from([MANIFEST, MANIFEST, SECRET]), label="file")
    if target == MANIFEST:
        manifest = json.loads((run / MANIFEST).read_text())
        edit = data.draw(st.one_of(manifest_edits(manifest), st.just(None)), label="manifest")
        if edit is None:
            (run / MANIFEST).unlink()
        else:
            (run / MANIFEST).write_bytes(edit)
    else:
        secret = data.draw(
            st.one_of(
                st.none(),
                st.just((run / SECRET).read_bytes().strip() + b"\n\n"),  # the same secret
                st.binary(max_size=80),
                st.text("0123456789abcdef", min_size=64, max_size=64).map(str.encode),
            ),
            label="secret",
        )
        if secret is None:
            (run / SECRET).unlink()
        else:
            (run / SECRET).write_bytes(secret)
    before = _snapshot(run)
    with_report: Exception | None = None
    try:
        frames([run])
    except RunDirError as exc:
        with_report = exc
        _assert_names_a_file(exc, run)
    refused = resume(bench, run)
    event(f"{target}: " + ("refused" if refused is not None else "resumed"))
    if refused is None:
        assert with_report is None, "resumed a run whose results the report refuses"
        check_resumed(run, before)
    else:
        _assert_names_a_file(refused, run)
        assert _snapshot(run) == before, "a refused resume changed the run"


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("manifest-garbage", lambda run: (run / MANIFEST).write_bytes(b"\xff\xfe\x00{")),
        ("manifest-dir", lambda run: ((run / MANIFEST).unlink(), (run / MANIFEST).mkdir())),
        ("results-dir", lambda run: ((run / RESULTS).unlink(), (run / RESULTS).mkdir())),
        (
            "results-garbage-then-torn",
            lambda run: (run / RESULTS).write_bytes(
                b"\x00garbage\n" + (run / RESULTS).read_bytes()[:-10]
            ),
        ),
    ],
)
def test_report_and_resume_refuse_without_a_traceback_and_change_nothing(
    itbench: CliFn, runs: tuple[Path, Path], tmp_path: Path, name: str, make: Any
) -> None:
    run = _copy(runs, tmp_path)
    make(run)
    before = _snapshot(run)
    for args in (
        ["report", str(run), "--out", str(tmp_path / "out")],
        ["evaluate", "--resume", str(run)],
    ):
        res = itbench(*args)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert "Traceback" not in res.stderr and "Error:" in res.stderr, res.stderr
        assert str(run) in res.stderr, res.stderr
        assert _snapshot(run) == before
