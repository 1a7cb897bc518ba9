/* Runs one group of CPU backend tests, named on the command line (one ctest each). */
#include "harness.h"

int main(int argc, char **argv)
{
    static const fg_test_case groups[] = {
        {"linear", .run = test_group_linear},
        {"conv_pool", .run = test_group_conv_pool},
        {"norm_act", .run = test_group_norm_act},
        {"gradients", .run = test_group_gradients},
        {"device", .run = test_group_device},
        {"determinism", .run = test_group_determinism},
        {"transformer", .run = test_group_transformer},
        {"conv_algo", .run = test_group_conv_algo},
        {"gemm_bias", .run = test_group_gemm_bias},
        {"gemm_choice", .run = test_group_gemm_choice},
        {"gemm_generic", .run = test_group_gemm_generic},
        {"tuning", .run = test_group_tuning},
    };
    return fg_test_main(argc, argv, groups, sizeof groups / sizeof groups[0]);
}
