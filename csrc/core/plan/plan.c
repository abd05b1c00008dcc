/* plan.c — replayable plans (helios_plan.h): operations on tensors, each validated
 * into a step (plan_ops.h), recorded once into a command buffer, descriptor sets,
 * workspace and parameter words of their own; a replay is one submission of that
 * buffer and one wait. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_ops.h"

#define PLAN_KEEP 8                                /* tensors a step binds, at most */
#define PARAM_BYTES (16 + 4u * HL_PLAN_MAX_PARAMS) /* then the grids' dispatch arguments, 12 bytes each */
#define STEP_SETS (HL_PERSIST_SET + 1u)            /* descriptor sets a step binds: set 0 and a run's members' set */
/* A run's attention past this many passes of the grid over its splits is slower than
 * one of its own (results/h200-splits/twin-edge: even at 2.06 passes, 2% slower at 2.1,
 * 5% at 2.6). */
#define LONG_ROUNDS 2u

struct hl_plan {
    hl_device *dev; /* NULL once the device closed */
    VkCommandBuffer cmd;
    VkDescriptorPool pool;
    VkQueryPool queries;     /* two timestamps around the plan, where the queue has them */
    hl_buffer workspace;     /* split-K and attention partial sums, the slot a product without a bias binds */
    hl_buffer params;        /* the parameter words and the grids' arguments, host-visible and mapped */
    hl_buffer counters;      /* the steps' own words, zeroed at the start of each replay (0 bytes: none) */
    hl_buffer persist_table; /* the persistent runs' tables (plan_persist.c), written at the start of each replay */
    uint32_t *persist_host, persist_bytes;
    hl_plan_runs runs;     /* its persistent runs: how many, their attentions */
    int persist_attention; /* attentions may be members (the plan; not its long-context twin) */
    struct hl_plan *twin;  /* the same ops with no attention in a run, replayed past LONG_ROUNDS */
    struct hl_plan *last;  /* the one replayed last: its parameter words are the ones written */
    uint32_t n_params;
    /* each word's tightest bound (0: none), the op that sets it and that op's kind */
    uint32_t bound[HL_PLAN_MAX_PARAMS], bound_op[HL_PLAN_MAX_PARAMS], bound_kind[HL_PLAN_MAX_PARAMS];
    hl_tensor **tensors; /* every tensor bound, checked before each replay */
    uint32_t n_tensors;
    uint32_t ops, dispatches, barriers;
    uint32_t *grids, n_grids; /* per grid read at replay: its x, parameter word and divisor */
    struct hl_plan *prev, *next;
};

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
    hl_buffer_destroy(dev, &p->persist_table);
    p->cmd = VK_NULL_HANDLE;
    p->pool = VK_NULL_HANDLE;
    p->queries = VK_NULL_HANDLE;
    unlink_plan(p);
    p->dev = NULL;
}

/* ds: the step's set 0 and, heading a run, its members' set (else VK_NULL_HANDLE); args:
 * the buffer holding the first dispatch's arguments at offset at (VK_NULL_HANDLE: its
 * grid as recorded). */
static void record_step(hl_device *dev, VkCommandBuffer cmd, const hl_plan_step *s, const VkDescriptorSet ds[STEP_SETS],
                        VkBuffer args, VkDeviceSize at) {
    if (!s->n_dispatch) return; /* a norm run as its product's head */
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dev->pipe_layout, 0,
                            ds[HL_PERSIST_SET] ? STEP_SETS : 1, ds, 0, NULL);
    for (uint32_t d = 0; d < s->n_dispatch; d++) {
        if (d)
            hl_cmd_barrier_on(dev, cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, s->pipe[d]);
        vkCmdPushConstants(cmd, dev->pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, HL_PUSH_BYTES, s->pc[d].words);
        if (d == 0 && args)
            vkCmdDispatchIndirect(cmd, args, at);
        else
            vkCmdDispatch(cmd, s->grid[d][0], s->grid[d][1], s->grid[d][2]);
        dev->tel.dispatches++;
    }
}

static hl_status record(hl_plan *p, const hl_plan_step *steps, const VkDescriptorSet *sets, hl_plan_hazards *h,
                        hl_error *err) {
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
    for (uint32_t at = 0; at < p->persist_bytes; at += 65536) /* vkCmdUpdateBuffer's most */
        vkCmdUpdateBuffer(p->cmd, p->persist_table.buffer, at,
                          p->persist_bytes - at < 65536 ? p->persist_bytes - at : 65536,
                          (const char *)p->persist_host + at);
    /* What earlier submissions wrote (uploads, copies, the last replay) and the zeroed
     * counters are read now. */
    hl_cmd_barrier_on(dev, p->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                      VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                      VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    int params_written = p->runs.trace_words > 0; /* the host reads a trace's stamps too */
    uint32_t grid = 0;
    for (uint32_t i = 0; i < p->ops; i++) {
        /* a persistent run: one dispatch for the steps it spans, its own grid barriers
         * between them, a pipeline barrier before it where any of them needs one */
        const uint32_t span = steps[i].persist_len ? steps[i].persist_len : 1;
        int barrier = 0;
        for (uint32_t j = i; j < i + span; j++) barrier |= hl_plan_needs_barrier(h, &steps[j]);
        if (barrier) {
            hl_cmd_barrier_on(dev, p->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                              VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
            hl_plan_hazards_clear(h);
        }
        for (uint32_t j = i; j < i + span; j++) {
            hl_plan_note(h, &steps[j]);
            params_written |= steps[j].param_write >= 0;
        }
        const int read_grid = steps[i].grid_div > 0;
        record_step(dev, p->cmd, &steps[i], &sets[STEP_SETS * i], read_grid ? p->params.buffer : VK_NULL_HANDLE,
                    PARAM_BYTES + 12ull * grid);
        grid += read_grid;
        i += span - 1;
    }
    if (p->runs.trace_words) hl_plan_persist_trace_copy(dev, p->cmd, steps, p->ops, p->params.buffer);
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

/* The grids read at replay: a step's, where no step writes the word it is sized by (the
 * host writes the arguments before the submission, from the word as it is then). */
static hl_status grids_of(hl_plan *p, hl_plan_step *steps, hl_error *err) {
    uint32_t written = 0;
    for (uint32_t i = 0; i < p->ops; i++)
        if (steps[i].param_write >= 0) written |= 1u << steps[i].param_write;
    for (uint32_t i = 0; i < p->ops; i++) {
        hl_plan_step *s = &steps[i];
        if (s->grid_div && (written >> s->grid_slot & 1u)) s->grid_div = 0;
        p->n_grids += s->grid_div > 0;
    }
    if (!p->n_grids) return HL_OK;
    p->grids = malloc(3ull * p->n_grids * sizeof *p->grids);
    if (!p->grids) return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
    for (uint32_t i = 0, g = 0; i < p->ops; i++) {
        if (!steps[i].grid_div) continue;
        p->grids[3 * g] = steps[i].grid[0][0];
        p->grids[3 * g + 1] = steps[i].grid_slot;
        p->grids[3 * g + 2] = steps[i].grid_div;
        g++;
    }
    return HL_OK;
}

/* The products' buffers, then each persistent run's: its members' and its table. */
static void bind_products(hl_plan *p, const hl_plan_op *ops, hl_plan_step *steps, const VkDeviceSize *t_offset) {
    for (uint32_t i = 0; i < p->ops; i++)
        if (ops[i].kind == HL_PLAN_MATMUL) hl_plan_product_bindings(&ops[i], &steps[i], p->workspace.buffer);
    for (uint32_t i = 0; i < p->ops; i++)
        if (steps[i].persist_len)
            hl_plan_persist_bind(steps, i, (hl_binding){p->persist_table.buffer, t_offset[i]},
                                 (hl_binding){p->workspace.buffer, 0});
}

/* Step s's set 0 from the plan's pool, its bindings written; heading a run, also its
 * members' set (ds[HL_PERSIST_SET], else VK_NULL_HANDLE). */
static hl_status step_sets(hl_plan *p, const hl_plan_step *s, VkDescriptorSet ds[STEP_SETS], hl_error *err) {
    hl_status st = HL_OK;
    hl_device *dev = p->dev;
    VkDescriptorSetAllocateInfo dsai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                        .descriptorPool = p->pool,
                                        .descriptorSetCount = 1,
                                        .pSetLayouts = &dev->ds_layout};
    HL_VK(vkAllocateDescriptorSets(dev->device, &dsai, &ds[0]));
    hl_write_set(dev, ds[0], s->binds, s->n_binds);
    ds[HL_PERSIST_SET] = VK_NULL_HANDLE;
    if (!s->persist_len) return HL_OK;
    dsai.pSetLayouts = &dev->ds_layout_persist;
    HL_VK(vkAllocateDescriptorSets(dev->device, &dsai, &ds[HL_PERSIST_SET]));
    hl_plan_persist_write(dev, ds[HL_PERSIST_SET], s);
fail:
    return st;
}

/* Long: a plan made in the order each part needs the last (steps, fusions, runs, grids,
 * buffers, bindings, sets, the recording), one flow read top to bottom. */
static hl_status build(hl_plan *p, const hl_plan_op *ops, hl_plan_step *steps, VkDescriptorSet *sets, hl_error *err) {
    hl_status st = HL_OK;
    hl_device *dev = p->dev;
    uint64_t w_bytes = 16, c_bytes = 0;
    VkDeviceSize *c_offset = calloc(p->ops, sizeof *c_offset), *t_offset = calloc(p->ops, sizeof *t_offset);
    if (!c_offset || !t_offset) {
        free(c_offset);
        free(t_offset);
        return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    for (uint32_t i = 0; i < p->ops; i++) {
        hl_plan_step *s = &steps[i];
        HL_TRY(hl_plan_op_step(dev, &ops[i], i, p->n_params, s, err));
        if (s->work_bytes > w_bytes) w_bytes = s->work_bytes;
    }
    HL_TRY(hl_plan_fuse(dev, ops, p->ops, steps, err));
    HL_TRY(hl_plan_persist_runs(dev, ops, steps, p->ops, p->persist_attention, &p->runs, err)); /* grids: after */
    HL_TRY(grids_of(p, steps, err));
    p->runs.trace_base = (PARAM_BYTES + 12u * p->n_grids + 15u) / 16u * 4u; /* past the grids', on 16 bytes */
    if (dev->plan_policy.trace) p->runs.trace_words = hl_plan_persist_trace(steps, p->ops, p->runs.trace_base);
    HL_TRY(hl_plan_persist_tables(steps, p->ops, dev->caps.storage_offset_alignment, t_offset, &p->persist_host,
                                  &p->persist_bytes, err));
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
                p->bound_kind[w] = (uint32_t)ops[i].kind;
            }
        }
    }
    HL_TRY(hl_buffer_create(dev, w_bytes, 0, &p->workspace, err));
    HL_TRY(hl_buffer_create(dev, 4ull * (p->runs.trace_base + p->runs.trace_words), 1, &p->params, err));
    if (c_bytes) HL_TRY(hl_buffer_create(dev, c_bytes, 0, &p->counters, err));
    if (p->persist_bytes) HL_TRY(hl_buffer_create(dev, p->persist_bytes, 0, &p->persist_table, err));
    bind_products(p, ops, steps, t_offset);
    memset(p->params.mapped, 0, 4ull * HL_PLAN_MAX_PARAMS);
    if (p->runs.trace_words) hl_plan_persist_trace_headers(steps, p->ops, p->params.mapped);
    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                               .descriptorCount = HL_SET_DESCRIPTORS * p->ops + HL_PERSIST_SLOTS * p->runs.n};
    VkDescriptorPoolCreateInfo dpci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                       .maxSets = p->ops + p->runs.n,
                                       .poolSizeCount = 1,
                                       .pPoolSizes = &ps};
    HL_VK(vkCreateDescriptorPool(dev->device, &dpci, NULL, &p->pool));
    for (uint32_t i = 0; i < p->ops; i++) {
        hl_plan_step *s = &steps[i];
        if (s->work_slot >= 0) s->binds[s->work_slot] = (hl_binding){p->workspace.buffer, 0};
        if (s->params_slot >= 0) s->binds[s->params_slot] = (hl_binding){p->params.buffer, 0};
        if (s->counter_words) s->binds[s->counter_slot] = (hl_binding){p->counters.buffer, c_offset[i]};
        HL_TRY(step_sets(p, s, &sets[STEP_SETS * i], err));
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
    hl_plan_hazards *h = calloc(1, sizeof *h);
    if (!h) {
        st = hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
        goto fail;
    }
    h->set = hl_hazard_set_over(h->read, h->written, HL_STEP_READS * HL_PLAN_MAX_OPS);
    st = record(p, steps, sets, h, err);
    free(h);
fail:
    free(c_offset);
    free(t_offset);
    return st;
}

/* One recording of the ops (attention: its decode attentions may be members of runs). */
static hl_status create_one(hl_device *dev, const hl_plan_op *ops, uint32_t n_ops, uint32_t n_params, int attention,
                            hl_plan **out, hl_error *err) {
    hl_status st = HL_OK;
    hl_plan *p = calloc(1, sizeof *p);
    hl_plan_step *steps = calloc(n_ops, sizeof *steps);
    VkDescriptorSet *sets = calloc((uint64_t)STEP_SETS * n_ops, sizeof *sets); /* a step's set 0, and its run's */
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
        p->persist_attention = attention;
        link(p);
        st = build(p, ops, steps, sets, err);
    }
    for (uint32_t i = 0; steps && i < n_ops; i++) free(steps[i].run);
    free(steps);
    free(sets);
    if (st != HL_OK) {
        hl_plan_destroy(p);
        return st;
    }
    *out = p;
    return HL_OK;
}

/* Where its runs hold attentions, a plan is recorded twice: the attentions in the runs,
 * and a twin with each attention a dispatch of its own, which a replay takes once the
 * attentions' splits are more than LONG_ROUNDS passes of the run's grid. */
hl_status hl_plan_create(hl_device *dev, const hl_plan_op *ops, uint32_t n_ops, uint32_t n_params, hl_plan **out,
                         hl_error *err) {
    hl_status st = HL_OK;
    *out = NULL;
    if (!n_ops) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: no operations recorded");
    if (n_ops > HL_PLAN_MAX_OPS)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: %u operations; at most %u", n_ops, HL_PLAN_MAX_OPS);
    if (n_params > HL_PLAN_MAX_PARAMS)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: %u parameter words; at most %u", n_params,
                       HL_PLAN_MAX_PARAMS);
    if (dev->group.open) /* a plan is a submission of its own */
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: recorded inside an open group; record it after it closes");
    HL_TRY(hl_settle(dev, err));
    hl_plan *p;
    HL_TRY(create_one(dev, ops, n_ops, n_params, 1, &p, err));
    if (p->runs.attentions && (st = create_one(dev, ops, n_ops, n_params, 0, &p->twin, err)) != HL_OK) {
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
    if (p->twin) memcpy((uint32_t *)p->twin->params.mapped + first, words, 4ull * n);
    return HL_OK;
}

hl_status hl_plan_params_read(const hl_plan *p, uint32_t first, uint32_t *words, uint32_t n, hl_error *err) {
    if (!p || !p->dev) return hl_fail(err, HL_ERR_DEVICE_CLOSED, "plan: its device was closed");
    if (first > p->n_params || n > p->n_params - first)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: parameter words %u..%u; the plan has %u", first, first + n,
                       p->n_params);
    memcpy(words, (const uint32_t *)(p->last ? p->last : p)->params.mapped + first, 4ull * n);
    return HL_OK;
}

static hl_status replay_one(hl_plan *p, hl_plan_run *run, hl_error *err) {
    hl_status st = HL_OK;
    const double t0 = hl_now_ms();
    hl_device *dev = p ? p->dev : NULL;
    if (!dev) return hl_fail(err, HL_ERR_DEVICE_CLOSED, "plan: its device was closed");
    if (dev->group.open)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: replayed inside an open group (it is a submission)");
    for (uint32_t i = 0; i < p->n_tensors; i++)
        if (p->tensors[i]->dev != dev) return hl_fail(err, HL_ERR_DEVICE_CLOSED, "plan: tensor %u it binds is gone", i);
    for (uint32_t w = 0; w < p->n_params; w++) {
        const uint32_t v = ((const uint32_t *)p->params.mapped)[w];
        if (p->bound[w] && v >= p->bound[w])
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                           "plan: parameter word %u is %u; op %u (%s) reads it as a row of %u (a position past its "
                           "cache or a token past its table)",
                           w, v, p->bound_op[w], hl_plan_kind_name((hl_plan_kind)p->bound_kind[w]), p->bound[w]);
    }
    HL_TRY(hl_settle(dev, err)); /* the command buffer and fence may still be an interrupted replay's */
    uint32_t *args = (uint32_t *)((char *)p->params.mapped + PARAM_BYTES);
    for (uint32_t g = 0; g < p->n_grids; g++) {
        const uint32_t *gr = &p->grids[3 * g], word = ((const uint32_t *)p->params.mapped)[gr[1]];
        args[3 * g] = gr[0];
        args[3 * g + 1] = word / gr[2] + 1;
        args[3 * g + 2] = 1;
    }
    uint32_t *fault = (uint32_t *)p->params.mapped + HL_PLAN_FAULT_WORD;
    *fault = 0;
    HL_TRY(hl_submit_cmd(dev, p->cmd, err));
    const double t_sub = hl_now_ms();
    HL_TRY(hl_wait_fence(dev, err));
    if (*fault)
        return hl_fail(err, HL_ERR_TIMEOUT,
                       "plan: a persistent run's workgroups were not all resident (its grid barrier gave up): its "
                       "outputs are wrong; HELIOS_PLAN_PERSISTENT_GRID=n sets a smaller grid, "
                       "HELIOS_DISABLE_PLAN_PERSISTENT=1 runs the products apart");
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

hl_status hl_plan_replay(hl_plan *p, hl_plan_run *run, hl_error *err) {
    hl_plan *q = p;
    if (p && p->dev && p->twin) {
        const uint64_t pos = ((const uint32_t *)p->params.mapped)[p->runs.pos_slot];
        const uint64_t splits = hl_decode_splits((uint32_t)pos, p->runs.fit, p->runs.head_dim);
        if (p->runs.heads * splits > (uint64_t)LONG_ROUNDS * p->runs.grid) q = p->twin;
    }
    if (p && p->last && p->last != q && p->last->dev) /* the words the other one's ops wrote */
        memcpy(q->params.mapped, p->last->params.mapped, 4ull * p->n_params);
    hl_status st = replay_one(q, run, err);
    if (st == HL_OK) p->last = q;
    return st;
}

void hl_plan_counts(const hl_plan *p, uint32_t *ops, uint32_t *dispatches, uint32_t *barriers, uint32_t *grid) {
    *ops = p->ops, *dispatches = p->dispatches, *barriers = p->barriers, *grid = p->runs.grid_barriers;
}

void hl_plan_run_shape(const hl_plan *p, uint32_t *runs, uint32_t *grid, uint32_t *registers) {
    *runs = p->runs.n, *grid = p->runs.n ? p->runs.grid : 0, *registers = p->runs.registers;
}

uint32_t hl_plan_trace(const hl_plan *p, const uint32_t **words) {
    const hl_plan *q = p->last ? p->last : p;
    *words = (const uint32_t *)q->params.mapped + q->runs.trace_base;
    return q->dev ? q->runs.trace_words : 0;
}

int hl_plan_alive(const hl_plan *p) { return p && p->dev; }

void hl_plan_destroy(hl_plan *p) {
    if (!p) return;
    hl_plan_destroy(p->twin);
    release(p);
    free(p->tensors);
    free(p->grids);
    free(p->persist_host);
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
