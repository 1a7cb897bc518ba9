/* The groups of test_precision (one ctest each); checks and the loaded CPU backend come
 * from tests/backend-cpu/harness.h. */
#ifndef FG_PRECISION_TESTS_H
#define FG_PRECISION_TESTS_H

#include "harness.h"

void test_group_half(void);   /* test_half.c: conversions */
void test_group_ops(void);    /* test_ops_dtypes.c: the CPU backend's dtype ops */
void test_group_scaler(void); /* test_scaler.c: the fp16-mixed loss scaler */

#endif
