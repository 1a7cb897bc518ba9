/* `fulgur ckpt merge INDEX_OR_DIR -o OUT`: a checkpoint written one file per rank (layout in
 * ckpt_sharded.h) into the one ordinary checkpoint the gathered path writes. The index and
 * every shard file are input from outside: each field is checked before it is used, and a
 * message names the file and the field at fault. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "checkpoint.h"
#include "ckpt_sharded.h"
#include "fulgur/fulgur.h"
#include "output_file.h"

#define BAD(...) fg_error_set(err, FG_INVALID_ARGUMENT, __VA_ARGS__)

/* ---- the index's JSON ------------------------------------------------------------------ */

static const json_t *field(const char *path, const char *where, const json_t *obj,
                           const char *name, json_type want, fg_error *err)
{
    static const char *kinds[] = {"an object", "an array", "a string", "an integer",
                                  "a real number", "true", "false", "null"};
    const json_t *v = json_is_object(obj) ? json_object_get(obj, name) : NULL;
    if (!v)
        BAD("%s: sharded index: %s\"%s\" is missing", path, where, name);
    else if (json_typeof(v) != want)
        BAD("%s: sharded index: %s\"%s\" is %s, not %s", path, where, name,
            kinds[json_typeof(v)], kinds[want]);
    else
        return v;
    return NULL;
}

static fg_status get_int(const char *path, const char *where, const json_t *obj,
                         const char *name, int64_t min, int64_t max, int64_t *out, fg_error *err)
{
    const json_t *v = field(path, where, obj, name, JSON_INTEGER, err);
    if (!v) return FG_INVALID_ARGUMENT;
    int64_t x = (int64_t)json_integer_value(v);
    if (x < min || x > max)
        return BAD("%s: sharded index: %s\"%s\" is %lld, outside [%lld, %lld]", path, where,
                   name, (long long)x, (long long)min, (long long)max);
    *out = x;
    return FG_OK;
}

static fg_status get_str(const char *path, const char *where, const json_t *obj,
                         const char *name, const char **out, fg_error *err)
{
    const json_t *v = field(path, where, obj, name, JSON_STRING, err);
    if (!v) return FG_INVALID_ARGUMENT;
    *out = json_string_value(v);
    return FG_OK;
}

/* A plain folder name: it is joined to the index's folder. */
static int plain_name(const char *s)
{
    return s[0] && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static fg_status parse_files(const char *path, const json_t *root, fg_shard_index *ix,
                             fg_error *err)
{
    const json_t *files = field(path, "", root, "files", JSON_ARRAY, err);
    if (!files) return FG_INVALID_ARGUMENT;
    if (json_array_size(files) != (size_t)ix->world_size)
        return BAD("%s: sharded index: \"files\" lists %zu files for world_size %d", path,
                   json_array_size(files), ix->world_size);
    if (fg_shard_index_alloc_ranges(ix, ix->world_size) != 0)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    int64_t covered = 0;
    fg_status st = FG_OK;
    for (int r = 0; st == FG_OK && r < ix->world_size; r++) {
        const json_t *f = json_array_get(files, (size_t)r);
        char where[64], want[64];
        snprintf(where, sizeof where, "files[%d].", r);
        snprintf(want, sizeof want, "rank-%05d-of-%05d.safetensors", r, ix->world_size);
        int64_t rank = 0;
        const char *file = NULL;
        st = get_int(path, where, f, "rank", 0, ix->world_size - 1, &rank, err);
        if (st == FG_OK) st = get_str(path, where, f, "file", &file, err);
        if (st == FG_OK) st = get_int(path, where, f, "offset", 0, ix->param_count, &ix->offsets[r], err);
        if (st == FG_OK) st = get_int(path, where, f, "count", 0, ix->param_count, &ix->counts[r], err);
        if (st != FG_OK) break;
        if (rank != r) st = BAD("%s: sharded index: %s\"rank\" is %lld, expected %d (files in rank order)",
                                path, where, (long long)rank, r);
        else if (strcmp(file, want) != 0)
            st = BAD("%s: sharded index: %s\"file\" is '%s', expected '%s'", path, where, file, want);
        else if (ix->counts[r] && ix->offsets[r] != covered)
            st = BAD("%s: sharded index: %s\"offset\" is %lld, expected %lld (the ranks' ranges "
                     "follow each other)", path, where, (long long)ix->offsets[r], (long long)covered);
        covered += ix->counts[r];
        if (st == FG_OK && covered > ix->param_count)
            st = BAD("%s: sharded index: %s\"count\" runs past param_count %lld", path, where,
                     (long long)ix->param_count);
    }
    if (st == FG_OK && covered != ix->param_count)
        st = BAD("%s: sharded index: the files cover %lld of param_count %lld floats", path,
                 (long long)covered, (long long)ix->param_count);
    return st;
}

static fg_status parse_source(const char *path, const char *where, const char *s,
                              const fg_shard_index *ix, int *out, fg_error *err)
{
    if (strcmp(s, "params") == 0) *out = FG_SHARD_SRC_PARAMS;
    else if (strcmp(s, "buffers") == 0) *out = FG_SHARD_SRC_BUFFERS;
    else {
        for (size_t j = 0; j < ix->slot_count; j++) {
            if (strncmp(s, "optimizer.", 10) == 0 && strcmp(s + 10, ix->slot_names[j]) == 0) {
                *out = (int)j;
                return FG_OK;
            }
        }
        return BAD("%s: sharded index: %s\"source\" is '%s', not params, buffers or "
                   "optimizer.SLOT of optimizer_slots", path, where, s);
    }
    return FG_OK;
}

static fg_status parse_tensor(const char *path, const json_t *t, size_t i, fg_shard_index *ix,
                              fg_error *err)
{
    fg_shard_tensor *out = &ix->tensors[i];
    char where[64];
    snprintf(where, sizeof where, "tensors[%zu].", i);
    const char *source = NULL;
    fg_status st = get_str(path, where, t, "name", &out->name, err);
    if (st == FG_OK) st = get_str(path, where, t, "source", &source, err);
    if (st == FG_OK) st = parse_source(path, where, source, ix, &out->source, err);
    if (st == FG_OK) st = get_int(path, where, t, "offset", 0, INT64_MAX, &out->offset, err);
    const json_t *shape = st == FG_OK ? field(path, where, t, "shape", JSON_ARRAY, err) : NULL;
    if (!shape) return FG_INVALID_ARGUMENT;
    if (json_array_size(shape) > FG_MAX_DIMS)
        return BAD("%s: sharded index: %s\"shape\" has %zu dimensions, more than %d", path,
                   where, json_array_size(shape), FG_MAX_DIMS);
    out->rank = (int)json_array_size(shape);
    int64_t numel = 1;
    for (int d = 0; d < out->rank; d++) {
        const json_t *x = json_array_get(shape, (size_t)d);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return BAD("%s: sharded index: %s\"shape\"[%d] is not a non-negative integer", path,
                       where, d);
        out->shape[d] = (int64_t)json_integer_value(x);
        if (__builtin_mul_overflow(numel, out->shape[d], &numel))
            return BAD("%s: sharded index: %s\"shape\" overflows", path, where);
    }
    int64_t size = out->source == FG_SHARD_SRC_BUFFERS ? ix->buffer_count : ix->param_count;
    if (out->offset > size || numel > size - out->offset)
        return BAD("%s: sharded index: tensor '%s': [%lld, %lld + %lld) lies outside its source "
                   "'%s' of %lld floats", path, out->name, (long long)out->offset,
                   (long long)out->offset, (long long)numel, source, (long long)size);
    return FG_OK;
}

fg_status fg_shard_index_parse(const char *path, const char *json, fg_shard_index *ix,
                               fg_error *err)
{
    memset(ix, 0, sizeof *ix);
    json_error_t jerr;
    json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return BAD("%s: sharded index: not JSON (%s at character %d)", path, jerr.text,
                   jerr.position);
    ix->owner = root;
    int64_t layout = 0, world = 0;
    fg_status st = json_is_object(root) ? FG_OK : BAD("%s: sharded index: not a JSON object", path);
    if (st == FG_OK) st = get_str(path, "", root, "id", &ix->id, err);
    if (st == FG_OK) st = get_str(path, "", root, "strategy", &ix->strategy, err);
    if (st == FG_OK) st = get_int(path, "", root, "layout", INT32_MIN, INT32_MAX, &layout, err);
    if (st == FG_OK) st = get_int(path, "", root, "world_size", 1, 1 << 20, &world, err);
    if (st == FG_OK) st = get_int(path, "", root, "param_count", 0, INT64_MAX / 64, &ix->param_count, err);
    if (st == FG_OK) st = get_int(path, "", root, "buffer_count", 0, INT64_MAX / 64, &ix->buffer_count, err);
    if (st == FG_OK) st = get_str(path, "", root, "shard_dir", &ix->shard_dir, err);
    if (st == FG_OK && !plain_name(ix->shard_dir))
        st = BAD("%s: sharded index: \"shard_dir\" '%s' is not a plain folder name", path, ix->shard_dir);
    ix->layout = (int32_t)layout;
    ix->world_size = (int32_t)world;
    const json_t *slots = st == FG_OK ? field(path, "", root, "optimizer_slots", JSON_ARRAY, err) : NULL;
    if (st == FG_OK && !slots) st = FG_INVALID_ARGUMENT;
    if (st == FG_OK && json_array_size(slots) > FG_SHARD_MAX_SLOTS)
        st = BAD("%s: sharded index: \"optimizer_slots\" has %zu entries, more than %d", path,
                 json_array_size(slots), FG_SHARD_MAX_SLOTS);
    for (size_t j = 0; st == FG_OK && j < json_array_size(slots); j++) {
        ix->slot_names[j] = json_string_value(json_array_get(slots, j));
        if (!ix->slot_names[j] || !plain_name(ix->slot_names[j]) || strchr(ix->slot_names[j], '.'))
            st = BAD("%s: sharded index: \"optimizer_slots\"[%zu] is not a slot name", path, j);
        ix->slot_count = j + 1;
    }
    if (st == FG_OK) st = parse_files(path, root, ix, err);
    const json_t *tensors = st == FG_OK ? field(path, "", root, "tensors", JSON_ARRAY, err) : NULL;
    if (st == FG_OK && !tensors) st = FG_INVALID_ARGUMENT;
    if (st == FG_OK) {
        ix->tensor_count = json_array_size(tensors);
        ix->tensors = calloc(ix->tensor_count + 1, sizeof *ix->tensors);
        if (!ix->tensors) st = fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    }
    for (size_t i = 0; st == FG_OK && i < ix->tensor_count; i++)
        st = parse_tensor(path, json_array_get(tensors, i), i, ix, err);
    if (st != FG_OK) fg_shard_index_free(ix);
    return st;
}

int fg_shard_index_alloc_ranges(fg_shard_index *ix, int world_size)
{
    ix->offsets = calloc(2 * (size_t)world_size, sizeof *ix->offsets);
    ix->counts = ix->offsets ? ix->offsets + world_size : NULL;
    return ix->offsets ? 0 : -1;
}

void fg_shard_index_free(fg_shard_index *ix)
{
    free(ix->offsets); /* and counts */
    free(ix->tensors);
    json_decref(ix->owner);
    memset(ix, 0, sizeof *ix);
}

/* ---- finding the index ---------------------------------------------------------------- */

static int is_index(const char *path)
{
    fg_ckpt *c = NULL;
    if (fg_ckpt_open(path, &c, NULL) != FG_OK) return 0;
    const char *f = fg_ckpt_meta(c, "format");
    int yes = f && strcmp(f, FG_SHARDED_INDEX_FORMAT) == 0;
    fg_ckpt_close(c);
    return yes;
}

/* A folder names its one sharded index; a file is the index. */
static fg_status find_index(const char *arg, char *out, size_t cap, fg_error *err)
{
    struct stat sb;
    if (stat(arg, &sb) != 0)
        return fg_error_set(err, FG_NOT_FOUND, "%s: %s", arg, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(out, cap, "%s", arg);
        return FG_OK;
    }
    DIR *d = opendir(arg);
    if (!d) return fg_error_set(err, FG_NOT_FOUND, "%s: %s", arg, strerror(errno));
    int found = 0;
    char names[1024] = "";
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[8192];
        size_t len = strlen(e->d_name);
        if (len < 12 || strcmp(e->d_name + len - 12, ".safetensors") != 0 ||
            fg_ckpt_is_temporary(e->d_name) ||
            snprintf(path, sizeof path, "%s/%s", arg, e->d_name) >= (int)sizeof path || !is_index(path))
            continue;
        if (!found++) snprintf(out, cap, "%s", path);
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", e->d_name);
    }
    closedir(d);
    if (found == 1) return FG_OK;
    if (!found) return BAD("%s: no sharded checkpoint index (a .safetensors file with format %s) "
                           "in this folder", arg, FG_SHARDED_INDEX_FORMAT);
    return BAD("%s: %d sharded checkpoint indexes (%s): name one", arg, found, names);
}

/* ---- reading the shards ------------------------------------------------------------------ */

static fg_status meta_equals(fg_ckpt *c, const char *key, const char *want, fg_error *err)
{
    const char *v = fg_ckpt_meta(c, key);
    if (!v || strcmp(v, want) != 0)
        return BAD("%s: metadata '%s' is %s%s%s, the index says '%s'", fg_ckpt_path(c), key,
                   v ? "'" : "", v ? v : "missing", v ? "'" : "", want);
    return FG_OK;
}

static fg_status read_shard(const char *index_path, const fg_shard_index *ix, int r,
                            float *params, float *buffers, float *opt, fg_error *err)
{
    char path[8192], num[4][32];
    fg_status st = fg_shard_file_path(index_path, ix->shard_dir, r, ix->world_size, path,
                                      sizeof path, NULL, 0, err);
    fg_ckpt *c = NULL;
    if (st == FG_OK) st = fg_ckpt_open(path, &c, err);
    if (st != FG_OK) return st;
    snprintf(num[0], sizeof num[0], "%d", r);
    snprintf(num[1], sizeof num[1], "%d", ix->world_size);
    snprintf(num[2], sizeof num[2], "%lld", (long long)ix->offsets[r]);
    snprintf(num[3], sizeof num[3], "%lld", (long long)ix->counts[r]);
    st = meta_equals(c, "format", FG_SHARD_FILE_FORMAT, err);
    if (st == FG_OK) st = meta_equals(c, "id", ix->id, err);
    if (st == FG_OK) st = meta_equals(c, "rank", num[0], err);
    if (st == FG_OK) st = meta_equals(c, "world_size", num[1], err);
    if (st == FG_OK) st = meta_equals(c, "offset", num[2], err);
    if (st == FG_OK) st = meta_equals(c, "count", num[3], err);
    int64_t off = ix->offsets[r], n = ix->counts[r];
    if (st == FG_OK) st = fg_ckpt_read_tensor(c, "params", FG_F32, 1, &n, params + off, err);
    for (size_t j = 0; st == FG_OK && j < ix->slot_count; j++) {
        char name[96];
        snprintf(name, sizeof name, "optimizer.%s", ix->slot_names[j]);
        st = fg_ckpt_read_tensor(c, name, FG_F32, 1, &n, opt + (int64_t)j * ix->param_count + off, err);
    }
    if (st == FG_OK && r == 0 && ix->buffer_count)
        st = fg_ckpt_read_tensor(c, "buffers", FG_F32, 1, &ix->buffer_count, buffers, err);
    fg_ckpt_close(c);
    return st;
}

/* ---- the merge --------------------------------------------------------------------------- */

typedef struct merged {
    fg_ckpt *index;
    fg_shard_index ix;
    float *host;              /* params (P), buffers (B), slots (slot_count x P) */
    fg_ckpt_tensor *tensors;  /* (ix.tensor_count) */
    const char **keys, **values;
    size_t meta_count;
} merged;

static fg_status open_index(const char *path, merged *m, fg_error *err)
{
    fg_status st = fg_ckpt_open(path, &m->index, err);
    if (st != FG_OK) return st;
    const char *format = fg_ckpt_meta(m->index, "format");
    const char *json = fg_ckpt_meta(m->index, FG_SHARDED_INDEX_KEY);
    if (!format || strcmp(format, FG_SHARDED_INDEX_FORMAT) != 0)
        return BAD("%s: not a sharded checkpoint index (metadata format is '%s', expected '%s')",
                   path, format ? format : "missing", FG_SHARDED_INDEX_FORMAT);
    if (!json) return BAD("%s: metadata '%s' is missing", path, FG_SHARDED_INDEX_KEY);
    return fg_shard_index_parse(path, json, &m->ix, err);
}

static fg_status assemble(const char *path, merged *m, fg_error *err)
{
    const fg_shard_index *ix = &m->ix;
    int64_t P = ix->param_count, B = ix->buffer_count;
    size_t floats = (size_t)(P * (1 + (int64_t)ix->slot_count) + B) + 1;
    m->host = malloc(floats * sizeof(float));
    m->tensors = calloc(ix->tensor_count + 1, sizeof *m->tensors);
    size_t nmeta = fg_ckpt_meta_count(m->index);
    m->keys = calloc(nmeta + 1, sizeof *m->keys);
    m->values = calloc(nmeta + 1, sizeof *m->values);
    if (!m->host || !m->tensors || !m->keys || !m->values)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory for %zu floats", path, floats);
    float *params = m->host, *buffers = params + P, *opt = buffers + B;
    fg_status st = FG_OK;
    for (int r = 0; st == FG_OK && r < ix->world_size; r++)
        st = read_shard(path, ix, r, params, buffers, opt, err);
    for (size_t i = 0; st == FG_OK && i < ix->tensor_count; i++) {
        const fg_shard_tensor *t = &ix->tensors[i];
        const float *base = t->source == FG_SHARD_SRC_PARAMS ? params
                          : t->source == FG_SHARD_SRC_BUFFERS ? buffers : opt + (int64_t)t->source * P;
        m->tensors[i] = (fg_ckpt_tensor){.name = t->name, .dtype = FG_F32, .rank = t->rank,
                                         .data = base + t->offset};
        memcpy(m->tensors[i].shape, t->shape, sizeof t->shape);
    }
    /* the trainer metadata as the gathered file has it */
    for (size_t i = 0; i < nmeta; i++) {
        const char *k = fg_ckpt_meta_key(m->index, i);
        if (strcmp(k, FG_SHARDED_INDEX_KEY) == 0) continue;
        m->keys[m->meta_count] = k;
        m->values[m->meta_count++] = strcmp(k, "format") == 0 ? FG_CKPT_FORMAT : fg_ckpt_meta(m->index, k);
    }
    return st;
}

static void merged_free(merged *m)
{
    fg_shard_index_free(&m->ix);
    fg_ckpt_close(m->index);
    free(m->host);
    free(m->tensors);
    free(m->keys);
    free(m->values);
}

/* The output must not be one of the files merged: renamed over a shard, it would leave
 * the sharded checkpoint unmergeable. out_real: realpath of the output (it exists). */
static fg_status check_not_a_shard(const char *index_path, const fg_shard_index *ix,
                                   const char *out_path, const char *out_real, fg_error *err)
{
    for (int r = 0; r < ix->world_size; r++) {
        char shard[8192], real[PATH_MAX];
        fg_status st = fg_shard_file_path(index_path, ix->shard_dir, r, ix->world_size, shard,
                                          sizeof shard, NULL, 0, err);
        if (st != FG_OK) return st;
        if (realpath(shard, real) && strcmp(real, out_real) == 0)
            return BAD("%s: the output would replace shard file %d of %s; write the merged "
                       "checkpoint to another file", out_path, r, index_path);
    }
    return FG_OK;
}

fg_status fg_ckpt_merge(const char *index_or_dir, const char *out_path, FILE *report,
                        fg_error *err)
{
    char path[8192];
    fg_status st = fg_output_check_target(out_path, err); /* before reading shards for it */
    if (st == FG_OK) st = find_index(index_or_dir, path, sizeof path, err);
    if (st != FG_OK) return st;
    char a[PATH_MAX], b[PATH_MAX];
    int out_exists = realpath(out_path, b) != NULL;
    if (out_exists && realpath(path, a) && strcmp(a, b) == 0)
        return BAD("%s: the output would replace the index; write the merged checkpoint to "
                   "another file", out_path);
    merged m;
    memset(&m, 0, sizeof m);
    st = open_index(path, &m, err);
    if (st == FG_OK && out_exists) st = check_not_a_shard(path, &m.ix, out_path, b, err);
    if (st == FG_OK) st = assemble(path, &m, err);
    if (st == FG_OK)
        st = fg_ckpt_write_atomic(out_path, m.tensors, m.ix.tensor_count, m.keys, m.values,
                                  m.meta_count, err);
    if (st == FG_OK && report)
        fprintf(report, "merged %d shard files (%s, layout %d) of %s: %zu tensors, %lld "
                "parameters -> %s\n", m.ix.world_size, m.ix.strategy, m.ix.layout, path,
                m.ix.tensor_count, (long long)m.ix.param_count, out_path);
    merged_free(&m);
    return st;
}
