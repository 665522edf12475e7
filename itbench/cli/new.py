"""``itbench new``: start a scenario pack, a domain or an agent as its own distribution."""

from __future__ import annotations

from pathlib import Path

import click

from itbench import console
from itbench.errors import UsageError

#: The kinds of scaffold (as ``itbench.scaffold.KINDS``, which is imported only when used).
KINDS = ("pack", "domain", "agent")


def _default_steps(kind: str, name: str, path: Path) -> list[str]:
    check = {
        "pack": f"itbench validate --strict '*/{name}-*'",
        "domain": f"itbench validate --strict '{name}/*'",
        "agent": "itbench plugins",
    }[kind]
    return [f"pip install -e {path}", check]


@click.command()
@click.argument("kind", type=click.Choice(KINDS))
@click.argument("name")
@click.option(
    "--dir",
    "directory",
    default=".",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the new distribution's directory is created.",
)
def new(kind: str, name: str, directory: Path) -> None:
    """Create a new distribution DIR/NAME: a scenario pack, a domain or an agent.

    It has a pyproject.toml, a README with the next steps, an example and its own tests.
    """
    from itbench.scaffold import create

    try:
        created: object = create(kind, name, directory)
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    if isinstance(created, tuple):
        path, steps = Path(created[0]), [str(s) for s in created[1]]
    else:
        path = Path(str(created)).resolve()
        steps = _default_steps(kind, name, path)
    console.out.print(f"created {kind} {name!r} in {path}", highlight=False, markup=False)
    console.out.print("next steps:", highlight=False)
    for i, step in enumerate(steps, 1):
        console.out.print(f"  {i}. {step}", highlight=False, markup=False)
