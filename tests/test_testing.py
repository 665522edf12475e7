"""The ``itbench`` pytest plugin: reserved ports, leftover processes, live environments, runs."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from itbench.bench import Bench
from itbench.domain import TrialContext
from itbench.errors import InfrastructureError
from itbench.models import TrialStatus
from itbench.ports import FIRST_PORT, UNIT, PortAllocator, _lock_dir
from itbench.process import port_open
from itbench.testing import (
    assert_nothing_left,
    free_port,
    live_environment,
    live_processes,
    load_catalog,
    port_block,
    processes_under,
    run_scenarios,
    trial_context,
)


def _held(base: int) -> bool:
    """Whether someone holds the lock of the port unit at ``base``, asked from another process
    (so the answer does not depend on this process's own lock handles)."""
    probe = (
        "import fcntl, sys\n"
        f"fh = open({str(_lock_dir() / f'{base}.lock')!r}, 'ab')\n"
        "try:\n"
        "    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "except OSError:\n"
        "    sys.exit(3)\n"
    )
    rc = subprocess.run([sys.executable, "-S", "-c", probe], timeout=60).returncode
    assert rc in (0, 3), rc
    return rc == 3


def _sleeper(marker: str, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker], cwd=cwd)


def _pytest(directory: Path) -> subprocess.CompletedProcess[str]:
    """Run pytest on ``directory`` in a fresh process (the plugin loads by its entry point)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(directory)],
        capture_output=True,
        text=True,
        cwd=directory,
        timeout=120,
    )


# --- ports ------------------------------------------------------------------------------


def test_a_port_block_is_reserved_while_held_and_released_after() -> None:
    with port_block(150) as block:
        assert block.count == 150
        assert _held(block.base) and _held(block.base + UNIT)
        # Within this process too: a second allocator never hands out a held block.
        with pytest.raises(InfrastructureError):
            PortAllocator(block.base, block.base + 2 * UNIT).acquire(150)
    assert not _held(block.base) and not _held(block.base + UNIT)


def test_trial_ports_stay_below_the_kernel_s_range_for_outgoing_connections() -> None:
    """A client socket of any process may take a port of that range at any time, which would
    keep a trial's server from binding it."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    allocator = PortAllocator()
    assert allocator.last <= low
    blocks = [allocator.acquire(UNIT) for _ in range(3)]
    try:
        assert all(b.base + b.count <= low for b in blocks)
    finally:
        for b in blocks:
            b.release()


def test_free_ports_are_distinct_bindable_and_held_for_the_process() -> None:
    ports = [free_port() for _ in range(3)]
    assert len(set(ports)) == 3
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
    unit = ports[0] - (ports[0] - FIRST_PORT) % UNIT
    assert _held(unit)


def test_trial_context_makes_the_directories_and_releases_its_ports(tmp_path: Path) -> None:
    with trial_context(tmp_path, ports=3, seed=5, options={"a": 1}) as ctx:
        assert ctx.trial_dir.is_dir() and ctx.workspace.is_dir()
        assert (ctx.seed, ctx.port_count, ctx.options) == (5, 3, {"a": 1})
        assert ctx.port(2) == ctx.port_base + 2
        assert _held(ctx.port_base)
    assert not _held(ctx.port_base)


@pytest.mark.itbench_trial(ports=120, seed=3)
def test_the_trial_ctx_fixture_follows_its_marker(trial_ctx: TrialContext, tmp_path: Path) -> None:
    assert (trial_ctx.port_count, trial_ctx.seed) == (120, 3)
    assert trial_ctx.workspace == tmp_path / "ws" and trial_ctx.workspace.is_dir()
    assert _held(trial_ctx.port_base) and _held(trial_ctx.port_base + UNIT)


# --- processes left running -------------------------------------------------------------


def test_a_process_left_running_is_found_reported_and_killed(tmp_path: Path) -> None:
    marker = f"itbench-probe-{uuid.uuid4().hex}"
    proc = _sleeper(marker, cwd=tmp_path)
    try:
        assert [p.pid for p in live_processes(marker, descendants=True)] == [proc.pid]
        assert [p.pid for p in processes_under(tmp_path)] == [proc.pid]
        with pytest.raises(AssertionError, match=f"pid {proc.pid}: .*{marker}"):
            assert_nothing_left(marker, grace=0.3)
        assert proc.wait(timeout=10) == -signal.SIGKILL
        assert_nothing_left(marker, under=[tmp_path], grace=0)
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_was_running_before_can_be_ignored() -> None:
    marker = f"itbench-probe-{uuid.uuid4().hex}"
    proc = _sleeper(marker)
    try:
        before = live_processes(descendants=True)
        assert proc.pid in {p.pid for p in before}
        assert_nothing_left(marker, ignore=before, grace=0)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_no_leftovers_fails_the_test_that_leaves_a_process(tmp_path: Path) -> None:
    marker = f"itbench-probe-{uuid.uuid4().hex}"
    (tmp_path / "test_leak.py").write_text(
        textwrap.dedent(f"""
            import subprocess, sys

            ARGV = [sys.executable, "-c", "import time; time.sleep(60)", {marker!r}]

            def test_leaves_one(no_leftovers):
                subprocess.Popen(ARGV)

            def test_stops_its_own(no_leftovers):
                proc = subprocess.Popen(ARGV)
                proc.kill()
                proc.wait()
        """)
    )
    res = _pytest(tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "2 passed, 1 error" in res.stdout, res.stdout
    assert "ERROR at teardown of test_leaves_one" in res.stdout, res.stdout
    assert "processes left running" in res.stdout and marker in res.stdout
    assert live_processes(marker) == []


def test_a_leftover_check_in_a_conftest_fails_the_session(tmp_path: Path) -> None:
    marker = f"itbench-probe-{uuid.uuid4().hex}"
    (tmp_path / "conftest.py").write_text(
        f"from itbench.testing import leftover_check\n\n"
        f"nothing_left_running = leftover_check({marker!r})\n"
    )
    (tmp_path / "test_session.py").write_text(
        textwrap.dedent(f"""
            import subprocess, sys

            def test_clean():
                pass

            def test_starts_a_server_and_forgets_it():
                subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", {marker!r}])
        """)
    )
    res = _pytest(tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "2 passed, 1 error" in res.stdout, res.stdout
    assert marker in res.stdout
    assert live_processes(marker) == []
    # The same suite without the leak passes.
    (tmp_path / "test_session.py").write_text("def test_clean():\n    pass\n")
    res = _pytest(tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_plugin_loads_nothing_of_the_runner_until_used() -> None:
    code = (
        "import sys, itbench.testing\n"
        "print(sorted(m for m in ('itbench.bench', 'itbench.runner', 'itbench.catalog')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


# --- live environments and runs ---------------------------------------------------------


def _toy(bench: Bench, scenario: str) -> tuple[Any, Any]:
    domain = bench.domains["toy"]
    catalog = load_catalog(domain, bench=bench)
    assert catalog.errors == []
    assert {s.domain for s in catalog.scenarios.values()} == {"toy"}
    return domain, catalog.scenarios[scenario]


def test_a_live_environment_is_torn_down_when_the_body_raises(
    toy_bench: Bench, tmp_path: Path
) -> None:
    domain, spec = _toy(toy_bench, "toy/registry-alpha-1")
    with (
        pytest.raises(RuntimeError, match="boom"),
        live_environment(domain, spec, tmp_path, options={"harness_server": 1}) as (env, ctx),
    ):
        server = env.server.proc
        assert env.values["alpha"] == 1001, "inject ran"
        assert port_open(ctx.port(0))
        assert [p.pid for p in processes_under(ctx.trial_dir)] == [server.pid]
        raise RuntimeError("boom")
    assert (ctx.trial_dir / "teardown.count").read_text() == "1"
    assert server.poll() is not None or psutil.Process(server.pid).status() == "zombie"
    assert processes_under(tmp_path) == []
    assert not _held(ctx.port_base)


def test_a_live_environment_is_torn_down_when_a_step_fails(
    toy_bench: Bench, tmp_path: Path
) -> None:
    domain, spec = _toy(toy_bench, "toy/healthy")
    with (
        pytest.raises(InfrastructureError, match="on purpose"),
        live_environment(domain, spec, tmp_path, options={"fail_setup": 1}),
    ):
        raise AssertionError("the body must not run")
    assert (tmp_path / "trial" / "teardown.count").read_text() == "1"


def test_a_live_environment_stops_after_the_step_asked_for(
    toy_bench: Bench, tmp_path: Path
) -> None:
    domain, spec = _toy(toy_bench, "toy/registry-alpha-1")
    with live_environment(domain, spec, tmp_path / "c", until="created") as (env, _):
        assert env.values == {}
    with live_environment(domain, spec, tmp_path / "s", until="setup") as (env, _):
        assert env.values["alpha"] == 1
    assert (tmp_path / "c" / "trial" / "teardown.count").read_text() == "1"


def test_run_scenarios_runs_the_real_runner(toy_bench: Bench, tmp_path: Path) -> None:
    scenarios = ["toy/healthy", "toy/registry-beta-2"]
    results = run_scenarios("oracle", scenarios, tmp_path / "run", bench=toy_bench, workers=2)
    assert sorted(results) == scenarios
    assert all(r.status is TrialStatus.passed for r in results.values())
    assert len((tmp_path / "run" / "results.jsonl").read_text().splitlines()) == 2
    noop = run_scenarios("noop", ["toy/registry-beta-2"], tmp_path / "noop", bench=toy_bench)
    assert noop["toy/registry-beta-2"].status is TrialStatus.failed


def test_a_trial_context_keeps_derived_seeds_never_the_run_s_secret(tmp_path: Path) -> None:
    """A domain gets seeds from the secret, never the secret itself: the context holds a key
    derived from it, so nothing a domain keeps or logs could sign or rebuild the run's records."""
    secret = uuid.uuid4().bytes * 2

    def context(secret: bytes, seed: int = 7) -> TrialContext:
        return TrialContext("t", seed, tmp_path, tmp_path, 1, 1, secret=secret)

    ctx = context(secret)
    held = [v for v in vars(ctx).values() if isinstance(v, bytes)]
    assert held and secret not in held and all(secret not in v for v in held)
    assert secret not in repr(ctx).encode() and secret.hex() not in repr(ctx)
    # Seeds are stable for a secret, a trial seed and a label, and differ when any changes.
    assert ctx.secret_seed("a") == context(secret).secret_seed("a")
    others = {
        context(secret).secret_seed("b"),
        context(secret, seed=8).secret_seed("a"),
        context(b"another").secret_seed("a"),
    }
    assert ctx.secret_seed("a") not in others and len(others) == 3
    assert all(0 <= s < 2**31 for s in (ctx.secret_seed("a"), *others))
