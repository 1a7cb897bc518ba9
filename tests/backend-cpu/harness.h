/* Test harness for the CPU backend: loads fulgur-backend-cpu.so with dlopen exactly as the
 * host does, hands it the common fake host (tests/common) with the options a test asks
 * for, and offers random inputs and double-precision comparisons. */
#ifndef FG_TEST_CPU_HARNESS_H
#define FG_TEST_CPU_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "fake_host.h"
#include "fulgur/backend.h"

/* One plugin instance with one queue on device 0. */
typedef struct test_backend {
    const fg_plugin *plugin;
    const fg_backend_vtable *vt;
    void *state;
    void *queue;
    fg_fake_host host; /* devices, threads, memory_limit_mb as the test asked */
} test_backend;

/* The checks are tests/common/check.h's. These names of the counter and of the error
 * struct every call in a test passes (CHECK_OK(call) prints it) are kept for the test
 * files. */
#define test_failures fg_test_failures
#define test_err fg_test_err

/* Loads the plugin (once) and creates an instance; exits the test on failure. */
void test_backend_open(test_backend *tb, int64_t devices, int64_t threads,
                       int64_t memory_limit_mb);
void test_backend_close(test_backend *tb);
/* Creates an instance and returns init's status (for option errors). */
fg_status test_backend_try_open(test_backend *tb, int64_t devices, int64_t threads,
                                int64_t memory_limit_mb);
/* As the two above, with more "key = value" lines of options (NULL: none). */
void test_backend_open_with(test_backend *tb, int64_t devices, int64_t threads,
                            int64_t memory_limit_mb, const char *more);
fg_status test_backend_try_open_with(test_backend *tb, int64_t devices, int64_t threads,
                                     int64_t memory_limit_mb, const char *more);

/* xorshift random numbers, seeded per test for reproducible inputs. */
void test_seed(uint64_t seed);
double test_uniform(double lo, double hi);
void test_fill_uniform(float *x, size_t n, double lo, double hi);

/* Aborts the test when malloc fails (a test, not library code). */
void *test_alloc(size_t bytes);

/* |got - want| <= tol * max(1, |want|) for every element; reports the first few misses.
 * Returns the number of misses. */
int test_compare(const char *what, const float *got, const double *want, size_t n,
                 double tol);
/* |got - want| <= tol * scale[i], where scale[i] is the sum of the absolute values of the
 * terms that made want[i] (at least 1e-3): the float error of a long sum grows with its
 * terms, not with a result that cancelled to near zero. */
int test_compare_terms(const char *what, const float *got, const double *want,
                       const double *scale, size_t n, double tol);
int test_compare_scalar(const char *what, double got, double want, double tol);

/* The test groups, one per file. */
void test_group_linear(void);     /* test_linear.c: gemm, bias, elementwise, optimizers */
void test_group_conv_pool(void);  /* test_conv_pool.c */
void test_group_norm_act(void);   /* test_norm_act.c: batchnorm, activations, dropout, xent */
void test_group_gradients(void);  /* test_gradients.c: finite differences */
void test_group_device(void);     /* test_device.c: devices, memory, copies, options */
void test_group_determinism(void); /* test_determinism.c: threads=1 vs threads=2 */
void test_group_transformer(void); /* test_transformer.c: norms, embedding, attention */
void test_group_conv_algo(void);   /* test_conv_algo.c: conv_algorithm, oneDNN vs im2col */
void test_group_gemm_bias(void);   /* test_gemm_bias.c: gemm_bias, bf16 native vs emulated */
void test_group_gemm_choice(void); /* test_gemm_choice.c: [backend] gemm, oneDNN vs OpenBLAS */
void test_group_gemm_generic(void); /* test_gemm_choice.c: under OPENBLAS_CORETYPE=Prescott */
void test_group_tuning(void);       /* test_tuning.c: [backend] tuning, its cache */

#endif
