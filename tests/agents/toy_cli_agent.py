"""An external agent for the toy domain that uses only the `itbench tool` command line."""

import json
import subprocess
import sys

ITBENCH = ["itbench", "tool"]


def tool(*args: str) -> object:
    return json.loads(
        subprocess.run([*ITBENCH, *args], capture_output=True, check=True, text=True).stdout
    )


task = json.loads(sys.stdin.read())
assert task["domain"] == "toy"
for key in tool("call", "keys"):
    value = tool("call", "read", f"key={key}")
    if value >= 1000:
        tool("call", "write", f"key={key}", f"value={value - 1000}")
        with open("usage.json", "w") as fh:
            json.dump({"input_tokens": 42, "cost_usd": 0.01}, fh)
        print(json.dumps({"key": key}))
        break
else:
    print(json.dumps({"no_incident": True}))
