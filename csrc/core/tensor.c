/* tensor.c — device-resident buffers the caller owns (helios.Tensor), and their
 * transfers through the device's staging buffer (one submission each). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define WAIT_TIMEOUT_NS (600ull * 1000 * 1000 * 1000)

static void list_add(hl_device *dev, hl_tensor *t) {
    t->next = dev->tensors;
    if (dev->tensors) dev->tensors->prev = t;
    dev->tensors = t;
}

hl_status hl_tensor_create(hl_device *dev, uint64_t bytes, hl_tensor **out, hl_error *err) {
    *out = NULL;
    if (!bytes) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "a tensor needs at least 1 byte");
    hl_tensor *t = calloc(1, sizeof *t);
    if (!t) return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
    /* Rounded to 16 bytes: the kernels read 16-byte vectors. */
    hl_status st = hl_buffer_create(dev, (bytes + 15) / 16 * 16, 0, &t->buf, err);
    if (st != HL_OK) {
        free(t);
        return st;
    }
    t->dev = dev;
    t->bytes = bytes;
    list_add(dev, t);
    dev->tel.tensors++;
    *out = t;
    return HL_OK;
}

hl_status hl_tensor_view(hl_tensor *base, uint64_t offset, uint64_t bytes, hl_tensor **out, hl_error *err) {
    *out = NULL;
    if (!base || !base->dev) return hl_fail(err, HL_ERR_DEVICE_CLOSED, "tensor view: the tensor's device is closed");
    const uint64_t align = base->dev->caps.storage_offset_alignment ? base->dev->caps.storage_offset_alignment : 1;
    if (!bytes || offset > base->bytes || bytes > base->bytes - offset)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "tensor view: bytes %llu..%llu are outside the tensor's %llu",
                       (unsigned long long)offset, (unsigned long long)(offset + bytes),
                       (unsigned long long)base->bytes);
    if ((base->offset + offset) % align)
        return hl_fail(err, HL_ERR_UNSUPPORTED,
                       "tensor view: offset %llu is not a multiple of the device's "
                       "storage-buffer offset alignment (%llu bytes): the kernels cannot read it in place",
                       (unsigned long long)(base->offset + offset), (unsigned long long)align);
    hl_tensor *t = calloc(1, sizeof *t);
    if (!t) return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
    t->dev = base->dev;
    t->buf = base->buf;
    t->offset = base->offset + offset;
    t->bytes = bytes;
    t->is_view = 1;
    list_add(base->dev, t);
    *out = t;
    return HL_OK;
}

int hl_tensors_share(const hl_tensor *a, const hl_tensor *b) {
    return a && b && (a == b || a->buf.buffer == b->buf.buffer);
}

static void unlink_release(hl_tensor *t) {
    hl_device *dev = t->dev;
    if (!dev) return;
    if (t->prev)
        t->prev->next = t->next;
    else
        dev->tensors = t->next;
    if (t->next) t->next->prev = t->prev;
    if (!t->is_view) { /* a view's memory is its owner's */
        hl_buffer_destroy(dev, &t->buf);
        dev->tel.tensors--;
    }
    t->dev = NULL;
    t->prev = t->next = NULL;
}

void hl_tensor_destroy(hl_tensor *t) {
    if (!t) return;
    unlink_release(t);
    free(t);
}

void hl_tensors_release(hl_device *dev) {
    while (dev->tensors) unlink_release(dev->tensors);
}

int hl_tensor_alive(const hl_tensor *t) { return t && t->dev; }
const hl_device *hl_tensor_device(const hl_tensor *t) { return t ? t->dev : NULL; }
uint64_t hl_tensor_bytes(const hl_tensor *t) { return t ? t->bytes : 0; }

/* One copy between the tensor and the staging buffer, submitted and waited for. */
static hl_status transfer(hl_tensor *t, uint64_t offset, uint64_t bytes, int upload, hl_error *err) {
    hl_status st = HL_OK;
    hl_device *dev = t->dev;
    HL_VK(vkResetCommandBuffer(dev->cmd, 0));
    VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    HL_VK(vkBeginCommandBuffer(dev->cmd, &cbi));
    offset += t->offset; /* a view starts inside its owner's buffer */
    VkBufferCopy region = upload ? (VkBufferCopy){0, offset, bytes} : (VkBufferCopy){offset, 0, bytes};
    if (upload)
        vkCmdCopyBuffer(dev->cmd, dev->staging.buffer, t->buf.buffer, 1, &region);
    else
        vkCmdCopyBuffer(dev->cmd, t->buf.buffer, dev->staging.buffer, 1, &region);
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = upload ? VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT
                                                  : VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(dev->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                         upload ? VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT
                                : VK_PIPELINE_STAGE_HOST_BIT,
                         0, 1, &mb, 0, NULL, 0, NULL);
    HL_VK(vkEndCommandBuffer(dev->cmd));
    HL_VK(vkResetFences(dev->device, 1, &dev->fence));
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &dev->cmd};
    double t0 = hl_now_ms();
    HL_VK_FAULT(HL_FAULT_SUBMIT, vkQueueSubmit(dev->queue, 1, &si, dev->fence));
    dev->tel.submits++;
    HL_VK(vkWaitForFences(dev->device, 1, &dev->fence, VK_TRUE, WAIT_TIMEOUT_NS));
    dev->tel.submit_wait_ms += hl_now_ms() - t0;
    if (upload)
        dev->tel.bytes_up += bytes;
    else
        dev->tel.bytes_down += bytes;
    return HL_OK;
fail:
    vkDeviceWaitIdle(dev->device);
    return st;
}

static hl_status check_range(const hl_tensor *t, uint64_t offset, uint64_t bytes, const char *what, hl_error *err) {
    if (!t || !t->dev) return hl_fail(err, HL_ERR_DEVICE_CLOSED, "tensor %s: its device is closed", what);
    if (offset > t->bytes || bytes > t->bytes - offset)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "tensor %s of %llu bytes at offset %llu: the "
                       "tensor holds %llu bytes",
                       what, (unsigned long long)bytes, (unsigned long long)offset, (unsigned long long)t->bytes);
    return HL_OK;
}

hl_status hl_tensor_write(hl_tensor *t, uint64_t offset, const void *src, uint64_t bytes, hl_error *err) {
    hl_status st = check_range(t, offset, bytes, "write", err);
    if (st != HL_OK || !bytes) return st;
    st = hl_buffer_reserve(t->dev, &t->dev->staging, bytes, 1, err);
    if (st != HL_OK) return st;
    memcpy(t->dev->staging.mapped, src, bytes);
    return transfer(t, offset, bytes, 1, err);
}

hl_status hl_tensor_read(hl_tensor *t, uint64_t offset, void *dst, uint64_t bytes, hl_error *err) {
    hl_status st = check_range(t, offset, bytes, "read", err);
    if (st != HL_OK || !bytes) return st;
    st = hl_buffer_reserve(t->dev, &t->dev->staging, bytes, 1, err);
    if (st != HL_OK) return st;
    st = transfer(t, offset, bytes, 0, err);
    if (st != HL_OK) return st;
    memcpy(dst, t->dev->staging.mapped, bytes);
    return HL_OK;
}
