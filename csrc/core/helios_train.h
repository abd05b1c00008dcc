/* helios_train.h — a training step's ops besides products, attention and LayerNorm
 * (train.c; train.comp and optim.comp): the embedding and its two gradients,
 * cross-entropy with its gradient, column sums, and AdamW as an operation (its step
 * count and learning rate read from a tensor of words). Each runs synchronously, ordered
 * with CUDA (wait/signal values) or inside a group or a capture, like the others. */
#ifndef HELIOS_TRAIN_H
#define HELIOS_TRAIN_H

#include "helios_plan.h"

typedef enum hl_train_pass {
    HL_TRAIN_EMBED = 0,         /* dst[r, c] = src[ids[r], c] + src2[r % seq, c] */
    HL_TRAIN_TOKEN_GRAD = 1,    /* dst[v, c] (+)= sum over r with ids[r] == v of src[r, c] */
    HL_TRAIN_POSITION_GRAD = 2, /* dst[t, c] (+)= sum over b of src[b seq + t, c] */
    HL_TRAIN_CROSS_ENTROPY = 3, /* dst[r] = lse(src[r]) - src[r, ids[r]]; aux = (softmax - onehot) scale */
    HL_TRAIN_COLUMN_SUM = 4,    /* dst[dst_off + c] (+)= scale sum over r of src[r ld + off + c] */
    HL_TRAIN_SUM_SQUARES = 5, /* dst[dst_off + w] = sum of src[i]^2 over chunk w of HL_TRAIN_SQ_CHUNK (rows elements) */
    HL_TRAIN_ROPE_ROWS = 6,   /* rotary positions on n heads of seq elements of each row (ld apart), in aux */
    HL_TRAIN_SWIGLU_ROWS = 7, /* aux[r, i] = silu(src[r, i]) src[r, n + i], 16-bit rows ld apart */
    HL_TRAIN_PASSES = 8
} hl_train_pass;

/* Every tensor fp32 except ids (int32) and the cross-entropy's src and aux (dtype:
 * float16 or bfloat16); sizes as train.comp's header says. Ids outside the table (or
 * targets outside the classes) make the rows that read them NaN. */
#define HL_TRAIN_SQ_CHUNK 4096u /* train.comp's SQ_CHUNK */
#define HL_TRAIN_TABLE16 1u
#define HL_TRAIN_NO_POSITIONS 2u

typedef struct hl_train_args {
    hl_tensor *ids, *src, *src2, *dst, *aux;
    uint32_t rows, n, seq, table_rows, ld, off, accumulate, dst_off;
    uint32_t flags; /* the embedding's: HL_TRAIN_TABLE16 (a 16-bit token table of dtype), HL_TRAIN_NO_POSITIONS */
    float scale;
    hl_dtype dtype;
    uint64_t wait_value, signal_value; /* ordered with CUDA as hl_exec's */
} hl_train_args;
hl_status hl_train_op(hl_device *dev, hl_train_pass pass, const hl_train_args *a, hl_error *err);
const char *hl_train_pass_name(hl_train_pass pass);

/* AdamW (the plan op's arguments, helios_plan.h) as an operation: step_slot and lr_slot
 * index the uint32 words of `words` (the step count; the learning rate's float32 bits);
 * max_norm > 0 clips the gradient first as torch's clip_grad_norm_, from the squared norm
 * of every gradient whose float32 bits are words[clip_slot]. */
typedef struct hl_adamw_op {
    hl_adamw_args a;
    hl_tensor *words;
    uint32_t clip_slot;
    float max_norm;
    uint32_t guard; /* 1: no update where words[clip_slot] is not finite (a NaN or inf gradient) */
    uint64_t wait_value, signal_value;
} hl_adamw_op;
hl_status hl_adamw(hl_device *dev, const hl_adamw_op *op, hl_error *err);

#endif
