"""Typed, frozen, serializable records with a versioned JSON form.

Every result torchdoctor produces (a `Measurement`, a `Diagnosis`, a `TrialResult`, ...) is a
`Record`: a frozen pydantic model whose JSON form carries its schema name and version::

    {"schema": "torchdoctor/measurement", "version": 1, ...fields...}

Reports render records and never recompute them, so reading a record back must be exact
and must fail loudly on a schema it does not know.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from torchdoctor.core.errors import RecordError
from torchdoctor.core.io import atomic_write_text

SCHEMA_PREFIX = "torchdoctor/"


class SubRecord(BaseModel):
    """A frozen part of a record, with no schema of its own: versioned with its parent."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Record(BaseModel):
    """Base of all result records. Subclasses set `schema_name` and `schema_version`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_name: ClassVar[str] = "record"
    schema_version: ClassVar[int] = 1

    @classmethod
    def schema_id(cls) -> str:
        return SCHEMA_PREFIX + cls.schema_name

    def to_json_dict(self) -> dict[str, Any]:
        """The versioned JSON form: schema and version first, then the fields."""
        return {
            "schema": self.schema_id(),
            "version": self.schema_version,
            **self.model_dump(mode="json"),
        }

    def _repr_html_(self) -> str:
        """The record in a notebook: its fields as a table (core/notebook.py)."""
        from torchdoctor.core.notebook import record_facts

        return record_facts(self)

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_json_dict(), indent=indent, allow_nan=False)

    @classmethod
    def upgrade(cls, fields: dict[str, Any], version: int) -> dict[str, Any]:
        """The fields of this record as written at an older `version`, in the current form.

        Identity by default; a record whose form changed overrides it, so that what older
        versions wrote still reads back.
        """
        return fields

    @classmethod
    def from_json_dict(cls, data: Any, *, source: str = "record") -> Self:
        """Validate and rebuild a record; raise `RecordError` naming what is wrong."""
        if not isinstance(data, dict):
            raise RecordError(f"{source}: expected a JSON object, got {type(data).__name__}")
        schema = data.get("schema")
        if schema != cls.schema_id():
            raise RecordError(
                f"{source}: schema is {schema!r}, expected {cls.schema_id()!r}",
                hint="pass a file written by the matching torchdoctor command",
            )
        version = data.get("version")
        if not isinstance(version, int) or version > cls.schema_version or version < 1:
            raise RecordError(
                f"{source}: {schema} version {version!r} is not supported "
                f"(this torchdoctor reads versions 1..{cls.schema_version})",
                hint="upgrade torchdoctor or re-create the record",
            )
        fields = {k: v for k, v in data.items() if k not in ("schema", "version")}
        try:
            if version < cls.schema_version:
                fields = cls.upgrade(fields, version)
            return cls.model_validate(fields)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "<root>"
            raise RecordError(f"{source}: invalid field {where}: {first.get('msg')}") from exc

    def write(self, path: str | Path) -> Path:
        """Write the JSON form atomically: the file is either complete or absent."""
        return atomic_write_text(Path(path), self.to_json() + "\n")

    @classmethod
    def read(cls, path: str | Path) -> Self:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise RecordError(f"{p}: no such file") from None
        except OSError as exc:
            raise RecordError(f"{p}: cannot read ({exc.strerror})") from None
        except UnicodeDecodeError:
            raise RecordError(f"{p}: not UTF-8 text") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RecordError(
                f"{p}: not valid JSON (line {exc.lineno}, column {exc.colno})",
                hint="the file may be truncated by a killed run; re-create it",
            ) from None
        except (ValueError, RecursionError) as exc:
            # A number of thousands of digits, or nesting deeper than Python recurses.
            why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:80]
            raise RecordError(f"{p}: not a record ({why})") from None
        return cls.from_json_dict(data, source=str(p))


def peek_schema(path: str | Path) -> tuple[str, int] | None:
    """Return (schema, version) of a record file, or None if it is not a record."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError too
        return None
    if isinstance(data, dict) and isinstance(data.get("schema"), str):
        version = data.get("version")
        return data["schema"], version if isinstance(version, int) else 0
    return None
