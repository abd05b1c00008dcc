/* plan_steps.c — the step functions of products and LayerNorm (shaders/ops.py names
 * each op's; the decode ops' are decode.c's), and the fusion of a one-row LayerNorm
 * into the product that reads its output. plan.c records the steps. */
#include <stdio.h>
#include <string.h>

#include "plan_ops.h"

#define GEMV_LN_MAX 4096u /* a fused norm's widest row: matmul_gemv_ln_head.glsl's LN_THREADS x 4 x LN_GROUPS */

/* A product as a step: its main dispatch and, for split-K, the sum behind a barrier. */
hl_status hl_plan_matmul_step(hl_device *dev, const hl_matmul_args *o, uint32_t n_params, const char *who,
                              hl_plan_step *s, hl_error *err) {
    hl_status st = HL_OK;
    if (!o->t_a || !o->t_b || !o->t_c || o->bias || o->c_in || o->signal_value)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: plans take tensors only (a, b, c and bias)", who);
    hl_product pl;
    HL_TRY(hl_product_plan(dev, o, who, &pl, err));
    memset(s, 0, sizeof *s);
    s->product = pl;
    s->n_dispatch = pl.reduce_pipe ? 2 : 1;
    s->pipe[0] = pl.main_pipe;
    s->pipe[1] = pl.reduce_pipe;
    memcpy(s->grid[0], pl.grid, sizeof pl.grid);
    s->grid[1][0] = pl.rgrid[0];
    s->grid[1][1] = pl.rgrid[1];
    s->grid[1][2] = 1;
    s->pc[0] = s->pc[1] = pl.pc;
    s->n_binds = HL_BIND_MATMUL_COUNT;
    s->work_slot = HL_BIND_MATMUL_WORKSPACE;
    s->params_slot = -1;
    s->param_write = -1;
    s->work_bytes = pl.w_bytes;
    const hl_tensor *reads[4] = {o->t_a, o->t_b, o->t_bias, pl.read_c ? o->t_c : NULL};
    memcpy(s->reads, reads, sizeof reads);
    s->writes[0] = o->t_c;
    hl_tensor *keep[4] = {o->t_a, o->t_b, o->t_c, o->t_bias};
    memcpy(s->keep, keep, sizeof keep);
fail:
    return st;
}

hl_status hl_plan_layernorm_step(hl_device *dev, const hl_layernorm_args *a, uint32_t n_params, const char *who,
                                 hl_plan_step *s, hl_error *err) {
    hl_status st = HL_OK;
    hl_dispatch_plan pl;
    hl_operand ops[HL_BIND_LAYERNORM_COUNT];
    int vec;
    HL_TRY(hl_layernorm_prepare(dev, a, &pl, ops, &vec, err));
    memset(s, 0, sizeof *s);
    s->n_dispatch = 1;
    s->pipe[0] = pl.pipe;
    s->grid[0][0] = pl.grid[0];
    s->grid[0][1] = pl.grid[1];
    s->grid[0][2] = 1;
    s->pc[0] = pl.pc;
    s->n_binds = HL_BIND_LAYERNORM_COUNT;
    for (uint32_t i = 0; i < HL_BIND_LAYERNORM_COUNT; i++) s->binds[i] = hl_tensor_or_scratch(ops[i].tensor, NULL);
    s->work_slot = s->params_slot = s->param_write = -1;
    const hl_tensor *reads[4] = {a->x, a->r, a->gamma, a->beta};
    memcpy(s->reads, reads, sizeof reads);
    const hl_tensor *writes[3] = {a->h, a->stats, a->x_out};
    memcpy(s->writes, writes, sizeof writes);
    hl_tensor *keep[7] = {a->x, a->r, a->gamma, a->beta, a->h, a->stats, a->x_out};
    memcpy(s->keep, keep, sizeof keep);
fail:
    return st;
}

/* RMSNorm: LayerNorm's forward with no mean subtracted and no beta (layernorm.comp's RMS). */
hl_status hl_plan_rmsnorm_step(hl_device *dev, const hl_layernorm_args *a, uint32_t n_params, const char *who,
                               hl_plan_step *s, hl_error *err) {
    hl_layernorm_args rms = *a;
    rms.rms = 1;
    rms.beta = NULL;
    return hl_plan_layernorm_step(dev, &rms, n_params, who, s, err);
}

/* A LayerNorm (or RMSNorm) of one row followed by the one-row product that reads its output, on
 * the matrix-vector kernel: one dispatch, every workgroup normalizing the row itself
 * as the kernel's head (matmul_gemv_ln.comp), workgroup 0 writing the norm's outputs;
 * the norm's step then records nothing. Rows of a multiple of 8 elements up to
 * GEMV_LN_MAX, fp32 tensors on 16 bytes and 16-bit ones on 8, and the product's own
 * conditions (hl_product_ln_head); anything else, or
 * HELIOS_DISABLE_PLAN_NORM_FUSION=1, keeps the two steps. */
hl_status hl_plan_fuse_norm(hl_device *dev, const hl_plan_op *op, hl_plan_step *norm_s, hl_plan_step *s,
                            hl_error *err) {
    hl_status st = HL_OK;
    const int rms = op[0].kind == HL_PLAN_RMSNORM;
    const hl_layernorm_args *a = rms ? &op[0].rmsnorm : &op[0].layernorm;
    const hl_matmul_args *m = &op[1].matmul;
    if (!dev->plan_policy.norm_fused || (op[0].kind != HL_PLAN_LAYERNORM && !rms) || op[1].kind != HL_PLAN_MATMUL ||
        m->t_a != a->h || a->rows != 1 || a->d != m->k || a->d % 8 || a->d > GEMV_LN_MAX || a->dtype != m->in_dtype ||
        (a->r && !a->x_out) || s->n_dispatch != 1)
        return HL_OK;
    const hl_tensor *const wide[4] = {a->x, a->gamma, a->beta, a->x_out}, *const narrow[2] = {a->r, a->h};
    for (int k = 0; k < 4; k++)
        if (wide[k] && wide[k]->offset % 16) return HL_OK;
    for (int k = 0; k < 2; k++)
        if (narrow[k] && narrow[k]->offset % 8) return HL_OK;
    hl_product pl = s->product; /* s is m's step (hl_plan_matmul_step) */
    int applies;
    HL_TRY(hl_product_ln_head(dev, m, &pl, a->r != NULL, rms, a->eps, &applies, err));
    if (!applies) return HL_OK;
    s->pipe[0] = pl.main_pipe;
    memcpy(s->grid[0], pl.grid, sizeof pl.grid);
    s->pc[0] = pl.pc;
    s->n_binds = HL_BIND_MATMUL_LN_COUNT;
    hl_tensor *const norm[7] = {a->x, a->r, a->gamma, a->beta, a->x_out, a->h, a->stats};
    for (int k = 0; k < 7; k++) /* no branch: its slots bind the stream, never read or written */
        s->binds[HL_BIND_MATMUL_LN_X + k] = hl_tensor_or_scratch(norm[k] ? norm[k] : a->x, NULL);
    const hl_tensor *reads[HL_STEP_READS] = {a->x, a->r, a->gamma, a->beta, m->t_b, m->t_bias};
    const hl_tensor *writes[HL_STEP_WRITES] = {m->t_c, a->h, a->x_out, a->stats};
    memcpy(s->reads, reads, sizeof reads);
    memcpy(s->writes, writes, sizeof writes);
    norm_s->n_dispatch = 0;
    memset(norm_s->reads, 0, sizeof norm_s->reads);
    memset(norm_s->writes, 0, sizeof norm_s->writes);
fail:
    return st;
}

hl_status hl_plan_fuse_swiglu(hl_device *dev, const hl_plan_op *ops, uint32_t n, uint32_t i, hl_plan_step *steps) {
    if (!dev->plan_policy.swiglu_fused || i + 1 >= n || ops[i].kind != HL_PLAN_SWIGLU ||
        ops[i + 1].kind != HL_PLAN_MATMUL)
        return HL_OK;
    const hl_swiglu_args *g = &ops[i].swiglu;
    const hl_matmul_args *m = &ops[i + 1].matmul;
    hl_plan_step *s = &steps[i + 1];
    if (m->t_a != g->out || m->m != 1 || m->trans_a || m->k != g->n || g->n % 8 || g->dtype != m->in_dtype ||
        g->x->offset % 16 || s->n_dispatch != 1 || s->product.v.path != HL_PATH_GEMV ||
        !(s->pc[0].matmul.flags & HL_FLAG_A_VEC))
        return HL_OK;
    for (uint32_t j = i + 2; j < n; j++) /* the SwiGLU's row is written nowhere, so nothing else may read it */
        for (uint32_t r = 0; r < HL_STEP_READS; r++)
            if (hl_tensors_share(steps[j].reads[r], g->out)) return HL_OK;
    s->pc[0].matmul.flags |= HL_FLAG_A_SWIGLU;
    s->a_swiglu = g->x;
    for (uint32_t r = 0; r < HL_STEP_READS; r++)
        if (s->reads[r] == m->t_a) s->reads[r] = g->x;
    s->keep[4] = g->x;
    steps[i].n_dispatch = 0;
    memset(steps[i].reads, 0, sizeof steps[i].reads);
    memset(steps[i].writes, 0, sizeof steps[i].writes);
    return HL_OK;
}

/* A rope on a QKV row read next by the decode attention over that row: the attention
 * rotates q and the new k itself (decode_attention.glsl's att_rotated, the rope's sums
 * and rounding) and the rope's step records nothing. The row then stays unrotated, so
 * no later step may read it; the same heads, head dimension, type and position word,
 * a table of the cache's positions at least; HELIOS_DISABLE_PLAN_ROPE_FUSION=1 keeps
 * the two steps. */
static hl_status fuse_rope(hl_device *dev, const hl_plan_op *ops, uint32_t n, uint32_t i, hl_plan_step *steps,
                           hl_error *err) {
    if (!dev->plan_policy.rope_fused || i + 1 >= n || ops[i].kind != HL_PLAN_ROPE ||
        ops[i + 1].kind != HL_PLAN_ATTN_DECODE)
        return HL_OK;
    const hl_rope_args *r = &ops[i].rope;
    const hl_attn_decode_args *a = &ops[i + 1].attn;
    hl_plan_step *s = &steps[i + 1];
    if (a->qkv != r->qkv || a->heads != r->heads || a->kv_heads != r->kv_heads || a->head_dim != r->head_dim ||
        a->dtype != r->dtype || a->pos_slot != r->pos_slot || r->rows < a->max_len)
        return HL_OK;
    for (uint32_t j = i + 2; j < n; j++)
        for (uint32_t k = 0; k < HL_STEP_READS; k++)
            if (hl_tensors_share(steps[j].reads[k], r->qkv)) return HL_OK;
    hl_status st = hl_attn_decode_rope(dev, a, s, err);
    if (st != HL_OK) return st;
    s->binds[HL_BIND_DECODE_TAB] = hl_tensor_or_scratch(r->table, NULL);
    for (uint32_t k = 0; k < HL_STEP_READS; k++)
        if (!s->reads[k]) {
            s->reads[k] = r->table;
            break;
        }
    for (uint32_t k = 0; k < sizeof s->keep / sizeof s->keep[0]; k++)
        if (!s->keep[k] || s->keep[k] == r->table) {
            s->keep[k] = r->table;
            break;
        }
    steps[i].n_dispatch = 0;
    memset(steps[i].reads, 0, sizeof steps[i].reads);
    memset(steps[i].writes, 0, sizeof steps[i].writes);
    return HL_OK;
}

hl_status hl_plan_fuse(hl_device *dev, const hl_plan_op *ops, uint32_t n, hl_plan_step *steps, hl_error *err) {
    hl_status st = HL_OK;
    for (uint32_t i = 0; i + 1 < n; i++) {
        HL_TRY(hl_plan_fuse_norm(dev, &ops[i], &steps[i], &steps[i + 1], err));
        HL_TRY(hl_plan_fuse_swiglu(dev, ops, n, i, steps));
        HL_TRY(fuse_rope(dev, ops, n, i, steps, err));
    }
fail:
    return st;
}

void hl_plan_product_bindings(const hl_plan_op *op, hl_plan_step *s, VkBuffer workspace) {
    hl_product_bindings(&op->matmul, workspace, s->binds);
    if (s->a_swiglu) s->binds[HL_BIND_MATMUL_A] = hl_tensor_or_scratch(s->a_swiglu, NULL);
}
