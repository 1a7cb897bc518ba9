/* Hash maps of the tokenizer: byte strings to two int32 values (the vocabulary, the encode
 * cache), and pairs of token ids to a merge (rank, result). Open addressing, keys copied
 * into the map's own arena; grown by doubling. */
#ifndef FG_TEXT_MAP_H
#define FG_TEXT_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct fg_bytes_entry {
    uint64_t hash; /* 0: empty slot */
    size_t key_at;
    uint32_t key_len;
    int32_t v0, v1;
} fg_bytes_entry;

typedef struct fg_bytes_map {
    fg_bytes_entry *slots;
    size_t cap, count; /* cap: a power of two */
    char *arena;
    size_t arena_len, arena_cap;
} fg_bytes_map;

uint64_t fg_text_hash(const void *key, size_t n);
/* The entry of key, or NULL. */
const fg_bytes_entry *fg_bytes_map_find(const fg_bytes_map *m, const void *key, size_t n,
                                        uint64_t hash);
/* Sets key's values (adding it when absent). 0, or -1 when out of memory. */
int fg_bytes_map_put(fg_bytes_map *m, const void *key, size_t n, uint64_t hash, int32_t v0,
                     int32_t v1);
const char *fg_bytes_map_key(const fg_bytes_map *m, const fg_bytes_entry *e);
/* Empties the map, keeping its memory. */
void fg_bytes_map_clear(fg_bytes_map *m);
void fg_bytes_map_free(fg_bytes_map *m);

typedef struct fg_pair_entry {
    uint64_t key; /* (a << 32 | b) + 1; 0: empty */
    int32_t rank, merged;
} fg_pair_entry;

typedef struct fg_pair_map {
    fg_pair_entry *slots;
    size_t cap, count;
} fg_pair_map;

/* The merge of (a, b), or NULL. */
const fg_pair_entry *fg_pair_map_find(const fg_pair_map *m, int32_t a, int32_t b);
/* Adds (a, b) unless present (the first rank wins). 0, or -1 when out of memory. */
int fg_pair_map_add(fg_pair_map *m, int32_t a, int32_t b, int32_t rank, int32_t merged);
void fg_pair_map_free(fg_pair_map *m);

#endif
