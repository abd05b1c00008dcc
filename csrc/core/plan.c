/* plan.c — replayable plans (helios_plan.h): products on tensors recorded once into
 * a command buffer, descriptor sets and workspace of their own; a replay is one
 * submission of that buffer and one wait. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helios_plan.h"
#include "product.h"

#define PLAN_MAX_OPS 4096

struct hl_plan {
    hl_device *dev; /* NULL once the device closed */
    VkCommandBuffer cmd;
    VkDescriptorPool pool;
    VkQueryPool queries; /* two timestamps around the plan, where the queue has them */
    hl_buffer workspace; /* split-K partial sums, and the slot a product without a bias binds */
    hl_tensor **tensors; /* every tensor bound, checked before each replay */
    uint32_t n_tensors;
    uint32_t ops, dispatches, barriers;
    struct hl_plan *prev, *next;
};

/* What the operations since the last barrier touched: the next one waits behind a
 * barrier only when it reads or writes what they wrote, or writes what they read. */
typedef struct hazards {
    const hl_tensor *read[4 * PLAN_MAX_OPS], *written[PLAN_MAX_OPS];
    uint32_t n_read, n_written;
    int workspace; /* a split-K product wrote the shared workspace */
} hazards;

static int touches(const hl_tensor *const *set, uint32_t n, const hl_tensor *t) {
    for (uint32_t i = 0; t && i < n; i++)
        if (hl_tensors_share(set[i], t)) return 1;
    return 0;
}

static int needs_barrier(const hazards *h, const hl_matmul_args *o, const hl_product *pl) {
    const hl_tensor *reads[4] = {o->t_a, o->t_b, o->t_bias, pl->read_c ? o->t_c : NULL};
    for (int i = 0; i < 4; i++)
        if (touches(h->written, h->n_written, reads[i])) return 1;
    if (touches(h->written, h->n_written, o->t_c) || touches(h->read, h->n_read, o->t_c)) return 1;
    return pl->reduce_pipe && h->workspace;
}

static void note(hazards *h, const hl_matmul_args *o, const hl_product *pl) {
    const hl_tensor *reads[4] = {o->t_a, o->t_b, o->t_bias, pl->read_c ? o->t_c : NULL};
    for (int i = 0; i < 4; i++)
        if (reads[i]) h->read[h->n_read++] = reads[i];
    h->written[h->n_written++] = o->t_c;
    h->workspace |= pl->reduce_pipe != VK_NULL_HANDLE;
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
    p->cmd = VK_NULL_HANDLE;
    p->pool = VK_NULL_HANDLE;
    p->queries = VK_NULL_HANDLE;
    unlink_plan(p);
    p->dev = NULL;
}

static hl_status record(hl_plan *p, const hl_matmul_args *ops, const hl_product *plans, const VkDescriptorSet *sets,
                        hazards *h, hl_error *err) {
    hl_status st = HL_OK;
    hl_device *dev = p->dev;
    const uint64_t barriers0 = dev->tel.barriers, dispatches0 = dev->tel.dispatches;
    VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    HL_VK(vkBeginCommandBuffer(p->cmd, &cbi));
    if (p->queries) {
        vkCmdResetQueryPool(p->cmd, p->queries, 0, 2);
        vkCmdWriteTimestamp(p->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, p->queries, 0);
    }
    /* What earlier submissions wrote (uploads, copies, the last replay) is read now. */
    hl_cmd_barrier_on(dev, p->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                      VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                      VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    for (uint32_t i = 0; i < p->ops; i++) {
        if (needs_barrier(h, &ops[i], &plans[i])) {
            hl_cmd_barrier_on(dev, p->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                              VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
            memset(h, 0, sizeof *h);
        }
        note(h, &ops[i], &plans[i]);
        hl_product_record(dev, p->cmd, &plans[i], sets[i]);
    }
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

static hl_status build(hl_plan *p, const hl_matmul_args *ops, hl_product *plans, VkDescriptorSet *sets, hl_error *err) {
    hl_status st = HL_OK;
    hl_device *dev = p->dev;
    uint64_t w_bytes = 16;
    for (uint32_t i = 0; i < p->ops; i++) {
        const hl_matmul_args *o = &ops[i];
        char who[48];
        snprintf(who, sizeof who, "plan op %u", i);
        if (!o->t_a || !o->t_b || !o->t_c || o->bias || o->c_in || o->signal_value)
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: plans take tensors only (a, b, c and bias)", who);
        HL_TRY(hl_product_plan(dev, o, who, &plans[i], err));
        if (plans[i].w_bytes > w_bytes) w_bytes = plans[i].w_bytes;
        hl_tensor *ts[4] = {o->t_a, o->t_b, o->t_c, o->t_bias};
        for (int k = 0; k < 4; k++) keep_tensor(p, ts[k]);
    }
    HL_TRY(hl_buffer_create(dev, w_bytes, 0, &p->workspace, err));
    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = HL_BINDINGS * p->ops};
    VkDescriptorPoolCreateInfo dpci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                       .maxSets = p->ops,
                                       .poolSizeCount = 1,
                                       .pPoolSizes = &ps};
    HL_VK(vkCreateDescriptorPool(dev->device, &dpci, NULL, &p->pool));
    for (uint32_t i = 0; i < p->ops; i++) {
        VkDescriptorSetAllocateInfo dsai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                            .descriptorPool = p->pool,
                                            .descriptorSetCount = 1,
                                            .pSetLayouts = &dev->ds_layout};
        HL_VK(vkAllocateDescriptorSets(dev->device, &dsai, &sets[i]));
        hl_binding bufs[HL_BIND_MATMUL_COUNT];
        hl_product_bindings(&ops[i], p->workspace.buffer, bufs);
        hl_write_set(dev, sets[i], bufs, HL_BIND_MATMUL_COUNT);
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
    if (!h) return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
    st = record(p, ops, plans, sets, h, err);
    free(h);
    return st;
fail:
    return st;
}

hl_status hl_plan_create(hl_device *dev, const hl_matmul_args *ops, uint32_t n_ops, hl_plan **out, hl_error *err) {
    hl_status st = HL_OK;
    *out = NULL;
    if (!n_ops) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: no operations recorded");
    if (n_ops > PLAN_MAX_OPS)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: %u operations; at most %u", n_ops, PLAN_MAX_OPS);
    if (dev->group_open)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: recorded outside an open group (it is a submission)");
    HL_TRY(hl_settle(dev, err));
    hl_plan *p = calloc(1, sizeof *p);
    hl_product *plans = calloc(n_ops, sizeof *plans);
    VkDescriptorSet *sets = calloc(n_ops, sizeof *sets);
    if (p) p->tensors = calloc(4 * (size_t)n_ops, sizeof *p->tensors);
    if (!p || !plans || !sets || !p->tensors) {
        st = hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
    } else {
        p->dev = dev;
        p->ops = n_ops;
        link(p);
        st = build(p, ops, plans, sets, err);
    }
    free(plans);
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

hl_status hl_plan_replay(hl_plan *p, hl_plan_run *run, hl_error *err) {
    hl_status st = HL_OK;
    const double t0 = hl_now_ms();
    hl_device *dev = p ? p->dev : NULL;
    if (!dev) return hl_fail(err, HL_ERR_DEVICE_CLOSED, "plan: its device was closed");
    if (dev->group_open)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "plan: replayed inside an open group (it is a submission)");
    for (uint32_t i = 0; i < p->n_tensors; i++)
        if (p->tensors[i]->dev != dev) return hl_fail(err, HL_ERR_DEVICE_CLOSED, "plan: tensor %u it binds is gone", i);
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
