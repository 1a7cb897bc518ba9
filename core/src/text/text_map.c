/* The tokenizer's hash maps (text_map.h). */
#include "text_map.h"
#include "core_util.h"

#include <stdlib.h>
#include <string.h>

uint64_t fg_text_hash(const void *key, size_t n)
{
    const unsigned char *p = key;
    uint64_t h = 0xcbf29ce484222325ull ^ (n * 0x9e3779b97f4a7c15ull);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ull;
    h ^= h >> 32;
    return h ? h : 1;
}

const char *fg_bytes_map_key(const fg_bytes_map *m, const fg_bytes_entry *e)
{
    return m->arena + e->key_at;
}

const fg_bytes_entry *fg_bytes_map_find(const fg_bytes_map *m, const void *key, size_t n,
                                        uint64_t hash)
{
    if (!m->cap)
        return NULL;
    for (size_t i = hash & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        const fg_bytes_entry *e = &m->slots[i];
        if (!e->hash)
            return NULL;
        if (e->hash == hash && e->key_len == n && memcmp(m->arena + e->key_at, key, n) == 0)
            return e;
    }
}

static fg_bytes_entry *bytes_slot(fg_bytes_entry *slots, size_t cap, uint64_t hash)
{
    size_t i = hash & (cap - 1);
    while (slots[i].hash)
        i = (i + 1) & (cap - 1);
    return &slots[i];
}

static int bytes_grow(fg_bytes_map *m)
{
    size_t cap = m->cap ? 2 * m->cap : 1024;
    fg_bytes_entry *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].hash)
            *bytes_slot(slots, cap, m->slots[i].hash) = m->slots[i];
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

static int arena_append(fg_bytes_map *m, const void *key, size_t n)
{
    return fg_append_bytes(&m->arena, &m->arena_len, &m->arena_cap, key, n, 4096);
}

int fg_bytes_map_put(fg_bytes_map *m, const void *key, size_t n, uint64_t hash, int32_t v0,
                     int32_t v1)
{
    fg_bytes_entry *found = (fg_bytes_entry *)fg_bytes_map_find(m, key, n, hash);
    if (found) {
        found->v0 = v0;
        found->v1 = v1;
        return 0;
    }
    if ((m->count + 1) * 2 > m->cap && bytes_grow(m) != 0)
        return -1;
    size_t at = m->arena_len;
    if (n > UINT32_MAX || arena_append(m, key, n) != 0)
        return -1;
    *bytes_slot(m->slots, m->cap, hash) = (fg_bytes_entry){hash, at, (uint32_t)n, v0, v1};
    m->count++;
    return 0;
}

void fg_bytes_map_clear(fg_bytes_map *m)
{
    if (m->slots)
        memset(m->slots, 0, m->cap * sizeof *m->slots);
    m->count = 0;
    m->arena_len = 0;
}

void fg_bytes_map_free(fg_bytes_map *m)
{
    free(m->slots);
    free(m->arena);
    memset(m, 0, sizeof *m);
}

static uint64_t pair_key(int32_t a, int32_t b)
{
    return ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
}

static size_t pair_hash(uint64_t key)
{
    key ^= key >> 31;
    key *= 0x9e3779b97f4a7c15ull;
    return (size_t)(key ^ (key >> 29));
}

const fg_pair_entry *fg_pair_map_find(const fg_pair_map *m, int32_t a, int32_t b)
{
    if (!m->cap)
        return NULL;
    uint64_t key = pair_key(a, b);
    for (size_t i = pair_hash(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->slots[i].key == key)
            return &m->slots[i];
        if (!m->slots[i].key)
            return NULL;
    }
}

static fg_pair_entry *pair_slot(fg_pair_entry *slots, size_t cap, uint64_t key)
{
    size_t i = pair_hash(key) & (cap - 1);
    while (slots[i].key)
        i = (i + 1) & (cap - 1);
    return &slots[i];
}

static int pair_grow(fg_pair_map *m)
{
    size_t cap = m->cap ? 2 * m->cap : 1024;
    fg_pair_entry *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key)
            *pair_slot(slots, cap, m->slots[i].key) = m->slots[i];
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

int fg_pair_map_add(fg_pair_map *m, int32_t a, int32_t b, int32_t rank, int32_t merged)
{
    if (fg_pair_map_find(m, a, b))
        return 0;
    if ((m->count + 1) * 2 > m->cap && pair_grow(m) != 0)
        return -1;
    *pair_slot(m->slots, m->cap, pair_key(a, b)) = (fg_pair_entry){pair_key(a, b), rank, merged};
    m->count++;
    return 0;
}

void fg_pair_map_free(fg_pair_map *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}
