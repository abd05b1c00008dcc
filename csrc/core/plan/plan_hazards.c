/* plan_hazards.c — which of a plan's steps must wait behind a pipeline barrier for the
 * steps recorded since the last one (plan.c's recording): a step that reads or writes
 * a buffer they wrote, writes one they read, shares the workspace with them, or reads
 * or writes parameter words around their writes and reads. */
#include "plan_ops.h"

/* A step's tensor i: its reads, then its writes (i >= HL_STEP_READS); its whole buffer in r. */
static const hl_tensor *step_tensor(const hl_plan_step *s, uint32_t i, hl_range *r) {
    const hl_tensor *t = i < HL_STEP_READS ? s->reads[i] : s->writes[i - HL_STEP_READS];
    *r = hl_range_whole(t ? t->buf.buffer : VK_NULL_HANDLE);
    return t;
}

/* Split-K's and attention's partial sums; a product without split-K binds 16 bytes of it
 * only in place of a bias. */
static int uses_workspace(const hl_plan_step *s) { return s->work_bytes > 16; }

int hl_plan_needs_barrier(const hl_plan_hazards *h, const hl_plan_step *s) {
    hl_range r;
    for (uint32_t i = 0; i < HL_STEP_READS + HL_STEP_WRITES; i++)
        if (step_tensor(s, i, &r) && hl_hazard_blocks(&h->set, &r, i >= HL_STEP_READS)) return 1;
    if (h->params_written && s->n_param_reads) return 1;
    if ((h->params_read || h->params_written) && s->param_write >= 0) return 1;
    return uses_workspace(s) && h->workspace;
}

void hl_plan_note(hl_plan_hazards *h, const hl_plan_step *s) {
    hl_range r;
    for (uint32_t i = 0; i < HL_STEP_READS + HL_STEP_WRITES; i++)
        if (step_tensor(s, i, &r)) hl_hazard_note(&h->set, &r, i >= HL_STEP_READS);
    h->workspace |= uses_workspace(s);
    h->params_read |= s->n_param_reads > 0;
    h->params_written |= s->param_write >= 0;
}

void hl_plan_hazards_clear(hl_plan_hazards *h) {
    hl_hazard_clear(&h->set);
    h->workspace = h->params_written = h->params_read = 0;
}
