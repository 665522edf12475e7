"""The import graph: every module imports on its own, there is no cycle, plugins use the public API."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import itbench

REPO = Path(__file__).resolve().parents[1]
#: Import package -> its directory, for the core and each domain distribution.
PACKAGES = {
    "itbench": REPO / "itbench",
    "itbench_sre": REPO / "sre" / "itbench_sre",
    "itbench_ciso": REPO / "ciso" / "itbench_ciso",
    "itbench_finops": REPO / "finops" / "itbench_finops",
    "itbench_stratus": REPO / "plugins" / "itbench-stratus" / "itbench_stratus",
}
DOMAIN_PACKAGES = [p for p in PACKAGES if p != "itbench"]


def _modules(packages: dict[str, Path]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package, root in packages.items():
        for path in sorted(root.rglob("*.py")):
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules(PACKAGES)


def _imports(name: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """Every project module ``name`` imports, with the line: module level, in functions and
    under ``TYPE_CHECKING`` alike (a cycle hidden in a function is still a cycle)."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            subs = [a.name for a in node.names if f"{target}.{a.name}" in modules]
            for sub in subs:
                yield f"{target}.{sub}", node.lineno
            # ``from pkg import submodule`` needs only the submodule (the package is its parent).
            if len(subs) < len(node.names):
                yield target, node.lineno


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    return {
        name: {t for t, _ in _imports(name, path, modules) if t in modules and t != name}
        for name, path in modules.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_package_has_an_import_cycle() -> None:
    graph = _graph(MODULES)
    cycles = _cycles(graph)
    described = [
        " -> ".join(f"{m} (imports {sorted(graph[m] & set(c))})" for m in c) for c in cycles
    ]
    assert not cycles, "\n".join(described)


def _import_alone(name: str) -> tuple[str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", f"import {name}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    return name, "" if proc.returncode == 0 else proc.stderr.strip().splitlines()[-1]


def test_every_module_imports_on_its_own() -> None:
    """Each module imported first, in a fresh interpreter (two at a time)."""
    names = [n for n in MODULES if not n.endswith("__main__")]
    with ThreadPoolExecutor(max_workers=2) as pool:
        failed = {name: error for name, error in pool.map(_import_alone, names) if error}
    assert not failed, "\n".join(f"{k}: {v}" for k, v in failed.items())


def _private_imports(files: dict[str, Path]) -> list[str]:
    """Imports of the core that are not ``from itbench import <name of __all__>``."""
    public = set(itbench.__all__)
    bad = []
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                bad += [
                    f"{where}: import {a.name}" for a in node.names if a.name.startswith("itbench.")
                ]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                if node.module.startswith("itbench."):
                    bad.append(f"{where}: from {node.module} import ...")
                elif node.module == "itbench":
                    bad += [
                        f"{where}: itbench.{a.name} is not public"
                        for a in node.names
                        if a.name not in public
                    ]
        del name
    return bad


@pytest.mark.parametrize("package", DOMAIN_PACKAGES)
def test_a_domain_package_imports_only_the_public_api(package: str) -> None:
    files = _modules({package: PACKAGES[package]})
    assert files
    assert not _private_imports(files)


def test_the_public_api_names_resolve_and_are_documented() -> None:
    assert len(set(itbench.__all__)) == len(itbench.__all__)
    for name in itbench.__all__:
        value = getattr(itbench, name)
        if callable(value) and name != "hookimpl":
            assert (value.__doc__ or "").strip(), f"itbench.{name} has no docstring"


def test_the_private_import_check_catches_a_private_import(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "from itbench import Domain, hookimpl\n"
        "from itbench.runner import Runner\n"
        "from itbench import plugins\n"
        "import itbench.store\n"
    )
    found = _private_imports({"plugin": plugin})
    assert len(found) == 3, found


@pytest.mark.parametrize("kind", ["pack", "domain", "agent"])
def test_a_scaffold_imports_only_the_public_api(kind: str, tmp_path: Path) -> None:
    from itbench.scaffold import create

    made = create(kind, "demo", tmp_path)
    files = {str(p): p for p in made.rglob("*.py") if "tests" not in p.relative_to(made).parts}
    assert files, f"the {kind} scaffold has no Python files"
    assert not _private_imports(files)


def test_the_pytest_plugin_loads_where_only_the_core_is_installed(tmp_path: Path) -> None:
    """``itbench.testing`` is a pytest plugin of every install: it imports only what the core
    installs (``psutil``, of the ``dev`` extra, is imported by the process helpers alone).

    A pytest session runs with the dev-only packages made unimportable.
    """
    (tmp_path / "test_one.py").write_text(
        "from itbench.testing import trial_context\n\n"
        "def test_it(tmp_path):\n"
        "    with trial_context(tmp_path) as ctx:\n"
        "        assert ctx.workspace.is_dir()\n"
    )
    hidden = ("psutil", "hypothesis", "inspect_ai", "pyarrow", "mypy")
    code = (
        "import sys\n"
        "class Hidden:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.partition('.')[0] in {hidden!r}:\n"
        "            raise ImportError(f'no module named {name}')\n"
        "sys.meta_path.insert(0, Hidden())\n"
        "import pytest\n"
        "sys.exit(pytest.main(['-q', '-p', 'itbench.testing', sys.argv[1]]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "test_one.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        # Other distributions' plugins (hypothesis's among them) are not there either.
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout
