/* grammar.c — parse, format, range-check and build variants from the declared
 * grammars (grammar.h; the tables are generated from shaders/families.py). */
#include "grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ITEMS 12

uint32_t hl_field_get(const hl_field *f, const void *v) {
    const char *p = (const char *)v + f->offset;
    switch (f->store) {
        case HL_STORE_U32:
            return *(const uint32_t *)p;
        case HL_STORE_INT:
            return (uint32_t)*(const int *)p;
        case HL_STORE_DTYPE:
            return (uint32_t)*(const hl_dtype *)p;
        case HL_STORE_PATH:
            return (uint32_t)*(const hl_path *)p;
    }
    return 0;
}

void hl_field_set(const hl_field *f, void *v, uint32_t value) {
    char *p = (char *)v + f->offset;
    switch (f->store) {
        case HL_STORE_U32:
            *(uint32_t *)p = value;
            break;
        case HL_STORE_INT:
            *(int *)p = (int)value;
            break;
        case HL_STORE_DTYPE:
            *(hl_dtype *)p = (hl_dtype)value;
            break;
        case HL_STORE_PATH:
            *(hl_path *)p = (hl_path)value;
            break;
    }
}

/* The path field is the struct's first (generated so). */
const hl_grammar *hl_schema_grammar(const hl_schema *s, const void *v) {
    const uint32_t path = hl_field_get(&s->fields[0], v);
    for (size_t i = 0; i < s->n_grammars; i++)
        if ((uint32_t)s->grammars[i].path == path) return &s->grammars[i];
    return NULL;
}

int hl_parse_uints(const char *s, uint32_t *d, uint32_t n, uint32_t max) {
    for (uint32_t i = 0; i < n; i++) {
        char *end;
        if (*s < '0' || *s > '9') return 0;
        unsigned long x = strtoul(s, &end, 10);
        if (x == 0 || x > max) return 0;
        d[i] = (uint32_t)x;
        s = end;
        if (i + 1 < n) {
            if (*s != 'x') return 0;
            s++;
        }
    }
    return *s == '\0';
}

/* Whether `part` is item `it`; stores its values in v when it is. */
static int parse_item(const hl_schema *s, const hl_grammar_item *it, const char *part, void *v) {
    size_t np = strlen(it->prefix);
    if (strncmp(part, it->prefix, np) != 0) return 0;
    const char *val = part + np;
    if (it->kind == HL_ITEM_CHOICE) {
        for (uint32_t i = 0; i < it->n; i++)
            if (strcmp(val, it->names[i]) == 0) {
                hl_field_set(&s->fields[it->field[0]], v, (uint32_t)it->values[i]);
                return 1;
            }
        return 0;
    }
    uint32_t d[3];
    if (!hl_parse_uints(val, d, it->n, it->parse_max)) return 0;
    for (uint32_t i = 0; i < it->n; i++) hl_field_set(&s->fields[it->field[i]], v, d[i]);
    return 1;
}

static void apply_fixed(const hl_schema *s, const hl_grammar *g, void *v) {
    for (size_t i = 0; i < g->n_fixed; i++) hl_field_set(&s->fields[g->fixed[i].field], v, g->fixed[i].value);
}

/* Thread-safe (no strtok: the binding calls this with the GIL released). An
 * empty item, or more items than the form has, makes the string malformed. */
hl_status hl_schema_parse(const hl_schema *s, const char *str, void *out, hl_error *err) {
    char buf[HL_VARIANT_STR_MAX];
    char *parts[MAX_ITEMS];
    size_t n = 0;
    if (!str || !*str || strlen(str) >= sizeof buf) goto bad;
    memcpy(buf, str, strlen(str) + 1);
    for (char *f = buf;;) {
        if (n == MAX_ITEMS) goto bad;
        parts[n++] = f;
        char *colon = strchr(f, ':');
        if (!colon) break;
        *colon = '\0';
        f = colon + 1;
    }
    for (size_t i = 0; i < n; i++)
        if (!*parts[i]) goto bad;
    for (size_t gi = 0; gi < s->n_grammars; gi++) {
        const hl_grammar *g = &s->grammars[gi];
        if (strcmp(parts[0], g->tag) != 0) continue;
        memset(out, 0, s->size);
        hl_field_set(&s->fields[0], out, (uint32_t)g->path);
        apply_fixed(s, g, out);
        size_t p = 1;
        for (size_t i = 0; i < g->n_items; i++) {
            const hl_grammar_item *it = &g->items[i];
            if (p < n && parse_item(s, it, parts[p], out)) {
                p++;
            } else if (it->has_absent) {
                hl_field_set(&s->fields[it->field[0]], out, it->absent);
            } else {
                goto bad;
            }
        }
        if (p != n) goto bad;
        return HL_OK;
    }
bad:
    return hl_fail(err, HL_ERR_INVALID_VARIANT, "malformed %s '%s'; expected e.g. %s",
                   s == &hl_attn_variant_schema ? "attention variant" : "variant", str ? str : "(null)", s->example);
}

void hl_schema_format(const hl_schema *s, const void *v, char *out, size_t cap) {
    const hl_grammar *g = hl_schema_grammar(s, v);
    if (!cap) return;
    if (!g) {
        snprintf(out, cap, "?");
        return;
    }
    size_t len = (size_t)snprintf(out, cap, "%s", g->tag);
    for (size_t i = 0; i < g->n_items && len < cap; i++) {
        const hl_grammar_item *it = &g->items[i];
        if (it->omit_absent && hl_field_get(&s->fields[it->field[0]], v) == it->absent) continue;
        len += (size_t)snprintf(out + len, cap - len, ":%s", it->prefix);
        if (len >= cap) break;
        if (it->kind == HL_ITEM_CHOICE) {
            const uint32_t x = hl_field_get(&s->fields[it->field[0]], v);
            const char *name = "?";
            for (uint32_t c = 0; c < it->n; c++)
                if ((uint32_t)it->values[c] == x) name = it->names[c];
            len += (size_t)snprintf(out + len, cap - len, "%s", name);
            continue;
        }
        for (uint32_t d = 0; d < it->n && len < cap; d++)
            len += (size_t)snprintf(out + len, cap - len, d ? "x%u" : "%u", hl_field_get(&s->fields[it->field[d]], v));
    }
}

hl_status hl_schema_check_ranges(const hl_schema *s, const void *v, const char *name, hl_error *err) {
    const hl_grammar *g = hl_schema_grammar(s, v);
    if (!g) return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT, "variant '%s': unknown path", name);
    for (size_t i = 0; i < g->n_items; i++) {
        const hl_grammar_item *it = &g->items[i];
        if (it->kind != HL_ITEM_NUM) continue;
        const uint32_t x = hl_field_get(&s->fields[it->field[0]], v);
        if (x < it->lo || x > it->hi)
            return hl_fail(err, HL_ERR_UNSUPPORTED_VARIANT, "variant '%s': %s must be %u..%u", name,
                           s->fields[it->field[0]].name, it->lo, it->hi);
    }
    return HL_OK;
}

const char *hl_schema_choice_name(const hl_schema *s, const void *v, uint32_t field) {
    const hl_grammar *g = hl_schema_grammar(s, v);
    const uint32_t x = hl_field_get(&s->fields[field], v);
    /* The field's choice item in v's grammar, else in any grammar (fields a path
     * fixes still read as a name, e.g. a coop2 variant's load). */
    for (size_t pass = 0; pass < 2; pass++)
        for (size_t gi = 0; gi < s->n_grammars; gi++) {
            const hl_grammar *h = &s->grammars[gi];
            if (pass == 0 && h != g) continue;
            for (size_t i = 0; i < h->n_items; i++) {
                const hl_grammar_item *it = &h->items[i];
                if (it->kind != HL_ITEM_CHOICE || it->field[0] != field) continue;
                for (uint32_t c = 0; c < it->n; c++)
                    if ((uint32_t)it->values[c] == x) return it->names[c];
            }
        }
    return NULL;
}

hl_status hl_schema_build(const hl_schema *s, const char *tag, const char *const *keys, const char *const *values,
                          size_t n, void *out, hl_error *err) {
    const hl_grammar *g = NULL;
    for (size_t i = 0; i < s->n_grammars; i++)
        if (strcmp(s->grammars[i].tag, tag) == 0) g = &s->grammars[i];
    if (!g)
        return hl_fail(err, HL_ERR_INVALID_VARIANT, "variant path '%s' is not one of this kind's forms (%s)", tag,
                       s->example);
    memset(out, 0, s->size);
    hl_field_set(&s->fields[0], out, (uint32_t)g->path);
    apply_fixed(s, g, out);
    for (size_t i = 0; i < g->n_items; i++) {
        const hl_grammar_item *it = &g->items[i];
        const uint32_t nf = it->kind == HL_ITEM_DIMS ? it->n : 1;
        for (uint32_t d = 0; d < nf; d++) {
            const hl_field *f = &s->fields[it->field[d]];
            const char *val = NULL;
            for (size_t k = 0; k < n; k++)
                if (strcmp(keys[k], f->name) == 0) val = values[k];
            if (!val) {
                if (it->kind == HL_ITEM_NUM && it->has_default) {
                    hl_field_set(f, out, it->dflt);
                    continue;
                }
                if (it->kind == HL_ITEM_CHOICE && it->default_index >= 0) {
                    hl_field_set(f, out, (uint32_t)it->values[it->default_index]);
                    continue;
                }
                return hl_fail(err, HL_ERR_INVALID_VARIANT, "a '%s' variant needs field '%s'", tag, f->name);
            }
            if (it->kind == HL_ITEM_CHOICE) {
                int found = 0;
                for (uint32_t c = 0; c < it->n && !found; c++)
                    if (strcmp(val, it->names[c]) == 0) {
                        hl_field_set(f, out, (uint32_t)it->values[c]);
                        found = 1;
                    }
                if (!found)
                    return hl_fail(err, HL_ERR_INVALID_VARIANT, "variant field %s='%s' is not one of the names allowed",
                                   f->name, val);
                continue;
            }
            uint32_t x;
            if (!hl_parse_uints(val, &x, 1, it->parse_max))
                return hl_fail(err, HL_ERR_INVALID_VARIANT, "variant field %s=%s: expected an integer 1..%u", f->name,
                               val, it->parse_max);
            hl_field_set(f, out, x);
        }
    }
    /* Keys the form does not carry must name a struct field and hold the value
     * the form implies (so variant_fields() output builds back). */
    for (size_t k = 0; k < n; k++) {
        int carried = 0;
        for (size_t i = 0; i < g->n_items && !carried; i++)
            for (uint32_t d = 0; d < (g->items[i].kind == HL_ITEM_DIMS ? g->items[i].n : 1); d++)
                carried |= strcmp(s->fields[g->items[i].field[d]].name, keys[k]) == 0;
        if (carried) continue;
        size_t fi = s->n_fields;
        for (size_t i = 0; i < s->n_fields; i++)
            if (strcmp(s->fields[i].name, keys[k]) == 0) fi = i;
        if (fi == s->n_fields) return hl_fail(err, HL_ERR_INVALID_VARIANT, "unknown variant field '%s'", keys[k]);
        char implied[32];
        const char *name = s->fields[fi].store == HL_STORE_U32 ? NULL : hl_schema_choice_name(s, out, (uint32_t)fi);
        if (name)
            snprintf(implied, sizeof implied, "%s", name);
        else
            snprintf(implied, sizeof implied, "%u", hl_field_get(&s->fields[fi], out));
        if (strcmp(implied, values[k]) != 0)
            return hl_fail(err, HL_ERR_INVALID_VARIANT,
                           "variant field %s=%s is not part of a '%s' variant (which has %s=%s)", keys[k], values[k],
                           tag, keys[k], implied);
    }
    return HL_OK;
}
