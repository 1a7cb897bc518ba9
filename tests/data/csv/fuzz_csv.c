/* libFuzzer target: data.csv's reader through its vtable. The input is the train file; the
 * first byte picks the task, so both the class and the regression paths are reached. */
#include <stdio.h>

#include "fuzz_data_plugin.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char path[1024], options[1400];
    fuzz_write("", "train.csv", data + 1, size - 1, path, sizeof path);
    snprintf(options, sizeof options,
             "train_file = %s\ntest_file = %s\ntarget = y\ntask = %s\nstandardize = %s",
             path, path, data[0] & 1 ? "regression" : "classification",
             data[0] & 2 ? "true" : "false");
    fuzz_run_data_plugin(options);
    return 0;
}
