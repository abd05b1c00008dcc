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

/* Polls the fence for up to dev->wait_spin_us: 1 when it signalled, 0 when the time
 * ran out, -1 on an error (in *vr). A thread asleep in vkWaitForFences wakes some tens of
 * microseconds after the GPU is done, a decode step's share of its time. */
static int spin(hl_device *dev, VkResult *vr) {
    const double until = hl_now_ms() + dev->wait_spin_us / 1000.0;
    do {
        *vr = vkGetFenceStatus(dev->device, dev->fence);
        if (*vr == VK_SUCCESS) return 1;
        if (*vr != VK_NOT_READY) return -1;
    } while (hl_now_ms() < until);
    return 0;
}

hl_status hl_wait_fence(hl_device *dev, hl_error *err) {
    uint64_t waited = 0;
    if (dev->wait_spin_us) {
        VkResult vr;
        const int done = spin(dev, &vr);
        if (done < 0) return hl_vk_fail(err, vr, "vkGetFenceStatus", __FILE__, __LINE__);
        if (done) {
            if (dev->abandoned) settled(dev);
            return HL_OK;
        }
    }
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
