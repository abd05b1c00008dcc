/* decode.c — a batch-1 decode step's ops besides its products and norms
 * (decode.comp): the embedding gather, attention of the new position over a KV
 * cache (split over the keys, then combined: by the last split workgroup of each
 * head to finish, or by a second dispatch under HELIOS_DISABLE_DECODE_ATTENTION_FUSION)
 * and the top-1, each validated into a plan's step (plan_ops.h). They read the token
 * and the position from the plan's parameter words, so the step is recorded once. */
#include <stdio.h>
#include <string.h>

#include "plan_ops.h"

#define DECODE_THREADS 256u                /* decode.comp's workgroup */
#define DECODE_CHUNK HL_DECODE_SPLIT_SHORT /* keys a split at most (the most splits a head) */
#define TOP1_CHUNK 1024u                   /* top-1: elements a workgroup (four loads an invocation) */
enum { PASS_EMBED, PASS_ATTN_SPLIT, PASS_ATTN_COMBINE, PASS_TOP1, PASS_ATTN_FUSED, PASS_ROPE, PASS_SWIGLU };

/* decode.comp's pass; an attention's splits may grow (long_splits) where the device
 * sizes them for a grid (ATT_FIT below). */
static hl_status pipeline(hl_device *dev, uint32_t pass, uint32_t d, hl_dtype dtype, uint32_t long_splits,
                          uint32_t rope, VkPipeline *out, hl_error *err) {
    hl_status st = HL_OK;
    const hl_spec_env e = {.pass = pass, .d = d ? d : 64, .long_splits = long_splits, .rope = rope};
    uint32_t spec[HL_SPEC_DECODE_COUNT];
    hl_spec_decode(spec, &e);
    hl_pipeline *p;
    HL_TRY(hl_pipeline_get(dev, hl_shader_decode(dtype), spec, HL_SPEC_DECODE_COUNT, 0, &p, err));
    *out = p->pipeline;
fail:
    return st;
}

static hl_status slot_ok(uint32_t slot, uint32_t n_params, const char *who, const char *what, hl_error *err) {
    if (slot < n_params) return HL_OK;
    return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: %s word %u; the plan has %u parameter words", who, what, slot,
                   n_params);
}

static void bind(hl_plan_step *s, int slot, hl_tensor *t) {
    s->binds[slot] = hl_tensor_or_scratch(t, NULL);
    for (uint32_t i = 0; i < sizeof s->keep / sizeof s->keep[0]; i++)
        if (!s->keep[i] || s->keep[i] == t) {
            s->keep[i] = t;
            return;
        }
}

/* A step of the decode kind: every slot bound to `fill` until set, the parameter
 * words at theirs, no workspace. */
static void begin(hl_plan_step *s, hl_tensor *fill) {
    memset(s, 0, sizeof *s);
    s->n_binds = HL_BIND_DECODE_COUNT;
    for (int i = 0; i < (int)HL_BIND_DECODE_COUNT; i++) bind(s, i, fill);
    s->params_slot = HL_BIND_DECODE_PARAMS;
    s->work_slot = -1;
    s->param_write = -1;
    s->n_dispatch = 1;
}

/* A pass on 16-bit values: float16 or bfloat16, on a device with 16-bit integers. */
static hl_status sixteen_bit(const hl_device *dev, hl_dtype dtype, const char *who, hl_error *err) {
    if (dtype != HL_F16 && dtype != HL_BF16)
        return hl_fail(err, HL_ERR_UNSUPPORTED_DTYPE, "%s: dtype must be float16 or bfloat16, got %s", who,
                       hl_dtype_name(dtype));
    if (!dev->caps.has_int16)
        return hl_fail(err, HL_ERR_UNSUPPORTED, "%s: needs shaderInt16, which device '%s' lacks", who, dev->caps.name);
    return HL_OK;
}

/* The head dimensions the attention and rope passes take: divisors of the workgroup. */
static hl_status head_dim_ok(uint32_t hd, const char *who, hl_error *err) {
    if (hd < 8 || hd > DECODE_THREADS || DECODE_THREADS % hd)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: head_dim %u must divide %u (8..%u)", who, hd, DECODE_THREADS,
                       DECODE_THREADS);
    return HL_OK;
}

hl_status hl_embed_step(hl_device *dev, const hl_embed_args *a, uint32_t n_params, const char *who, hl_plan_step *s,
                        hl_error *err) {
    hl_status st = HL_OK;
    if (!a->tokens || !a->out || !a->positions != !a->pos_rows)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "%s: tokens and out are required tensors, positions with its rows (or neither)", who);
    if (!a->d || !a->token_rows) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: d and token rows must be >= 1", who);
    if ((uint64_t)a->token_rows * a->d >= UINT32_MAX || (uint64_t)a->pos_rows * a->d >= UINT32_MAX)
        return hl_fail(err, HL_ERR_TOO_LARGE, "%s: a table spans 2^32 or more elements", who);
    HL_TRY(slot_ok(a->token_slot, n_params, who, "token", err));
    HL_TRY(slot_ok(a->pos_slot, n_params, who, "position", err));
    if (hl_tensors_share(a->out, a->tokens) || hl_tensors_share(a->out, a->positions))
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: out is also a table", who);
    const int table16 = a->dtype != HL_F32;
    if (table16) HL_TRY(sixteen_bit(dev, a->dtype, who, err));
    HL_TRY(hl_check_tensor(dev, a->tokens, (uint64_t)a->token_rows * a->d * (table16 ? 2 : 4), who, "tokens", err));
    HL_TRY(hl_check_tensor(dev, a->positions, (uint64_t)a->pos_rows * a->d * 4, who, "positions", err));
    HL_TRY(hl_check_output_tensor(dev, a->out, (uint64_t)a->d * 4, who, "out", err));
    begin(s, a->tokens);
    HL_TRY(pipeline(dev, PASS_EMBED, 0, table16 ? a->dtype : HL_F16, 0, 0, &s->pipe[0], err));
    s->grid[0][0] = (a->d + DECODE_THREADS - 1) / DECODE_THREADS;
    s->grid[0][1] = s->grid[0][2] = 1;
    s->pc[0].decode.embed = (hl_push_decode_embed){.d = a->d,
                                                   .token_slot = a->token_slot,
                                                   .pos_slot = a->pos_slot,
                                                   .token_rows = a->token_rows,
                                                   .pos_rows = a->pos_rows,
                                                   .table16 = (uint32_t)table16};
    if (a->positions) bind(s, HL_BIND_DECODE_SRC2, a->positions);
    bind(s, HL_BIND_DECODE_OUT, a->out);
    s->reads[0] = a->tokens;
    s->reads[1] = a->positions;
    s->writes[0] = a->out;
    s->param_read[0] = a->token_slot;
    s->param_bound[0] = a->token_rows;
    s->param_read[1] = a->pos_slot;
    s->param_bound[1] = a->pos_rows;
    s->n_param_reads = a->positions ? 2 : 1;
    return HL_OK;
fail:
    return st;
}

uint32_t hl_decode_splits(uint32_t pos, uint32_t fit, uint32_t head_dim) {
    const uint32_t kpp = DECODE_THREADS / (head_dim / 8u); /* keys a pass of the workgroup */
    const uint32_t long_keys = hl_decode_split_long_keys(hl_decode_split_held(kpp));
    return hl_decode_split_of(pos, hl_decode_split_keys(pos, fit, long_keys)) + 1;
}

/* The attention's pipelines: one fused dispatch, or its splits and their combine; rope:
 * the kernel rotates q and the new k itself (a path compiled out where it does not). */
static hl_status attention_pipelines(hl_device *dev, const hl_attn_decode_args *a, uint32_t grow, uint32_t rope,
                                     hl_plan_step *s, hl_error *err) {
    hl_status st = HL_OK;
    if (dev->plan_policy.decode_attention_fused) {
        HL_TRY(pipeline(dev, PASS_ATTN_FUSED, a->head_dim, a->dtype, grow, rope, &s->pipe[0], err));
    } else {
        HL_TRY(pipeline(dev, PASS_ATTN_SPLIT, a->head_dim, a->dtype, grow, rope, &s->pipe[0], err));
        HL_TRY(pipeline(dev, PASS_ATTN_COMBINE, a->head_dim, a->dtype, grow, rope, &s->pipe[1], err));
    }
fail:
    return st;
}

hl_status hl_attn_decode_rope(hl_device *dev, const hl_attn_decode_args *a, hl_plan_step *s, hl_error *err) {
    s->pc[0].decode.attention.rope = s->pc[1].decode.attention.rope = 1;
    return attention_pipelines(dev, a, s->pc[0].decode.attention.fit != UINT32_MAX, 1, s, err);
}

hl_status hl_attn_decode_step(hl_device *dev, const hl_attn_decode_args *a, uint32_t n_params, const char *who,
                              hl_plan_step *s, hl_error *err) {
    hl_status st = HL_OK;
    if (!a->qkv || !a->k_cache || !a->v_cache || !a->out)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: qkv, k_cache, v_cache and out are required tensors", who);
    HL_TRY(sixteen_bit(dev, a->dtype, who, err));
    const uint32_t hd = a->head_dim;
    HL_TRY(head_dim_ok(hd, who, err));
    if (!a->heads || !a->max_len || !a->kv_heads || a->heads % a->kv_heads || !(a->scale > 0.0f))
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "%s: heads (%u) and max_len >= 1, kv_heads (%u) a divisor of heads, scale (%g) positive", who,
                       a->heads, a->kv_heads, (double)a->scale);
    const uint64_t row = (uint64_t)a->heads * hd, kv_row = (uint64_t)a->kv_heads * hd, cache = kv_row * a->max_len;
    if (cache >= UINT32_MAX)
        return hl_fail(err, HL_ERR_TOO_LARGE, "%s: a cache of %u x %llu elements spans 2^32 or more", who, a->max_len,
                       (unsigned long long)kv_row);
    HL_TRY(slot_ok(a->pos_slot, n_params, who, "position", err));
    hl_tensor *const ins[3] = {a->qkv, a->k_cache, a->v_cache};
    for (int i = 0; i < 3; i++)
        if (hl_tensors_share(a->out, ins[i]))
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: out is also an input", who);
    if (hl_tensors_share(a->k_cache, a->v_cache) || hl_tensors_share(a->qkv, a->k_cache) ||
        hl_tensors_share(a->qkv, a->v_cache))
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: qkv, k_cache and v_cache must not overlap", who);
    HL_TRY(hl_check_tensor(dev, a->qkv, (row + 2 * kv_row) * 2, who, "qkv", err));
    HL_TRY(hl_check_tensor(dev, a->k_cache, cache * 2, who, "k_cache", err));
    HL_TRY(hl_check_tensor(dev, a->v_cache, cache * 2, who, "v_cache", err));
    HL_TRY(hl_check_output_tensor(dev, a->out, row * 2, who, "out", err));
    const uint32_t splits = (a->max_len + DECODE_CHUNK - 1) / DECODE_CHUNK;
    if (a->heads > dev->caps.max_group_count[0] || splits > dev->caps.max_group_count[1])
        return hl_fail(err, HL_ERR_TOO_LARGE, "%s: %u heads x %u key splits exceed the device's grid", who, a->heads,
                       splits);
    begin(s, a->qkv);
    const uint32_t fit =
        dev->plan_policy.split_width ? (uint32_t)dev->plan_policy.split_width / a->heads : UINT32_MAX; /* ATT_FIT */
    const uint32_t grow = fit != UINT32_MAX;
    HL_TRY(attention_pipelines(dev, a, grow, 0, s, err));
    if (dev->plan_policy.decode_attention_fused) { /* one dispatch; its heads' arrival counts in words of its own */
        s->counter_words = a->heads;
        s->counter_slot = HL_BIND_DECODE_SRC2;
    } else {
        s->n_dispatch = 2;
    }
    const uint32_t grids[2][3] = {{a->heads, splits, 1}, {a->heads, 1, 1}};
    memcpy(s->grid, grids, sizeof grids);
    const hl_push_decode_attention pc = {.heads = a->heads,
                                         .pos_slot = a->pos_slot,
                                         .kv_heads = a->kv_heads,
                                         .cache_rows = a->max_len,
                                         .splits = splits,
                                         .scale = a->scale,
                                         .fit = fit};
    s->pc[0].decode.attention = s->pc[1].decode.attention = pc;
    bind(s, HL_BIND_DECODE_KC, a->k_cache);
    bind(s, HL_BIND_DECODE_VC, a->v_cache);
    bind(s, HL_BIND_DECODE_OUT, a->out);
    s->work_slot = HL_BIND_DECODE_WORK;
    s->work_bytes = (uint64_t)a->heads * splits * (hd + 2) * 4;
    for (int i = 0; i < 3; i++) s->reads[i] = ins[i];
    s->writes[0] = a->out;
    s->writes[1] = a->k_cache; /* the new position's rows */
    s->writes[2] = a->v_cache;
    s->param_read[0] = a->pos_slot;
    s->param_bound[0] = a->max_len;
    s->n_param_reads = 1;
    if (dev->plan_policy.decode_grid_sized) { /* the splits up to the position only (the cache's size otherwise) */
        s->grid_slot = a->pos_slot;
        s->grid_div = DECODE_CHUNK;
    }
    return HL_OK;
fail:
    return st;
}

hl_status hl_rope_step(hl_device *dev, const hl_rope_args *a, uint32_t n_params, const char *who, hl_plan_step *s,
                       hl_error *err) {
    hl_status st = HL_OK;
    if (!a->qkv || !a->table)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: qkv and table are required tensors", who);
    HL_TRY(sixteen_bit(dev, a->dtype, who, err));
    const uint32_t hd = a->head_dim;
    HL_TRY(head_dim_ok(hd, who, err));
    if (!a->heads || !a->kv_heads || !a->rows || (uint64_t)a->rows * hd >= UINT32_MAX)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "%s: heads, kv_heads and rows must be >= 1 (rows x head_dim < 2^32)", who);
    HL_TRY(slot_ok(a->pos_slot, n_params, who, "position", err));
    if (hl_tensors_share(a->qkv, a->table))
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: qkv is also the table", who);
    const uint64_t pairs = (uint64_t)(a->heads + a->kv_heads) * (hd / 2);
    HL_TRY(hl_check_output_tensor(dev, a->qkv, pairs * 4, who, "qkv", err));
    HL_TRY(hl_check_tensor(dev, a->table, (uint64_t)a->rows * hd * 4, who, "table", err));
    begin(s, a->qkv);
    HL_TRY(pipeline(dev, PASS_ROPE, hd, a->dtype, 0, 0, &s->pipe[0], err));
    s->grid[0][0] = (uint32_t)((pairs + DECODE_THREADS - 1) / DECODE_THREADS);
    s->grid[0][1] = s->grid[0][2] = 1;
    s->pc[0].decode.rope =
        (hl_push_decode_rope){.heads = a->heads, .pos_slot = a->pos_slot, .kv_heads = a->kv_heads, .rows = a->rows};
    bind(s, HL_BIND_DECODE_KC, a->qkv);
    bind(s, HL_BIND_DECODE_SRC2, a->table);
    s->reads[0] = a->qkv;
    s->reads[1] = a->table;
    s->writes[0] = a->qkv;
    s->param_read[0] = a->pos_slot;
    s->param_bound[0] = a->rows;
    s->n_param_reads = 1;
    return HL_OK;
fail:
    return st;
}

hl_status hl_swiglu_step(hl_device *dev, const hl_swiglu_args *a, uint32_t n_params, const char *who, hl_plan_step *s,
                         hl_error *err) {
    hl_status st = HL_OK;
    if (!a->x || !a->out) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: x and out are required tensors", who);
    HL_TRY(sixteen_bit(dev, a->dtype, who, err));
    if (!a->n || a->n >= UINT32_MAX / 2)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: n must be 1..2^31-1, got %u", who, a->n);
    if (hl_tensors_share(a->x, a->out)) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: out is also x", who);
    HL_TRY(hl_check_tensor(dev, a->x, (uint64_t)a->n * 4, who, "x", err));
    HL_TRY(hl_check_output_tensor(dev, a->out, (uint64_t)a->n * 2, who, "out", err));
    begin(s, a->x);
    HL_TRY(pipeline(dev, PASS_SWIGLU, 0, a->dtype, 0, 0, &s->pipe[0], err));
    s->grid[0][0] = (a->n + DECODE_THREADS - 1) / DECODE_THREADS;
    s->grid[0][1] = s->grid[0][2] = 1;
    s->pc[0].decode.swiglu = (hl_push_decode_swiglu){.n = a->n};
    bind(s, HL_BIND_DECODE_OUT, a->out);
    s->reads[0] = a->x;
    s->writes[0] = a->out;
    return HL_OK;
fail:
    return st;
}

hl_status hl_top1_step(hl_device *dev, const hl_top1_args *a, uint32_t n_params, const char *who, hl_plan_step *s,
                       hl_error *err) {
    hl_status st = HL_OK;
    if (!a->x) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: x is a required tensor", who);
    if (!a->n || a->n >= UINT32_MAX)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: n must be 1..2^32-2, got %u", who, a->n);
    HL_TRY(slot_ok(a->slot, n_params, who, "result", err));
    HL_TRY(hl_check_tensor(dev, a->x, (uint64_t)a->n * 4, who, "x", err));
    begin(s, a->x);
    HL_TRY(pipeline(dev, PASS_TOP1, 0, HL_F16, 0, 0, &s->pipe[0], err));
    /* A chunk a workgroup; the arrival counter and each workgroup's pick (value, index)
     * in words of its own. */
    const uint32_t groups = (a->n - 1) / TOP1_CHUNK + 1;
    if (groups > dev->caps.max_group_count[0])
        return hl_fail(err, HL_ERR_TOO_LARGE, "%s: %u elements take %u workgroups; the device's grid holds %u", who,
                       a->n, groups, dev->caps.max_group_count[0]);
    s->grid[0][0] = groups;
    s->grid[0][1] = s->grid[0][2] = 1;
    s->pc[0].decode.top1 = (hl_push_decode_top1){.n = a->n, .slot = a->slot, .chunk = TOP1_CHUNK};
    s->counter_words = HL_TOP1_PICKS + HL_TOP1_PICK * groups;
    s->counter_slot = HL_BIND_DECODE_SRC2;
    s->reads[0] = a->x;
    s->param_write = (int)a->slot;
    return HL_OK;
fail:
    return st;
}
