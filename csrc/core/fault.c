/* fault.c — test-only fault injection. HELIOS_FAULT=KIND:N makes the Nth
 * Vulkan call of KIND since the variable last changed fail with a real
 * VkResult instead of running, so tests can walk every failure path of a
 * call and check the exception, the cleanup and the device afterwards.
 * KIND: buffer (vkCreateBuffer), alloc (vkAllocateMemory), map (vkMapMemory),
 * pipeline (vkCreateComputePipelines), submit (vkQueueSubmit), open (the
 * logical device and its command pool, buffer, fence and descriptor objects,
 * vkCreateDevice .. vkAllocateDescriptorSets). Unset: no cost
 * beyond one getenv. Not for production use; counts are process-wide. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *const kind_names[HL_FAULT_KINDS] = {"buffer", "alloc", "map", "pipeline", "submit",
                                                        "open"};
static const VkResult kind_results[HL_FAULT_KINDS] = {
    VK_ERROR_OUT_OF_DEVICE_MEMORY, VK_ERROR_OUT_OF_DEVICE_MEMORY, VK_ERROR_MEMORY_MAP_FAILED,
    VK_ERROR_OUT_OF_HOST_MEMORY, VK_ERROR_OUT_OF_HOST_MEMORY, VK_ERROR_OUT_OF_HOST_MEMORY};

static atomic_flag guard = ATOMIC_FLAG_INIT;
static char seen[64];
static unsigned long counts[HL_FAULT_KINDS];

VkResult hl_fault(hl_fault_kind kind) {
    const char *s = getenv("HELIOS_FAULT");
    if (!s || !*s) return VK_SUCCESS;
    VkResult out = VK_SUCCESS;
    while (atomic_flag_test_and_set_explicit(&guard, memory_order_acquire)) { /* spin: test-only */ }
    if (strncmp(s, seen, sizeof seen) != 0) {   /* a new setting: count from zero */
        strncpy(seen, s, sizeof seen - 1);
        memset(counts, 0, sizeof counts);
    }
    size_t len = strlen(kind_names[kind]);
    if (strncmp(s, kind_names[kind], len) == 0 && s[len] == ':') {
        char *end;
        unsigned long n = strtoul(s + len + 1, &end, 10);
        if (*end == '\0' && ++counts[kind] == n) out = kind_results[kind];
    }
    atomic_flag_clear_explicit(&guard, memory_order_release);
    return out;
}

/* Calls of KIND seen under the current setting (for tests that walk N). */
unsigned long hl_fault_count(const char *kind) {
    for (int i = 0; i < HL_FAULT_KINDS; i++)
        if (strcmp(kind, kind_names[i]) == 0) return counts[i];
    return 0;
}
