/* What the data plugins share: answering open() into a caller's fg_dataset_info of any
 * size, and checking read()'s arguments before anything is written. */
#ifndef FULGUR_PLUGIN_COMMON_DATA_H
#define FULGUR_PLUGIN_COMMON_DATA_H

#include "fulgur/data.h"

/* Copies what the caller's struct has room for (it may be an older, shorter one): its
 * struct_size, or all of src when that is 0 or larger than this build's. */
void fg_plugin_copy_dataset_info(fg_dataset_info *dst, const fg_dataset_info *src);

/* read()'s arguments for a split of `length` samples: count >= 0, indices and samples
 * present when count > 0, every index in [0, length). FG_INVALID_ARGUMENT otherwise, the
 * message starting "who:" and naming the split, the first bad index and its position. */
fg_status fg_plugin_check_read(const char *who, const char *split, int64_t length,
                               const int64_t *indices, int count, const void *samples,
                               fg_error *err);

/* "train", "val", "test", "predict" for an fg_split; NULL for anything else. */
const char *fg_plugin_split_name(int split);

#endif
