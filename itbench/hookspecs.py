"""Hook specifications: the reference documentation of every itbench plugin hook.

A plugin is a module (or object) with functions decorated by :data:`itbench.hookimpl` whose
names match the hooks below. Plugins are found, in order: the built-in core plugins, the
entry points of group ``itbench`` (skipped when ``ITBENCH_DISABLE_PLUGIN_AUTOLOAD=1``), then
each ``--plugin MODULE`` option. A plugin imports only what :mod:`itbench` exports (its
``__all__``); every other module is internal.

Registration hooks return lists; the core concatenates the lists of all plugins in
registration order (``tryfirst``/``trylast`` are not supported and are ignored). When two
plugins register the same name, the first registration is kept, the later plugin is reported,
and runs that use the name are refused until one of the two is removed: which one comes first
depends on what is installed, so neither may decide a result.
Every mistake of a plugin is a *problem* naming the plugin and the hook, printed by every
command and written to a run directory's ``plugin-problems.json``, while the other plugins keep
working: an import or registration failure, a hook that raises, an item of the wrong type, an
implementation of a hook that does not exist (a misspelling), an ``itbench_*`` function without
the marker, or an unsupported option (``wrapper``/``hookwrapper``: itbench calls each
implementation on its own; ``tryfirst``/``trylast``), or a second distribution using a taken
entry-point name (it is loaded under ``NAME@DISTRIBUTION`` so that its names meet the first's). ``itbench plugins`` lists them and exits 1 when there are any.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from itbench.markers import hookspec

if TYPE_CHECKING:
    from itbench.agents import AgentSpec
    from itbench.domain import Domain
    from itbench.executors import ExecutorSpec
    from itbench.models import RunManifest, TrialResult
    from itbench.options import OptionSpec
    from itbench.plan import PlannedTrial
    from itbench.report.reporters import ReporterSpec

# --- registration -----------------------------------------------------------------------


@hookspec
def itbench_register_domains() -> list[Domain[Any, Any, Any]]:
    """Register domains.

    Runs wherever the plugins are loaded (the command's process, and each worker of the
    ``processes`` and ``ray`` executors), when the names it registers are first looked up.

    Returns:
        Domain instances (subclasses of :class:`itbench.Domain`). Each domain name
        must be unique across plugins; a duplicate is reported and the first one wins.
    """


@hookspec
def itbench_register_catalog_paths() -> list[Path]:
    """Register directories of scenario files.

    Runs wherever the plugins are loaded (the command's process, and each worker of the
    ``processes`` and ``ray`` executors), when the names it registers are first looked up.

    Each directory is searched recursively for ``*.yaml`` scenario files (a scenario
    directory holds ``scenario.yaml`` beside its data files). Community scenario packages
    implement only this hook.

    Returns:
        Paths of catalog directories.
    """


@hookspec
def itbench_register_agents() -> list[AgentSpec]:
    """Register agents.

    Runs wherever the plugins are loaded (the command's process, and each worker of the
    ``processes`` and ``ray`` executors), when the names it registers are first looked up.

    Returns:
        :class:`itbench.AgentSpec` objects; ``--agent NAME`` selects one by name.
    """


@hookspec
def itbench_register_executors() -> list[ExecutorSpec]:
    """Register executors that run a list of trials (local processes, a cluster, ...).

    Runs wherever the plugins are loaded (the command's process, and each worker of the
    ``processes`` and ``ray`` executors), when the names it registers are first looked up.

    Returns:
        :class:`itbench.ExecutorSpec` objects; ``--executor NAME`` selects one.
    """


@hookspec
def itbench_register_reporters() -> list[ReporterSpec]:
    """Register reporters that turn runs' results into files (CSV, Markdown, LaTeX, HTML...).

    Runs wherever the plugins are loaded (the command's process, and each worker of the
    ``processes`` and ``ray`` executors), when the names it registers are first looked up.

    A reporter's ``write(report, out_dir)`` receives an :class:`itbench.report.Report`: the
    frames of the runs (``report.frames.trials``, ``.metrics``, ``.scenarios``), the summary
    per domain and agent and the breakdowns per dimension, all pandas frames documented in
    :mod:`itbench.report`.

    Returns:
        :class:`itbench.ReporterSpec` objects; ``itbench report`` runs them all.
    """


@hookspec
def itbench_register_options() -> list[OptionSpec]:
    """Declare the run options a plugin reads, with their flags and checks.

    Runs wherever the plugins are loaded (the command's process, and each worker of the
    ``processes`` and ``ray`` executors), when the names it registers are first looked up.

    Every key a domain or agent reads from :attr:`itbench.TrialContext.options` (or
    :attr:`itbench.AgentContext.options`) must be declared here: ``itbench evaluate`` and
    ``itbench validate`` refuse a run, before its first trial and with exit status 2, when
    ``--option KEY=VALUE`` names a key nobody declared (listing the declared ones) or a value
    fails the declaring spec's ``choices`` or ``check`` (:func:`itbench.check_number`,
    :func:`itbench.check_integer`, :func:`itbench.check_text` or any callable raising
    ValueError). A spec with ``flag=True`` also adds ``--NAME VALUE``, exactly as
    ``--option KEY=VALUE`` but with its own name, help and allowed values in listings and error
    messages; ``itbench plugins`` lists every option.

    Returns:
        :class:`itbench.OptionSpec` objects; each name must be unique.
    """


# --- run lifecycle ----------------------------------------------------------------------


@hookspec
def itbench_run_started(manifest: RunManifest, run_dir: Path) -> None:
    """Called once before the first trial of a run (also of a resumed run).

    Runs in the process of ``itbench evaluate`` (the driver), whatever the executor.

    Args:
        manifest: The run's manifest, as written to ``manifest.json``.
        run_dir: The run directory.
    """


@hookspec
def itbench_trial_started(trial: PlannedTrial, trial_dir: Path) -> None:
    """Called when a trial starts, before its environment is set up.

    Runs where the trial runs: in the driver under the ``local`` executor, in the worker
    process under ``processes`` and ``ray``. A plugin's state there is not the driver's, so
    pair it with :func:`itbench_trial_finished` through files or the trial id, not memory.

    Args:
        trial: The planned trial (scenario, agent, index, seed).
        trial_dir: The trial's artifact directory.
    """


@hookspec
def itbench_trial_finished(trial: PlannedTrial, result: TrialResult) -> None:
    """Called after a trial's result was written to ``results.jsonl``.

    Runs in the driver, whatever the executor, as each result is recorded.

    Args:
        trial: The planned trial.
        result: Its result.
    """


@hookspec
def itbench_run_finished(run_dir: Path, results: list[TrialResult]) -> None:
    """Called once after the last trial of a run (not when the run is interrupted).

    Runs in the driver, whatever the executor.

    Args:
        run_dir: The run directory.
        results: Every result of the run, earlier resumed ones included.
    """
