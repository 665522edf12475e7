"""Built-in agents and the run flags of the ``llm`` and ``command`` agents.

The agents: ``noop``, ``oracle``, ``baseline``, ``command``, ``llm``, ``human`` and the probes.
"""

from __future__ import annotations

from pathlib import Path

from itbench import leakprobe
from itbench.agents import Agent, AgentContext, AgentSpec, BaselineAgent, NoopAgent, OracleAgent
from itbench.chat import configure as configure_llm
from itbench.command import MCP_OPTION, CommandAgent, configure_program
from itbench.command import configure as configure_command
from itbench.human import HumanAgent
from itbench.llm import LlmAgent
from itbench.markers import hookimpl
from itbench.models import MODEL_OPTION, Submission, TaskView
from itbench.options import OptionSpec
from itbench.tools import Toolbox

#: The probe agents ``itbench validate`` runs beside oracle and noop; each must fail.
PROBES = ("probe/leak", "probe/constant", "probe/thrash")
_LEAK_IN_SANDBOX = "/opt/itbench/leakprobe.py"


def _noop(ctx: AgentContext) -> NoopAgent:
    return NoopAgent()


class DomainProbe(Agent):
    """Delegates to the domain's probe of one kind (see :meth:`itbench.domain.Domain.probe`)."""

    def __init__(self, ctx: AgentContext, kind: str) -> None:
        super().__init__()
        self.domain = ctx.domain
        self.kind = kind

    def run(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Run the domain's probe."""
        return self.domain.probe(self.kind, task, toolbox)


def _leak(ctx: AgentContext) -> CommandAgent:
    files = {_LEAK_IN_SANDBOX: Path(leakprobe.__file__)}
    # The probe tries to import the trial's domain package, whatever its name.
    package = type(ctx.domain).__module__.partition(".")[0]
    return CommandAgent(ctx, ["/usr/bin/python3", _LEAK_IN_SANDBOX, package], files=files)


@hookimpl
def itbench_register_agents() -> list[AgentSpec]:
    """Register the reference agents and probes every domain supports."""
    return [
        AgentSpec("noop", _noop, "Submits nothing; every valid scenario fails it."),
        AgentSpec(
            "oracle",
            OracleAgent,
            "The domain's reference solution from ground truth.",
            privileged=True,
        ),
        AgentSpec("baseline", BaselineAgent, "The domain's deterministic heuristic agent."),
        AgentSpec(
            "command",
            CommandAgent,
            "An external program (--option agent_command=...) using tools over HTTP or MCP.",
            sandboxed=True,
            configure=configure_program,
        ),
        AgentSpec(
            "llm",
            LlmAgent,
            "A model behind an OpenAI-compatible Chat Completions API, calling the trial's tools "
            "(--model NAME, --base-url URL).",
            sandboxed=True,
            configure=configure_llm,
            needs_sandbox=False,
        ),
        AgentSpec(
            "human",
            HumanAgent,
            "Waits for a person (or any MCP client) to work the trial through its MCP endpoint "
            "(itbench mcp --trial-dir DIR).",
        ),
        AgentSpec(
            "probe/leak",
            _leak,
            "Looks for the answer outside the environment (files, packages, processes, "
            "ports) from the sandbox; every valid scenario fails it.",
            sandboxed=True,
            configure=configure_command,
        ),
        AgentSpec(
            "probe/constant",
            lambda ctx: DomainProbe(ctx, "constant"),
            "A fixed plausible answer per domain; only control scenarios may pass it.",
        ),
        AgentSpec(
            "probe/thrash",
            lambda ctx: DomainProbe(ctx, "thrash"),
            "Acts on everything (restarts, rollbacks, stops) and answers the constant; "
            "every valid scenario fails it.",
        ),
    ]


@hookimpl
def itbench_register_options() -> list[OptionSpec]:
    """The flags of the ``llm`` agent and ``--mcp`` of the ``command`` agent."""
    return [
        OptionSpec("model", MODEL_OPTION, "llm: the model name the server knows."),
        OptionSpec("base-url", "llm_base_url", "llm: the Chat Completions server's base URL."),
        OptionSpec(
            "api-key-env",
            "llm_api_key_env",
            "llm: the environment variable holding the API key (default OPENAI_API_KEY).",
        ),
        OptionSpec("temperature", "llm_temperature", "llm: the sampling temperature (default 0)."),
        OptionSpec("max-steps", "llm_max_steps", "llm: model responses per trial (default 40)."),
        OptionSpec(
            "mcp",
            MCP_OPTION,
            "command: serve the trial's tools over MCP too and write .mcp.json into the workspace.",
            switch=True,
        ),
    ]
