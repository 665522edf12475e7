"""Write each domain's scenario reference: ``itbench docs``."""

from __future__ import annotations

import sys
from collections.abc import Collection
from pathlib import Path

import click

from itbench import console
from itbench.bench import Bench
from itbench.builtin.scenarios import REPO_CATALOG
from itbench.cli.common import EXIT_FAILED, report_problems
from itbench.cli.params import bench_options
from itbench.domain import AnyDomain

#: ``docs/`` beside the ``itbench`` package in a source checkout (found like the catalog).
REPO_DOCS = REPO_CATALOG.parent / "docs"

#: The first line of every generated domain reference (marks files ``docs`` owns).
REFERENCE_HEADING = "# Scenario reference: "

#: The index of the references, and its first line.
DOCS_INDEX = "README.md"

INDEX_HEADING = "# Scenario references"


def domain_docs(domains: dict[str, AnyDomain]) -> dict[str, str]:
    """The files ``itbench docs`` writes: ``<domain>.md`` for each domain and the index.

    Raises:
        click.ClickException: a domain's reference could not be generated.
    """
    files: dict[str, str] = {}
    rows = []
    for name, domain in sorted(domains.items()):
        try:
            files[f"{name}.md"] = domain.reference()
        except Exception as exc:
            raise click.ClickException(
                f"domain {name!r}: its reference failed: {type(exc).__name__}: {exc}"
            ) from None
        about = " ".join(domain.description.split()).replace("|", "\\|")
        rows.append(f"| `{name}` | {about} | [{name}.md]({name}.md) |")
    files[DOCS_INDEX] = "\n".join(
        [
            INDEX_HEADING,
            "",
            "The fields a scenario file of each registered domain takes, and what its agents",
            "submit. Generated from the domains' models by `itbench docs`; do not edit by hand.",
            "",
            "| domain | about | reference |",
            "|---|---|---|",
            *rows,
            "",
        ]
    )
    return files


def _first_line(path: Path) -> str:
    """The first line of ``path``, "" when it cannot be read as UTF-8 text."""
    try:
        with path.open(encoding="utf-8") as fh:
            return fh.readline()
    except (OSError, UnicodeDecodeError):
        return ""


def _generated(path: Path) -> bool:
    """Whether ``path`` is a domain reference ``itbench docs`` wrote."""
    return path.is_file() and _first_line(path).startswith(REFERENCE_HEADING)


def _current(path: Path) -> str | None:
    """The text of a file ``docs`` may replace (``None``: there is none yet).

    Raises:
        click.ClickException: ``path`` is not a file, not UTF-8 text, or not one that
            ``itbench docs`` wrote.
    """
    if not path.exists():
        return None
    why = ""
    if not path.is_file():
        why = "is not a file"
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            why = "is not UTF-8 text"
        except OSError as exc:
            why = f"cannot be read ({exc.strerror or exc})"
        else:
            heading = INDEX_HEADING if path.name == DOCS_INDEX else REFERENCE_HEADING
            if text.startswith(heading):
                return text
            why = "was not written by `itbench docs`"
    raise click.ClickException(
        f"{path} {why}; itbench docs replaces only files it wrote: move it away or give "
        "another --out DIR"
    )


def stale_docs(
    directory: Path, files: dict[str, str], keep: Collection[str] = ()
) -> tuple[list[Path], list[Path]]:
    """Files of ``directory`` that differ from ``files``, and generated ones no domain owns.

    Args:
        directory: Where the references are.
        files: The text each file should have, by file name.
        keep: Domains whose generated references are left alone though not in ``files``.

    Raises:
        click.ClickException: a file of ``files`` is there but cannot be replaced (see
            :func:`_current`), or ``directory`` is not a directory.
    """
    if directory.exists() and not directory.is_dir():
        raise click.ClickException(f"{directory} is not a directory")
    stale = [directory / name for name, text in files.items() if _current(directory / name) != text]
    orphans = (
        [
            p
            for p in sorted(directory.glob("*.md"))
            if p.name not in files and p.stem not in keep and _generated(p)
        ]
        if directory.is_dir()
        else []
    )
    return stale, orphans


def in_checkout(domain: AnyDomain, root: Path) -> bool:
    """Whether the code of ``domain`` lies inside the source checkout ``root``."""
    module = sys.modules.get(type(domain).__module__)
    file = getattr(module, "__file__", None)
    return isinstance(file, str) and Path(file).resolve().is_relative_to(root.resolve())


def _docs_selection(
    bench: Bench, out: Path | None, only: tuple[str, ...]
) -> tuple[Path, dict[str, AnyDomain]]:
    """Where ``docs`` writes and the domains whose references it writes there.

    Raises:
        click.UsageError: an unknown ``--domain``, or no ``--out`` where one is needed.
    """
    domains = bench.domains
    unknown = [name for name in only if name not in domains]
    if unknown:
        known = ", ".join(sorted(domains)) or "none"
        raise click.UsageError(
            f"unknown domain(s) {', '.join(map(repr, unknown))} (registered domains: {known})"
        )
    selected = {n: d for n, d in domains.items() if not only or n in only}
    if out is not None:
        return out, selected
    if not REPO_CATALOG.is_dir():
        raise click.UsageError("not in a source checkout of itbench: give --out DIR")
    root = REPO_CATALOG.parent
    outside = sorted(n for n, d in selected.items() if not in_checkout(d, root))
    if outside and only:
        raise click.UsageError(
            f"domain(s) {', '.join(outside)}: their code is not part of the checkout {root}, "
            "so their references do not go to its docs/: give --out DIR"
        )
    for name in outside:
        console.problem(
            f"domain {name!r} skipped: its code is not part of {root}; write its reference "
            f"with `itbench docs --out DIR --domain {name}`"
        )
    return root / "docs", {n: d for n, d in selected.items() if n not in outside}


@click.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to write (default: docs/ of the source checkout, for its own domains).",
)
@click.option(
    "--domain",
    "only",
    multiple=True,
    metavar="NAME",
    help="Only the reference of this domain (repeatable).",
)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 naming the stale files.")
@click.option(
    "--prune",
    is_flag=True,
    help="Also remove (with --check: report) references of domains that are not registered.",
)
@bench_options
def docs(bench: Bench, out: Path | None, only: tuple[str, ...], check: bool, prune: bool) -> None:
    """Write each domain's scenario reference to DIR/<domain>.md and an index DIR/README.md.

    Each reference is generated from the domain's models (`Domain.reference()`); a generated
    reference of a domain that is not registered is removed only with --prune (a run with
    plugins disabled must not delete references). Without --out, only the domains whose code is part of the source checkout are
    written, to its docs/; any other domain needs `--out DIR` (for example
    `itbench docs --out docs --domain NAME` in its own distribution). When a plugin has a
    problem, the references of the domains that loaded are still written, but neither the
    index nor any removal (a domain that failed to load would lose its entry), and the command
    exits 1 after listing the problems.
    """
    _ = bench.domains
    troubled = bool(bench.host.problems)
    out, selected = _docs_selection(bench, out, only)
    files = domain_docs(selected)
    if troubled:
        files.pop(DOCS_INDEX, None)
    keep = [name for name in bench.domains if only and name not in only]
    stale, orphans = stale_docs(out, files, keep)
    if not prune or troubled:
        orphans = []
    if check:
        for path in [*stale, *orphans]:
            reason = (
                "no longer generated"
                if path in orphans
                else "out of date"
                if path.is_file()
                else "missing"
            )
            console.problem(f"{path}: {reason}; run `itbench docs`")
        if troubled:
            report_problems(bench)
        if stale or orphans or troubled:
            sys.exit(EXIT_FAILED)
        console.out.print(f"{out}: {len(files)} file(s) up to date", highlight=False)
        return
    try:
        out.mkdir(parents=True, exist_ok=True)
        for path in stale:
            path.write_text(files[path.name], encoding="utf-8")
            console.out.print(f"wrote {path}", highlight=False, markup=False)
        for path in orphans:
            path.unlink()
            console.out.print(f"removed {path}", highlight=False, markup=False)
    except OSError as exc:
        raise click.ClickException(
            f"cannot write {exc.filename or out}: {exc.strerror or exc}"
        ) from None
    unchanged = len(files) - len(stale)
    console.out.print(f"{out}: {len(stale)} written, {unchanged} unchanged", highlight=False)
    if troubled:
        report_problems(bench)
        console.problem(
            f"{len(bench.host.problems)} plugin problem(s): the index {DOCS_INDEX} was left as "
            "it was (a domain whose plugin failed would lose its entry)"
        )
        sys.exit(EXIT_FAILED)
