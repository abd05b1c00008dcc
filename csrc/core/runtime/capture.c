/* capture.c — captures (helios_capture.h): the ordered operations called while one
 * records go through exec.c's ordered recorder into the capture's own command buffer
 * (recorded once, submitted again for each replay), with descriptor sets from pools
 * of its own and, for an operation that binds one of the device's scratch buffers
 * (split-K's workspace, attention's per-row words), a buffer of its own in its place:
 * the device's may grow, and a grown buffer is a new one, which a recording made
 * earlier would not see. */
#include <stdlib.h>
#include <string.h>

#include "helios_capture.h"
#include "internal.h"

#define CAPTURE_POOL_SETS 256u /* descriptor sets a pool holds; another pool when one is full */
#define CAPTURE_MAX_POOLS 64u
#define CAPTURE_MAX_SCRATCH 1024u

struct hl_capture {
    hl_device *dev; /* NULL once the device closed */
    VkCommandBuffer cmd;
    VkQueryPool queries; /* two timestamps around the replay, where the queue has them */
    VkDescriptorPool pools[CAPTURE_MAX_POOLS];
    uint32_t n_pools, sets_left;
    hl_buffer *scratch; /* CAPTURE_MAX_SCRATCH buffers, n_scratch made */
    uint32_t n_scratch;
    uint32_t ops, dispatches, barriers;
    uint64_t dispatches0, barriers0; /* the device's counts when recording began */
    int ended, submitted;            /* recorded whole; replayed at least once */
    struct hl_capture *prev, *next;
};

static void link(hl_capture *c) {
    c->next = c->dev->captures;
    if (c->next) c->next->prev = c;
    c->dev->captures = c;
}

static void unlink_capture(hl_capture *c) {
    if (c->prev)
        c->prev->next = c->next;
    else if (c->dev)
        c->dev->captures = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

/* Its Vulkan objects, once nothing runs them (every submission of it finished). */
static void release(hl_capture *c) {
    hl_device *dev = c->dev;
    if (!dev) return;
    hl_error ignored;
    if (dev->abandoned) (void)hl_settle(dev, &ignored);
    if (c->submitted) hl_async_quiesce(dev); /* an ordered replay may still run */
    if (dev->capturing == c) dev->capturing = NULL;
    if (c->cmd) vkFreeCommandBuffers(dev->device, dev->cmd_pool, 1, &c->cmd);
    for (uint32_t i = 0; i < c->n_pools; i++) vkDestroyDescriptorPool(dev->device, c->pools[i], NULL);
    if (c->queries) vkDestroyQueryPool(dev->device, c->queries, NULL);
    for (uint32_t i = 0; i < c->n_scratch; i++) hl_buffer_destroy(dev, &c->scratch[i]);
    c->cmd = VK_NULL_HANDLE;
    c->queries = VK_NULL_HANDLE;
    c->n_pools = c->n_scratch = 0;
    unlink_capture(c);
    c->dev = NULL;
}

void hl_capture_destroy(hl_capture *c) {
    if (!c) return;
    release(c);
    free(c->scratch);
    free(c);
}

hl_status hl_capture_begin(hl_device *dev, hl_error *err) {
    hl_status st = HL_OK;
    if (dev->capturing) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "capture: one is already recording");
    if (dev->group.open)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "capture: a group is open (a capture is a submission of its own)");
    if (dev->profile.on)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "capture: per-op profiling is on (its timestamps cannot be replayed); stop it first");
    hl_capture *c = NULL; /* a failed settle reaches fail: with nothing to release */
    HL_TRY(hl_settle(dev, err));
    c = calloc(1, sizeof *c);
    hl_buffer *scratch = calloc(CAPTURE_MAX_SCRATCH, sizeof *scratch);
    if (!c || !scratch) {
        free(c);
        free(scratch);
        return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    c->dev = dev;
    c->scratch = scratch;
    link(c);
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = dev->cmd_pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    HL_VK(vkAllocateCommandBuffers(dev->device, &cai, &c->cmd));
    if (dev->timestamps_ok) {
        VkQueryPoolCreateInfo qci = {
            .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 2};
        HL_VK(vkCreateQueryPool(dev->device, &qci, NULL, &c->queries));
    }
    /* Simultaneous use: an ordered replay may be submitted while the one before is
     * still pending (the timeline orders them; they never run at once). */
    VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT};
    HL_VK(vkBeginCommandBuffer(c->cmd, &cbi));
    if (c->queries) {
        vkCmdResetQueryPool(c->cmd, c->queries, 0, 2);
        vkCmdWriteTimestamp(c->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, c->queries, 0);
    }
    /* What earlier submissions wrote (uploads, CUDA's work, the last replay) is read now. */
    hl_cmd_barrier_on(dev, c->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                      VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                      VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    hl_hazard_clear(&dev->group.hazards);
    c->dispatches0 = dev->tel.dispatches;
    c->barriers0 = dev->tel.barriers;
    dev->capturing = c;
    return HL_OK;
fail:
    hl_capture_destroy(c);
    return st;
}

/* A descriptor set from the capture's pools (a new pool when the last is full). */
static hl_status capture_set(hl_capture *c, VkDescriptorSet *ds, hl_error *err) {
    hl_status st = HL_OK;
    hl_device *dev = c->dev;
    if (!c->sets_left) {
        if (c->n_pools == CAPTURE_MAX_POOLS)
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "capture: more than %u operations",
                           CAPTURE_MAX_POOLS * CAPTURE_POOL_SETS);
        VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                   .descriptorCount = HL_SET_DESCRIPTORS * CAPTURE_POOL_SETS};
        VkDescriptorPoolCreateInfo dpci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                           .maxSets = CAPTURE_POOL_SETS,
                                           .poolSizeCount = 1,
                                           .pPoolSizes = &ps};
        HL_VK(vkCreateDescriptorPool(dev->device, &dpci, NULL, &c->pools[c->n_pools]));
        c->n_pools++;
        c->sets_left = CAPTURE_POOL_SETS;
    }
    VkDescriptorSetAllocateInfo dai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                       .descriptorPool = c->pools[c->n_pools - 1],
                                       .descriptorSetCount = 1,
                                       .pSetLayouts = &dev->ds_layout};
    HL_VK(vkAllocateDescriptorSets(dev->device, &dai, ds));
    c->sets_left--;
fail:
    return st;
}

hl_status hl_capture_record(hl_device *dev, hl_exec *x, hl_error *err) {
    hl_status st = HL_OK;
    hl_capture *c = dev->capturing;
    if (x->iters || !x->record || !x->n_operands || x->signal_value)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "capture: records untimed operations on tensors (no timing, chains, transfers or "
                       "wait/signal values of their own)");
    for (uint32_t i = 0; i < x->n_operands; i++)
        if (!x->operands[i].tensor && (x->operands[i].upload || x->operands[i].download))
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "capture: operand %u is host data; a capture takes tensors",
                           i);
    for (uint32_t i = 0; i < x->n_operands; i++) {
        hl_operand *o = &x->operands[i];
        if (o->tensor || !o->scratch) continue;
        if (c->n_scratch == CAPTURE_MAX_SCRATCH)
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "capture: more than %u scratch buffers", CAPTURE_MAX_SCRATCH);
        HL_TRY(hl_buffer_create(dev, hl_align_up(o->bytes ? o->bytes : 16, 16), 0, &c->scratch[c->n_scratch], err));
        o->scratch = &c->scratch[c->n_scratch++];
    }
    VkDescriptorSet ds = VK_NULL_HANDLE;
    if (x->n_slots) HL_TRY(capture_set(c, &ds, err));
    HL_TRY(hl_exec_record(dev, c->cmd, ds, 1, x, err));
    c->ops++;
fail:
    return st;
}

void hl_capture_abort(hl_device *dev) {
    hl_capture *c = dev->capturing;
    if (!c) return;
    dev->capturing = NULL;
    vkEndCommandBuffer(c->cmd); /* never submitted: its state does not matter once freed */
    dev->tel.dispatches = c->dispatches0;
    dev->tel.barriers = c->barriers0;
    hl_capture_destroy(c);
}

hl_status hl_capture_end(hl_device *dev, hl_capture **out, hl_error *err) {
    hl_status st = HL_OK;
    *out = NULL;
    hl_capture *c = dev->capturing;
    if (!c) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "capture: none is recording");
    if (!c->ops) {
        hl_capture_abort(dev);
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "capture: no operations recorded");
    }
    dev->capturing = NULL;
    /* the replay's writes visible to whatever comes after (host reads, transfers) */
    hl_cmd_barrier_on(dev, c->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                      VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
    if (c->queries) vkCmdWriteTimestamp(c->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries, 1);
    HL_VK(vkEndCommandBuffer(c->cmd));
    c->dispatches = (uint32_t)(dev->tel.dispatches - c->dispatches0);
    c->barriers = (uint32_t)(dev->tel.barriers - c->barriers0);
    dev->tel.dispatches = c->dispatches0; /* recorded, not run: a replay counts them */
    dev->tel.barriers = c->barriers0;
    c->ended = 1;
    *out = c;
    return HL_OK;
fail:
    hl_capture_destroy(c);
    return st;
}

static hl_status usable(const hl_capture *c, hl_error *err) {
    if (!c || !c->dev) return hl_fail(err, HL_ERR_DEVICE_CLOSED, "capture: its device was closed");
    if (!c->ended) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "capture: still recording");
    if (c->dev->group.open || c->dev->capturing)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "capture: replayed while a group is open or a capture records (it is a submission)");
    return HL_OK;
}

static void count_replay(hl_capture *c) {
    c->submitted = 1;
    c->dev->tel.dispatches += c->dispatches;
    c->dev->tel.barriers += c->barriers;
}

hl_status hl_capture_replay(hl_capture *c, hl_plan_run *run, hl_error *err) {
    hl_status st = HL_OK;
    const double t0 = hl_now_ms();
    HL_TRY(usable(c, err));
    hl_device *dev = c->dev;
    HL_TRY(hl_settle(dev, err)); /* the fence may still be an interrupted replay's */
    HL_TRY(hl_submit_cmd(dev, c->cmd, err));
    count_replay(c);
    const double t_sub = hl_now_ms();
    HL_TRY(hl_wait_fence(dev, err));
    run->host_ms = t_sub - t0;
    run->wall_ms = hl_now_ms() - t0;
    dev->tel.submit_wait_ms += run->wall_ms;
    return hl_capture_gpu_ms(c, &run->gpu_ms, err);
fail:
    return st;
}

hl_status hl_capture_submit(hl_capture *c, uint64_t wait_value, uint64_t signal_value, hl_error *err) {
    hl_status st = HL_OK;
    HL_TRY(usable(c, err));
    HL_TRY(hl_settle(c->dev, err));
    HL_TRY(hl_submit_timeline(c->dev, c->cmd, wait_value, signal_value, err));
    count_replay(c);
fail:
    return st;
}

hl_status hl_capture_gpu_ms(hl_capture *c, double *ms, hl_error *err) {
    hl_status st = HL_OK;
    *ms = 0.0;
    if (!c || !c->dev) return hl_fail(err, HL_ERR_DEVICE_CLOSED, "capture: its device was closed");
    if (!c->queries || !c->submitted) return HL_OK;
    uint64_t ts[2];
    HL_VK(vkGetQueryPoolResults(c->dev->device, c->queries, 0, 2, sizeof ts, ts, sizeof ts[0],
                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    *ms = hl_ticks_ms(c->dev, ts[0], ts[1]);
fail:
    return st;
}

void hl_capture_counts(const hl_capture *c, uint32_t *ops, uint32_t *dispatches, uint32_t *barriers) {
    *ops = c->ops;
    *dispatches = c->dispatches;
    *barriers = c->barriers;
}

int hl_capture_alive(const hl_capture *c) { return c && c->dev; }

void hl_captures_release(hl_device *dev) {
    if (dev->capturing) hl_capture_abort(dev);
    while (dev->captures) release(dev->captures);
}

void hl_captures_detach(hl_device *dev) {
    dev->capturing = NULL;
    while (dev->captures) {
        hl_capture *c = dev->captures;
        unlink_capture(c);
        c->dev = NULL;
    }
}
