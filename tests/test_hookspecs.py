"""The hookspec module is the reference documentation: every hook must be documented."""

from __future__ import annotations

import inspect

import pluggy

from itbench import hookspecs
from itbench.plugins import BUILTIN_PLUGINS, make_plugin_manager


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
