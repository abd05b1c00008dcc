"""The kernel variants: the C structs a variant string parses into and the string
grammars of each path (`families.py` imports VARIANTS; `cmake/gen_kernels.py`
generates the structs, parsers and formatters from them)."""

from __future__ import annotations

from kernel_types import Choice, Dims, Grammar, Num, VariantStruct  # noqa: E402  (shaders/, beside this file)

MATMUL_VARIANT = VariantStruct(
    c_name="hl_variant",
    doc="A matmul kernel variant: path, cooperative-matrix shape, tiles and loop knobs.",
    fields=(
        ("path", "hl_path", ""),
        ("tm", "uint32_t", "coop shape (0 for scalar and coop2)"),
        ("tn", "uint32_t", ""),
        ("tk", "uint32_t", ""),
        ("bm", "uint32_t", "workgroup tile"),
        ("bn", "uint32_t", ""),
        ("bk", "uint32_t", ""),
        ("sg_m", "uint32_t", "coop tiles owned by each subgroup"),
        ("sg_n", "uint32_t", ""),
        ("acc", "hl_dtype", "accumulator type"),
        ("direct_load", "int", "1: coop loads straight from global memory", "load"),
        ("stages", "uint32_t", "1: load-then-compute; 2: register-prefetch pipeline"),
        ("splitk", "uint32_t", "K split into this many fp32 partial products (1: none)"),
        ("raster", "uint32_t", "block rows per rasterization group (1: plain row order)"),
        ("threads", "uint32_t", "coop2 and gemv: invocations per workgroup"),
        ("direct_store", "int", "coop: 1 stores interior tiles with coopMatStore, 0 stages them", "store"),
    ),
    grammars=(
        Grammar(
            "scalar",
            "HL_PATH_SCALAR",
            (
                Dims("tile", ("bm", "bn", "bk")),
                # f16 parses, so that the device check can say the scalar path has f32 only.
                Choice("acc=", "acc", ("f32", "f16"), ("HL_F32", "HL_F16"), "f32"),
            ),
            fixed=(("stages", 1), ("splitk", 1), ("raster", 1)),
        ),
        Grammar(
            "coop2",
            "HL_PATH_COOP2",
            (
                Dims("tile", ("bm", "bn", "bk")),
                Num("wg", "threads"),
                Choice("acc=", "acc", ("f32", "f16"), ("HL_F32", "HL_F16"), "f32"),
                Num("raster=", "raster", 1, 64, default=8),
            ),
            fixed=(("stages", 1), ("splitk", 1)),
        ),
        # Products of a few rows (M <= 8), no tiles: the weights streamed once.
        Grammar(
            "gemv",
            "HL_PATH_GEMV",
            (Num("wg", "threads", 32, 1024),),
            fixed=(("acc", 1), ("stages", 1), ("splitk", 1), ("raster", 1)),  # acc 1: HL_F32
        ),
        Grammar(
            "coop",
            "HL_PATH_COOP",
            (
                Dims("", ("tm", "tn", "tk")),
                Dims("tile", ("bm", "bn", "bk")),
                Dims("sg", ("sg_m", "sg_n")),
                Choice("acc=", "acc", ("f32", "f16"), ("HL_F32", "HL_F16"), "f32"),
                Choice("load=", "direct_load", ("shared", "direct"), ("0", "1"), "shared"),
                Num("stages=", "stages", 1, 2, default=2),
                # The 7-item strings predate split-K and rasterization.
                Num("splitk=", "splitk", 1, 16, default=1, absent=1),
                Num("raster=", "raster", 1, 64, default=8, absent=1),
                # How interior tiles of plain products reach C: staged through shared
                # memory as 16-byte stores (measured faster on the H100 at 4096^3), or
                # coopMatStore straight to C. Left out of strings when staged.
                Choice("store=", "direct_store", ("staged", "direct"), ("0", "1"), "staged", implicit="staged"),
            ),
        ),
    ),
    example="'coop:16x8x16:tile128x128x32:sg4x8:acc=f32:load=shared:stages=2:splitk=1:raster=8', "
    "'coop2:tile128x128x32:wg256:acc=f32:raster=8', 'gemv:wg256' or 'scalar:tile64x64x16:acc=f32'",
)

ATTENTION_VARIANT = VariantStruct(
    c_name="hl_attn_variant",
    doc="A flash-attention forward variant: the coop path's cooperative-matrix shape, "
    "keys per tile, subgroups per workgroup and row tiles per subgroup; or the scalar fallback.",
    fields=(
        ("path", "hl_path", "HL_PATH_COOP or HL_PATH_SCALAR"),
        ("tm", "uint32_t", ""),
        ("tn", "uint32_t", ""),
        ("tk", "uint32_t", ""),
        ("bc", "uint32_t", "keys per tile"),
        ("nsg", "uint32_t", "subgroups per workgroup"),
        ("wq", "uint32_t", "row tiles per subgroup"),
        (
            "dq_bc",
            "uint32_t",
            "backward: the dQ kernel's keys per tile, dS handed to dS K in registers (0: bc, through shared memory)",
        ),
    ),
    grammars=(
        Grammar("fa-scalar", "HL_PATH_SCALAR"),
        Grammar(
            "fa-coop",
            "HL_PATH_COOP",
            (
                Dims("", ("tm", "tn", "tk"), parse_max=64),
                Num("sg", "nsg", parse_max=32),
                Num("wq", "wq", parse_max=8),
                Num("bc", "bc", parse_max=256),
                # The backward's dQ kernel with a key tile of its own (its scratch compact:
                # dS converted to A operands in registers); left out of strings when it has none.
                Num("dq", "dq_bc", lo=0, hi=256, default=0, parse_max=256, implicit=0),
            ),
        ),
    ),
    example="'fa-coop:16x16x16:sg4:wq1:bc32', 'fa-coop:16x16x16:sg8:wq1:bc32:dq64' (backward) or 'fa-scalar'",
)

VARIANTS = (MATMUL_VARIANT, ATTENTION_VARIANT)
