"""``itbench new``: each scaffold installs with pip, validates and passes its own tests.

The scaffolds are installed for real (``pip install -e``) into a throwaway virtualenv that
sees the packages of the one running the tests through a ``.pth`` file, so nothing is
installed into the shared environment and no network is needed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from itbench.errors import UsageError
from itbench.scaffold import KINDS, create
from itbench.testing import processes_under

#: One name per kind: two scaffolds of one name would be one distribution.
NAMES = {"pack": "acme", "domain": "kv-lab", "agent": "scout"}
#: The pack's fast examples; its SRE example starts the whole web shop for every trial
#: (about 90 s for one validation), so it is only listed, not validated, here.
PACK_FAST = ("ciso", "finops")


@dataclass
class Venv:
    """A throwaway virtualenv layered over the running one."""

    python: Path
    root: Path

    def env(self) -> dict[str, str]:
        """The environment of its commands: its scripts first, then the shared ones."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ITBENCH_", "PYTHONPATH"))}
        scripts = [str(self.python.parent), str(Path(sys.executable).parent)]
        env["PATH"] = os.pathsep.join([*scripts, env.get("PATH", "")])
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        env["COLUMNS"] = "200"
        return env

    def run(
        self, *args: str | Path, cwd: Path | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """Run its python with ``args``."""
        return subprocess.run(
            [str(self.python), *map(str, args)],
            capture_output=True,
            text=True,
            env=self.env(),
            cwd=cwd or self.root,
            timeout=timeout,
        )

    def itbench(self, *args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run the itbench CLI with its python."""
        return self.run("-m", "itbench.cli", *args, timeout=timeout)


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    pytest.importorskip("pip", reason="the throwaway venv borrows pip from this one")
    root = tmp_path_factory.mktemp("scaffold")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    env = Venv(root / "venv" / "bin" / "python", root)
    site = Path(
        _ok(env.run("-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")).strip()
    )
    shared = sysconfig.get_paths()["purelib"]
    # addsitedir (not a bare path) so the shared site's own .pth files (editable installs) load.
    (site / "shared-site.pth").write_text(f"import site; site.addsitedir({shared!r})\n")
    return env


def _scaffold(venv: Venv, kind: str) -> Path:
    """Create the scaffold with ``itbench new`` and install it with pip, editable."""
    name = NAMES[kind]
    out = _ok(venv.itbench("new", kind, name, "--dir", venv.root))
    dist = venv.root / name
    assert str(dist) in out and (dist / "pyproject.toml").is_file()
    _ok(
        venv.run(
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-build-isolation",
            "-e",
            dist,
        )
    )
    return dist


def _own_tests(venv: Venv, dist: Path) -> None:
    out = _ok(venv.run("-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=dist))
    assert re.search(r"\b\d+ passed\b", out) and "failed" not in out, out


def _validate(venv: Venv, kind: str, *patterns: str) -> dict[str, Any]:
    # A run directory per validation: validate resumes the runs it finds in --out.
    out = venv.root / f"validate-{kind}"
    proc = venv.itbench("validate", "--strict", *patterns, "--json", "--out", out)
    report: dict[str, Any] = json.loads(_ok(proc))
    return report


def test_create_refuses_bad_names_taken_names_and_existing_directories(tmp_path: Path) -> None:
    for bad in ("Kv", "1kv", "kv_lab", "kv--lab", "kv-", "", "a" * 25, "../kv"):
        with pytest.raises(UsageError, match="invalid name"):
            create("domain", bad, tmp_path)
    with pytest.raises(UsageError, match="taken by itbench"):
        create("agent", "oracle", tmp_path)
    # itbench_sre is installed: a scaffold of that name would shadow the SRE domain.
    with pytest.raises(UsageError, match="taken by itbench|already installed"):
        create("pack", "sre", tmp_path)
    with pytest.raises(UsageError, match="unknown scaffold kind"):
        create("plugin", "kv", tmp_path)
    (tmp_path / "kv").mkdir()
    with pytest.raises(UsageError, match="already exists"):
        create("domain", "kv", tmp_path)
    with pytest.raises(UsageError, match="no directory"):
        create("domain", "kv", tmp_path / "missing")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kv"]


@pytest.mark.parametrize("kind", KINDS)
def test_scaffold_is_rendered_lint_clean(kind: str, tmp_path: Path) -> None:
    dist = create(kind, "long-name-of-twenty-4ch", tmp_path)
    files = [p for p in dist.rglob("*") if p.is_file()]
    assert {"pyproject.toml", "README.md"} <= {p.name for p in files}
    assert any(p.parent.name == "tests" and p.name.startswith("test_") for p in files)
    assert not [p for p in files if p.suffix == ".tmpl" or "{{" in p.read_text()]
    assert (
        'long-name-of-twenty-4ch = "itbench_long_name_of_twenty_4ch.plugin"'
        in (dist / "pyproject.toml").read_text()
    )
    # Lint and format with the scaffold's own configuration (pyproject.toml) only.
    for args in (["check", "--no-cache", "."], ["format", "--no-cache", "--check", "."]):
        proc = subprocess.run(
            [sys.executable, "-m", "ruff", *args], cwd=dist, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_new_reports_usage_errors(venv: Venv) -> None:
    proc = venv.itbench("new", "domain", "Bad_Name", "--dir", venv.root)
    assert proc.returncode == 2 and "invalid name" in proc.stderr


def test_domain_scaffold_is_valid_and_passes_its_tests(venv: Venv) -> None:
    dist = _scaffold(venv, "domain")
    report = _validate(venv, "domain", "kv-lab/*")
    verdicts = {s["id"]: (s["valid"], s["reasons"]) for s in report["scenarios"]}
    assert verdicts == {"kv-lab/bad-setting": (True, []), "kv-lab/healthy": (True, [])}
    assert report["invalid"] == 0
    _own_tests(venv, dist)
    assert processes_under(dist) == []


def test_pack_scaffold_is_valid_and_passes_its_tests(venv: Venv) -> None:
    dist = _scaffold(venv, "pack")
    listed = json.loads(_ok(venv.itbench("list", "*/acme-*", "--json")))
    assert sorted(s["id"] for s in listed) == [
        "ciso/acme-host-pid",
        "finops/acme-orphans",
        "sre/acme-bad-release",
    ]
    report = _validate(venv, "pack", *(f"{domain}/acme-*" for domain in PACK_FAST))
    verdicts = {s["id"]: (s["valid"], s["reasons"]) for s in report["scenarios"]}
    assert verdicts == {"ciso/acme-host-pid": (True, []), "finops/acme-orphans": (True, [])}
    _own_tests(venv, dist)


def test_agent_scaffold_runs_on_a_domain_and_passes_its_tests(venv: Venv) -> None:
    dist = _scaffold(venv, "agent")
    run = venv.root / "agent-run"
    _ok(
        venv.itbench(
            "evaluate",
            "--agent",
            "scout",
            "-s",
            "ciso/k8s-host-namespaces",
            "--out",
            run,
            "--option",
            "scout_max_calls=1",  # declared by the scaffold's plugin
        )
    )
    [line] = (run / "results.jsonl").read_text().splitlines()
    result = json.loads(line)
    assert result["status"] in ("passed", "failed"), result["error"]
    assert result["tool_calls"] == 1 and result["labels"] == ["unsandboxed"]
    _own_tests(venv, dist)
