"""The types the kernel table (`families.py`) is written in: variant grammars
(the items of a variant string), variant structs (what C parses them into),
specialization constants and kernel families."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

# ---- variant grammars -------------------------------------------------------
# A variant string is `tag:item:item...`; each item is a prefix and a value.


@dataclass(frozen=True)
class Dims:
    """`prefix` then N positive integers joined by 'x' (e.g. tile128x128x64)."""

    prefix: str
    fields: tuple[str, ...]
    parse_max: int = 4096


@dataclass(frozen=True)
class Num:
    """`prefix` then one positive integer; `lo..hi` is checked against the device
    rules (UnsupportedError), `absent` is its value when an older string leaves a
    trailing item out, `default` when a builder (`_helios.format_variant`) does.
    `implicit`: as Choice's, the value a string that leaves this (trailing) item out
    means and the canonical string leaves out."""

    prefix: str
    field: str
    lo: int = 1
    hi: int = 4096
    default: Optional[int] = None
    absent: Optional[int] = None
    parse_max: int = 4096
    implicit: Optional[int] = None


@dataclass(frozen=True)
class Choice:
    """`prefix` then one of `names`; the field stores the matching C value.
    `implicit`: the value a string that leaves this (trailing) item out means, and
    the canonical string leaves it out when the field has it, so a knob added
    later keeps every older variant string valid and unchanged."""

    prefix: str
    field: str
    names: tuple[str, ...]
    c_values: tuple[str, ...]
    default: Optional[str] = None
    implicit: Optional[str] = None


Item = Union[Dims, Num, Choice]


@dataclass(frozen=True)
class Grammar:
    tag: str  # the string's first item; also the `path` name Python sees
    path: str  # the C hl_path value
    items: tuple[Item, ...] = ()
    fixed: tuple[tuple[str, int], ...] = ()  # fields this path does not carry: their value


@dataclass(frozen=True)
class VariantStruct:
    """A C variant struct (generated into hl_kernels.h) and its string grammars."""

    c_name: str
    doc: str
    # (C name, C type: uint32_t | hl_dtype | int | hl_path, comment[, the key Python's dicts use])
    fields: tuple[tuple[str, ...], ...]
    grammars: tuple[Grammar, ...]
    example: str  # quoted in the malformed-string message


@dataclass(frozen=True)
class Spec:
    """One specialization constant: GLSL name and type, its default in the shader,
    and the C expression that gives its value (`v` is the variant, `e` the
    hl_spec_env of the call). `local_size=True`: the workgroup size (local_size_x_id)."""

    name: str
    glsl_type: str
    default: str
    value: str
    local_size: bool = False


@dataclass(frozen=True)
class Family:
    name: str
    source: str
    variant: Optional[str]  # the C struct its constants read, or None
    spec: tuple[Spec, ...]
    bindings: str  # a key of BINDINGS
    # Build-time permutations: (param, C type, ((C value, defines[, needs]), ...)). `needs`
    # names a compiler feature (COMPILER_FEATURES) the permutation's source requires;
    # where the build's glslc lacks it the permutation is left out (no SPIR-V, and the
    # pipeline lookup says which feature the build lacked).
    axes: tuple[tuple[str, str, tuple[tuple[str, ...], ...]], ...] = ()
    # Combinations of axis values never built: each entry is ((param, C value), ...),
    # a permutation matching every pair of one entry is skipped.
    skip: tuple[tuple[tuple[str, str], ...], ...] = ()
    full_subgroups: bool = False  # cooperative matrices: required subgroup size, full subgroups
    doc: str = field(default="")
