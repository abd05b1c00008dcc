/* interrupt.c — waits on the GPU that the host can interrupt (hl_set_interrupt_check),
 * and the life of a submission whose wait was interrupted: the device finishes it
 * before anything reuses its command buffer, and a device destroyed while it still
 * runs is left to process exit rather than freed under it. */
#include "internal.h"

#define WAIT_TIMEOUT_NS (600ull * 1000 * 1000 * 1000)
#define SLICE_NS (50ull * 1000 * 1000)               /* how often the host is asked */
#define DESTROY_GRACE_NS (2ull * 1000 * 1000 * 1000) /* what hl_device_destroy waits for it */

static hl_interrupt_fn interrupt_check;
static int abandoned_devices;

void hl_set_interrupt_check(hl_interrupt_fn fn) { interrupt_check = fn; }

int hl_abandoned_devices(void) { return abandoned_devices; }

static void settled(hl_device *dev) {
    dev->abandoned = 0;
    hl_buffers_release_graveyard(dev);
}

hl_status hl_wait_fence(hl_device *dev, hl_error *err) {
    uint64_t waited = 0;
    for (;;) {
        const uint64_t slice = interrupt_check ? SLICE_NS : WAIT_TIMEOUT_NS;
        VkResult vr = vkWaitForFences(dev->device, 1, &dev->fence, VK_TRUE, slice);
        if (vr == VK_SUCCESS) {
            if (dev->abandoned) settled(dev);
            return HL_OK;
        }
        waited += slice;
        if (vr != VK_TIMEOUT || waited >= WAIT_TIMEOUT_NS)
            return hl_vk_fail(err, vr, "vkWaitForFences", __FILE__, __LINE__);
        if (interrupt_check && interrupt_check()) {
            dev->abandoned = 1;
            return hl_fail(err, HL_ERR_INTERRUPTED,
                           "the wait for the GPU was interrupted; the GPU finishes the submitted work on its own");
        }
    }
}

hl_status hl_settle(hl_device *dev, hl_error *err) { return dev->abandoned ? hl_wait_fence(dev, err) : HL_OK; }

int hl_device_abandon(hl_device *dev) {
    if (!dev->abandoned || !dev->device) return 0;
    if (vkWaitForFences(dev->device, 1, &dev->fence, VK_TRUE, DESTROY_GRACE_NS) == VK_SUCCESS) {
        settled(dev);
        return 0;
    }
    abandoned_devices++;
    return 1;
}
