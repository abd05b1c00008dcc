/* plan.c — replayable plans (helios_plan.h): operations on tensors, each validated
 * into a step (plan_ops.h), recorded once into a command buffer, descriptor sets,
 * workspace and parameter words of their own; a replay is one submission of that
 * buffer and one wait. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_ops.h"
#include "product.h"

#define PLAN_MAX_OPS 4096
#define PLAN_KEEP 8       /* tensors a step binds, at most */
#define GEMV_LN_MAX 4096u /* a fused norm's widest row: matmul_gemv_ln_head.glsl's LN_THREADS x 4 x LN_GROUPS */

struct hl_plan {
    hl_device *dev; /* NULL once the device closed */
    VkCommandBuffer cmd;
    VkDescriptorPool pool;
    VkQueryPool queries; /* two timestamps around the plan, where the queue has them */
    hl_buffer workspace; /* split-K and attention partial sums, the slot a product without a bias binds */
    hl_buffer params;    /* the parameter words, host-visible and mapped */
    hl_buffer counters;  /* the steps' own words, zeroed at the start of each replay (0 bytes: none) */
    uint32_t n_params;
    uint32_t bound[HL_PLAN_MAX_PARAMS], bound_op[HL_PLAN_MAX_PARAMS]; /* each word's tightest bound (0: none) */
    hl_tensor **tensors; /* every tensor bound, checked before each replay */
    uint32_t n_tensors;
    uint32_t ops, dispatches, barriers;
    struct hl_plan *prev, *next;
};

/* What the steps since the last barrier touched: the next one waits behind a barrier
 * only when it reads or writes what they wrote, or writes what they read (tensors,
 * the shared workspace, the parameter words). */
typedef struct hazards {
    const hl_tensor *read[HL_STEP_READS * PLAN_MAX_OPS], *written[HL_STEP_WRITES * PLAN_MAX_OPS];
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

static void keep_tensor(hl_plan *p, hl_tensor *t) {
    if (!t) return;
    for (uint32_t i = 0; i < p->n_tensors; i++)
        if (p->tensors[i] == t) return;
    p->tensors[p->n_tensors++] = t;
}

static void link(hl_plan *p) {
    p->next = p->dev->plans;
    if (p->next) p->next->prev = p;
    p->dev->plans = p;
}

static void unlink_plan(hl_plan *p) {
    if (p->prev)
        p->prev->next = p->next;
    else if (p->dev)
        p->dev->plans = p->next;
    if (p->next) p->next->prev = p->prev;
    p->prev = p->next = NULL;
}

/* Its Vulkan objects, once nothing runs them (a replay always waited, unless a signal
 * interrupted it: settled first). */
static void release(hl_plan *p) {
    hl_device *dev = p->dev;
    if (!dev) return;
    hl_error ignored;
    if (dev->abandoned) (void)hl_settle(dev, &ignored);
    if (p->cmd) vkFreeCommandBuffers(dev->device, dev->cmd_pool, 1, &p->cmd);
    if (p->pool) vkDestroyDescriptorPool(dev->device, p->pool, NULL);
    if (p->queries) vkDestroyQueryPool(dev->device, p->queries, NULL);
    hl_buffer_destroy(dev, &p->workspace);
    hl_buffer_destroy(dev, &p->params);
    hl_buffer_destroy(dev, &p->counters);
    p->cmd = VK_NULL_HANDLE;
    p->pool = VK_NULL_HANDLE;
    p->queries = VK_NULL_HANDLE;
    unlink_plan(p);
    p->dev = NULL;
}

static void record_step(hl_device *dev, VkCommandBuffer cmd, const hl_plan_step *s, VkDescriptorSet ds) {
    if (!s->n_dispatch) return; /* a norm run as its product's head */
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dev->pipe_layout, 0, 1, &ds, 0, NULL);
    for (uint32_t d = 0; d < s->n_dispatch; d++) {
        if (d)
            hl_cmd_barrier_on(dev, cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, s->pipe[d]);
        vkCmdPushConstants(cmd, dev->pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, HL_PUSH_BYTES, s->pc[d]);
        vkCmdDispatch(cmd, s->grid[d][0], s->grid[d][1], s->grid[d][2]);
        dev->tel.dispatches++;
    }
}

static hl_status record(hl_plan *p, const hl_plan_step *steps, const VkDescriptorSet *sets, hazards *h, hl_error *err) {
    hl_status st = HL_OK;
    hl_device *dev = p->dev;
    const uint64_t barriers0 = dev->tel.barriers, dispatches0 = dev->tel.dispatches;
    VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    HL_VK(vkBeginCommandBuffer(p->cmd, &cbi));
    if (p->queries) {
        vkCmdResetQueryPool(p->cmd, p->queries, 0, 2);
        vkCmdWriteTimestamp(p->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, p->queries, 0);
    }
    if (p->counters.buffer) vkCmdFillBuffer(p->cmd, p->counters.buffer, 0, VK_WHOLE_SIZE, 0);
    /* What earlier submissions wrote (uploads, copies, the last replay) and the zeroed
     * counters are read now. */
    hl_cmd_barrier_on(dev, p->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                      VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                      VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    int params_written = 0;
    for (uint32_t i = 0; i < p->ops; i++) {
        if (needs_barrier(h, &steps[i])) {
            hl_cmd_barrier_on(dev, p->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                              VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
            memset(h, 0, sizeof *h);
        }
        note(h, &steps[i]);
        params_written |= steps[i].param_write >= 0;
        record_step(dev, p->cmd, &steps[i], sets[i]);
    }
    if (params_written) /* the words the host reads after the wait */
        hl_cmd_barrier_on(dev, p->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                          VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    if (p->queries) vkCmdWriteTimestamp(p->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p->queries, 1);
    HL_VK(vkEndCommandBuffer(p->cmd));
    p->barriers = (uint32_t)(dev->tel.barriers - barriers0);
    p->dispatches = (uint32_t)(dev->tel.dispatches - dispatches0);
    dev->tel.barriers = barriers0; /* recorded, not run: a replay counts them */
    dev->tel.dispatches = dispatches0;
    return HL_OK;
fail:
    return st;
}

/* A product as a step: its main dispatch and, for split-K, the sum behind a barrier. */
static hl_status matmul_step(hl_device *dev, const hl_matmul_args *o, const char *who, hl_plan_step *s, hl_error *err) {
    hl_status st = HL_OK;
    if (!o->t_a || !o->t_b || !o->t_c || o->bias || o->c_in || o->signal_value)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: plans take tensors only (a, b, c and bias)", who);
    hl_product pl;
    HL_TRY(hl_product_plan(dev, o, who, &pl, err));
    memset(s, 0, sizeof *s);
    s->n_dispatch = pl.reduce_pipe ? 2 : 1;
    s->pipe[0] = pl.main_pipe;
    s->pipe[1] = pl.reduce_pipe;
    memcpy(s->grid[0], pl.grid, sizeof pl.grid);
    s->grid[1][0] = pl.rgrid[0];
    s->grid[1][1] = pl.rgrid[1];
    s->grid[1][2] = 1;
    memcpy(s->pc[0], pl.pc, sizeof pl.pc);
    memcpy(s->pc[1], pl.pc, sizeof pl.pc);
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

static hl_status layernorm_step(hl_device *dev, const hl_layernorm_args *a, hl_plan_step *s, hl_error *err) {
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
    memcpy(s->pc[0], pl.pc, sizeof pl.pc);
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

/* A LayerNorm of one row followed by the one-row product that reads its output, on
 * the matrix-vector kernel: one dispatch, every workgroup normalizing the row itself
 * as the kernel's head (matmul_gemv_ln.comp), workgroup 0 writing the norm's outputs;
 * the norm's step then records nothing. Rows of a multiple of 8 elements up to
 * GEMV_LN_MAX, fp32 tensors on 16 bytes and 16-bit ones on 8, and the product's own
 * conditions (hl_product_ln_head); anything else, or
 * HELIOS_DISABLE_PLAN_NORM_FUSION=1, keeps the two steps. */
static hl_status fuse_norm(hl_device *dev, const hl_plan_op *op, hl_plan_step *norm_s, hl_plan_step *s, hl_error *err) {
    hl_status st = HL_OK;
    const hl_layernorm_args *a = &op[0].layernorm;
    const hl_matmul_args *m = &op[1].matmul;
    if (!dev->norm_fused || op[0].kind != HL_PLAN_LAYERNORM || op[1].kind != HL_PLAN_MATMUL || m->t_a != a->h ||
        a->rows != 1 || a->d != m->k || a->d % 8 || a->d > GEMV_LN_MAX || a->dtype != m->in_dtype ||
        (a->r && !a->x_out) || s->n_dispatch != 1)
        return HL_OK;
    const hl_tensor *const wide[4] = {a->x, a->gamma, a->beta, a->x_out}, *const narrow[2] = {a->r, a->h};
    for (int k = 0; k < 4; k++)
        if (wide[k] && wide[k]->offset % 16) return HL_OK;
    for (int k = 0; k < 2; k++)
        if (narrow[k] && narrow[k]->offset % 8) return HL_OK;
    hl_product pl;
    int applies;
    HL_TRY(hl_product_plan(dev, m, "plan", &pl, err));
    HL_TRY(hl_product_ln_head(dev, m, &pl, a->r != NULL, a->eps, &applies, err));
    if (!applies) return HL_OK;
    s->pipe[0] = pl.main_pipe;
    memcpy(s->grid[0], pl.grid, sizeof pl.grid);
    memcpy(s->pc[0], pl.pc, sizeof pl.pc);
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

static hl_status op_step(hl_plan *p, const hl_plan_op *op, uint32_t i, hl_plan_step *s, hl_error *err) {
    char who[64];
    static const char *const names[] = {"matmul", "layernorm", "embed", "attention_decode", "top1"};
    if ((unsigned)op->kind > HL_PLAN_TOP1)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan op %u: unknown kind %d", i, (int)op->kind);
    snprintf(who, sizeof who, "plan op %u (%s)", i, names[op->kind]);
    switch (op->kind) {
        case HL_PLAN_MATMUL:
            return matmul_step(p->dev, &op->matmul, who, s, err);
        case HL_PLAN_LAYERNORM:
            return layernorm_step(p->dev, &op->layernorm, s, err);
        case HL_PLAN_EMBED:
            return hl_embed_step(p->dev, &op->embed, p->n_params, who, s, err);
        case HL_PLAN_ATTN_DECODE:
            return hl_attn_decode_step(p->dev, &op->attn, p->n_params, who, s, err);
        default:
            return hl_top1_step(p->dev, &op->top1, p->n_params, who, s, err);
    }
}

static hl_status build(hl_plan *p, const hl_plan_op *ops, hl_plan_step *steps, VkDescriptorSet *sets, hl_error *err) {
    hl_status st = HL_OK;
    hl_device *dev = p->dev;
    uint64_t w_bytes = 16, c_bytes = 0;
    VkDeviceSize *c_offset = calloc(p->ops, sizeof *c_offset);
    if (!c_offset) return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
    for (uint32_t i = 0; i < p->ops; i++) {
        hl_plan_step *s = &steps[i];
        HL_TRY(op_step(p, &ops[i], i, s, err));
        if (s->work_bytes > w_bytes) w_bytes = s->work_bytes;
    }
    for (uint32_t i = 0; i + 1 < p->ops; i++) HL_TRY(fuse_norm(dev, &ops[i], &steps[i], &steps[i + 1], err));
    for (uint32_t i = 0; i < p->ops; i++) {
        hl_plan_step *s = &steps[i];
        if (s->counter_words) {
            c_offset[i] = hl_align_up(c_bytes, dev->caps.storage_offset_alignment);
            c_bytes = c_offset[i] + 4ull * s->counter_words;
        }
        for (uint32_t k = 0; k < PLAN_KEEP; k++) keep_tensor(p, s->keep[k]);
        for (uint32_t r = 0; r < s->n_param_reads; r++) {
            const uint32_t w = s->param_read[r];
            if (!p->bound[w] || s->param_bound[r] < p->bound[w]) {
                p->bound[w] = s->param_bound[r];
                p->bound_op[w] = i;
            }
        }
    }
    HL_TRY(hl_buffer_create(dev, w_bytes, 0, &p->workspace, err));
    HL_TRY(hl_buffer_create(dev, 16 + 4ull * HL_PLAN_MAX_PARAMS, 1, &p->params, err));
    if (c_bytes) HL_TRY(hl_buffer_create(dev, c_bytes, 0, &p->counters, err));
    memset(p->params.mapped, 0, 4ull * HL_PLAN_MAX_PARAMS);
    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = HL_BINDINGS * p->ops};
    VkDescriptorPoolCreateInfo dpci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                       .maxSets = p->ops,
                                       .poolSizeCount = 1,
                                       .pPoolSizes = &ps};
    HL_VK(vkCreateDescriptorPool(dev->device, &dpci, NULL, &p->pool));
    for (uint32_t i = 0; i < p->ops; i++) {
        hl_plan_step *s = &steps[i];
        VkDescriptorSetAllocateInfo dsai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                            .descriptorPool = p->pool,
                                            .descriptorSetCount = 1,
                                            .pSetLayouts = &dev->ds_layout};
        HL_VK(vkAllocateDescriptorSets(dev->device, &dsai, &sets[i]));
        if (ops[i].kind == HL_PLAN_MATMUL) hl_product_bindings(&ops[i].matmul, p->workspace.buffer, s->binds);
        if (s->work_slot >= 0) s->binds[s->work_slot] = (hl_binding){p->workspace.buffer, 0};
        if (s->params_slot >= 0) s->binds[s->params_slot] = (hl_binding){p->params.buffer, 0};
        if (s->counter_words) s->binds[s->counter_slot] = (hl_binding){p->counters.buffer, c_offset[i]};
        hl_write_set(dev, sets[i], s->binds, s->n_binds);
    }
    if (dev->timestamps_ok) {
        VkQueryPoolCreateInfo qci = {
            .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 2};
        HL_VK(vkCreateQueryPool(dev->device, &qci, NULL, &p->queries));
    }
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = dev->cmd_pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    HL_VK(vkAllocateCommandBuffers(dev->device, &cai, &p->cmd));
    hazards *h = calloc(1, sizeof *h);
    if (!h) {
        st = hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
        goto fail;
    }
    st = record(p, steps, sets, h, err);
    free(h);
fail:
    free(c_offset);
    return st;
}

hl_status hl_plan_create(hl_device *dev, const hl_plan_op *ops, uint32_t n_ops, uint32_t n_params, hl_plan **out,
                         hl_error *err) {
    hl_status st = HL_OK;
    *out = NULL;
    if (!n_ops) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: no operations recorded");
    if (n_ops > PLAN_MAX_OPS)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: %u operations; at most %u", n_ops, PLAN_MAX_OPS);
    if (n_params > HL_PLAN_MAX_PARAMS)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: %u parameter words; at most %u", n_params,
                       HL_PLAN_MAX_PARAMS);
    if (dev->group_open)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: recorded outside an open group (it is a submission)");
    HL_TRY(hl_settle(dev, err));
    hl_plan *p = calloc(1, sizeof *p);
    hl_plan_step *steps = calloc(n_ops, sizeof *steps);
    VkDescriptorSet *sets = calloc(n_ops, sizeof *sets);
    if (p) p->tensors = calloc(PLAN_KEEP * (size_t)n_ops, sizeof *p->tensors);
    if (!p || !steps || !sets || !p->tensors) {
        st = hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
        if (p) free(p->tensors);
        free(p);
        p = NULL;
    } else {
        p->dev = dev;
        p->ops = n_ops;
        p->n_params = n_params;
        link(p);
        st = build(p, ops, steps, sets, err);
    }
    free(steps);
    free(sets);
    if (st != HL_OK) {
        hl_plan_destroy(p);
        return st;
    }
    *out = p;
    return HL_OK;
fail:
    return st;
}

hl_status hl_plan_params_write(hl_plan *p, uint32_t first, const uint32_t *words, uint32_t n, hl_error *err) {
    if (!p || !p->dev) return hl_fail(err, HL_ERR_DEVICE_CLOSED, "plan: its device was closed");
    if (first > p->n_params || n > p->n_params - first)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: parameter words %u..%u; the plan has %u", first, first + n,
                       p->n_params);
    if (p->dev->abandoned) {
        hl_error ignored;
        (void)hl_settle(p->dev, &ignored); /* an interrupted replay may still read them */
    }
    memcpy((uint32_t *)p->params.mapped + first, words, 4ull * n);
    return HL_OK;
}

hl_status hl_plan_params_read(const hl_plan *p, uint32_t first, uint32_t *words, uint32_t n, hl_error *err) {
    if (!p || !p->dev) return hl_fail(err, HL_ERR_DEVICE_CLOSED, "plan: its device was closed");
    if (first > p->n_params || n > p->n_params - first)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: parameter words %u..%u; the plan has %u", first, first + n,
                       p->n_params);
    memcpy(words, (const uint32_t *)p->params.mapped + first, 4ull * n);
    return HL_OK;
}

hl_status hl_plan_replay(hl_plan *p, hl_plan_run *run, hl_error *err) {
    hl_status st = HL_OK;
    const double t0 = hl_now_ms();
    hl_device *dev = p ? p->dev : NULL;
    if (!dev) return hl_fail(err, HL_ERR_DEVICE_CLOSED, "plan: its device was closed");
    if (dev->group_open)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: replayed inside an open group (it is a submission)");
    for (uint32_t i = 0; i < p->n_tensors; i++)
        if (p->tensors[i]->dev != dev) return hl_fail(err, HL_ERR_DEVICE_CLOSED, "plan: tensor %u it binds is gone", i);
    for (uint32_t w = 0; w < p->n_params; w++) {
        const uint32_t v = ((const uint32_t *)p->params.mapped)[w];
        if (p->bound[w] && v >= p->bound[w])
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                           "plan: parameter word %u is %u; op %u reads it as a row of %u (a position past its cache or "
                           "a token past its table)",
                           w, v, p->bound_op[w], p->bound[w]);
    }
    HL_TRY(hl_settle(dev, err)); /* the command buffer and fence may still be an interrupted replay's */
    HL_TRY(hl_submit_cmd(dev, p->cmd, err));
    const double t_sub = hl_now_ms();
    HL_TRY(hl_wait_fence(dev, err));
    run->host_ms = t_sub - t0;
    run->wall_ms = hl_now_ms() - t0;
    run->gpu_ms = 0.0;
    if (p->queries) {
        uint64_t ts[2];
        HL_VK(vkGetQueryPoolResults(dev->device, p->queries, 0, 2, sizeof ts, ts, sizeof ts[0],
                                    VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
        run->gpu_ms = hl_ticks_ms(dev, ts[0], ts[1]);
    }
    dev->tel.dispatches += p->dispatches;
    dev->tel.barriers += p->barriers;
    dev->tel.submit_wait_ms += run->wall_ms;
    return HL_OK;
fail:
    return st;
}

void hl_plan_counts(const hl_plan *p, uint32_t *ops, uint32_t *dispatches, uint32_t *barriers) {
    *ops = p->ops;
    *dispatches = p->dispatches;
    *barriers = p->barriers;
}

int hl_plan_alive(const hl_plan *p) { return p && p->dev; }

void hl_plan_destroy(hl_plan *p) {
    if (!p) return;
    release(p);
    free(p->tensors);
    free(p);
}

void hl_plans_release(hl_device *dev) {
    while (dev->plans) release(dev->plans);
}

void hl_plans_detach(hl_device *dev) {
    while (dev->plans) {
        hl_plan *p = dev->plans;
        unlink_plan(p);
        p->dev = NULL;
    }
}
