/* fulgur estimate: predicted step time, throughput, memory per rank and scaling of each
 * strategy for a config on N nodes x G devices, and the fastest that fits; it prints
 * what it assumed. The parts: estimate.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "estimate.h"
#include "estimate_print.h"
#include "runtime.h"

typedef struct est_job {
    const fg_estimate_options *o;
    int ranks;
    fg_est_link link;
    fg_est_model model;
    fg_est_profile profile;
    fg_est_pipeline pipeline;
    char devices_override[48]; /* backend.devices=S for the pipeline's check */
    double bucket_mb, limit_mb;
    char limit_source[256];
    fg_est_prediction pred[FG_EST_STRATEGIES];
} est_job;

static fg_status read_link(est_job *j, fg_error *err)
{
    const fg_estimate_options *o = j->o;
    if (o->link && o->link_file)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur estimate: give --link or "
                            "--link-file, not both");
    if (o->link) return fg_est_link_parse(o->link, &j->link, err);
    if (o->link_file) return fg_est_link_fit_file(o->link_file, &j->link, err);
    if (j->ranks > 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur estimate: %d ranks communicate: "
                            "give --link SPEC (e.g. 1gbit,50us, nvlink, ib-ndr) or --link-file "
                            "FILE", j->ranks);
    snprintf(j->link.source, sizeof j->link.source, "none (one rank)");
    j->link.bytes_per_s = 1;
    return FG_OK;
}

static double config_number(const fg_config *cfg, const char *section, const char *key, double dflt)
{
    const char *v = fg_config_get(cfg, section, key);
    return v && *v ? atof(v) : dflt;
}

/* The measured step split over the layers by their flops: a third forward, two thirds
 * backward (backward computes two products for each of forward's). */
static void split_measured(fg_est_model *m, double step_s)
{
    double flops = 0;
    for (int i = 0; i < m->count; i++) flops += (double)m->layer[i].flops;
    for (int i = 0; i < m->count; i++) {
        double share = flops > 0 ? (double)m->layer[i].flops / flops : 1.0 / m->count;
        m->layer[i].fwd_s = step_s * share / 3;
        m->layer[i].bwd_s = step_s * share * 2 / 3;
    }
}

static fg_status compute_times(est_job *j, const fg_est_runner *r, fg_error *err)
{
    if (j->o->profile) {
        fg_status st = fg_est_profile_read(j->o->profile, &j->profile, err);
        return st == FG_OK ? fg_est_profile_apply(&j->profile, j->o->profile, &j->model, err) : st;
    }
    int a = j->o->measure_steps > 0 ? j->o->measure_steps : 5, b = 3 * a;
    double step = 0;
    fg_status st = fg_est_measure_step(r, a, b, &step, err);
    if (st != FG_OK) return st;
    split_measured(&j->model, step);
    snprintf(j->model.compute_source, sizeof j->model.compute_source, "measured on this machine: "
             "fits of %d and %d steps under strategy single (each twice, the faster; a fit's time its wall "
             "or, when shorter, its CPU time), (t%d - t%d) / %d = %.3f ms a step, "
             "split over the layers by their flops (1/3 forward, 2/3 backward)", a, b, b, a, b - a,
             step * 1e3);
    return FG_OK;
}

/* The [strategy] lines of the pipeline as planned (its stages named by split). */
static void pipeline_section(const fg_est_pipeline *p, char *out, size_t cap)
{
    int used = snprintf(out, cap, "name = model-parallel\nchunks = %d\nstages = %d\nbalance = %s",
                        p->chunks, p->stages, p->balance_memory ? "memory" : "flops");
    if (p->split && *p->split && used < (int)cap) snprintf(out + used, cap - (size_t)used, "\nsplit = %s", p->split);
}

/* What each strategy's check prints: single and ddp on one rank (ddp's memory report has
 * no world-size term: each rank holds the whole model), sharded on `ranks` ranks, the
 * pipeline in one process on its devices (its fullest device). */
static fg_status memory_column(est_job *j, const fg_est_runner *r, fg_error *err)
{
    char sect[FG_EST_STRATEGIES][512];
    snprintf(sect[0], sizeof sect[0], "name = single");
    snprintf(sect[1], sizeof sect[1], "name = ddp\nbucket_mb = %g", j->bucket_mb);
    for (int s = 1; s <= 3; s++)
        snprintf(sect[1 + s], sizeof sect[0], "name = sharded\nstage = %d\nbucket_mb = %g", s,
                 j->bucket_mb);
    pipeline_section(&j->pipeline, sect[FG_EST_PIPELINE], sizeof sect[0]);
    fg_status st = FG_OK;
    for (int i = 0; st == FG_OK && i < FG_EST_STRATEGIES; i++) {
        fg_est_memory *mem = &j->pred[i].memory;
        if (j->pred[i].skipped) {
            snprintf(mem->note, sizeof mem->note, "not computed (not predicted)");
            continue;
        }
        if (j->o->no_memory) {
            snprintf(mem->note, sizeof mem->note, "not computed (--no-memory)");
            continue;
        }
        int ranks = i >= FG_EST_SHARDED1 && i <= FG_EST_SHARDED3 ? j->ranks : 1;
        st = fg_est_check_memory(r, sect[i], ranks, i == FG_EST_PIPELINE ? j->devices_override : NULL,
                                 mem, err);
        if (st == FG_OK && mem->known && j->limit_mb > 0) j->pred[i].fits = mem->mib[6] <= j->limit_mb;
        if (st == FG_OK && !mem->known &&
            (strstr(mem->note, "out of memory") || strstr(mem->note, "cannot allocate")))
            j->pred[i].fits = 0;
    }
    return st;
}

static void memory_limit(est_job *j, const fg_config *cfg)
{
    double backend = config_number(cfg, "backend", "memory_limit_mb", 0);
    if (backend > 0) {
        j->limit_mb = backend;
        snprintf(j->limit_source, sizeof j->limit_source, "[backend] memory_limit_mb = %g", backend);
    } else if (j->profile.memory_mb > 0) {
        j->limit_mb = j->profile.memory_mb;
        snprintf(j->limit_source, sizeof j->limit_source, "the profile's memory_mb = %g (%s)",
                 j->profile.memory_mb, j->profile.device);
    } else {
        snprintf(j->limit_source, sizeof j->limit_source, "none known (set [backend] "
                 "memory_limit_mb or a profile's memory_mb)");
    }
}

static void skip(fg_est_prediction *e, const char *why)
{
    e->name = "pipeline";
    e->skipped = 1;
    e->fits = -1;
    snprintf(e->note, sizeof e->note, "%s", why);
}

/* strategy.model-parallel on one node's devices: the config's own keys when it is the
 * config's strategy, else chunks = 4 and the flops plan. */
static fg_status pipeline_row(est_job *j, const fg_config *cfg, fg_error *err)
{
    fg_est_pipeline *p = &j->pipeline;
    fg_est_prediction *e = &j->pred[FG_EST_PIPELINE];
    const char *name = fg_config_get(cfg, "strategy", "name");
    int own = name && strcmp(name, "model-parallel") == 0;
    memset(p, 0, sizeof *p);
    p->stages = j->o->devices_per_node;
    p->chunks = 4;
    snprintf(p->source, sizeof p->source, "chunks = 4 and a flops plan assumed (the config's strategy "
             "is not model-parallel)");
    if (own) {
        p->chunks = (int)config_number(cfg, "strategy", "chunks", 1);
        int stages = (int)config_number(cfg, "strategy", "stages", 0);
        const char *balance = fg_config_get(cfg, "strategy", "balance");
        p->balance_memory = balance && strcmp(balance, "memory") == 0;
        p->split = fg_config_get(cfg, "strategy", "split");
        if (config_number(cfg, "strategy", "dp_replicas", 1) > 1) {
            skip(e, "dp_replicas > 1: pipelines side by side are not modelled");
            return FG_OK;
        }
        if (stages > 0 && stages != p->stages) {
            skip(e, "[strategy] stages differs from --devices-per-node");
            return FG_OK;
        }
        snprintf(p->source, sizeof p->source, "the config's [strategy] (chunks = %d, %s)", p->chunks,
                 p->split && *p->split ? "split" : p->balance_memory ? "balance = memory" : "balance = flops");
    }
    if (j->o->nodes > 1) {
        skip(e, "model-parallel runs in one process on one node's devices: estimate it with --nodes 1");
        return FG_OK;
    }
    if (p->stages < 2 || p->stages > j->model.count) {
        char why[160];
        snprintf(why, sizeof why, "%d device(s) for %d layers: a pipeline needs 2 to %d "
                 "(--devices-per-node)", p->stages, j->model.count, j->model.count);
        skip(e, why);
        return FG_OK;
    }
    fg_status st = fg_est_pipeline_plan(&j->model, p, err);
    if (st != FG_OK) return st;
    snprintf(j->devices_override, sizeof j->devices_override, "backend.devices=%d", p->stages);
    fg_est_predict_pipeline(&j->model, &j->link, p, e);
    return FG_OK;
}

static fg_status check_options(const fg_estimate_options *o, fg_error *err)
{
    if (o->nodes < 1 || o->nodes > 100000)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "--nodes must be in [1, 100000], got %d", o->nodes);
    if (o->devices_per_node < 1 || o->devices_per_node > 1024)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "--devices-per-node must be in [1, 1024], "
                            "got %d", o->devices_per_node);
    return FG_OK;
}

static fg_status run_job(est_job *j, fg_runtime *rt, fg_est_runner *r, fg_error *err)
{
    fg_status st = fg_est_layers(rt, &j->model, err);
    if (st != FG_OK) return st;
    j->bucket_mb = config_number(rt->cfg, "strategy", "bucket_mb", 25);
    const char *wire = fg_config_get(rt->cfg, "strategy", "grad_comm_dtype");
    if (wire && strcmp(wire, "bf16") == 0) j->model.grad_bytes = 2; /* ddp's bf16 wire copy */
    st = compute_times(j, r, err);
    if (st != FG_OK) return st;
    memory_limit(j, rt->cfg);
    fg_est_predict(&j->model, &j->link, j->ranks, j->bucket_mb * 1024.0 * 1024.0, j->pred);
    st = pipeline_row(j, rt->cfg, err);
    return st == FG_OK ? memory_column(j, r, err) : st;
}

static fg_status open_runtime(const fg_runtime_options *opts, const fg_estimate_options *o,
                              fg_runtime **rt, fg_error *err)
{
    fg_runtime_options quiet = *opts;
    quiet.verbosity = FG_LOG_ERROR;
    fg_status st = fg_runtime_create(&quiet, rt, err);
    return st == FG_OK ? fg_runtime_configure(*rt, o->config, o->overrides, o->override_count, err) : st;
}

static fg_status measure_link_only(const fg_runtime_options *opts, const fg_estimate_options *o,
                                   FILE *out, fg_error *err)
{
    fg_runtime *rt = NULL;
    int wrote = 0; /* rank 0 alone writes the file, and says so */
    fg_status st = open_runtime(opts, o, &rt, err);
    if (st == FG_OK) st = fg_est_measure_link(rt, o->measure_link, &wrote, err);
    fg_runtime_destroy(rt);
    if (st == FG_OK && wrote) fprintf(out, "fulgur estimate: all-reduce times written to %s\n", o->measure_link);
    return st;
}

fg_status fg_estimate(const fg_runtime_options *opts, const fg_estimate_options *o, FILE *out,
                      fg_error *err)
{
    if (FG_HAS_FIELD(o, fg_estimate_options, measure_link) && o->measure_link)
        return measure_link_only(opts, o, out, err);
    fg_status st = check_options(o, err);
    if (st != FG_OK) return st;
    est_job *j = calloc(1, sizeof *j);
    if (!j) return fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory");
    j->o = o;
    j->ranks = o->nodes * o->devices_per_node;
    fg_est_runner r = {o->fulgur, opts->plugin_paths, opts->plugin_path_count, o->config,
                       o->overrides, o->override_count, ""};
    snprintf(r.work, sizeof r.work, "%s/fulgur-estimate-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    fg_runtime *rt = NULL;
    st = read_link(j, err);
    if (st == FG_OK) st = open_runtime(opts, o, &rt, err);
    if (st == FG_OK && !mkdtemp(r.work))
        st = fg_error_set(err, FG_IO_ERROR, "fulgur estimate: cannot create %s", r.work);
    if (st == FG_OK) st = run_job(j, rt, &r, err);
    if (r.work[strlen(r.work) - 1] != 'X') fg_est_remove_tree(r.work);
    fg_runtime_destroy(rt);
    if (st == FG_OK) {
        fg_est_report rep = {o->config, o->nodes, o->devices_per_node, j->ranks, &j->link,
                             &j->model, j->bucket_mb, j->limit_mb, j->limit_source, j->pred};
        o->json ? fg_est_print_json(&rep, out) : fg_est_print_text(&rep, out);
    }
    free(j);
    return st;
}
