/* tensor.c — device-resident buffers the caller owns (helios.Tensor), and their
 * transfers through the device's staging buffer (one hl_exec_run each). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static void list_add(hl_device *dev, hl_tensor *t) {
    t->next = dev->tensors;
    if (dev->tensors) dev->tensors->prev = t;
    dev->tensors = t;
}

/* A new tensor of `bytes`: allocated (exportable or not), or, with import_fd >= 0,
 * over memory exported as that opaque fd (of exactly `bytes`; Vulkan owns the fd once
 * this succeeds, the caller still does on failure). */
static hl_status create(hl_device *dev, uint64_t bytes, int exportable, int import_fd, int dedicated, hl_tensor **out,
                        hl_error *err) {
    *out = NULL;
    if (!bytes) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "a tensor needs at least 1 byte");
    hl_tensor *t = calloc(1, sizeof *t);
    if (!t) return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
    /* Rounded to 16 bytes: the kernels read 16-byte vectors. */
    const uint64_t size = (bytes + 15) / 16 * 16;
    hl_status st = import_fd >= 0 ? hl_buffer_import_fd(dev, import_fd, bytes, dedicated, &t->buf, err)
                   : exportable   ? hl_buffer_create_exportable(dev, size, &t->buf, err)
                                  : hl_buffer_create(dev, size, 0, &t->buf, err);
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

hl_status hl_tensor_create(hl_device *dev, uint64_t bytes, hl_tensor **out, hl_error *err) {
    return create(dev, bytes, 0, -1, 0, out, err);
}

hl_status hl_tensor_create_exportable(hl_device *dev, uint64_t bytes, hl_tensor **out, hl_error *err) {
    return create(dev, bytes, 1, -1, 0, out, err);
}

hl_status hl_tensor_reimport(hl_tensor *src, hl_tensor **out, hl_error *err) {
    *out = NULL;
    if (!src || !src->dev) return hl_fail(err, HL_ERR_DEVICE_CLOSED, "tensor reimport: its device is closed");
    if (src->is_view || !src->buf.exportable)
        return hl_fail(err, HL_ERR_UNSUPPORTED, "tensor reimport: a whole tensor allocated exportable");
    hl_device *dev = src->dev;
    int fd = -1;
    VkMemoryGetFdInfoKHR gi = {.sType = VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR,
                               .memory = src->buf.memory,
                               .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkResult vr = dev->get_memory_fd(dev->device, &gi, &fd);
    if (vr != VK_SUCCESS) {
        hl_status st = hl_fail(err, HL_ERR_VULKAN, "vkGetMemoryFdKHR failed: %s", hl_vk_result_name(vr));
        if (err) err->vk_result = vr;
        return st;
    }
    hl_status st = create(dev, src->buf.alloc_bytes, 0, fd, 1, out, err); /* exported dedicated: imported so */
    if (st != HL_OK)
        close(fd);
    else
        (*out)->bytes = src->bytes;
    return st;
}

hl_status hl_tensor_import_cuda_segment(hl_device *dev, uint64_t segment, hl_tensor **out, hl_error *err) {
    *out = NULL;
    int fd = -1, cuda_device = -1, ordinal = -1;
    uint64_t size = 0;
    hl_status st = hl_cuda_ordinal(dev, &ordinal, err);
    if (st != HL_OK) return st;
    st = hl_cuda_pool_dup(segment, &fd, &size, &cuda_device, err);
    if (st != HL_OK) return st;
    if (cuda_device != ordinal) {
        close(fd);
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "memory import: the segment is on CUDA device %d; this Vulkan device is CUDA device %d",
                       cuda_device, ordinal);
    }
    st = create(dev, size, 0, fd, 0, out, err);
    if (st != HL_OK) close(fd); /* Vulkan took the fd only on success */
    return st;
}

int hl_tensor_exportable(const hl_tensor *t) { return t && t->dev && !t->is_view && t->buf.exportable; }

hl_status hl_tensor_cuda_export(hl_tensor *t, uint64_t *ptr, int *ordinal, hl_error *err) {
    if (!t || !t->dev) return hl_fail(err, HL_ERR_DEVICE_CLOSED, "tensor export: its device is closed");
    if (t->is_view)
        return hl_fail(err, HL_ERR_UNSUPPORTED,
                       "tensor export: a slice view shares its owner's memory; export the whole tensor and slice "
                       "it on the other side");
    if (!t->buf.exportable)
        return hl_fail(err, HL_ERR_UNSUPPORTED,
                       "tensor export: the tensor was not allocated exportable (Device.empty(..., "
                       "exportable=True) or Device.upload(..., exportable=True))");
    hl_status st = hl_cuda_import(t->dev, &t->buf, t->bytes, err);
    if (st != HL_OK) return st;
    *ptr = t->buf.cuda_ptr;
    *ordinal = t->dev->cuda.ordinal;
    t->dev->live_exports++;
    t->exports++;
    return HL_OK;
}

void hl_tensor_export_done(hl_tensor *t) {
    if (!t) return;
    if (t->exports) t->exports--;
    if (t->dev && t->dev->live_exports) t->dev->live_exports--;
}

uint64_t hl_tensor_exports(const hl_tensor *t) { return t ? t->exports : 0; }

uint64_t hl_device_live_exports(const hl_device *dev) { return dev ? dev->live_exports : 0; }

hl_status hl_device_cuda_ordinal(hl_device *dev, int *ordinal, hl_error *err) {
    return hl_cuda_ordinal(dev, ordinal, err);
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
        hl_async_quiesce(dev);
        hl_cuda_release(dev, &t->buf);
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

void hl_tensors_detach(hl_device *dev) {
    while (dev->tensors) {
        hl_tensor *t = dev->tensors;
        dev->tensors = t->next;
        t->dev = NULL;
        t->prev = t->next = NULL;
    }
}

int hl_tensor_alive(const hl_tensor *t) { return t && t->dev; }
const hl_device *hl_tensor_device(const hl_tensor *t) { return t ? t->dev : NULL; }
uint64_t hl_tensor_bytes(const hl_tensor *t) { return t ? t->bytes : 0; }

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
    hl_operand o = {.tensor = t, .upload = src, .bytes = bytes, .at = offset, .slot = -1};
    hl_exec x = {.operands = &o, .n_operands = 1};
    return hl_exec_run(t->dev, &x, err);
}

hl_status hl_tensor_read(hl_tensor *t, uint64_t offset, void *dst, uint64_t bytes, hl_error *err) {
    hl_status st = check_range(t, offset, bytes, "read", err);
    if (st != HL_OK || !bytes) return st;
    hl_operand o = {.tensor = t, .download = dst, .bytes = bytes, .at = offset, .slot = -1};
    hl_exec x = {.operands = &o, .n_operands = 1};
    return hl_exec_run(t->dev, &x, err);
}
