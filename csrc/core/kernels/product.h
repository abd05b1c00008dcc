/* product.h — a product planned once and recorded into any command buffer: what
 * matmul.c's calls and chains and plan.c's replayable plans share. */
#ifndef HELIOS_PRODUCT_H
#define HELIOS_PRODUCT_H

#include "internal.h"

/* One product, validated: its variant, grid, push constants and pipelines. */
typedef struct hl_product {
    hl_variant v;
    uint32_t grid[3], rgrid[2];
    hl_push pc;                        /* pc.matmul */
    VkPipeline main_pipe, reduce_pipe; /* reduce: split-K only */
    uint64_t a_bytes, b_bytes, c_bytes, w_bytes, bias_bytes;
    int read_c;   /* beta != 0: C is an input */
    uint32_t epi; /* EPI_* bits of the main kernel's epilogue */
    uint32_t batch;
} hl_product;

hl_status hl_product_plan(hl_device *dev, const hl_matmul_args *args, const char *who, hl_product *pl, hl_error *err);
/* The main dispatch, and for split-K the reduction behind a barrier, into cmd. */
void hl_product_record(hl_device *dev, VkCommandBuffer cmd, const hl_product *pl, VkDescriptorSet ds);
/* The bindings of a product on tensors (a, b, c, the workspace, the bias or the
 * workspace in its place). */
void hl_product_bindings(const hl_matmul_args *o, VkBuffer workspace, hl_binding bufs[HL_BIND_MATMUL_COUNT]);
/* A one-row product on the matrix-vector kernel, B as N x K in whole 16-byte words,
 * with the LayerNorm that makes its A as the kernel's head (matmul_gemv_ln.comp,
 * bindings HL_BIND_MATMUL_LN_*): pl's pipeline, grid and push constants moved to it
 * (residual: the norm adds its branch; eps in pc.matmul.ln_eps). *applies 0, pl as it
 * was, for a product the head cannot carry (another path, split-K, a batch, B as
 * K x N or not in whole words, a chosen variant of another workgroup size). */
hl_status hl_product_ln_head(hl_device *dev, const hl_matmul_args *args, hl_product *pl, int residual, int rms,
                             float eps, int *applies, hl_error *err);

#endif
