/* buffer.c — storage buffers: device-local workspace and host-visible staging. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int find_memory_type(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits, VkMemoryPropertyFlags want,
                            VkMemoryPropertyFlags prefer) {
    int fallback = -1;
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        if (!(bits & (1u << i))) continue;
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        if ((f & want) != want) continue;
        if ((f & prefer) == prefer) return (int)i;
        if (fallback < 0) fallback = (int)i;
    }
    return fallback;
}

/* import_fd >= 0: the buffer's memory is that opaque fd's (of import_bytes bytes),
 * imported instead of allocated; Vulkan owns the fd once the import succeeds. */
/* The memory type for a buffer: host-visible coherent (cached where offered), or
 * device-local, or on a device with no such type (a CPU device) any; -1: none. */
static int memory_type(const hl_device *dev, uint32_t type_bits, int host_visible) {
    VkMemoryPropertyFlags want = host_visible
                                     ? (VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)
                                     : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    VkMemoryPropertyFlags prefer = host_visible ? VK_MEMORY_PROPERTY_HOST_CACHED_BIT : 0;
    int type = find_memory_type(&dev->mem_props, type_bits, want, prefer | want);
    if (type < 0 && !host_visible) type = find_memory_type(&dev->mem_props, type_bits, 0, 0);
    return type;
}

static hl_status create(hl_device *dev, VkDeviceSize size, int host_visible, int exportable, int import_fd,
                        VkDeviceSize import_bytes, int import_dedicated, hl_buffer *out, hl_error *err) {
    hl_status st = HL_OK;
    memset(out, 0, sizeof *out);
    const hl_caps *c = &dev->caps;
    if (size > c->max_storage_buffer_range || (c->max_allocation_bytes && size > c->max_allocation_bytes))
        return hl_fail(err, HL_ERR_TOO_LARGE,
                       "a %llu-byte buffer exceeds the device's limits (maxStorageBufferRange "
                       "%llu, maxMemoryAllocationSize %llu bytes)",
                       (unsigned long long)size, (unsigned long long)c->max_storage_buffer_range,
                       (unsigned long long)c->max_allocation_bytes);
    VkExternalMemoryBufferCreateInfo ebci = {.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
                                             .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                              .pNext = exportable || import_fd >= 0 ? &ebci : NULL,
                              .size = size,
                              /* host-visible: also a plan's dispatch arguments (plan.c) */
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                       (host_visible ? VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT : 0),
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    HL_VK_FAULT(HL_FAULT_BUFFER, vkCreateBuffer(dev->device, &bci, NULL, &out->buffer));
    dev->tel.live_buffers++;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev->device, out->buffer, &req);
    const int type = memory_type(dev, req.memoryTypeBits, host_visible);
    if (type < 0) {
        st = hl_fail(err, HL_ERR_UNSUPPORTED, "no %s memory type for a storage buffer",
                     host_visible ? "host-visible coherent" : "device-local");
        goto fail;
    }
    /* Exportable memory: a dedicated allocation (what CUDA's import expects). */
    VkMemoryDedicatedAllocateInfo dedicated = {.sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO,
                                               .buffer = out->buffer};
    VkExportMemoryAllocateInfo export_info = {.sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO,
                                              .pNext = &dedicated,
                                              .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkImportMemoryFdInfoKHR import_info = {.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR,
                                           .pNext = import_dedicated ? &dedicated : NULL,
                                           .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
                                           .fd = import_fd};
    if (import_fd >= 0 && req.size > import_bytes) {
        st = hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                     "memory import: a %llu-byte buffer needs %llu bytes; the imported allocation has %llu",
                     (unsigned long long)size, (unsigned long long)req.size, (unsigned long long)import_bytes);
        goto fail;
    }
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .pNext = import_fd >= 0 ? (void *)&import_info
                                         : exportable   ? (void *)&export_info
                                                        : NULL,
                                .allocationSize = import_fd >= 0 ? import_bytes : req.size,
                                .memoryTypeIndex = (uint32_t)type};
    VkResult vr = hl_fault(HL_FAULT_ALLOC);
    if (vr == VK_SUCCESS) vr = vkAllocateMemory(dev->device, &mai, NULL, &out->memory);
    if (vr == VK_ERROR_OUT_OF_DEVICE_MEMORY || vr == VK_ERROR_OUT_OF_HOST_MEMORY) {
        st = hl_fail(err, HL_ERR_OUT_OF_MEMORY, "vkAllocateMemory of %llu bytes failed: %s",
                     (unsigned long long)req.size, hl_vk_result_name(vr));
        if (err) err->vk_result = vr;
        goto fail;
    }
    HL_VK(vr);
    dev->tel.live_memory++;
    out->alloc_bytes = import_fd >= 0 ? 0 : req.size; /* imported memory is the exporter's to count */
    out->imported = import_fd >= 0;
    out->host_visible = host_visible;
    out->exportable = exportable;
    if (!host_visible) {
        dev->tel.device_bytes += req.size;
        if (dev->tel.device_bytes > dev->tel.peak_device_bytes) dev->tel.peak_device_bytes = dev->tel.device_bytes;
    }
    HL_VK(vkBindBufferMemory(dev->device, out->buffer, out->memory, 0));
    if (host_visible)
        HL_VK_FAULT(HL_FAULT_MAP, vkMapMemory(dev->device, out->memory, 0, VK_WHOLE_SIZE, 0, &out->mapped));
    out->size = size;
    return HL_OK;
fail:
    hl_buffer_destroy(dev, out);
    return st;
}

hl_status hl_buffer_create(hl_device *dev, VkDeviceSize size, int host_visible, hl_buffer *out, hl_error *err) {
    return create(dev, size, host_visible, 0, -1, 0, 0, out, err);
}

hl_status hl_buffer_import_fd(hl_device *dev, int fd, VkDeviceSize bytes, int dedicated, hl_buffer *out,
                              hl_error *err) {
    if (!dev->caps.external_memory_fd)
        return hl_fail(err, HL_ERR_UNSUPPORTED,
                       "memory import needs VK_KHR_external_memory_fd, which device '%s' does not offer",
                       dev->caps.name);
    return create(dev, bytes, 0, 0, fd, bytes, dedicated, out, err);
}

hl_status hl_buffer_create_exportable(hl_device *dev, VkDeviceSize size, hl_buffer *out, hl_error *err) {
    if (!dev->caps.external_memory_fd)
        return hl_fail(err, HL_ERR_UNSUPPORTED,
                       "exportable tensors need VK_KHR_external_memory_fd, which device '%s' does not offer",
                       dev->caps.name);
    return create(dev, size, 0, 1, -1, 0, 0, out, err);
}

static int keep_in_graveyard(hl_device *dev, hl_buffer *b) {
    if (!dev->abandoned || (!b->buffer && !b->memory)) return 0;
    if (vkGetFenceStatus(dev->device, dev->fence) == VK_SUCCESS) return 0; /* done: freed now */
    if (dev->n_graveyard == dev->cap_graveyard) {
        uint32_t cap = dev->cap_graveyard ? dev->cap_graveyard * 2 : 16;
        hl_buffer *g = realloc(dev->graveyard, cap * sizeof *g);
        if (!g) { /* no room to defer: wait for the GPU instead, then free */
            vkWaitForFences(dev->device, 1, &dev->fence, VK_TRUE, UINT64_MAX);
            return 0;
        }
        dev->graveyard = g;
        dev->cap_graveyard = cap;
    }
    dev->graveyard[dev->n_graveyard++] = *b;
    memset(b, 0, sizeof *b);
    return 1;
}

void hl_buffers_release_graveyard(hl_device *dev) {
    for (uint32_t i = 0; i < dev->n_graveyard; i++) hl_buffer_destroy(dev, &dev->graveyard[i]);
    free(dev->graveyard);
    dev->graveyard = NULL;
    dev->n_graveyard = dev->cap_graveyard = 0;
}

void hl_buffer_destroy(hl_device *dev, hl_buffer *b) {
    if (!b) return;
    if (keep_in_graveyard(dev, b)) return;
    if (b->mapped) vkUnmapMemory(dev->device, b->memory);
    if (b->buffer) {
        vkDestroyBuffer(dev->device, b->buffer, NULL);
        dev->tel.live_buffers--;
    }
    if (b->memory) {
        vkFreeMemory(dev->device, b->memory, NULL);
        dev->tel.live_memory--;
        if (!b->host_visible) dev->tel.device_bytes -= b->alloc_bytes;
    }
    memset(b, 0, sizeof *b);
}
