/* exec.c — the one way an operation runs on the device: host operands staged
 * in (through the staging buffer into a scratch buffer or a tensor), outputs
 * poisoned, the operation recorded (timed or once), results read back, all in
 * one submission and one wait. Matmul, attention, chains and tensor transfers
 * all go through hl_exec_run; each passes its operands and a record function. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* What an ordered operation may be: tensors only (scratch buffers the core
 * reserves are allowed), untimed. */
static hl_status check_ordered(hl_device *dev, const hl_exec *x, hl_error *err) {
    hl_status st = HL_OK;
    for (uint32_t i = 0; i < x->n_operands; i++)
        if (!x->operands[i].tensor && (x->operands[i].upload || x->operands[i].download))
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                           "an operation ordered with CUDA takes tensors only (no host operands)");
    if (x->iters || !x->record)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "an operation ordered with CUDA is not timed");
    for (uint32_t i = 0; i < x->n_operands; i++)
        if (!x->operands[i].tensor && x->operands[i].scratch)
            HL_TRY(hl_buffer_reserve(dev, x->operands[i].scratch, hl_align_up(x->operands[i].bytes, 16), 0, err));
fail:
    return st;
}

/* An ordered operation into a ring slot's command buffer, its set from the slot's pool. */
static hl_status record_ordered(hl_device *dev, struct hl_ring_slot *slot, hl_exec *x, hl_error *err) {
    hl_status st = HL_OK;
    const double t_ds = hl_now_ms();
    VkDescriptorSet ds = VK_NULL_HANDLE;
    if (x->n_slots) {
        VkDescriptorSetAllocateInfo dai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                           .descriptorPool = slot->pool,
                                           .descriptorSetCount = 1,
                                           .pSetLayouts = &dev->ds_layout};
        HL_VK(vkAllocateDescriptorSets(dev->device, &dai, &ds));
    }
    dev->tel.async_descriptor_ms += hl_now_ms() - t_ds;
    return hl_exec_record(dev, slot->cmd, ds, slot == dev->group.slot, x, err);
fail:
    return st;
}

/* A ring slot's command buffer begun, its first timestamp written. */
static hl_status begin_slot(hl_device *dev, struct hl_ring_slot **out, hl_error *err) {
    hl_status st = HL_OK;
    const double t_slot = hl_now_ms();
    struct hl_ring_slot *slot;
    HL_TRY(hl_async_slot(dev, &slot, err));
    dev->tel.async_slot_ms += hl_now_ms() - t_slot;
    HL_VK(vkResetCommandBuffer(slot->cmd, 0));
    VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    HL_VK(vkBeginCommandBuffer(slot->cmd, &cbi));
    hl_hazard_clear(&dev->group.hazards); /* a chunk starts after the one before is done */
    if (dev->async.queries) {
        const uint32_t q0 = 2u * (uint32_t)(slot - dev->async.ring); /* the slot's timestamp pair */
        vkCmdResetQueryPool(slot->cmd, dev->async.queries, q0, 2);
        vkCmdWriteTimestamp(slot->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, dev->async.queries, q0);
    }
    hl_profile_mark(dev, slot->cmd, HL_PROFILE_SUBMISSION);
    *out = slot;
fail:
    return st;
}

/* The slot's last timestamp, its command buffer ended and submitted: waits for
 * wait_value, signals signal_value, returns without waiting. */
static hl_status submit_slot(hl_device *dev, struct hl_ring_slot *slot, uint64_t wait_value, uint64_t signal_value,
                             hl_error *err) {
    hl_status st = HL_OK;
    if (dev->async.queries)
        vkCmdWriteTimestamp(slot->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, dev->async.queries,
                            2u * (uint32_t)(slot - dev->async.ring) + 1);
    HL_VK(vkEndCommandBuffer(slot->cmd));
    HL_TRY(hl_submit_timeline(dev, slot->cmd, wait_value, signal_value, err));
    slot->done = signal_value;
    slot->timed = dev->async.queries != VK_NULL_HANDLE;
fail:
    return st;
}

/* An async operation: recorded once into a ring slot's command buffer, submitted
 * to wait for wait_value and signal signal_value, not waited for. */
static hl_status run_async(hl_device *dev, hl_exec *x, hl_error *err) {
    hl_status st = HL_OK;
    struct hl_ring_slot *slot;
    HL_TRY(check_ordered(dev, x, err));
    HL_TRY(hl_check_async_values(dev, x->wait_value, x->signal_value, err));
    HL_TRY(begin_slot(dev, &slot, err));
    st = record_ordered(dev, slot, x, err);
    if (st != HL_OK) { /* nothing recorded that needs running: an empty submission still signals */
        hl_error ignored;
        submit_slot(dev, slot, x->wait_value, x->signal_value, &ignored);
        return st;
    }
    return submit_slot(dev, slot, x->wait_value, x->signal_value, err);
fail:
    return st;
}

/* An operation called while a group is open: recorded into the group's command buffer. */
static hl_status record_in_group(hl_device *dev, hl_exec *x, hl_error *err) {
    hl_status st = HL_OK;
    if (x->signal_value)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "an operation inside a group takes no wait/signal values of its own (the group has them)");
    if (!dev->group.slot)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "the group lost its command buffer (a chunk failed to start)");
    if (dev->group.chunk_ops >= HL_GROUP_MAX_OPS)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "a group records at most %u operations past its %u chunks",
                       HL_GROUP_MAX_OPS, HL_VALUE_SPAN - 1);
    HL_TRY(check_ordered(dev, x, err));
    HL_TRY(record_ordered(dev, dev->group.slot, x, err));
    /* A chunk goes to the GPU when it is full, or at once when the GPU has run out of
     * work (the semaphore has reached what the chunk would wait for: the stream's
     * signal, or the chunk before's): a GPU the host has caught up with never waits
     * for the host to record seven more ops. It waits for the chunk before and
     * signals the next value between the group's pair; the group goes on in a fresh
     * slot. */
    int go = ++dev->group.chunk_ops >= HL_GROUP_CHUNK_OPS;
    if (!go && dev->group.idle_flush) {
        uint64_t reached = 0;
        HL_VK(dev->semaphore_value(dev->device, dev->async.timeline, &reached));
        go = reached >= dev->group.wait;
    }
    if (go && dev->group.wait + 1 < dev->group.signal) {
        const uint64_t value = dev->group.wait + 1;
        struct hl_ring_slot *slot = dev->group.slot;
        dev->group.slot = NULL;
        HL_TRY(submit_slot(dev, slot, dev->group.wait, value, err));
        dev->group.wait = value;
        dev->group.chunk_ops = 0;
        HL_TRY(begin_slot(dev, &dev->group.slot, err));
    }
fail:
    return st;
}

hl_status hl_async_group_begin(hl_device *dev, uint64_t wait_value, uint64_t signal_value, hl_error *err) {
    hl_status st = HL_OK;
    if (dev->group.open) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "a group is already open on this device");
    HL_TRY(hl_check_async_values(dev, wait_value, signal_value, err));
    int fixed_chunks = 0;
    HL_TRY(hl_env_flag("HELIOS_DISABLE_IDLE_FLUSH", &fixed_chunks, err));
    HL_TRY(begin_slot(dev, &dev->group.slot, err));
    dev->group.idle_flush = !fixed_chunks;
    dev->group.open = 1;
    dev->group.wait = wait_value;
    dev->group.signal = signal_value;
    dev->group.chunk_ops = 0;
fail:
    return st;
}

hl_status hl_async_group_end(hl_device *dev, hl_error *err) {
    hl_status st = HL_OK;
    if (!dev->group.open) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "no group is open on this device");
    dev->group.open = 0;
    if (!dev->group.slot)
        HL_TRY(begin_slot(dev, &dev->group.slot, err)); /* an empty last chunk: the signal still comes */
    struct hl_ring_slot *slot = dev->group.slot;
    dev->group.slot = NULL;
    return submit_slot(dev, slot, dev->group.wait, dev->group.signal, err);
fail:
    return st;
}

/* Device memory first: scratch buffers for host operands (+16: shaders read 16-byte
 * vectors), then staging regions, 256-byte aligned, for every operand that moves
 * through the host (their offsets into stage_off), and the flush buffer. */
static hl_status reserve(hl_device *dev, const hl_exec *x, VkDeviceSize stage_off[], VkDeviceSize *stage_bytes,
                         hl_error *err) {
    hl_status st = HL_OK;
    for (uint32_t i = 0; i < x->n_operands; i++) {
        const hl_operand *o = &x->operands[i];
        if (!o->tensor && o->scratch) HL_TRY(hl_buffer_reserve(dev, o->scratch, hl_align_up(o->bytes, 16), 0, err));
        stage_off[i] = *stage_bytes;
        if (o->upload || o->download) *stage_bytes = hl_align_up(*stage_bytes + o->bytes, 256);
    }
    if (*stage_bytes) HL_TRY(hl_buffer_reserve(dev, &dev->staging, *stage_bytes + 16, 1, err));
    if (x->record && x->iters && x->flush_bytes)
        HL_TRY(hl_buffer_reserve(dev, &dev->flush, hl_align_up(x->flush_bytes, 4), 0, err));
fail:
    return st;
}

/* A descriptor set with every operand at its slot. */
static hl_status bind_operands(hl_device *dev, const hl_exec *x, VkDescriptorSet *ds, hl_error *err) {
    hl_status st = HL_OK;
    hl_binding bufs[HL_BINDINGS] = {{0}};
    HL_TRY(hl_descriptor_sets(dev, 1, ds, err));
    for (uint32_t i = 0; i < x->n_operands; i++)
        if (x->operands[i].slot >= 0 && (uint32_t)x->operands[i].slot < HL_BINDINGS)
            bufs[x->operands[i].slot] = hl_operand_binding(&x->operands[i]);
    hl_write_set(dev, *ds, bufs, x->n_slots);
fail:
    return st;
}

/* Uploads through the staging buffer and poisoned outputs, into dev->cmd; the bytes uploaded. */
static uint64_t record_inputs(hl_device *dev, const hl_exec *x, uint8_t *stage, const VkDeviceSize stage_off[]) {
    uint64_t up = 0;
    for (uint32_t i = 0; i < x->n_operands; i++) {
        const hl_operand *o = &x->operands[i];
        const hl_binding b = hl_operand_binding(o);
        if (o->upload && o->bytes) {
            memcpy(stage + stage_off[i], o->upload, o->bytes);
            const VkBufferCopy r = {stage_off[i], b.offset, o->bytes};
            vkCmdCopyBuffer(dev->cmd, dev->staging.buffer, b.buffer, 1, &r);
            up += o->bytes;
        } else if (o->poison) {
            /* all-ones is NaN in f16 and f32: an element the operation fails to
             * write cannot pass a check */
            vkCmdFillBuffer(dev->cmd, b.buffer, b.offset, hl_align_up(o->bytes, 4), 0xffffffffu);
        }
    }
    return up;
}

hl_status hl_exec_run(hl_device *dev, hl_exec *x, hl_error *err) {
    hl_status st = HL_OK;
    HL_TRY(hl_settle(dev, err)); /* scratch and staging an interrupted submission may still read */
    if (dev->capturing) return hl_capture_record(dev, x, err);
    if (dev->group.open) return record_in_group(dev, x, err);
    if (x->signal_value) return run_async(dev, x, err);
    VkDeviceSize stage_off[HL_EXEC_MAX_OPERANDS];
    VkDeviceSize stage_bytes = 0;
    uint64_t up = 0, down = 0;
    if (x->n_operands > HL_EXEC_MAX_OPERANDS)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "an operation takes at most %u operands", HL_EXEC_MAX_OPERANDS);
    HL_TRY(reserve(dev, x, stage_off, &stage_bytes, err));
    const uint32_t n_queries = x->record ? hl_timed_queries(x->iters) : 0;
    if (dev->timestamps_ok && n_queries) HL_TRY(hl_ensure_queries(dev, n_queries, err));
    VkDescriptorSet ds = VK_NULL_HANDLE;
    if (x->n_slots) HL_TRY(bind_operands(dev, x, &ds, err));

    const double t_rec = hl_now_ms();
    uint8_t *stage = dev->staging.mapped;
    HL_TRY(hl_begin_commands(dev, n_queries, err));
    up = record_inputs(dev, x, stage, stage_off);
    if (x->record) {
        hl_cmd_barrier(dev, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
        hl_record_timed(dev, x->warmup, x->iters, x->flush_bytes, !x->no_batch, x->record, x->ctx, ds);
        hl_cmd_barrier(dev, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                       VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_SHADER_READ_BIT);
    } else if (up) {
        /* a transfer in: visible to later kernels and copies */
        hl_cmd_barrier(dev, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT);
    }
    for (uint32_t i = 0; i < x->n_operands; i++) {
        const hl_operand *o = &x->operands[i];
        if (!o->download || !o->bytes) continue;
        const hl_binding b = hl_operand_binding(o);
        const VkBufferCopy r = {b.offset, stage_off[i], o->bytes};
        vkCmdCopyBuffer(dev->cmd, b.buffer, dev->staging.buffer, 1, &r);
        down += o->bytes;
    }
    if (x->record || down)
        hl_cmd_barrier(dev, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                       VK_ACCESS_HOST_READ_BIT);
    HL_VK(vkEndCommandBuffer(dev->cmd));
    dev->tel.record_ms += hl_now_ms() - t_rec;
    HL_TRY(hl_submit_wait(dev, err));
    dev->tel.bytes_up += up;
    x->gpu_ms = 0.0;
    if (x->record) HL_TRY(hl_read_timed(dev, x->iters, x->samples_ms, x->batch_ms, &x->gpu_ms, err));
    for (uint32_t i = 0; i < x->n_operands; i++) {
        const hl_operand *o = &x->operands[i];
        if (o->download && o->bytes) memcpy(o->download, stage + stage_off[i], o->bytes);
    }
    dev->tel.bytes_down += down;
    dev->tel.last_gpu_ms = x->gpu_ms;
    return HL_OK;
fail:
    /* A failed submit or wait leaves the command buffer possibly pending: wait
     * for the device so the next call can safely reset it (not after an interrupt:
     * the next call settles the abandoned submission). */
    if (dev->device && st != HL_ERR_INTERRUPTED) vkDeviceWaitIdle(dev->device);
    return st;
}

hl_status hl_exec_kernel(hl_device *dev, hl_operand *ops, uint32_t n, hl_record_fn record, const void *ctx,
                         const hl_exec_timing *timing, const char *variant, hl_run_info *info, hl_error *err) {
    hl_exec x = {.wait_value = timing->wait_value,
                 .signal_value = timing->signal_value,
                 .operands = ops,
                 .n_operands = n,
                 .n_slots = n,
                 .record = record,
                 .ctx = ctx,
                 .warmup = timing->warmup,
                 .iters = timing->iters,
                 .flush_bytes = timing->flush_bytes,
                 .samples_ms = timing->samples_ms,
                 .batch_ms = timing->batch_ms};
    hl_status st = hl_exec_run(dev, &x, err);
    if (st != HL_OK) return st;
    snprintf(dev->tel.last_variant, sizeof dev->tel.last_variant, "%s", variant);
    if (info) {
        info->gpu_ms = x.gpu_ms;
        snprintf(info->variant, sizeof info->variant, "%s", variant);
    }
    return HL_OK;
}
