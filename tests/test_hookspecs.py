"""The hookspec module is the reference documentation: every hook must be documented."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pluggy

import itbench
from itbench import hookspecs
from itbench.plugins import BUILTIN_PLUGINS, make_plugin_manager

REPO = Path(__file__).resolve().parents[1]


def _specs() -> list[tuple[str, object]]:
    return [
        (name, fn)
        for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
        if hasattr(fn, "itbench_spec")
    ]


def test_every_hookspec_has_a_docstring_and_the_itbench_prefix() -> None:
    specs = _specs()
    assert len(specs) >= 9
    for name, fn in specs:
        assert name.startswith("itbench_"), name
        doc = inspect.getdoc(fn)
        assert doc and len(doc.split()) >= 5, f"hookspec {name} lacks a docstring"


def test_every_module_function_named_like_a_hook_is_a_spec() -> None:
    names = {
        n for n, fn in inspect.getmembers(hookspecs, inspect.isfunction) if n.startswith("itbench_")
    }
    assert names == {n for n, _ in _specs()}


def test_builtin_plugins_implement_only_known_hooks() -> None:
    host = make_plugin_manager(autoload=False)
    host.pm.check_pending()  # raises for an implementation without a spec
    assert [i.module for i in host.infos.values()] == list(BUILTIN_PLUGINS.values())
    assert not host.problems


def test_a_hookimpl_without_a_spec_is_caught() -> None:
    class Stray:
        @pluggy.HookimplMarker("itbench")
        def itbench_no_such_hook(self) -> None:
            """Not a hook."""

    host = make_plugin_manager(autoload=False)
    host.pm.register(Stray())
    try:
        host.pm.check_pending()
    except pluggy.PluginValidationError as exc:
        assert "itbench_no_such_hook" in str(exc)
    else:
        raise AssertionError("check_pending accepted an unknown hook")


def _args_documented(doc: str) -> list[str]:
    """The parameter names of a Google-style docstring's ``Args:`` section."""
    lines = doc.splitlines()
    if "Args:" not in lines:
        return []
    names = []
    for line in lines[lines.index("Args:") + 1 :]:
        if not line.strip():
            break
        match = re.match(r"    (\w+):", line)
        if match:
            names.append(match.group(1))
    return names


def test_each_hook_documents_its_signature_and_where_it_runs() -> None:
    """A hook's docstring lists exactly its parameters and says in which process it runs."""
    for name, fn in _specs():
        doc = inspect.getdoc(fn) or ""
        params = list(inspect.signature(fn).parameters)  # type: ignore[arg-type]
        assert _args_documented(doc) == params, name
        assert "Runs " in doc and ("driver" in doc or "worker" in doc), name


def test_every_hook_is_named_in_the_readme_and_exercised_by_a_test() -> None:
    """The README lists every hook by its full name, and some test implements each one."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    tests = [
        p.read_text(encoding="utf-8")
        for p in (REPO / "tests").rglob("*.py")
        if p.name != Path(__file__).name
    ]
    for name, _ in _specs():
        assert f"`{name}`" in readme, name
        assert any(f"def {name}(" in text for text in tests), f"no test implements {name}"


def test_every_type_a_hook_signature_names_is_public() -> None:
    """A plugin can name every type of a hook's signature from ``itbench`` alone."""
    allowed = {"list", "None", "Path", "Any"}
    for name, fn in _specs():
        tree = ast.parse(inspect.getsource(fn))  # type: ignore[arg-type]
        func = tree.body[0]
        assert isinstance(func, ast.FunctionDef)
        annotations = [a.annotation for a in func.args.args] + [func.returns]
        for node in annotations:
            assert node is not None, f"{name}: an unannotated parameter"
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and sub.id not in allowed:
                    assert sub.id in itbench.__all__, f"{name}: {sub.id} is not in itbench"
                if isinstance(sub, ast.Attribute):
                    raise AssertionError(f"{name}: a dotted type {ast.unparse(sub)}")
