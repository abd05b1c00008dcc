/* submit.c — what every operation's submission shares: barriers, timestamp
 * queries, descriptor writes, the one-submission-and-wait, and the timed
 * dispatch sequence (warm-up, per-iteration samples, a back-to-back batch). */
#include <string.h>

#include "internal.h"

VkDeviceSize hl_align_up(VkDeviceSize x, VkDeviceSize a) { return (x + a - 1) / a * a; }

void hl_cmd_barrier_on(hl_device *dev, VkCommandBuffer cmd, VkPipelineStageFlags src, VkAccessFlags src_access,
                       VkPipelineStageFlags dst, VkAccessFlags dst_access) {
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = src_access, .dstAccessMask = dst_access};
    vkCmdPipelineBarrier(cmd, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
    dev->tel.barriers++;
}

void hl_cmd_barrier(hl_device *dev, VkPipelineStageFlags src, VkAccessFlags src_access, VkPipelineStageFlags dst,
                    VkAccessFlags dst_access) {
    hl_cmd_barrier_on(dev, dev->cmd, src, src_access, dst, dst_access);
}

void hl_compute_barrier(hl_device *dev) {
    hl_cmd_barrier(dev, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                   VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
}

hl_status hl_ensure_queries(hl_device *dev, uint32_t count, hl_error *err) {
    hl_status st = HL_OK;
    if (dev->query_pool && dev->query_capacity >= count) return HL_OK;
    if (dev->query_pool) vkDestroyQueryPool(dev->device, dev->query_pool, NULL);
    dev->query_pool = VK_NULL_HANDLE;
    dev->query_capacity = 0;
    uint32_t cap = count < 64 ? 64 : count;
    VkQueryPoolCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = cap};
    HL_VK(vkCreateQueryPool(dev->device, &qci, NULL, &dev->query_pool));
    dev->query_capacity = cap;
    return HL_OK;
fail:
    return st;
}

double hl_ticks_ms(const hl_device *dev, uint64_t t0, uint64_t t1) {
    uint32_t bits = dev->caps.timestamp_valid_bits;
    uint64_t mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
    uint64_t d = (t1 - t0) & mask; /* modular: survives one wrap of the counter */
    return (double)d * (double)dev->caps.timestamp_period_ns * 1e-6;
}

void hl_write_set(hl_device *dev, VkDescriptorSet ds, const hl_binding *bufs, uint32_t n) {
    VkDescriptorBufferInfo dbi[HL_BINDINGS];
    VkWriteDescriptorSet w[HL_BINDINGS];
    for (uint32_t i = 0; i < n && i < HL_BINDINGS; i++) {
        dbi[i] = (VkDescriptorBufferInfo){bufs[i].buffer, bufs[i].offset, VK_WHOLE_SIZE};
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                      .dstSet = ds,
                                      .dstBinding = i,
                                      .descriptorCount = 1,
                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .pBufferInfo = &dbi[i]};
    }
    vkUpdateDescriptorSets(dev->device, n < HL_BINDINGS ? n : HL_BINDINGS, w, 0, NULL);
}

hl_status hl_begin_commands(hl_device *dev, uint32_t n_queries, hl_error *err) {
    hl_status st = HL_OK;
    HL_TRY(hl_settle(dev, err)); /* an interrupted submission may still hold the command buffer */
    HL_VK(vkResetCommandBuffer(dev->cmd, 0));
    VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    HL_VK(vkBeginCommandBuffer(dev->cmd, &cbi));
    if (dev->timestamps_ok && n_queries) vkCmdResetQueryPool(dev->cmd, dev->query_pool, 0, n_queries);
    return HL_OK;
fail:
    return st;
}

hl_status hl_submit_wait(hl_device *dev, hl_error *err) {
    hl_status st = HL_OK;
    double t_sub = hl_now_ms();
    HL_TRY(hl_submit_cmd(dev, dev->cmd, err));
    HL_TRY(hl_wait_fence(dev, err));
    dev->tel.submit_wait_ms += hl_now_ms() - t_sub;
    return HL_OK;
fail:
    return st;
}

hl_status hl_submit_cmd(hl_device *dev, VkCommandBuffer cmd, hl_error *err) {
    hl_status st = HL_OK;
    HL_VK(vkResetFences(dev->device, 1, &dev->fence));
    /* After async submissions (async.c), start once the last of them is done: a
     * queue runs submissions in order only where something orders them. */
    const VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    VkTimelineSemaphoreSubmitInfo ti = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                        .waitSemaphoreValueCount = 1,
                                        .pWaitSemaphoreValues = &dev->async.pending};
    const int after_async = dev->async.timeline && dev->async.pending;
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                       .pNext = after_async ? &ti : NULL,
                       .waitSemaphoreCount = after_async ? 1u : 0u,
                       .pWaitSemaphores = &dev->async.timeline,
                       .pWaitDstStageMask = &stage,
                       .commandBufferCount = 1,
                       .pCommandBuffers = &cmd};
    HL_VK_FAULT(HL_FAULT_SUBMIT, vkQueueSubmit(dev->queue, 1, &si, dev->fence));
    dev->tel.submits++;
    return HL_OK;
fail:
    return st;
}

hl_status hl_read_pair(hl_device *dev, uint32_t first, double *ms, hl_error *err) {
    hl_status st = HL_OK;
    uint64_t ts[2];
    HL_VK(vkGetQueryPoolResults(dev->device, dev->query_pool, first, 2, sizeof ts, ts, sizeof ts[0],
                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    *ms = hl_ticks_ms(dev, ts[0], ts[1]);
    return HL_OK;
fail:
    return st;
}

hl_status hl_check_tensor(hl_device *dev, const hl_tensor *t, uint64_t need, const char *who, const char *name,
                          hl_error *err) {
    if (!t) return HL_OK;
    if (!t->dev) return hl_fail(err, HL_ERR_DEVICE_CLOSED, "%s: tensor %s belongs to a closed device", who, name);
    if (t->dev != dev)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s: tensor %s belongs to another device", who, name);
    if (t->bytes < need)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "%s: tensor %s holds %llu bytes; this operand "
                       "needs %llu",
                       who, name, (unsigned long long)t->bytes, (unsigned long long)need);
    return HL_OK;
}

hl_binding hl_tensor_or_scratch(const hl_tensor *t, const hl_buffer *scratch) {
    return t ? (hl_binding){t->buf.buffer, t->offset} : (hl_binding){scratch->buffer, 0};
}

hl_status hl_check_output_tensor(hl_device *dev, const hl_tensor *t, uint64_t need, const char *who, const char *name,
                                 hl_error *err) {
    /* A synchronous op poisons its outputs with fills of whole words: a slice view whose
     * bytes are not whole words would have its neighbour's bytes filled too. Ordered ops
     * (a group, a capture) do not poison. */
    if (t && t->is_view && (t->offset % 4 || t->bytes % 4) && !dev->group.open && !dev->capturing)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "%s: the output tensor %s is a slice view of %llu bytes at byte %llu: an output view takes "
                       "whole 4-byte words; write into a whole tensor",
                       who, name, (unsigned long long)t->bytes, (unsigned long long)t->offset);
    return hl_check_tensor(dev, t, need, who, name, err);
}

uint32_t hl_timed_queries(uint32_t iters) { return iters ? 2 * iters + 2 : 2; }

/* Dispatch order: warmup, then `iters` each between two timestamps (the
 * per-iteration samples), then `iters` back to back between two timestamps
 * (the batch figure). Single calls get one bracketed dispatch. A barrier
 * between dispatches orders them like a CUDA stream does. Timestamps are taken
 * at BOTTOM_OF_PIPE: written once all earlier work has finished. flush_bytes:
 * a fill of dev->flush (reserved by the caller) before each timed sample,
 * outside its timestamps, evicts the operands from L2. */
void hl_record_timed(hl_device *dev, uint32_t warmup, uint32_t iters, uint64_t flush_bytes, int with_batch,
                     hl_record_fn rec, const void *ctx, VkDescriptorSet ds) {
    const uint32_t n_disp = iters ? warmup + (with_batch ? 2 : 1) * iters : 1;
    const int ts = dev->timestamps_ok;
    for (uint32_t d = 0; d < n_disp; d++) {
        int timed_single = iters ? (d >= warmup && d < warmup + iters) : 1;
        uint32_t iter = iters ? d - warmup : 0;
        int batch_first = with_batch && iters && d == warmup + iters;
        int batch_last = with_batch && iters && d == n_disp - 1;
        if (d) hl_compute_barrier(dev);
        if (timed_single && iters && flush_bytes) {
            vkCmdFillBuffer(dev->cmd, dev->flush.buffer, 0, hl_align_up(flush_bytes, 4), d);
            hl_cmd_barrier(dev, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                           VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
        }
        if (ts && timed_single)
            vkCmdWriteTimestamp(dev->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, dev->query_pool, 2 * iter);
        if (ts && batch_first)
            vkCmdWriteTimestamp(dev->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, dev->query_pool, 2 * iters);
        rec(dev, ctx, ds);
        if (ts && timed_single)
            vkCmdWriteTimestamp(dev->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, dev->query_pool, 2 * iter + 1);
        if (ts && batch_last)
            vkCmdWriteTimestamp(dev->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, dev->query_pool, 2 * iters + 1);
    }
}

hl_status hl_read_timed(hl_device *dev, uint32_t iters, double *samples_ms, double *batch_ms, double *gpu_ms,
                        hl_error *err) {
    hl_status st = HL_OK;
    if (!dev->timestamps_ok) return HL_OK;
    if (!iters) return hl_read_pair(dev, 0, gpu_ms, err);
    for (uint32_t i = 0; i < iters; i++) HL_TRY(hl_read_pair(dev, 2 * i, &samples_ms[i], err));
    if (batch_ms) {
        double total;
        HL_TRY(hl_read_pair(dev, 2 * iters, &total, err));
        *batch_ms = total / iters;
    }
    *gpu_ms = samples_ms[iters - 1];
    return HL_OK;
fail:
    return st;
}

void hl_record_dispatch(hl_device *dev, const void *ctx, VkDescriptorSet ds) {
    const hl_dispatch_plan *pl = ctx;
    vkCmdBindPipeline(dev->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl->pipe);
    vkCmdBindDescriptorSets(dev->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dev->pipe_layout, 0, 1, &ds, 0, NULL);
    vkCmdPushConstants(dev->cmd, dev->pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, HL_PUSH_BYTES, pl->pc.words);
    vkCmdDispatch(dev->cmd, pl->grid[0], pl->grid[1], 1);
    dev->tel.dispatches++;
}
