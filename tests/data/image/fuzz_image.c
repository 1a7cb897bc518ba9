/* libFuzzer target: PNG and JPEG decoding through data.image_folder's vtable. The input is
 * the one image of a class folder, named .png or .jpg by its first byte (the decoder goes
 * by the content, the index by the name); resize or not by the second. */
#include <stdio.h>

#include "fuzz_data_plugin.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    char path[1024], options[1400];
    fuzz_write("train/cat", data[0] & 1 ? "a.jpg" : "a.png", data + 2, size - 2, path,
               sizeof path);
    /* The other name is removed so the folder holds one image. */
    char other[1100];
    snprintf(other, sizeof other, "%s/train/cat/%s", fuzz_dir(), data[0] & 1 ? "a.png" : "a.jpg");
    remove(other);
    snprintf(options, sizeof options, "train_dir = %s/train\nmode = %s\n%s", fuzz_dir(),
             data[1] & 1 ? "grayscale" : "rgb", data[1] & 2 ? "resize = 8, 8" : "");
    fuzz_run_data_plugin(options);
    return 0;
}
