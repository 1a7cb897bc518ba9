/* Runs one group of CPU backend tests, named on the command line (one ctest each). */
#include <stdio.h>
#include <string.h>

#include "harness.h"

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } groups[] = {
        { "linear", test_group_linear },       { "conv_pool", test_group_conv_pool },
        { "norm_act", test_group_norm_act },   { "gradients", test_group_gradients },
        { "device", test_group_device },       { "determinism", test_group_determinism },
    };
    if (argc != 2) {
        fprintf(stderr, "usage: %s GROUP\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        if (strcmp(argv[1], groups[i].name) != 0)
            continue;
        groups[i].run();
        if (test_failures) {
            fprintf(stderr, "%s: %d check(s) failed\n", argv[1], test_failures);
            return 1;
        }
        printf("%s: all checks passed\n", argv[1]);
        return 0;
    }
    fprintf(stderr, "unknown group %s\n", argv[1]);
    return 2;
}
