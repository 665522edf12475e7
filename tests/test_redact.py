"""Harness paths are cut out of what agents are shown: tool results and errors, on every channel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from itbench.errors import ToolError
from itbench.redact import HIDDEN, Redactor
from itbench.testing import bare_task
from itbench.tools import Tool, Toolbox
from itbench.toolserver import RemoteToolError, ToolClient, ToolServer


def test_paths_are_hidden_as_given_resolved_and_inside_json(tmp_path: Path) -> None:
    real = tmp_path / "runs" / "crash-loop"
    real.mkdir(parents=True)
    link = tmp_path / "latest"
    link.symlink_to(real)
    redactor = Redactor([link, "/"])
    assert redactor.text(f"open {real}/trials/x failed") == f"open {HIDDEN}/trials/x failed"
    assert redactor.text(f"cd {link}") == f"cd {HIDDEN}"
    assert redactor.text("/usr/bin and / stay") == "/usr/bin and / stay"  # too short to hide
    data: Any = {"log": [f"{real}/a", 'quote " and ' + str(real)], "n": 1}
    assert redactor.data(data) == {"log": [f"{HIDDEN}/a", f'quote " and {HIDDEN}'], "n": 1}
    assert redactor.data({"n": 1}) == {"n": 1}


def test_the_tool_server_hides_harness_paths_in_results_and_errors(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "named-after-the-fault"

    def read(key: str) -> dict[str, str]:
        """Read a key."""
        if key == "x":
            raise ToolError(f"cannot read {run}/trials/h/state.json")
        return {"where": f"{run}/workspaces/h"}

    toolbox = Toolbox.of([Tool.from_function(read)])
    server = ToolServer(toolbox, bare_task(toolbox, tmp_path), redactor=Redactor([run])).start()
    try:
        client = ToolClient(server.url, server.token)
        assert client.call("read", key="a") == {"where": f"{HIDDEN}/workspaces/h"}
        try:
            client.call("read", key="x")
        except RemoteToolError as exc:
            assert str(exc) == f"cannot read {HIDDEN}/trials/h/state.json"
        else:
            raise AssertionError("the call should fail")
    finally:
        server.stop()
    # The journal, which only the harness reads, keeps the truth.
    assert toolbox.calls[0].result == {"where": f"{run}/workspaces/h"}
