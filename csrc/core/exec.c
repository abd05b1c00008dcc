/* exec.c — the one way an operation runs on the device: host operands staged
 * in (through the staging buffer into a scratch buffer or a tensor), outputs
 * poisoned, the operation recorded (timed or once), results read back, all in
 * one submission and one wait. Matmul, attention, chains and tensor transfers
 * all go through hl_exec_run; each passes its operands and a record function. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static hl_binding binding_of(const hl_operand *o) {
    return o->tensor ? (hl_binding){o->tensor->buf.buffer, o->tensor->offset + o->at}
                     : (hl_binding){o->scratch ? o->scratch->buffer : VK_NULL_HANDLE, 0};
}

/* An async operation: tensors only, recorded once into a ring slot's command
 * buffer, submitted to wait for wait_value and signal signal_value, not waited for. */
static hl_status run_async(hl_device *dev, hl_exec *x, hl_error *err) {
    hl_status st = HL_OK;
    struct hl_ring_slot *slot;
    VkCommandBuffer sync_cmd = VK_NULL_HANDLE; /* the helpers record into dev->cmd: swapped for the slot's */
    for (uint32_t i = 0; i < x->n_operands; i++)
        if (!x->operands[i].tensor && (x->operands[i].upload || x->operands[i].download))
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                           "an operation ordered with CUDA takes tensors only (no host operands)");
    if (x->iters || !x->record)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "an operation ordered with CUDA is not timed");
    if (!dev->timeline || x->signal_value <= x->wait_value || x->signal_value <= dev->sem_pending)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "async values %llu -> %llu: take them from hl_async_values (each pair once, in order)",
                       (unsigned long long)x->wait_value, (unsigned long long)x->signal_value);
    for (uint32_t i = 0; i < x->n_operands; i++)
        if (!x->operands[i].tensor && x->operands[i].scratch)
            HL_TRY(hl_buffer_reserve(dev, x->operands[i].scratch, hl_align_up(x->operands[i].bytes, 16), 0, err));
    const double t_slot = hl_now_ms();
    HL_TRY(hl_async_slot(dev, &slot, err));
    const double t_ds = hl_now_ms();
    dev->tel.async_slot_ms += t_ds - t_slot;
    VkDescriptorSet ds = VK_NULL_HANDLE;
    if (x->n_slots) {
        hl_binding bufs[HL_BINDINGS] = {{0}};
        VkDescriptorSetAllocateInfo dai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                           .descriptorPool = slot->pool,
                                           .descriptorSetCount = 1,
                                           .pSetLayouts = &dev->ds_layout};
        HL_VK(vkAllocateDescriptorSets(dev->device, &dai, &ds));
        for (uint32_t i = 0; i < x->n_operands; i++)
            if (x->operands[i].slot >= 0 && (uint32_t)x->operands[i].slot < HL_BINDINGS)
                bufs[x->operands[i].slot] = binding_of(&x->operands[i]);
        hl_write_set(dev, ds, bufs, x->n_slots);
    }
    const double t_rec = hl_now_ms();
    dev->tel.async_descriptor_ms += t_rec - t_ds;
    sync_cmd = dev->cmd;
    dev->cmd = slot->cmd;
    HL_VK(vkResetCommandBuffer(dev->cmd, 0));
    VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    HL_VK(vkBeginCommandBuffer(dev->cmd, &cbi));
    const uint32_t q0 = 2u * (uint32_t)(slot - dev->ring); /* the slot's timestamp pair */
    if (dev->async_queries) {
        vkCmdResetQueryPool(dev->cmd, dev->async_queries, q0, 2);
        vkCmdWriteTimestamp(dev->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, dev->async_queries, q0);
    }
    for (uint32_t i = 0; i < x->n_operands; i++) {
        const hl_operand *o = &x->operands[i];
        if (!o->poison) continue;
        const hl_binding b = binding_of(o);
        vkCmdFillBuffer(dev->cmd, b.buffer, b.offset, hl_align_up(o->bytes, 4), 0xffffffffu);
    }
    hl_cmd_barrier(dev, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                   VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    x->record(dev, x->ctx, ds);
    hl_cmd_barrier(dev, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                   VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
    if (dev->async_queries)
        vkCmdWriteTimestamp(dev->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, dev->async_queries, q0 + 1);
    HL_VK(vkEndCommandBuffer(dev->cmd));
    dev->cmd = sync_cmd;
    sync_cmd = VK_NULL_HANDLE;
    dev->tel.record_ms += hl_now_ms() - t_rec;
    const VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    VkTimelineSemaphoreSubmitInfo ti = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                        .waitSemaphoreValueCount = 1,
                                        .pWaitSemaphoreValues = &x->wait_value,
                                        .signalSemaphoreValueCount = 1,
                                        .pSignalSemaphoreValues = &x->signal_value};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                       .pNext = &ti,
                       .waitSemaphoreCount = 1,
                       .pWaitSemaphores = &dev->timeline,
                       .pWaitDstStageMask = &stage,
                       .commandBufferCount = 1,
                       .pCommandBuffers = &slot->cmd,
                       .signalSemaphoreCount = 1,
                       .pSignalSemaphores = &dev->timeline};
    const double t_sub = hl_now_ms();
    HL_VK_FAULT(HL_FAULT_SUBMIT, vkQueueSubmit(dev->queue, 1, &si, VK_NULL_HANDLE));
    dev->tel.async_submit_ms += hl_now_ms() - t_sub;
    dev->tel.submits++;
    slot->done = x->signal_value;
    slot->timed = dev->async_queries != VK_NULL_HANDLE;
    dev->sem_pending = x->signal_value;
    x->gpu_ms = 0.0;
    return HL_OK;
fail:
    if (sync_cmd) dev->cmd = sync_cmd;
    return st;
}

hl_status hl_exec_run(hl_device *dev, hl_exec *x, hl_error *err) {
    hl_status st = HL_OK;
    if (x->signal_value) return run_async(dev, x, err);
    VkDeviceSize stage_off[HL_EXEC_MAX_OPERANDS];
    VkDeviceSize stage_bytes = 0;
    uint64_t up = 0, down = 0;
    if (x->n_operands > HL_EXEC_MAX_OPERANDS)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "an operation takes at most %u operands", HL_EXEC_MAX_OPERANDS);
    /* Device memory first: scratch buffers for host operands (+16: shaders read
     * 16-byte vectors), then staging regions, 256-byte aligned, for every
     * operand that moves through the host. */
    for (uint32_t i = 0; i < x->n_operands; i++) {
        const hl_operand *o = &x->operands[i];
        if (!o->tensor && o->scratch) HL_TRY(hl_buffer_reserve(dev, o->scratch, hl_align_up(o->bytes, 16), 0, err));
        stage_off[i] = stage_bytes;
        if (o->upload || o->download) stage_bytes = hl_align_up(stage_bytes + o->bytes, 256);
    }
    if (stage_bytes) HL_TRY(hl_buffer_reserve(dev, &dev->staging, stage_bytes + 16, 1, err));
    if (x->record && x->iters && x->flush_bytes)
        HL_TRY(hl_buffer_reserve(dev, &dev->flush, hl_align_up(x->flush_bytes, 4), 0, err));
    const uint32_t n_queries = x->record ? hl_timed_queries(x->iters) : 0;
    if (dev->timestamps_ok && n_queries) HL_TRY(hl_ensure_queries(dev, n_queries, err));
    VkDescriptorSet ds = VK_NULL_HANDLE;
    if (x->n_slots) {
        hl_binding bufs[HL_BINDINGS] = {{0}};
        HL_TRY(hl_descriptor_sets(dev, 1, &ds, err));
        for (uint32_t i = 0; i < x->n_operands; i++)
            if (x->operands[i].slot >= 0 && (uint32_t)x->operands[i].slot < HL_BINDINGS)
                bufs[x->operands[i].slot] = binding_of(&x->operands[i]);
        hl_write_set(dev, ds, bufs, x->n_slots);
    }

    const double t_rec = hl_now_ms();
    uint8_t *stage = dev->staging.mapped;
    HL_TRY(hl_begin_commands(dev, n_queries, err));
    for (uint32_t i = 0; i < x->n_operands; i++) {
        const hl_operand *o = &x->operands[i];
        const hl_binding b = binding_of(o);
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
        const hl_binding b = binding_of(o);
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
     * for the device so the next call can safely reset it. */
    if (dev->device) vkDeviceWaitIdle(dev->device);
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
