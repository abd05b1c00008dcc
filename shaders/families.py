"""The kernel families, each declared once.

`cmake/gen_kernels.py` reads this table at configure time and generates:

- the shader permutation rows CMake compiles with glslc (`kernels.cmake`),
- the embedded SPIR-V table and the variant grammars (`kernels.c`),
- `hl_kernels.h` for C: the shader enum, one lookup function per family (a
  permutation missing from the table does not compile), the specialization
  constant ids, the binding slots, a filler for each family's constant array,
  the variant structs and the digest of every kernel source,
- `spec_<family>.glsl` for each shader: its `constant_id` declarations and
  binding slots, so GLSL and C name the same ids from one place.

The types this table is written in (grammars, variant structs, constants,
families) are in `kernel_types.py` beside it, the variant structs and their
string grammars in `variants.py`; whoever loads this file puts `shaders/` on the
import path first (`cmake/gen_kernels.py`'s `load_table`).

A new knob of an existing family is a variant field and a constant here, and its
use in the shader. A new family is one `Family` here, its shader and the C code
that records it.
"""

from __future__ import annotations

from kernel_types import Family, Spec  # noqa: E402  (shaders/, beside this file)
from variants import ATTENTION_VARIANT, MATMUL_VARIANT, VARIANTS  # noqa: F401  (read from here: gen_kernels, tests)

# The per-call values a family's constant expressions read besides the variant
# (`e->name` in a Spec's value): the fields of the generated hl_spec_env, a line
# of the struct each (names, comment). A constant that reads a name not here, or a
# name no constant reads, fails the build (cmake/gen_kernels.py). A new per-call
# constant: its name here, its Spec in the family, and its value where the call
# fills hl_spec_env.
SPEC_ENV = (
    (("subgroup",), ""),
    (("epi", "act", "trans_a", "trans_b", "batched"), ""),
    (("d", "causal", "lse", "pass", "fold"), ""),
    (("rows", "rows_slots", "rows_shift", "rows_lanes"), "the forward's rows in registers (layout.c)"),
    (("qkv_rs", "o_rs"), "attention row layouts"),
    (("iters",), "loop trip counts (the roof kernel)"),
    (("cols_per_thread", "residual", "rows_per_group", "rms"), "layernorm"),
    (("shared_bytes",), "the shared memory the C side counted for the kernel (SHARED_BYTES)"),
    (("gemv_rows",), "the matrix-vector kernel: rows of A per workgroup"),
    (("long_splits",), "decode attention: whether a split may hold SPLIT_LONG keys (decode_attention.glsl)"),
    (("run_flags",), "a persistent run: the OR of its members' flags words, the paths its kernel keeps"),
    (("rope",), "decode attention: whether it rotates q and the new k (a rope fused into it)"),
)


# Compiler features a permutation may need, each with the GLSL CMake compiles to
# probe for it (a glslc that rejects the probe builds none of those permutations).
COMPILER_FEATURES = {
    "GL_EXT_bfloat16": "#version 460\n#extension GL_EXT_bfloat16 : require\n"
    "#extension GL_KHR_cooperative_matrix : require\n#extension GL_KHR_memory_scope_semantics : require\n"
    "layout(local_size_x = 32) in;\n"
    "void main() { coopmat<bfloat16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a = "
    "coopmat<bfloat16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>(bfloat16_t(1.0)); }\n",
    # an accumulator converted to an A operand (NV cooperative matrix 2's conversions)
    "GL_NV_cooperative_matrix2": "#version 460\n#extension GL_NV_cooperative_matrix2 : require\n"
    "#extension GL_KHR_cooperative_matrix : require\n#extension GL_KHR_memory_scope_semantics : require\n"
    "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n"
    "layout(local_size_x = 32) in;\n"
    "void main() { coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c = "
    "coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(1.0);\n"
    "coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a = "
    "coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>(c); }\n",
}


# Storage-buffer slots per kernel kind (one descriptor set).
BINDINGS = {
    "matmul": ("A", "B", "C", "WORKSPACE", "BIAS"),
    # A LayerNorm of one row and the product that reads its output (matmul_gemv_ln.comp):
    # the product's slots (A: the norm's output, which the kernel writes through H), then
    # the norm's stream, branch, weights and outputs
    "matmul_ln": ("A", "B", "C", "WORKSPACE", "BIAS", "X", "R", "GAMMA", "BETA", "XOUT", "H", "STATS"),
    # Consecutive one-row products as one persistent dispatch (matmul_gemv_persist.comp):
    # the members' shapes, the grid barrier's counter, the plan's parameter words (its
    # fault word); each member's buffers sit in the PERSIST array binding after every
    # kind's slots, PERSIST_ROLES to a member
    "matmul_persist": ("TABLE", "COUNTERS", "PARAMS"),
    "attention": ("Q", "K", "O", "V", "LSE"),
    # The backward's two kernels (dQ, then dK and dV) share one set: DELTA is the
    # rowsum(dO * O) the first writes and the second reads.
    "attention_bwd": ("Q", "K", "V", "O", "DO", "LSE", "DELTA", "DQ", "DK", "DV"),
    "roof": ("OUT",),
    # Layout copies and elementwise activations (the ops between products).
    "copy": ("SRC", "DST"),
    "activation": ("Z", "G", "Y"),
    # A decode step's ops besides products and norms (decode.comp); PARAMS: a plan's parameter words
    # and TAB, an attention's rotary cos and sin table where it rotates q and the new k itself
    "decode": ("PARAMS", "SRC", "SRC2", "KC", "VC", "OUT", "WORK", "TAB"),
    # AdamW over fp32 parameters (optim.comp): the plan's parameter words, the parameters,
    # the two moments, the gradient and the parameters' 16-bit copy
    "optim": ("PARAMS", "P", "M", "V", "G", "P16"),
    # A training step's other ops (train.comp): token ids (or targets), sources, output and
    # the cross-entropy's gradient
    "train": ("IDS", "SRC", "SRC2", "DST", "AUX"),
    # LayerNorm over an fp32 residual stream, both directions (layernorm.comp)
    "layernorm": ("X", "R", "GAMMA", "BETA", "XOUT", "H", "STATS", "GRES", "GX", "GX16", "PARTIAL"),
}


# A persistent run's members (at most PERSIST_MEMBERS) and the buffers each binds, in
# this order, in one array, binding 0 of descriptor set PERSIST_SET (set 0 holds every
# kernel's slots; only a run's dispatch binds this one): a product's (A, B, C, BIAS) and
# its LayerNorm head's (matmul_gemv_ln_head.glsl), and GLU, the SwiGLU's row a gate and
# up product writes for the next member (FLAG_PERSIST_GLU); an attention's QKV row,
# caches, output and partials take A, B, C, BIAS and X, its rotary table R
# (matmul_gemv_persist.comp).
PERSIST_SET = 1
PERSIST_MEMBERS = 96
PERSIST_ROLES = ("A", "B", "C", "BIAS", "X", "R", "GAMMA", "BETA", "XOUT", "H", "STATS", "GLU")

# A decode attention's keys a split (the rule: layouts.py's SPLIT_RULES, for C and GLSL):
# SHORT while the heads' splits of that many fit one pass of a persistent run's grid,
# then the position's keys spread over that pass, up to what PASSES passes of the
# workgroup hold (at least SHORT) and at most LONG (a score an invocation). PASSES is 6:
# at head dimension 128 (96 keys) the run's kernel stays within the registers of two
# workgroups an SM on an H200, where 8 (128 keys) took 129 (results/h200-splits); at
# 64, 6 passes hold 192 keys.
DECODE_SPLIT = {"SHORT": 64, "LONG": 256, "PASSES": 6}


# The epilogue and layout constants every matmul family declares (matmul_common.glsl
# reads them); the split-K kernel applies the epilogue, the main kernel then runs plain.
MATMUL_EPILOGUE = (
    Spec("EPI", "uint", "0", "e->epi"),  # EPI_* bits
    Spec("ACT", "uint", "0", "e->act"),  # ACT_*
    Spec("TRANS_A", "bool", "false", "e->trans_a"),
    Spec("TRANS_B", "bool", "false", "e->trans_b"),
    Spec("BATCHED", "bool", "false", "e->batched"),  # batch > 1 (grid z = batch * splits)
)

# The matrix-vector kernel's constants, with and without its LayerNorm head.
GEMV_SPEC = (
    Spec("SUBGROUP", "uint", "32", "e->subgroup"),
    Spec("THREADS_X", "uint", "256", "v->threads", local_size=True),
    Spec("ROWS", "uint", "8", "e->gemv_rows"),
) + MATMUL_EPILOGUE

# The cooperative-matrix fragment shape, ids 0-2 of every family that multiplies
# fragments of a variant's coop shape.
COOP_FRAGMENT = (
    Spec("TM", "uint", "16", "v->tm"),
    Spec("TN", "uint", "16", "v->tn"),
    Spec("TK", "uint", "16", "v->tk"),
)

OUT_AXIS = ("out", "hl_dtype", (("HL_F32", ""), ("HL_F16", "-DOUT_F16"), ("HL_BF16", "-DOUT_BF16")))
ACC_AXIS = ("acc", "hl_dtype", (("HL_F32", ""), ("HL_F16", "-DACC_F16")))
# Input element type. bfloat16 on cooperative matrices needs GL_EXT_bfloat16;
# the scalar kernels read bfloat16 as 16-bit words and compute in fp32 (any glslc).
IN_AXIS_COOP = ("in", "hl_dtype", (("HL_F16", ""), ("HL_BF16", "-DIN_BF16", "GL_EXT_bfloat16")))
# The attention forward's P handed to P V (ROWS=1), and the backward dQ kernel's dS to
# dS K: through shared memory (any device), or converted to A operands in registers (NV
# cooperative matrix 2's conversions).
P_AXIS = ("p_regs", "int", (("0", ""), ("1", "-DP_IN_REGISTERS", "GL_NV_cooperative_matrix2")))
IN_AXIS_SCALAR = ("in", "hl_dtype", (("HL_F16", ""), ("HL_BF16", "-DIN_BF16")))
# A persistent run's kernel with every member stamped by the device clock (HELIOS_PLAN_TRACE):
# its own SPIR-V, so that the plain kernel never declares the clock's capability.
TRACE_AXIS = ("trace", "int", (("0", ""), ("1", "-DPERSIST_TRACE")))
# Products keep the input's 16-bit type or widen to f32: no f16 in -> bf16 out, no
# bf16 in -> f16 out, and no bf16 accumulator (devices offer bf16 x bf16 -> f32).
MIXED_16 = ((("in", "HL_F16"), ("out", "HL_BF16")), (("in", "HL_BF16"), ("out", "HL_F16")))
NO_BF16_ACC16 = ((("in", "HL_BF16"), ("acc", "HL_F16")),)

# Where every attention kernel's operands' rows lie (attention_layout.glsl): the row
# strides of Q, K, V (and dQ, dK, dV) and of O (and dO), in elements, 0 for packed
# heads. Constants, not push words: with a runtime pitch every address of the coop
# kernels' loads and stores took a multiply and the packed forward ran 10-34% slower
# on the H100 (8bf150f against its parent, h100-attn-bisect-8bf150f). Heads per batch
# element and the column offsets stay push words: as constants too, the d=128
# forward (255 registers) ran 6% slower in the same process (results/h100-attn-layout-ab/).
ATTENTION_LAYOUT = (
    Spec("QKV_RS", "uint", "0", "e->qkv_rs"),
    Spec("O_RS", "uint", "0", "e->o_rs"),
)

# The shared memory the C side counted for a kernel, the count that refuses variants past
# the device's limit (a driver may run a pipeline over it: the H100's did). The kernel
# compares its own declarations against it and writes NaN where it needs more, so every
# correctness test of a variant also checks the count (shaders/common/shared_check.glsl).
SHARED_COUNTED = (Spec("SHARED_BYTES", "uint", "0", "e->shared_bytes"),)


# The backward's two coop kernels take the forward's variant grammar: a workgroup of
# NSG subgroups owns NSG * WQ * TM rows (query rows for dQ, key rows for dK/dV) and
# steps through the other side BC rows at a time: the variant's bc, or for the dQ
# kernel its dq_bc where it has one (attention_bwd_spec's `bc`, a C expression).
def attention_bwd_spec(bc: str) -> tuple[Spec, ...]:
    return (
        COOP_FRAGMENT
        + (
            Spec("D", "uint", "64", "e->d"),
            Spec("BC", "uint", "32", bc),
            Spec("NSG", "uint", "4", "v->nsg"),
            Spec("WQ", "uint", "1", "v->wq"),
            Spec("SUBGROUP", "uint", "32", "e->subgroup"),
            Spec("THREADS_X", "uint", "128", "v->nsg * e->subgroup", local_size=True),
            Spec("CAUSAL", "uint", "0", "e->causal"),
            # 1: lse and delta folded into the score products (attention_bwd_common.glsl);
            # 0 (HELIOS_DISABLE_ATTENTION_BWD_FOLD=1): scores and dP through an fp32 scratch.
            Spec("FOLD", "uint", "0", "e->fold"),
        )
        + ATTENTION_LAYOUT
        + SHARED_COUNTED
    )


FAMILIES = (
    Family(
        "matmul_coop",
        "matmul/matmul_coop.comp",
        "hl_variant",
        COOP_FRAGMENT
        + (
            Spec("WM", "uint", "2", "v->bm / (v->sg_m * v->tm)"),  # subgroups along M
            Spec("WN", "uint", "2", "v->bn / (v->sg_n * v->tn)"),
            Spec("SG_M", "uint", "2", "v->sg_m"),
            Spec("SG_N", "uint", "2", "v->sg_n"),
            Spec("BK", "uint", "32", "v->bk"),
            Spec("SUBGROUP", "uint", "32", "e->subgroup"),
            Spec("STAGES", "uint", "2", "v->stages"),
            Spec("DIRECT", "bool", "false", "(uint32_t)v->direct_load"),
            Spec(
                "THREADS_X",
                "uint",
                "128",
                "v->bm / (v->sg_m * v->tm) * (v->bn / (v->sg_n * v->tn)) * e->subgroup",
                local_size=True,
            ),
            Spec("RASTER", "uint", "8", "v->raster"),
            Spec("DIRECT_STORE", "uint", "0", "(uint32_t)v->direct_store"),
        )
        + MATMUL_EPILOGUE
        + SHARED_COUNTED,
        "matmul",
        axes=(ACC_AXIS, OUT_AXIS, IN_AXIS_COOP),
        skip=MIXED_16 + NO_BF16_ACC16,
        full_subgroups=True,
        doc="KHR cooperative matrices, subgroup scope",
    ),
    Family(
        "matmul_coop2",
        "matmul/matmul_coop2.comp",
        "hl_variant",
        (
            Spec("BM", "uint", "128", "v->bm"),
            Spec("BN", "uint", "128", "v->bn"),
            Spec("BK", "uint", "32", "v->bk"),
            Spec("THREADS_X", "uint", "256", "v->threads", local_size=True),
            Spec("RASTER", "uint", "8", "v->raster"),
        )
        + MATMUL_EPILOGUE,
        "matmul",
        axes=(ACC_AXIS, ("out", "hl_dtype", OUT_AXIS[2][:2])),
        doc="NV cooperative matrix 2, workgroup scope (opt-in; f16 inputs)",
    ),
    Family(
        "matmul_scalar",
        "matmul/matmul_scalar.comp",
        "hl_variant",
        MATMUL_EPILOGUE,
        "matmul",
        axes=(OUT_AXIS, IN_AXIS_SCALAR),
        skip=MIXED_16,
        doc="no cooperative matrices: the fallback (fp32 arithmetic)",
    ),
    Family(
        "matmul_gemv",
        "gemv/matmul_gemv.comp",
        "hl_variant",
        GEMV_SPEC,
        "matmul",
        axes=(OUT_AXIS, IN_AXIS_SCALAR),
        skip=MIXED_16,
        full_subgroups=True,
        doc="products of M <= 8 rows: weights streamed, no tiles (fp32 arithmetic)",
    ),
    Family(
        "matmul_gemv_ln",
        "gemv/matmul_gemv_ln.comp",
        "hl_variant",
        GEMV_SPEC,
        "matmul_ln",
        axes=(OUT_AXIS, IN_AXIS_SCALAR),
        skip=MIXED_16,
        full_subgroups=True,
        doc="a LayerNorm of one row and the product that reads it, in one dispatch (fp32 arithmetic)",
    ),
    Family(
        "matmul_gemv_persist",
        "persist/matmul_gemv_persist.comp",
        None,
        (
            Spec("SUBGROUP", "uint", "32", "e->subgroup"),
            Spec("THREADS_X", "uint", "256", "256u", local_size=True),
            Spec("D", "uint", "64", "e->d"),  # its attention members' head dimension
            # every flag bit a member of the run sets: a path no member takes compiles out
            Spec("RUN_FLAGS", "uint", "0xFFFFFFFFu", "e->run_flags"),
        ),
        "matmul_persist",
        axes=(OUT_AXIS, IN_AXIS_SCALAR, TRACE_AXIS),
        skip=MIXED_16,
        full_subgroups=True,
        doc="one-row products and decode attentions one after another in one dispatch, a grid barrier between",
    ),
    Family(
        "matmul_splitk_reduce",
        "matmul/matmul_splitk_reduce.comp",
        None,
        MATMUL_EPILOGUE,
        "matmul",
        axes=(OUT_AXIS,),
        doc="sums split-K partial products and applies the epilogue",
    ),
    Family(
        "attention_coop",
        "attention/attention_coop.comp",
        "hl_attn_variant",
        COOP_FRAGMENT
        + (
            Spec("D", "uint", "64", "e->d"),  # head dimension (multiple of TK, TN and 8)
            Spec("BC", "uint", "32", "v->bc"),  # keys per tile
            Spec("NSG", "uint", "4", "v->nsg"),  # subgroups per workgroup
            Spec("WQ", "uint", "1", "v->wq"),  # row tiles per subgroup
            Spec("SUBGROUP", "uint", "32", "e->subgroup"),
            Spec("THREADS_X", "uint", "128", "v->nsg * e->subgroup", local_size=True),
            Spec("CAUSAL", "uint", "0", "e->causal"),
            Spec("LSE", "uint", "0", "e->lse"),  # 1: also write each row's log-sum-exp (for the backward)
            # 1: each row's running max folded into the score product, P on the fragments
            # where it can be (attention_coop.comp); 0 (HELIOS_DISABLE_ATTENTION_FOLD=1): the
            # row-wise softmax through the fp32 scratch for every tile.
            Spec("FOLD", "uint", "0", "e->fold"),
            # 1: the softmax's rows in registers through the accumulator's layout (layout.c),
            # which ROWS_SLOTS, ROWS_SHIFT and ROWS_LANES describe; FOLD is then unused.
            Spec("ROWS", "uint", "0", "e->rows"),
            Spec("ROWS_SLOTS", "uint", "2", "e->rows_slots ? e->rows_slots : 2u"),
            Spec("ROWS_SHIFT", "uint", "2", "e->rows_shift"),
            Spec("ROWS_LANES", "uint", "3", "e->rows_lanes"),
        )
        + ATTENTION_LAYOUT
        + SHARED_COUNTED,
        "attention",
        axes=(IN_AXIS_COOP, P_AXIS),
        full_subgroups=True,
        doc="flash-attention forward on KHR cooperative matrices (Q, K, V, O in the input type)",
    ),
    Family(
        "attention_bwd_dq",
        "attention_bwd/attention_bwd_dq.comp",
        "hl_attn_variant",
        attention_bwd_spec("v->dq_bc ? v->dq_bc : v->bc"),
        "attention_bwd",
        axes=(IN_AXIS_COOP, P_AXIS),
        full_subgroups=True,
        doc="flash-attention backward, first kernel: delta = rowsum(dO * O) and dQ, per query block",
    ),
    Family(
        "attention_bwd_dkdv",
        "attention_bwd/attention_bwd_dkdv.comp",
        "hl_attn_variant",
        attention_bwd_spec("v->bc"),
        "attention_bwd",
        axes=(IN_AXIS_COOP,),
        full_subgroups=True,
        doc="flash-attention backward, second kernel: dK and dV, per key block",
    ),
    Family(
        "mma_roof",
        "probes/mma_roof.comp",
        "hl_variant",
        COOP_FRAGMENT
        + (
            Spec("SUBGROUP", "uint", "32", "e->subgroup"),
            Spec("THREADS_X", "uint", "128", "4 * e->subgroup", local_size=True),  # 4 subgroups
            Spec("ITERS", "uint", "1024", "e->iters"),
        ),
        "roof",
        axes=(ACC_AXIS,),
        full_subgroups=True,
        doc="the cooperative-matrix MMA roof: register-resident fragments, no memory traffic",
    ),
    Family(
        "coop_layout",
        "probes/coop_layout.comp",
        "hl_variant",
        COOP_FRAGMENT
        + (
            Spec("SUBGROUP", "uint", "32", "e->subgroup"),
            Spec("THREADS_X", "uint", "32", "e->subgroup", local_size=True),  # one subgroup
        ),
        "roof",
        full_subgroups=True,
        doc="where a device keeps a TM x TN fp32 accumulator's elements (each lane's row and column)",
    ),
    Family(
        "attention_scalar",
        "attention/attention_scalar.comp",
        "hl_attn_variant",
        (
            Spec("D", "uint", "64", "e->d"),
            Spec("CAUSAL", "uint", "0", "e->causal"),
            Spec("LSE", "uint", "0", "e->lse"),
        )
        + ATTENTION_LAYOUT,
        "attention",
        axes=(IN_AXIS_SCALAR,),
        doc="flash-attention forward without cooperative matrices (fp32 arithmetic)",
    ),
    Family(
        "attention_bwd_scalar",
        "attention_bwd/attention_bwd_scalar.comp",
        "hl_attn_variant",
        (
            Spec("D", "uint", "64", "e->d"),
            Spec("CAUSAL", "uint", "0", "e->causal"),
            Spec("PASS", "uint", "0", "e->pass"),  # 0: delta and dQ per query row; 1: dK and dV per key row
        )
        + ATTENTION_LAYOUT,
        "attention_bwd",
        axes=(IN_AXIS_SCALAR,),
        doc="flash-attention backward without cooperative matrices (fp32 arithmetic)",
    ),
    Family(
        "copy_strided",
        "elementwise/copy_strided.comp",
        None,
        (),
        "copy",
        doc="a 4-D strided copy of 16-bit elements (layout changes between products and attention)",
    ),
    Family(
        "activation",
        "elementwise/activation.comp",
        None,
        (
            Spec("ACT", "uint", "0", "e->act"),  # ACT_*
            Spec("PASS", "uint", "0", "e->pass"),  # 0: y = act(z); 1: y = g * act'(z)
        ),
        "activation",
        axes=(IN_AXIS_SCALAR,),
        doc="an activation or its backward over 16-bit elements (fp32 arithmetic)",
    ),
    Family(
        "decode",
        "decode/decode.comp",
        None,
        (
            Spec("PASS", "uint", "0", "e->pass"),  # 0 embed, 1 attention split, 2 combine, 3 top-1, 4 split + combine
            Spec("D", "uint", "64", "e->d"),  # attention: head dimension (divides 256)
            Spec("LONG_SPLITS", "uint", "1", "e->long_splits"),  # attention: 0 where splits never grow
            Spec("ROPE", "uint", "1", "e->rope"),  # attention: 0 where no rope is fused in (the path compiled out)
        ),
        "decode",
        axes=(IN_AXIS_SCALAR,),
        doc="a batch-1 decode step's embedding gather, attention over a KV cache and top-1 (fp32 arithmetic)",
    ),
    Family(
        "layernorm",
        "elementwise/layernorm.comp",
        None,
        (
            Spec("PASS", "uint", "0", "e->pass"),  # 0: forward; 1: backward
            Spec("CPT", "uint", "4", "e->cols_per_thread"),  # columns per invocation: ceil(D / 256)
            Spec("RESIDUAL", "uint", "0", "e->residual"),  # forward: add R; backward: add GRES
            Spec("ROWS", "uint", "32", "e->rows_per_group"),  # backward: rows per workgroup
            Spec("RMS", "uint", "0", "e->rms"),  # forward: RMSNorm (no mean subtracted, no beta)
        ),
        "layernorm",
        axes=(IN_AXIS_SCALAR,),
        doc="LayerNorm (or RMSNorm) over an fp32 residual stream (a branch added first), forward and backward",
    ),
    Family(
        "optim",
        "elementwise/optim.comp",
        None,
        (),
        "optim",
        axes=(IN_AXIS_SCALAR,),
        doc="AdamW over fp32 parameters, its step and learning rate from the plan's parameter words",
    ),
    Family(
        "train",
        "elementwise/train.comp",
        None,
        (
            # 0 embedding, 1 token table gradient, 2 position table gradient, 3 cross-entropy, 4 column sums,
            # 5 sums of squares, 6 rotary positions on rows, 7 SwiGLU on rows
            Spec("PASS", "uint", "0", "e->pass"),
            Spec("MAX_COLS", "uint", "4", "e->cols_per_thread"),  # token table gradient: ceil(n / 256)
        ),
        "train",
        axes=(IN_AXIS_SCALAR,),
        doc="a training step's embedding and its gradients, cross-entropy and column sums (fp32 arithmetic)",
    ),
)
