"""MCP: the trial's tools and ``submit`` over streamable HTTP and stdio, with the official client.

In process against a toy toolbox; inside the sandbox for a coding agent (``--agent command
--mcp``, both transports); and for a person (``--agent human`` with ``itbench mcp``).
"""

from __future__ import annotations

import http.client
import importlib.metadata as md
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import ITBENCH, CliFn, _env, results
from packaging.requirements import Requirement

from itbench.mcpserver import McpServer
from itbench.models import Submission
from itbench.redact import Redactor
from itbench.submit import Submitter
from itbench.testing import bare_task
from itbench.tools import Tool, Toolbox

AGENT = Path(__file__).parent / "agents" / "mcp_client_agent.py"
SCENARIO = "ciso/k8s-host-path"


class Answer(Submission):
    key: str


def _closure(name: str, found: dict[str, md.Distribution]) -> dict[str, md.Distribution]:
    dist = md.distribution(name)
    key = dist.metadata["Name"].lower().replace("_", "-")
    if key not in found:
        found[key] = dist
        for raw in dist.requires or []:
            req = Requirement(raw)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                _closure(req.name, found)
    return found


@pytest.fixture(scope="session")
def mcp_agent_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the MCP client agent and, in ``lib/``, the official SDK it imports."""
    if subprocess.run(
        [
            "/usr/bin/python3",
            "-c",
            f"import sys; sys.exit(sys.version_info[:2] != {sys.version_info[:2]!r})",
        ]
    ).returncode:
        pytest.skip("the system python3 is another version than the test's: the SDK cannot be lent")
    root = tmp_path_factory.mktemp("mcp-agent")
    lib = root / "lib"
    for dist in _closure("mcp", {}).values():
        for file in dist.files or []:
            source = Path(str(dist.locate_file(file)))
            if source.is_file() and ".." not in file.parts:
                target = lib / file
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
    shutil.copy(AGENT, root / AGENT.name)
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[tuple[McpServer, Submitter]]:
    secret_dir = tmp_path / "runs" / "secret-run"

    def read(key: str) -> dict[str, Any]:
        """Read a key."""
        if key == "broken":
            raise FileNotFoundError(f"{secret_dir}/trials/abc/state.json")
        return {"key": key, "value": 1}

    toolbox = Toolbox.of([Tool.from_function(read)])
    task = bare_task(
        toolbox, tmp_path, goal="Find the key.", output_schema=Answer.model_json_schema()
    )
    submitter = Submitter(Answer, Answer.model_json_schema(), set(toolbox.tools))
    server = McpServer(toolbox, task, submitter, Redactor([secret_dir])).start()
    try:
        yield server, submitter
    finally:
        server.stop()


async def _session(client: Any) -> dict[str, Any]:
    tools = [t.name for t in (await client.list_tools()).tools]
    ok = await client.call_tool("read", {"key": "a"})
    broken = await client.call_tool("read", {"key": "broken"})
    refused = await client.call_tool("submit", {"key": 7})
    accepted = await client.call_tool("submit", {"key": "a"})
    return {
        "tools": tools,
        "instructions": client.instructions,
        "ok": json.loads(ok.content[0].text),
        "broken": (broken.is_error, broken.content[0].text),
        "refused": (refused.is_error, refused.content[0].text),
        "accepted": (accepted.is_error, accepted.content[0].text),
    }


def _check(seen: dict[str, Any], submitter: Submitter) -> None:
    assert seen["tools"] == ["read", "submit"]
    assert "Find the key." in seen["instructions"]
    assert seen["ok"] == {"key": "a", "value": 1}
    assert seen["broken"][0] and "<hidden>/trials/abc" in seen["broken"][1]
    assert "secret-run" not in seen["broken"][1]
    assert seen["refused"] == (
        True,
        "submission refused: key: Input should be a valid string. Fix it and call submit again.",
    )
    assert seen["accepted"] == (False, "submission accepted")
    assert submitter.accepted is not None and submitter.accepted.key == "a"


def test_official_client_over_http_with_the_token(endpoint: tuple[McpServer, Submitter]) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    server, submitter = endpoint

    async def go() -> dict[str, Any]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.token}"})
        async with Client(streamable_http_client(server.url, http_client=http)) as client:
            return await _session(client)

    _check(anyio.run(go), submitter)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_official_client_over_stdio_through_the_launcher(
    endpoint: tuple[McpServer, Submitter], mode: str
) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    server, submitter = endpoint
    launcher = StdioServerParameters(
        command="/usr/bin/python3",
        args=["-I", str(Path(__file__).parents[1] / "itbench" / "mcpbridge.py")],
        env=server.env(),
    )

    async def go() -> dict[str, Any]:
        async with Client(launcher, mode=mode) as client:
            return await _session(client)

    _check(anyio.run(go), submitter)


def test_requests_without_the_token_are_refused(endpoint: tuple[McpServer, Submitter]) -> None:
    server, submitter = endpoint
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode()
    for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": server.token}):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request(
            "POST", "/mcp", body=body, headers={"Content-Type": "application/json", **auth}
        )
        answer = conn.getresponse()
        assert answer.status == 401 and b"missing or wrong token" in answer.read()
        conn.close()
    assert submitter.accepted is None


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_a_coding_agent_completes_a_trial_over_mcp_in_the_sandbox(
    itbench: CliFn, tmp_path: Path, mcp_agent_dir: Path, transport: str
) -> None:
    res = itbench(
        "evaluate",
        "--agent",
        "command",
        "--mcp",
        "-s",
        SCENARIO,
        "--option",
        f"agent_command=/usr/bin/python3 {mcp_agent_dir / AGENT.name}",
        "--option",
        f"mcp_transport={transport}",
        "--out",
        "run",
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    [row] = results(tmp_path / "run")
    assert row["status"] == "passed" and row["labels"] == [], row
    trial = tmp_path / "run" / "trials" / row["handle"]
    seen = json.loads((trial / "agent.stderr").read_text().strip().splitlines()[-1])
    assert seen["transport"] == transport
    assert seen["tools"] == ["kubectl_get", "evaluate_policy", "submit"]
    assert seen["pods"] > 0 and "HostPath volumes" in seen["instructions"]
    assert (
        seen["refused"][0] is True
        and "policy: Input should be a valid string" in seen["refused"][1]
    )
    assert seen["accepted"] == [False, "submission accepted"]
    config = json.loads((tmp_path / "run" / "workspaces" / row["handle"] / ".mcp.json").read_text())
    entry = config["mcpServers"]["itbench"]
    if transport == "http":
        assert entry["url"].startswith("http://127.0.0.1:") and entry["headers"][
            "Authorization"
        ].startswith("Bearer ")
    else:
        assert entry["args"] == ["/opt/itbench/mcpbridge.py"] and "ITBENCH_MCP_URL" in entry["env"]
    trajectory = json.loads((trial / "trajectory.json").read_text())
    kinds = [(s["kind"], s.get("tool") or s.get("name")) for s in trajectory["steps"]]
    assert kinds == [("tool", "kubectl_get"), ("event", "submit_rejected"), ("event", "submit")]


def test_a_person_drives_a_waiting_trial_with_itbench_mcp(
    itbench: CliFn, tmp_path: Path, plugin_site: Path
) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = _env(plugin_site, None)
    run = tmp_path / "run"
    waiting = subprocess.Popen(
        [*ITBENCH, "evaluate", "--agent", "human", "-s", SCENARIO, "--out", str(run), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        end = time.monotonic() + 120
        while not list(run.glob("trials/*/mcp.json")):
            assert waiting.poll() is None and time.monotonic() < end, waiting.communicate()
            time.sleep(0.1)
        shown = itbench("mcp", "--trial-dir", str(run), "--print")
        assert shown.returncode == 0, shown.stderr
        info = shown.json()
        assert isinstance(info, dict) and info["url"].startswith("http://127.0.0.1:")
        bridge = StdioServerParameters(
            command=sys.executable,
            args=["-m", "itbench.cli", "mcp", "--trial-dir", info["trial_dir"]],
            env=env,
        )

        async def go() -> list[str]:
            async with Client(bridge) as client:
                tools = [t.name for t in (await client.list_tools()).tools]
                await client.call_tool("kubectl_get", {})
                answer = await client.call_tool("submit", {"policy": "package compliance\n"})
                assert not answer.is_error, answer
                return tools

        assert anyio.run(go) == ["kubectl_get", "evaluate_policy", "submit"]
        out, err = waiting.communicate(timeout=120)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
    assert waiting.returncode == 0, err
    assert "itbench mcp --trial-dir" in err
    [row] = results(run)
    # An empty policy is a wrong answer; what matters is that the trial was scored.
    assert row["status"] == "failed" and row["labels"] == ["unsandboxed"] and row["tool_calls"] == 1
    gone = itbench("mcp", "--trial-dir", str(run))
    assert gone.returncode == 2 and "no trial is waiting" in gone.stderr
