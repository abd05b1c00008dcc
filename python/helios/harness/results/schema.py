"""A row type declares each field once: its kind, whether a file must have it, what it
means. From the type come the reader's check (``reader_fields``: the kinds
helios.files.check applies to a row read back) and the published JSON Schema
(``json_schema``), and a workload builds its rows through it (``to_row``), so a field
cannot be written that the type does not declare.

Dataclasses rather than msgspec.Struct: the rows are written and read as plain JSON
dicts by code that predates the types, NumPy and the standard library are all the
harness needs, and a field's extra JSON Schema (a pattern, a reference to a shared
definition) sits in its metadata."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

# A kind as helios.files.check names it -> its JSON Schema.
KIND_SCHEMA: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "bool": {"type": "boolean"},
    "int": {"type": "integer"},
    "count": {"type": "integer", "minimum": 0},
    "number": {"type": "number"},
    "positive": {"type": "number", "exclusiveMinimum": 0},
    "numbers": {"type": "array", "items": {"type": "number"}},
    "list": {"type": "array"},
    "object": {"type": "object"},
}
ABSENT: Any = object()  # a field the row leaves out (another workload's field): not written


def col(kind: str, doc: str, *, required: bool = False, schema: Optional[dict] = None, default: Any = None) -> Any:
    """A row field: `kind` one of KIND_SCHEMA's, '?' where null is a value ("none
    measured"); `required`: every file of the schema has it, and a row built without it
    is a TypeError; `schema`: JSON Schema replacing the kind's (a pattern, a $ref);
    `default` ABSENT for a field only some rows carry, left out of the JSON when not
    set. Row types are keyword-only dataclasses (``kw_only=True``)."""
    if kind.rstrip("?") not in KIND_SCHEMA:
        raise ValueError(f"row field kind {kind!r}: one of {sorted(KIND_SCHEMA)}, '?' for nullable")
    meta = {"kind": kind, "doc": doc, "required": required, "schema": schema}
    if required:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _fields(row_type: type) -> tuple[dataclasses.Field, ...]:
    return dataclasses.fields(row_type)


def reader_fields(*row_types: type, required: bool = False) -> dict[str, str]:
    """The kinds a reader checks in a row of any of `row_types`: every field optional
    (an older file may lack one), its kind one for all the types that declare it;
    with `required`, the fields every file has (``required=True``) must be there."""
    out: dict[str, str] = {}
    for t in row_types:
        for f in _fields(t):
            kind = f.metadata["kind"].rstrip("?") + ("" if required and f.metadata["required"] else "?")
            if out.setdefault(f.name, kind) != kind:
                raise TypeError(f"row field {f.name!r}: {kind} in {t.__name__}, {out[f.name]} elsewhere")
    return out


def _field_schema(f: dataclasses.Field) -> dict[str, Any]:
    m = f.metadata
    base = dict(m["schema"] or KIND_SCHEMA[m["kind"].rstrip("?")])
    if m["kind"].endswith("?"):
        base = {"oneOf": [{"type": "null"}, base]}
    return {**base, "description": m["doc"]}


def json_schema(row_type: type) -> dict[str, Any]:
    """The JSON Schema of a row of `row_type` (its fields, those required)."""
    fs = _fields(row_type)
    return {
        "type": "object",
        # the docstring's first paragraph, its whitespace normalized (Python 3.13 strips
        # docstring indentation when compiling, earlier versions keep it)
        "description": " ".join((row_type.__doc__ or "").strip().split("\n\n")[0].split()),
        "required": [f.name for f in fs if f.metadata["required"]],
        "properties": {f.name: _field_schema(f) for f in fs},
    }


def to_row(row: Any) -> dict[str, Any]:
    """A typed row as the JSON dict written to a result file: fields in declaration
    order, ABSENT ones left out."""
    return {f.name: getattr(row, f.name) for f in _fields(type(row)) if getattr(row, f.name) is not ABSENT}


def written_row(row_type: type, row: dict[str, Any]) -> dict[str, Any]:
    """A row built as a dict, field by field as a workload runs, checked against its
    type before it is written: a key the type does not declare, or a required field
    left out, is a TypeError. The dict is returned as it was built."""
    row_type(**row)
    return row


def fields_schema(fields: dict[str, str], docs: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """A JSON object's schema from helios.files.check's kinds (a '?' kind may be null or
    left out; the others are required)."""
    props: dict[str, Any] = {}
    for name, kind in fields.items():
        base = dict(KIND_SCHEMA[kind.rstrip("?")])
        props[name] = {"oneOf": [{"type": "null"}, base]} if kind.endswith("?") else base
        if docs and name in docs:
            props[name]["description"] = docs[name]
    return {"type": "object", "required": [n for n, k in fields.items() if not k.endswith("?")], "properties": props}
