/* plan_stages.c — where a plan's stages begin (a step that reads or writes what the
 * steps since the last stage began wrote, or writes what they read) and which of them
 * wait for the stage before in their kernels (stage_sync.glsl) instead of behind a
 * pipeline barrier. */
#include <stdlib.h>
#include <string.h>

#include "plan_ops.h"

/* What the steps since the stage began touched: the next step begins a new stage only
 * when it reads or writes what they wrote, or writes what they read (tensors, the
 * shared workspace, the parameter words). */
typedef struct hazards {
    const hl_tensor *read[HL_STEP_READS * HL_PLAN_MAX_OPS], *written[HL_STEP_WRITES * HL_PLAN_MAX_OPS];
    uint32_t n_read, n_written;
    int workspace, params_written, params_read;
} hazards;

static int touches(const hl_tensor *const *set, uint32_t n, const hl_tensor *t) {
    for (uint32_t i = 0; t && i < n; i++)
        if (hl_tensors_share(set[i], t)) return 1;
    return 0;
}

/* Split-K's and attention's partial sums; a product without split-K binds 16 bytes of it
 * only in place of a bias. */
static int uses_workspace(const hl_plan_step *s) { return s->work_bytes > 16; }

static int needs_barrier(const hazards *h, const hl_plan_step *s) {
    for (uint32_t i = 0; i < HL_STEP_READS; i++)
        if (touches(h->written, h->n_written, s->reads[i])) return 1;
    for (uint32_t i = 0; i < HL_STEP_WRITES; i++)
        if (touches(h->written, h->n_written, s->writes[i]) || touches(h->read, h->n_read, s->writes[i])) return 1;
    if (h->params_written && s->n_param_reads) return 1;
    if ((h->params_read || h->params_written) && s->param_write >= 0) return 1;
    return uses_workspace(s) && h->workspace;
}

static void note(hazards *h, const hl_plan_step *s) {
    for (uint32_t i = 0; i < HL_STEP_READS; i++)
        if (s->reads[i]) h->read[h->n_read++] = s->reads[i];
    for (uint32_t i = 0; i < HL_STEP_WRITES; i++)
        if (s->writes[i]) h->written[h->n_written++] = s->writes[i];
    h->workspace |= uses_workspace(s);
    h->params_read |= s->n_param_reads > 0;
    h->params_written |= s->param_write >= 0;
}

/* Each step's stage: a new one begins where a step must wait for the steps before it
 * (needs_barrier). Returns the number of stages. */
static uint32_t stages_of(const hl_plan_step *steps, uint32_t n, hazards *h, uint32_t *stage) {
    uint32_t g = 0;
    memset(h, 0, sizeof *h);
    for (uint32_t i = 0; i < n; i++) {
        if (needs_barrier(h, &steps[i])) {
            g++;
            memset(h, 0, sizeof *h);
        }
        note(h, &steps[i]);
        stage[i] = g;
    }
    return g + 1;
}

/* Whether step i's kernel can wait for the stage before it and count itself in
 * (stage_sync.glsl): one dispatch of a kernel that does, and nothing it reads through
 * a non-coherent binding written by another step (writes: every step's, step by step). */
static int overlappable(const hl_plan_step *steps, uint32_t n, uint32_t i) {
    const hl_plan_step *s = &steps[i];
    if (!s->n_dispatch) return 1; /* a norm run as its product's tail: nothing of its own */
    if (!s->stage_slot || s->n_dispatch != 1) return 0;
    for (uint32_t j = 0; j < n; j++)
        for (uint32_t w = 0; j != i && w < HL_STEP_WRITES; w++)
            if (steps[j].writes[w] && touches(s->plain_reads, HL_STEP_READS, steps[j].writes[w])) return 0;
    return 1;
}

/* Whether step i may read the weights, caches and parameter words no step writes
 * before its wait: no step writes a parameter word it reads. */
static int reads_early(const hl_plan_step *steps, uint32_t n, uint32_t i) {
    for (uint32_t j = 0; j < n; j++)
        for (uint32_t r = 0; steps[j].param_write >= 0 && r < steps[i].n_param_reads; r++)
            if ((uint32_t)steps[j].param_write == steps[i].param_read[r]) return 0;
    return 1;
}

/* Stage g waits on stage g - 1 in its kernels where both are made of overlappable
 * steps (and the device's driver launches dispatches in order: dev->plan_overlap),
 * else behind a barrier. Fills each step's push words 14-17: stage g's word is
 * g + 1, word 0 the fault word (stage_sync.glsl). */
hl_status hl_plan_stages_plan(const hl_device *dev, hl_plan_step *steps, uint32_t n, hl_plan_stages *out,
                              hl_error *err) {
    hl_status st = HL_OK;
    memset(out, 0, sizeof *out);
    hazards *h = calloc(1, sizeof *h);
    int *ok = calloc(n, sizeof *ok);
    uint64_t *groups = calloc(n, sizeof *groups);
    out->stage = calloc(n, sizeof *out->stage);
    out->overlapped = calloc(n, sizeof *out->overlapped);
    if (!h || !ok || !groups || !out->stage || !out->overlapped) {
        st = hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
        goto done;
    }
    const uint32_t *stage = out->stage;
    int *overlapped = out->overlapped;
    out->n_stages = stages_of(steps, n, h, out->stage);
    for (uint32_t g = 0; g < out->n_stages; g++) ok[g] = dev->plan_overlap;
    for (uint32_t i = 0; dev->plan_overlap && i < n; i++) {
        ok[stage[i]] &= overlappable(steps, n, i);
        for (uint32_t d = 0; d < steps[i].n_dispatch; d++)
            groups[stage[i]] += (uint64_t)steps[i].grid[d][0] * steps[i].grid[d][1] * steps[i].grid[d][2];
    }
    for (uint32_t g = 1; g < out->n_stages; g++) {
        overlapped[g] = ok[g - 1] && ok[g] && groups[g - 1] < UINT32_MAX;
        out->waits += (uint32_t)overlapped[g];
    }
    for (uint32_t i = 0; i < n; i++) {
        hl_plan_step *s = &steps[i];
        const uint32_t g = stage[i];
        if (!s->n_dispatch) continue;
        if (overlapped[g]) {
            s->pc[0][14] = g; /* stage g - 1's word */
            s->pc[0][15] = (uint32_t)groups[g - 1];
            s->pc[0][17] = reads_early(steps, n, i) ? 1u : 0u; /* stage_sync.glsl's SYNC_EARLY */
        }
        if (g + 1 < out->n_stages && overlapped[g + 1]) s->pc[0][16] = g + 1;
    }
done:
    free(h);
    free(ok);
    free(groups);
    if (st != HL_OK) hl_plan_stages_free(out);
    return st;
}

void hl_plan_stages_free(hl_plan_stages *s) {
    free(s->stage);
    free(s->overlapped);
    s->stage = NULL;
    s->overlapped = NULL;
}
