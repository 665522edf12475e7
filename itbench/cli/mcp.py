"""Serve a waiting trial to an MCP client over stdio: ``itbench mcp``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from itbench import console
from itbench.cli.common import EXIT_FAILED


def _endpoint(path: Path) -> tuple[Path, dict[str, Any]]:
    """The waiting trial at ``path`` (a trial directory, or a run with one waiting trial)."""
    from itbench.human import ENDPOINT_FILE

    candidates = (
        [path]
        if (path / ENDPOINT_FILE).exists()
        else sorted(path.glob(f"trials/*/{ENDPOINT_FILE}"))
    )
    candidates = [c.parent if c.name == ENDPOINT_FILE else c for c in candidates]
    if not candidates:
        raise click.UsageError(
            f"no trial is waiting in {path}: start one with "
            "`itbench evaluate --agent human -s SCENARIO --timeout SECONDS` and give its trial "
            "directory (the run prints it)"
        )
    if len(candidates) > 1:
        listed = "\n".join(f"  {c}" for c in candidates)
        raise click.UsageError(f"several trials are waiting in {path}; give one:\n{listed}")
    record = candidates[0] / ENDPOINT_FILE
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        url, token = str(data["url"]), str(data["token"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise click.UsageError(f"{record}: cannot read the trial's endpoint: {exc}") from None
    return candidates[0], {**data, "url": url, "token": token}


@click.command()
@click.option(
    "--trial-dir",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The waiting trial's directory (or its run's, when one trial waits).",
)
@click.option(
    "--print", "show", is_flag=True, help="Print the endpoint and client configurations instead."
)
def mcp(trial_dir: Path, show: bool) -> None:
    """Serve a waiting trial to an MCP client over stdio (for a person driving it by hand).

    An environment lives only while its trial runs: start a trial that waits for you with
    `itbench evaluate --agent human -s SCENARIO --timeout 3600`, then point your MCP client at
    this command (`itbench mcp --trial-dir DIR` as a stdio server). The trial's tools and
    `submit` are offered; your first accepted submission ends the trial and it is scored.
    `--print` shows the streamable HTTP endpoint with its token, and both configurations in
    the common `mcpServers` form.
    """
    from itbench import mcpbridge

    where, data = _endpoint(trial_dir)
    if show:
        console.print_json(
            {
                "trial_dir": str(where),
                "url": data["url"],
                "token": data["token"],
                "deadline": data.get("deadline"),
                "mcpServers": {
                    "itbench": {
                        "type": "http",
                        "url": data["url"],
                        "headers": {"Authorization": f"Bearer {data['token']}"},
                    },
                    "itbench-stdio": {
                        "type": "stdio",
                        "command": sys.argv[0] if sys.argv[0].endswith("itbench") else "itbench",
                        "args": ["mcp", "--trial-dir", str(where.resolve())],
                    },
                },
            }
        )
        return
    try:
        mcpbridge.serve(data["url"], data["token"], sys.stdin.buffer, sys.stdout.buffer)
    except KeyboardInterrupt:
        sys.exit(EXIT_FAILED)
