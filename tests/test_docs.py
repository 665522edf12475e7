"""The repository's ``docs/`` holds the current reference of every registered domain."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from itbench.cli.docs import REPO_DOCS

ROOT = Path(__file__).resolve().parents[1]


def test_docs_is_the_repository_docs_directory() -> None:
    assert REPO_DOCS == ROOT / "docs"


def test_docs_of_the_repository_match_the_registered_domains() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITBENCH_")}
    # Only the installed domains and this checkout's own packages, not the test plugins.
    inside = [
        entry
        for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if entry and Path(entry).resolve().is_relative_to(ROOT)
    ]
    env.pop("PYTHONPATH", None)
    if inside:
        env["PYTHONPATH"] = os.pathsep.join(inside)
    res = subprocess.run(
        [sys.executable, "-m", "itbench.cli", "docs", "--check"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert res.returncode == 0, f"docs/ is out of sync (run `itbench docs`):\n{res.stderr}"
    assert "up to date" in res.stdout
    for domain in ("sre", "ciso", "finops"):
        assert (REPO_DOCS / f"{domain}.md").is_file()
    index = (REPO_DOCS / "README.md").read_text(encoding="utf-8")
    assert all(f"[{d}.md]({d}.md)" in index for d in ("sre", "ciso", "finops"))
