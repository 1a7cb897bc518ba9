/* The CUDA backend's SDPA graphs (plugins/backend-cuda/cuda_sdpa_graph.c) against the REAL
 * libcudnn, without a GPU where possible.
 *
 *   sdpa_aot graphs          every forward and backward graph the backend builds (f16 and
 *                            bf16, causal or not, both dQ lowerings) finalizes: the library
 *                            accepts every descriptor, attribute, type and operation. Needs
 *                            no GPU and no driver (cuDNN >= 9.8 takes a graph without a
 *                            handle). ctest cuda.sdpa_graph.
 *   sdpa_aot capture FILE    on a GPU: device 0's cuDNN device properties
 *                            (CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, DEVICE_ID 0) as the JSON
 *                            cuDNN writes (CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION) into
 *                            FILE. tests/cuda/gpu_checks.sh runs it.
 *   sdpa_aot plans FILE      the execution plans of the backend's graphs for the device FILE
 *                            describes, finalized by the real libcudnn without that device
 *                            (deviceless AOT, cuDNN >= 9.8): the heuristics get the
 *                            DEVICEPROP, a plan must finalize for every eligible shape; head
 *                            size 12 and 256 are reported, not required. The SDPA engines
 *                            open the driver while a plan finalizes: without a GPU run it
 *                            against driver_shim.c's libcuda.so.1 (ctest cuda.sdpa_aot, with
 *                            the JSON of tests/cuda/data).
 * Exit 0 when all passed, 1 otherwise, 2 on usage. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_sdpa_graph.h"

static int failures;

static void report(const char *what, const fg_sdpa_shape *s, cudnnStatus_t st, const char *at,
                   int required)
{
    char last[512] = "";
    if (st != CUDNN_STATUS_SUCCESS)
        cudnnGetLastErrorString(last, sizeof last);
    printf("%s %s B=%lld H=%lld T=%lld D=%lld %s%s%s: %s%s%s%s%s\n",
           st == CUDNN_STATUS_SUCCESS ? "ok  " : required ? "FAIL" : "note", what,
           (long long)s->b, (long long)s->h, (long long)s->t, (long long)s->d,
           s->io == CUDNN_DATA_BFLOAT16 ? "bf16" : "f16", s->causal ? " causal" : "",
           s->backward ? (s->dq_accum ? " backward (dQ accumulator)" : " backward") : " forward",
           cudnnGetErrorString(st), *at ? " at " : "", at, *last ? ": " : "", last);
    if (st != CUDNN_STATUS_SUCCESS && required)
        failures++;
}

static int each_shape(int (*fn)(const fg_sdpa_shape *, void *), void *arg)
{
    static const int64_t heads[] = { 64, 128 };
    for (int io = 0; io < 2; io++)
        for (int h = 0; h < 2; h++)
            for (int causal = 0; causal < 2; causal++)
                for (int pass = 0; pass < 3; pass++) {
                    fg_sdpa_shape s = { 8, 12, 1024, heads[h],
                                        io ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF, causal,
                                        pass > 0, pass == 2 };
                    if (fn(&s, arg))
                        return 1;
                }
    return 0;
}

static int graph_only(const fg_sdpa_shape *s, void *arg)
{
    (void)arg;
    fg_sdpa_graph g;
    const char *at = "";
    cudnnStatus_t st = fg_sdpa_graph_build(&g, s, NULL, &at);
    report("graph", s, st, at, 1);
    fg_sdpa_graph_destroy(&g);
    return 0;
}

/* A plan for s from the device the DEVICEPROP descriptor describes. */
static cudnnStatus_t plan_for(const fg_sdpa_shape *s, cudnnBackendDescriptor_t prop, int required)
{
    fg_sdpa_graph g;
    fg_sdpa_plan p;
    const char *at = "";
    memset(&p, 0, sizeof p);
    cudnnStatus_t st = fg_sdpa_graph_build(&g, s, NULL, &at);
    if (st == CUDNN_STATUS_SUCCESS)
        st = fg_sdpa_plan_make(&g, prop, &p, &at);
    report("plan ", s, st, at, required);
    if (st == CUDNN_STATUS_SUCCESS)
        printf("      engine %lld (%s), %d config(s) tried, workspace %lld bytes\n",
               (long long)p.engine, p.deterministic ? "deterministic" : "non-deterministic",
               p.configs_tried, (long long)p.workspace);
    fg_sdpa_plan_destroy(&p);
    fg_sdpa_graph_destroy(&g);
    return st;
}

static int plan_required(const fg_sdpa_shape *s, void *prop)
{
    /* the backend takes the direct dQ lowering first and the accumulator one when that
     * fails: one of the two must give a plan */
    if (s->backward && s->dq_accum)
        return 0;
    cudnnStatus_t st = plan_for(s, prop, !s->backward);
    if (st != CUDNN_STATUS_SUCCESS && s->backward) {
        fg_sdpa_shape a = *s;
        a.dq_accum = 1;
        plan_for(&a, prop, 1);
    }
    return 0;
}

static char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        if (len > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len))) {
            *n = fread(buf, 1, (size_t)len, f);
            if (*n != (size_t)len) {
                free(buf);
                buf = NULL;
            }
        }
    }
    fclose(f);
    return buf;
}

static int plans(const char *path)
{
    size_t n = 0;
    char *json = read_file(path, &n);
    if (!json) {
        fprintf(stderr, "sdpa_aot: cannot read %s\n", path);
        return 1;
    }
    cudnnBackendDescriptor_t prop = NULL;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, &prop);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(prop, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
                                      CUDNN_TYPE_CHAR, (int64_t)n, json);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendFinalize(prop);
    free(json);
    if (st != CUDNN_STATUS_SUCCESS) {
        char last[512] = "";
        cudnnGetLastErrorString(last, sizeof last);
        printf("FAIL device properties from %s: %s: %s\n", path, cudnnGetErrorString(st), last);
        return 1;
    }
    each_shape(plan_required, prop);
    /* what the engines say about shapes the backend never sends (its kernels run them) */
    fg_sdpa_shape odd = { 2, 4, 128, 12, CUDNN_DATA_BFLOAT16, 1, 0, 0 };
    plan_for(&odd, prop, 0);
    odd.d = 256;
    plan_for(&odd, prop, 0);
    cudnnBackendDestroyDescriptor(prop);
    return failures ? 1 : 0;
}

static int capture(const char *path)
{
    cudnnBackendDescriptor_t prop = NULL;
    int32_t device = 0;
    int64_t n = 0;
    char *json = NULL;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR, &prop);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(prop, CUDNN_ATTR_DEVICEPROP_DEVICE_ID, CUDNN_TYPE_INT32, 1,
                                      &device);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendFinalize(prop);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendGetAttribute(prop, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
                                      CUDNN_TYPE_CHAR, 0, &n, NULL);
    if (st == CUDNN_STATUS_SUCCESS && (n < 2 || !(json = malloc((size_t)n))))
        st = CUDNN_STATUS_INTERNAL_ERROR;
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendGetAttribute(prop, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION,
                                      CUDNN_TYPE_CHAR, n, &n, json);
    int ok = st == CUDNN_STATUS_SUCCESS;
    if (ok) {
        FILE *f = fopen(path, "wb");
        size_t len = strnlen(json, (size_t)n); /* the count may include a terminating NUL */
        ok = f && fwrite(json, 1, len, f) == len;
        if (f)
            ok = fclose(f) == 0 && ok;
        printf("%s %s: %zu bytes of device 0's cuDNN device properties (cuDNN %zu)\n",
               ok ? "ok  " : "FAIL", path, len, cudnnGetVersion());
    } else {
        char last[512] = "";
        cudnnGetLastErrorString(last, sizeof last);
        printf("FAIL device 0's cuDNN device properties: %s: %s\n", cudnnGetErrorString(st),
               last);
    }
    free(json);
    if (prop)
        cudnnBackendDestroyDescriptor(prop);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    printf("libcudnn %zu (built against %d)\n", cudnnGetVersion(), CUDNN_VERSION);
    if (argc == 2 && strcmp(argv[1], "graphs") == 0) {
        each_shape(graph_only, NULL);
        return failures ? 1 : 0;
    }
    if (argc == 3 && strcmp(argv[1], "capture") == 0)
        return capture(argv[2]);
    if (argc == 3 && strcmp(argv[1], "plans") == 0)
        return plans(argv[2]);
    fprintf(stderr, "usage: sdpa_aot graphs | capture FILE | plans FILE\n");
    return 2;
}
