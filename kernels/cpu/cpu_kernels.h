/* CPU compute kernels: plain C over raw pointers, parallelised on a small persistent
 * thread pool. The backend plugin validates arguments at its border; these functions trust
 * them. Tensors are dense row-major, images NCHW, weights (K, C, R, S).
 *
 * Determinism: every kernel except gemm gives bitwise identical results for any number of
 * threads. Elementwise results do not depend on the partition; reductions are cut into
 * chunks whose size depends only on the problem size (fg_cpu_reduce_plan), each chunk is
 * summed in double in a fixed order, and the partials are combined in chunk order. */
#ifndef FG_CPU_KERNELS_H
#define FG_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Streaming loops compiled for AVX-512 and AVX2 as well as the baseline, the variant picked
 * once at load by the CPU (GCC/clang target_clones; a plain function elsewhere). Results
 * are bitwise those of the baseline: the loops are elementwise and -std=c11 contracts no
 * multiply-add into an FMA. Measured in tests/kernel-lab/sgd_lab.c (version 3).
 * Reductions that should vectorise are written as 16 explicit lanes (the softmaxes of
 * attention.c and softmax_xent.c, layernorm.c's row sums, attention's rowsum): the lanes fix
 * the summation order, so every ISA's clone gives the same sums (the kernel labs in
 * tests/kernel-lab check it against references and time each version). */
#if defined(__x86_64__) && defined(__has_attribute) && !defined(__SANITIZE_ADDRESS__)
#if __has_attribute(target_clones)
#define FG_CPU_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef FG_CPU_VECTOR_CLONES
#define FG_CPU_VECTOR_CLONES
#endif

/* ---- thread pool (threadpool.c) ------------------------------------------------------ */

typedef struct fg_cpu_pool fg_cpu_pool;

/* Work on items [begin, end) of a parallel_for. */
typedef void (*fg_cpu_range_fn)(void *ctx, size_t begin, size_t end);

/* The fixed thresholds below (and threadpool.c's spin) may be set by the compiler's -D:
 * tests/bench/bench_thresholds.sh builds the backend with other values and times them
 * against these on the CPU at hand. */

/* Least work per chunk, in elements, of a kernel with real arithmetic per element
 * (conv permutations, reductions, transcendental activations use fractions of it). */
#ifndef FG_CPU_GRAIN
#define FG_CPU_GRAIN 32768
#endif
/* Streaming ops (fill, scale, axpy, clamp, relu, bias add, SGD) stay on the calling thread
 * below 2 x this many elements. It was 262144 while OpenBLAS ran its own threads, whose
 * sched_yield spinning after every gemm made a woken pool worker share its core; with the
 * pool owning the cores, sgd_update over the MLP's 269k parameters fell from 56-71 us
 * inline to 34-57 us on 2 threads (fastest of 100 steps, bench_backend_cpu). At 32768 the
 * MLP's activations (128 x 256) ran inline while the worker spun idle; 16384 splits them:
 * the bench MLP's fit 117-122k -> 123k samples/s (medians of 8 alternating fits, twice;
 * 8192 no better). Every op it splits is elementwise: results do not depend on it.
 * The built-in value: the backend measures the pool's own at start-up ([backend] tuning,
 * plugins/backend-cpu/cpu_tuning.c), and the kernels read it with fg_cpu_stream_grain. */
#define FG_CPU_STREAM_GRAIN 16384

/* threads >= 1 counts the calling thread; threads - 1 workers are started.
 * Returns 0 or an errno value from pthread_create / malloc. */
int fg_cpu_pool_create(int threads, fg_cpu_pool **out);
/* Joins the workers and frees the pool; NULL is a no-op. */
void fg_cpu_pool_destroy(fg_cpu_pool *pool);
int fg_cpu_pool_threads(const fg_cpu_pool *pool);
/* The pool's stream grain (FG_CPU_STREAM_GRAIN until set; a NULL pool: that). */
size_t fg_cpu_stream_grain(const fg_cpu_pool *pool);
void fg_cpu_pool_set_stream_grain(fg_cpu_pool *pool, size_t grain);

/* Runs fn over [0, n): one contiguous piece per thread, the calling thread takes the
 * first. Piece boundaries are multiples of `align` (>= 1). Runs inline when n < 2 * grain,
 * when the pool has one thread, or when another host thread is using the pool (then the
 * result is the same, only slower). Returns when every piece is done. */
void fg_cpu_parallel_for(fg_cpu_pool *pool, size_t n, size_t grain, size_t align,
                         fg_cpu_range_fn fn, void *ctx);

/* ---- fixed reduction plans ------------------------------------------------------------ */

#define FG_CPU_MAX_CHUNKS 1024

/* Chunk size for reducing n items: at least min_chunk, and no more than FG_CPU_MAX_CHUNKS
 * chunks. Depends on n and min_chunk only, never on the thread count. */
static inline size_t fg_cpu_reduce_chunk(size_t n, size_t min_chunk)
{
    size_t chunk = (n + FG_CPU_MAX_CHUNKS - 1) / FG_CPU_MAX_CHUNKS;
    if (chunk < min_chunk)
        chunk = min_chunk;
    return chunk ? chunk : 1;
}

/* ---- gemm (gemm.c): OpenBLAS at one thread, blocks of C across the pool --------------- */

/* Below this many FLOPs (2mnk) a gemm runs on the calling thread: waking a worker costs
 * more than it saves. Blocks of C cut across the pool have boundaries at multiples of
 * FG_CPU_GEMM_ALIGN (OpenBLAS's AVX-512 sgemm register tile is 16 wide). gemm.c and the
 * bf16 gemm (gemm_dnnl.c) both cut by these. */
#ifndef FG_CPU_GEMM_SPLIT_FLOPS
#define FG_CPU_GEMM_SPLIT_FLOPS (1u << 21)
#endif
#define FG_CPU_GEMM_ALIGN 16

/* C = alpha op(A) op(B) + beta C, row-major. Large products are cut into blocks of rows or
 * columns of C run on the pool (k is never split); small ones run on the calling thread. */
void fg_cpu_gemm(fg_cpu_pool *pool, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c,
                 int ldc);
/* C = op(A) op(B) + bias(n) on every row (bias may be NULL), the roundings of gemm then
 * bias_add: gemm with beta 0, then the bias added in a pass over C's rows on the pool; or,
 * where k fits in one OpenBLAS k panel (fg_cpu_gemm_bias_panel_k), C = bias, then the product
 * added with beta 1 (one rounding either way, gemm.c). */
void fg_cpu_gemm_bias(fg_cpu_pool *pool, int trans_a, int trans_b, int m, int n, int k,
                      const float *a, int lda, const float *b, int ldb, const float *bias,
                      float *c, int ldc);
/* Sets OpenBLAS to one thread for the whole process: the pool owns the cores; and probes
 * the largest k OpenBLAS runs as one k panel, up to FG_CPU_GEMM_PROBE_MAX_K (fg_cpu_gemm_bias
 * prefills C with the bias up to it; 0 before the probe: the two-pass form only). */
void fg_cpu_gemm_init(void);
#define FG_CPU_GEMM_PROBE_MAX_K 2048
int fg_cpu_gemm_bias_panel_k(void);
/* The probe itself: the largest k <= max at which C = bias, C += A B^T has the bits of
 * A B^T + bias rounded twice (128 x 128 products); 0 if none or out of memory. */
int fg_cpu_gemm_probe_panel(int max);

/* A gemm the caller picks for a kernel's own products (the backend's per-shape choice of
 * library, plugins/backend-cpu/cpu_gemm_choice.c). slot: which of the kernel's concurrent
 * threads calls (0 .. the pool's threads - 1; two calls with one slot never overlap), so
 * that the library's per-thread state is the slot's. Arguments as fg_cpu_gemm's. */
typedef struct fg_cpu_gemm_hook {
    void (*run)(void *ctx, int slot, int trans_a, int trans_b, int m, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
    void *ctx;
    /* bf16 A and B, f32 C (a real bf16 product: avx512_bf16); returns 0 when it did not run
     * (the caller widens A and B and runs the f32 product); NULL: never runs */
    int (*run_bf16)(void *ctx, int slot, int trans_a, int trans_b, int m, int n, int k,
                    float alpha, const uint16_t *a, int lda, const uint16_t *b, int ldb,
                    float beta, float *c, int ldc);
} fg_cpu_gemm_hook;

/* hook's product when there is one (hook and hook->run not NULL), else fg_cpu_gemm's. */
void fg_cpu_gemm_via(const fg_cpu_gemm_hook *hook, int slot, fg_cpu_pool *pool, int trans_a,
                     int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc);
/* ---- small bf16 products (gemm_bf16_tile.c) ------------------------------------------ */

/* Words (pairs of bf16) the tile product packs each operand into, on the stack. */
#define FG_CPU_BF16_TILE_WORDS 8192
/* C(m, n) = alpha op(A) op(B) + beta C (beta 0: C not read) of bf16 A and B into f32 C, on
 * the calling thread, with AVX-512 BF16's dot products. Returns 0, nothing written, where
 * the CPU or the build lacks them or a packed operand would pass FG_CPU_BF16_TILE_WORDS
 * (the caller runs another product). */
int fg_cpu_gemm_bf16_tile(int trans_a, int trans_b, int m, int n, int k, float alpha,
                          const uint16_t *a, int lda, const uint16_t *b, int ldb, float beta,
                          float *c, int ldc);

/* OpenBLAS's core name (the kernels it runs: "Haswell", "SkylakeX", "Prescott", ...) and
 * its build configuration line (version, DYNAMIC_ARCH, ...). */
const char *fg_cpu_openblas_corename(void);
const char *fg_cpu_openblas_config(void);

/* ---- the CPU's vector features (cpu_features.c) ------------------------------------------ */

/* Vector levels, in order: a CPU's (fg_cpu_isa_level) or an OpenBLAS core's kernels'. */
#define FG_CPU_ISA_OTHER (-1) /* not x86-64, or an OpenBLAS core name not in the table */
#define FG_CPU_ISA_SSE 0
#define FG_CPU_ISA_AVX 1
#define FG_CPU_ISA_AVX2 2 /* with FMA */
#define FG_CPU_ISA_AVX512 3
int fg_cpu_isa_level(void);
const char *fg_cpu_isa_name(int level);
/* The features the kernels care about, space-separated ("sse4.2 avx fma avx2 ..."). */
void fg_cpu_isa_features(char *buf, size_t len);
int fg_cpu_openblas_core_level(const char *core);

/* ---- the FMA peak (fma_peak.c) ------------------------------------------------------------ */

/* GFLOP/s of register-only FMA loops on all the pool's threads, per vector width; 0 where the
 * CPU has no such width (both 0: not x86-64 or no FMA, it cannot be measured). */
typedef struct fg_cpu_fma_peak_result {
    double gflops_256, gflops_512;
} fg_cpu_fma_peak_result;
void fg_cpu_fma_peak(fg_cpu_pool *pool, fg_cpu_fma_peak_result *out);

/* ---- bias (bias.c) ------------------------------------------------------------------- */

/* y(rows, cols, spatial) += bias(cols) */
void fg_cpu_bias_add(fg_cpu_pool *pool, float *y, const float *bias, int rows, int cols,
                     int spatial);
/* dbias(cols) (+)= sum over rows and spatial of dy(rows, cols, spatial) */
void fg_cpu_bias_grad(fg_cpu_pool *pool, float *dbias, const float *dy, int rows, int cols,
                      int spatial, int accumulate);
/* The same with dy (rows, cols) in bf16 storage: the sums of its widened values. */
void fg_cpu_bias_grad_bf16(fg_cpu_pool *pool, float *dbias, const uint16_t *dy, int rows,
                           int cols, int accumulate);

/* ---- activations (activation.c) -------------------------------------------------------- */

/* act: fg_activation values (0 none, 1 relu, 2 gelu-tanh, 3 tanh, 4 sigmoid).
 * y may alias x; dx may alias dy. */
void fg_cpu_activation_forward(fg_cpu_pool *pool, int act, const float *x, float *y,
                               size_t n);
void fg_cpu_activation_backward(fg_cpu_pool *pool, int act, const float *x, const float *y,
                                const float *dy, float *dx, size_t n);
/* An f32 fc layer's bias and GELU in one pass (gelu_fused.c), packed (rows, cols): aux += bias,
 * y = gelu(aux), the bits of bias_add then activation_forward. */
void fg_cpu_bias_gelu_forward(fg_cpu_pool *pool, int rows, int cols, const float *bias,
                              float *aux, float *y);
/* relu forward and backward on f16 or bf16 storage, no conversion: inf_bits is the type's
 * +inf (f16 0x7c00, bf16 0x7f80); the same values as the f32 relu on the widened input. */
void fg_cpu_half_relu_forward(fg_cpu_pool *pool, uint16_t inf_bits, const uint16_t *x,
                              uint16_t *y, size_t n);
void fg_cpu_half_relu_backward(fg_cpu_pool *pool, uint16_t inf_bits, const uint16_t *x,
                               const uint16_t *dy, uint16_t *dx, size_t n);

/* ---- conv2d (conv2d.c): im2col + sgemm over groups of images ----------------------------- */

typedef struct fg_cpu_conv_shape {
    int n, c, h, w, k, r, s, pad_h, pad_w, stride_h, stride_w, out_h, out_w;
    const struct fg_cpu_gemm_hook *gemm; /* who runs the products (slot 0); NULL: fg_cpu_gemm */
} fg_cpu_conv_shape;

/* Bytes of scratch conv2d forward and backward need: for a group of G images (G chosen
 * from the shape so the column matrix is about 2 MiB), the column matrix (C*R*S, G*OH*OW)
 * and the output in (K, G*OH*OW) order. */
size_t fg_cpu_conv2d_workspace(const fg_cpu_conv_shape *d);
/* x (N,C,H,W), w (K,C,R,S), bias (K) or NULL -> y (N,K,OH,OW) */
void fg_cpu_conv2d_forward(fg_cpu_pool *pool, const fg_cpu_conv_shape *d, const float *x,
                           const float *w, const float *bias, float *y, void *workspace);
/* dx (N,C,H,W) overwritten, may be NULL; dw (K,C,R,S) and dbias (K, may be NULL)
 * overwritten or, when accumulate != 0, added to. */
void fg_cpu_conv2d_backward(fg_cpu_pool *pool, const fg_cpu_conv_shape *d, const float *x,
                            const float *w, const float *dy, float *dx, float *dw,
                            float *dbias, int accumulate, void *workspace);

/* ---- pooling (pool2d.c) --------------------------------------------------------------- */

/* Max: argmax (N,C,OH,OW) keeps the index h*W+w of the winner inside its input plane
 * (-1 when the window lies entirely in padding). Avg: divides by R*S, padding counted
 * (PyTorch's count_include_pad=True); argmax unused. The shape's k is ignored. */
void fg_cpu_pool2d_forward(fg_cpu_pool *pool, int is_max, const fg_cpu_conv_shape *d,
                           const float *x, float *y, int32_t *argmax);
/* dx (N,C,H,W) is overwritten. */
void fg_cpu_pool2d_backward(fg_cpu_pool *pool, int is_max, const fg_cpu_conv_shape *d,
                            const float *dy, const int32_t *argmax, float *dx);

/* ---- batch norm (batchnorm.c) ---------------------------------------------------------- */

/* Over x (n, c, spatial). gamma/beta may be NULL (1 and 0). Training: batch statistics,
 * biased variance for normalising, saved_mean/saved_invstd written, running_mean/var (may
 * be NULL) updated as running = (1-momentum)*running + momentum*batch with the unbiased
 * variance. Eval: running statistics. */
void fg_cpu_batchnorm_forward(fg_cpu_pool *pool, int training, int n, int c, int spatial,
                              const float *x, const float *gamma, const float *beta,
                              float *running_mean, float *running_var, float momentum,
                              float eps, float *saved_mean, float *saved_invstd, float *y);
/* Training-mode backward. dx overwritten (may be NULL); dgamma, dbeta (may be NULL)
 * overwritten or accumulated into. */
void fg_cpu_batchnorm_backward(fg_cpu_pool *pool, int n, int c, int spatial, const float *x,
                               const float *gamma, const float *saved_mean,
                               const float *saved_invstd, const float *dy, float *dx,
                               float *dgamma, float *dbeta, int accumulate);

/* ---- batch norm across replicas (batchnorm_sync.c; [model] sync_batchnorm) -------------- */

/* stats (2c + 1): per-channel sums of x, of x^2, then n * spatial (double). */
void fg_cpu_batchnorm_stats(fg_cpu_pool *pool, int n, int c, int spatial, const float *x,
                            double *stats);
/* Training forward from summed stats (batchnorm_stats' layout): saved_mean/_invstd written,
 * running stats (may be NULL) updated, y as fg_cpu_batchnorm_forward computes it. */
void fg_cpu_batchnorm_apply(fg_cpu_pool *pool, int n, int c, int spatial, const float *x,
                            const double *stats, const float *gamma, const float *beta,
                            float *running_mean, float *running_var, float momentum, float eps,
                            float *saved_mean, float *saved_invstd, float *y);
/* sums (2c + 1): per-channel sum of dy, of dy * xhat, then n * spatial; this replica's
 * dgamma, dbeta (may be NULL) from them, overwritten or accumulated into. */
void fg_cpu_batchnorm_backward_reduce(fg_cpu_pool *pool, int n, int c, int spatial,
                                      const float *x, const float *saved_mean,
                                      const float *saved_invstd, const float *dy, double *sums,
                                      float *dgamma, float *dbeta, int accumulate);
/* dx from sums summed over the replicas (batchnorm_backward_reduce's layout). */
void fg_cpu_batchnorm_backward_apply(fg_cpu_pool *pool, int n, int c, int spatial,
                                     const float *x, const float *gamma,
                                     const float *saved_mean, const float *saved_invstd,
                                     const float *dy, const double *sums, float *dx);

/* ---- dropout (dropout.c) -------------------------------------------------------------- */

/* Element i is kept when the counter-based draw of (seed, offset + i) is >= p. */
int fg_cpu_dropout_keep(uint64_t seed, uint64_t index, float p);
void fg_cpu_dropout_forward(fg_cpu_pool *pool, float p, uint64_t seed, uint64_t offset,
                            const float *x, float *y, uint8_t *mask, size_t n);
void fg_cpu_dropout_backward(fg_cpu_pool *pool, float p, const uint8_t *mask,
                             const float *dy, float *dx, size_t n);

/* ---- softmax cross-entropy (softmax_xent.c) --------------------------------------------- */

/* A label the loss skips (the SDK's FG_IGNORED_LABEL). */
#define FG_CPU_IGNORED_LABEL (-1)
/* The first row whose label lies outside [0, classes) (ignorable: FG_CPU_IGNORED_LABEL
 * allowed), or -1. */
int64_t fg_cpu_find_bad_label(const int32_t *labels, int rows, int classes, int ignorable);
/* Labels must have been checked. probs may alias logits; loss_sum/correct may be NULL. */
/* The fused classifier: the forward's loss and hits, and with dlogits (may alias logits)
 * its gradient (softmax - onehot) * scale, in one pass over rows of stride ld (columns
 * [classes, ld) are padding: dlogits 0 there). Labels must have been checked. */
void fg_cpu_classifier(fg_cpu_pool *pool, const float *logits, int ld, const int32_t *labels,
                       int rows, int classes, float *loss_sum, float *correct, float scale,
                       float *dlogits);
void fg_cpu_softmax_xent_forward(fg_cpu_pool *pool, const float *logits,
                                 const int32_t *labels, int rows, int classes, float *probs,
                                 float *loss_sum, float *correct);
void fg_cpu_softmax_xent_backward(fg_cpu_pool *pool, const float *probs,
                                  const int32_t *labels, int rows, int classes, float scale,
                                  float *dlogits);

/* ---- pointwise losses (pointwise_loss.c) ------------------------------------------------ */

/* The values of fulgur/backend.h's fg_pointwise_loss_kind. */
enum { FG_CPU_LOSS_MSE = 1, FG_CPU_LOSS_BCE_LOGITS = 2 };
/* n values x against targets t: loss_sum += scale * sum(l), metric_sum += scale *
 * sum(metric) (either may be NULL); dx (NULL: none; may alias x) = grad_scale * dl/dx. */
void fg_cpu_pointwise_loss(fg_cpu_pool *pool, int kind, const float *x, const float *t,
                           size_t n, float scale, float *loss_sum, float *metric_sum,
                           float grad_scale, float *dx);

/* ---- elementwise helpers (elementwise.c) -------------------------------------------------- */

void fg_cpu_fill(fg_cpu_pool *pool, float *x, float value, size_t n);
void fg_cpu_scale(fg_cpu_pool *pool, float *x, float alpha, size_t n);
void fg_cpu_axpy(fg_cpu_pool *pool, float alpha, const float *x, float *y, size_t n);
/* x = min(max(x, lo), hi); NaN is kept. */
void fg_cpu_clamp(fg_cpu_pool *pool, float *x, float lo, float hi, size_t n);
/* Sum of squares accumulated in double. */
double fg_cpu_sum_squares(fg_cpu_pool *pool, const float *x, size_t n);

/* ---- optimizers (optim.c) ------------------------------------------------------------- */

/* bf16_copy (NULL: none): the updated parameters also rounded into it (fg_cpu_bf16_round's
 * bits), tile by tile while they are in L1, instead of a cast over them afterwards. */
typedef struct fg_cpu_sgd {
    float lr, momentum, dampening, weight_decay;
    int nesterov, first_step;
    uint16_t *bf16_copy;
} fg_cpu_sgd;

typedef struct fg_cpu_adamw {
    float lr, beta1, beta2, eps, weight_decay;
    int64_t step;
    uint16_t *bf16_copy;
} fg_cpu_adamw;

/* PyTorch SGD; momentum_buf unused (may be NULL) when momentum == 0. */
void fg_cpu_sgd_update(fg_cpu_pool *pool, const fg_cpu_sgd *a, float *param,
                       const float *grad, float *momentum_buf, size_t n);
/* PyTorch AdamW (decoupled weight decay, bias correction with step >= 1). */
void fg_cpu_adamw_update(fg_cpu_pool *pool, const fg_cpu_adamw *a, float *param,
                         const float *grad, float *m, float *v, size_t n);

/* ---- layer and RMS normalisation (layernorm.c) ----------------------------------------- */

/* Over the last dimension of x (rows, cols). rms: y = x * rstd * gamma with rstd =
 * 1/sqrt(mean(x^2) + eps), beta and mean unused (may be NULL). Otherwise PyTorch's
 * LayerNorm (biased variance); gamma/beta may be NULL (1 and 0). mean, rstd: (rows) saved
 * for backward. */
void fg_cpu_layernorm_forward(fg_cpu_pool *pool, int rms, int rows, int cols, const float *x,
                              const float *gamma, const float *beta, float eps, float *mean,
                              float *rstd, float *y);
/* dx overwritten (may be NULL); dgamma, dbeta (may be NULL) overwritten or accumulated. */
void fg_cpu_layernorm_backward(fg_cpu_pool *pool, int rms, int rows, int cols, const float *x,
                               const float *gamma, const float *mean, const float *rstd,
                               const float *dy, float *dx, float *dgamma, float *dbeta,
                               int accumulate);

/* ---- embedding (embedding.c) ------------------------------------------------------------ */

/* out(n, dim) = table[ids] (accumulate: +=). ids must lie in the table (checked by the
 * caller: fg_cpu_find_bad_label). */
void fg_cpu_embedding_forward(fg_cpu_pool *pool, const int32_t *ids, int n, int dim,
                              const float *table, float *out, int accumulate);
/* dtable(rows, dim) (+)= the rows of dout scattered by ids. */
void fg_cpu_embedding_backward(fg_cpu_pool *pool, const int32_t *ids, int n, int dim,
                               int rows, const float *dout, float *dtable, int accumulate);

/* ---- bf16 storage, f32 math ([precision] bf16-mixed's activations) -----------------------
 * The memory-bound ops of a transformer on bf16 tensors without whole-tensor f32 copies:
 * blocks of FG_CPU_BF16_BLOCK elements (or a row of at most FG_CPU_BF16_MAX_COLS) are widened
 * onto the stack, the f32 kernel's own code runs on them and the results are rounded back
 * (half.h's fg_cpu_bf16_round: AVX-512 BF16 where the CPU has it). The values are the f32
 * kernels' on the widened operands, rounded to nearest even: the same bits as widening whole
 * tensors, running the f32 kernel and rounding (the backend's emulation of half dtypes). */
#define FG_CPU_BF16_BLOCK 256
#define FG_CPU_BF16_MAX_COLS 4096
void fg_cpu_axpy_bf16(fg_cpu_pool *pool, float alpha, const uint16_t *x, uint16_t *y,
                      size_t n);
void fg_cpu_activation_forward_bf16(fg_cpu_pool *pool, int act, const uint16_t *x,
                                    uint16_t *y, size_t n);
void fg_cpu_activation_backward_bf16(fg_cpu_pool *pool, int act, const uint16_t *x,
                                     const uint16_t *y, const uint16_t *dy, uint16_t *dx,
                                     size_t n);
/* cols <= FG_CPU_BF16_MAX_COLS; gamma, beta f32 (NULL: 1 and 0); mean, rstd as the f32
 * kernels' */
void fg_cpu_layernorm_forward_bf16(fg_cpu_pool *pool, int rms, int rows, int cols,
                                   const uint16_t *x, const float *gamma, const float *beta,
                                   float eps, float *mean, float *rstd, uint16_t *y);
/* dx may be NULL; dgamma, dbeta f32 (may be NULL), overwritten or accumulated */
void fg_cpu_layernorm_backward_bf16(fg_cpu_pool *pool, int rms, int rows, int cols,
                                    const uint16_t *x, const float *gamma, const float *mean,
                                    const float *rstd, const uint16_t *dy, uint16_t *dx,
                                    float *dgamma, float *dbeta, int accumulate);
void fg_cpu_embedding_forward_bf16(fg_cpu_pool *pool, const int32_t *ids, int n, int dim,
                                   const uint16_t *table, uint16_t *out, int accumulate);
/* dtable in f32 ([precision] bf16-mixed's default grad_dtype) */
void fg_cpu_embedding_backward_bf16(fg_cpu_pool *pool, const int32_t *ids, int n, int dim,
                                    int rows, const uint16_t *dout, float *dtable,
                                    int accumulate);

/* ---- rotary embedding (rope.c) and SwiGLU (swiglu.c) ------------------------------------ */

/* In place over x (rows, ld): `heads` heads of head_dim from column 0, row r at position
 * pos0 + r % seq, rotated half-split (Hugging Face Llama) by p * theta^(-2i/head_dim);
 * backward != 0: by the opposite angle. */
void fg_cpu_rope(fg_cpu_pool *pool, int backward, int rows, int seq, int pos0, int heads,
                 int head_dim, int ld, float theta, float *x);
/* The same with pair i turned by p * inv_freq[i] (head_dim/2 values: rope scaling). */
void fg_cpu_rope_freq(fg_cpu_pool *pool, int backward, int rows, int seq, int pos0, int heads,
                      int head_dim, int ld, const double *inv_freq, float *x);
/* y = silu(gate) * up */
void fg_cpu_swiglu_forward(fg_cpu_pool *pool, const float *gate, const float *up, float *y,
                           size_t n);
/* dgate = dy * up * silu'(gate), dup = dy * silu(gate); dgate may alias dy. */
void fg_cpu_swiglu_backward(fg_cpu_pool *pool, const float *gate, const float *up,
                            const float *dy, float *dgate, float *dup, size_t n);

/* ---- attention (attention.c) ------------------------------------------------------------- */

#ifndef FG_CPU_ATTN_BLOCK
#define FG_CPU_ATTN_BLOCK 64
#endif

typedef struct fg_cpu_attn_shape {
    int batch, seq, heads, head_dim, causal;
    float dropout;          /* attention dropout p (training); 0: none */
    uint64_t seed, offset;  /* its draws: fg_cpu_dropout_keep(seed, offset + index) */
    int kv_heads; /* grouped-query attention: divides heads, qkv rows are (heads + 2 kv_heads)
                   * head_dim; 0: heads */
    /* who runs the products, each slot (thread) its own; NULL: fg_cpu_gemm */
    const struct fg_cpu_gemm_hook *gemm;
} fg_cpu_attn_shape;

/* Bytes of scratch forward and backward need on a pool of `threads`, in f32 or bf16: a
 * slot (attention_impl.h: 2 BLOCK seq floats, and what bf16 adds) for each thread that runs
 * a (batch, head) item, min(threads, batch * heads). */
size_t fg_cpu_attention_workspace(const fg_cpu_attn_shape *a, int threads);
/* qkv (B, T, (H + 2 KV) D) -> y (B, T, C), lse (B, H, T) saved for backward. */
void fg_cpu_attention_forward(fg_cpu_pool *pool, const fg_cpu_attn_shape *a, const float *qkv,
                              float *y, float *lse, void *workspace);
/* dqkv (B, T, (H + 2 KV) D) overwritten. */
void fg_cpu_attention_backward(fg_cpu_pool *pool, const fg_cpu_attn_shape *a,
                               const float *qkv, const float *y, const float *lse,
                               const float *dy, float *dqkv, void *workspace);
/* The same in bf16 storage (attention_bf16.c): the products take bf16 operands, as
 * FlashAttention's do: Q K^T and dY V^T from the tensors, P V, P^T dY, dS K and dS^T Q with
 * P and dS rounded to bf16; every product accumulates in f32 (a.gemm's run_bf16 where it
 * runs, else the operands widened for the f32 product), the softmax and its backward are
 * the f32 path's, and each output is rounded to bf16 once (dK and dV after the item's last
 * block and query head). */
void fg_cpu_attention_forward_bf16(fg_cpu_pool *pool, const fg_cpu_attn_shape *a,
                                   const uint16_t *qkv, uint16_t *y, float *lse,
                                   void *workspace);
void fg_cpu_attention_backward_bf16(fg_cpu_pool *pool, const fg_cpu_attn_shape *a,
                                    const uint16_t *qkv, const uint16_t *y, const float *lse,
                                    const uint16_t *dy, uint16_t *dqkv, void *workspace);
/* y (B, C) = the causal forward's row pos, from rows [0, pos] of qkv (B, seq, 3C): one
 * query against pos + 1 cached keys per head (fulgur generate's KV cache). */
void fg_cpu_attention_decode(fg_cpu_pool *pool, const fg_cpu_attn_shape *a, int pos,
                             const float *qkv, float *y, void *workspace);

#endif
