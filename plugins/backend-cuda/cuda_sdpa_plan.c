/* An execution plan for the SDPA graph: cuDNN's heuristics (mode A) list engine configs,
 * best first; configs whose engine carries no NONDETERMINISTIC numerical note are tried
 * first (fulgur's own attention kernels give the same bits on every run, and a run-to-run
 * reproducible backward is worth more than the fastest engine), then the others; the first
 * config whose EXECUTION_PLAN finalizes is kept. */
#include <stdlib.h>
#include <string.h>

#include "cuda_sdpa_graph.h"

#define FG_SDPA_MAX_CONFIGS 64

static cudnnStatus_t sdpa_heuristics(const fg_sdpa_graph *g, cudnnBackendDescriptor_t deviceprop,
                                     cudnnBackendDescriptor_t *heur, const char **what)
{
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, heur);
    *what = "creating the ENGINEHEUR descriptor";
    if (s == CUDNN_STATUS_SUCCESS) {
        *what = "CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH";
        s = cudnnBackendSetAttribute(*heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->graph);
    }
    if (s == CUDNN_STATUS_SUCCESS) {
        *what = "CUDNN_ATTR_ENGINEHEUR_MODE";
        s = cudnnBackendSetAttribute(*heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
                                     &mode);
    }
    if (s == CUDNN_STATUS_SUCCESS && deviceprop) {
        *what = "CUDNN_ATTR_ENGINEHEUR_DEVICEPROP";
        s = cudnnBackendSetAttribute(*heur, CUDNN_ATTR_ENGINEHEUR_DEVICEPROP,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &deviceprop);
    }
    if (s == CUDNN_STATUS_SUCCESS) {
        *what = "the engine heuristics (finalizing ENGINEHEUR)";
        s = cudnnBackendFinalize(*heur);
    }
    return s;
}

/* The configs the heuristics found (descriptors made here, *count of them). */
static cudnnStatus_t sdpa_configs(cudnnBackendDescriptor_t heur, cudnnBackendDescriptor_t *cfg,
                                  int64_t *count, const char **what)
{
    int64_t n = 0, made = 0, got = 0;
    *count = 0;
    *what = "CUDNN_ATTR_ENGINEHEUR_RESULTS (count)";
    cudnnStatus_t s = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, NULL);
    if (s != CUDNN_STATUS_SUCCESS)
        return s;
    n = n > FG_SDPA_MAX_CONFIGS ? FG_SDPA_MAX_CONFIGS : n;
    *what = "creating ENGINECFG descriptors";
    for (; made < n && s == CUDNN_STATUS_SUCCESS; made++)
        s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[made]);
    if (s != CUDNN_STATUS_SUCCESS)
        made--; /* the failed one */
    if (s == CUDNN_STATUS_SUCCESS) {
        *what = "CUDNN_ATTR_ENGINEHEUR_RESULTS";
        s = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got, cfg);
    }
    if (s != CUDNN_STATUS_SUCCESS)
        got = 0;
    for (int64_t i = got; i < made; i++)
        cudnnBackendDestroyDescriptor(cfg[i]);
    *count = got;
    return s;
}

/* The config's engine: its global index and whether a NONDETERMINISTIC note is on it. */
static cudnnStatus_t sdpa_engine_info(cudnnBackendDescriptor_t cfg, int64_t *index,
                                      int *deterministic)
{
    cudnnBackendDescriptor_t engine;
    cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine);
    if (s != CUDNN_STATUS_SUCCESS)
        return s;
    int64_t n = 0;
    s = cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 1, &n, &engine);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
                                     &n, index);
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    int64_t count = 0;
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                     CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
                                     &count, notes);
    *deterministic = 1;
    for (int64_t i = 0; s == CUDNN_STATUS_SUCCESS && i < count; i++)
        if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)
            *deterministic = 0;
    cudnnBackendDestroyDescriptor(engine);
    return s;
}

/* A plan from one config: finalized, its workspace read. */
static cudnnStatus_t sdpa_try_config(cudnnBackendDescriptor_t cfg, fg_sdpa_plan *p,
                                     const char **what)
{
    *what = "creating the EXECUTION_PLAN descriptor";
    cudnnStatus_t s = cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                                   &p->plan);
    if (s != CUDNN_STATUS_SUCCESS) {
        p->plan = NULL;
        return s;
    }
    *what = "CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG";
    s = cudnnBackendSetAttribute(p->plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
    if (s == CUDNN_STATUS_SUCCESS) {
        *what = "the execution plan (finalizing EXECUTION_PLAN)";
        s = cudnnBackendFinalize(p->plan);
    }
    int64_t n = 0;
    if (s == CUDNN_STATUS_SUCCESS) {
        *what = "CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE";
        s = cudnnBackendGetAttribute(p->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                     CUDNN_TYPE_INT64, 1, &n, &p->workspace);
    }
    if (s != CUDNN_STATUS_SUCCESS) {
        cudnnBackendDestroyDescriptor(p->plan);
        p->plan = NULL;
    }
    return s;
}

/* Tries the configs whose determinism is `want`, in order; SUCCESS when one finalized. */
static cudnnStatus_t sdpa_pick(cudnnBackendDescriptor_t *cfg, const int64_t *engine,
                               const int *det, int64_t count, int want, fg_sdpa_plan *p,
                               cudnnStatus_t *last, const char **what)
{
    for (int64_t i = 0; i < count; i++) {
        if (det[i] != want)
            continue;
        p->configs_tried++;
        cudnnStatus_t s = sdpa_try_config(cfg[i], p, what);
        if (s == CUDNN_STATUS_SUCCESS) {
            p->engine = engine[i];
            p->deterministic = det[i];
            p->config = cfg[i]; /* the plan's: kept while it lives */
            cfg[i] = NULL;
            return s;
        }
        *last = s;
    }
    return *last;
}

cudnnStatus_t fg_sdpa_plan_make(const fg_sdpa_graph *g, cudnnBackendDescriptor_t deviceprop,
                                fg_sdpa_plan *p, const char **what)
{
    memset(p, 0, sizeof *p);
    p->engine = -1;
    cudnnBackendDescriptor_t heur = NULL, cfg[FG_SDPA_MAX_CONFIGS];
    int64_t engine[FG_SDPA_MAX_CONFIGS], count = 0;
    int det[FG_SDPA_MAX_CONFIGS];
    cudnnStatus_t s = sdpa_heuristics(g, deviceprop, &heur, what);
    if (s == CUDNN_STATUS_SUCCESS)
        s = sdpa_configs(heur, cfg, &count, what);
    if (s == CUDNN_STATUS_SUCCESS && count == 0) {
        *what = "the engine heuristics (no engine config for this graph)";
        s = CUDNN_STATUS_NOT_SUPPORTED;
    }
    for (int64_t i = 0; s == CUDNN_STATUS_SUCCESS && i < count; i++) {
        *what = "reading an engine config's engine (index, numerical notes)";
        s = sdpa_engine_info(cfg[i], &engine[i], &det[i]);
    }
    if (s == CUDNN_STATUS_SUCCESS) {
        cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
        s = sdpa_pick(cfg, engine, det, count, 1, p, &last, what);
        if (s != CUDNN_STATUS_SUCCESS)
            s = sdpa_pick(cfg, engine, det, count, 0, p, &last, what);
    }
    for (int64_t i = 0; i < count; i++)
        if (cfg[i])
            cudnnBackendDestroyDescriptor(cfg[i]);
    if (heur)
        cudnnBackendDestroyDescriptor(heur);
    return s;
}

void fg_sdpa_plan_destroy(fg_sdpa_plan *p)
{
    if (p->plan)
        cudnnBackendDestroyDescriptor(p->plan);
    if (p->config)
        cudnnBackendDestroyDescriptor(p->config);
    memset(p, 0, sizeof *p);
}
