"""The run directory on disk: ``manifest.json``, ``results.jsonl`` and ``trials/``."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from itbench.errors import RunDirError, validation_problem
from itbench.models import RunManifest, TrialResult

MANIFEST = "manifest.json"
RESULTS = "results.jsonl"
TRIALS = "trials"
WORKSPACES = "workspaces"
SECRET = "secret"
#: The harness-only record in each trial directory that names its trial.
TRIAL_RECORD = "trial.json"
STAGING_PREFIX = ".new-"


class RunStore:
    """Reads and appends the files of one run directory.

    Results are appended one JSON line per trial, flushed and fsynced, so a killed run loses
    at most the trials in flight. A torn last line (the process died while writing it) is
    cut off on open so later appends stay well formed.

    Everything here is harness-only: the run directory is mode 0711 (its workspaces must be
    reachable for the sandbox), ``trials/`` 0700, the secret, manifest and results 0600.
    Trial and workspace directories are named by each trial's random handle.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.results_path = run_dir / RESULTS
        self.manifest_path = run_dir / MANIFEST
        self.secret_path = run_dir / SECRET
        self._lock = threading.Lock()

    def trial_dir(self, handle: str) -> Path:
        """The harness-only artifact directory of a trial."""
        return self.run_dir / TRIALS / handle

    def workspace(self, handle: str) -> Path:
        """The agent's workspace of a trial."""
        return self.run_dir / WORKSPACES / handle

    def _make_run_dir(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.run_dir, 0o711)

    def make_trial_dirs(self, handle: str, trial_id: str) -> None:
        """Create a trial's directory (with its record) and its empty workspace."""
        self._make_run_dir()
        for name, mode in ((TRIALS, 0o700), (WORKSPACES, 0o711)):
            (self.run_dir / name).mkdir(mode=mode, exist_ok=True)
            os.chmod(self.run_dir / name, mode)
        # Made under a hidden name and renamed with its record in it: a harness killed in
        # between leaves no trial directory that resume could not attribute to a trial.
        staging = self.run_dir / TRIALS / f"{STAGING_PREFIX}{handle}"
        staging.mkdir(mode=0o700)
        (staging / TRIAL_RECORD).write_text(
            json.dumps({"trial_id": trial_id, "handle": handle}), encoding="utf-8"
        )
        staging.rename(self.trial_dir(handle))
        self.workspace(handle).mkdir(mode=0o700)

    def remove_staging(self) -> None:
        """Remove trial directories a killed harness left half made (never started)."""
        for stray in (self.run_dir / TRIALS).glob(f"{STAGING_PREFIX}*"):
            shutil.rmtree(stray, ignore_errors=True)

    def trial_dirs(self) -> dict[str, str]:
        """Trial id of each trial directory, by handle, from the harness-only records."""
        out: dict[str, str] = {}
        for record in sorted((self.run_dir / TRIALS).glob(f"*/{TRIAL_RECORD}")):
            if record.parent.name.startswith("."):
                continue
            try:
                out[record.parent.name] = str(json.loads(record.read_text())["trial_id"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return out

    def create_secret(self) -> bytes:
        """Make the run's secret (random, in a 0600 file) and return it."""
        self._make_run_dir()
        secret = secrets.token_bytes(32)
        fd = os.open(self.secret_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secret.hex() + "\n")
        return secret

    def read_secret(self, expected_sha256: str) -> bytes:
        """The run's secret, checked against the hash its manifest recorded.

        Raises:
            RunDirError: missing, malformed or not the secret the manifest names.
        """
        try:
            secret = bytes.fromhex(self.secret_path.read_text().strip())
        except (OSError, ValueError) as exc:
            raise RunDirError(f"{self.secret_path}: cannot read the run's secret: {exc}") from None
        if hashlib.sha256(secret).hexdigest() != expected_sha256:
            raise RunDirError(
                f"{self.secret_path}: does not match the secret_sha256 of {self.manifest_path}"
            )
        return secret

    def write_manifest(self, manifest: RunManifest) -> None:
        """Write ``manifest.json`` atomically."""
        self._make_run_dir()
        tmp = self.manifest_path.with_suffix(".json.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(manifest.model_dump_json(indent=2))
        os.replace(tmp, self.manifest_path)

    def read_manifest(self) -> RunManifest:
        """Read ``manifest.json``.

        Raises:
            RunDirError: missing or invalid.
        """
        try:
            data = self.manifest_path.read_bytes()
        except FileNotFoundError:
            raise RunDirError(f"{self.manifest_path}: not found (not a run directory?)") from None
        except OSError as exc:
            raise RunDirError(f"{self.manifest_path}: cannot be read: {_reason(exc)}") from None
        try:
            return RunManifest.model_validate_json(data)
        except ValidationError as exc:
            problem = validation_problem(exc, "(document)")
            raise RunDirError(f"{self.manifest_path}: {problem}") from None

    def check_plan(self, manifest: RunManifest, planned: Sequence[tuple[str, int]]) -> None:
        """Check that the manifest records exactly the planned ``(trial id, seed)`` pairs.

        A resumed run plans its trials again from the manifest's config and scenario ids;
        results of trials the manifest does not hold, or of one trial planned twice, would make
        the whole results file unreadable afterwards.

        Raises:
            RunDirError: a trial planned twice, a planned trial the manifest lacks or seeds
                otherwise, or a recorded trial the plan does not hold.
        """
        seeds = dict(planned)
        if len(seeds) < len(planned):
            twice = next(t for i, (t, _) in enumerate(planned) if t in dict(planned[:i]))
            raise RunDirError(
                f"{self.manifest_path}: field 'scenario_ids': plans trial {twice!r} twice "
                "(a scenario listed twice)"
            )
        if manifest.seeds == seeds:
            return
        lacks = sorted(t for t in seeds if manifest.seeds.get(t) != seeds[t])
        extra = sorted(t for t in manifest.seeds if t not in seeds)
        found = [f"{len(lacks)} planned trial(s) it lacks or seeds otherwise"] if lacks else []
        found += [f"{len(extra)} trial(s) the plan does not hold"] if extra else []
        raise RunDirError(
            f"{self.manifest_path}: field 'seeds': not the trials its config plans: "
            f"{' and '.join(found)} (such as {(lacks or extra)[0]!r})"
        )

    def repair(self) -> None:
        """Cut a torn final line left by a killed process."""
        try:
            with self.results_path.open("rb+") as fh:
                data = fh.read()
                if not data or data.endswith(b"\n"):
                    return
                fh.truncate(data.rfind(b"\n") + 1)
        except FileNotFoundError:
            return

    def append(self, result: TrialResult) -> None:
        """Append one result and make it durable."""
        line = result.model_dump_json() + "\n"
        with self._lock:
            self._make_run_dir()
            fd = os.open(self.results_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())

    def results(self, manifest: RunManifest | None = None) -> list[TrialResult]:
        """Every result, one per trial id (see :meth:`iter_results`)."""
        return list(self.iter_results(manifest))

    def iter_results(self, manifest: RunManifest | None = None) -> Iterator[TrialResult]:
        """Each result in file order, read line by line (a large file is never held whole).

        A torn last line (no newline: the process died while writing it) is a trial that never
        finished and is skipped.

        Args:
            manifest: When given, every line must name a trial of this manifest and its run.

        Raises:
            RunDirError: a complete line that is not a valid result, a trial id recorded twice,
                or (with ``manifest``) a trial or run the manifest does not hold.
        """
        seen: set[str] = set()
        try:
            fh = self.results_path.open("rb")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise RunDirError(f"{self.results_path}: cannot be read: {_reason(exc)}") from None
        with fh:
            for number, raw in enumerate(_lines(fh, self.results_path), start=1):
                if not raw.endswith(b"\n") or not raw.strip():
                    continue
                try:
                    result = TrialResult.model_validate_json(raw)
                except ValidationError as exc:
                    problem = validation_problem(exc, "(line)")
                    raise RunDirError(f"{self.results_path}:{number}: {problem}") from None
                where = f"{self.results_path}:{number}: field 'trial_id'"
                if result.trial_id in seen:
                    raise RunDirError(f"{where}: trial {result.trial_id!r} is recorded twice")
                if manifest is not None and result.trial_id not in manifest.seeds:
                    raise RunDirError(f"{where}: trial {result.trial_id!r} is not in the manifest")
                if manifest is not None and result.run_id != manifest.run_id:
                    raise RunDirError(
                        f"{self.results_path}:{number}: field 'run_id': {result.run_id!r} is not "
                        f"the manifest's run {manifest.run_id!r}"
                    )
                seen.add(result.trial_id)
                yield result


def _reason(exc: BaseException) -> str:
    """An OS or decoding error as a short reason (no path: the caller names the file)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{type(exc).__name__}: {exc}"


def _lines(fh: IO[bytes], path: Path) -> Iterator[bytes]:
    """The lines of an open file; a read error is a :class:`RunDirError` naming ``path``."""
    try:
        yield from fh
    except OSError as exc:
        raise RunDirError(f"{path}: cannot be read: {_reason(exc)}") from None
