"""An external agent that uses the official MCP client, configured by the workspace's .mcp.json.

It runs inside the sandbox with /usr/bin/python3; the SDK and its dependencies are in ``lib/``
beside this file. It lists the tools, reads the cluster, has one submission refused and one
accepted, and reports what it saw on stderr as one JSON line.
"""

import asyncio
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

POLICY = """package compliance

import rego.v1

pod_spec(o) := o.spec if o.kind == "Pod"

pod_spec(o) := o.spec.template.spec if o.kind in {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}

pod_spec(o) := o.spec.jobTemplate.spec.template.spec if o.kind == "CronJob"

violations contains {"kind": o.kind, "namespace": object.get(o.metadata, "namespace", ""), "name": o.metadata.name} if {
\tsome o in input.items
\tsome v in pod_spec(o).volumes
\tv.hostPath
}
"""


def with_waivers(policy, text):
    """``policy`` exempting the namespaces the requirement's waivers still cover, if it has any."""
    where = re.findall(r"`([a-z0-9-]+)/([a-z0-9-]+)`[^`]*`([a-z0-9-]+)`", text)
    today = re.findall(r"\b\d{4}-\d{2}-\d{2}\b", text)
    if not where or not today:
        return policy
    home, name, key = where[-1]
    rules = f"""
waived contains ns if {{
\tsome cm in input.items
\tcm.kind == "ConfigMap"
\tcm.metadata.namespace == "{home}"
\tcm.metadata.name == "{name}"
\tsome line in split(cm.data["{key}"], "\\n")
\tparts := regex.split(`[\\s,:]+`, trim_space(line))
\tcount(parts) > 1
\tparts[1] >= "{today[-1]}"
\tns := parts[0]
}}

violations contains v if {{
\tsome v in flagged
\tnot waived[v.namespace]
}}
"""
    return policy.replace("violations contains", "flagged contains") + rules


def transport(entry):
    if entry["type"] == "http":
        client = httpx2.AsyncClient(headers=entry["headers"])
        return streamable_http_client(entry["url"], http_client=client)
    return StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"])


async def main() -> None:
    with open(".mcp.json") as fh:
        entry = json.load(fh)["mcpServers"]["itbench"]
    async with Client(transport(entry)) as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        pods = await client.call_tool("kubectl_get", {"resource": "pods"})
        refused = await client.call_tool("submit", {"policy": 5})
        policy = with_waivers(POLICY, client.instructions or "")
        accepted = await client.call_tool("submit", {"policy": policy})
        seen = {
            "transport": entry["type"],
            "tools": tools,
            "pods": len(json.loads(pods.content[0].text)["items"]),
            "refused": [refused.is_error, refused.content[0].text],
            "accepted": [accepted.is_error, accepted.content[0].text],
            "instructions": client.instructions or "",
        }
    sys.stderr.write(json.dumps(seen) + "\n")


asyncio.run(main())
