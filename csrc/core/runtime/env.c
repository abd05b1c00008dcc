/* env.c — the HELIOS_* environment switches, parsed strictly: a value that is
 * not understood is an error naming the variable, never a silent default. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

hl_status hl_env_flag(const char *name, int *out, hl_error *err) {
    const char *s = getenv(name);
    *out = 0;
    if (!s || !*s) return HL_OK;
    static const char *yes[] = {"1", "true", "yes", "on"}, *no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = 1;
            return HL_OK;
        }
        if (strcasecmp(s, no[i]) == 0) return HL_OK;
    }
    return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s='%.40s': expected 1/true/yes/on or 0/false/no/off", name, s);
}

hl_status hl_env_index(const char *name, int *out, hl_error *err) {
    const char *s = getenv(name);
    *out = -1;
    if (!s || !*s) return HL_OK;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!isdigit((unsigned char)s[0]) || *end || errno == ERANGE || v > 1024)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s='%.40s': expected an index 0..1024", name, s);
    *out = (int)v;
    return HL_OK;
}

hl_status hl_env_uint(const char *name, uint32_t max, uint32_t dflt, uint32_t *out, hl_error *err) {
    const char *s = getenv(name);
    *out = dflt;
    if (!s || !*s) return HL_OK;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (!isdigit((unsigned char)s[0]) || *end || errno == ERANGE || v > max)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "%s='%.40s': expected an integer 0..%u", name, s, max);
    *out = (uint32_t)v;
    return HL_OK;
}

/* The queue priorities HELIOS_QUEUE_PRIORITY names, both ways. */
static const struct {
    const char *name;
    int value;
} queue_priorities[] = {{"low", VK_QUEUE_GLOBAL_PRIORITY_LOW_KHR},
                        {"medium", VK_QUEUE_GLOBAL_PRIORITY_MEDIUM_KHR},
                        {"high", VK_QUEUE_GLOBAL_PRIORITY_HIGH_KHR},
                        {"realtime", VK_QUEUE_GLOBAL_PRIORITY_REALTIME_KHR}};
#define N_QUEUE_PRIORITIES (sizeof queue_priorities / sizeof queue_priorities[0])

hl_status hl_env_queue_priority(int *out, hl_error *err) {
    const char *s = getenv("HELIOS_QUEUE_PRIORITY");
    *out = 0;
    if (!s || !*s) return HL_OK;
    for (size_t i = 0; i < N_QUEUE_PRIORITIES; i++)
        if (strcasecmp(s, queue_priorities[i].name) == 0) {
            *out = queue_priorities[i].value;
            return HL_OK;
        }
    return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                   "HELIOS_QUEUE_PRIORITY='%.40s': expected low, medium, high or realtime", s);
}

const char *hl_queue_priority_name(int priority) {
    for (size_t i = 0; i < N_QUEUE_PRIORITIES; i++)
        if (queue_priorities[i].value == priority) return queue_priorities[i].name;
    return "default";
}
