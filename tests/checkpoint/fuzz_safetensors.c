/* libFuzzer target: the safetensors header reader (core/src/checkpoint) on a whole file:
 * length prefix, JSON header, offsets against the data; every tensor it accepts is read
 * with its own dtype and shape, and the trainer metadata checks run. */
#include <stdint.h>
#include <stdlib.h>

#include "checkpoint.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[1024];
    fuzz_write("", "x.safetensors", data, size, path, sizeof path);
    fg_ckpt *c = NULL;
    fg_error err = {FG_OK, ""};
    if (fg_ckpt_open(path, &c, &err) != FG_OK)
        return 0;
    fg_ckpt_refuse_nonfinite(c, 1);
    for (size_t i = 0; i < fg_ckpt_tensor_count(c); i++) {
        const char *name = fg_ckpt_tensor_name(c, i);
        fg_dtype dtype;
        int rank = 0;
        int64_t shape[FG_MAX_DIMS], bytes = 0;
        if (fg_ckpt_tensor_info(c, name, &dtype, &rank, shape, &err) != FG_OK ||
            fg_ckpt_byte_size(dtype, rank, shape, &bytes) != 0)
            abort(); /* a tensor the header listed must describe itself */
        if (bytes > (int64_t)size)
            abort(); /* its bytes lie inside the file */
        void *dst = malloc(bytes ? (size_t)bytes : 1);
        if (dst) {
            fg_ckpt_read_tensor(c, name, dtype, rank, shape, dst, &err);
            free(dst);
        }
    }
    for (size_t i = 0; i < fg_ckpt_meta_count(c); i++)
        if (!fg_ckpt_meta(c, fg_ckpt_meta_key(c, i)))
            abort();
    fg_ckpt_close(c);
    return 0;
}
