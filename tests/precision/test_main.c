/* Runs one group of precision tests, named on the command line (one ctest each). */
#include "precision_tests.h"

int main(int argc, char **argv)
{
    static const fg_test_case groups[] = {
        {"half", .run = test_group_half},
        {"ops", .run = test_group_ops},
        {"scaler", .run = test_group_scaler},
    };
    return fg_test_main(argc, argv, groups, sizeof groups / sizeof groups[0]);
}
