/* helios_attention.h — the attention part of the core's C API: variants, the
 * forward and backward calls and their kernels' statistics (attention.c,
 * attention_bwd.c, attention_variant.c). The rest of the API: helios_core.h. */
#ifndef HELIOS_ATTENTION_H
#define HELIOS_ATTENTION_H

#include "helios_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- attention ----------------------------------------------------------- */
/* Attention variant strings: "fa-coop:16x16x16:sg4:wq1:bc32", "fa-scalar". */
void hl_attn_variant_format(const hl_attn_variant *v, char *out, size_t cap);
hl_status hl_attn_variant_parse(const char *s, hl_attn_variant *out, hl_error *err);
/* Validates v for this device, head dimension d and element type (HL_F16 or
 * HL_BF16); the message names the limit. */
hl_status hl_attn_variant_check(const hl_device *dev, const hl_attn_variant *v, uint32_t d, hl_dtype in, hl_error *err);
/* The default for head dimension d, S_kv keys (0: long) and the mask: the
 * measured preference where it fits, else the first coop candidate, else the
 * scalar path (HELIOS_DISABLE_COOP_ATTENTION=1 or no cooperative matrices). */
hl_status hl_attn_variant_default(const hl_device *dev, uint32_t d, uint32_t skv, int causal, hl_dtype in,
                                  hl_attn_variant *out, hl_error *err);
size_t hl_attn_variant_list(const hl_device *dev, uint32_t d, hl_dtype in, hl_attn_variant *out, size_t cap);

/* O = softmax(scale * Q K^T [+ causal mask]) V for batch_heads independent
 * heads; Q and O packed (batch_heads, sq, d), K and V (batch_heads, skv, d),
 * all of `dtype` (HL_F16, or HL_BF16). Causal: key j is seen by query i when j <= i (top-left, needs sq == skv).
 * Operands are host memory or tensors; timing fields as hl_matmul_args. */
/* Where attention operands' heads lie (shaders/attention/attention_layout.glsl); all zero:
 * packed (batch_heads, S, d), each operand its own tensor. qkv_rs > 0: Q, K and V
 * (and the backward's dQ, dK, dV) are rows of qkv_rs elements, (batch, S, qkv_rs)
 * with head h at columns [h*d, (h+1)*d) past q_off / k_off / v_off elements — the
 * rows of a QKV product (qkv_rs 3*heads*d, offsets 0, heads*d, 2*heads*d; one tensor
 * may be Q, K and V, and one dQ, dK and dV); o_rs > 0: O (and dO) rows of o_rs
 * elements, (batch, S, o_rs), head h at column h*d — heads merged for the output
 * projection. heads: per batch element (batch_heads / heads batches); tensors only;
 * strides and offsets multiples of 8 elements. */
typedef struct hl_attn_layout {
    uint32_t heads;
    uint32_t qkv_rs, o_rs;
    uint32_t q_off, k_off, v_off;
} hl_attn_layout;

typedef struct hl_attention_args {
    uint32_t batch_heads, sq, skv, d;
    hl_attn_layout layout; /* zero: packed */
    hl_dtype dtype;        /* HL_F16 (0, the default) or HL_BF16 */
    int causal;
    float scale;
    const void *q, *k, *v;
    void *o; /* NULL: not read back */
    hl_tensor *t_q, *t_k, *t_v, *t_o;
    /* Optional: each query row's log-sum-exp of the scaled scores (fp32, natural
     * log, (batch_heads, sq)), what the backward needs; host memory or a tensor. */
    float *lse;
    hl_tensor *t_lse;
    const hl_attn_variant *variant; /* NULL: the default */
    uint32_t warmup, iters;
    double *samples_ms, *batch_ms;
    uint64_t flush_bytes;
    hl_run_info *info;                 /* optional out */
    uint64_t wait_value, signal_value; /* as hl_matmul_args */
} hl_attention_args;
hl_status hl_attention(hl_device *dev, const hl_attention_args *args, hl_error *err);

/* The flash-attention backward (attention_bwd.c): from the forward's Q, K, V, its
 * output O and log-sum-exp (t_lse as hl_attention writes it) and dO, writes dQ,
 * dK and dV (the input type; shapes as Q, K, V). Tensors only. Two kernels in one
 * submission: dQ (and delta = rowsum(dO * O)) per query block, then dK and dV per
 * key block; a coop variant (the forward's grammar) or the scalar fallback
 * (HELIOS_DISABLE_COOP_ATTENTION_BACKWARD=1, or no cooperative matrices). Timing
 * and ordering fields as hl_attention_args (a sample covers both kernels). */
typedef struct hl_attention_bwd_args {
    uint32_t batch_heads, sq, skv, d;
    hl_attn_layout layout; /* as the forward's: dQ, dK, dV lie as Q, K, V; dO as O */
    hl_dtype dtype;        /* HL_F16 or HL_BF16 */
    int causal;
    float scale;
    hl_tensor *t_q, *t_k, *t_v, *t_o, *t_do, *t_lse;
    hl_tensor *t_dq, *t_dk, *t_dv;
    const hl_attn_variant *variant; /* NULL: the default */
    uint32_t warmup, iters;
    double *samples_ms, *batch_ms;
    uint64_t flush_bytes;
    hl_run_info *info;
    uint64_t wait_value, signal_value;
    /* Measurement only: 1 records the dQ kernel alone, 2 the dK/dV kernel alone
     * (which then reads whatever delta the last full call left); 0 or 3: both. */
    uint32_t passes;
} hl_attention_bwd_args;
hl_status hl_attention_backward(hl_device *dev, const hl_attention_bwd_args *args, hl_error *err);
/* The backward's variants: validation (its shared-memory budget differs), the
 * default and every valid one, as the forward's. */
hl_status hl_attn_bwd_variant_check(const hl_device *dev, const hl_attn_variant *v, uint32_t d, hl_dtype in,
                                    hl_error *err);
hl_status hl_attn_bwd_variant_default(const hl_device *dev, uint32_t d, uint32_t skv, int causal, hl_dtype in,
                                      hl_attn_variant *out, hl_error *err);
size_t hl_attn_bwd_variant_list(const hl_device *dev, uint32_t d, hl_dtype in, hl_attn_variant *out, size_t cap);

/* The same for an attention variant at head dimension d (causal or not). */
hl_status hl_attn_kernel_stats(hl_device *dev, const hl_attn_variant *v, uint32_t d, int causal, hl_dtype in,
                               hl_kernel_stats *out, hl_error *err);
/* The backward's two kernels (out[0]: delta and dQ, out[1]: dK and dV) for a
 * backward variant, as the backward would build them now (HELIOS_DISABLE_ATTENTION_BWD_FOLD read). */
hl_status hl_attn_bwd_kernel_stats(hl_device *dev, const hl_attn_variant *v, uint32_t d, int causal, hl_dtype in,
                                   hl_kernel_stats out[2], hl_error *err);

#ifdef __cplusplus
}
#endif
#endif
