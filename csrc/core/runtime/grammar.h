/* grammar.h — variant strings read and written from a declared grammar.
 *
 * A variant struct's fields and its string forms are declared once in
 * shaders/families.py; cmake/gen_kernels.py turns them into the hl_schema
 * tables in kernels.c, and grammar.c parses, formats, range-checks and builds
 * variants from those tables. So a new knob is a table entry, not new code. */
#ifndef HL_GRAMMAR_H
#define HL_GRAMMAR_H

#include "helios_core.h"

typedef enum hl_store { HL_STORE_U32, HL_STORE_INT, HL_STORE_DTYPE, HL_STORE_PATH } hl_store;

/* A field of a variant struct: its name (Python's dict key), C type and place. */
typedef struct hl_field {
    const char *name;
    hl_store store;
    size_t offset;
} hl_field;

typedef enum hl_item_kind { HL_ITEM_DIMS, HL_ITEM_NUM, HL_ITEM_CHOICE } hl_item_kind;
#define HL_ITEM_MAX_VALUES 4

/* One ':'-separated item: a prefix, then N integers joined by 'x' (DIMS), one
 * integer (NUM) or one of n names (CHOICE). */
typedef struct hl_grammar_item {
    const char *prefix;
    hl_item_kind kind;
    uint32_t n;
    uint32_t field[3];  /* field indices (DIMS: n of them; others: one) */
    uint32_t parse_max; /* integers above it make the string malformed */
    uint32_t lo, hi;    /* NUM: the range hl_schema_check_ranges enforces */
    int has_default;    /* NUM: value when a builder leaves the field out */
    uint32_t dflt;
    int has_absent; /* may be left out of a string (trailing items), then this value */
    uint32_t absent;
    int omit_absent;                       /* the canonical string leaves it out when it has the absent value */
    const char *names[HL_ITEM_MAX_VALUES]; /* CHOICE */
    int values[HL_ITEM_MAX_VALUES];
    int default_index; /* CHOICE: the builder's default, -1: required */
} hl_grammar_item;

typedef struct hl_fixed {
    uint32_t field;
    uint32_t value;
} hl_fixed;

/* One string form: "tag:item:item...", for one path. */
typedef struct hl_grammar {
    const char *tag;
    hl_path path;
    const hl_grammar_item *items;
    size_t n_items;
    const hl_fixed *fixed; /* fields this path does not carry */
    size_t n_fixed;
} hl_grammar;

typedef struct hl_schema {
    const char *struct_name;
    size_t size;
    const hl_field *fields;
    size_t n_fields;
    const hl_grammar *grammars;
    size_t n_grammars;
    const char *example;
} hl_schema;

extern const hl_schema hl_variant_schema, hl_attn_variant_schema;

/* n positive integers <= max joined by 'x' ("128x64"), and nothing after. */
int hl_parse_uints(const char *s, uint32_t *d, uint32_t n, uint32_t max);
uint32_t hl_field_get(const hl_field *f, const void *v);
void hl_field_set(const hl_field *f, void *v, uint32_t value);
/* The grammar of v's path, or NULL. */
const hl_grammar *hl_schema_grammar(const hl_schema *s, const void *v);
/* Parse `str` into `out` (zeroed first); INVALID_VARIANT naming the example forms. */
hl_status hl_schema_parse(const hl_schema *s, const char *str, void *out, hl_error *err);
void hl_schema_format(const hl_schema *s, const void *v, char *out, size_t cap);
/* NUM items outside lo..hi: UNSUPPORTED_VARIANT "variant 'S': NAME must be LO..HI". */
hl_status hl_schema_check_ranges(const hl_schema *s, const void *v, const char *name, hl_error *err);
/* A name of choice `value` for field index `field` in v's grammar, or NULL (Python's dict values). */
const char *hl_schema_choice_name(const hl_schema *s, const void *v, uint32_t field);
/* A variant of form `tag` from n (field name, value text) pairs; fields left out
 * take the form's defaults; an unknown or missing field is INVALID_VARIANT. */
hl_status hl_schema_build(const hl_schema *s, const char *tag, const char *const *keys, const char *const *values,
                          size_t n, void *out, hl_error *err);

#endif
