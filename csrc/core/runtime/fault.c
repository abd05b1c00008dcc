/* fault.c — test-only fault injection. HELIOS_FAULT=KIND:N makes the Nth
 * Vulkan call of KIND since the variable last changed fail with a real
 * VkResult instead of running, so tests can walk every failure path of a
 * call and check the exception, the cleanup and the device afterwards.
 * KIND: buffer (vkCreateBuffer), alloc (vkAllocateMemory), map (vkMapMemory),
 * pipeline (vkCreateComputePipelines), submit (vkQueueSubmit), open (the
 * logical device and its command pool, buffer, fence and descriptor objects,
 * vkCreateDevice .. vkAllocateDescriptorSets), probe (the accumulator-layout probe of a
 * device open, layout.c: its Nth shape fails as a failed submission would). Unset: no cost
 * beyond one getenv. Not for production use; counts are process-wide.
 * hl_fault_suspend: while suspended (the accumulator-layout probe a device open
 * runs, layout.c) calls neither fail nor count, process-wide, so a walk over an
 * operation's calls meets that operation's calls only; the probe's own kind still fires. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *const kind_names[HL_FAULT_KINDS] = {"buffer", "alloc", "map", "pipeline", "submit", "open", "probe"};
static const VkResult kind_results[HL_FAULT_KINDS] = {VK_ERROR_OUT_OF_DEVICE_MEMORY, VK_ERROR_OUT_OF_DEVICE_MEMORY,
                                                      VK_ERROR_MEMORY_MAP_FAILED,    VK_ERROR_OUT_OF_HOST_MEMORY,
                                                      VK_ERROR_OUT_OF_HOST_MEMORY,   VK_ERROR_OUT_OF_HOST_MEMORY,
                                                      VK_ERROR_OUT_OF_DEVICE_MEMORY};

static atomic_flag guard = ATOMIC_FLAG_INIT;
static char seen[128];     /* the setting the counts belong to */
static int seen_kind = -1; /* its KIND, -1: malformed (every call runs) */
static unsigned long seen_n, counts[HL_FAULT_KINDS];
static int warned_long;
static atomic_int suspended;

void hl_fault_suspend(int on) { atomic_fetch_add(&suspended, on ? 1 : -1); }

/* KIND:N exactly (a KIND name, a colon, decimal N >= 1, nothing else), else -1. */
static int parse_setting(const char *s, unsigned long *n) {
    const char *colon = strchr(s, ':');
    if (!colon || !colon[1]) return -1;
    for (const char *p = colon + 1; *p; p++)
        if (*p < '0' || *p > '9') return -1;
    errno = 0;
    *n = strtoul(colon + 1, NULL, 10);
    if (errno == ERANGE || *n == 0) return -1;
    for (int k = 0; k < HL_FAULT_KINDS; k++)
        if ((size_t)(colon - s) == strlen(kind_names[k]) && strncmp(s, kind_names[k], (size_t)(colon - s)) == 0)
            return k;
    return -1;
}

VkResult hl_fault(hl_fault_kind kind) {
    const char *s = getenv("HELIOS_FAULT");
    if (!s || !*s) {
        /* Unset: the setting is forgotten, so setting the same KIND:N again (the next
         * test) counts from zero. The counts stay readable until then. */
        if (seen[0]) {
            while (atomic_flag_test_and_set_explicit(&guard, memory_order_acquire)) { /* spin: test-only */
            }
            seen[0] = '\0';
            atomic_flag_clear_explicit(&guard, memory_order_release);
        }
        return VK_SUCCESS;
    }
    if (atomic_load(&suspended) > 0 && kind != HL_FAULT_PROBE) return VK_SUCCESS;
    VkResult out = VK_SUCCESS;
    while (atomic_flag_test_and_set_explicit(&guard, memory_order_acquire)) { /* spin: test-only */
    }
    if (strlen(s) >= sizeof seen) { /* longer than any valid setting: never a silent misfire */
        if (!warned_long)
            fprintf(stderr, "helios: HELIOS_FAULT ignored: longer than %zu characters\n", sizeof seen - 1);
        warned_long = 1;
    } else {
        if (strcmp(s, seen) != 0) { /* a new setting: parse it, count from zero */
            snprintf(seen, sizeof seen, "%s", s);
            memset(counts, 0, sizeof counts);
            seen_kind = parse_setting(s, &seen_n);
            if (seen_kind < 0)
                fprintf(stderr,
                        "helios: HELIOS_FAULT='%s' ignored: expected KIND:N, KIND one of buffer, "
                        "alloc, map, pipeline, submit, open, probe and N >= 1\n",
                        s);
        }
        if (seen_kind == (int)kind && ++counts[kind] == seen_n) out = kind_results[kind];
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
