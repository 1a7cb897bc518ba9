/* fulgur estimate's report: what it assumed, a row per strategy, the fastest that fits;
 * as text or as JSON (--json). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate_print.h"

static const char overlap_model[] =
    "ddp and sharded stages 1-2 reduce gradients in buckets of bucket_mb cut in backward "
    "order; a bucket's collective starts when the backward of its layers is done and the link "
    "is free (one collective at a time), so it is hidden while backward still runs; stages 1-2 "
    "all-gather the updated shards after the optimizer step (not hidden); stage 3 gathers each "
    "layer's parameters before its forward and again before its backward, the next gather "
    "started when a layer starts computing (prefetch of one)";
static const char pipeline_model[] =
    "strategy.model-parallel on one node's devices (one stage a device, one process): "
    "a stage takes a micro-batch in 1/chunks of its layers' batch time, all forwards then all "
    "backwards (GPipe), activations and their gradients sent point to point between "
    "neighbouring stages over the link, each stage's optimizer share by its parameters";
static const char collectives[] =
    "ring all-reduce 2(p-1) alpha + 2(p-1)/p bytes/bw; reduce-scatter and all-gather (p-1) "
    "alpha + (p-1)/p bytes/bw; point to point alpha + bytes/bw";

int fg_est_fastest(const fg_est_report *r)
{
    int best = -1;
    for (int i = 0; i < FG_EST_STRATEGIES; i++) {
        if (r->pred[i].fits == 0 || r->pred[i].skipped || (i > 0 && r->pred[i].ranks < 2)) continue;
        if (best < 0 || r->pred[i].samples_per_s > r->pred[best].samples_per_s) best = i;
    }
    return best;
}

void fg_est_remove_tree(const char *dir)
{
    char cmd[512];
    /* the child processes' logs and run folders: nothing of value */
    if (snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir) < (int)sizeof cmd && system(cmd) != 0)
        fprintf(stderr, "fulgur estimate: could not remove %s\n", dir);
}

static void text_row(const fg_est_prediction *e, FILE *out)
{
    if (e->skipped) {
        fprintf(out, "%-16s not predicted (below)\n", e->name);
        return;
    }
    char mem[32] = "?", fits[8] = "?";
    if (e->memory.known) snprintf(mem, sizeof mem, "%.2f", e->memory.mib[6]);
    if (e->fits >= 0) snprintf(fits, sizeof fits, "%s", e->fits ? "yes" : "no");
    fprintf(out, "%-16s %5d %10.2f %10.2f %9.2f %10.2f %13.0f %13.0f %6.1f%% %13s %5s\n", e->name,
            e->ranks, e->step_s * 1e3, e->compute_s * 1e3, e->comm_s * 1e3,
            e->exposed_comm_s * 1e3, e->samples_per_s, e->tokens_per_s, 100 * e->efficiency, mem,
            fits);
}

void fg_est_print_text(const fg_est_report *r, FILE *out)
{
    const fg_est_model *m = r->model;
    fprintf(out, "fulgur estimate: %s on %d node(s) x %d device(s) = %d rank(s)\n", r->config,
            r->nodes, r->devices_per_node, r->ranks);
    fprintf(out, "assumed:\n  model: %d layers, %lld parameters (%d-byte gradients), batch %lld "
            "x %lld position(s) a rank\n", m->count, (long long)m->params, m->grad_bytes,
            (long long)m->batch, (long long)m->positions);
    fprintf(out, "  compute: %s\n  link: %s\n  collectives: %s\n  overlap: %s (bucket_mb %g)\n",
            m->compute_source, r->link->source, collectives, overlap_model, r->bucket_mb);
    fprintf(out, "  memory per rank: what `fulgur check` prints for rank 0 (single, ddp: 1 rank; "
            "sharded: %d ranks; pipeline: its fullest device); device limit: %s\n", r->ranks,
            r->limit_source);
    fprintf(out, "  pipeline: %s\n", pipeline_model);
    fprintf(out, "%-16s %5s %10s %10s %9s %10s %13s %13s %7s %13s %5s\n", "strategy", "ranks",
            "step ms", "compute ms", "comm ms", "exposed ms", "samples/s", "tokens/s", "scaling",
            "MiB/rank", "fits");
    for (int i = 0; i < FG_EST_STRATEGIES; i++) text_row(&r->pred[i], out);
    for (int i = 0; i < FG_EST_STRATEGIES; i++)
        if (!r->pred[i].memory.known) fprintf(out, "memory of %s: %s\n", r->pred[i].name, r->pred[i].memory.note);
    const fg_est_prediction *p = &r->pred[FG_EST_PIPELINE];
    fprintf(out, "pipeline: %s", p->note);
    if (p->memory.known) fprintf(out, "; memory of its fullest device, device %d", p->memory.device);
    fputc('\n', out);
    int best = fg_est_fastest(r);
    if (best < 0) fprintf(out, "fastest that fits: none of these fits the device memory\n");
    else
        fprintf(out, "fastest that fits: %s (%.2f ms a step, %.0f tokens/s)%s\n", r->pred[best].name,
                r->pred[best].step_s * 1e3, r->pred[best].tokens_per_s,
                r->pred[best].fits < 0 ? " (memory limit not known)" : "");
}

static void json_string(const char *s, FILE *out)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c < 0x20) fprintf(out, "\\u%04x", c);
        else fputc(c, out);
    }
    fputc('"', out);
}

static void json_memory(const fg_est_memory *m, FILE *out)
{
    static const char *roles[] = {"params", "master", "grads", "optimizer", "activations", "other", "total"};
    if (!m->known) {
        fprintf(out, "null, \"memory_note\": ");
        json_string(m->note, out);
        return;
    }
    fputc('{', out);
    for (int i = 0; i < 7; i++) fprintf(out, "%s\"%s\": %.2f", i ? ", " : "", roles[i], m->mib[i]);
    fputc('}', out);
}

static void json_strategy(const fg_est_prediction *e, FILE *out)
{
    fprintf(out, "    {\"name\": \"%s\", \"skipped\": %s, \"note\": ", e->name, e->skipped ? "true" : "false");
    json_string(e->note, out);
    fprintf(out, ", \"ranks\": %d, \"step_ms\": %.10g, \"compute_ms\": %.10g, "
            "\"comm_ms\": %.10g, \"exposed_comm_ms\": %.10g, \"samples_per_s\": %.10g, "
            "\"tokens_per_s\": %.10g, \"efficiency\": %.10g, \"fits\": %s, \"memory_mib\": ",
            e->ranks, e->step_s * 1e3, e->compute_s * 1e3, e->comm_s * 1e3,
            e->exposed_comm_s * 1e3, e->samples_per_s, e->tokens_per_s, e->efficiency,
            e->fits < 0 ? "null" : e->fits ? "true" : "false");
    json_memory(&e->memory, out);
    if (e->memory.known) fprintf(out, ", \"memory_device\": %d", e->memory.device);
    fputc('}', out);
}

void fg_est_print_json(const fg_est_report *r, FILE *out)
{
    const fg_est_model *m = r->model;
    fprintf(out, "{\"config\": ");
    json_string(r->config, out);
    fprintf(out, ", \"nodes\": %d, \"devices_per_node\": %d, \"ranks\": %d,\n \"link\": "
            "{\"alpha_s\": %.9g, \"bytes_per_s\": %.9g, \"source\": ", r->nodes,
            r->devices_per_node, r->ranks, r->link->alpha_s, r->link->bytes_per_s);
    json_string(r->link->source, out);
    fprintf(out, "},\n \"compute_source\": ");
    json_string(m->compute_source, out);
    fprintf(out, ", \"overlap_model\": ");
    json_string(overlap_model, out);
    fprintf(out, ", \"pipeline_model\": ");
    json_string(pipeline_model, out);
    fprintf(out, ", \"bucket_mb\": %g, \"memory_limit_mb\": %g, \"params\": %lld, \"batch\": %lld, "
            "\"positions\": %lld,\n \"layers\": [", r->bucket_mb, r->limit_mb, (long long)m->params,
            (long long)m->batch, (long long)m->positions);
    for (int i = 0; i < m->count; i++)
        fprintf(out, "%s{\"name\": \"%s\", \"params\": %lld, \"fwd_ms\": %.10g, \"bwd_ms\": %.10g}",
                i ? ", " : "", m->layer[i].name, (long long)m->layer[i].params,
                m->layer[i].fwd_s * 1e3, m->layer[i].bwd_s * 1e3);
    fprintf(out, "],\n \"strategies\": [\n");
    for (int i = 0; i < FG_EST_STRATEGIES; i++) {
        json_strategy(&r->pred[i], out);
        fprintf(out, "%s\n", i + 1 < FG_EST_STRATEGIES ? "," : "");
    }
    int best = fg_est_fastest(r);
    fprintf(out, " ],\n \"fastest_fitting\": ");
    if (best < 0) fprintf(out, "null");
    else json_string(r->pred[best].name, out);
    fprintf(out, "}\n");
}
