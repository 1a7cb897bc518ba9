/* libFuzzer target: the index reader of `fulgur ckpt merge` (fg_shard_index_parse, the
 * sharded_index JSON of a per-rank checkpoint's index file). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_sharded.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *json = malloc(size + 1);
    if (!json)
        return 0;
    memcpy(json, data, size);
    json[size] = '\0';
    fg_shard_index ix;
    memset(&ix, 0, sizeof ix);
    fg_error err = {FG_OK, ""};
    if (fg_shard_index_parse("fuzz.safetensors", json, &ix, &err) == FG_OK)
        fg_shard_index_free(&ix);
    free(json);
    return 0;
}
