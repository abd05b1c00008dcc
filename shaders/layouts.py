"""The contracts between the host and the shaders, each declared once: every kernel
family's push-constant block, the persistent runs' table row, and the flag and
epilogue bits both sides test.

`cmake/gen_layouts.py` (run by `cmake/gen_kernels.py`) generates from this table:

- `hl_layouts.h` for C: `hl_push_<name>` per block (a union of named views where a
  block's words mean different things per pass), `hl_push` (every block over the
  HL_PUSH_WORDS words the pipeline layout pushes), `hl_persist_row`, the constants
  as `HL_<NAME>`, and each word's offset checked at compile time;
- `push_<name>.glsl` with the block as the shaders declare it, `persist_row.glsl`
  with the row's accessors and `decode_split.glsl` with the split rule's macros,
  which the shaders include where they declare them.

A new push word: a Word here (its block's shaders then see it by name) and its
write on the host (`pc.<block>.<word>`). tests/test_layouts.py reads every compiled
kernel's push block back from its SPIR-V and fails where it differs from this table.
"""

from __future__ import annotations

from kernel_types import Const, Push, Row, Rule, View, Word  # noqa: E402  (shaders/, beside this file)

_U = Word  # a uint word

MATMUL = Push(
    "matmul",
    "every product kernel (matmul_common.glsl), the split-K reduction and the norm-headed product",
    "Params",
    "p",
    (
        _U("M"),
        _U("N"),
        _U("K"),
        _U("flags", doc="FLAG_* bits, computed on the host from the shapes"),
        _U("k_chunk", doc="split-K: K elements per split (a multiple of the tile's K); K without split"),
        _U("splits", doc="split-K: number of partial products per batch in the workspace (1: none)"),
        _U("lda", doc="row pitch (elements) of A as stored"),
        _U("ldb", doc="row pitch (elements) of B as stored"),
        _U("sa", doc="elements between batches of A (0: one A broadcast to every batch)"),
        _U("sb", doc="elements between batches of B (0: one B broadcast to every batch)"),
        _U("batch", doc="products in this dispatch (grid z = batch * splits)"),
        Word("alpha", "float"),
        Word("beta", "float"),
        Word("ln_eps", "float", "matmul_gemv_ln.comp: its LayerNorm's epsilon", only="LN_HEAD"),
    ),
    local_under="PERSIST",
)

# The attention forward's block and the backward's: rows of each side, the scale, and
# where the operands' rows lie (attention_layout.glsl; hl_attn_layout on the host).
_HEADS = (
    _U("heads", doc="B * H"),
    _U("sq", doc="query rows per head"),
    _U("skv", doc="key rows per head"),
    Word("scale_log2", "float", "scale * log2(e): scores go through exp2"),
)
_ROWS = (
    _U("nh", doc="heads per batch element (rows layouts)"),
    _U("q_off", doc="where Q (dQ) starts in its rows"),
    _U("k_off", doc="where K (dK) starts in its rows"),
    _U("v_off", doc="where V (dV) starts in its rows"),
)
ATTENTION = Push("attention", "the attention forward (coop and scalar)", "Push", "p", _HEADS + _ROWS)
ATTENTION_BWD = Push(
    "attention_bwd",
    "the attention backward's kernels (dQ, dK and dV; scalar)",
    "Push",
    "p",
    _HEADS + (Word("scale", "float", "dQ and dK carry it (d(scale * Q K^T))"),) + _ROWS,
)

COPY_STRIDED = Push(
    "copy_strided",
    "a strided copy of up to 4 dimensions (copy_strided.comp), outermost first",
    "Params",
    "p",
    tuple(_U(f"size{i}") for i in range(4))
    + tuple(_U(f"src_s{i}", doc="element strides of dimensions 0-2 (dimension 3: 1)") for i in range(3))
    + tuple(_U(f"dst_s{i}") for i in range(3))
    + (
        _U("src_off", doc="elements from the source binding's start"),
        _U("dst_off", doc="elements from the destination binding's start"),
        _U("vec", doc="1: eight elements per invocation"),
    ),
)

ACTIVATION = Push(
    "activation",
    "elementwise activations and their gradients (activation.comp)",
    "Params",
    "p",
    (
        _U("n", doc="elements"),
        _U("vec", doc="1: 8 elements an invocation in 16-byte moves (n % 8 == 0, 16-byte aligned tensors)"),
    ),
)

LAYERNORM = Push(
    "layernorm",
    "LayerNorm over an fp32 residual stream, both directions (layernorm.comp)",
    "Params",
    "p",
    (_U("rows"), _U("d"), Word("eps", "float"), _U("vec", doc="1: the 4-column path")),
)

# decode.comp's passes read one block under three meanings: the shader names the words
# by position (n, slot, ...), the host writes the pass's view.
_SLOT = "a parameter word's index (PARAMS)"
DECODE = Push(
    "decode",
    "a decode step's ops besides products and norms (decode.comp): the pass's view",
    "Params",
    "p",
    (
        _U("n", doc="embed: d; attention, rope: heads; top-1, swiglu: elements"),
        _U("slot", doc="the parameter word read (token for embed, pos for attention) or written (top-1)"),
        _U("slot2", doc="embed: the position's word; attention, rope: KV heads; top-1: elements a workgroup"),
        _U("rows", doc="embed: token rows; attention: cache rows (positions); rope: the table's positions"),
        _U("rows2", doc="embed: position rows; attention: splits in WORK per head"),
        Word("scale", "float", "attention: 1 / sqrt(D)"),
        _U("fit", doc="attention: ATT_FIT (decode_attention.glsl's att_split_keys); embed: a 16-bit token table"),
        _U("rope", doc="attention: 1 where it rotates q and the new k by TAB's row at pos"),
    ),
    views=(
        View(
            "embed",
            "PASS 0: the token's and the position's rows summed",
            (
                _U("d", doc="the rows' width"),
                _U("token_slot", doc=_SLOT),
                _U("pos_slot", doc=_SLOT),
                _U("token_rows", doc="rows of the token table"),
                _U("pos_rows", doc="rows of the position table"),
                None,
                _U("table16", doc="1: the token table holds 16-bit values (the pass's dtype), else fp32"),
            ),
        ),
        View(
            "attention",
            "PASSES 1, 2 and 4: one query row over the cache",
            (
                _U("heads"),
                _U("pos_slot", doc=_SLOT),
                _U("kv_heads", doc="heads of K and V (grouped-query attention: heads / kv_heads share one)"),
                _U("cache_rows", doc="positions the caches hold"),
                _U("splits", doc="splits a head in WORK"),
                Word("scale", "float", "1 / sqrt(D)"),
                _U("fit", doc="ATT_FIT (decode_attention.glsl's att_split_keys)"),
                _U("rope", doc="1: q and the new k rotated by TAB's row at pos (the rope op fused: plan_steps.c)"),
            ),
        ),
        View(
            "top1",
            "PASS 3: the largest of n fp32 values",
            (_U("n", doc="elements"), _U("slot", doc=_SLOT), _U("chunk", doc="elements a workgroup")),
        ),
        View(
            "rope",
            "PASS 5: rotary positions on the QKV row's q and k heads, in place",
            (
                _U("heads", doc="q heads"),
                _U("pos_slot", doc=_SLOT),
                _U("kv_heads", doc="k heads, after the q heads in the row"),
                _U("rows", doc="positions the cos/sin table holds"),
            ),
        ),
        View("swiglu", "PASS 6: silu(g) u of the row [g | u]", (_U("n", doc="elements of g (and of u, and out)"),)),
    ),
)

PERSIST = Push(
    "persist",
    "a persistent run (matmul_gemv_persist.comp): its members' words are table rows",
    "PersistPush",
    "pp",
    (
        _U("members", doc="in the run, at most PERSIST_MEMBERS"),
        _U("fault_word", doc="the PARAMS word a grid barrier that gave up sets"),
        _U(
            "trace_word",
            doc="PERSIST_TRACE: the COUNTERS word where the run's stamps start (plan_persist.c copies them out)",
        ),
    ),
)

OPTIM = Push(
    "optim",
    "AdamW over fp32 parameters (optim.comp)",
    "Params",
    "p",
    (
        _U("n", doc="parameters"),
        _U("step_slot", doc="the parameter word holding the step count t (1 on the first step)"),
        _U("lr_slot", doc="the parameter word holding the learning rate's float32 bits"),
        _U("copy", doc="1: write the 16-bit copy P16"),
        Word("beta1", "float"),
        Word("beta2", "float"),
        Word("eps", "float"),
        Word("weight_decay", "float", "decoupled (AdamW's): p *= 1 - lr weight_decay"),
        _U("clip_slot", doc="the word holding the gradients' squared norm's float32 bits (where max_norm > 0)"),
        Word("max_norm", "float", "> 0: g scaled by min(1, max_norm / (norm + 1e-6)), torch's clip_grad_norm_"),
        _U("guard", doc="1: no update at all where the squared norm's word is not finite"),
    ),
)

TRAIN = Push(
    "train",
    "a training step's embedding, its gradients, cross-entropy and column sums (train.comp)",
    "Params",
    "p",
    (
        _U("rows", doc="token rows (batch x seq); column sums: rows summed"),
        _U("n", doc="elements a row: the model width, the classes, the columns summed"),
        _U("seq", doc="positions: row r is position r % seq"),
        _U("table_rows", doc="the token table's rows (the vocabulary)"),
        _U("ld", doc="column sums: elements between rows of the source"),
        _U("off", doc="column sums: elements from the source binding's start"),
        _U("accumulate", doc="1: add to what the destination holds"),
        Word("scale", "float", "cross-entropy: the gradient's factor (1 / rows for a mean); column sums: the sum's"),
        _U("dst_off", doc="column sums, sums of squares: elements from the destination binding's start"),
        _U("flags", doc="embedding: 1 a 16-bit token table (IN's type), 2 no position table"),
    ),
)

PUSH_LAYOUTS = (MATMUL, ATTENTION, ATTENTION_BWD, COPY_STRIDED, ACTIVATION, LAYERNORM, DECODE, PERSIST, OPTIM, TRAIN)

# Each family's block (a family absent here pushes nothing its shader reads).
FAMILY_PUSH = {
    "matmul_coop": "matmul",
    "matmul_coop2": "matmul",
    "matmul_scalar": "matmul",
    "matmul_gemv": "matmul",
    "matmul_gemv_ln": "matmul",
    "matmul_splitk_reduce": "matmul",
    "matmul_gemv_persist": "persist",
    "attention_coop": "attention",
    "attention_scalar": "attention",
    "attention_bwd_dq": "attention_bwd",
    "attention_bwd_dkdv": "attention_bwd",
    "attention_bwd_scalar": "attention_bwd",
    "copy_strided": "copy_strided",
    "activation": "activation",
    "layernorm": "layernorm",
    "decode": "decode",
    "optim": "optim",
    "train": "train",
}

# A persistent run's member: a row of the run's table (TABLE binding), its kind in the
# flags word both views share.
PERSIST_ROW = Row(
    "persist",
    "a persistent run's member (plan_persist.c writes it, persist_runtime.glsl's persist_member reads it)",
    9,
    "table",
    (
        View(
            "product",
            "a one-row product on the matrix-vector kernel, B as N x K",
            (
                _U("n", doc="N"),
                _U("k", doc="K"),
                _U("flags", doc="the product's FLAG_* bits, FLAG_PERSIST_LN with a norm head"),
                _U("ldb", doc="B's row pitch"),
                _U("epi", doc="EPI_* bits"),
                _U("act", doc="ACT_*"),
                Word("ln_eps", "float", "the norm head's epsilon (0 without one)"),
                None,  # the attention's words past the product's, zero in a product's row
                None,
            ),
        ),
        View(
            "attention",
            "a decode attention (decode_attention.glsl)",
            (
                _U("heads"),
                _U("rows", doc="cache rows (positions)"),
                _U("flags", doc="FLAG_PERSIST_ATTN, FLAG_PERSIST_ROPE where it rotates q and the new k"),
                _U("splits", doc="splits a head in the partials"),
                _U("pos_slot", doc="its position's parameter word"),
                Word("scale", "float", "1 / sqrt(D)"),
                _U("counters", doc="its first arrival counter (a word a head)"),
                _U("fit", doc="ATT_FIT"),
                _U("kv_heads", doc="heads of K and V"),
            ),
        ),
    ),
)

CONSTS = (
    Const("FLAG_A_VEC", 1, "A's rows and batches are 16-byte aligned", "push_matmul"),
    Const("FLAG_B_VEC", 2, "B's rows and batches are 16-byte aligned", "push_matmul"),
    Const("FLAG_C_DIRECT", 4, "C rows aligned for cooperative stores", "push_matmul"),
    Const("FLAG_SPLIT", 8, "write fp32 partial products to the workspace, not C", "push_matmul"),
    Const("FLAG_LN_RESIDUAL", 16, "the norm head adds its branch R to X", "push_matmul", only="LN_HEAD"),
    Const("FLAG_LN_RMS", 128, "the norm head is RMSNorm: no mean subtracted, no beta", "push_matmul", only="LN_HEAD"),
    Const(
        "FLAG_A_SWIGLU",
        256,
        "one row of A is silu(g) u of the bound row [g | u] of 2K, rounded to A's type",
        "push_matmul",
    ),
    Const("FLAG_PERSIST_LN", 32, "a run member's A is its LayerNorm head's output (else A is bound)", "persist_row"),
    Const("FLAG_PERSIST_ATTN", 64, "a run member is a decode attention (decode_attention.glsl)", "persist_row"),
    Const("FLAG_PERSIST_ROPE", 512, "a run's attention rotates q and the new k by its table R", "persist_row"),
    Const(
        "FLAG_PERSIST_GLU",
        1024,
        "a run member's columns in pairs (gate n, up n + N/2), silu(gate) up also written to its row GLU: the "
        "next member's SwiGLU as A, computed once",
        "persist_row",
    ),
    # HELIOS_PLAN_TRACE's words in a plan's parameter buffer (plan_persist.c lays them out,
    # persist_runtime.glsl's stamp writes them, helios/plan_trace.py reads them).
    Const("TRACE_HEADER", 4, "a run's trace header words: TRACE_MEMBERS, TRACE_GRID, two unused", "persist_row"),
    Const("TRACE_MEMBERS", 0, "the header word of the run's members", "persist_row"),
    Const("TRACE_GRID", 1, "the header word of the run's workgroups", "persist_row"),
    Const(
        "TRACE_STAMP",
        12,
        "a member and workgroup's trace words: stamp k's low and high words at 2k and 2k + 1 (k: 0 before "
        "the wait, 1 after it, 2 after the work, 3 its inputs in, 4 its first column or split done; 3 and 4 "
        "are 0 where the workgroup had none), then TRACE_N and TRACE_K",
        "persist_row",
    ),
    Const("TRACE_N", 10, "the stamp word of a product's N (TRACE_ATTENTION: an attention)", "persist_row"),
    Const("TRACE_K", 11, "the stamp word of a product's K (an attention: its heads)", "persist_row"),
    Const("TRACE_ATTENTION", 0xFFFFFFFF, "TRACE_N of an attention member", "persist_row"),
    # A plan top-1's counter words (decode.c sizes them, decode.comp's PASS 3 writes them).
    Const("TOP1_ARRIVALS", 0, "top-1: the counter word its workgroups arrive on", "push_decode"),
    Const("TOP1_PICKS", 1, "top-1: the first counter word of the workgroups' picks", "push_decode"),
    Const("TOP1_PICK", 2, "top-1: words a workgroup's pick (its value's bits, then its index)", "push_decode"),
    Const("EPI_ALPHA", 1, "the epilogue scales by alpha", "push_matmul"),
    Const("EPI_BETA", 2, "the epilogue adds beta * C", "push_matmul"),
    Const("EPI_BIAS", 4, "the epilogue adds the bias (the one term a run member may have)", "push_matmul"),
)

# How a decode attention splits a head's keys (shaders/families.py's DECODE_SPLIT sizes;
# decode_attention.glsl runs the splits, decode.c and plan.c count them on the host).
# fit: the splits of a head that one pass of a persistent run's grid holds (ATT_FIT);
# past fit splits of DECODE_SPLIT_SHORT keys the position's keys spread over fit splits,
# so that one pass still holds every head's splits, up to long_keys a split.
SPLIT_RULES = (
    Rule(
        "decode_split_held", "keys DECODE_SPLIT_PASSES passes of kpp keys hold", ("kpp",), "DECODE_SPLIT_PASSES * kpp"
    ),
    Rule(
        "decode_split_long_keys",
        "keys a split holds at most: what the passes hold, at least DECODE_SPLIT_SHORT, at most DECODE_SPLIT_LONG",
        ("held",),
        "held < DECODE_SPLIT_SHORT ? DECODE_SPLIT_SHORT : held < DECODE_SPLIT_LONG ? held : DECODE_SPLIT_LONG",
    ),
    Rule(
        "decode_split_keys",
        "keys a split at position pos: DECODE_SPLIT_SHORT, or pos + 1 over fit splits (long_keys where fit is 0)",
        ("pos", "fit", "long_keys"),
        "pos / DECODE_SPLIT_SHORT < fit ? DECODE_SPLIT_SHORT"
        " : fit == 0u || (pos + fit) / fit > long_keys ? long_keys : (pos + fit) / fit",
    ),
    Rule(
        "decode_split_of",
        "the split holding position pos, of keys a split (its splits: this + 1)",
        ("pos", "keys"),
        "pos / keys",
    ),
)
