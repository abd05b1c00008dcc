/* matmul.c — one matmul call: upload, poison C, dispatch (optionally many
 * times with GPU timestamps), download, all in one submission; and chains of
 * products on device-resident tensors, recorded into one submission. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "product.h"

#define REDUCE_THREADS 256u  /* matmul_splitk_reduce.comp: 4 elements per invocation */
#define LN_HEAD_THREADS 256u /* matmul_gemv_ln.comp: layernorm_row.glsl's LN_THREADS */
/* Its workgroups per SM, at most: each normalizes the row (about 14 bytes of L2
 * reads per element of it), so the grid is a few per SM stepping over the columns,
 * not a workgroup per 8 columns. On an H200 the 24-layer d=2048 step took 1.488 GPU
 * ms with 3, 1.514-1.563 with 2, 4 or 6, 1.540 with a workgroup per 8 columns
 * (results/h200-norm-head/balanced-grid/). */
#define LN_HEAD_PER_SM 3u
#define LN_HEAD_GRID 128u /* where the device does not report its SM count */

/* The main kernel's pipeline for a variant, layouts and epilogue: its family's
 * shader permutation and specialization constants (shaders/families.py). */
static hl_spec_env spec_env(const hl_device *dev, uint32_t epi, uint32_t act, int trans_a, int trans_b, int batched,
                            uint32_t m) {
    return (hl_spec_env){.subgroup = dev->caps.subgroup_size,
                         .epi = epi,
                         .act = act,
                         .trans_a = (uint32_t)!!trans_a,
                         .trans_b = (uint32_t)!!trans_b,
                         .batched = (uint32_t)!!batched,
                         .gemv_rows = m < HL_GEMV_MAX_ROWS ? m : HL_GEMV_MAX_ROWS};
}

static hl_status variant_pipeline(hl_device *dev, const hl_variant *v, hl_dtype in_dtype, hl_dtype out_dtype,
                                  uint32_t epi, uint32_t act, int trans_a, int trans_b, int batched, uint32_t m,
                                  hl_pipeline **out, hl_error *err) {
    const hl_spec_env e = spec_env(dev, epi, act, trans_a, trans_b, batched, m);
    uint32_t spec[HL_MAX_SPEC];
    if (v->path == HL_PATH_GEMV) {
        hl_spec_matmul_gemv(spec, v, &e);
        return hl_pipeline_get(dev, hl_shader_matmul_gemv(out_dtype, in_dtype), spec, HL_SPEC_MATMUL_GEMV_COUNT,
                               e.subgroup, out, err);
    }
    if (v->path == HL_PATH_COOP2) {
        hl_spec_matmul_coop2(spec, v, &e);
        return hl_pipeline_get(dev, hl_shader_matmul_coop2(v->acc, out_dtype), spec, HL_SPEC_MATMUL_COOP2_COUNT, 0, out,
                               err);
    }
    if (v->path == HL_PATH_COOP) {
        hl_spec_env ec = e;
        ec.shared_bytes = hl_coop_shared_bytes(v); /* the kernel checks its declarations against it */
        hl_spec_matmul_coop(spec, v, &ec);
        return hl_pipeline_get(dev, hl_shader_matmul_coop(v->acc, out_dtype, in_dtype), spec, HL_SPEC_MATMUL_COOP_COUNT,
                               e.subgroup, out, err);
    }
    hl_spec_matmul_scalar(spec, v, &e);
    return hl_pipeline_get(dev, hl_shader_matmul_scalar(out_dtype, in_dtype), spec, HL_SPEC_MATMUL_SCALAR_COUNT, 0, out,
                           err);
}

/* Products keep their 16-bit input type or widen to f32 (the permutations built). */
static int output_ok(hl_dtype in, hl_dtype out) { return out == HL_F32 || out == in; }

hl_status hl_kernel_stats_get(hl_device *dev, const hl_variant *v, hl_dtype in_dtype, hl_dtype out_dtype,
                              hl_kernel_stats *out, hl_error *err) {
    hl_status st = hl_variant_check(dev, v, in_dtype, err);
    if (st != HL_OK) return st;
    if (!output_ok(in_dtype, out_dtype))
        return hl_fail(err, HL_ERR_UNSUPPORTED_DTYPE, "kernel stats: %s inputs give %s or f32 outputs, not %s",
                       hl_dtype_name(in_dtype), hl_dtype_name(in_dtype), hl_dtype_name(out_dtype));
    hl_pipeline *p;
    st = variant_pipeline(dev, v, in_dtype, out_dtype, 0, 0, 0, 0, 0, HL_GEMV_MAX_ROWS, &p, err);
    if (st != HL_OK) return st;
    *out = p->stats;
    return HL_OK;
}

/* ---- one operation: validated, its grid, constants and pipelines ---------- */
typedef hl_product op_plan;

void hl_matmul_sizes(const hl_matmul_args *args, uint64_t *a_bytes, uint64_t *b_bytes, uint64_t *c_bytes) {
    const uint64_t m = args->m, n = args->n, k = args->k, batch = args->batch ? args->batch : 1;
    const uint64_t a_rows = args->trans_a ? k : m, a_cols = args->trans_a ? m : k;
    const uint64_t b_rows = args->trans_b ? n : k, b_cols = args->trans_b ? k : n;
    const uint64_t lda = args->lda ? args->lda : a_cols, ldb = args->ldb ? args->ldb : b_cols;
    const uint64_t sa = batch > 1 ? args->stride_a : 0, sb = batch > 1 ? args->stride_b : 0;
    /* The last batch's last row ends each range. */
    *a_bytes = (m && k) ? (sa * (batch - 1) + (a_rows - 1) * lda + a_cols) * 2 : 0;
    *b_bytes = (n && k) ? (sb * (batch - 1) + (b_rows - 1) * ldb + b_cols) * 2 : 0;
    *c_bytes = batch * m * n * hl_dtype_size(args->out_dtype);
}

/* A product's row pitches (elements; 0 in args: packed) and batch strides. */
typedef struct layout {
    uint64_t batch, a_cols, b_cols, lda, ldb, sa, sb;
    int ta, tb;
} layout;

static layout layout_of(const hl_matmul_args *args) {
    layout l = {.batch = args->batch ? args->batch : 1, .ta = !!args->trans_a, .tb = !!args->trans_b};
    l.a_cols = l.ta ? args->m : args->k;
    l.b_cols = l.tb ? args->k : args->n;
    l.lda = args->lda ? args->lda : l.a_cols;
    l.ldb = args->ldb ? args->ldb : l.b_cols;
    l.sa = l.batch > 1 ? args->stride_a : 0;
    l.sb = l.batch > 1 ? args->stride_b : 0;
    return l;
}

/* Dimensions, types, activation, pitches and the 32-bit indexing bound; the operand sizes into pl. */
static hl_status check_shape(const hl_matmul_args *args, const layout *l, const char *who, hl_product *pl,
                             hl_error *err) {
    const uint64_t m = args->m, n = args->n, k = args->k;
    if (!m || !n || !k)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s %llux%llux%llu: every dimension must be >= 1", who,
                       (unsigned long long)m, (unsigned long long)n, (unsigned long long)k);
    if (args->in_dtype != HL_F16 && args->in_dtype != HL_BF16)
        return hl_fail(err, HL_ERR_UNSUPPORTED_DTYPE, "%s inputs must be f16 or bf16, got %s", who,
                       hl_dtype_name(args->in_dtype));
    if (!output_ok(args->in_dtype, args->out_dtype))
        return hl_fail(err, HL_ERR_UNSUPPORTED_DTYPE, "%s: %s inputs give a %s or f32 output, not %s", who,
                       hl_dtype_name(args->in_dtype), hl_dtype_name(args->in_dtype), hl_dtype_name(args->out_dtype));
    if ((unsigned)args->act > HL_ACT_SILU)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: unknown activation %d", who, (int)args->act);
    if (l->lda < l->a_cols || l->ldb < l->b_cols)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "%s: row pitch lda=%llu / ldb=%llu is below the "
                       "stored rows' %llu / %llu elements",
                       who, (unsigned long long)l->lda, (unsigned long long)l->ldb, (unsigned long long)l->a_cols,
                       (unsigned long long)l->b_cols);
    hl_matmul_sizes(args, &pl->a_bytes, &pl->b_bytes, &pl->c_bytes);
    const uint64_t lim = HL_MAX_OPERAND_ELEMENTS;
    if (pl->a_bytes / 2 >= lim || pl->b_bytes / 2 >= lim || l->batch * m * n >= lim || l->lda >= lim || l->ldb >= lim)
        return hl_fail(err, HL_ERR_TOO_LARGE,
                       "%s %llux%llux%llu (batch %llu): an operand spans 2^32 "
                       "or more elements; kernels index with 32 bits",
                       who, (unsigned long long)m, (unsigned long long)n, (unsigned long long)k,
                       (unsigned long long)l->batch);
    return HL_OK;
}

/* The grid (split-K's parts on z with the batch), the workspace and the reduction's grid. */
static hl_status grid_of(const hl_device *dev, const hl_matmul_args *args, const layout *l, const hl_variant *v,
                         const char *who, hl_product *pl, uint64_t *k_chunk, uint64_t *splits, hl_error *err) {
    const hl_caps *caps = &dev->caps;
    const uint64_t m = args->m, n = args->n, k = args->k, batch = l->batch;
    /* matmul_gemv.comp: a subgroup per column of B as N x K, a lane per one as K x N */
    const int gemv = v->path == HL_PATH_GEMV;
    const uint64_t cols = !gemv ? v->bn : l->tb ? v->threads / caps->subgroup_size : caps->subgroup_size;
    const uint64_t rows = gemv ? HL_GEMV_MAX_ROWS : v->bm;
    const uint64_t gx = (n + cols - 1) / cols, gy = (m + rows - 1) / rows;
    /* Split-K: chunks of whole K slabs; the count actually used may be lower
     * than asked for when K is short. */
    *k_chunk = k;
    *splits = 1;
    if (v->path == HL_PATH_COOP && v->splitk > 1) {
        *k_chunk = ((k + v->splitk - 1) / v->splitk + v->bk - 1) / v->bk * v->bk;
        *splits = (k + *k_chunk - 1) / *k_chunk;
    }
    if (gx > caps->max_group_count[0] || gy > caps->max_group_count[1] || batch * *splits > caps->max_group_count[2])
        return hl_fail(err, HL_ERR_TOO_LARGE,
                       "%s %llux%llux%llu (batch %llu) needs a %llux%llux%llu "
                       "grid; device allows %ux%ux%u",
                       who, (unsigned long long)m, (unsigned long long)n, (unsigned long long)k,
                       (unsigned long long)batch, (unsigned long long)gx, (unsigned long long)gy,
                       (unsigned long long)(batch * *splits), caps->max_group_count[0], caps->max_group_count[1],
                       caps->max_group_count[2]);
    const uint64_t w_elems = *splits > 1 ? batch * *splits * m * n : 4;
    if (w_elems >= HL_MAX_OPERAND_ELEMENTS || w_elems * 4 > caps->max_storage_buffer_range)
        return hl_fail(err, HL_ERR_TOO_LARGE,
                       "%s %llux%llux%llu with splitk=%u needs a %llu-byte "
                       "workspace; kernels index it with 32 bits and the device allows %llu bytes "
                       "per buffer",
                       who, (unsigned long long)m, (unsigned long long)n, (unsigned long long)k, v->splitk,
                       (unsigned long long)(w_elems * 4), (unsigned long long)caps->max_storage_buffer_range);
    pl->w_bytes = w_elems * 4;
    /* The reduction: 4 elements per invocation, a 2-D grid for large products. */
    const uint64_t r_groups = (batch * m * n + 4ull * REDUCE_THREADS - 1) / (4ull * REDUCE_THREADS);
    pl->rgrid[0] = (uint32_t)(r_groups < caps->max_group_count[0] ? r_groups : caps->max_group_count[0]);
    pl->rgrid[1] = (uint32_t)((r_groups + pl->rgrid[0] - 1) / pl->rgrid[0]);
    pl->grid[0] = (uint32_t)gx;
    pl->grid[1] = (uint32_t)gy;
    pl->grid[2] = (uint32_t)(batch * *splits);
    pl->batch = (uint32_t)batch;
    return HL_OK;
}

/* The main kernel's pipeline and, for split-K, the reduction's: with split-K the main
 * kernel writes plain partial products and the reduction applies the epilogue. */
static hl_status pipelines_of(hl_device *dev, const hl_matmul_args *args, const layout *l, const hl_variant *v,
                              uint32_t epi, uint64_t splits, hl_product *pl, hl_error *err) {
    hl_status st = HL_OK;
    hl_pipeline *main_p, *reduce_p = NULL;
    const int split = splits > 1;
    HL_TRY(variant_pipeline(dev, v, args->in_dtype, args->out_dtype, split ? 0 : epi, split ? 0 : (uint32_t)args->act,
                            l->ta, l->tb, l->batch > 1, args->m, &main_p, err));
    if (split) {
        const hl_spec_env e = {.epi = epi, .act = (uint32_t)args->act};
        uint32_t spec[HL_SPEC_MATMUL_SPLITK_REDUCE_COUNT];
        hl_spec_matmul_splitk_reduce(spec, &e);
        HL_TRY(hl_pipeline_get(dev, hl_shader_matmul_splitk_reduce(args->out_dtype), spec,
                               HL_SPEC_MATMUL_SPLITK_REDUCE_COUNT, 0, &reduce_p, err));
    }
    pl->main_pipe = main_p->pipeline;
    pl->reduce_pipe = reduce_p ? reduce_p->pipeline : VK_NULL_HANDLE;
fail:
    return st;
}

static void push_constants(const hl_matmul_args *args, const layout *l, uint64_t k_chunk, uint64_t splits, float alpha,
                           float beta, hl_push_matmul *pc) {
    pc->M = args->m;
    pc->N = args->n;
    pc->K = args->k;
    pc->k_chunk = (uint32_t)k_chunk;
    pc->splits = (uint32_t)splits;
    pc->lda = (uint32_t)l->lda;
    pc->ldb = (uint32_t)l->ldb;
    pc->sa = (uint32_t)l->sa;
    pc->sb = (uint32_t)l->sb;
    pc->batch = (uint32_t)l->batch;
    pc->alpha = alpha;
    pc->beta = beta;
    if (splits > 1) pc->flags |= HL_FLAG_SPLIT;
    if (l->lda % 8 == 0 && l->sa % 8 == 0) pc->flags |= HL_FLAG_A_VEC;
    if (l->ldb % 8 == 0 && l->sb % 8 == 0) pc->flags |= HL_FLAG_B_VEC;
    if (args->n % (args->out_dtype == HL_F32 ? 4 : 8) == 0) pc->flags |= HL_FLAG_C_DIRECT;
}

hl_status hl_product_plan(hl_device *dev, const hl_matmul_args *args, const char *who, hl_product *pl, hl_error *err) {
    hl_status st = HL_OK;
    memset(pl, 0, sizeof *pl);
    const layout l = layout_of(args);
    HL_TRY(check_shape(args, &l, who, pl, err));
    hl_variant v;
    if (args->variant)
        v = *args->variant;
    else { HL_TRY(hl_variant_for_input(dev, args->m, args->n, args->k, l.batch, args->in_dtype, l.tb, &v, err)); }
    HL_TRY(hl_variant_check(dev, &v, args->in_dtype, err));
    const int scale = !!args->scale;
    const float alpha = scale ? args->alpha : 1.0f, beta = scale ? args->beta : 0.0f;
    const int has_bias = args->bias || args->t_bias;
    uint32_t epi = (alpha != 1.0f ? HL_EPI_ALPHA : 0) | (beta != 0.0f ? HL_EPI_BETA : 0) | (has_bias ? HL_EPI_BIAS : 0);
    if (v.path == HL_PATH_COOP2 &&
        (l.ta || l.tb || l.batch > 1 || epi || args->act || l.lda != l.a_cols || l.ldb != l.b_cols)) {
        char vs[HL_VARIANT_STR_MAX];
        hl_variant_format(&v, vs, sizeof vs);
        return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT,
                       "%s: variant %s runs plain packed row-major "
                       "products only; transposes, batches, pitches, bias, activation and alpha/beta "
                       "need a coop or scalar variant",
                       who, vs);
    }
    pl->bias_bytes = has_bias ? (uint64_t)args->n * 4 : 0;
    pl->read_c = beta != 0.0f;
    if (hl_tensors_share(args->t_c, args->t_a) || hl_tensors_share(args->t_c, args->t_b) ||
        hl_tensors_share(args->t_c, args->t_bias))
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "%s: the output tensor is also an input; "
                       "products do not run in place",
                       who);
    HL_TRY(hl_check_tensor(dev, args->t_a, pl->a_bytes, who, "a", err));
    HL_TRY(hl_check_tensor(dev, args->t_b, pl->b_bytes, who, "b", err));
    HL_TRY(hl_check_output_tensor(dev, args->t_c, pl->c_bytes, who, "c", err));
    HL_TRY(hl_check_tensor(dev, args->t_bias, pl->bias_bytes, who, "bias", err));
    uint64_t k_chunk, splits;
    HL_TRY(grid_of(dev, args, &l, &v, who, pl, &k_chunk, &splits, err));
    HL_TRY(pipelines_of(dev, args, &l, &v, epi, splits, pl, err));
    push_constants(args, &l, k_chunk, splits, alpha, beta, &pl->pc.matmul);
    pl->v = v;
    pl->epi = epi;
    return HL_OK;
fail:
    return st;
}

hl_status hl_product_ln_head(hl_device *dev, const hl_matmul_args *args, hl_product *pl, int residual, int rms,
                             float eps, int *applies, hl_error *err) {
    hl_status st = HL_OK;
    const uint32_t sg = dev->caps.subgroup_size;
    *applies = 0;
    if (pl->v.path != HL_PATH_GEMV || pl->reduce_pipe || args->m != 1 || pl->batch > 1 || !args->trans_b ||
        !(pl->pc.matmul.flags & HL_FLAG_B_VEC) || (args->variant && pl->v.threads != LN_HEAD_THREADS) || !sg ||
        LN_HEAD_THREADS % sg)
        return HL_OK;
    hl_variant v = pl->v;
    v.threads = LN_HEAD_THREADS;
    const hl_spec_env e = spec_env(dev, pl->epi, (uint32_t)args->act, args->trans_a, args->trans_b, 0, 1);
    uint32_t spec[HL_SPEC_MATMUL_GEMV_LN_COUNT];
    hl_spec_matmul_gemv_ln(spec, &v, &e);
    hl_pipeline *p;
    HL_TRY(hl_pipeline_get(dev, hl_shader_matmul_gemv_ln(args->out_dtype, args->in_dtype), spec,
                           HL_SPEC_MATMUL_GEMV_LN_COUNT, e.subgroup, &p, err));
    /* As many columns for every subgroup: a grid of at most `most`, no workgroup
     * stepping once more than the others. */
    const uint64_t cols = LN_HEAD_THREADS / sg, gx = (args->n + cols - 1) / cols;
    const uint64_t most = dev->caps.sm_count ? (uint64_t)LN_HEAD_PER_SM * dev->caps.sm_count : LN_HEAD_GRID;
    const uint64_t steps = (gx + most - 1) / most;
    pl->v = v;
    pl->main_pipe = p->pipeline;
    pl->grid[0] = (uint32_t)((gx + steps - 1) / steps);
    pl->grid[1] = pl->grid[2] = 1;
    pl->pc.matmul.flags |= (residual ? HL_FLAG_LN_RESIDUAL : 0u) | (rms ? HL_FLAG_LN_RMS : 0u);
    pl->pc.matmul.ln_eps = eps;
    *applies = 1;
fail:
    return st;
}

void hl_product_record(hl_device *dev, VkCommandBuffer cmd, const hl_product *pl, VkDescriptorSet ds) {
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl->main_pipe);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dev->pipe_layout, 0, 1, &ds, 0, NULL);
    vkCmdPushConstants(cmd, dev->pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, HL_PUSH_BYTES, pl->pc.words);
    vkCmdDispatch(cmd, pl->grid[0], pl->grid[1], pl->grid[2]);
    dev->tel.dispatches++;
    if (!pl->reduce_pipe) return;
    hl_cmd_barrier_on(dev, cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl->reduce_pipe);
    vkCmdDispatch(cmd, pl->rgrid[0], pl->rgrid[1], 1);
    dev->tel.dispatches++;
}

static void record_one(hl_device *dev, const void *ctx, VkDescriptorSet ds) {
    hl_product_record(dev, dev->cmd, ctx, ds);
}

void hl_product_bindings(const hl_matmul_args *o, VkBuffer workspace, hl_binding bufs[HL_BIND_MATMUL_COUNT]) {
    bufs[HL_BIND_MATMUL_A] = hl_tensor_or_scratch(o->t_a, NULL);
    bufs[HL_BIND_MATMUL_B] = hl_tensor_or_scratch(o->t_b, NULL);
    bufs[HL_BIND_MATMUL_C] = hl_tensor_or_scratch(o->t_c, NULL);
    bufs[HL_BIND_MATMUL_WORKSPACE] = (hl_binding){workspace, 0};
    bufs[HL_BIND_MATMUL_BIAS] = o->t_bias ? hl_tensor_or_scratch(o->t_bias, NULL) : (hl_binding){workspace, 0};
}

hl_status hl_matmul(hl_device *dev, const hl_matmul_args *args, hl_error *err) {
    hl_status st = HL_OK;
    const hl_caps *caps = &dev->caps;
    if (args->iters && !args->samples_ms)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "iters > 0 needs a samples buffer");
    if (args->iters && !dev->timestamps_ok)
        return hl_fail(err, HL_ERR_UNSUPPORTED,
                       "device '%s' has no usable timestamps on its "
                       "compute queue",
                       caps->name);
    if (args->iters > HL_MAX_LAUNCHES || args->warmup > HL_MAX_LAUNCHES)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "iters and warmup must be <= %u", HL_MAX_LAUNCHES);
    if ((!args->t_a && !args->a) || (!args->t_b && !args->b))
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "matmul: operands a and b are required");
    op_plan pl;
    const double t_plan = hl_now_ms();
    HL_TRY(hl_product_plan(dev, args, "matmul", &pl, err));
    dev->tel.plan_ms += hl_now_ms() - t_plan;
    if (pl.read_c && !args->t_c && !args->c_in)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "matmul: beta != 0 needs an input C");

    /* Host operands go through the scratch buffers. Without a bias its slot holds
     * the workspace: the shader declares it, never reads it. C is poisoned unless
     * it is an input; a C tensor is never a view (offset 0). */
    const int bias_host = args->bias && !args->t_bias;
    hl_operand ops[HL_BIND_MATMUL_COUNT] = {
        [HL_BIND_MATMUL_A] = {.tensor = args->t_a,
                              .scratch = &dev->buf_a,
                              .upload = args->t_a ? NULL : args->a,
                              .bytes = pl.a_bytes,
                              .slot = HL_BIND_MATMUL_A,
                              .access = HL_ACCESS_READ},
        [HL_BIND_MATMUL_B] = {.tensor = args->t_b,
                              .scratch = &dev->buf_b,
                              .upload = args->t_b ? NULL : args->b,
                              .bytes = pl.b_bytes,
                              .slot = HL_BIND_MATMUL_B,
                              .access = HL_ACCESS_READ},
        [HL_BIND_MATMUL_C] = {.tensor = args->t_c,
                              .scratch = &dev->buf_c,
                              .upload = (pl.read_c && !args->t_c) ? args->c_in : NULL,
                              .download = args->c,
                              .bytes = pl.c_bytes,
                              .poison = !pl.read_c,
                              .slot = HL_BIND_MATMUL_C},
        /* unsplit, the workspace is a placeholder the shader declares and never touches */
        [HL_BIND_MATMUL_WORKSPACE] = {.scratch = &dev->buf_w,
                                      .bytes = pl.w_bytes,
                                      .slot = HL_BIND_MATMUL_WORKSPACE,
                                      .access = pl.reduce_pipe ? HL_ACCESS_WRITE : HL_ACCESS_READ},
        [HL_BIND_MATMUL_BIAS] = {.tensor = args->t_bias,
                                 .scratch = bias_host ? &dev->buf_bias : &dev->buf_w,
                                 .upload = bias_host ? args->bias : NULL,
                                 .bytes = bias_host ? pl.bias_bytes : 16,
                                 .slot = HL_BIND_MATMUL_BIAS,
                                 .access = HL_ACCESS_READ},
    };
    /* (With beta != 0 a repeated product reads the C the previous one wrote:
     * the timing is the same work, the output of one dispatch is what counts.) */
    const hl_exec_timing timing = {args->warmup,   args->iters,      args->flush_bytes, args->samples_ms,
                                   args->batch_ms, args->wait_value, args->signal_value};
    char vs[HL_VARIANT_STR_MAX];
    hl_variant_format(&pl.v, vs, sizeof vs);
    HL_TRY(hl_exec_kernel(dev, ops, HL_BIND_MATMUL_COUNT, record_one, &pl, &timing, vs, args->info, err));
    dev->tel.matmuls++;
    if (pl.v.path != HL_PATH_SCALAR) dev->tel.coop_matmuls++;
    return HL_OK;
fail:
    return st;
}

typedef struct chain_ctx {
    const op_plan *plans;
    const VkDescriptorSet *sets;
    uint32_t n;
} chain_ctx;

static void record_chain(hl_device *dev, const void *ctx, VkDescriptorSet unused) {
    const chain_ctx *c = ctx;
    for (uint32_t i = 0; i < c->n; i++) {
        if (i) hl_compute_barrier(dev);
        hl_product_record(dev, dev->cmd, &c->plans[i], c->sets[i]);
    }
}

hl_status hl_matmul_chain(hl_device *dev, const hl_matmul_args *ops, uint32_t n_ops, uint32_t warmup, uint32_t iters,
                          double *samples_ms, hl_run_info *info, hl_error *err) {
    hl_status st = HL_OK;
    op_plan *plans = NULL;
    VkDescriptorSet *sets = NULL;
    if (!n_ops) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "chain: no operations recorded");
    if (dev->group.open) /* its descriptor sets are the synchronous pool's, its operands not tracked */
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "chain: a chain is a submission of its own; it does not run inside an open group");
    if (n_ops > 4096) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "chain: %u operations; at most 4096", n_ops);
    if (iters > HL_MAX_LAUNCHES || warmup > HL_MAX_LAUNCHES)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "iters and warmup must be <= %u", HL_MAX_LAUNCHES);
    if (iters && !samples_ms) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "iters > 0 needs a samples buffer");
    if (iters && !dev->timestamps_ok)
        return hl_fail(err, HL_ERR_UNSUPPORTED,
                       "device '%s' has no usable timestamps on its "
                       "compute queue",
                       dev->caps.name);
    plans = calloc(n_ops, sizeof *plans);
    sets = calloc(n_ops, sizeof *sets);
    if (!plans || !sets) {
        st = hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
        goto fail;
    }
    uint64_t w_bytes = 16;
    for (uint32_t i = 0; i < n_ops; i++) {
        char who[48];
        snprintf(who, sizeof who, "chain op %u", i);
        if (!ops[i].t_a || !ops[i].t_b || !ops[i].t_c || ops[i].bias) {
            st = hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: chains take tensors only (a, b, c and bias)", who);
            goto fail;
        }
        HL_TRY(hl_product_plan(dev, &ops[i], who, &plans[i], err));
        if (plans[i].w_bytes > w_bytes) w_bytes = plans[i].w_bytes;
    }
    HL_TRY(hl_buffer_reserve(dev, &dev->buf_w, w_bytes, 0, err));
    HL_TRY(hl_descriptor_sets(dev, n_ops, sets, err));
    for (uint32_t i = 0; i < n_ops; i++) {
        hl_binding bufs[HL_BIND_MATMUL_COUNT];
        hl_product_bindings(&ops[i], dev->buf_w.buffer, bufs);
        hl_write_set(dev, sets[i], bufs, HL_BIND_MATMUL_COUNT);
    }
    /* Whatever wrote the tensors before (uploads) is complete: every earlier
     * submission was waited for. Inside the chain, each operation waits for the
     * previous one's writes (a full compute barrier: simple, and the products
     * of a chain usually depend on each other anyway). One sample is the whole chain. */
    const chain_ctx cc = {plans, sets, n_ops};
    hl_exec x = {
        .record = record_chain, .ctx = &cc, .warmup = warmup, .iters = iters, .no_batch = 1, .samples_ms = samples_ms};
    HL_TRY(hl_exec_run(dev, &x, err));
    dev->tel.chains++;
    dev->tel.chain_ops += n_ops;
    dev->tel.matmuls += n_ops;
    for (uint32_t i = 0; i < n_ops; i++)
        if (plans[i].v.path != HL_PATH_SCALAR) dev->tel.coop_matmuls++;
    hl_variant_format(&plans[n_ops - 1].v, dev->tel.last_variant, sizeof dev->tel.last_variant);
    if (info) {
        info->gpu_ms = x.gpu_ms;
        hl_variant_format(&plans[n_ops - 1].v, info->variant, sizeof info->variant);
    }
    free(plans);
    free(sets);
    return HL_OK;
fail:
    if (dev->device && st != HL_ERR_INTERRUPTED) vkDeviceWaitIdle(dev->device);
    free(plans);
    free(sets);
    return st;
}
