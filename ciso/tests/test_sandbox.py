"""The sandbox of collectors and playbooks: no capability, no file handles, no hidden truth.

A confined program once held ``CAP_DAC_READ_SEARCH`` in the host's user namespace, so
``open_by_handle_at(2)`` opened the root of the filesystem behind ``/usr`` and, from there, the
trial's ground truth. These checks run the real sandbox (bubblewrap), the real playbook runs
and, end to end, the real runner with an external agent that tries exactly that.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

import pytest
from itbench_ciso import sandbox
from itbench_ciso.aws import Credentials
from itbench_ciso.collector import Collector, collector_env
from itbench_ciso.domain import CisoDomain
from itbench_ciso.oracle import reference
from itbench_ciso.sandbox import Jail, sandbox_problem, seccomp_program
from itbench_ciso.spec import CisoSpec, CisoSubmission

from itbench.catalog import Catalog
from itbench.models import RunConfig, TrialStatus

from .conftest import judge, live, toolbox_and_task

needs_sandbox = pytest.mark.skipif(sandbox_problem() is not None, reason=str(sandbox_problem()))

AGENT = Path(__file__).with_name("agents") / "file_handle_agent.py"

#: Run confined: tries the file-handle calls, a nested user namespace, and reports its state.
HANDLES = r"""
import ctypes, json, os, struct
libc = ctypes.CDLL(None, use_errno=True)
class Handle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int),
                ("f_handle", ctypes.c_ubyte * 128)]
def outcome(rc):
    return "ok" if rc >= 0 else os.strerror(ctypes.get_errno())
out = {"uid": os.getuid()}
usr = os.open("/usr", os.O_RDONLY | os.O_DIRECTORY)
root = Handle(handle_bytes=8, handle_type=1)
struct.pack_into("<II", root.f_handle, 0, 2, 0)
out["open_by_handle_at"] = outcome(
    libc.open_by_handle_at(usr, ctypes.byref(root), os.O_RDONLY | os.O_DIRECTORY))
mine, mount_id = Handle(handle_bytes=128), ctypes.c_int()
out["name_to_handle_at"] = outcome(
    libc.name_to_handle_at(-100, b"/usr", ctypes.byref(mine), ctypes.byref(mount_id), 0))
out["new_user_namespace"] = outcome(libc.unshare(0x10000000))
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"):
    out[key] = status[key].strip()
print(json.dumps(out))
"""


def _confined(tmp: Path, code: str, jail: Jail | None = None) -> dict[str, str]:
    run = tmp / "run"
    run.mkdir(exist_ok=True)
    jail = jail or Jail(run, confine=True)
    with jail.running():
        done = jail.run_command(["/usr/bin/python3", "-I", "-c", code], {}, timeout=60)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


@needs_sandbox
def test_a_confined_program_has_no_capability_and_no_file_handle(tmp_path: Path) -> None:
    seen = _confined(tmp_path, HANDLES)
    assert seen["open_by_handle_at"] == os.strerror(1)  # EPERM
    assert seen["name_to_handle_at"] == os.strerror(1)
    assert seen["new_user_namespace"] != "ok"
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(seen[key], 16) == 0, seen
    assert seen["NoNewPrivs"] == "1" and seen["Seccomp"] == "2", seen
    if os.geteuid() == 0:
        assert int(seen["uid"]) >= sandbox.UID_RANGE[0]


@needs_sandbox
def test_without_the_filter_the_kernel_still_refuses_the_handle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The filter is a second wall: without it, no capability means no file handle."""
    monkeypatch.setattr(sandbox, "seccomp_program", lambda machine=None: None)
    seen = _confined(tmp_path, HANDLES)
    assert seen["name_to_handle_at"] == "ok"  # the filter is really off
    assert seen["open_by_handle_at"] == os.strerror(1)
    assert seen["Seccomp"] == "0" and int(seen["CapEff"], 16) == 0


def test_the_filter_program() -> None:
    x86 = seccomp_program("x86_64")
    arm = seccomp_program("aarch64")
    assert x86 is not None and arm is not None
    assert len(x86) % 8 == 0 and len(arm) % 8 == 0 and len(x86) == len(arm) + 8
    assert seccomp_program("s390x") is None


@needs_sandbox
def test_owned_trees_read_whatever_their_modes_and_skeletons_under_tmp_are_read_only(
    tmp_path: Path,
) -> None:
    """A host copy given to the uid reads like a root audit's; its mount point's parents under
    /tmp cannot be written, the private /tmp itself can."""
    tree = tmp_path / "copy"
    (tree / "etc").mkdir(parents=True)
    (tree / "etc" / "shadow").write_text("root:!:19000::::::\n")
    (tree / "etc" / "shadow").chmod(0o400)
    jail = Jail(tmp_path / "run", confine=True)
    inside = jail.mount(tree, str(tmp_path / "ws" / "hosts" / "host-a"), own=True)
    code = f"""
import json, os
out = {{"shadow": open({inside!r} + "/etc/shadow").read()}}
for name, path in (("skeleton", {str(tmp_path)!r} + "/x"), ("tmp", "/tmp/x")):
    try:
        open(path, "w").write("x")
        out[name] = "written"
    except OSError as exc:
        out[name] = exc.strerror
print(json.dumps(out))
"""
    (tmp_path / "run").mkdir()
    seen = _confined(tmp_path, code, jail)
    assert seen["shadow"] == "root:!:19000::::::\n"
    assert seen["skeleton"] == os.strerror(30)  # EROFS
    assert seen["tmp"] == "written"
    assert not (tmp_path / "x").exists()


@needs_sandbox
def test_an_interpreter_under_tmp_runs_confined(tmp_path: Path) -> None:
    """A virtual environment under /tmp (a fresh clone's) is bound into the private /tmp."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    repo = Path(__file__).resolve().parents[2]
    # The harness's dependencies (the sandbox's seccomp filter is the core's) come last.
    deps = sysconfig.get_paths()["purelib"]
    driver = f"""
import json, sys, tempfile
from pathlib import Path
sys.path[:0] = [{str(repo / "ciso")!r}, {str(repo)!r}]
sys.path.append({deps!r})
from itbench_ciso.sandbox import Jail
jail = Jail(Path(tempfile.mkdtemp(dir={str(tmp_path)!r})), confine=True)
with jail.running():
    done = jail.run_command([sys.executable, "-c", "import sys; print(sys.prefix)"], {{}}, 60)
print(json.dumps([done.returncode, done.stdout.strip(), done.stderr[-500:]]))
"""
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-I", "-c", driver],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rc, prefix, err = json.loads(done.stdout)
    assert rc == 0 and prefix == str(venv), err


def test_no_ground_truth_is_on_disk_while_the_judges_playbook_runs(
    domain: CisoDomain, catalog: Catalog, tmp_path: Path
) -> None:
    spec = catalog.scenarios["ciso/linux-sshd"]
    assert isinstance(spec, CisoSpec)
    seen: list[bool] = []
    with live(domain, spec, tmp_path) as (env, ctx):
        # The reference reading the trial's own values (the organization's baseline).
        _, task = toolbox_and_task(domain, spec, env, ctx)
        ref = reference(spec, str(task.context["requirement"]), task.workspace)
        slow = ref.playbook.replace(  # type: ignore[union-attr]
            "  tasks:\n", "  tasks:\n    - ansible.builtin.pause:\n        seconds: 3\n", 1
        )
        truth = ctx.trial_dir / "hidden-variants.json"
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                # The pid record lives as long as the judge's playbook runs.
                if list((ctx.trial_dir / "pids").glob("playbook-judge-*")):
                    seen.append(truth.exists())
                time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            result = judge(domain, spec, env, ctx, CisoSubmission(playbook=slow, policy=ref.policy))
        finally:
            stop.set()
            watcher.join()
        saved = json.loads(truth.read_text())
    assert result.passed, result.details
    assert len(seen) > 10 and not any(seen), seen
    assert {v["name"] for v in saved} == {v.name for v in env.runtime.hidden}  # type: ignore[union-attr]


@needs_sandbox
def test_the_file_handle_agent_fails_end_to_end(tmp_path: Path) -> None:
    """The agent's playbook, in its turn and when judged, cannot open the host's root."""
    from itbench.bench import Bench
    from itbench.runner import Runner

    agent = tmp_path / "agent" / AGENT.name
    agent.parent.mkdir()
    shutil.copy(AGENT, agent)
    config = RunConfig(
        agent="command",
        scenarios=["ciso/linux-sshd"],
        options={"agent_command": f"/usr/bin/python3 {agent}"},
    )
    run = tmp_path / "run"
    [result] = Runner(Bench(), config, run).run().results
    trial = run / "trials" / result.handle
    recon = json.loads((trial / "agent.stdout").read_text())["result"]
    judged = json.loads((trial / "evaluation.json").read_text())
    assert result.status is TrialStatus.failed, (result.error, result.metrics)
    assert result.labels == [] and result.metrics["sandboxed"] is True
    assert recon["status"] == "successful", recon
    for evidence in recon["evidence"].values():
        assert evidence["open_by_handle_at"] == os.strerror(1), evidence
        assert "root" not in evidence and "bad" not in evidence
    assert result.metrics["tp"] == 0 and result.metrics["evidence_collected"] == 1.0, judged


WHAT_A_COLLECTOR_SEES = """\
import json, os, sys
print(json.dumps({
    "name": __name__,
    "argv": sys.argv,
    "stdin": sys.stdin.read(),
    "cwd": os.getcwd(),
    "env": dict(os.environ),
    "path0": sys.path[0],
    "main": sorted(n for n in vars(__import__("__main__")) if not n.startswith("__")),
}))
"""


def test_a_collector_started_ahead_runs_its_script_as_a_fresh_one_would(tmp_path: Path) -> None:
    """A collector whose sandbox started before the script came runs it as ``__main__`` with
    exactly the account's environment, its own path, no input, in its run directory; one
    whose sandbox died meanwhile says so."""
    creds = Credentials("210987654321", "AKIAEXAMPLE", "secret", "token")
    collector = Collector(tmp_path / "runs" / "a", tmp_path, 4566).start()
    time.sleep(1.0)  # its imports done
    assert collector.alive()
    env = collector_env(creds, "http://127.0.0.1:4566", collector.jail)
    out = collector.run(WHAT_A_COLLECTOR_SEES, env, timeout=30)
    assert out.ok, (out.problem, out.stderr)
    seen = out.evidence
    assert seen["name"] == "__main__" and seen["stdin"] == ""
    assert seen["argv"] == [collector.jail.inside(tmp_path / "runs" / "a" / "collector.py")]
    assert seen["path0"] == seen["cwd"] == collector.jail.run
    assert seen["env"] == collector.jail.environment(env)
    assert seen["env"]["AWS_ACCESS_KEY_ID"] == "AKIAEXAMPLE"
    # `import __main__` is the script's module: its names, nothing of the bootstrap's.
    assert seen["main"] == ["json", "os", "sys"]
    assert not collector.alive()

    # A harness whose umask keeps others from reading new files: the script is still read.
    mask = os.umask(0o026)
    try:
        again = Collector(tmp_path / "runs" / "c", tmp_path, 4566).start()
        out = again.run("print('{\"ok\": 1}')", env, timeout=30)
    finally:
        os.umask(mask)
    assert out.evidence == {"ok": 1}, (out.problem, out.stderr)

    dead = Collector(tmp_path / "runs" / "b", tmp_path, 4566).start()
    assert dead._proc is not None
    os.killpg(dead._proc.pid, 9)
    dead._proc.wait(timeout=10)
    assert not dead.alive()
    out = dead.run("print('{}')", env, timeout=30)
    assert out.problem is not None and "before its run" in out.problem


#: Run confined: attaches to the sandbox's pid 1 (which stops it), then prints and exits.
TRACE_PID_1 = r"""
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
rc = libc.ptrace(16, 1, None, None)
print(json.dumps({"attach": rc, "errno": ctypes.get_errno()}))
"""


@needs_sandbox
def test_a_collector_cannot_trace_its_sandbox_nor_make_the_judge_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the filter, attaching to pid 1 is refused; without it, the attach stops pid 1 and
    the sandbox could never end: the run fails at once instead of at its time limit."""
    creds = Credentials("210987654321", "AKIAEXAMPLE", "secret", "token")
    refused = Collector(tmp_path / "runs" / "a", tmp_path, 4566).start()
    env = collector_env(creds, "http://127.0.0.1:4566", refused.jail)
    out = refused.run(TRACE_PID_1, env, timeout=30)
    assert out.evidence == {"attach": -1, "errno": 1}, (out.problem, out.stderr)

    monkeypatch.setattr(sandbox, "seccomp_program", lambda machine=None: None)
    traced = Collector(tmp_path / "runs" / "b", tmp_path, 4566).start()
    start = time.monotonic()
    out = traced.run(TRACE_PID_1, env, timeout=30)
    assert time.monotonic() - start < 10
    assert out.problem is not None and "cannot end" in out.problem, out
    assert "pid 1" in out.problem and ("stopped" in out.problem or "traced" in out.problem)
