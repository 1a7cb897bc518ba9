/* The optimizer step without a host round trip (ABI 1.5): the clip coefficient computed on
 * the device from the gradients' sum of squares, and the fused sgd/adamw updates that read
 * the gradient scale from device memory and write the working copy in the same pass. Each
 * element follows elementwise.cu's scale, sgd_k/adamw_k and convert_k formula for formula
 * (built with --fmad=false), so a fused step is bitwise the unfused sequence. */
#include "fg_cuda_common.cuh"

using namespace fgcu;

namespace {

/* v rounded into T's storage, as st then ld would leave it. */
template <typename T> __device__ __forceinline__ float round_to(float v)
{
    T t;
    st(&t, 0, v);
    return ld(&t, 0);
}

/* *coef = clip_grad_norm_'s factor from the f32 sum of squares, in double as the host's. */
__global__ void clip_coef_k(const float *sq, double max_norm, float *coef)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        double c = max_norm / (sqrt((double)*sq) + 1e-6);
        *coef = c < 1.0 ? (float)c : 1.0f;
    }
}

/* The gradient the update reads: grad, or grad * s rounded into G (the scale op's). */
template <typename G>
__device__ __forceinline__ float scaled_grad(const G *grad, size_t i, float s)
{
    float g = ld(grad, i);
    return s == 1.0f ? g : round_to<G>(g * s);
}

/* The parameter stored, then its working copy cast from what was stored. */
template <typename P, typename W>
__device__ __forceinline__ void store_param(P *param, W *work, size_t i, float p)
{
    st(param, i, p);
    if (work)
        st(work, i, round_to<P>(p));
}

template <typename P, typename G, typename W>
__global__ void sgd_fused_k(fg_cu_sgd a, P *__restrict__ param, const G *__restrict__ grad,
                            float *__restrict__ buf, const float *__restrict__ grad_scale,
                            W *__restrict__ work, size_t n)
{
    if (a.skip_dev && *a.skip_dev)
        return; /* the loss scaler skips this step (decided on the device) */
    float lr = a.lr_dev ? *a.lr_dev : a.lr; /* a captured step's rate is on the device */
    float wd = a.weight_decay, mom = a.momentum, damp = 1.0f - a.dampening;
    float s = grad_scale ? *grad_scale : 1.0f;
    FGCU_FOR(i, n)
    {
        float p = ld(param, i);
        float g = scaled_grad(grad, i, s) + wd * p;
        if (mom == 0.0f) {
            p -= lr * g;
        } else if (a.first_step) {
            buf[i] = g;
            p -= lr * (a.nesterov ? g + mom * g : g);
        } else {
            float nb = mom * buf[i] + damp * g;
            buf[i] = nb;
            p -= lr * (a.nesterov ? g + mom * nb : nb);
        }
        store_param(param, work, i, p);
    }
}

template <typename P, typename G, typename W>
__global__ void adamw_fused_k(fg_cu_adamw a, P *__restrict__ param, const G *__restrict__ grad,
                              float *__restrict__ m, float *__restrict__ v,
                              const float *__restrict__ grad_scale, W *__restrict__ work,
                              size_t n)
{
    if (a.skip_dev && *a.skip_dev)
        return; /* the loss scaler skips this step (decided on the device) */
    /* a captured step reads its rate and bias corrections from the device */
    float lr = a.step_dev ? a.step_dev[0] : a.lr, bc1 = a.step_dev ? a.step_dev[1] : a.bc1;
    float bc2_sqrt = a.step_dev ? a.step_dev[2] : a.bc2_sqrt;
    float decay = 1.0f - lr * a.weight_decay, b1 = a.beta1, b2 = a.beta2;
    float step_size = lr / bc1;
    float s = grad_scale ? *grad_scale : 1.0f;
    FGCU_FOR(i, n)
    {
        float g = scaled_grad(grad, i, s);
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        store_param(param, work, i,
                    ld(param, i) * decay - step_size * mi / (sqrtf(vi) / bc2_sqrt + a.eps));
    }
}

} // namespace

extern "C" {

cudaError_t fg_cu_grad_clip_coef(cudaStream_t s, int type, const void *x, size_t n,
                                 double max_norm, float *sq, float *coef, double *scratch)
{
    cudaError_t e = fg_cu_sum_squares(s, type, x, n, sq, scratch);
    if (e != cudaSuccess)
        return e;
    FGCU_LAUNCH(1, 1, 0, s, clip_coef_k)(sq, max_norm, coef);
    return cudaGetLastError();
}

/* work NULL: the kernel of W = P, which never touches it. */
cudaError_t fg_cu_sgd_fused(cudaStream_t s, const fg_cu_sgd *a, void *param, int param_type,
                            const void *grad, int grad_type, float *buf,
                            const float *grad_scale, void *work, int work_type, size_t n)
{
    int wt = work ? work_type : param_type;
    FGCU_DISPATCH(param_type, P,
        FGCU_DISPATCH(grad_type, G,
            FGCU_DISPATCH(wt, W,
                FGCU_LAUNCH(grid_for(n), kThreads, 0, s, sgd_fused_k<P, G, W>)(
                    *a, (P *)param, (const G *)grad, buf, grad_scale, (W *)work, n))));
    return cudaGetLastError();
}

cudaError_t fg_cu_adamw_fused(cudaStream_t s, const fg_cu_adamw *a, void *param,
                              int param_type, const void *grad, int grad_type, float *m,
                              float *v, const float *grad_scale, void *work, int work_type,
                              size_t n)
{
    int wt = work ? work_type : param_type;
    FGCU_DISPATCH(param_type, P,
        FGCU_DISPATCH(grad_type, G,
            FGCU_DISPATCH(wt, W,
                FGCU_LAUNCH(grid_for(n), kThreads, 0, s, adamw_fused_k<P, G, W>)(
                    *a, (P *)param, (const G *)grad, m, v, grad_scale, (W *)work, n))));
    return cudaGetLastError();
}

} // extern "C"
