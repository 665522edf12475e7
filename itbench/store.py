"""The run directory on disk: ``manifest.json``, ``results.jsonl`` and ``trials/``."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from itbench import chain
from itbench.errors import RunDirError, validation_problem
from itbench.models import RunManifest, TrialResult, TrialStatus

MANIFEST = "manifest.json"
RESULTS = "results.jsonl"
TRIALS = "trials"
WORKSPACES = "workspaces"
SECRET = "secret"
#: The harness-only record in each trial directory that names its trial.
TRIAL_RECORD = "trial.json"
#: A trial's evaluation record, whose digest its results line carries.
EVALUATION = "evaluation.json"
STAGING_PREFIX = ".new-"
#: A trial handle as the harness makes them (random hex): never a path.
_HANDLE = re.compile(r"[0-9a-f]{1,64}")


class RunStore:
    """Reads and appends the files of one run directory.

    Results are appended one JSON line per trial, flushed and fsynced, so a killed run loses
    at most the trials in flight. A torn last line (the process died while writing it) is
    cut off on open so later appends stay well formed.

    Everything here is harness-only: the run directory is mode 0711 (its workspaces must be
    reachable for the sandbox), ``trials/`` 0700, the secret, manifest and results 0600.
    Trial and workspace directories are named by each trial's random handle.

    Each line is chained to the lines before it with the run's chain key (:mod:`itbench.chain`)
    and carries the digest of its trial's ``evaluation.json``; readers given the key check both.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.results_path = run_dir / RESULTS
        self.manifest_path = run_dir / MANIFEST
        self.secret_path = run_dir / SECRET
        self._lock = threading.Lock()
        #: The run's chain key (set by :meth:`use_secret`); appending needs it.
        self.key: bytes | None = None
        self._start = ""
        self._head: str | None = None

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

    def use_secret(self, secret: bytes, manifest: RunManifest) -> None:
        """Chain the lines this store appends with the key of the run's ``secret``."""
        self.key = chain.chain_key(secret)
        self._start = chain.start(self.key, manifest_fields(manifest))
        self._head = None

    def chain_key(self, manifest: RunManifest) -> bytes:
        """The run's chain key, from its secret (checked against the manifest's hash).

        Raises:
            RunDirError: the secret is missing, malformed or not the manifest's.
        """
        return chain.chain_key(self.read_secret(manifest.secret_sha256))

    def record_sha256(self, handle: str) -> str | None:
        """The digest of a trial's ``evaluation.json``, or ``None`` when it has none."""
        try:
            return hashlib.sha256((self.trial_dir(handle) / EVALUATION).read_bytes()).hexdigest()
        except OSError:
            return None

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
        """Append one result, chained to the lines before it, and make it durable.

        Raises:
            RuntimeError: no chain key (:meth:`use_secret` was not called).
        """
        if self.key is None:
            raise RuntimeError("RunStore.append needs the run's chain key (use_secret)")
        with self._lock:
            if self._head is None:
                self._head = self._tail_link()
            fields = json.loads(result.model_dump_json())
            self._head = chain.link(self.key, self._head, fields)
            line = result.model_copy(update={"chain": self._head}).model_dump_json() + "\n"
            self._make_run_dir()
            fd = os.open(self.results_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())

    def _tail_link(self) -> str:
        """The link the next appended line follows: the last complete line's, or the start."""
        last = self._start
        with contextlib.suppress(FileNotFoundError), self.results_path.open("rb") as fh:
            for raw in fh:
                if raw.endswith(b"\n") and raw.strip():
                    with contextlib.suppress(ValueError, AttributeError):
                        last = str(json.loads(raw).get(chain.FIELD) or last)
        return last

    def results(
        self, manifest: RunManifest | None = None, *, key: bytes | None = None
    ) -> list[TrialResult]:
        """Every result, one per trial id (see :meth:`iter_results`)."""
        return list(self.iter_results(manifest, key=key))

    def iter_results(
        self,
        manifest: RunManifest | None = None,
        *,
        key: bytes | None = None,
        records: bool = True,
    ) -> Iterator[TrialResult]:
        """Each result in file order, read line by line (a large file is never held whole).

        A torn last line (no newline: the process died while writing it) is a trial that never
        finished and is skipped.

        Args:
            manifest: When given, every line must name a trial of this manifest and its run.
            key: The run's chain key: every line must follow the one before it (needs
                ``manifest``). Lines are checked as they are read, so a caller that stops early
                has checked only what it read.
            records: With ``key``, also check each line against its trial's evaluation record
                (its digest, and that a passed line's record says passed).

        Raises:
            RunDirError: a complete line that is not a valid result, a trial id recorded twice,
                (with ``manifest``) a trial or run the manifest does not hold, or (with ``key``)
                a line off the chain or unlike its trial's record.
        """
        seen: set[str] = set()
        previous = chain.start(key, manifest_fields(manifest)) if key and manifest else ""
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
                if key is not None and manifest is not None:
                    previous = self._check_link(key, previous, raw, number)
                    if records:
                        self._check_record(result, number)
                seen.add(result.trial_id)
                yield result

    def _check_link(self, key: bytes, previous: str, raw: bytes, number: int) -> str:
        """The line's link, after checking that it follows ``previous``."""
        fields = json.loads(raw)
        where = f"{self.results_path}:{number}: field '{chain.FIELD}'"
        if not fields.get(chain.FIELD):
            raise RunDirError(f"{where}: missing (a line not written by this run's harness)")
        if not chain.verify(key, previous, fields):
            raise RunDirError(
                f"{where}: does not follow the manifest and the lines before it: this line or "
                "the manifest was edited, or lines before it were removed, inserted or reordered"
            )
        return str(fields[chain.FIELD])

    def _check_record(self, result: TrialResult, number: int) -> None:
        """Check a line against its trial's ``evaluation.json``."""
        where = f"{self.results_path}:{number}"
        if not _HANDLE.fullmatch(result.handle):
            if result.record_sha256 is not None or result.status is TrialStatus.passed:
                raise RunDirError(f"{where}: field 'handle': {result.handle!r} is no trial handle")
            return
        path = self.trial_dir(result.handle) / EVALUATION
        try:
            record: bytes | None = path.read_bytes()
        except OSError:
            record = None
        actual = hashlib.sha256(record).hexdigest() if record is not None else None
        if actual != result.record_sha256:
            found = "missing" if actual is None else f"sha256 {actual[:12]}…"
            raise RunDirError(
                f"{where}: field 'record_sha256': {path} is {found}, not the record the line "
                f"names ({(result.record_sha256 or 'none')[:12]})"
            )
        if result.status is TrialStatus.passed:
            try:
                passed = json.loads(record or b"").get("passed")
            except (ValueError, AttributeError):
                passed = None
            if passed is not True:
                raise RunDirError(
                    f"{where}: field 'status': passed, but {path} does not say passed"
                )


#: Run options whose values are not published with a run (their names are): a word of the
#: name (split at ``_``, ``-`` and ``.``) names a credential (``api_key``, not ``monkey``).
SECRET_OPTION = re.compile(
    r"(?:^|[_.-])(?:api|access)?(?:keys?|tokens?|secrets?|passw\w*|credentials?|auth\w*)"
    r"(?:$|[_.-])",
    re.IGNORECASE,
)


#: What a published run shows in place of a credential's value.
REDACTED = "<redacted>"


#: Run settings added after the results chain began (``None`` when unset).
LATER_CONFIG_FIELDS = ("label",)


def published_manifest(manifest: RunManifest) -> RunManifest:
    """The manifest as a run is published: options that look like credentials redacted."""
    options = {
        k: (REDACTED if SECRET_OPTION.search(k) else v) for k, v in manifest.config.options.items()
    }
    config = manifest.config.model_copy(update={"options": options})
    return manifest.model_copy(update={"config": config})


def manifest_fields(manifest: RunManifest) -> dict[str, Any]:
    """The fields the results chain starts from: the published manifest's, as JSON values."""
    fields: dict[str, Any] = json.loads(published_manifest(manifest).model_dump_json())
    # Fields added since the chain began count only when set, so older runs still verify.
    for key in LATER_CONFIG_FIELDS:
        if fields["config"].get(key) is None:
            fields["config"].pop(key, None)
    return fields


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
