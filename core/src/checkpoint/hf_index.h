/* Hugging Face's sharded safetensors: model.safetensors.index.json, whose "weight_map" names
 * for every tensor the shard file (in the index's folder) that holds it, and the writer's
 * side: a tensor list split into shards of at most a size, as transformers' save_pretrained
 * (max_shard_size) splits them. */
#ifndef FG_HF_INDEX_H
#define FG_HF_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint.h"

typedef struct fg_hf_index {
    char **files;   /* the shard files, folder included, in first-mention order */
    size_t file_count;
    char **names;   /* weight_map's tensors */
    size_t *file_of; /* names[i] is in files[file_of[i]] */
    size_t count;
} fg_hf_index;

/* Does path name an index (it ends in ".index.json")? */
int fg_hf_index_is(const char *path);
/* Reads and checks the index: an object with an object weight_map of tensor -> file name
 * (a plain name, no folder: it is in the index's folder); anything else fails naming the
 * index and the key. */
fg_status fg_hf_index_read(const char *path, fg_hf_index *out, fg_error *err);
void fg_hf_index_free(fg_hf_index *x);

/* Bytes from "5GB", "500MB", "2GiB", "1000" (bytes): decimal units as transformers' (KB,
 * MB, GB = 10^3, 10^6, 10^9), binary ones (KiB, MiB, GiB); 0 for a text that is none. */
uint64_t fg_hf_shard_size_parse(const char *text);

/* Writes tensors (in order) into DIR/model-0000K-of-0000N.safetensors files of at most
 * max_bytes of data each (a larger tensor alone in its own), each with meta, then
 * DIR/model.safetensors.index.json ({"metadata": {"total_size"}, "weight_map"}). One shard
 * is still written as shards. *shards: how many. */
fg_status fg_hf_index_write(const char *dir, const fg_ckpt_tensor *tensors, size_t count,
                            uint64_t max_bytes, const char *const *meta_keys,
                            const char *const *meta_values, size_t meta_count,
                            size_t *shards, fg_error *err);

#endif
