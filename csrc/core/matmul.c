/* matmul.c — one matmul call: upload, poison C, dispatch (optionally many
 * times with GPU timestamps), download, all in one submission. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define FLAG_A_VEC 1u
#define FLAG_B_VEC 2u
#define FLAG_C_DIRECT 4u
#define FLAG_SPLIT 8u
#define REDUCE_THREADS 256u   /* matmul_splitk_reduce.comp: 4 elements per invocation */
#define WAIT_TIMEOUT_NS (600ull * 1000 * 1000 * 1000)

static VkDeviceSize align_up(VkDeviceSize x, VkDeviceSize a) { return (x + a - 1) / a * a; }

static void barrier(hl_device *dev, VkPipelineStageFlags src, VkAccessFlags src_access,
                    VkPipelineStageFlags dst, VkAccessFlags dst_access) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = src_access,
                          .dstAccessMask = dst_access};
    vkCmdPipelineBarrier(dev->cmd, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
    dev->tel.barriers++;
}

static hl_status ensure_queries(hl_device *dev, uint32_t count, hl_error *err) {
    hl_status st = HL_OK;
    if (dev->query_pool && dev->query_capacity >= count) return HL_OK;
    if (dev->query_pool) vkDestroyQueryPool(dev->device, dev->query_pool, NULL);
    dev->query_pool = VK_NULL_HANDLE;
    dev->query_capacity = 0;
    uint32_t cap = count < 64 ? 64 : count;
    VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                 .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                 .queryCount = cap};
    HL_VK(vkCreateQueryPool(dev->device, &qci, NULL, &dev->query_pool));
    dev->query_capacity = cap;
    return HL_OK;
fail:
    return st;
}

static double ticks_ms(const hl_device *dev, uint64_t t0, uint64_t t1) {
    uint32_t bits = dev->caps.timestamp_valid_bits;
    uint64_t mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
    uint64_t d = (t1 - t0) & mask;   /* modular: survives one wrap of the counter */
    return (double)d * (double)dev->caps.timestamp_period_ns * 1e-6;
}

static const char *shader_for(const hl_variant *v, hl_dtype out) {
    if (v->path == HL_PATH_SCALAR) return out == HL_F16 ? "matmul_scalar_outf16" : "matmul_scalar_outf32";
    if (v->path == HL_PATH_COOP2) {
        if (v->acc == HL_F16) return out == HL_F16 ? "matmul_coop2_accf16_outf16" : "matmul_coop2_accf16_outf32";
        return out == HL_F16 ? "matmul_coop2_accf32_outf16" : "matmul_coop2_accf32_outf32";
    }
    if (v->acc == HL_F16) return out == HL_F16 ? "matmul_coop_accf16_outf16" : "matmul_coop_accf16_outf32";
    return out == HL_F16 ? "matmul_coop_accf32_outf16" : "matmul_coop_accf32_outf32";
}

/* The main kernel's pipeline for a variant: its specialization constants. */
static hl_status variant_pipeline(hl_device *dev, const hl_variant *v, hl_dtype out_dtype,
                                  hl_pipeline **out, hl_error *err) {
    if (v->path == HL_PATH_COOP2) {
        uint32_t spec2[5] = {v->bm, v->bn, v->bk, v->threads, v->raster};
        return hl_pipeline_get(dev, shader_for(v, out_dtype), spec2, 5, 0, out, err);
    }
    if (v->path != HL_PATH_COOP) return hl_pipeline_get(dev, shader_for(v, out_dtype), NULL, 0, 0, out, err);
    uint32_t wm = v->bm / (v->sg_m * v->tm), wn = v->bn / (v->sg_n * v->tn);
    uint32_t sgsz = dev->caps.subgroup_size;
    uint32_t spec[13] = {v->tm, v->tn, v->tk, wm, wn, v->sg_m, v->sg_n, v->bk, sgsz, v->stages,
                         (uint32_t)v->direct_load, wm * wn * sgsz, v->raster};
    return hl_pipeline_get(dev, shader_for(v, out_dtype), spec, 13, sgsz, out, err);
}

hl_status hl_kernel_stats_get(hl_device *dev, const hl_variant *v, hl_dtype out_dtype,
                              hl_kernel_stats *out, hl_error *err) {
    hl_status st = hl_variant_check(dev, v, err);
    if (st != HL_OK) return st;
    if (out_dtype != HL_F16 && out_dtype != HL_F32)
        return hl_fail(err, HL_ERR_UNSUPPORTED_DTYPE, "kernel stats: output must be f16 or f32");
    hl_pipeline *p;
    st = variant_pipeline(dev, v, out_dtype, &p, err);
    if (st != HL_OK) return st;
    *out = p->stats;
    return HL_OK;
}

/* One product: the main dispatch, and for split-K the reduction behind a barrier. */
static void record_product(hl_device *dev, VkPipeline main_pipe, VkPipeline reduce_pipe,
                           const uint32_t grid[3], const uint32_t rgrid[2]) {
    if (reduce_pipe) vkCmdBindPipeline(dev->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, main_pipe);
    vkCmdDispatch(dev->cmd, grid[0], grid[1], grid[2]);
    dev->tel.dispatches++;
    if (!reduce_pipe) return;
    barrier(dev, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
    vkCmdBindPipeline(dev->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, reduce_pipe);
    vkCmdDispatch(dev->cmd, rgrid[0], rgrid[1], 1);
    dev->tel.dispatches++;
}

hl_status hl_matmul(hl_device *dev, const hl_matmul_args *args, hl_error *err) {
    hl_status st = HL_OK;
    const hl_caps *caps = &dev->caps;
    if (!args->m || !args->n || !args->k)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "matmul %ux%ux%u: every dimension must be >= 1",
                       args->m, args->n, args->k);
    if (args->in_dtype != HL_F16)
        return hl_fail(err, HL_ERR_UNSUPPORTED_DTYPE, "matmul inputs must be f16, got %s",
                       hl_dtype_name(args->in_dtype));
    if (args->out_dtype != HL_F16 && args->out_dtype != HL_F32)
        return hl_fail(err, HL_ERR_UNSUPPORTED_DTYPE, "matmul output must be f16 or f32, got %s",
                       hl_dtype_name(args->out_dtype));
    if (args->iters && !args->samples_ms)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "iters > 0 needs a samples buffer");
    if (args->iters && !dev->timestamps_ok)
        return hl_fail(err, HL_ERR_UNSUPPORTED, "device '%s' has no usable timestamps on its "
                       "compute queue", caps->name);
    if (args->iters > 100000 || args->warmup > 100000)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "iters and warmup must be <= 100000");

    hl_variant v;
    if (args->variant) v = *args->variant;
    else HL_TRY(hl_variant_for_shape(dev, args->m, args->n, args->k, &v, err));
    HL_TRY(hl_variant_check(dev, &v, err));

    const uint64_t m = args->m, n = args->n, k = args->k;
    const uint64_t out_size = hl_dtype_size(args->out_dtype);
    if (m * k >= (1ull << 32) - 16 || k * n >= (1ull << 32) - 16 || m * n >= (1ull << 32) - 16)
        return hl_fail(err, HL_ERR_TOO_LARGE,
                       "matmul %llux%llux%llu: an operand has 2^32 or more elements; kernels index "
                       "with 32 bits", (unsigned long long)m, (unsigned long long)n,
                       (unsigned long long)k);
    const VkDeviceSize a_bytes = m * k * 2, b_bytes = k * n * 2, c_bytes = m * n * out_size;
    /* +16: the shaders read 16-byte vectors */
    HL_TRY(hl_buffer_reserve(dev, &dev->buf_a, align_up(a_bytes, 16), 0, err));
    HL_TRY(hl_buffer_reserve(dev, &dev->buf_b, align_up(b_bytes, 16), 0, err));
    HL_TRY(hl_buffer_reserve(dev, &dev->buf_c, align_up(c_bytes, 16), 0, err));
    const VkDeviceSize off_b = align_up(a_bytes, 256), off_c = align_up(off_b + b_bytes, 256);
    HL_TRY(hl_buffer_reserve(dev, &dev->staging, off_c + c_bytes, 1, err));
    if (args->iters && args->flush_bytes)
        HL_TRY(hl_buffer_reserve(dev, &dev->flush, align_up(args->flush_bytes, 4), 0, err));

    uint32_t bm = v.bm, bn = v.bn;
    uint64_t gx = (n + bn - 1) / bn, gy = (m + bm - 1) / bm;
    /* Split-K: chunks of whole K slabs; the count actually used may be lower
     * than asked for when K is short. */
    uint64_t k_chunk = k, splits = 1;
    if (v.path == HL_PATH_COOP && v.splitk > 1) {
        k_chunk = ((k + v.splitk - 1) / v.splitk + v.bk - 1) / v.bk * v.bk;
        splits = (k + k_chunk - 1) / k_chunk;
    }
    if (gx > caps->max_group_count[0] || gy > caps->max_group_count[1] ||
        splits > caps->max_group_count[2])
        return hl_fail(err, HL_ERR_TOO_LARGE, "matmul %llux%llux%llu needs a %llux%llux%llu grid; "
                       "device allows %ux%ux%u", (unsigned long long)m, (unsigned long long)n,
                       (unsigned long long)k, (unsigned long long)gx, (unsigned long long)gy,
                       (unsigned long long)splits, caps->max_group_count[0],
                       caps->max_group_count[1], caps->max_group_count[2]);
    const uint64_t w_elems = splits > 1 ? splits * m * n : 4;
    if (w_elems >= (1ull << 32) - 16 || w_elems * 4 > caps->max_storage_buffer_range)
        return hl_fail(err, HL_ERR_TOO_LARGE, "matmul %llux%llux%llu with splitk=%u needs a %llu-byte "
                       "workspace; kernels index it with 32 bits and the device allows %llu bytes "
                       "per buffer", (unsigned long long)m, (unsigned long long)n,
                       (unsigned long long)k, v.splitk, (unsigned long long)(w_elems * 4),
                       (unsigned long long)caps->max_storage_buffer_range);
    HL_TRY(hl_buffer_reserve(dev, &dev->buf_w, w_elems * 4, 0, err));
    /* The reduction: 4 elements per invocation, a 2-D grid for large products. */
    uint64_t r_groups = (m * n + 4ull * REDUCE_THREADS - 1) / (4ull * REDUCE_THREADS);
    uint32_t rgrid[2] = {(uint32_t)(r_groups < caps->max_group_count[0] ? r_groups : caps->max_group_count[0]), 1};
    rgrid[1] = (uint32_t)((r_groups + rgrid[0] - 1) / rgrid[0]);

    hl_pipeline *main_p, *reduce_p = NULL;
    HL_TRY(variant_pipeline(dev, &v, args->out_dtype, &main_p, err));
    if (splits > 1)
        HL_TRY(hl_pipeline_get(dev, args->out_dtype == HL_F16 ? "matmul_splitk_reduce_outf16"
                                                              : "matmul_splitk_reduce_outf32",
                               NULL, 0, 0, &reduce_p, err));
    const VkPipeline pipe = main_p->pipeline;
    const VkPipeline reduce_pipe = reduce_p ? reduce_p->pipeline : VK_NULL_HANDLE;
    const uint32_t grid[3] = {(uint32_t)gx, (uint32_t)gy, (uint32_t)splits};

    const uint32_t n_disp = args->iters ? args->warmup + 2 * args->iters : 1;
    const uint32_t n_queries = args->iters ? 2 * args->iters + 2 : 2;
    if (dev->timestamps_ok) HL_TRY(ensure_queries(dev, n_queries, err));

    double t_rec = hl_now_ms();
    uint8_t *stage = dev->staging.mapped;
    memcpy(stage, args->a, a_bytes);
    memcpy(stage + off_b, args->b, b_bytes);

    VkDescriptorBufferInfo dbi[HL_BINDINGS] = {{dev->buf_a.buffer, 0, VK_WHOLE_SIZE},
                                               {dev->buf_b.buffer, 0, VK_WHOLE_SIZE},
                                               {dev->buf_c.buffer, 0, VK_WHOLE_SIZE},
                                               {dev->buf_w.buffer, 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet w[HL_BINDINGS];
    for (uint32_t i = 0; i < HL_BINDINGS; i++)
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                      .dstSet = dev->ds, .dstBinding = i, .descriptorCount = 1,
                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .pBufferInfo = &dbi[i]};
    vkUpdateDescriptorSets(dev->device, HL_BINDINGS, w, 0, NULL);

    uint32_t pc[HL_PUSH_BYTES / 4] = {args->m, args->n, args->k, 0, (uint32_t)k_chunk, (uint32_t)splits};
    if (splits > 1) pc[3] |= FLAG_SPLIT;
    if (k % 8 == 0) pc[3] |= FLAG_A_VEC;
    if (n % 8 == 0) pc[3] |= FLAG_B_VEC;
    if (n % (args->out_dtype == HL_F16 ? 8 : 4) == 0) pc[3] |= FLAG_C_DIRECT;

    HL_VK(vkResetCommandBuffer(dev->cmd, 0));
    VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    HL_VK(vkBeginCommandBuffer(dev->cmd, &cbi));
    if (dev->timestamps_ok) vkCmdResetQueryPool(dev->cmd, dev->query_pool, 0, n_queries);
    VkBufferCopy up_a = {0, 0, a_bytes}, up_b = {off_b, 0, b_bytes};
    vkCmdCopyBuffer(dev->cmd, dev->staging.buffer, dev->buf_a.buffer, 1, &up_a);
    vkCmdCopyBuffer(dev->cmd, dev->staging.buffer, dev->buf_b.buffer, 1, &up_b);
    /* Poison C: all-ones is NaN in f16 and f32, so an element the kernel
     * fails to write cannot pass a check. */
    vkCmdFillBuffer(dev->cmd, dev->buf_c.buffer, 0, align_up(c_bytes, 4), 0xffffffffu);
    barrier(dev, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    vkCmdBindPipeline(dev->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    vkCmdBindDescriptorSets(dev->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dev->pipe_layout, 0, 1, &dev->ds,
                            0, NULL);
    vkCmdPushConstants(dev->cmd, dev->pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, pc);

    /* Dispatch order: warmup, then `iters` each between two timestamps (the
     * per-iteration samples), then `iters` back to back between two timestamps
     * (the batch figure). Single calls get one bracketed dispatch. A barrier
     * between dispatches orders them like a CUDA stream does. Timestamps are
     * taken at BOTTOM_OF_PIPE: written once all earlier work has finished. */
    for (uint32_t d = 0; d < n_disp; d++) {
        int timed_single = args->iters ? (d >= args->warmup && d < args->warmup + args->iters) : 1;
        uint32_t iter = args->iters ? d - args->warmup : 0;
        int batch_first = args->iters && d == args->warmup + args->iters;
        int batch_last = args->iters && d == n_disp - 1;
        if (d)
            barrier(dev, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                    VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
        if (timed_single && args->iters && args->flush_bytes) {
            vkCmdFillBuffer(dev->cmd, dev->flush.buffer, 0, align_up(args->flush_bytes, 4), d);
            barrier(dev, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
        }
        if (dev->timestamps_ok && timed_single)
            vkCmdWriteTimestamp(dev->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, dev->query_pool, 2 * iter);
        if (dev->timestamps_ok && batch_first)
            vkCmdWriteTimestamp(dev->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, dev->query_pool,
                                2 * args->iters);
        record_product(dev, pipe, reduce_pipe, grid, rgrid);
        if (dev->timestamps_ok && timed_single)
            vkCmdWriteTimestamp(dev->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, dev->query_pool,
                                2 * iter + 1);
        if (dev->timestamps_ok && batch_last)
            vkCmdWriteTimestamp(dev->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, dev->query_pool,
                                2 * args->iters + 1);
    }
    barrier(dev, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
            VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
    VkBufferCopy down = {0, off_c, c_bytes};
    if (args->c) vkCmdCopyBuffer(dev->cmd, dev->buf_c.buffer, dev->staging.buffer, 1, &down);
    barrier(dev, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
            VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    HL_VK(vkEndCommandBuffer(dev->cmd));
    dev->tel.record_ms += hl_now_ms() - t_rec;

    double t_sub = hl_now_ms();
    HL_VK(vkResetFences(dev->device, 1, &dev->fence));
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                       .pCommandBuffers = &dev->cmd};
    HL_VK_FAULT(HL_FAULT_SUBMIT, vkQueueSubmit(dev->queue, 1, &si, dev->fence));
    dev->tel.submits++;
    HL_VK(vkWaitForFences(dev->device, 1, &dev->fence, VK_TRUE, WAIT_TIMEOUT_NS));
    dev->tel.submit_wait_ms += hl_now_ms() - t_sub;
    dev->tel.bytes_up += a_bytes + b_bytes;

    if (dev->timestamps_ok) {
        uint64_t ts[2];
        if (args->iters) {
            for (uint32_t i = 0; i < args->iters; i++) {
                HL_VK(vkGetQueryPoolResults(dev->device, dev->query_pool, 2 * i, 2, sizeof ts, ts,
                                            sizeof ts[0], VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
                args->samples_ms[i] = ticks_ms(dev, ts[0], ts[1]);
            }
            HL_VK(vkGetQueryPoolResults(dev->device, dev->query_pool, 2 * args->iters, 2, sizeof ts, ts,
                                        sizeof ts[0], VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
            if (args->batch_ms) *args->batch_ms = ticks_ms(dev, ts[0], ts[1]) / args->iters;
            dev->tel.last_gpu_ms = args->samples_ms[args->iters - 1];
        } else {
            HL_VK(vkGetQueryPoolResults(dev->device, dev->query_pool, 0, 2, sizeof ts, ts, sizeof ts[0],
                                        VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
            dev->tel.last_gpu_ms = ticks_ms(dev, ts[0], ts[1]);
        }
    }
    if (args->c) {
        memcpy(args->c, stage + off_c, c_bytes);
        dev->tel.bytes_down += c_bytes;
    }
    dev->tel.matmuls++;
    if (v.path != HL_PATH_SCALAR) dev->tel.coop_matmuls++;
    hl_variant_format(&v, dev->tel.last_variant, sizeof dev->tel.last_variant);
    return HL_OK;
fail:
    /* A failed submit or wait leaves the command buffer possibly pending: wait
     * for the device so the next call can safely reset it. */
    if (dev->device) vkDeviceWaitIdle(dev->device);
    return st;
}
