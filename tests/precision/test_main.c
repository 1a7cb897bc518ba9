/* Runs one group of precision tests, named on the command line (one ctest each). */
#include <stdio.h>
#include <string.h>

#include "precision_tests.h"

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } groups[] = {{"half", test_group_half}, {"ops", test_group_ops}, {"scaler", test_group_scaler}};
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
