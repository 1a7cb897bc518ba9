/* Under a comm, every rank must run the same training: before the strategy moves a byte,
 * the ranks compare a fingerprint of what must match (the resolved config without the keys
 * that may differ per rank, the parameter layout, the data set sizes, the checkpoint being
 * resumed). Equal fingerprints cost one all-reduce of 8 int32; a mismatch stops every rank
 * with the lowest differing rank and the first item it differs in (rank 0's order). */
#ifndef FG_RANK_AGREEMENT_H
#define FG_RANK_AGREEMENT_H

#include "fulgur/plugin.h"

struct fg_trainer;

/* FG_INVALID_ARGUMENT naming the rank and the key, config entry, tensor, data split or
 * checkpoint field; FG_OK alone or when every rank agrees. */
fg_status fg_trainer_agree_across_ranks(struct fg_trainer *t, fg_error *err);

#endif
