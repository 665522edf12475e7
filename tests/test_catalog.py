"""The repository's own catalog: every scenario file loads, and every domain in it is installed."""

from __future__ import annotations

from pathlib import Path

from conftest import CliFn

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _domains_on_disk() -> set[str]:
    if not SCENARIOS.is_dir():
        return set()
    return {d.name for d in SCENARIOS.iterdir() if d.is_dir() and any(d.rglob("*.yaml"))}


def test_every_scenario_file_of_the_repository_is_accepted(itbench: CliFn) -> None:
    res = itbench("list", "--json", env={"ITBENCH_DISABLE_PLUGIN_AUTOLOAD": "0"})
    rejected = [
        line
        for line in res.stderr.splitlines()
        if "rejected scenario:" in line and str(SCENARIOS) in line
    ]
    assert not rejected, "\n".join(rejected)
    listed = {s["domain"] for s in res.json()}  # type: ignore[union-attr]
    assert _domains_on_disk() <= listed


def test_domain_plugins_load_from_entry_points_without_problems(itbench: CliFn) -> None:
    data = itbench("plugins", "--json").json()
    plugins = {p["name"]: p for p in data["plugins"]}  # type: ignore[index]
    on_disk = _domains_on_disk()
    assert {"sre", "ciso", "finops"} <= on_disk
    for domain in on_disk:
        assert plugins[domain]["source"] == "entrypoint"
        assert plugins[domain]["distribution"] == f"itbench-{domain}"
        assert domain in data["domains"]  # type: ignore[index]
    domain_problems = [p for p in data["problems"] if p["plugin"] in on_disk]  # type: ignore[index]
    assert not domain_problems
