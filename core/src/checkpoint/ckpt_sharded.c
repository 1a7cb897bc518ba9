/* Writing checkpoints one file per rank (the layout is in ckpt_sharded.h): the shard files,
 * the index and the removal of shard folders no index refers to. */
#include "ckpt_sharded.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "checkpoint.h"

#define SUFFIX ".safetensors"
#define SHARDS_SUFFIX ".shards"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The folder part of a path ("." when none) and the file part. */
static void split_path(const char *path, char *dir, size_t cap, const char **base)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, cap, ".");
        *base = path;
        return;
    }
    int len = slash == path ? 1 : (int)(slash - path);
    snprintf(dir, cap, "%.*s", len, path);
    *base = slash + 1;
}

fg_status fg_shard_dir_name(const char *index_path, const char *id, char *out, size_t cap,
                            fg_error *err)
{
    char dir[4096];
    const char *base;
    split_path(index_path, dir, sizeof dir, &base);
    size_t len = strlen(base);
    if (ends_with(base, SUFFIX)) len -= strlen(SUFFIX);
    int n = snprintf(out, cap, "%.*s.%s" SHARDS_SUFFIX, (int)len, base, id);
    if (n < 0 || (size_t)n >= cap)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: checkpoint name too long", index_path);
    return FG_OK;
}

fg_status fg_shard_file_path(const char *index_path, const char *shard_dir, int rank,
                             int world_size, char *out, size_t cap, char *file, size_t file_cap,
                             fg_error *err)
{
    char dir[4096], name[64];
    const char *base;
    split_path(index_path, dir, sizeof dir, &base);
    snprintf(name, sizeof name, "rank-%05d-of-%05d" SUFFIX, rank, world_size);
    if (file) snprintf(file, file_cap, "%s", name);
    int n = snprintf(out, cap, "%s/%s/%s", dir, shard_dir, name);
    if (n < 0 || (size_t)n >= cap)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: shard path too long", index_path);
    return FG_OK;
}

fg_status fg_shard_write_file(const char *index_path, const fg_shard_index *ix, int rank,
                              const float *params, const float *buffers, const float *opt,
                              fg_error *err)
{
    char path[8192], folder[8192];
    fg_status st = fg_shard_file_path(index_path, ix->shard_dir, rank, ix->world_size, path,
                                      sizeof path, NULL, 0, err);
    if (st != FG_OK) return st;
    snprintf(folder, sizeof folder, "%s", path);
    *strrchr(folder, '/') = 0;
    if (mkdir(folder, 0755) != 0 && errno != EEXIST)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: cannot create the shard folder: %s",
                            folder, strerror(errno));
    int64_t count = ix->counts[rank];
    fg_ckpt_tensor t[2 + FG_SHARD_MAX_SLOTS];
    char names[FG_SHARD_MAX_SLOTS][96];
    size_t k = 0;
    memset(t, 0, sizeof t);
    t[k++] = (fg_ckpt_tensor){.name = "params", .dtype = FG_F32, .rank = 1, .shape = {count},
                              .data = params};
    for (size_t j = 0; j < ix->slot_count; j++) {
        snprintf(names[j], sizeof names[j], "optimizer.%s", ix->slot_names[j]);
        t[k++] = (fg_ckpt_tensor){.name = names[j], .dtype = FG_F32, .rank = 1, .shape = {count},
                                  .data = opt + (int64_t)j * count};
    }
    if (buffers && ix->buffer_count)
        t[k++] = (fg_ckpt_tensor){.name = "buffers", .dtype = FG_F32, .rank = 1,
                                  .shape = {ix->buffer_count}, .data = buffers};
    char v[5][32];
    snprintf(v[0], sizeof v[0], "%d", rank);
    snprintf(v[1], sizeof v[1], "%d", ix->world_size);
    snprintf(v[2], sizeof v[2], "%lld", (long long)ix->offsets[rank]);
    snprintf(v[3], sizeof v[3], "%lld", (long long)count);
    const char *keys[] = {"format", "id", "rank", "world_size", "offset", "count"};
    const char *values[] = {FG_SHARD_FILE_FORMAT, ix->id, v[0], v[1], v[2], v[3]};
    return fg_ckpt_write_atomic(path, t, k, keys, values, 6, err);
}

static json_t *index_json(const fg_shard_index *ix)
{
    json_t *files = json_array(), *tensors = json_array(), *slots = json_array();
    for (int r = 0; r < ix->world_size; r++) {
        char file[64];
        snprintf(file, sizeof file, "rank-%05d-of-%05d" SUFFIX, r, ix->world_size);
        json_array_append_new(files, json_pack("{s:i, s:s, s:I, s:I}", "rank", r, "file", file,
                                               "offset", (json_int_t)ix->offsets[r], "count",
                                               (json_int_t)ix->counts[r]));
    }
    for (size_t j = 0; j < ix->slot_count; j++)
        json_array_append_new(slots, json_string(ix->slot_names[j]));
    for (size_t i = 0; i < ix->tensor_count; i++) {
        const fg_shard_tensor *t = &ix->tensors[i];
        json_t *shape = json_array();
        for (int d = 0; d < t->rank; d++) json_array_append_new(shape, json_integer(t->shape[d]));
        char source[128];
        if (t->source == FG_SHARD_SRC_PARAMS) snprintf(source, sizeof source, "params");
        else if (t->source == FG_SHARD_SRC_BUFFERS) snprintf(source, sizeof source, "buffers");
        else snprintf(source, sizeof source, "optimizer.%s", ix->slot_names[t->source]);
        json_array_append_new(tensors, json_pack("{s:s, s:o, s:s, s:I}", "name", t->name,
                                                 "shape", shape, "source", source, "offset",
                                                 (json_int_t)t->offset));
    }
    return json_pack("{s:s, s:s, s:i, s:i, s:I, s:I, s:o, s:s, s:o, s:o}", "id", ix->id,
                     "strategy", ix->strategy, "layout", ix->layout, "world_size",
                     ix->world_size, "param_count", (json_int_t)ix->param_count,
                     "buffer_count", (json_int_t)ix->buffer_count, "optimizer_slots", slots,
                     "shard_dir", ix->shard_dir, "files", files, "tensors", tensors);
}

fg_status fg_shard_write_index(const char *path, const fg_shard_index *ix,
                               const char *const *keys, const char *const *values, size_t n,
                               fg_error *err)
{
    json_t *root = index_json(ix);
    char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    const char **k = calloc(n + 1, sizeof *k), **v = calloc(n + 1, sizeof *v);
    fg_status st = text && k && v ? FG_OK
                 : fg_error_set(err, FG_OUT_OF_MEMORY, "%s: out of memory for the index", path);
    size_t m = 0;
    for (size_t i = 0; st == FG_OK && i < n; i++, m++) {
        k[m] = keys[i];
        v[m] = strcmp(keys[i], "format") == 0 ? FG_SHARDED_INDEX_FORMAT : values[i];
    }
    if (st == FG_OK) {
        k[m] = FG_SHARDED_INDEX_KEY;
        v[m++] = text;
        st = fg_ckpt_write_atomic(path, NULL, 0, k, v, m, err);
    }
    free(text);
    free(k);
    free(v);
    return st;
}

/* ---- removing shard folders no index refers to ---------------------------------------- */

/* The shard folder an index file names, or NULL (not an index, unreadable). */
static char *referenced_dir(const char *path)
{
    fg_ckpt *c = NULL;
    if (fg_ckpt_open(path, &c, NULL) != FG_OK) return NULL;
    const char *format = fg_ckpt_meta(c, "format"), *text = fg_ckpt_meta(c, FG_SHARDED_INDEX_KEY);
    char *dir = NULL;
    if (format && text && strcmp(format, FG_SHARDED_INDEX_FORMAT) == 0) {
        json_t *root = json_loads(text, 0, NULL);
        const char *s = json_string_value(json_object_get(root, "shard_dir"));
        if (s) dir = strdup(s);
        json_decref(root);
    }
    fg_ckpt_close(c);
    return dir;
}

/* A shard folder's files are ours (rank files and the writer's temporaries); anything
 * else in it stays, and so does the folder. */
static int remove_shard_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "rank-", 5) != 0) continue;
        char path[8192];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path) unlink(path);
    }
    closedir(d);
    return rmdir(dir) == 0;
}

int fg_shard_collect(const char *index_path)
{
    char dir[4096];
    const char *base;
    split_path(index_path, dir, sizeof dir, &base);
    DIR *d = opendir(dir);
    if (!d) return 0;
    char **refs = NULL, **shard_dirs = NULL;
    size_t nrefs = 0, ndirs = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[8192];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        /* any file may be an index (final_checkpoint names it freely), so each is asked */
        struct stat sb;
        int shards = ends_with(e->d_name, SHARDS_SUFFIX);
        int index = !shards && !fg_ckpt_is_temporary(e->d_name) && stat(path, &sb) == 0 &&
                    S_ISREG(sb.st_mode);
        char ***list = index ? &refs : shards ? &shard_dirs : NULL;
        size_t *count = index ? &nrefs : &ndirs;
        char *item = index ? referenced_dir(path) : shards ? strdup(e->d_name) : NULL;
        char **grown = item ? realloc(*list, (*count + 1) * sizeof **list) : NULL;
        if (!grown) {
            free(item);
            continue;
        }
        *list = grown;
        grown[(*count)++] = item;
    }
    closedir(d);
    int removed = 0;
    for (size_t i = 0; i < ndirs; i++) {
        int used = 0;
        for (size_t j = 0; j < nrefs && !used; j++) used = strcmp(refs[j], shard_dirs[i]) == 0;
        char path[8192];
        if (!used && snprintf(path, sizeof path, "%s/%s", dir, shard_dirs[i]) < (int)sizeof path)
            removed += remove_shard_dir(path);
    }
    for (size_t i = 0; i < nrefs; i++) free(refs[i]);
    for (size_t i = 0; i < ndirs; i++) free(shard_dirs[i]);
    free(refs);
    free(shard_dirs);
    return removed;
}
