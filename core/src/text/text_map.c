/* The tokenizer's hash maps (text_map.h). */
#include "text_map.h"
#include "core_util.h"

#include <stddef.h>
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

/* Both maps are open-addressed tables whose slots start with a uint64_t tag, 0 when empty
 * (a bytes entry's hash, a pair entry's key); home(tag) is where a tag's probe starts. */
_Static_assert(offsetof(fg_bytes_entry, hash) == 0, "a slot starts with its tag");
_Static_assert(offsetof(fg_pair_entry, key) == 0, "a slot starts with its tag");

static uint64_t slot_tag(const char *slot)
{
    uint64_t tag;
    memcpy(&tag, slot, sizeof tag);
    return tag;
}

/* The first empty slot from home on (linear probing). */
static void *free_slot(void *slots, size_t cap, size_t size, size_t home)
{
    char *s = slots;
    size_t i = home & (cap - 1);
    while (slot_tag(s + i * size))
        i = (i + 1) & (cap - 1);
    return s + i * size;
}

/* Doubles a table (first 1024 slots of `size` bytes) and places its entries again. */
static int table_grow(void *slotsp, size_t *cap, size_t size, size_t (*home)(uint64_t tag))
{
    size_t grown_cap = *cap ? 2 * *cap : 1024;
    char *old, *grown = calloc(grown_cap, size);
    if (!grown)
        return -1;
    memcpy(&old, slotsp, sizeof old);
    for (size_t i = 0; i < *cap; i++)
        if (slot_tag(old + i * size))
            memcpy(free_slot(grown, grown_cap, size, home(slot_tag(old + i * size))),
                   old + i * size, size);
    free(old);
    memcpy(slotsp, &grown, sizeof grown);
    *cap = grown_cap;
    return 0;
}

static size_t bytes_home(uint64_t hash)
{
    return (size_t)hash;
}

static fg_bytes_entry *bytes_slot(fg_bytes_entry *slots, size_t cap, uint64_t hash)
{
    return free_slot(slots, cap, sizeof *slots, bytes_home(hash));
}

static int bytes_grow(fg_bytes_map *m)
{
    return table_grow(&m->slots, &m->cap, sizeof *m->slots, bytes_home);
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
    return free_slot(slots, cap, sizeof *slots, pair_hash(key));
}

static int pair_grow(fg_pair_map *m)
{
    return table_grow(&m->slots, &m->cap, sizeof *m->slots, pair_hash);
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
