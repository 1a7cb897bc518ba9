/* Parity tests of a backend against the CPU backend: both plugins are loaded with dlopen,
 * exactly as the host loads them, and every op runs on both from the same inputs. CPU
 * "device" memory is host memory, so the reference is read in place; the tested backend's
 * outputs are poisoned (all bits set: NaN in every float type) before each op, downloaded
 * after. */
#ifndef FG_TEST_PARITY_H
#define FG_TEST_PARITY_H

#include <stddef.h>
#include <stdint.h>

#include "fulgur/backend.h"

/* One tensor on both backends. */
typedef struct pair {
    void *c; /* CPU backend memory (host addressable) */
    void *g; /* the tested backend's device memory */
    size_t bytes;
} pair;

typedef struct parity {
    const char *dut_name;              /* the backend under test: backend.NAME */
    int exact;                         /* every output bitwise (the CPU backend itself) */
    int partial;      /* it declares some op or dtype unsupported: FG_UNAVAILABLE skips */
    int skipped;      /* cases skipped so */
    int skip_outputs; /* the last BOTH was skipped: its compares are too */
    const fg_backend_vtable *ref, *dut; /* the CPU backend, the backend under test */
    void *rs, *ds; /* instance states */
    void *rq, *dq; /* queues on device 0 */
    int dut_minor; /* the ABI minor the backend under test was built against */
} parity;

extern parity P;
extern int checks, failures;

/* A failed check: prints and counts. */
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Both calls must succeed (the second is the tested backend's); prints and counts. A
 * partial backend's FG_UNAVAILABLE skips the case (and its compares) instead. */
int both_ok(const char *what, fg_status sc, const fg_error *ec, fg_status sg,
            const fg_error *eg);

/* Buffers (released together by release_all()). */
pair pnew(size_t bytes);
void pput(pair p, const void *host);   /* same bytes into both */
void ppoison(pair p);                  /* tested side all 0xFF bytes (NaN) */
void pmirror(pair p);                  /* CPU side's bytes copied to the tested side */
void release_all(void);
/* n random values in [lo, hi) of dtype (made on the CPU side, then mirrored). */
pair prandom(size_t n, uint32_t dtype, double lo, double hi);
pair pfill(size_t n, uint32_t dtype, float value);
void rng_seed(uint64_t s);
double rng_uniform(double lo, double hi);

/* ||tested - cpu|| / ||cpu|| <= tol over n values of dtype (absolute when ||cpu|| is 0;
 * bitwise when P.exact);
 * a NaN on one side only, or any NaN in a place the CPU wrote a number, fails. */
int compare(const char *what, pair p, size_t n, uint32_t dtype, double tol);
/* Bytes equal. */
int compare_exact(const char *what, pair p, size_t bytes);
/* Downloads the tested side into host memory. */
void download(pair p, void *host);
double to_double(const void *base, uint32_t dtype, size_t i);
size_t dtype_size(uint32_t t);

/* Tolerance of a dtype's outputs: fp32 1e-5 relative, f16 5e-3, bf16 2e-2. */
double tol_of(uint32_t dtype);

/* Groups (parity_ops.c, parity_layers.c, parity_lm.c). */
void test_device(void);
void test_flat(void);
void test_cast(void);
void test_gemm(void);
void test_gemm_bias(void);
void test_gemm_epilogue(void); /* parity_epilogue.c */
void test_bias_act(void);
void test_conv(void);
void test_pool(void);
void test_nhwc(void); /* parity_nhwc.c */
void test_batchnorm(void);
void test_batchnorm_sync(void); /* parity_sync_bn.c */
void test_dropout(void);
void test_dropout_dev(void); /* ABI 1.10 */
void test_xent(void);
void test_classifier(void);
void test_pointwise_loss(void);
void test_optim(void);
void test_optim_fused(void); /* parity_optim.c */
void test_layernorm(void);
void test_embedding(void);
void test_attention(void);
void test_checks(void); /* parity_checks.c */
void test_attention_fused(void);
void test_attention_gemm(void);
void test_vec(void);         /* parity_vec.c */
void test_ln_residual(void); /* parity_ln_residual.c */
void test_rope(void);        /* parity_llama.c */
void test_swiglu(void);
void test_gqa(void);
void test_gqa_refused_cudnn(void);
void test_gqa_refused_gemm(void);
void test_fp8(void); /* parity_fp8.c */
void test_loss_scale(void); /* parity_loss_scale.c */
void test_smoothing(void);  /* parity_smoothing.c: classifier_smoothed (ABI 1.11) */
/* Attention forward, backward and decode on both backends (parity_lm.c), kv_heads key/value
 * heads (heads: multi-head attention). */
void attention_case_kv(uint32_t dt, int batch, int seq, int heads, int kv_heads, int head_dim,
                       int causal, float dropout);

#endif
