/* Reading the text files and the seeded train/validation split. */
#include "text_corpus.h"

#include <stdlib.h>
#include <string.h>

#include "data_path.h"

void text_bytes_free(text_bytes *b)
{
    free(b->bytes);
    b->bytes = NULL;
    b->count = 0;
}

static fg_status append(text_bytes *out, const unsigned char *data, int64_t size,
                        fg_error *err)
{
    uint8_t *grown = realloc(out->bytes, (size_t)(out->count + size) + 1);
    if (!grown)
        return fg_error_set(err, FG_OUT_OF_MEMORY, "text: out of memory for %lld bytes",
                            (long long)(out->count + size));
    memcpy(grown + out->count, data, (size_t)size);
    out->bytes = grown;
    out->count += size;
    return FG_OK;
}

static fg_status read_one(const char *dir, const char *name, text_bytes *out, fg_error *err)
{
    unsigned char *data = NULL;
    int64_t size = 0;
    char *path = NULL;
    fg_status st = fg_plugin_resolve_path("text", dir, name, &path, err);
    if (st == FG_OK)
        st = fg_plugin_read_file("text", path, &data, &size, err);
    if (st == FG_OK && size == 0)
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "text: %s: the file is empty", path);
    if (st == FG_OK)
        st = append(out, data, size, err);
    free(data);
    free(path);
    return st;
}

fg_status text_corpus_read(const char *dir, const char *files, text_bytes *out,
                          fg_error *err)
{
    memset(out, 0, sizeof *out);
    char path[4096]; /* one name of the list */
    const char *p = files;
    fg_status st = FG_OK;
    while (st == FG_OK && *p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        while (n && (*p == ' ' || *p == '\t'))
            p++, n--;
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n >= sizeof path)
            st = fg_error_set(err, FG_INVALID_ARGUMENT, "text: a file name of %zu characters "
                              "is too long", n);
        else if (n > 0) {
            memcpy(path, p, n);
            path[n] = '\0';
            st = read_one(dir, path, out, err);
        }
        p = end ? end + 1 : p + strlen(p);
    }
    if (st == FG_OK && out->count == 0)
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "text: no file named (option files)");
    if (st != FG_OK)
        text_bytes_free(out);
    return st;
}

static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* is_val[c] for every chunk: the first k of a seeded Fisher-Yates shuffle. */
static uint8_t *choose_val_chunks(int64_t chunks, int64_t k, uint64_t seed)
{
    int64_t *order = malloc((size_t)chunks * sizeof *order);
    uint8_t *is_val = calloc((size_t)chunks, 1);
    if (!order || !is_val) {
        free(order);
        free(is_val);
        return NULL;
    }
    for (int64_t i = 0; i < chunks; i++)
        order[i] = i;
    uint64_t state = seed;
    for (int64_t i = 0; i < k; i++) {
        int64_t j = i + (int64_t)(next_random(&state) % (uint64_t)(chunks - i));
        int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
        is_val[order[i]] = 1;
    }
    free(order);
    return is_val;
}

fg_status text_corpus_split(const text_split_spec *spec, text_bytes *train, text_bytes *val,
                            fg_error *err)
{
    memset(train, 0, sizeof *train);
    memset(val, 0, sizeof *val);
    text_bytes all;
    fg_status st = text_corpus_read(spec->dir, spec->files, &all, err);
    if (st != FG_OK)
        return st;
    int64_t chunks = (all.count + TEXT_CHUNK_BYTES - 1) / TEXT_CHUNK_BYTES;
    int64_t k = (int64_t)((double)chunks * spec->val_fraction + 0.5);
    if (spec->val_fraction > 0 && k == 0 && chunks > 1)
        k = 1;
    uint8_t *is_val = choose_val_chunks(chunks, k, spec->split_seed);
    if (!is_val)
        st = fg_error_set(err, FG_OUT_OF_MEMORY, "text: out of memory");
    for (int64_t c = 0; st == FG_OK && c < chunks; c++) {
        int64_t first = c * TEXT_CHUNK_BYTES;
        int64_t n = all.count - first < TEXT_CHUNK_BYTES ? all.count - first : TEXT_CHUNK_BYTES;
        st = append(is_val[c] ? val : train, all.bytes + first, n, err);
    }
    free(is_val);
    text_bytes_free(&all);
    if (st != FG_OK) {
        text_bytes_free(train);
        text_bytes_free(val);
    }
    return st;
}
