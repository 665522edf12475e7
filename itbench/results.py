"""The run directory on disk: ``manifest.json``, ``results.jsonl`` and ``trials/``."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from pydantic import ValidationError

from itbench.models import RunManifest, TrialResult

MANIFEST = "manifest.json"
RESULTS = "results.jsonl"
TRIALS = "trials"


class RunDirError(Exception):
    """A run directory that cannot be used (missing or malformed manifest or results)."""


class RunStore:
    """Reads and appends the files of one run directory.

    Results are appended one JSON line per trial, flushed and fsynced, so a killed run loses
    at most the trials in flight. A torn last line (the process died while writing it) is
    cut off on open so later appends stay well formed.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.results_path = run_dir / RESULTS
        self.manifest_path = run_dir / MANIFEST
        self._lock = threading.Lock()

    def trial_dir(self, trial_id: str) -> Path:
        """The artifact directory of a trial."""
        return self.run_dir / TRIALS / trial_id

    def write_manifest(self, manifest: RunManifest) -> None:
        """Write ``manifest.json`` atomically."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.manifest_path.with_suffix(".json.tmp")
        tmp.write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
        os.replace(tmp, self.manifest_path)

    def read_manifest(self) -> RunManifest:
        """Read ``manifest.json``.

        Raises:
            RunDirError: missing or invalid.
        """
        try:
            text = self.manifest_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise RunDirError(f"{self.manifest_path}: not found (not a run directory?)") from None
        try:
            return RunManifest.model_validate_json(text)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"]) or "(document)"
            raise RunDirError(f"{self.manifest_path}: field '{loc}': {err['msg']}") from None

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
            self.run_dir.mkdir(parents=True, exist_ok=True)
            with self.results_path.open("a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())

    def results(self) -> list[TrialResult]:
        """Every well-formed result, the last one winning for a repeated trial id.

        Raises:
            RunDirError: a complete line that is not a valid result.
        """
        out: dict[str, TrialResult] = {}
        try:
            lines = self.results_path.read_bytes().split(b"\n")
        except FileNotFoundError:
            return []
        complete, torn = lines[:-1], lines[-1]
        for number, raw in enumerate(complete, start=1):
            if not raw.strip():
                continue
            try:
                result = TrialResult.model_validate_json(raw)
            except ValidationError as exc:
                err = exc.errors()[0]
                loc = ".".join(str(p) for p in err["loc"]) or "(line)"
                raise RunDirError(
                    f"{self.results_path}:{number}: field '{loc}': {err['msg']}"
                ) from None
            out[result.trial_id] = result
        del torn  # an incomplete last line is a trial that never finished
        return list(out.values())

    def raw_lines(self) -> list[dict[str, object]]:
        """Complete lines as plain dicts (for tools that need the exact file content)."""
        try:
            lines = self.results_path.read_text(encoding="utf-8").split("\n")[:-1]
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]
