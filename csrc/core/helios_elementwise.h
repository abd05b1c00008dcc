/* helios_elementwise.h — the ops between products on device tensors: layout copies,
 * activations and LayerNorm (csrc/core/kernels/elementwise.c). */
#ifndef HELIOS_ELEMENTWISE_H
#define HELIOS_ELEMENTWISE_H

#include "helios_core.h"

/* The ops between products (elementwise.c): tensors only, run once (no timing),
 * synchronously or ordered like hl_matmul_args (wait_value / signal_value). */
/* A layout copy of 16-bit elements (bits: float16 and bfloat16 alike) over a
 * 4-D index space, sizes outermost first; element (i0, i1, i2, i3) is read at
 * src_offset + i0*src_strides[0] + i1*src_strides[1] + i2*src_strides[2] + i3 and
 * written at the same form in dst: the innermost dimension is contiguous on both
 * sides. Every element index must fit in both tensors and below 2^32; src and dst
 * are different memory. Elements of dst the index space does not reach are left
 * as they were (several copies may fill one tensor). */
typedef struct hl_copy_args {
    hl_tensor *src, *dst;
    uint32_t sizes[4];
    uint32_t src_strides[3], dst_strides[3];
    uint32_t src_offset, dst_offset;
    uint64_t wait_value, signal_value;
} hl_copy_args;
hl_status hl_copy_strided(hl_device *dev, const hl_copy_args *args, hl_error *err);

/* y = act(z) (grad NULL) or y = grad * act'(z) (an activation's backward at its
 * input) over n elements of dtype (HL_F16 or HL_BF16), computed in fp32 and
 * rounded once (the product epilogue's activations). y must not be z or grad. */
typedef struct hl_activation_args {
    hl_tensor *z, *grad, *y;
    uint64_t n;
    hl_dtype dtype;
    hl_activation act; /* not HL_ACT_NONE */
    uint64_t wait_value, signal_value;
} hl_activation_args;
hl_status hl_activate(hl_device *dev, const hl_activation_args *args, hl_error *err);

/* LayerNorm over `rows` rows of `d` fp32 elements (a residual stream), gamma and
 * beta fp32 (d); h and the branch r in dtype (HL_F16 or HL_BF16). Forward:
 * v = x (+ r, written to x_out, when r is given), stats[2i], stats[2i+1] = the
 * row's mean and 1/sqrt(biased variance + eps), h = (v - mean) rstd gamma + beta. */
typedef struct hl_layernorm_args {
    hl_tensor *x, *r, *gamma, *beta, *x_out, *h, *stats;
    uint32_t rows, d, rms; /* rms: RMSNorm, the forward only (mean 0, no beta: beta may be NULL) */
    float eps;
    hl_dtype dtype;
    uint64_t wait_value, signal_value;
} hl_layernorm_args;
hl_status hl_layernorm(hl_device *dev, const hl_layernorm_args *args, hl_error *err);
/* Its backward: from grad_h (dtype), the forward's x (the stream it normalised:
 * its x_out where it added a branch) and stats, gx = d loss / d x (+ grad_res, the
 * stream's gradient from above, when given) in fp32 and rounded to gx16 (dtype);
 * partial: per group of HL_LAYERNORM_ROWS rows, the column sums of grad_h * xhat
 * (gamma's gradient) and of grad_h (beta's), (ceil(rows / HL_LAYERNORM_ROWS), 2, d)
 * fp32, summed over the groups by the caller. Eight rows a group: 1024 groups at
 * 8192 rows, a full wave of workgroups on an H100 (at 32 the backward ran 256 groups
 * at 158 us for 8192 x 1024, 3.7x its memory time). */
#define HL_LAYERNORM_ROWS 8u
typedef struct hl_layernorm_bwd_args {
    hl_tensor *grad_h, *x, *stats, *gamma, *grad_res, *gx, *gx16, *partial;
    uint32_t rows, d;
    hl_dtype dtype;
    uint64_t wait_value, signal_value;
} hl_layernorm_bwd_args;
hl_status hl_layernorm_backward(hl_device *dev, const hl_layernorm_bwd_args *args, hl_error *err);

#endif
