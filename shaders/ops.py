"""Every operation a plan records, declared once: its name (the `Plan` method and the
op dict's "kind"), its C kind and argument struct, each argument with its type, and
the core function that makes it a step.

`cmake/gen_ops.py` (run by `cmake/gen_kernels.py`) generates from this table:

- `hl_plan_ops.h` for the core's API: the argument structs of the ops declared here
  (`declare=True`), the `hl_plan_kind` enum, the `hl_plan_op` union, and the
  argument schema (`hl_plan_op_schemas`: each argument's key, type, whether it may be
  left out, and where it lies in `hl_plan_op`);
- `plan_ops_table.c`: the schema table, the kinds' names, and `hl_plan_op_step`,
  which calls each op's step function (one signature for all:
  `(dev, args, n_params, who, step, err)`).

The binding parses an op dict by its schema (`csrc/python/plan_ops.c`), and Python
sees the table as `_helios.PLAN_OPS`, which `helios.Plan` builds its dicts against.
A new plan operation: a PlanOp here, its step function (the core) and its shader,
and its method on `helios.Plan`.
"""

from __future__ import annotations

from kernel_types import Arg, PlanOp  # noqa: E402  (shaders/, beside this file)

_T, _U, _F, _D = "tensor", "u32", "f32", "dtype"
_SLOT = "a parameter word's index (0..params-1)"
# A norm's arguments after its input and weights: outputs, the branch added first, sizes.
_NORM_REST = (
    Arg("h", _T),
    Arg("stats", _T),
    Arg("r", _T, optional=True),
    Arg("x_out", _T, optional=True),
    Arg("rows", _U),
    Arg("d", _U),
    Arg("eps", _F),
    Arg("dtype", _D),
)

PLAN_OPS = (
    # Its arguments are a product's (csrc/python/gemm.c parses them; helios_core.h's struct).
    PlanOp(
        "matmul", "HL_PLAN_MATMUL", "hl_matmul_args", "matmul", "hl_plan_matmul_step", "a product", (), product=True
    ),
    PlanOp(
        "layernorm",
        "HL_PLAN_LAYERNORM",
        "hl_layernorm_args",
        "layernorm",
        "hl_plan_layernorm_step",
        "LayerNorm's forward (helios_core.h's struct; wait and signal values ignored)",
        (Arg("x", _T), Arg("gamma", _T), Arg("beta", _T)) + _NORM_REST,
    ),
    PlanOp(
        "rmsnorm",
        "HL_PLAN_RMSNORM",
        "hl_layernorm_args",
        "rmsnorm",
        "hl_plan_rmsnorm_step",
        "RMSNorm's forward: LayerNorm's with no mean subtracted and no beta, h = v rstd gamma (Llama's)",
        (Arg("x", _T), Arg("gamma", _T)) + _NORM_REST,
    ),
    PlanOp(
        "embed",
        "HL_PLAN_EMBED",
        "hl_embed_args",
        "embed",
        "hl_embed_step",
        "out[c] = tokens[params[token_slot] * d + c] + positions[params[pos_slot] * d + c]: fp32 tables "
        "(token_rows x d in dtype, pos_rows x d) and fp32 output (d); without positions (pos_rows 0), the "
        "token's row",
        (
            Arg("tokens", _T),
            Arg("positions", _T, optional=True),
            Arg("out", _T),
            Arg("d", _U),
            Arg("token_rows", _U),
            Arg("pos_rows", _U),
            Arg("token_slot", _U, _SLOT),
            Arg("pos_slot", _U, _SLOT),
            Arg("dtype", _D, "the token table's: float32, or float16 / bfloat16 (widened exactly)"),
        ),
        declare=True,
    ),
    PlanOp(
        "attention_decode",
        "HL_PLAN_ATTN_DECODE",
        "hl_attn_decode_args",
        "attn",
        "hl_attn_decode_step",
        "one query row per head against a KV cache, the new position's K and V appended: qkv is the row "
        "[q | k | v] (q: heads x head_dim, k and v: kv_heads x head_dim, dtype), k_cache and v_cache max_len "
        "rows of kv_heads x head_dim (dtype), p = params[pos_slot] < max_len the new position; out (heads x "
        "head_dim, dtype) = softmax(q K[0..p]^T scale) V[0..p] per head, query head h on KV head "
        "h / (heads / kv_heads). head_dim divides 256 (8..256)",
        (
            Arg("qkv", _T),
            Arg("k_cache", _T),
            Arg("v_cache", _T),
            Arg("out", _T),
            Arg("heads", _U),
            Arg("kv_heads", _U, "heads of K and V; divides heads"),
            Arg("head_dim", _U),
            Arg("max_len", _U),
            Arg("pos_slot", _U, _SLOT),
            Arg("scale", _F),
            Arg("dtype", _D),
        ),
        declare=True,
    ),
    PlanOp(
        "rope",
        "HL_PLAN_ROPE",
        "hl_rope_args",
        "rope",
        "hl_rope_step",
        "rotary positions on the q and k heads of the row qkv (as attention_decode's, dtype), in place, at "
        "p = params[pos_slot] < rows: each head's pair (i, i + head_dim/2) turned by the angle whose cos "
        "and sin are table[p, i] and table[p, head_dim/2 + i] (fp32, rows x head_dim; Llama's rotate_half)",
        (
            Arg("qkv", _T),
            Arg("table", _T),
            Arg("heads", _U),
            Arg("kv_heads", _U),
            Arg("head_dim", _U),
            Arg("rows", _U),
            Arg("pos_slot", _U, _SLOT),
            Arg("dtype", _D),
        ),
        declare=True,
    ),
    PlanOp(
        "swiglu",
        "HL_PLAN_SWIGLU",
        "hl_swiglu_args",
        "swiglu",
        "hl_swiglu_step",
        "out[i] = silu(x[i]) x[n + i] for i < n: the row x = [gate | up] (2n, dtype) into out (n, dtype)",
        (Arg("x", _T), Arg("out", _T), Arg("n", _U), Arg("dtype", _D)),
        declare=True,
    ),
    PlanOp(
        "adamw",
        "HL_PLAN_ADAMW",
        "hl_adamw_args",
        "adamw",
        "hl_adamw_step",
        "torch.optim.AdamW's update of n fp32 parameters p with their moments m and v from the fp32 "
        "gradient g, at step t = params[step_slot] with the learning rate whose float32 bits are "
        "params[lr_slot]; copy (dtype, optional): p rounded to 16 bits, what the products read",
        (
            Arg("p", _T),
            Arg("m", _T),
            Arg("v", _T),
            Arg("g", _T),
            Arg("copy", _T, optional=True),
            Arg("n", _U),
            Arg("step_slot", _U, _SLOT),
            Arg("lr_slot", _U, _SLOT),
            Arg("beta1", _F),
            Arg("beta2", _F),
            Arg("eps", _F),
            Arg("weight_decay", _F),
            Arg("dtype", _D, "the copy's type"),
        ),
        declare=True,
    ),
    PlanOp(
        "top1",
        "HL_PLAN_TOP1",
        "hl_top1_args",
        "top1",
        "hl_top1_step",
        "params[slot] = the index of the largest of x's n fp32 values (the first; NaN largest)",
        (Arg("x", _T), Arg("n", _U), Arg("slot", _U, _SLOT)),
        declare=True,
    ),
)
