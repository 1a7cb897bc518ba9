/* The safetensors header's rules, checked once at the border so that reading a tensor
 * later needs no check but the caller's expectation:
 *   - the header is a JSON object (jansson, exact length, duplicate keys refused);
 *   - "__metadata__", when present, is an object of strings;
 *   - every other entry is an object with a known "dtype" tag, a "shape" array of at most
 *     FG_MAX_DIMS non-negative integers whose byte count fits in 64 bits, and
 *     "data_offsets" [begin, end] with 0 <= begin <= end <= data size and
 *     end - begin == numel * dtype size;
 *   - no two tensors share a data byte.
 * Fields other than these three are ignored, as other safetensors readers do. */
#include "checkpoint.h"

#include <stdlib.h>

#include <jansson.h>

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "an unknown JSON value";
}

static fg_status parse_metadata(const char *path, const json_t *meta, fg_ckpt_header *h,
                                fg_error *err)
{
    if (!json_is_object(meta))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: __metadata__ is %s, not an object",
                            path, json_kind(meta));
    size_t n = json_object_size(meta);
    h->meta_keys = calloc(n ? n : 1, sizeof *h->meta_keys);
    h->meta_values = calloc(n ? n : 1, sizeof *h->meta_values);
    if (!h->meta_keys || !h->meta_values)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory for %zu metadata entries",
                            path, n);
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)meta, key, value) {
        if (!json_is_string(value))
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s: __metadata__ '%s': value is %s, not a string", path, key,
                                json_kind(value));
        size_t i = h->meta_count;
        h->meta_keys[i] = strdup(key);
        h->meta_values[i] = strdup(json_string_value(value));
        h->meta_count++; /* counted before the check so that free() sees both strings */
        if (!h->meta_keys[i] || !h->meta_values[i])
            return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory for metadata '%s'",
                                path, key);
    }
    return FG_OK;
}

/* Returns the field, or NULL after filling err when it is missing or of the wrong kind. */
static const json_t *get_field(const char *path, const char *name, const json_t *entry,
                               const char *field, json_type want, const char *want_kind,
                               fg_error *err)
{
    const json_t *v = json_object_get(entry, field);
    if (!v)
        fg_error_set(err, FG_INVALID_ARGUMENT, "%s: tensor '%s': \"%s\" is missing", path, name,
                     field);
    else if (json_typeof(v) != want)
        fg_error_set(err, FG_INVALID_ARGUMENT, "%s: tensor '%s': \"%s\" is %s, not %s", path,
                     name, field, json_kind(v), want_kind);
    else
        return v;
    return NULL;
}

static fg_status parse_dtype(const char *path, const char *name, const json_t *entry,
                             fg_ckpt_entry *e, fg_error *err)
{
    const json_t *v = get_field(path, name, entry, "dtype", JSON_STRING, "a string", err);
    if (!v)
        return FG_INVALID_ARGUMENT;
    if (!fg_ckpt_dtype_parse(json_string_value(v), &e->dtype))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: tensor '%s': unknown dtype '%s' (known: " FG_CKPT_DTYPE_TAGS ")",
                            path, name, json_string_value(v));
    return FG_OK;
}

static fg_status parse_shape(const char *path, const char *name, const json_t *entry,
                             fg_ckpt_entry *e, fg_error *err)
{
    const json_t *v = get_field(path, name, entry, "shape", JSON_ARRAY, "an array", err);
    if (!v)
        return FG_INVALID_ARGUMENT;
    size_t rank = json_array_size(v);
    if (rank > FG_MAX_DIMS)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: tensor '%s': shape has %zu dimensions, more than the %d "
                            "fulgur supports", path, name, rank, FG_MAX_DIMS);
    for (size_t d = 0; d < rank; d++) {
        const json_t *x = json_array_get(v, d);
        if (!json_is_integer(x))
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s: tensor '%s': shape[%zu] is %s, not an integer", path, name,
                                d, json_kind(x));
        if (json_integer_value(x) < 0)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s: tensor '%s': shape[%zu] is %lld, negative", path, name, d,
                                (long long)json_integer_value(x));
        e->shape[d] = (int64_t)json_integer_value(x);
    }
    e->rank = (int)rank;
    return FG_OK;
}

static fg_status parse_offsets(const char *path, const char *name, const json_t *entry,
                               uint64_t data_size, fg_ckpt_entry *e, fg_error *err)
{
    const json_t *v = get_field(path, name, entry, "data_offsets", JSON_ARRAY, "an array", err);
    if (!v)
        return FG_INVALID_ARGUMENT;
    if (json_array_size(v) != 2)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: tensor '%s': data_offsets has %zu elements, not 2", path, name,
                            json_array_size(v));
    long long off[2];
    for (size_t i = 0; i < 2; i++) {
        const json_t *x = json_array_get(v, i);
        if (!json_is_integer(x))
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s: tensor '%s': data_offsets[%zu] is %s, not an integer", path,
                                name, i, json_kind(x));
        off[i] = (long long)json_integer_value(x);
    }
    if (off[0] < 0 || off[1] < 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: tensor '%s': data_offsets [%lld, %lld] are negative", path, name,
                            off[0], off[1]);
    if (off[0] > off[1])
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: tensor '%s': data_offsets [%lld, %lld] are reversed", path, name,
                            off[0], off[1]);
    if ((uint64_t)off[1] > data_size)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: tensor '%s': data_offsets [%lld, %lld] end beyond the data "
                            "section's %llu bytes", path, name, off[0], off[1],
                            (unsigned long long)data_size);
    e->begin = (uint64_t)off[0];
    e->end = (uint64_t)off[1];
    return FG_OK;
}

/* Offsets, shape and dtype agree on the byte count. */
static fg_status check_size(const char *path, const char *name, const fg_ckpt_entry *e,
                            fg_error *err)
{
    char shape[256];
    fg_ckpt_format_shape(shape, sizeof shape, e->rank, e->shape);
    int64_t bytes;
    if (fg_ckpt_byte_size(e->dtype, e->rank, e->shape, &bytes) != 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: tensor '%s': shape %s of %s overflows a 64-bit byte count",
                            path, name, shape, fg_ckpt_dtype_tag(e->dtype));
    if ((uint64_t)bytes != e->end - e->begin)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but "
                            "shape %s of %s needs %lld", path, name,
                            (unsigned long long)e->begin, (unsigned long long)e->end,
                            (unsigned long long)(e->end - e->begin), shape,
                            fg_ckpt_dtype_tag(e->dtype), (long long)bytes);
    return FG_OK;
}

static fg_status parse_tensor(const char *path, const char *name, const json_t *entry,
                              uint64_t data_size, fg_ckpt_entry *e, fg_error *err)
{
    if (name[0] == '\0')
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: a tensor has an empty name", path);
    if (!json_is_object(entry))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: tensor '%s': entry is %s, not an object", path, name,
                            json_kind(entry));
    fg_status st = parse_dtype(path, name, entry, e, err);
    if (st == FG_OK)
        st = parse_shape(path, name, entry, e, err);
    if (st == FG_OK)
        st = parse_offsets(path, name, entry, data_size, e, err);
    if (st == FG_OK)
        st = check_size(path, name, e, err);
    if (st == FG_OK && !(e->name = strdup(name)))
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory for tensor '%s'", path, name);
    return st;
}

/* File order: by begin, then end (empty tensors first), then name for a stable result. */
static int entry_order(const void *pa, const void *pb)
{
    const fg_ckpt_entry *a = pa, *b = pb;
    if (a->begin != b->begin)
        return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* Entries are sorted; a tensor overlaps another when it starts before the furthest end
 * seen so far. Empty tensors hold no byte and overlap nothing. */
static fg_status check_overlaps(const char *path, const fg_ckpt_header *h, fg_error *err)
{
    const fg_ckpt_entry *furthest = NULL;
    for (size_t i = 0; i < h->count; i++) {
        const fg_ckpt_entry *e = &h->entries[i];
        if (e->begin == e->end)
            continue;
        if (furthest && e->begin < furthest->end)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s: tensor '%s': data_offsets [%llu, %llu] overlap those of "
                                "tensor '%s' [%llu, %llu]", path, e->name,
                                (unsigned long long)e->begin, (unsigned long long)e->end,
                                furthest->name, (unsigned long long)furthest->begin,
                                (unsigned long long)furthest->end);
        if (!furthest || e->end > furthest->end)
            furthest = e;
    }
    return FG_OK;
}

static fg_status parse_root(const char *path, const json_t *root, uint64_t data_size,
                            fg_ckpt_header *h, fg_error *err)
{
    if (!json_is_object(root))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: header is %s, not a JSON object",
                            path, json_kind(root));
    size_t n = json_object_size(root);
    h->entries = calloc(n ? n : 1, sizeof *h->entries);
    if (!h->entries)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory for %zu header entries",
                            path, n);
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)root, key, value) {
        fg_status st;
        if (strcmp(key, "__metadata__") == 0) {
            st = parse_metadata(path, value, h, err);
        } else {
            st = parse_tensor(path, key, value, data_size, &h->entries[h->count], err);
            if (st == FG_OK)
                h->count++;
        }
        if (st != FG_OK)
            return st;
    }
    qsort(h->entries, h->count, sizeof *h->entries, entry_order);
    return check_overlaps(path, h, err);
}

fg_status fg_ckpt_header_parse(const char *path, const char *text, size_t len,
                               uint64_t data_size, fg_ckpt_header *out, fg_error *err)
{
    memset(out, 0, sizeof *out);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: header is not valid JSON: %s (header byte %d, line %d, "
                            "column %d)", path, jerr.text, jerr.position, jerr.line,
                            jerr.column);
    fg_status st = parse_root(path, root, data_size, out, err);
    json_decref(root);
    if (st != FG_OK)
        fg_ckpt_header_free(out);
    return st;
}


void fg_ckpt_header_free(fg_ckpt_header *h)
{
    for (size_t i = 0; i < h->count; i++)
        free(h->entries[i].name);
    for (size_t i = 0; i < h->meta_count; i++) {
        free(h->meta_keys[i]);
        free(h->meta_values[i]);
    }
    free(h->entries);
    free(h->meta_keys);
    free(h->meta_values);
    memset(h, 0, sizeof *h);
}
