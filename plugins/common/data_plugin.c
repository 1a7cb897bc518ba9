/* Helpers of the data plugins; see data_plugin.h. */
#include "data_plugin.h"

#include <string.h>

void fg_plugin_copy_dataset_info(fg_dataset_info *dst, const fg_dataset_info *src)
{
    uint32_t size = dst->struct_size;
    if (size == 0 || size > sizeof *src)
        size = sizeof *src;
    memcpy(dst, src, size);
    dst->struct_size = size;
}

fg_status fg_plugin_check_read(const char *who, const char *split, int64_t length,
                               const int64_t *indices, int count, const void *samples,
                               fg_error *err)
{
    if (count < 0 || (count > 0 && (!indices || !samples)))
        return fg_error_set(err, FG_INVALID_ARGUMENT,
                            "%s: read of the %s split: count %d with indices %p, samples %p",
                            who, split, count, (const void *)indices, samples);
    for (int k = 0; k < count; k++)
        if (indices[k] < 0 || indices[k] >= length)
            return fg_error_set(err, FG_INVALID_ARGUMENT,
                                "%s: index %lld (position %d of %d) is out of range for the %s "
                                "split of length %lld",
                                who, (long long)indices[k], k, count, split, (long long)length);
    return FG_OK;
}

const char *fg_plugin_split_name(int split)
{
    switch (split) {
    case FG_SPLIT_TRAIN: return "train";
    case FG_SPLIT_VAL: return "val";
    case FG_SPLIT_TEST: return "test";
    case FG_SPLIT_PREDICT: return "predict";
    }
    return NULL;
}
