"""itbench: a push-button benchmark harness for AI agents doing IT work.

What this module exports (its ``__all__``) is the public API for plugin authors: domains,
environments, specs and submissions, tools, agents, executors, reporters, run flags, process
helpers, control groups and errors. Every other module of the package is internal and may change without notice;
:mod:`itbench.hookspecs` documents the hooks and :mod:`itbench.testing` helps test plugins.
"""

from __future__ import annotations

from itbench import cgroups, netbridge, seccomp, stopped
from itbench.agents import Agent, AgentContext, AgentSpec
from itbench.aws_endpoint import AwsEndpoint
from itbench.chat import LlmError, LlmSettings, ModelUnavailable
from itbench.chat import configure as configure_llm
from itbench.command import CommandAgent
from itbench.deadline import Deadline
from itbench.domain import Domain, Environment, TrialContext
from itbench.errors import InfrastructureError, IntegrityError, ToolError, UsageError
from itbench.executors import Executor, ExecutorSpec
from itbench.llm import LlmAgent, Report, ToolLoop
from itbench.markers import hookimpl
from itbench.models import (
    AgentOutput,
    Complexity,
    Evaluation,
    Label,
    RunManifest,
    ScenarioSpec,
    Submission,
    TaskView,
    ToolSpec,
    TrialResult,
    TrialStatus,
    Usage,
)
from itbench.options import OptionSpec, check_integer, check_number, check_text
from itbench.plan import PlannedTrial
from itbench.process import (
    PID_DIR,
    ManagedProcess,
    forget_pid,
    port_open,
    record_pid,
    recorded_pid,
    stop_group,
    stop_marked,
    stop_recorded,
    wait_for_port,
)
from itbench.report.reporters import ReporterSpec
from itbench.tools import Tool, Toolbox, ToolCall
from itbench.trajectory import EventStep, MessageStep, ToolStep, Trajectory

__version__ = "0.1.0"

__all__ = [
    "PID_DIR",
    "Agent",
    "AgentContext",
    "AgentOutput",
    "AgentSpec",
    "AwsEndpoint",
    "CommandAgent",
    "Complexity",
    "Deadline",
    "Domain",
    "Environment",
    "Evaluation",
    "EventStep",
    "Executor",
    "ExecutorSpec",
    "InfrastructureError",
    "IntegrityError",
    "Label",
    "LlmAgent",
    "LlmError",
    "LlmSettings",
    "ManagedProcess",
    "ModelUnavailable",
    "MessageStep",
    "OptionSpec",
    "PlannedTrial",
    "Report",
    "ReporterSpec",
    "RunManifest",
    "ScenarioSpec",
    "Submission",
    "TaskView",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolLoop",
    "ToolSpec",
    "ToolStep",
    "Toolbox",
    "TrialContext",
    "TrialResult",
    "TrialStatus",
    "Trajectory",
    "Usage",
    "UsageError",
    "__version__",
    "cgroups",
    "check_integer",
    "check_number",
    "check_text",
    "configure_llm",
    "forget_pid",
    "hookimpl",
    "netbridge",
    "port_open",
    "record_pid",
    "recorded_pid",
    "seccomp",
    "stop_group",
    "stop_marked",
    "stop_recorded",
    "stopped",
    "wait_for_port",
]
