/* libFuzzer target: the IDX reader of data.idx (plain and gzip), as images (rank 3) and as
 * labels (rank 1), header-only and whole. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_file.h"
#include "idx_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[1024];
    fuzz_write("", "x.idx", data, size, path, sizeof path);
    static const int ranks[] = {3, 1};
    static const char *const what[] = {"images", "labels"};
    for (int i = 0; i < 2; i++) {
        idx_array a;
        fg_error err = {FG_OK, ""};
        if (idx_file_read(path, ranks[i], what[i], &a, &err) == FG_OK) {
            int64_t bytes = a.count * a.item_bytes;
            volatile uint8_t sum = 0;
            for (int64_t j = 0; j < bytes; j++) /* every byte it accepted is there */
                sum = (uint8_t)(sum + a.data[j]);
            idx_array_free(&a);
        }
        if (idx_file_read_header(path, ranks[i], what[i], &a, &err) == FG_OK)
            idx_array_free(&a);
    }
    return 0;
}
