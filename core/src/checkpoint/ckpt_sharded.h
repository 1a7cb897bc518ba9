/* Checkpoints written one file per rank (strategy.sharded, sharded_checkpoint = true).
 *
 * A checkpoint asked for at PATH is:
 *   PATH                        the index: a safetensors file without tensors whose metadata
 *                               is the trainer metadata a gathered checkpoint has (format
 *                               FG_SHARDED_INDEX_FORMAT instead of fulgur-checkpoint-1) plus
 *                               "sharded_index", a JSON document (below). Being a file where
 *                               the gathered one would be, it is found by --ckpt-path last
 *                               and best, evicted by save_top_k and linked by save_last.
 *   DIR/SHARD_DIR/rank-RRRRR-of-NNNNN.safetensors
 *                               rank R's part: "params" and "optimizer.SLOT" (count floats
 *                               each: the flat range [offset, offset + count)), "buffers"
 *                               (rank 0 only), and metadata format FG_SHARD_FILE_FORMAT,
 *                               id, rank, world_size, offset, count.
 * SHARD_DIR (NAME.ID.shards, beside the index) is new for every save: the shards are
 * written first, each atomically, then the index is renamed over PATH. Until then PATH is
 * the previous checkpoint with its own shard folder; folders no index refers to any more
 * are removed after the rename (fg_shard_collect).
 *
 * The "sharded_index" JSON:
 *   {"id": ID, "strategy": "sharded", "layout": STAGE, "world_size": N,
 *    "param_count": P, "buffer_count": B, "optimizer_slots": ["m", "v"],
 *    "shard_dir": SHARD_DIR,
 *    "files": [{"rank": R, "file": "rank-...safetensors", "offset": O, "count": C}, ...],
 *    "tensors": [{"name": "fc1.weight", "shape": [64, 64], "source": "params", "offset": 0},
 *                {"name": "optimizer.fc1.weight.m", ..., "source": "optimizer.m", ...},
 *                {"name": "bn.running_mean", ..., "source": "buffers", ...}, ...]}
 * "tensors" is the merged checkpoint's tensor list in its order: `fulgur ckpt merge`
 * writes exactly the file the gathered path would have. */
#ifndef FG_CKPT_SHARDED_H
#define FG_CKPT_SHARDED_H

#include <stddef.h>
#include <stdint.h>

#include "fulgur/plugin.h"
#include "fulgur/types.h"

#define FG_CKPT_FORMAT "fulgur-checkpoint-1"
#define FG_SHARDED_INDEX_FORMAT "fulgur-sharded-checkpoint-1"
#define FG_SHARD_FILE_FORMAT "fulgur-checkpoint-shard-1"
#define FG_SHARDED_INDEX_KEY "sharded_index"
#define FG_SHARD_MAX_SLOTS 8

/* Where a tensor of the merged checkpoint comes from. */
enum { FG_SHARD_SRC_PARAMS = -2, FG_SHARD_SRC_BUFFERS = -1 /* >= 0: optimizer slot */ };

typedef struct fg_shard_tensor {
    const char *name;
    int rank;
    int64_t shape[FG_MAX_DIMS];
    int source;     /* FG_SHARD_SRC_* or an optimizer slot */
    int64_t offset; /* in floats, into its source region */
} fg_shard_tensor;

typedef struct fg_shard_index {
    const char *id;        /* unique per save: names the shard folder, stamped on every file */
    const char *strategy;
    int32_t layout;
    int32_t world_size;
    int64_t param_count, buffer_count;
    size_t slot_count;
    const char *slot_names[FG_SHARD_MAX_SLOTS];
    const char *shard_dir; /* relative to the index's folder */
    int64_t *offsets, *counts; /* (world_size) one block, counts after offsets */
    size_t tensor_count;
    fg_shard_tensor *tensors;
    void *owner; /* the parsed JSON the strings point into (fg_shard_index_parse) */
} fg_shard_index;

/* "NAME.ID.shards" for the index at PATH (NAME: its file name without .safetensors). */
fg_status fg_shard_dir_name(const char *index_path, const char *id, char *out, size_t cap,
                            fg_error *err);
/* The path of rank's shard file: DIR_OF(index_path)/shard_dir/rank-RRRRR-of-NNNNN.safetensors
 * (file: NULL, or room for the bare file name). */
fg_status fg_shard_file_path(const char *index_path, const char *shard_dir, int rank,
                             int world_size, char *out, size_t cap, char *file, size_t file_cap,
                             fg_error *err);

/* Rank `rank`'s shard file (its folder made when missing), atomically. params: counts[rank]
 * floats; opt: slot_count x counts[rank] floats; buffers: rank 0's buffer_count floats. */
fg_status fg_shard_write_file(const char *index_path, const fg_shard_index *ix, int rank,
                              const float *params, const float *buffers, const float *opt,
                              fg_error *err);

/* The index at PATH, atomically: the trainer metadata (format replaced) plus the JSON. */
fg_status fg_shard_write_index(const char *path, const fg_shard_index *ix,
                               const char *const *keys, const char *const *values, size_t n,
                               fg_error *err);

/* Removes the shard folders beside index_path that no sharded index in that folder refers
 * to (left by a replaced or evicted checkpoint). Best effort: returns how many it removed. */
int fg_shard_collect(const char *index_path);

/* ---- reading (ckpt_merge.c) ---- */

/* Parses and validates an index's JSON against itself (ranges cover [0, P) in rank order,
 * tensors lie inside their regions, names unique); path names the file in messages. The
 * strings and arrays live in *out until fg_shard_index_free. */
fg_status fg_shard_index_parse(const char *path, const char *json, fg_shard_index *out,
                               fg_error *err);
/* ix->offsets and ix->counts, world_size each and zeroed, as one block (offsets, then
 * counts) that fg_shard_index_free frees. Returns 0, or -1 when out of memory. */
int fg_shard_index_alloc_ranges(fg_shard_index *ix, int world_size);
void fg_shard_index_free(fg_shard_index *ix);

#endif
