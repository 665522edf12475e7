"""Tool-call round trip from an agent's process, over HTTP and over MCP (goal: median < 5 ms).

One trial-like toolbox with a trivial tool, served by the harness's own servers in this process;
the clients run in a separate process, as an agent would:

- ``http``: the harness's tool protocol (``POST /call``) with its standard-library client
  (what ``itbench tool`` and sandboxed programs use: one connection per call);
- ``mcp-raw``: one JSON-RPC ``tools/call`` per POST on a kept-alive connection to the MCP
  endpoint (what any streamable HTTP client sends);
- ``mcp-sdk``: the official ``mcp`` client over streamable HTTP (its own overhead included);
- ``mcp-stdio``: the official client through the stdio launcher (``mcpbridge.py``).

Each figure is the median of ``CALLS`` calls after a warm-up, repeated ``REPEAT`` times (the
median of the medians is reported, with the spread).

Run: .venv/bin/python benchmarks/core_tool_roundtrip.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from itbench.mcpserver import McpServer
from itbench.models import Submission
from itbench.submit import Submitter
from itbench.testing import bare_task
from itbench.tools import Tool, Toolbox
from itbench.toolserver import ToolServer

CALLS = 200
REPEAT = 5
ROOT = Path(__file__).resolve().parents[1]

CLIENT = r"""
import asyncio, http.client, json, statistics, sys, time
kind, url, token, calls = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def timed(call):
    for _ in range(10):
        call()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    print(statistics.median(samples) * 1000)

if kind == "http":
    sys.path.insert(0, sys.argv[5])
    from toolclient import ToolClient
    client = ToolClient(url, token)
    timed(lambda: client.call("read", key="a"))
elif kind == "mcp-raw":
    host, port = url.split("//")[1].split("/")[0].split(":")
    conn = http.client.HTTPConnection(host, int(port))
    head = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"}
    def post(message, extra={}):
        conn.request("POST", "/mcp", body=json.dumps(message).encode(), headers={**head, **extra})
        answer = conn.getresponse()
        answer.read()
        return answer
    init = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}})
    session = {"mcp-session-id": init.getheader("mcp-session-id"), "mcp-protocol-version": "2025-06-18"}
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    ids = iter(range(1, 10**9))
    timed(lambda: post({"jsonrpc": "2.0", "id": next(ids), "method": "tools/call",
                        "params": {"name": "read", "arguments": {"key": "a"}}}, session))
else:
    import httpx2
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        if kind == "mcp-sdk":
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
            server = streamable_http_client(url, http_client=http)
        else:
            server = StdioServerParameters(command="/usr/bin/python3", args=["-I", sys.argv[5]],
                                           env={"ITBENCH_MCP_URL": url, "ITBENCH_TOOLS_TOKEN": token})
        async with Client(server, mode="legacy") as client:
            for _ in range(10):
                await client.call_tool("read", {"key": "a"})
            samples = []
            for _ in range(calls):
                start = time.perf_counter()
                await client.call_tool("read", {"key": "a"})
                samples.append(time.perf_counter() - start)
        print(statistics.median(samples) * 1000)
    asyncio.run(main())
"""


class Answer(Submission):
    """The benchmark's submission."""

    key: str


def read(key: str) -> dict[str, object]:
    """Read a key."""
    return {"key": key, "value": 1}


def measure(kind: str, url: str, token: str, script: Path, extra: str) -> float:
    """The median round trip of one client run, in milliseconds."""
    out = subprocess.run(
        [sys.executable, str(script), kind, url, token, str(CALLS), extra],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    toolbox = Toolbox.of([Tool.from_function(read)])
    with tempfile.TemporaryDirectory() as tmp:
        task = bare_task(toolbox, Path(tmp), output_schema=Answer.model_json_schema())
        script = Path(tmp) / "client.py"
        script.write_text(CLIENT)
        tools = ToolServer(toolbox, task).start()
        submitter = Submitter(Answer, Answer.model_json_schema(), set(toolbox.tools))
        mcp = McpServer(toolbox, task, submitter, token=tools.token).start()
        try:
            runs = {
                "http": (tools.url, str(ROOT / "itbench")),
                "mcp-raw": (mcp.url, ""),
                "mcp-sdk": (mcp.url, ""),
                "mcp-stdio": (mcp.url, str(ROOT / "itbench" / "mcpbridge.py")),
            }
            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"tool-call round trip, median of {CALLS} calls, {REPEAT} runs (goal < 5 ms)")
            print(f"  load average before: {load} on {os.cpu_count()} cores")
            for kind, (url, extra) in runs.items():
                medians = [measure(kind, url, tools.token, script, extra) for _ in range(REPEAT)]
                print(
                    f"  {kind:10s} {statistics.median(medians):7.2f} ms"
                    f"  (runs: {', '.join(f'{m:.2f}' for m in medians)})"
                )
        finally:
            mcp.stop()
            tools.stop()


if __name__ == "__main__":
    main()
