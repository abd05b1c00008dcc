/* train.c — a training step's ops besides products, attention and LayerNorm
 * (helios_train.h): train.comp's five passes, and AdamW (optim.comp, whose checks and
 * push words are the plan op's: elementwise.c) as an ordered operation. */
#include <stdio.h>
#include <string.h>

#include "helios_train.h"
#include "plan_ops.h"

#define TRAIN_THREADS 256u
#define TRAIN_MAX_COLS 32u /* the token table gradient's columns an invocation holds: n <= 8192 */

static const char *const pass_names[HL_TRAIN_PASSES] = {
    "embedding",  "token table gradient", "position table gradient", "cross-entropy",
    "column sum", "sum of squares",       "rotary positions",        "SwiGLU"};

const char *hl_train_pass_name(hl_train_pass pass) {
    return (unsigned)pass < HL_TRAIN_PASSES ? pass_names[pass] : "unknown pass";
}

/* A 2-D grid of `groups` workgroups (the shader flattens it). */
static hl_status grid_of(const hl_device *dev, uint64_t groups, const char *who, uint32_t grid[2], hl_error *err) {
    const uint64_t gx = groups < dev->caps.max_group_count[0] ? groups : dev->caps.max_group_count[0];
    const uint64_t gy = gx ? (groups + gx - 1) / gx : 1;
    if (gy > dev->caps.max_group_count[1])
        return hl_fail(err, HL_ERR_TOO_LARGE, "%s: %llu workgroups exceed the device's grid", who,
                       (unsigned long long)groups);
    grid[0] = (uint32_t)(gx ? gx : 1);
    grid[1] = (uint32_t)gy;
    return HL_OK;
}

/* Each pass's sizes: the bytes of ids, src, src2, dst and aux it reads or writes (0: not
 * bound) and its workgroups; a message naming the pass where a size is out of range. */
static hl_status sizes_of(hl_train_pass pass, const hl_train_args *a, uint64_t bytes[5], uint64_t *groups,
                          const char *who, hl_error *err) {
    const uint64_t rows = a->rows, n = a->n, el = 2;
    memset(bytes, 0, 5 * sizeof *bytes);
    if (!a->rows || !a->n)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: rows (%u) and n (%u) must be positive", who, a->rows, a->n);
    if (rows * n >= UINT32_MAX || (pass == HL_TRAIN_TOKEN_GRAD && (uint64_t)a->table_rows * n >= UINT32_MAX))
        return hl_fail(err, HL_ERR_TOO_LARGE, "%s: %llu x %llu elements exceed the kernel's 32-bit indexing", who,
                       (unsigned long long)rows, (unsigned long long)n);
    if ((pass == HL_TRAIN_ROPE_ROWS || pass == HL_TRAIN_SWIGLU_ROWS) && a->dtype != HL_F16 && a->dtype != HL_BF16)
        return hl_fail(err, HL_ERR_UNSUPPORTED_DTYPE, "%s: the rows' dtype must be float16 or bfloat16", who);
    switch (pass) {
        case HL_TRAIN_EMBED:
            if (!a->table_rows || (!a->seq && !(a->flags & HL_TRAIN_NO_POSITIONS)) ||
                (a->flags & HL_TRAIN_TABLE16 && a->dtype != HL_F16 && a->dtype != HL_BF16))
                return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                               "%s: table_rows and seq must be positive, a 16-bit table float16 or bfloat16", who);
            bytes[0] = rows * 4, bytes[1] = (uint64_t)a->table_rows * n * (a->flags & HL_TRAIN_TABLE16 ? 2 : 4);
            bytes[2] = a->flags & HL_TRAIN_NO_POSITIONS ? 0 : (uint64_t)a->seq * n * 4;
            bytes[3] = rows * n * 4;
            *groups = (rows * n + TRAIN_THREADS - 1) / TRAIN_THREADS;
            return HL_OK;
        case HL_TRAIN_TOKEN_GRAD:
            if (!a->table_rows || n > TRAIN_THREADS * TRAIN_MAX_COLS)
                return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: table_rows must be positive and n at most %u, got %u",
                               who, TRAIN_THREADS * TRAIN_MAX_COLS, a->n);
            bytes[0] = rows * 4, bytes[1] = rows * n * 4, bytes[3] = (uint64_t)a->table_rows * n * 4;
            *groups = a->table_rows;
            return HL_OK;
        case HL_TRAIN_POSITION_GRAD:
            if (!a->seq || a->rows % a->seq)
                return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: rows (%u) must be a positive multiple of seq (%u)",
                               who, a->rows, a->seq);
            bytes[1] = rows * n * 4, bytes[3] = (uint64_t)a->seq * n * 4;
            *groups = ((uint64_t)a->seq * n + TRAIN_THREADS - 1) / TRAIN_THREADS;
            return HL_OK;
        case HL_TRAIN_CROSS_ENTROPY:
            if (a->dtype != HL_F16 && a->dtype != HL_BF16)
                return hl_fail(err, HL_ERR_UNSUPPORTED_DTYPE,
                               "%s: the logits' dtype must be float16 or bfloat16, got %s", who,
                               hl_dtype_name(a->dtype));
            if (!(a->scale == a->scale) || a->scale > 1e30f || a->scale < -1e30f)
                return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: scale must be finite", who);
            bytes[0] = rows * 4, bytes[1] = rows * n * el, bytes[3] = rows * 4, bytes[4] = rows * n * el;
            *groups = rows;
            return HL_OK;
        case HL_TRAIN_COLUMN_SUM: {
            const uint64_t last = (rows - 1) * a->ld + a->off + n;
            if (a->ld < n || last >= UINT32_MAX)
                return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                               "%s: ld (%u) must be at least n (%u), within 32-bit indexing", who, a->ld, a->n);
            bytes[1] = last * 4, bytes[3] = ((uint64_t)a->dst_off + n) * 4;
            *groups = (n + 15) / 16; /* train.comp: 16 columns a workgroup */
            return HL_OK;
        }
        case HL_TRAIN_ROPE_ROWS: /* n heads of seq elements at the start of rows ld apart, in place (aux) */
            if (!a->seq || a->seq % 2 || a->ld < n * a->seq)
                return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                               "%s: a head of %u elements (even), %u heads within rows of %u elements", who, a->seq,
                               a->n, a->ld);
            bytes[2] = ((uint64_t)a->off + rows) * a->seq * 4, bytes[4] = ((rows - 1) * a->ld + n * a->seq) * el;
            *groups = (rows * n * (a->seq / 2) + TRAIN_THREADS - 1) / TRAIN_THREADS;
            return HL_OK;
        case HL_TRAIN_SWIGLU_ROWS: /* rows of [gate | up] (2n, ld apart) to rows of n */
            if (a->ld < 2 * n)
                return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: ld (%u) must be at least 2n (%u)", who, a->ld,
                               2 * a->n);
            bytes[1] = ((rows - 1) * a->ld + 2 * n) * el, bytes[4] = rows * n * el;
            *groups = (rows * n + TRAIN_THREADS - 1) / TRAIN_THREADS;
            return HL_OK;
        case HL_TRAIN_SUM_SQUARES:
            *groups = (rows + HL_TRAIN_SQ_CHUNK - 1) / HL_TRAIN_SQ_CHUNK;
            bytes[1] = rows * 4, bytes[3] = ((uint64_t)a->dst_off + *groups) * 4;
            return HL_OK;
        default:
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "train: pass %d is not one of 0..%d", (int)pass,
                           HL_TRAIN_PASSES - 1);
    }
}

hl_status hl_train_op(hl_device *dev, hl_train_pass pass, const hl_train_args *a, hl_error *err) {
    hl_status st = HL_OK;
    char who[48];
    snprintf(who, sizeof who, "train: %s", hl_train_pass_name(pass));
    uint64_t bytes[5], groups = 1;
    HL_TRY(sizes_of(pass, a, bytes, &groups, who, err));
    hl_tensor *const given[5] = {a->ids, a->src, a->src2, a->dst, a->aux};
    static const char *const names[5] = {"ids", "src", "src2", "dst", "aux"};
    for (int i = 0; i < 5; i++) {
        if (bytes[i] && !given[i])
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: %s is a required tensor", who, names[i]);
        if (bytes[i]) HL_TRY(hl_check_tensor(dev, given[i], bytes[i], who, names[i], err));
    }
    for (int i = 0; i < 3; i++) /* the fp32 output never overlaps what the pass reads */
        if (bytes[i] && hl_tensors_share(given[i], a->dst))
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: dst overlaps %s", who, names[i]);
    hl_dispatch_plan pl = {0};
    HL_TRY(grid_of(dev, groups, who, pl.grid, err));
    const hl_spec_env e = {.pass = (uint32_t)pass, .cols_per_thread = (a->n + TRAIN_THREADS - 1) / TRAIN_THREADS};
    uint32_t spec[HL_SPEC_TRAIN_COUNT];
    hl_spec_train(spec, &e);
    if (pass != HL_TRAIN_TOKEN_GRAD) spec[HL_SPEC_TRAIN_MAX_COLS] = 1; /* one pipeline for the other passes */
    hl_pipeline *pipe;
    const int typed = pass == HL_TRAIN_CROSS_ENTROPY || pass == HL_TRAIN_ROPE_ROWS || pass == HL_TRAIN_SWIGLU_ROWS ||
                      (pass == HL_TRAIN_EMBED && a->flags & HL_TRAIN_TABLE16);
    const hl_dtype dt = typed ? a->dtype : HL_F16;
    HL_TRY(hl_pipeline_get(dev, hl_shader_train(dt), spec, HL_SPEC_TRAIN_COUNT, 0, &pipe, err));
    pl.pipe = pipe->pipeline;
    pl.pc.train = (hl_push_train){.rows = a->rows,
                                  .n = a->n,
                                  .seq = a->seq,
                                  .table_rows = a->table_rows,
                                  .ld = a->ld,
                                  .off = a->off,
                                  .accumulate = a->accumulate != 0,
                                  .scale = a->scale,
                                  .dst_off = a->dst_off,
                                  .flags = a->flags};
    /* A slot the pass does not use binds dst, with no bytes (never a hazard). */
    hl_operand ops[HL_BIND_TRAIN_COUNT];
    for (uint32_t i = 0; i < HL_BIND_TRAIN_COUNT; i++)
        ops[i] =
            (hl_operand){.tensor = bytes[i] ? given[i] : a->dst,
                         .bytes = bytes[i],
                         .slot = (int)i,
                         .access = i == HL_BIND_TRAIN_DST || i == HL_BIND_TRAIN_AUX ? HL_ACCESS_WRITE : HL_ACCESS_READ};
    const hl_exec_timing timing = {.wait_value = a->wait_value, .signal_value = a->signal_value};
    return hl_exec_kernel(dev, ops, HL_BIND_TRAIN_COUNT, hl_record_dispatch, &pl, &timing, who, NULL, err);
fail:
    return st;
}

hl_status hl_adamw(hl_device *dev, const hl_adamw_op *op, hl_error *err) {
    hl_status st = HL_OK;
    static const char *who = "adamw";
    const hl_adamw_args *a = &op->a;
    if (!op->words) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: words is a required tensor", who);
    const uint64_t n_words = hl_tensor_bytes(op->words) / 4;
    if (!(op->max_norm >= 0.0f) || ((op->max_norm > 0.0f || op->guard) && op->clip_slot >= n_words))
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: max_norm must be >= 0, its word (%u) one of the %llu words",
                       who, op->clip_slot, (unsigned long long)n_words);
    hl_plan_step s;
    HL_TRY(hl_adamw_step(dev, a, n_words > UINT32_MAX ? UINT32_MAX : (uint32_t)n_words, who, &s, err));
    HL_TRY(hl_check_tensor(dev, op->words, n_words * 4, who, "words", err));
    hl_dispatch_plan pl = {.pipe = s.pipe[0], .grid = {s.grid[0][0], s.grid[0][1]}, .pc = s.pc[0]};
    pl.pc.optim.clip_slot = op->clip_slot;
    pl.pc.optim.max_norm = op->max_norm;
    pl.pc.optim.guard = op->guard != 0;
    hl_tensor *const slots[HL_BIND_OPTIM_COUNT] = {
        [HL_BIND_OPTIM_PARAMS] = op->words, [HL_BIND_OPTIM_P] = a->p, [HL_BIND_OPTIM_M] = a->m,
        [HL_BIND_OPTIM_V] = a->v,           [HL_BIND_OPTIM_G] = a->g, [HL_BIND_OPTIM_P16] = a->copy ? a->copy : a->g};
    const uint64_t n4 = (uint64_t)a->n * 4;
    const uint64_t sizes[HL_BIND_OPTIM_COUNT] = {[HL_BIND_OPTIM_PARAMS] = n_words * 4,
                                                 [HL_BIND_OPTIM_P] = n4,
                                                 [HL_BIND_OPTIM_M] = n4,
                                                 [HL_BIND_OPTIM_V] = n4,
                                                 [HL_BIND_OPTIM_G] = n4,
                                                 [HL_BIND_OPTIM_P16] = a->copy ? a->n * 2ull : 0};
    hl_operand ops[HL_BIND_OPTIM_COUNT];
    for (uint32_t i = 0; i < HL_BIND_OPTIM_COUNT; i++)
        ops[i] = (hl_operand){.tensor = slots[i],
                              .bytes = sizes[i],
                              .slot = (int)i,
                              .access =
                                  i == HL_BIND_OPTIM_PARAMS || i == HL_BIND_OPTIM_G ? HL_ACCESS_READ : HL_ACCESS_WRITE};
    const hl_exec_timing timing = {.wait_value = op->wait_value, .signal_value = op->signal_value};
    return hl_exec_kernel(dev, ops, HL_BIND_OPTIM_COUNT, hl_record_dispatch, &pl, &timing, who, NULL, err);
fail:
    return st;
}
