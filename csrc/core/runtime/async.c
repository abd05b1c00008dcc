/* async.c — operations that return without waiting for the GPU, ordered with
 * CUDA streams through one timeline semaphore the device shares with CUDA
 * (exported as an opaque fd, imported by the CUDA driver).
 *
 * The protocol, per operation on torch tensors: hl_async_values hands out a
 * pair (w, s = w + 1); torch's stream signals w once the inputs are written;
 * the operation's submission waits for w and signals s; torch's stream waits
 * for s before anything reads the output. Values only grow, so one CUDA stream
 * at a time drives them. Each submission takes a slot of a ring of command
 * buffers (and descriptor pools); a slot is reused once the value its last
 * submission signals is reached. Synchronous work on the device (uploads,
 * reads, timed calls) first waits for the last value an async submission
 * signals, so it never overtakes one on the queue. hl_async_open_host makes the
 * same ring over a semaphore of this device alone, the host standing in for the
 * CUDA stream (how CI runs this path on a device without CUDA). */
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define WAIT_TIMEOUT_NS (600ull * 1000 * 1000 * 1000)

/* The ring over a timeline semaphore: shared with CUDA (exported, imported by the
 * CUDA driver) or, host = 1, this device's alone. */
static hl_status async_open(hl_device *dev, int host, hl_error *err) {
    hl_status st = HL_OK;
    int fd = -1;
    if (dev->async.timeline) {
        if (dev->async.host_driven == host) return HL_OK;
        return hl_fail(err, HL_ERR_UNSUPPORTED,
                       "this device's operations are already ordered %s; one device orders with one of them",
                       dev->async.host_driven ? "by the host (a test's hl_async_open_host)" : "with CUDA");
    }
    if (host ? !dev->caps.has_timeline : !dev->caps.external_semaphore_fd)
        return hl_fail(err, HL_ERR_UNSUPPORTED,
                       host ? "host-driven ordering needs timeline semaphores, which device '%s' does not offer"
                            : "ordering with CUDA needs VK_KHR_external_semaphore_fd and timeline semaphores, which "
                              "device '%s' does not offer",
                       dev->caps.name);
    VkExportSemaphoreCreateInfo export_info = {.sType = VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO,
                                               .handleTypes = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkSemaphoreTypeCreateInfo type_info = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                           .pNext = host ? NULL : &export_info,
                                           .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
                                           .initialValue = 0};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &type_info};
    HL_VK(vkCreateSemaphore(dev->device, &sci, NULL, &dev->async.timeline));
    dev->async.host_driven = host;
    if (!host) {
        VkSemaphoreGetFdInfoKHR gi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR,
                                      .semaphore = dev->async.timeline,
                                      .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
        HL_VK(dev->get_semaphore_fd(dev->device, &gi, &fd));
        st = hl_cuda_import_semaphore(dev, fd, err); /* takes the fd, also on failure */
        fd = -1;
        if (st != HL_OK) goto fail;
    }
    VkCommandBuffer cmds[HL_RING_SLOTS];
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = dev->cmd_pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = HL_RING_SLOTS};
    HL_VK(vkAllocateCommandBuffers(dev->device, &cai, cmds));
    /* a set per operation: one for a lone submission, up to HL_GROUP_MAX_OPS for a group */
    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                               .descriptorCount = HL_SET_DESCRIPTORS * HL_GROUP_MAX_OPS};
    VkDescriptorPoolCreateInfo dpci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                       .maxSets = HL_GROUP_MAX_OPS,
                                       .poolSizeCount = 1,
                                       .pPoolSizes = &ps};
    for (uint32_t i = 0; i < HL_RING_SLOTS; i++) {
        dev->async.ring[i].cmd = cmds[i];
        HL_VK(vkCreateDescriptorPool(dev->device, &dpci, NULL, &dev->async.ring[i].pool));
    }
    if (dev->timestamps_ok) {
        VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                     .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                     .queryCount = 2 * HL_RING_SLOTS};
        HL_VK(vkCreateQueryPool(dev->device, &qci, NULL, &dev->async.queries));
    }
    dev->async.next = 1;
    return HL_OK;
fail:
    hl_async_close(dev);
    return st;
}

hl_status hl_async_open(hl_device *dev, hl_error *err) { return async_open(dev, 0, err); }

hl_status hl_async_open_host(hl_device *dev, hl_error *err) { return async_open(dev, 1, err); }

hl_status hl_device_host_signal(hl_device *dev, uint64_t value, hl_error *err) {
    hl_status st = HL_OK;
    if (!dev->async.timeline || !dev->async.host_driven)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "host signals drive a host-ordered device only (hl_async_open_host first)");
    VkSemaphoreSignalInfo si = {
        .sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO, .semaphore = dev->async.timeline, .value = value};
    HL_VK(dev->signal_semaphore(dev->device, &si));
    return HL_OK;
fail:
    return st;
}

hl_status hl_device_host_wait(hl_device *dev, uint64_t value, uint64_t timeout_ns, hl_error *err) {
    if (!dev->async.timeline)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "no ordered operation was submitted on this device");
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1,
                              .pSemaphores = &dev->async.timeline,
                              .pValues = &value};
    VkResult vr = dev->wait_semaphores(dev->device, &wi, timeout_ns);
    if (vr == VK_TIMEOUT)
        return hl_fail(err, HL_ERR_TIMEOUT, "the ordering semaphore did not reach %llu in %llu ns",
                       (unsigned long long)value, (unsigned long long)timeout_ns);
    return vr == VK_SUCCESS ? HL_OK : hl_vk_fail(err, vr, "vkWaitSemaphores", __FILE__, __LINE__);
}

hl_status hl_device_semaphore_value(hl_device *dev, uint64_t *value, hl_error *err) {
    hl_status st = HL_OK;
    if (!dev->async.timeline)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "no ordered operation was submitted on this device");
    HL_VK(dev->semaphore_value(dev->device, dev->async.timeline, value));
fail:
    return st;
}

void hl_async_close(hl_device *dev) { /* an open group was submitted first (hl_device_destroy) */
    if (dev->async.timeline && dev->async.pending) {
        /* best effort: work waiting for a CUDA signal that never comes is abandoned */
        VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                  .semaphoreCount = 1,
                                  .pSemaphores = &dev->async.timeline,
                                  .pValues = &dev->async.pending};
        dev->wait_semaphores(dev->device, &wi, 5ull * 1000 * 1000 * 1000);
    }
    for (uint32_t i = 0; i < HL_RING_SLOTS; i++) {
        if (dev->async.ring[i].pool) vkDestroyDescriptorPool(dev->device, dev->async.ring[i].pool, NULL);
        if (dev->async.ring[i].cmd) vkFreeCommandBuffers(dev->device, dev->cmd_pool, 1, &dev->async.ring[i].cmd);
        memset(&dev->async.ring[i], 0, sizeof dev->async.ring[i]);
    }
    if (dev->async.queries) vkDestroyQueryPool(dev->device, dev->async.queries, NULL);
    dev->async.queries = VK_NULL_HANDLE;
    hl_async_release_retired(dev, 1); /* their work is done or abandoned (the wait above) */
    hl_cuda_release_semaphore(dev);
    if (dev->async.timeline) vkDestroySemaphore(dev->device, dev->async.timeline, NULL);
    dev->async.timeline = VK_NULL_HANDLE;
    dev->async.host_driven = 0;
    dev->async.next = dev->async.pending = 0;
}

hl_status hl_async_values(hl_device *dev, uint64_t *wait, uint64_t *signal, hl_error *err) {
    hl_status st = dev->async.timeline ? HL_OK : hl_async_open(dev, err); /* the open ring, host-driven or CUDA's */
    if (st != HL_OK) return st;
    /* The values between a pair are the chunks of a group (hl_async_group_flush). */
    *wait = dev->async.next;
    *signal = dev->async.next + HL_VALUE_SPAN;
    dev->async.next += HL_VALUE_SPAN + 1;
    return HL_OK;
}

hl_status hl_device_cuda_signal(hl_device *dev, uint64_t stream, uint64_t value, hl_error *err) {
    return hl_cuda_stream_signal(dev, stream, value, err);
}

hl_status hl_device_cuda_wait(hl_device *dev, uint64_t stream, uint64_t value, hl_error *err) {
    return hl_cuda_stream_wait(dev, stream, value, err);
}

/* Reads slot i's timestamps into the telemetry; its submission has finished (the
 * semaphore reached the value it signals after its last command). */
static void collect_slot(hl_device *dev, uint32_t i) {
    uint64_t ts[2];
    VkResult vr = vkGetQueryPoolResults(dev->device, dev->async.queries, 2 * i, 2, sizeof ts, ts, sizeof ts[0],
                                        VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    dev->async.ring[i].timed = 0;
    if (vr != VK_SUCCESS) return; /* lost: the sum leaves it out */
    dev->tel.async_gpu_ms += hl_ticks_ms(dev, ts[0], ts[1]);
    dev->tel.async_timed++;
}

void hl_async_collect(hl_device *dev) {
    uint64_t reached = 0;
    if (!dev->async.timeline || dev->semaphore_value(dev->device, dev->async.timeline, &reached) != VK_SUCCESS) return;
    if (dev->async.queries)
        for (uint32_t i = 0; i < HL_RING_SLOTS; i++)
            if (dev->async.ring[i].timed && dev->async.ring[i].done <= reached) collect_slot(dev, i);
    for (uint32_t i = 0; i < dev->async.n_retired;) {
        if (dev->async.retired[i].done <= reached &&
            !(dev->group.open && dev->async.retired[i].done == dev->group.signal)) {
            hl_buffer_destroy(dev, &dev->async.retired[i].buf);
            dev->async.retired[i] = dev->async.retired[--dev->async.n_retired];
        } else {
            i++;
        }
    }
}

void hl_async_release_retired(hl_device *dev, int all) {
    if (!all) {
        hl_async_collect(dev);
        return;
    }
    for (uint32_t i = 0; i < dev->async.n_retired; i++) hl_buffer_destroy(dev, &dev->async.retired[i].buf);
    dev->async.n_retired = 0;
}

/* The next ring slot, its previous submission finished (normally long since). */
hl_status hl_async_slot(hl_device *dev, struct hl_ring_slot **out, hl_error *err) {
    hl_status st = HL_OK;
    struct hl_ring_slot *slot = &dev->async.ring[dev->async.ring_next++ % HL_RING_SLOTS];
    if (slot->done) {
        VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                  .semaphoreCount = 1,
                                  .pSemaphores = &dev->async.timeline,
                                  .pValues = &slot->done};
        HL_VK(dev->wait_semaphores(dev->device, &wi, WAIT_TIMEOUT_NS));
    }
    if (slot->timed) collect_slot(dev, (uint32_t)(slot - dev->async.ring)); /* finished: read before its reuse */
    if (dev->async.n_retired) hl_async_collect(dev);
    HL_VK(vkResetDescriptorPool(dev->device, slot->pool, 0));
    *out = slot;
    return HL_OK;
fail:
    return st;
}

void hl_async_quiesce(hl_device *dev) {
    if (!dev->async.timeline || !dev->async.pending) return;
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1,
                              .pSemaphores = &dev->async.timeline,
                              .pValues = &dev->async.pending};
    dev->wait_semaphores(dev->device, &wi, WAIT_TIMEOUT_NS);
    if (dev->async.n_retired) hl_async_collect(dev);
}

/* A scratch buffer of at least size bytes: the one given where it is large enough, else a
 * new one, the old one kept until the open group's work is done (or waited for: an async
 * submission may still use it). */
hl_status hl_buffer_reserve(hl_device *dev, hl_buffer *b, VkDeviceSize size, int host_visible, hl_error *err) {
    if (b->buffer && b->size >= size) return HL_OK;
    if (b->buffer && dev->group.open) {
        /* An operation recorded in the open group (not yet submitted) may use it:
         * kept until the group's work is done. */
        if (dev->async.n_retired == HL_RETIRED_MAX)
            return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                           "a scratch buffer grew more than %u times inside one group of operations", HL_RETIRED_MAX);
        dev->async.retired[dev->async.n_retired++] = (struct hl_retired){*b, dev->group.signal};
        memset(b, 0, sizeof *b);
    } else if (b->buffer) {
        hl_async_quiesce(dev); /* an async submission may still use it */
    }
    hl_buffer_destroy(dev, b);
    /* Round up so that a sweep of growing shapes does not reallocate every call. */
    VkDeviceSize rounded = size < 4096 ? 4096 : size + size / 8;
    if (rounded > dev->caps.max_storage_buffer_range && size <= dev->caps.max_storage_buffer_range) rounded = size;
    return hl_buffer_create(dev, rounded, host_visible, b, err);
}

hl_status hl_check_async_values(const hl_device *dev, uint64_t wait_value, uint64_t signal_value, hl_error *err) {
    if (!dev->async.timeline || signal_value <= wait_value || signal_value <= dev->async.pending)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "async values %llu -> %llu: take them from hl_async_values (each pair once, in order)",
                       (unsigned long long)wait_value, (unsigned long long)signal_value);
    return HL_OK;
}

hl_status hl_submit_timeline(hl_device *dev, VkCommandBuffer cmd, uint64_t wait_value, uint64_t signal_value,
                             hl_error *err) {
    hl_status st = HL_OK;
    HL_TRY(hl_check_async_values(dev, wait_value, signal_value, err));
    const VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    VkTimelineSemaphoreSubmitInfo ti = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                        .waitSemaphoreValueCount = 1,
                                        .pWaitSemaphoreValues = &wait_value,
                                        .signalSemaphoreValueCount = 1,
                                        .pSignalSemaphoreValues = &signal_value};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                       .pNext = &ti,
                       .waitSemaphoreCount = 1,
                       .pWaitSemaphores = &dev->async.timeline,
                       .pWaitDstStageMask = &stage,
                       .commandBufferCount = 1,
                       .pCommandBuffers = &cmd,
                       .signalSemaphoreCount = 1,
                       .pSignalSemaphores = &dev->async.timeline};
    const double t_sub = hl_now_ms();
    HL_VK_FAULT(HL_FAULT_SUBMIT, vkQueueSubmit(dev->queue, 1, &si, VK_NULL_HANDLE));
    dev->tel.async_submit_ms += hl_now_ms() - t_sub;
    dev->tel.submits++;
    dev->async.pending = signal_value;
fail:
    return st;
}
