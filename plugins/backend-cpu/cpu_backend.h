/* The CPU backend plugin's instance state and the vtable functions, split by concern:
 * cpu_plugin.c (descriptor, options, init/deinit, the vtable), cpu_device.c (devices,
 * memory, queues, copies), cpu_ops.c, cpu_conv.c and cpu_ops_lm.c (the ops: f32 views of
 * their operands, then the kernels of kernels/cpu), cpu_bf16.c (bf16 gemms natively through
 * oneDNN where the CPU has avx512_bf16). */
#ifndef FG_CPU_BACKEND_H
#define FG_CPU_BACKEND_H

#include <stdatomic.h>

#include "fulgur/backend.h"
#include "cpu_kernels.h"

#define FG_CPU_MAX_DEVICES 64

/* [backend] conv_algorithm: how conv2d runs (cpu_conv.c) */
enum { FG_CPU_CONV_AUTO = 0, FG_CPU_CONV_IM2COL = 1, FG_CPU_CONV_ONEDNN = 2 };
typedef struct fg_cpu_conv_cache fg_cpu_conv_cache;

/* [backend] gemm: which library runs the f32 gemms (cpu_gemm_choice.c) */
enum { FG_CPU_GEMM_AUTO = 0, FG_CPU_GEMM_OPENBLAS = 1, FG_CPU_GEMM_ONEDNN = 2,
       FG_CPU_GEMM_DEFAULT = 3 /* resolved at load: ONEDNN, OPENBLAS without it (cpu_machine.c) */ };
typedef struct fg_cpu_gemm_choices fg_cpu_gemm_choices;

typedef struct fg_cpu_backend {
    const fg_host *host;
    int devices;               /* virtual devices: separate allocations, memcpy between */
    int threads;               /* pool size (OpenBLAS runs single-threaded inside it) */
    int64_t memory_limit_mb;   /* per device; 0: unlimited */
    uint64_t limit_bytes;      /* memory_limit_mb in bytes; 0: unlimited */
    uint64_t physical_memory;  /* bytes, read at init */
    char cpu_model[64];        /* from /proc/cpuinfo, read at init */
    fg_cpu_pool *pool;
    int conv_algorithm;             /* FG_CPU_CONV_*: measured per shape, or fixed */
    fg_cpu_conv_cache *conv_cache;  /* the choice and the oneDNN state per conv shape */
    _Atomic uint64_t in_use[FG_CPU_MAX_DEVICES]; /* bytes allocated per device */
    int bf16_native;           /* bf16 gemms through oneDNN (cpu_bf16.c) */
    const char *bf16_why;      /* why not, when not */
    atomic_int bf16_noted;     /* "bf16 emulated" was said */
    int gemm_mode;             /* FG_CPU_GEMM_*: [backend] gemm (cpu_gemm_choice.c) */
    int gemm_defaulted;        /* the key unset: gemm_mode is the build's default */
    fg_cpu_gemm_choices *gemm_choices; /* the choice per gemm shape */
    int isa_level;             /* FG_CPU_ISA_* of this CPU (cpu_machine.c) */
    const char *openblas_core; /* openblas_get_corename() */
    int openblas_generic;      /* OpenBLAS runs kernels far below the CPU's level */
    atomic_int described;      /* the machine line (features, FMA peak) was logged */
    size_t stream_grain;       /* the pool's (cpu_tuning.c) */
    char tuning_source[160];   /* "measured", "cached", "built-in: why", "measured under load..." */
} fg_cpu_backend;

/* cpu_tuning.c: [backend] tuning = auto (the stream grain measured at start-up, cached per
 * CPU model and thread count) | off (built-in); sets the pool's value. */
fg_status fg_cpu_tuning_setup(fg_cpu_backend *be, const char *mode, fg_error *err);

/* cpu_tuning_measure.c: one trial of the stream-grain measurement (index 0, 1, ...): the
 * grain, and the calling thread's CPU time over wall time while it timed (1: it had its core
 * throughout). 0 when it cannot run (one thread, no memory). FULGUR_TEST_TUNING plants the
 * results (tests only). */
typedef struct fg_cpu_tuning_trial {
    size_t grain;
    double cpu_share;
} fg_cpu_tuning_trial;
int fg_cpu_tuning_run_trial(fg_cpu_pool *pool, int index, fg_cpu_tuning_trial *out);

/* A queue only names its device: ops run synchronously on the calling thread. */
typedef struct fg_cpu_queue {
    int device;
    /* f32 copies of half operands for the ops (cpu_ops.c): grown to the largest
     * op's need on its first call, then reused; host memory of the emulation, outside the
     * device's accounting. */
    float *scratch;
    size_t scratch_bytes;
    /* the scaled gradients of the fused optimizer ops (cpu_optim_fused.c), grown likewise */
    float *fused;
    size_t fused_bytes;
    /* bf16 gemm primitives (cpu_bf16.c), made on the queue's first bf16 gemm */
    struct fg_cpu_dnnl_gemm *dnnl;
    int dnnl_failed; /* oneDNN could not make an engine: emulate */
    /* the caches of slots 1.. of the kernels' own gemms (fg_cpu_queue_dnnl_slots) */
    struct fg_cpu_dnnl_gemm **dnnl_slots;
    int dnnl_slot_count;
} fg_cpu_queue;

/* cpu_bf16.c: a gemm in bf16 on oneDNN where the CPU has avx512_bf16 */
typedef struct fg_cpu_bf16_args {
    const char *op; /* "gemm", "gemm_bias", for messages */
    uint32_t a_dtype, b_dtype, c_dtype;
    int trans_a, trans_b, m, n, k;
    float alpha, beta;
    const void *a, *b, *bias; /* bias: b_dtype, NULL: none */
    void *c;
    int lda, ldb, ldc;
} fg_cpu_bf16_args;
/* Reads the CPU and the option bf16 (auto | native | emulated) into be. */
fg_status fg_cpu_bf16_setup(fg_cpu_backend *be, const char *mode, fg_error *err);
/* Runs g natively when it can (returns 1, *st the result); 0: the caller emulates (the
 * first bf16 gemm emulated is logged once). Arguments are already checked. */
int fg_cpu_bf16_gemm(fg_cpu_backend *be, fg_cpu_queue *q, const fg_cpu_bf16_args *g,
                     fg_status *st, fg_error *err);
void fg_cpu_bf16_queue_fini(fg_cpu_queue *q);

/* cpu_gemm_choice.c: the f32 gemms (and the halves emulated in f32) by OpenBLAS or oneDNN's
 * matmul, per shape: timed at a shape's first call (auto) or fixed by [backend] gemm. */
typedef struct fg_cpu_gemm_call {
    const char *op; /* "gemm", "gemm_bias": the log's name */
    uint32_t dtype; /* the operands' dtype before staging to f32 */
    int trans_a, trans_b, m, n, k;
    float alpha, beta;
    const float *a, *b, *bias; /* bias: gemm_bias's (NULL: none); then alpha 1, beta 0 */
    float *c;
    int lda, ldb, ldc;
} fg_cpu_gemm_call;
/* Reads gemm = auto | openblas | onednn into be; onednn without oneDNN is an error. */
fg_status fg_cpu_gemm_setup(fg_cpu_backend *be, const char *mode, fg_error *err);
void fg_cpu_gemm_teardown(fg_cpu_backend *be);
const char *fg_cpu_gemm_mode_name(int mode); /* "auto", "openblas", "onednn" */
fg_status fg_cpu_gemm_run(fg_cpu_backend *be, fg_cpu_queue *q, const fg_cpu_gemm_call *g,
                          fg_error *err);
/* The same from slot `slot` of a kernel whose threads each run whole gemms (attention):
 * slot 0 is the calling thread's (the queue's oneDNN cache), slot s > 0 its own cache
 * (fg_cpu_queue_dnnl_slot), so that concurrent slots never share oneDNN's state. */
fg_status fg_cpu_gemm_run_slot(fg_cpu_backend *be, fg_cpu_queue *q, int slot,
                               const fg_cpu_gemm_call *g, fg_error *err);
/* The queue's oneDNN matmul cache, made on first use (NULL: no oneDNN, or it failed). */
struct fg_cpu_dnnl_gemm *fg_cpu_queue_dnnl(fg_cpu_queue *q);
/* Makes the caches of slots 1 .. slots - 1 (on the calling thread, before the kernel runs);
 * -1 when one cannot be made (those slots then run OpenBLAS). */
int fg_cpu_queue_dnnl_slots(fg_cpu_queue *q, int slots);
/* Slot s's cache (s >= 1), NULL when not made. */
struct fg_cpu_dnnl_gemm *fg_cpu_queue_dnnl_slot(fg_cpu_queue *q, int slot);

/* cpu_gemm_route.c: the kernels' own products (attention, im2col) through the same choice
 * (fg_cpu_gemm_hook of kernels/cpu). A oneDNN failure inside a kernel is kept and reported
 * by fg_cpu_gemm_route_end; C of that product is then undefined, so the op fails. */
typedef struct fg_cpu_gemm_route {
    fg_cpu_gemm_hook hook;
    fg_cpu_backend *be;
    fg_cpu_queue *q;
    const char *op;   /* "attention_forward", ...: the log's name */
    uint32_t dtype;   /* the op's operands' dtype (the log's; bf16: run_bf16 may run) */
    _Atomic int failed;
    fg_error err;     /* the first failure's message */
} fg_cpu_gemm_route;
/* The hook for a kernel of `slots` concurrent threads, or NULL when the gemms are OpenBLAS's
 * whatever the shape (gemm = openblas, or the default in a build without oneDNN) and no
 * bf16 product runs natively (dtype f32, or no avx512_bf16): the kernel then calls OpenBLAS
 * directly. */
const fg_cpu_gemm_hook *fg_cpu_gemm_route_begin(fg_cpu_gemm_route *r, fg_cpu_backend *be,
                                                fg_cpu_queue *q, const char *op,
                                                uint32_t dtype, int slots);
/* The op's status after the kernel: st, or the first oneDNN failure. */
fg_status fg_cpu_gemm_route_end(fg_cpu_gemm_route *r, fg_status st, fg_error *err);

/* cpu_machine.c: what OpenBLAS runs on this CPU, and the description `fulgur devices`
 * shows (vector features, the measured FMA peak, OpenBLAS's core) */
void fg_cpu_machine_probe(fg_cpu_backend *be);
/* The notice, once at load, when OpenBLAS runs kernels far below the CPU's (after
 * fg_cpu_gemm_setup: it says what the gemm mode does about it). */
void fg_cpu_machine_notice(fg_cpu_backend *be);
/* Measures the FMA peak and logs the machine line, once per instance. */
void fg_cpu_machine_describe(fg_cpu_backend *be);

/* cpu_device.c */
fg_status fg_cpu_device_count(void *state, int *count, fg_error *err);
int fg_cpu_host_synchronous(void *state, int device);
fg_status fg_cpu_device_info(void *state, int device, fg_device_info *info, fg_error *err);
fg_status fg_cpu_alloc(void *state, int device, size_t bytes, void **ptr, fg_error *err);
void fg_cpu_free(void *state, int device, void *ptr);
fg_status fg_cpu_host_alloc(void *state, size_t bytes, void **ptr, fg_error *err);
void fg_cpu_host_free(void *state, void *ptr);
/* queue_create's and event_create's checks (out present, the device exists) and a zeroed
 * handle of `size` bytes in *out; messages name op and the argument `name`. */
fg_status fg_cpu_device_handle(const fg_cpu_backend *be, const char *op, const char *name,
                               int device, size_t size, void **out, fg_error *err);
fg_status fg_cpu_queue_create(void *state, int device, void **queue, fg_error *err);
void fg_cpu_queue_destroy(void *state, void *queue);
fg_status fg_cpu_queue_sync(void *state, void *queue, fg_error *err);
fg_status fg_cpu_copy(void *state, void *queue, void *dst, int dst_device, const void *src,
                      int src_device, size_t bytes, fg_error *err);
/* Reads the CPU model and the physical memory size into the state. */
void fg_cpu_probe_machine(fg_cpu_backend *be);

/* The ops, one function each for every dtype, PREFIX fg_cpu_op_ (fulgur/backend.h's op
 * list): cpu_ops.c (dense and flat ops), cpu_conv.c (conv2d), cpu_ops_lm.c (the transformer
 * ops). cpu_plugin.c points the vtable at their checked trampolines
 * (fulgur/backend_checks.h), so each runs only on arguments that passed the op's checks. */
FG_BACKEND_OP_PROTOTYPES(fg_cpu_op_)
#define FG_CPU_POOL(state) (((fg_cpu_backend *)(state))->pool)

/* cpu_ops.c */
int fg_cpu_supports(void *state, uint32_t op, const uint32_t *dtypes);
/* im2col + gemm in every dtype (half operands staged through f32); cpu_conv.c picks it or
 * oneDNN per shape */
size_t fg_cpu_im2col_conv2d_workspace(void *state, const fg_conv2d_desc *d);
fg_status fg_cpu_im2col_conv2d_forward(void *state, void *queue, uint32_t x_dtype,
                                       uint32_t param_dtype, const fg_conv2d_desc *d,
                                       const void *x, const void *w, const void *bias, void *y,
                                       void *workspace, fg_error *err);
fg_status fg_cpu_im2col_conv2d_backward(void *state, void *queue, uint32_t x_dtype,
                                        uint32_t param_dtype, uint32_t grad_dtype,
                                        const fg_conv2d_desc *d, const void *x, const void *w,
                                        const void *dy, void *dx, void *dw, void *dbias,
                                        int accumulate, void *workspace, fg_error *err);

/* cpu_conv.c: conv2d by the algorithm [backend] conv_algorithm picks, per shape and dtype:
 * im2col + gemm, or oneDNN (when built with it), chosen by timing both at the first call
 * of a shape (auto) or fixed. */
fg_status fg_cpu_conv_init(fg_cpu_backend *be, const char *algorithm, fg_error *err);
void fg_cpu_conv_deinit(fg_cpu_backend *be);
size_t fg_cpu_op_conv2d_workspace(void *state, const fg_conv2d_desc *d);

/* cpu_ops_lm.c */
size_t fg_cpu_op_attention_workspace(void *state, const fg_attention_desc *d);

/* The CPU kernels work on NCHW only: an NHWC descriptor (ABI 1.9) is refused, never read
 * as NCHW. */
static inline fg_status fg_cpu_nchw_only(const char *op, const fg_conv2d_desc *d, fg_error *err)
{
    if (!d || fg_conv2d_layout(d) == FG_LAYOUT_NCHW)
        return FG_OK;
    return fg_error_set(err, FG_UNAVAILABLE,
                        "cpu backend: %s: layout NHWC is not supported (the CPU kernels are "
                        "NCHW; channels-last is a CUDA backend layout)", op);
}

#endif
