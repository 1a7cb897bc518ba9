/* A Hugging Face config.json's rope_scaling object (null, "default", "llama3" or "linear")
 * read into the transformer_block keys that say the same (rope_freq.h), and written back
 * from them by `fulgur export`. */
#ifndef FG_HF_ROPE_SCALING_H
#define FG_HF_ROPE_SCALING_H

#include <jansson.h>

#include "layer.h"

typedef struct fg_hf_rope_scaling {
    int scaling; /* fg_rope_scaling */
    double factor, low, high;
    long long original;
} fg_hf_rope_scaling;

/* v: config.json's rope_scaling (NULL or null: none); path names the file in messages. A
 * type other than default, llama3 or linear, a key the type does not have, or one it needs
 * missing fail naming "rope_scaling.KEY". */
fg_status fg_hf_rope_scaling_read(const char *path, const json_t *v, fg_hf_rope_scaling *out,
                                  fg_error *err);

/* The INI key/value pairs of r, at most 5 (none without scaling): key[i], value[i] (the
 * values as text, 64 bytes each) and json_key[i] (what each came from). */
int fg_hf_rope_scaling_keys(const fg_hf_rope_scaling *r, const char *key[5],
                            char value[5][64], const char *json_key[5]);

/* config.json's rope_scaling for a block (json null without scaling); NULL when out of
 * memory. */
json_t *fg_hf_rope_scaling_json(const fg_layer *l);

#endif
