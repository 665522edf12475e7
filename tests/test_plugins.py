"""Plugins found through real entry points of pip-installed test distributions."""

from __future__ import annotations

from pathlib import Path

from conftest import CliFn


def _by_name(data: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {p["name"]: p for p in data["plugins"]}


def test_plugins_json_lists_entry_point_plugins_with_distribution_and_hooks(itbench: CliFn) -> None:
    res = itbench("plugins", "--json")
    assert res.returncode == 1, res.stderr  # the broken test plugins are installed too
    plugins = _by_name(res.json())  # type: ignore[arg-type]
    toy = plugins["toy"]
    assert toy["source"] == "entrypoint"
    assert toy["distribution"] == "itbench-toy"
    assert toy["version"] == "0.3.0"
    assert set(toy["hooks"]) == {
        "itbench_register_agents",
        "itbench_register_catalog_paths",
        "itbench_register_domains",
        "itbench_register_options",
    }
    assert plugins["itbench.agents"]["source"] == "builtin"
    assert "toy" in res.json()["domains"]  # type: ignore[index]
    assert "toy/solver" in res.json()["agents"]  # type: ignore[index]


def test_broken_plugins_are_reported_by_name_and_others_keep_working(itbench: CliFn) -> None:
    res = itbench("plugins", "--json")
    data = res.json()
    problems = {p["plugin"]: p for p in data["problems"]}  # type: ignore[index]
    assert "broken-import" in problems
    assert "itbench_no_such_module" in problems["broken-import"]["reason"]
    assert problems["broken-hook"]["hook"] in {
        "itbench_register_agents",
        "itbench_register_catalog_paths",
    }
    assert "RuntimeError" in problems["broken-hook"]["reason"]
    # One clear line per problem on stderr, naming the plugin.
    lines = [line for line in res.stderr.splitlines() if line.startswith("itbench: plugin")]
    assert any("'broken-import'" in line for line in lines)
    assert any("'broken-hook'" in line and "agent table is corrupt" in line for line in lines)
    assert all("Traceback" not in line for line in res.stderr.splitlines())
    # The toy plugin, registered after nothing special, still works.
    assert "toy/solver" in data["agents"]  # type: ignore[index]


def test_entry_point_plugin_scenario_and_agent_run_through_evaluate(
    itbench: CliFn, tmp_path: Path
) -> None:
    res = itbench(
        "evaluate", "--agent", "toy/solver", "-s", "toy/registry-beta-2", "--out", "run", "--json"
    )
    assert res.returncode == 0, res.stderr
    results = res.json()["results"]  # type: ignore[index]
    assert [r["status"] for r in results] == ["passed"]
    assert results[0]["usage"]["input_tokens"] == 10
    assert (tmp_path / "run" / "results.jsonl").is_file()


def test_disable_autoload_env_var_skips_entry_points(itbench: CliFn) -> None:
    res = itbench("plugins", "--json", env={"ITBENCH_DISABLE_PLUGIN_AUTOLOAD": "1"})
    names = set(_by_name(res.json()))  # type: ignore[arg-type]
    assert "toy" not in names and "broken-import" not in names
    assert not res.json()["problems"]  # type: ignore[index]


def test_plugin_option_loads_a_module_without_autoload(itbench: CliFn) -> None:
    res = itbench(
        "plugins",
        "--json",
        "--plugin",
        "itbench_toy.plugin",
        env={"ITBENCH_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    plugin = _by_name(res.json())["itbench_toy.plugin"]  # type: ignore[arg-type]
    assert plugin["source"] == "option"
    assert "toy" in res.json()["domains"]  # type: ignore[index]


def test_plugin_option_naming_a_missing_module_is_one_line(itbench: CliFn) -> None:
    res = itbench(
        "plugins", "--plugin", "no_such_plugin_mod", env={"ITBENCH_DISABLE_PLUGIN_AUTOLOAD": "1"}
    )
    assert res.returncode == 1
    lines = [line for line in res.stderr.splitlines() if "no_such_plugin_mod" in line]
    assert len(lines) == 1 and "ModuleNotFoundError" in lines[0]


def test_a_plugin_flag_sets_its_trial_option_in_evaluate_and_validate(
    itbench: CliFn, tmp_path: Path
) -> None:
    listed = itbench("plugins", "--json").json()["options"]  # type: ignore[index]
    assert {
        "flag": "--fail-setup",
        "key": "fail_setup",
        "help": "Make toy setups fail.",
        "choices": ["1"],
        "switch": False,
    } in listed
    assert {"flag": "--mcp", "key": "mcp", "switch": True}.items() <= next(
        o for o in listed if o["flag"] == "--mcp"
    ).items()
    res = itbench(
        "evaluate", "--agent", "toy/solver", "-s", "toy/healthy", "--fail-setup", "1", "--json"
    )
    assert res.returncode == 1, res.stderr
    [row] = res.json()["results"]  # type: ignore[index]
    assert row["status"] == "error" and "fail_setup" in row["error"]
    # In validate the flag may stand among the patterns; the oracle then errors on setup.
    res = itbench("validate", "--fail-setup=1", "toy/healthy", "--json")
    assert res.returncode == 1
    assert res.json()["invalid"] == 1  # type: ignore[index]


def test_an_unknown_or_invalid_plugin_flag_is_a_usage_error(itbench: CliFn) -> None:
    res = itbench("evaluate", "--agent", "noop", "-s", "toy/healthy", "--fail-setpu", "1")
    assert res.returncode == 2
    assert "no such option: --fail-setpu" in res.stderr and "--fail-setup" in res.stderr
    res = itbench("evaluate", "--agent", "noop", "-s", "toy/healthy", "--fail-setup", "2")
    assert res.returncode == 2 and "'2' is not one of 1" in res.stderr
    res = itbench("evaluate", "--agent", "noop", "-s", "toy/healthy", "--fail-setup")
    assert res.returncode == 2 and "--fail-setup needs a value" in res.stderr
