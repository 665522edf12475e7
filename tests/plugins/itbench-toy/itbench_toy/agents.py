"""Toy agents: one that solves by reading, one that hangs, one that crashes."""

from __future__ import annotations

import time

from itbench import Agent, AgentContext, Submission, TaskView, Toolbox
from itbench_toy.domain import ToySubmission


class Solver(Agent):
    """Finds the bad key and writes the value the task's params name."""

    def run(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Scan all keys, fix the corrupted one to value % 1000."""
        for key in toolbox.call("keys"):
            value = toolbox.call("read", key=key)
            if value >= 1000:
                toolbox.call("write", key=key, value=value - 1000)
                self.usage.input_tokens = 10
                return ToySubmission(key=key)
        return ToySubmission(no_incident=True)


class SlowSolver(Solver):
    """The solver, after thinking for ``0.8`` s (crash tests kill the harness meanwhile)."""

    def run(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Wait, then solve."""
        time.sleep(0.8)
        return super().run(task, toolbox)


class Sleeper(Agent):
    """Never returns in time."""

    def run(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Sleep far past any deadline, polling the toolbox."""
        for _ in range(600):
            time.sleep(0.1)
        return None


class Crasher(Agent):
    """Raises."""

    def run(self, task: TaskView, toolbox: Toolbox) -> Submission | None:
        """Fail loudly."""
        raise RuntimeError("agent bug")


def solver(ctx: AgentContext) -> Agent:
    """Factory of :class:`Solver`."""
    return Solver()


def slow_solver(ctx: AgentContext) -> Agent:
    """Factory of :class:`SlowSolver`."""
    return SlowSolver()


def sleeper(ctx: AgentContext) -> Agent:
    """Factory of :class:`Sleeper`."""
    return Sleeper()


def crasher(ctx: AgentContext) -> Agent:
    """Factory of :class:`Crasher`."""
    return Crasher()
