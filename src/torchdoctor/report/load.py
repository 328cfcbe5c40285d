"""Read a run folder (or one record file) into the JSON forms the adapters render.

Each record is validated by its own record class (`Record.from_json_dict`), so an unknown
schema version or a malformed record is a `RecordError` naming the file, never a page built
from half-understood data. A record that is simply absent is not an error: the page says what
is missing. The adapters then read the validated record's JSON form (`to_json_dict`), which is
the versioned contract between the stages and the report.

The record types are registered (report/registry.py, report/records.py), and the loader reads
every one of them. Record classes are imported where used (the stages to the left may import
torch); a stage that is not installed in this build is read by its JSON header only (schema
prefix and version 1), and its adapter reads the documented field names.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any, Final

from torchdoctor.core import rundir
from torchdoctor.core.errors import RecordError, ReportError
from torchdoctor.core.records import SCHEMA_PREFIX, Record, peek_schema
from torchdoctor.report.registry import JsonDict, RecordType, RunRecords, record_types

ENV_PARTS: Final[tuple[tuple[str, str], ...]] = (
    ("fingerprint", "EnvFingerprint"),
    ("ceilings", "Ceilings"),
)
TRIAL_SPEC: Final = RecordType(
    "trial", "trials/*.json", "torchdoctor.tune.records", "TrialResult", "tune_trial"
)
#: The final A/B of a tune, written among the trials (trials/NNN-confirm.json).
CONFIRMATION_SPEC: Final = RecordType(
    "trial", "trials/*.json", "torchdoctor.tune.records", "Confirmation", "tune_confirmation"
)
TRIAL_SPECS: Final = (TRIAL_SPEC, CONFIRMATION_SPEC)
#: The best recipe as a Python snippet, written by `torchdoctor tune` (tune.api.BEST_RECIPE_PY).
BEST_RECIPE_PY: Final = "best_recipe.py"
#: Largest snippet shown; a bigger file is not one tune wrote.
MAX_SNIPPET_BYTES: Final = 64 * 1024
#: Records a run folder may hold in the sub-run that diagnosed it (a tune's diagnosis/), read
#: from there when the folder has none of its own: the pre-tune diagnosis's trace analysis.
SUBRUN_RECORDS: Final = {rundir.DIAGNOSIS_SUBDIR: ("analysis",)}
#: Highest version read for a record whose class is not installed in this build.
FALLBACK_MAX_VERSION: Final = 1


def _record_class(module: str, name: str) -> type[Record] | None:
    try:
        cls = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None
    return cls if isinstance(cls, type) and issubclass(cls, Record) else None


def _validate(data: Any, module: str, cls_name: str, source: str) -> JsonDict:
    cls = _record_class(module, cls_name)
    if cls is not None:
        return cls.from_json_dict(data, source=source).to_json_dict()
    if not isinstance(data, dict):
        raise RecordError(f"{source}: expected a JSON object, got {type(data).__name__}")
    schema, version = data.get("schema"), data.get("version")
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
        raise RecordError(
            f"{source}: not a torchdoctor record (schema {schema!r})",
            hint="pass a file written by a torchdoctor command",
        )
    if not isinstance(version, int) or not 1 <= version <= FALLBACK_MAX_VERSION:
        raise RecordError(
            f"{source}: {schema} version {version!r} is not supported "
            f"(this torchdoctor reads versions 1..{FALLBACK_MAX_VERSION})",
            hint="upgrade torchdoctor or re-create the record",
        )
    return data


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RecordError(f"{path}: cannot read ({exc.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RecordError(
            f"{path}: not valid JSON",
            hint="the file may be truncated by a killed run; re-create it",
        ) from None


def _read_env(path: Path) -> dict[str, JsonDict]:
    data = _read_json(path)
    if not isinstance(data, dict):
        raise RecordError(f"{path}: expected a JSON object with 'fingerprint' and 'ceilings'")
    env: dict[str, JsonDict] = {}
    for part, cls_name in ENV_PARTS:
        if data.get(part) is not None:
            env[part] = _validate(data[part], "torchdoctor.core.env", cls_name, f"{path}:{part}")
    return env


def _trial_spec(data: Any) -> RecordType:
    """The spec of a file in trials/: a trial, or the final A/B (by its schema)."""
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema == SCHEMA_PREFIX + CONFIRMATION_SPEC.schema:
        return CONFIRMATION_SPEC
    return TRIAL_SPEC


def read_run_dir(run_dir: Path) -> RunRecords:
    """Read every record a run folder holds; absent records are simply not in the result."""
    manifest = rundir.read_manifest(run_dir)  # RecordError: no folder / not a run folder
    found = RunRecords(source=run_dir, manifest=manifest.to_json_dict())
    for spec in record_types():
        path = run_dir / spec.file
        if path.is_file():
            try:
                found.records[spec.key] = _validate(
                    _read_json(path), spec.module, spec.cls, str(path)
                )
            except RecordError:
                if spec.strict:
                    raise
            continue
        for sub, keys in SUBRUN_RECORDS.items():
            path = run_dir / sub / spec.file
            if spec.key in keys and path.is_file():
                data = _read_json(path)
                found.records[spec.key] = _validate(data, spec.module, spec.cls, str(path))
                break
    if (run_dir / rundir.ENV).is_file():
        found.env = _read_env(run_dir / rundir.ENV)
    trials_dir = run_dir / rundir.TRIALS
    if trials_dir.is_dir():
        for path in sorted(trials_dir.glob("*.json")):
            data = _read_json(path)
            spec = _trial_spec(data)
            found.trials.append(_validate(data, spec.module, spec.cls, str(path)))
    found.files = sorted(p.name for p in run_dir.iterdir() if p.is_file())
    snippet = run_dir / BEST_RECIPE_PY
    if snippet.is_file() and snippet.stat().st_size <= MAX_SNIPPET_BYTES:
        found.recipe_snippet = snippet.read_text(encoding="utf-8", errors="replace")
    return found


def read_record_file(path: Path) -> RunRecords:
    """Read one record file on its own (e.g. a `tune.json` copied out of its run folder)."""
    if path.name == rundir.MANIFEST:
        # A run folder's manifest stands for its folder (and shares RunResult's schema id).
        return read_run_dir(path.parent)
    peeked = peek_schema(path)
    if peeked is None:
        raise RecordError(
            f"{path}: not a torchdoctor record",
            hint="pass a run folder or a record file (diagnosis.json, tune.json, ...)",
        )
    schema = peeked[0]
    for spec in (*record_types(), *TRIAL_SPECS):
        if schema == SCHEMA_PREFIX + spec.schema:
            data = _validate(_read_json(path), spec.module, spec.cls, str(path))
            found = RunRecords(source=path, is_run_dir=False)
            if spec in TRIAL_SPECS:
                found.trials.append(data)
            else:
                found.records[spec.key] = data
            return found
    known = ", ".join(SCHEMA_PREFIX + s.schema for s in record_types())
    raise RecordError(f"{path}: cannot report on a {schema!r} record", hint=f"known: {known}")


def read_input(path: Path) -> RunRecords:
    """A run folder or one record file, whichever `path` is."""
    if path.is_dir():
        return read_run_dir(path)
    if path.is_file():
        return read_record_file(path)
    raise ReportError(
        f"{path}: no such run folder or record file",
        hint="pass a folder written by torchdoctor diagnose, tune, analyze or demo",
    )
