/* fulgur generate's KV cache: a language model's forward at one new position of one
 * sample, against what a forward of batch 1 (the prompt) and the earlier positions left in
 * the replica's arena. Each transformer block keeps its K and V there (its saved qkv, one
 * row per position, for the whole context), so a new token costs one row through every
 * layer and one query against pos + 1 keys per head, not a forward of the whole window. */
#ifndef FG_DECODE_H
#define FG_DECODE_H

#include "model.h"

typedef struct fg_decoder fg_decoder;

/* The incremental path of replica r's model (the whole model, a chain of layers: embedding
 * first, then position embeddings, transformer blocks, norms, position-wise linears and
 * activations, dropout), or FG_UNAVAILABLE naming the first layer that has none. Takes its
 * only device memory (two int32) here: a step allocates nothing. */
fg_status fg_decoder_create(fg_replica *r, fg_decoder **out, fg_error *err);
void fg_decoder_destroy(fg_decoder *d);

/* Runs `token` at position pos (0 <= pos < T): the replica's arena must hold positions
 * [0, pos) of this sequence, from a forward of batch 1 whose window started with them or
 * from earlier steps. Leaves the softmax of the position's logits at row pos of
 * fg_replica_probs, as a forward of the window would. Enqueued on queue; the caller syncs
 * it before the next step. */
fg_status fg_decoder_step(fg_decoder *d, void *queue, int32_t token, int pos, fg_error *err);

#endif
