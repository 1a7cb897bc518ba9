/* model.safetensors.index.json in and out (hf_index.h). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "hf_index.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "output_file.h"

int fg_hf_index_is(const char *path)
{
    size_t n = strlen(path), k = strlen(".index.json");
    return n > k && strcmp(path + n - k, ".index.json") == 0;
}

void fg_hf_index_free(fg_hf_index *x)
{
    for (size_t i = 0; i < x->file_count; i++)
        free(x->files[i]);
    for (size_t i = 0; i < x->count; i++)
        free(x->names[i]);
    free(x->files);
    free(x->names);
    free(x->file_of);
    memset(x, 0, sizeof *x);
}

static fg_status bad(const char *path, const char *what, const char *key, fg_error *err)
{
    return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: %s%s%s", path, what, key ? ": " : "",
                        key ? key : "");
}

/* The shard's index in x->files, added (with the index's folder) when new; -1 on no memory. */
static long file_slot(fg_hf_index *x, const char *folder, const char *file)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", folder, file);
    for (size_t i = 0; i < x->file_count; i++)
        if (strcmp(x->files[i], path) == 0)
            return (long)i;
    if (!(x->files[x->file_count] = strdup(path)))
        return -1;
    return (long)x->file_count++;
}

static fg_status read_map(const char *path, const json_t *map, const char *folder,
                          fg_hf_index *x, fg_error *err)
{
    size_t n = json_object_size(map);
    x->files = calloc(n + 1, sizeof *x->files);
    x->names = calloc(n + 1, sizeof *x->names);
    x->file_of = calloc(n + 1, sizeof *x->file_of);
    if (!x->files || !x->names || !x->file_of)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", path);
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)map, name, v) {
        const char *file = json_string_value(v);
        if (!file || !*file || strchr(file, '/') || strcmp(file, "..") == 0)
            return bad(path, "weight_map names no shard file in the index's folder for", name,
                       err);
        long slot = file_slot(x, folder, file);
        if (slot < 0 || !(x->names[x->count] = strdup(name)))
            return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", path);
        x->file_of[x->count++] = (size_t)slot;
    }
    return FG_OK;
}

fg_status fg_hf_index_read(const char *path, fg_hf_index *out, fg_error *err)
{
    memset(out, 0, sizeof *out);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root)
        return fg_error_set(err, jerr.line < 0 ? FG_NOT_FOUND : FG_INVALID_ARGUMENT,
                            "%s:%d: %s", path, jerr.line, jerr.text);
    const json_t *map = json_object_get(root, "weight_map");
    char *dup = strdup(path);
    fg_status st = !json_is_object(map) ? bad(path, "no \"weight_map\" object", NULL, err)
                   : json_object_size(map) == 0 ? bad(path, "an empty \"weight_map\"", NULL, err)
                   : !dup ? fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory", path)
                          : read_map(path, map, dirname(dup), out, err);
    free(dup);
    json_decref(root);
    if (st != FG_OK)
        fg_hf_index_free(out);
    return st;
}

uint64_t fg_hf_shard_size_parse(const char *text)
{
    static const struct {
        const char *unit;
        uint64_t bytes;
    } units[] = {{"", 1},           {"B", 1},
                 {"KB", 1000},      {"MB", 1000000},
                 {"GB", 1000000000}, {"KiB", 1024},
                 {"MiB", 1 << 20},  {"GiB", 1 << 30}};
    char *end;
    double v = strtod(text, &end);
    for (size_t i = 0; end != text && v > 0 && i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i].unit) == 0 && v * (double)units[i].bytes < 1.8e19)
            return (uint64_t)(v * (double)units[i].bytes);
    return 0;
}

static uint64_t tensor_bytes(const fg_ckpt_tensor *t)
{
    uint64_t n = fg_dtype_size(t->dtype);
    for (int d = 0; d < t->rank; d++)
        n *= (uint64_t)t->shape[d];
    return n;
}

/* first[k]: the first tensor of shard k; returns the shard count. */
static size_t split(const fg_ckpt_tensor *t, size_t count, uint64_t max_bytes, size_t *first)
{
    size_t shards = 0;
    uint64_t used = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t b = tensor_bytes(&t[i]);
        if (i == 0 || used + b > max_bytes) {
            first[shards++] = i;
            used = 0;
        }
        used += b;
    }
    first[shards] = count;
    return shards;
}

static int dump_json(FILE *f, void *user)
{
    if (json_dumpf((const json_t *)user, f, JSON_INDENT(2) | JSON_SORT_KEYS) != 0)
        return -1;
    return fputc('\n', f) == EOF ? -1 : 0;
}

static fg_status write_index(const char *dir, const fg_ckpt_tensor *t, size_t count,
                             const size_t *first, size_t shards, fg_error *err)
{
    json_t *root = json_object(), *meta = json_object(), *map = json_object();
    uint64_t total = 0;
    for (size_t k = 0; root && meta && map && k < shards; k++) {
        char file[64];
        snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", k + 1, shards);
        for (size_t i = first[k]; i < first[k + 1]; i++) {
            json_object_set_new(map, t[i].name, json_string(file));
            total += tensor_bytes(&t[i]);
        }
    }
    fg_status st = FG_OK;
    if (!root || !meta || !map || json_object_set_new(meta, "total_size", json_integer(
                                      (json_int_t)total)) != 0) {
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "export: out of memory");
    } else {
        json_object_set(root, "metadata", meta);
        json_object_set(root, "weight_map", map);
        char path[4200];
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        st = fg_output_write_atomic(path, dump_json, root, err);
    }
    json_decref(meta);
    json_decref(map);
    json_decref(root);
    return st;
}

fg_status fg_hf_index_write(const char *dir, const fg_ckpt_tensor *tensors, size_t count,
                            uint64_t max_bytes, const char *const *meta_keys,
                            const char *const *meta_values, size_t meta_count,
                            size_t *shards, fg_error *err)
{
    size_t *first = calloc(count + 2, sizeof *first);
    if (!first)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "export: out of memory");
    *shards = split(tensors, count, max_bytes, first);
    fg_status st = FG_OK;
    for (size_t k = 0; st == FG_OK && k < *shards; k++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/model-%05zu-of-%05zu.safetensors", dir, k + 1, *shards);
        st = fg_ckpt_write_atomic(path, tensors + first[k], first[k + 1] - first[k], meta_keys,
                                  meta_values, meta_count, err);
    }
    if (st == FG_OK)
        st = write_index(dir, tensors, count, first, *shards, err);
    free(first);
    return st;
}
