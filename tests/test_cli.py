"""Commands that print data: show, schema, list, and the JSON they print."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import ITBENCH, PICK, CliFn, _env


def test_show_prints_public_fields_and_no_ground_truth(itbench: CliFn) -> None:
    res = itbench("show", "toy/registry-beta-2", "--json")
    assert res.returncode == 0
    data = res.json()
    assert data["id"] == "toy/registry-beta-2" and data["params"] == {"key": "beta", "expected": 2}  # type: ignore[index]
    assert "ground_truth" not in res.stdout
    text = itbench("show", "toy/registry-beta-2")
    assert "goal" in text.stdout and "ground_truth" not in text.stdout
    assert itbench("show", "toy/nope").returncode == 2


def test_show_prints_a_faults_drawn_targets_as_one_of_them() -> None:
    from itbench.cli.show import _text

    assert _text(["a", ["b", "c"]]) == "a, one of (b | c)"
    assert _text("x") == "x"


def test_schema_writes_json_schemas_of_the_models_and_domains(
    itbench: CliFn, tmp_path: Path
) -> None:
    res = itbench("schema", "--out", "s")
    assert res.returncode == 0
    names = {p.name for p in (tmp_path / "s").iterdir()}
    assert {
        "trial-result.schema.json",
        "run-manifest.schema.json",
        "task-view.schema.json",
    } <= names
    assert {"toy.scenario.schema.json", "toy.submission.schema.json"} <= names
    result = json.loads((tmp_path / "s" / "trial-result.schema.json").read_text())
    assert "schema_version" in result["properties"] and "status" in result["required"]
    assert (
        "ground_truth"
        in json.loads((tmp_path / "s" / "toy.scenario.schema.json").read_text())["properties"]
    )
    assert "trial-result" in itbench("schema", "--json").json()  # type: ignore[operator]


def test_list_filters_by_domain_tag_and_complexity(itbench: CliFn) -> None:
    ids = [s["id"] for s in itbench("list", "--domain", "toy", "--tag", "control", "--json").json()]  # type: ignore[union-attr]
    assert ids == ["toy/healthy"]
    assert itbench("list", "--domain", "toy", "--complexity", "high", "--json").json() == []


FIXED = ("healthy", "registry-alpha-1", "registry-beta-2", "registry-gamma-3")


def test_validate_passes_toy_catalog_and_fails_when_noop_passes(
    itbench: CliFn, tmp_path: Path
) -> None:
    cat = tmp_path / "cat" / "toy"
    cat.mkdir(parents=True)
    (cat / "pick.yaml").write_text(PICK)
    res = itbench("validate", "toy/[hr]*", "toy/pick", "--scenario-path", str(cat.parent), "--json")
    verdicts = {s["id"]: s["reasons"] for s in res.json()["scenarios"]}  # type: ignore[index]
    # The drawn key is a generator; the fixed variants of the registry are answered from the
    # catalog alone, and so is the control (the toy's constant probe gives no answer, so the
    # control is not one a constant may pass).
    assert verdicts == {
        "toy/pick": [],
        **{f"toy/{k}": ["probe/answer-key passed it"] for k in FIXED},
    }
    # How many answers public draws ask for: four keys for the generator, one for the rest.
    answers = {s["id"]: s["answers"] for s in res.json()["scenarios"]}  # type: ignore[index]
    assert answers["toy/pick"]["distinct"] == 4 and answers["toy/pick"]["commonest"] < 0.5
    assert all(answers[f"toy/{k}"] == {"distinct": 1, "commonest": 1.0} for k in FIXED)
    assert res.returncode == 1
    # A scenario the oracle cannot solve (its "correct" value is itself invalid).
    (cat / "unsolvable.yaml").write_text(
        "domain: toy\ngoal: g\ntask_types: [detection]\nvalues: {a: 1}\nground_truth: {key: a, expected: 5000}\n"
    )
    res = itbench("validate", "toy/unsolvable", "--scenario-path", str(tmp_path / "cat"), "--json")
    assert res.returncode == 1
    [row] = res.json()["scenarios"]  # type: ignore[index]
    assert (
        row["valid"] is False and row["oracle"] == "failed" and "oracle failed" in row["reasons"][0]
    )


BROKEN = "id: toy/broken-one\ndomain: toy\ngoal: [unclosed\n"
NO_GOAL = (
    "domain: toy\ntask_types: [detection]\nvalues: {a: 1}\nground_truth: {key: a, expected: 1}\n"
)


def _catalog_with_rejections(tmp_path: Path) -> Path:
    cat = tmp_path / "cat" / "toy"
    cat.mkdir(parents=True)
    (cat / "broken.yaml").write_text(BROKEN)
    (cat / "nogoal.yaml").write_text(NO_GOAL)
    return tmp_path / "cat"


def test_show_of_a_rejected_file_says_why(itbench: CliFn, tmp_path: Path) -> None:
    cat = str(_catalog_with_rejections(tmp_path))
    res = itbench("show", "toy/nogoal", "--scenario-path", cat)
    assert res.returncode == 1 and "unknown scenario" not in res.stderr
    [line] = [line for line in res.stderr.splitlines() if "was rejected" in line]
    assert "nogoal.yaml" in line and "field 'goal'" in line and "Field required" in line
    data = itbench("show", "toy/broken-one", "--scenario-path", cat, "--json").json()
    [rejection] = data["rejected"]  # type: ignore[index]
    assert rejection["file"].endswith("broken.yaml") and "invalid YAML" in rejection["reason"]
    res = itbench("show", "toy/helthy")
    assert res.returncode == 2 and "did you mean toy/healthy" in res.stderr


def test_validate_strict_fails_on_rejected_files_its_patterns_name(
    itbench: CliFn, tmp_path: Path
) -> None:
    cat = str(_catalog_with_rejections(tmp_path))
    res = itbench("validate", "--strict", "toy/broken-one", "toy/nogoal", "--scenario-path", cat)
    assert res.returncode == 1
    failing = [line for line in res.stderr.splitlines() if "fails validate" in line]
    assert len(failing) == 2
    assert any("broken.yaml" in line and "invalid YAML" in line for line in failing)
    assert any("nogoal.yaml" in line and "field 'goal'" in line for line in failing)
    # Without --strict a pattern that names only rejected files selects nothing.
    assert itbench("validate", "toy/nogoal", "--scenario-path", cat).returncode == 2
    # Rejected files no pattern names do not fail a strict validation.
    res = itbench(
        "validate", "--strict", "--no-probes", "toy/healthy", "--scenario-path", cat, "--json"
    )
    assert res.returncode == 0, res.stderr
    assert res.json()["failing_rejections"] == [] and res.json()["rejected_files"] >= 2  # type: ignore[index,operator]


#: One file, a rejection per variant (its three variants lack a goal).
MATRIX_NO_GOAL = NO_GOAL.replace("domain: toy\n", "domain: toy\nid: toy/multi-${k}\n") + (
    "matrix:\n  - {k: x}\n  - {k: y}\n  - {k: z}\n"
)
DUPLICATE_DOMAIN = """
from itbench import hookimpl
from itbench_toy.domain import ToyDomain


@hookimpl
def itbench_register_domains():
    return [ToyDomain()]
"""


def _catalog_of_two_rejected_files(tmp_path: Path) -> str:
    cat = _catalog_with_rejections(tmp_path)
    (cat / "toy" / "broken.yaml").unlink()
    (cat / "toy" / "multi.yaml").write_text(MATRIX_NO_GOAL)
    return str(cat)


def test_rejections_are_counted_by_file(itbench: CliFn, tmp_path: Path) -> None:
    cat = _catalog_of_two_rejected_files(tmp_path)
    res = itbench("list", "toy/*", "--scenario-path", cat)
    assert res.stdout.rstrip().endswith("4 scenarios, 2 rejected file(s)"), res.stdout
    assert res.stderr.count("rejected scenario: ") == 4
    assert "itbench: 2 scenario file(s) rejected" in res.stderr
    res = itbench("validate", "--no-probes", "toy/healthy", "--scenario-path", cat, "--json")
    assert res.returncode == 0 and res.json()["rejected_files"] == 2  # type: ignore[index]
    res = itbench("validate", "--strict", "toy/multi-*", "--scenario-path", cat)
    assert res.returncode == 1 and "1 rejected file(s)" in res.stdout, res.stdout
    # Without --strict, a pattern that names only rejected files says so.
    res = itbench("validate", "toy/multi-*", "--scenario-path", cat)
    assert res.returncode == 2
    assert "no scenario matches toy/multi-*; 1 rejected scenario file(s) match" in res.stderr
    assert "`itbench list`" in res.stderr and "`itbench show ID`" in res.stderr


def test_evaluate_shows_plugin_problems_and_counts_rejected_files(
    itbench: CliFn, tmp_path: Path
) -> None:
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "itbench_dup_domain.py").write_text(DUPLICATE_DOMAIN)
    cat = _catalog_of_two_rejected_files(tmp_path)
    res = itbench(
        "evaluate",
        *("--agent", "toy/solver", "-s", "toy/healthy", "--out", "run"),
        *("--plugin", "itbench_dup_domain", "--scenario-path", cat),
        env={"PYTHONPATH": str(tmp_path / "mods")},
    )
    # The run is refused (two plugins register the domain); the problem is on stderr once.
    assert res.returncode == 2, res.stderr
    duplicate = "plugin 'itbench_dup_domain' in hook itbench_register_domains: domain 'toy'"
    assert res.stderr.count(duplicate) == 1, res.stderr
    assert res.stderr.count("2 scenario file(s) rejected; itbench list shows why") == 1
    assert "rejected scenario:" not in res.stderr
    # Refused before the catalog is read (an unknown flag), the problems still show.
    res = itbench(
        "evaluate",
        *("--agent", "toy/solver", "-s", "toy/healthy", "--out", "run2", "--no-such-flag"),
        *("--plugin", "itbench_dup_domain"),
        env={"PYTHONPATH": str(tmp_path / "mods")},
    )
    assert res.returncode == 2 and "--no-such-flag" in res.stderr, res.stderr
    assert "broken-import" in res.stderr


def test_plugins_exits_1_when_a_plugin_has_problems(itbench: CliFn) -> None:
    res = itbench("plugins")
    assert res.returncode == 1
    assert "broken-import" in res.stderr and "toy" in res.stdout
    clean = itbench("plugins", env={"ITBENCH_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert clean.returncode == 0, clean.stderr


def test_evaluate_prints_a_lazily_raised_agent_problem_once_after_the_results(
    plugin_site: Path, tmp_path: Path
) -> None:
    # stderr merged into stdout, to see the order of the two.
    proc = subprocess.run(
        [*ITBENCH, "evaluate", "--agent", "toy/solver", "-s", "toy/healthy", "--out", "run"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(plugin_site, None),
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout
    lines = proc.stdout.splitlines()
    agents = [i for i, line in enumerate(lines) if "agent table is corrupt" in line]
    results = [i for i, line in enumerate(lines) if line.startswith("results:")]
    assert len(agents) == 1 and results and agents[0] > results[0], proc.stdout
    assert "'broken-hook'" in lines[agents[0]]
    recorded = json.loads((tmp_path / "run" / "plugin-problems.json").read_text())
    assert any("agent table is corrupt" in p["reason"] for p in recorded)


def test_report_says_where_it_wrote(itbench: CliFn, tmp_path: Path) -> None:
    run = itbench("evaluate", "--agent", "toy/solver", "-s", "toy/healthy", "--out", "run")
    assert run.returncode == 0, run.stderr
    res = itbench("report", "run", "--out", "rep")
    assert res.returncode == 0, res.stderr
    out = tmp_path / "rep"
    assert f"to {out.name}:" in res.stdout or f"to {out}:" in res.stdout
    written = sorted(p.name for p in out.iterdir())
    assert written and all(name in res.stdout for name in written)
    data = itbench("report", "run", "--out", "rep", "--json").json()
    assert data["out_dir"] == "rep" and len(data["files"]) == len(written)  # type: ignore[index,arg-type]


#: Only the toy domain: no entry-point plugins (the broken ones would make ``docs`` refuse).
NO_AUTOLOAD = {"ITBENCH_DISABLE_PLUGIN_AUTOLOAD": "1"}
TOY_ONLY = ("--plugin", "itbench_toy.plugin")


def test_docs_writes_one_reference_per_domain_and_checks_them(
    itbench: CliFn, tmp_path: Path
) -> None:
    res = itbench("docs", "--out", "d", *TOY_ONLY, env=NO_AUTOLOAD)
    assert res.returncode == 0, res.stderr
    out = tmp_path / "d"
    toy = (out / "toy.md").read_text()
    assert toy.startswith("# Scenario reference: `toy`") and "ground_truth" in toy
    assert "[toy.md](toy.md)" in (out / "README.md").read_text()
    assert itbench("docs", "--out", "d", "--check", *TOY_ONLY, env=NO_AUTOLOAD).returncode == 0
    (out / "toy.md").write_text(toy + "edited\n")
    (out / "gone.md").write_text("# Scenario reference: `gone`\n")
    (out / "notes.md").write_text("# Hand-written notes\n")
    res = itbench("docs", "--out", "d", "--check", *TOY_ONLY, env=NO_AUTOLOAD)
    assert res.returncode == 1
    assert "toy.md: out of date" in res.stderr and "gone.md" not in res.stderr
    assert "notes.md" not in res.stderr and (out / "toy.md").read_text().endswith("edited\n")
    res = itbench("docs", "--out", "d", "--check", "--prune", *TOY_ONLY, env=NO_AUTOLOAD)
    assert res.returncode == 1 and "gone.md: no longer generated" in res.stderr
    # Without --prune a reference of a domain that is not loaded is never removed.
    res = itbench("docs", "--out", "d", *TOY_ONLY, env=NO_AUTOLOAD)
    assert res.returncode == 0 and (out / "toy.md").read_text() == toy
    assert (out / "gone.md").exists() and (out / "notes.md").exists()
    res = itbench("docs", "--out", "d", "--prune", *TOY_ONLY, env=NO_AUTOLOAD)
    assert res.returncode == 0 and "removed" in res.stdout
    assert not (out / "gone.md").exists() and (out / "notes.md").exists()


def test_docs_writes_the_domains_it_can_when_a_plugin_has_problems(
    itbench: CliFn, tmp_path: Path
) -> None:
    """A broken plugin does not hold back the others' references, but the index and removals
    wait (a domain that failed to load would lose its entry), and the command exits 1."""
    out = tmp_path / "d"
    out.mkdir()
    (out / "gone.md").write_text("# Scenario reference: `gone`\n")
    (out / "README.md").write_text("# the index as it was\n")
    res = itbench("docs", "--out", "d", "--check", "--prune")
    assert res.returncode == 1, res.stdout
    assert "broken-import" in res.stderr and "toy.md: missing" in res.stderr
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "gone.md"]
    res = itbench("docs", "--out", "d", "--prune")
    assert res.returncode == 1, res.stdout
    assert "broken-import" in res.stderr and "index README.md was left as it was" in res.stderr
    assert (out / "toy.md").read_text().startswith("# Scenario reference: `toy`")
    assert (out / "README.md").read_text() == "# the index as it was\n"
    assert (out / "gone.md").exists()


def test_docs_names_files_it_cannot_replace(itbench: CliFn, tmp_path: Path) -> None:
    undecodable = tmp_path / "latin"
    undecodable.mkdir()
    (undecodable / "README.md").write_bytes("# Références\n\xe9t\xe9\n".encode("latin-1"))
    folder = tmp_path / "folder"
    (folder / "toy.md").mkdir(parents=True)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("# My notes\n")
    for directory, why in (
        (undecodable, "is not UTF-8 text"),
        (folder, "is not a file"),
        (mine, "was not written by `itbench docs`"),
    ):
        for check in ((), ("--check",)):
            res = itbench("docs", "--out", str(directory), *check, *TOY_ONLY, env=NO_AUTOLOAD)
            assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
            assert why in res.stderr and str(directory) in res.stderr
    assert (mine / "README.md").read_text() == "# My notes\n"
    assert not (undecodable / "toy.md").exists() and (folder / "toy.md").is_dir()


LAB_PLUGIN = """
from itbench import hookimpl
from itbench_toy.domain import ToyDomain


class LabDomain(ToyDomain):
    name = "lab"
    description = "A domain whose code is part of the checkout."


@hookimpl
def itbench_register_domains():
    return [LabDomain()]
"""


def test_docs_without_out_writes_only_the_checkouts_own_domains(
    plugin_site: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from itbench.cli import cli
    from itbench.cli import docs as outputs  # the module: commands are bound under other names

    checkout = tmp_path / "checkout"
    (checkout / "scenarios").mkdir(parents=True)
    (checkout / "itbench_docs_lab.py").write_text(LAB_PLUGIN)
    monkeypatch.syspath_prepend(str(plugin_site))
    monkeypatch.syspath_prepend(str(checkout))
    monkeypatch.setattr(outputs, "REPO_CATALOG", checkout / "scenarios")
    monkeypatch.setenv("ITBENCH_DISABLE_PLUGIN_AUTOLOAD", "1")
    plugins = ["--plugin", "itbench_toy.plugin", "--plugin", "itbench_docs_lab"]
    runner = CliRunner()
    res = runner.invoke(cli, ["docs", *plugins])
    assert res.exit_code == 0, res.output
    docs = checkout / "docs"
    assert sorted(p.name for p in docs.iterdir()) == ["README.md", "lab.md"]
    assert "[lab.md](lab.md)" in (docs / "README.md").read_text()
    assert "'toy' skipped" in res.output and "--out DIR --domain toy" in res.output
    # The toy domain installed does not make the checkout's docs stale.
    assert runner.invoke(cli, ["docs", "--check", *plugins]).exit_code == 0
    res = runner.invoke(cli, ["docs", "--domain", "toy", *plugins])
    assert res.exit_code == 2 and "give --out DIR" in res.output
    assert not (docs / "toy.md").exists()
    res = runner.invoke(cli, ["docs", "--domain", "nope", *plugins])
    assert res.exit_code == 2 and "registered domains: lab, toy" in res.output
    # With --out and --domain, only that domain (and an index of it).
    res = runner.invoke(cli, ["docs", "--out", str(tmp_path / "ext"), "--domain", "toy", *plugins])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "ext").iterdir()) == ["README.md", "toy.md"]
    # A reference --domain leaves out is kept; one of a domain not registered goes with --prune.
    (tmp_path / "ext" / "lab.md").write_text("# Scenario reference: `lab`\n")
    (tmp_path / "ext" / "gone.md").write_text("# Scenario reference: `gone`\n")
    ext = ["docs", "--out", str(tmp_path / "ext"), "--domain", "toy", *plugins]
    res = runner.invoke(cli, ext)
    assert res.exit_code == 0 and (tmp_path / "ext" / "gone.md").exists(), res.output
    res = runner.invoke(cli, [*ext, "--prune"])
    assert res.exit_code == 0 and (tmp_path / "ext" / "lab.md").exists(), res.output
    assert not (tmp_path / "ext" / "gone.md").exists()


def test_docs_outside_a_checkout_requires_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from itbench.cli import cli
    from itbench.cli import docs as outputs  # the module: commands are bound under other names

    monkeypatch.setattr(outputs, "REPO_CATALOG", tmp_path / "no-checkout" / "scenarios")
    monkeypatch.setenv("ITBENCH_DISABLE_PLUGIN_AUTOLOAD", "1")
    res = CliRunner().invoke(cli, ["docs"])
    assert res.exit_code == 2 and "--out" in res.output


def test_new_creates_a_distribution_and_prints_the_next_steps(
    itbench: CliFn, tmp_path: Path
) -> None:
    res = itbench("new", "domain", "kv-sample", "--dir", "work")
    assert res.returncode == 2 and "no directory" in res.stderr
    (tmp_path / "work").mkdir()
    res = itbench("new", "domain", "kv-sample", "--dir", "work")
    assert res.returncode == 0, res.stderr
    created = tmp_path / "work" / "kv-sample"
    assert (created / "pyproject.toml").is_file()
    assert f"in {created}\n" in res.stdout
    assert f"pip install -e {created}\n" in res.stdout
    assert "itbench validate --strict 'kv-sample/*'" in res.stdout
    again = itbench("new", "domain", "kv-sample", "--dir", "work")
    assert again.returncode == 2 and "already exists" in again.stderr


def test_each_command_lives_in_a_module_of_its_own_name() -> None:
    """One module per command (``itbench/cli/<command>.py``), its subcommands beside it."""
    from itbench.cli import cli

    assert len(cli.commands) >= 16
    for name, command in cli.commands.items():
        assert command.callback is not None
        assert command.callback.__module__ == f"itbench.cli.{name}", name


def test_a_refused_run_leaves_no_run_directory(itbench: CliFn, tmp_path: Path) -> None:
    """A usage error exits 2 and leaves nothing: no new directory, no lock in an empty one."""
    res = itbench("evaluate", "--agent", "nosuch", "-s", "toy/healthy", "--out", "fresh")
    assert res.returncode == 2 and "unknown agent 'nosuch'" in res.stderr
    assert not (tmp_path / "fresh").exists()
    (tmp_path / "mine").mkdir()
    res = itbench("evaluate", "--agent", "noop", "-s", "toy/no-such", "--out", "mine")
    assert res.returncode == 2 and "no scenario matches" in res.stderr
    assert (tmp_path / "mine").is_dir() and not any((tmp_path / "mine").iterdir())


def test_the_command_agent_s_settings_are_checked_before_any_trial(
    itbench: CliFn, tmp_path: Path
) -> None:
    """A missing program, a program directory that is none, or one inside the run directory:
    each exits 2 before any trial, naming the option and the reason, and leaves no run."""
    res = itbench("evaluate", "--agent", "command", "-s", "toy/healthy", "--out", "a")
    assert res.returncode == 2 and "needs --option agent_command=" in res.stderr
    res = itbench(
        "evaluate",
        "--agent",
        "command",
        "-s",
        "toy/healthy",
        "--out",
        "b",
        "--option",
        "agent_command=python3 x.py",
        "--option",
        "agent_dir=/nonexistent/dir",
    )
    assert res.returncode == 2 and "agent_dir: /nonexistent/dir is not a directory" in res.stderr
    inside = tmp_path / "c" / "agent"
    inside.mkdir(parents=True)
    (inside / "a.py").write_text("print('{}')\n")
    res = itbench(
        "evaluate",
        "--agent",
        "command",
        "-s",
        "toy/healthy",
        "--out",
        "c",
        "--option",
        f"agent_command=python3 {inside / 'a.py'}",
    )
    assert res.returncode == 2 and "inside the run directory" in res.stderr, res.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["agent"]


def test_every_option_is_declared_and_checked_before_any_trial(
    itbench: CliFn, tmp_path: Path
) -> None:
    """An unknown key (the declared ones listed), a wrong value of the core's, a domain's or
    an agent's option: each exits 2 before any trial, naming the option, and leaves no run."""
    res = itbench("evaluate", "--agent", "noop", "-s", "toy/healthy", "--out", "a",
                  "--option", "nosuch=1")  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "unknown option nosuch (the options: " in res.stderr
    assert "ready_timeout" in res.stderr and "agent_memory" in res.stderr  # the valid ones
    res = itbench("evaluate", "--agent", "noop", "-s", "toy/healthy", "--out", "a",
                  "--option", "ready_timout=30")  # fmt: skip
    assert res.returncode == 2 and "did you mean ready_timeout?" in res.stderr, res.stderr
    listing = itbench("plugins").stdout
    assert "--option ready_timeout=VALUE: Seconds an environment" in listing, listing
    assert "--policy-engine regorus|regopy|opa:" in listing
    for option, reason in (
        ("ready_timeout=abc", "option ready_timeout: 'abc' is not a number from 1 to 86400"),
        ("setup_delay=-1", "option setup_delay: -1 is not a number from 0 to 60"),
        ("agent_memory=lots", "option agent_memory: 'lots' is not a size in bytes"),
        ("mcp_transport=pigeon", "option mcp_transport: 'pigeon' is not one of http, stdio"),
        ("llm_max_steps=2.5", "option llm_max_steps: 2.5 is not a whole number"),
    ):
        res = itbench("evaluate", "--agent", "noop", "-s", "toy/healthy", "--out", "b",
                      "--option", option)  # fmt: skip
        assert res.returncode == 2 and reason in res.stderr, (option, res.stderr)
        res = itbench("validate", "toy/healthy", "--option", option)
        assert res.returncode == 2 and reason in res.stderr, (option, res.stderr)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    res = itbench("evaluate", "--agent", "noop", "-s", "toy/healthy", "--out", "c",
                  "--option", "setup_delay=0.1", "--option", "ready_timeout=30")  # fmt: skip
    assert res.returncode == 0, res.stderr
    config = json.loads((tmp_path / "c" / "manifest.json").read_text())["config"]
    assert config["options"]["ready_timeout"] == 30.0
    assert config["options"]["setup_delay"] == 0.1


def test_every_option_a_package_reads_is_declared() -> None:
    """Each ``options.get("KEY")`` of the core, the domains and the STRATUS plugin names a
    key some plugin declares, so no setting a component reads can be refused as unknown."""
    import re

    from itbench.bench import Bench

    repo = Path(__file__).resolve().parents[1]
    declared = {s.key for s in Bench().options.values()}
    read: dict[str, str] = {}
    for root in ("itbench", "sre", "ciso", "finops", "plugins/itbench-stratus"):
        for path in (repo / root).rglob("*.py"):
            if "tests" in path.parts:
                continue
            for key in re.findall(r"options\.get\(\s*\"([a-z_]+)\"", path.read_text()):
                read[key] = str(path.relative_to(repo))
    assert read, "no option read found: the pattern is stale"
    missing = {k: p for k, p in read.items() if k not in declared}
    assert not missing, f"options read but declared by no plugin: {missing}"
