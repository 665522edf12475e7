"""The live environment of one CISO trial: the policy engine plus the family's systems."""

from __future__ import annotations

import os
from typing import Any

from itbench import Environment, InfrastructureError, Tool, TrialContext
from itbench_ciso.engine import (
    DEFAULT_ENGINE,
    POLICY_TIMEOUT,
    OpaEngine,
    OpaServer,
    PolicyEngine,
    WorkerEngine,
    engine_choice,
    opa_binary,
)
from itbench_ciso.families import Runtime
from itbench_ciso.ports import PORT_OPA
from itbench_ciso.spec import CisoSpec


def make_runtime(spec: CisoSpec, ctx: TrialContext, engine: PolicyEngine) -> Runtime:
    """The runtime of ``spec``'s family."""
    if spec.family == "kubernetes":
        from itbench_ciso.families.kubernetes import KubernetesRuntime

        return KubernetesRuntime(spec, ctx, engine)
    if spec.family == "policy-update":
        from itbench_ciso.families.kubernetes import UpdateRuntime

        return UpdateRuntime(spec, ctx, engine)
    if spec.family == "linux":
        from itbench_ciso.families.linux import LinuxRuntime

        return LinuxRuntime(spec, ctx, engine)
    from itbench_ciso.families.cloud import CloudRuntime

    return CloudRuntime(spec, ctx, engine)


class CisoEnvironment(Environment):
    """Policy engine (regorus by default, regopy or an OPA server on request) and the runtime.

    Args:
        spec: The scenario.
        ctx: The trial context (``--policy-engine regorus|regopy|opa``, or ``--option
            policy_engine=...``).
    """

    def __init__(self, spec: CisoSpec, ctx: TrialContext) -> None:
        self.spec = spec
        self.ctx = ctx
        self.opa_server: OpaServer | None = None
        self.engine: PolicyEngine = WorkerEngine(DEFAULT_ENGINE)
        self.runtime: Runtime | None = None

    def _engine(self) -> PolicyEngine:
        choice = engine_choice(self.ctx.options)
        if choice != "opa":
            timeout = float(self.ctx.options.get("policy_timeout", POLICY_TIMEOUT))
            return WorkerEngine(choice, self.ctx.trial_dir, timeout)
        url = os.environ.get("ITBENCH_OPA_URL")
        if url:
            return OpaEngine(url)
        binary = opa_binary()
        if binary is None:
            raise InfrastructureError(
                "policy_engine=opa: set ITBENCH_OPA_URL or put an `opa` binary on PATH"
            )
        self.opa_server = OpaServer(binary, self.ctx.port(PORT_OPA), self.ctx.trial_dir)
        self.opa_server.start()
        return OpaEngine(self.opa_server.url)

    def setup(self) -> None:
        """Select the engine, then set up the family's systems."""
        self.engine = self._engine()
        self.runtime = make_runtime(self.spec, self.ctx, self.engine)
        try:
            self.runtime.setup()
        except InfrastructureError:
            raise
        except Exception as exc:
            raise InfrastructureError(
                f"setting up {self.spec.id} failed: {type(exc).__name__}: {exc}"
            ) from exc

    def tools(self) -> list[Tool]:
        """The family's tools."""
        if self.runtime is None:
            raise InfrastructureError("environment not set up")
        return self.runtime.tools()

    def context(self) -> dict[str, Any]:
        """The family's public facts and the engine in use."""
        if self.runtime is None:
            return {}
        return {**self.runtime.context(), "policy_engine": self.engine.name}

    def fingerprint(self) -> dict[str, str]:
        """Digests of the judge's inputs: hidden variants (and the original policy set)."""
        if self.runtime is None:
            return {}
        return self.runtime.fingerprint()

    def harness_problems(self) -> list[str]:
        """The family's servers (the AWS endpoint) and the OPA server this trial started."""
        problems = [] if self.runtime is None else self.runtime.harness_problems()
        if self.opa_server is not None and not self.opa_server.alive():
            problems.append(f"the OPA server on port {self.opa_server.port} is gone")
        return problems

    def teardown(self) -> None:
        """Stop the family's systems and the OPA server (idempotent)."""
        try:
            if self.runtime is not None:
                self.runtime.teardown()
        finally:
            self.engine.close()
            if self.opa_server is not None:
                self.opa_server.stop()
