"""Plugin registration: first registration wins, and every plugin mistake is a named problem."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from conftest import CliFn, pip_install_into

from itbench.bench import Bench
from itbench.plugins import make_plugin_manager


def _module(root: Path, name: str, source: str) -> str:
    (root / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return name


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "plugin-modules"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    return root


def test_a_duplicate_name_keeps_the_first_registration_and_blames_the_later_plugin(
    plugin_dir: Path,
) -> None:
    agent = """
        from itbench import AgentSpec, hookimpl
        from itbench.agents import NoopAgent

        @hookimpl
        def itbench_register_agents():
            return [AgentSpec("noop", lambda ctx: NoopAgent(), "{label}")]
    """
    first = _module(plugin_dir, "dup_first", agent.replace("{label}", "first"))
    second = _module(plugin_dir, "dup_second", agent.replace("{label}", "second"))
    bench = Bench(plugins=[first, second], autoload=False)
    # The built-in noop was registered before either plugin, so it wins over both.
    assert bench.agents["noop"].description.startswith("Submits nothing")
    blamed = {p.plugin for p in bench.host.problems if "'noop' is already registered" in p.reason}
    assert blamed == {first, second}
    assert all("itbench.agents" not in p.plugin for p in bench.host.problems)

    unique = agent.replace('"noop"', '"dup/agent"')
    a = _module(plugin_dir, "uniq_first", unique.replace("{label}", "first"))
    b = _module(plugin_dir, "uniq_second", unique.replace("{label}", "second"))
    bench = Bench(plugins=[a, b], autoload=False)
    assert bench.agents["dup/agent"].description == "first"
    [problem] = [p for p in bench.host.problems if "dup/agent" in p.reason]
    assert problem.plugin == b and "by plugin 'uniq_first'" in problem.reason


def test_wrong_typed_items_unknown_hooks_and_unsupported_options_are_problems(
    plugin_dir: Path,
) -> None:
    name = _module(
        plugin_dir,
        "sloppy_plugin",
        """
        from itbench import hookimpl

        @hookimpl
        def itbench_register_agents():
            return ["not an agent spec"]

        @hookimpl
        def itbench_register_domians():
            return []

        @hookimpl(wrapper=True)
        def itbench_register_reporters():
            return (yield)

        def itbench_register_executors():
            return []
        """,
    )
    bench = Bench(plugins=[name], autoload=False)
    assert "noop" in bench.agents  # the built-in agents are unaffected
    reasons = {p.reason for p in bench.host.problems if p.plugin == name}
    assert any("expected AgentSpec" in r and "str" in r for r in reasons), reasons
    assert any(
        "unknown hook itbench_register_domians" in r and "itbench_register_domains" in r
        for r in reasons
    ), reasons
    assert any("wrapper=True is not supported" in r for r in reasons), reasons
    assert any("itbench_register_executors is not marked" in r for r in reasons), reasons
    # The unsupported wrapper is never called as a plain function.
    assert set(bench.reporters) == {"csv", "markdown", "latex", "html"}


def test_the_built_in_plugins_have_no_problems() -> None:
    host = make_plugin_manager(autoload=False)
    assert host.problems == []


def test_a_raising_lifecycle_hook_is_reported_at_the_end_of_evaluate_and_in_the_run_dir(
    itbench: CliFn, plugin_site: Path, tmp_path: Path
) -> None:
    _module(
        tmp_path,
        "lifecycle_raiser",
        """
        from itbench import hookimpl

        @hookimpl
        def itbench_trial_started(trial, trial_dir):
            raise RuntimeError("trial start hook exploded")

        @hookimpl
        def itbench_trial_finished(trial, result):
            raise ValueError("trial finish hook exploded")
        """,
    )
    res = itbench(
        "evaluate",
        "--agent",
        "toy/solver",
        "-s",
        "toy/healthy",
        "--plugin",
        "lifecycle_raiser",
        "--out",
        "run",
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert res.returncode == 0, res.stderr
    tail = res.stderr.strip().splitlines()[-2:]
    assert any("trial start hook exploded" in line for line in tail), res.stderr
    assert any("trial finish hook exploded" in line for line in tail), res.stderr
    assert all("lifecycle_raiser" in line for line in tail)
    recorded = json.loads((tmp_path / "run" / "plugin-problems.json").read_text())
    hooks = {p["hook"] for p in recorded if p["plugin"] == "lifecycle_raiser"}
    assert hooks == {"itbench_trial_started", "itbench_trial_finished"}
    assert all(p["during_run"] for p in recorded if p["plugin"] == "lifecycle_raiser")


def test_a_misspelled_hook_makes_itbench_plugins_exit_1(
    itbench: CliFn, plugin_site: Path, tmp_path: Path
) -> None:
    _module(
        tmp_path,
        "misspelled_hook",
        """
        from itbench import hookimpl

        @hookimpl
        def itbench_register_agent():
            return []
        """,
    )
    res = itbench("plugins", "--plugin", "misspelled_hook", env={"PYTHONPATH": str(tmp_path)})
    assert res.returncode == 1
    assert "unknown hook itbench_register_agent" in res.stderr
    assert "did you mean itbench_register_agents" in res.stderr


def test_tryfirst_does_not_let_a_later_plugin_take_a_name(plugin_dir: Path) -> None:
    name = _module(
        plugin_dir,
        "eager_plugin",
        """
        from itbench import AgentSpec, hookimpl
        from itbench.agents import OracleAgent

        @hookimpl(tryfirst=True)
        def itbench_register_agents():
            return [AgentSpec("noop", OracleAgent, "not noop at all")]
        """,
    )
    bench = Bench(plugins=[name], autoload=False)
    assert bench.agents["noop"].description.startswith("Submits nothing")
    reasons = [p.reason for p in bench.host.problems if p.plugin == name]
    assert any("tryfirst=True is not supported" in r for r in reasons), reasons
    # Each side of the clash says where it came from, so the user knows what to remove.
    core = "'itbench.agents' (distribution itbench "
    assert any(f"'noop' is already registered by plugin {core}" in r for r in reasons), reasons
    assert any(
        "this plugin is 'eager_plugin' (module eager_plugin, loaded with --plugin)" in r
        for r in reasons
    )
    [line] = bench.contested_names("agent", ["noop", "oracle"])
    assert line.startswith(f"agent 'noop' is registered by plugins {core}")
    assert line.endswith("'eager_plugin' (module eager_plugin, loaded with --plugin)")


def test_a_hook_raising_system_exit_is_a_problem_and_the_others_still_answer(
    plugin_dir: Path,
) -> None:
    name = _module(
        plugin_dir,
        "exiting_plugin",
        """
        import sys
        from itbench import hookimpl

        @hookimpl
        def itbench_register_agents():
            sys.exit(3)
        """,
    )
    bench = Bench(plugins=[name], autoload=False)
    assert "noop" in bench.agents
    [problem] = [p for p in bench.host.problems if p.plugin == name]
    assert problem.hook == "itbench_register_agents" and "SystemExit" in problem.reason


def test_runs_using_a_name_two_plugins_registered_are_refused(
    itbench: CliFn, plugin_site: Path, tmp_path: Path
) -> None:
    _module(
        tmp_path,
        "shadow_toy",
        """
        from itbench import Evaluation, hookimpl
        from itbench_toy.domain import ToyDomain

        class AlwaysPasses(ToyDomain):
            def evaluate(self, spec, env, submission, toolbox, ctx):
                return Evaluation(passed=True)

        @hookimpl
        def itbench_register_domains():
            return [AlwaysPasses()]
        """,
    )
    env = {"PYTHONPATH": str(tmp_path)}
    res = itbench(
        "evaluate", "--agent", "noop", "-s", "toy/healthy", "--plugin", "shadow_toy", env=env
    )
    assert res.returncode == 2, res.stdout
    assert (
        "domain 'toy' is registered by plugins 'toy' (distribution itbench-toy " in res.stderr
        and "'shadow_toy' (module shadow_toy, loaded with --plugin)" in res.stderr
    ), res.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("results.jsonl"))


def test_an_in_process_agent_claiming_the_sandbox_is_labelled_unsandboxed(
    itbench: CliFn, plugin_site: Path, tmp_path: Path
) -> None:
    _module(
        tmp_path,
        "claims_sandbox",
        """
        from itbench import AgentSpec, hookimpl
        from itbench.agents import NoopAgent

        @hookimpl
        def itbench_register_agents():
            return [AgentSpec("x/claims", lambda ctx: NoopAgent(), "in-process", sandboxed=True)]
        """,
    )
    env = {"PYTHONPATH": str(tmp_path)}
    res = itbench(
        "evaluate",
        "--agent",
        "x/claims",
        "-s",
        "toy/healthy",
        "--plugin",
        "claims_sandbox",
        "--out",
        "run",
        "--json",
        env=env,
    )
    assert res.returncode == 0, res.stderr
    [row] = res.json()["results"]  # type: ignore[index]
    assert row["labels"] == ["unsandboxed"]


def test_a_second_distribution_under_a_taken_entry_point_name_is_loaded_and_reported(
    itbench: CliFn, plugin_site: Path, tmp_path: Path
) -> None:
    dist = tmp_path / "dist"
    (dist / "shadow_entry").mkdir(parents=True)
    (dist / "shadow_entry" / "__init__.py").write_text(
        textwrap.dedent(
            """
            from itbench import hookimpl
            from itbench_toy.domain import ToyDomain

            @hookimpl
            def itbench_register_domains():
                return [ToyDomain()]
            """
        )
    )
    (dist / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = ["setuptools>=68"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "shadow-entry"
            version = "1.0"

            [project.entry-points.itbench]
            toy = "shadow_entry"
            """
        )
    )
    site = pip_install_into(tmp_path / "site", dist)
    res = itbench("plugins", "--json", env={"PYTHONPATH": str(site)})
    assert res.returncode == 1
    problems = res.json()["problems"]  # type: ignore[index]
    assert any("entry point name 'toy' is used by distribution" in p["reason"] for p in problems)
    assert any("domain 'toy' is already registered" in p["reason"] for p in problems)
    run = itbench(
        "evaluate",
        "--agent",
        "noop",
        "-s",
        "toy/healthy",
        env={"PYTHONPATH": str(site)},
    )
    assert run.returncode == 2 and "domain 'toy' is registered by plugins" in run.stderr


def test_unsafe_names_and_reloaded_plugin_modules_are_problems(
    plugin_dir: Path, plugin_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(plugin_site))
    name = _module(
        plugin_dir,
        "unsafe_names",
        """
        from itbench import AgentSpec, hookimpl
        from itbench.agents import NoopAgent
        from itbench_toy.domain import ToyDomain

        class Escaping(ToyDomain):
            name = "../other/README"

        @hookimpl
        def itbench_register_domains():
            return [Escaping()]

        @hookimpl
        def itbench_register_agents():
            return [AgentSpec("a/../b", lambda ctx: NoopAgent())]
        """,
    )
    bench = Bench(plugins=[name, name], autoload=False)
    assert "../other/README" not in bench.domains and "a/../b" not in bench.agents
    reasons = [p.reason for p in bench.host.problems if p.plugin == name]
    assert any("domain name '../other/README' is not" in r for r in reasons), reasons
    assert any("agent name 'a/../b' is not" in r for r in reasons), reasons
    assert not any("already registered" in r or "already loaded" in r for r in reasons)


def test_a_plugin_agent_claiming_the_sandbox_gets_the_label_for_the_whole_run(
    itbench: CliFn, tmp_path: Path
) -> None:
    _module(
        tmp_path,
        "wraps_command",
        """
        from itbench import AgentSpec, CommandAgent, hookimpl

        def factory(ctx):
            agent = CommandAgent(ctx, ["/bin/true"])
            agent.run = lambda task, toolbox: None  # an in-process stand-in for the program
            return agent

        @hookimpl
        def itbench_register_agents():
            return [AgentSpec("x/wraps", factory, "a patched command agent", sandboxed=True)]
        """,
    )
    res = itbench(
        "evaluate",
        "--agent",
        "x/wraps",
        "-s",
        "toy/healthy",
        "--plugin",
        "wraps_command",
        "--out",
        "run",
        "--json",
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert res.returncode == 0, res.stderr
    [row] = res.json()["results"]  # type: ignore[index]
    assert row["labels"] == ["unsandboxed"]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["labels"] == ["unsandboxed"]


@pytest.mark.parametrize("executor", ["local", "processes"])
def test_lifecycle_hooks_are_called_where_their_specs_say(
    itbench: CliFn, plugin_site: Path, tmp_path: Path, executor: str
) -> None:
    """Each lifecycle hook is called with what its spec documents, in the process it names:
    the run hooks and ``itbench_trial_finished`` in the driver, ``itbench_trial_started``
    where the trial runs (a worker process under the process executor)."""
    journal = tmp_path / "journal.jsonl"
    _module(
        tmp_path,
        "lifecycle_journal",
        f"""
        import json, os
        from itbench import hookimpl

        def _note(**fields):
            with open({str(journal)!r}, "a") as fh:
                fh.write(json.dumps({{"pid": os.getpid(), **fields}}) + "\\n")

        @hookimpl
        def itbench_run_started(manifest, run_dir):
            _note(hook="run_started", run_id=manifest.run_id, run_dir=str(run_dir))

        @hookimpl
        def itbench_trial_started(trial, trial_dir):
            _note(hook="trial_started", trial=trial.trial_id, dir=trial_dir.is_dir())

        @hookimpl
        def itbench_trial_finished(trial, result):
            _note(hook="trial_finished", trial=trial.trial_id, status=result.status.value)

        @hookimpl
        def itbench_run_finished(run_dir, results):
            _note(hook="run_finished", results=len(results))
        """,
    )
    res = itbench(
        "evaluate",
        "--agent",
        "toy/solver",
        "-s",
        "toy/healthy",
        "--trials",
        "2",
        "--executor",
        executor,
        "--plugin",
        "lifecycle_journal",
        "--out",
        "run",
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert res.returncode == 0, res.stderr
    notes = [json.loads(line) for line in journal.read_text().splitlines()]
    hooks = [n["hook"] for n in notes]
    assert hooks[0] == "run_started" and hooks[-1] == "run_finished", hooks
    assert hooks.count("trial_started") == 2 and hooks.count("trial_finished") == 2
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert notes[0]["run_id"] == manifest["run_id"] and notes[-1]["results"] == 2
    assert Path(notes[0]["run_dir"]).resolve() == (tmp_path / "run").resolve()
    started = {n["trial"] for n in notes if n["hook"] == "trial_started"}
    finished = {n["trial"]: n["status"] for n in notes if n["hook"] == "trial_finished"}
    assert started == set(finished) == set(manifest["seeds"])
    assert set(finished.values()) == {"passed"}
    assert all(n["dir"] for n in notes if n["hook"] == "trial_started")
    driver = {n["pid"] for n in notes if n["hook"] != "trial_started"}
    workers = {n["pid"] for n in notes if n["hook"] == "trial_started"}
    assert len(driver) == 1
    assert (workers == driver) if executor == "local" else not (workers & driver)
