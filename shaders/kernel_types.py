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


# ---- host/shader contracts (layouts.py) ---------------------------------------
# Generated into hl_layouts.h for C and one GLSL file each, so that the host writes
# `pc.matmul.ldb`, never `pc[7]`, and a reordered word changes both sides at once.


@dataclass(frozen=True)
class Word:
    """One 32-bit word: its name on both sides, its GLSL type (uint, int, float; C:
    uint32_t, int32_t, float), the comment both sides carry. `only`: a define the GLSL
    declares it under (C always has the word; the kernels without the define keep
    their block as it was)."""

    name: str
    type: str = "uint"
    doc: str = ""
    only: Optional[str] = None


@dataclass(frozen=True)
class View:
    """One meaning of a block's or a row's words: a name per word, in order (None: a
    word this meaning leaves unused; the words past the last are unused too). A block
    read under several meanings is a C union of its views: which one a dispatch
    writes is decided by its kernel (a decode pass, a run member's kind)."""

    name: str
    doc: str
    words: tuple[Optional[Word], ...]


@dataclass(frozen=True)
class Push:
    """A push-constant block: C `hl_push_<name>` (the struct of `words`, or the union
    of `views` over them), GLSL `push_<name>.glsl` declaring `block` as `instance`.
    `local_under`: a define under which the GLSL holds the words as a plain struct
    variable the shader fills itself (a persistent run's member reads them from its
    table row), every word declared."""

    name: str
    doc: str
    block: str
    instance: str
    words: tuple[Word, ...]
    views: tuple[View, ...] = ()
    local_under: Optional[str] = None


@dataclass(frozen=True)
class Row:
    """A table of rows of `words` 32-bit words a kernel reads from a buffer (`array`,
    uint[]): C `hl_<name>_row`, the union of its views; GLSL accessors
    `<VIEW>_<WORD>(r)` for the word of the row starting at element r."""

    name: str
    doc: str
    words: int
    array: str
    views: tuple[View, ...]


@dataclass(frozen=True)
class Const:
    """A constant both sides use: C `#define HL_<name>`, GLSL `const uint <name>` in
    the file `glsl` names (one of the generated push_*.glsl or rows files); `only`: a
    define the GLSL declares it under (the kernels that never test it keep their
    SPIR-V as it was)."""

    name: str
    value: int
    doc: str
    glsl: str
    only: Optional[str] = None


@dataclass(frozen=True)
class Rule:
    """A rule both sides compute, as one expression in the syntax C and GLSL share
    (unsigned integer arithmetic, comparisons, ?:) over `params` and the table's
    DECODE_SPLIT_* constants: C `static inline uint32_t hl_<name>(...)`, GLSL a macro
    `<NAME>(...)` (usable in constant expressions; its arguments parenthesized)."""

    name: str
    doc: str
    params: tuple[str, ...]
    expr: str


# ---- plan operations (ops.py) ---------------------------------------------------


@dataclass(frozen=True)
class Arg:
    """One argument of a plan operation: its key in the op dict and its field in the C
    struct, its type (tensor: an hl_tensor *; u32; f32; dtype: an hl_dtype from a
    NumPy dtype name), what it is, and whether the dict may leave it out (a tensor
    then NULL)."""

    name: str
    type: str
    doc: str = ""
    optional: bool = False


@dataclass(frozen=True)
class PlanOp:
    """A plan operation: its name, C kind, argument struct and hl_plan_op member, its
    step function (`hl_status step(hl_device *, const <c_struct> *, uint32_t n_params,
    const char *who, hl_plan_step *, hl_error *)`), what it computes, its arguments.
    declare: the struct is generated from `args` (else the core's API declares it);
    product: the arguments are a product's, parsed as Device.matmul's."""

    name: str
    kind: str
    c_struct: str
    member: str
    step: str
    doc: str
    args: tuple[Arg, ...]
    declare: bool = False
    product: bool = False
