/* [backend] cuda_graphs: which steps run eagerly, which is captured, which replay
 * (step_graph.h), and the setup checks that refuse what a graph cannot hold. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "step_graph.h"
#include "train_stage_fused.h"
#include "train_stage_graph.h"
#include "train_services.h"

__attribute__((format(printf, 2, 3))) static fg_status refuse(fg_error *err, const char *fmt,
                                                                ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return fg_error_set(err, FG_UNAVAILABLE, "[backend] cuda_graphs: %s", why);
}

/* A layer with attention dropout, whose op takes the step's offset by value (dropout
 * layers read theirs from the device: replica.c). */
static const char *layer_with_dropout(const fg_config *cfg)
{
    for (size_t i = 0; i < fg_config_section_count(cfg); i++) {
        const char *sec = fg_config_section_name(cfg, i);
        if (strncmp(sec, "layer.", 6) != 0) continue;
        const char *type = fg_config_get(cfg, sec, "type");
        if (type && strcmp(type, "dropout") == 0) continue;
        for (size_t k = 0; k < fg_config_entry_count(cfg, sec); k++) {
            const char *key = fg_config_entry_key(cfg, sec, k);
            const char *v = fg_config_get(cfg, sec, key);
            double p = 0;
            if (strstr(key, "dropout") && v && fg_option_parse_float(v, &p) == FG_OK && p != 0)
                return sec;
        }
    }
    return NULL;
}

/* A batch norm under [model] batch_groups (its sums round-trip through the host). */
static int batchnorm_groups(const fg_model *m)
{
    for (size_t i = 0; i < fg_model_layer_count(m); i++)
        if (fg_model_layer(m, i)->batch_groups > 1) return 1;
    return 0;
}

/* single, or ddp whose buckets are NCCL collectives ordered on the device (a graph holds
 * them: the comm's stream forks from the captured stream and joins it back). */
static fg_status check_strategy(const fg_step_graph_fit *f, fg_error *err)
{
    const char *name = f->strategy_name;
    if (strcmp(name, "single") == 0) return FG_OK;
    if (strcmp(name, "ddp") != 0)
        return refuse(err, "[strategy] %s: only `single` and `ddp` over [comm] nccl are "
                      "captured (the others synchronise the host or run collectives a graph "
                      "does not hold)", name);
    if (!f->comm_name || strcmp(f->comm_name, "nccl") != 0)
        return refuse(err, "[strategy] ddp over [comm] %s: its collectives run on the host, "
                      "outside the device's streams, so a graph cannot hold them; use [comm] "
                      "name = nccl", f->comm_name ? f->comm_name : "(none)");
    if (f->has_buffers)
        return refuse(err, "[strategy] ddp: the model holds buffers (batch-norm running "
                      "statistics) that ddp copies from rank 0 after the steps that changed "
                      "them, which it learns on the host in each step; a replayed step would "
                      "leave the ranks' buffers apart");
    return FG_OK;
}

/* What the trainer and its callbacks do on the host inside a step. */
static fg_status check_fit(const fg_step_graph_fit *f, fg_error *err)
{
    const fg_backend_vtable *be = f->tctx->be;
    if (!FG_HAS_FIELD(be, fg_backend_vtable, graph_destroy) || !be->graph_begin ||
        !be->graph_end || !be->graph_launch || !be->graph_destroy)
        return refuse(err, "a CUDA key: backend %s cannot capture a step into a graph (use "
                      "[backend] name = cuda)", f->backend);
    fg_status st = check_strategy(f, err);
    if (st != FG_OK) return st;
    if (f->accumulate != 1)
        return refuse(err, "%s = %lld: only a step of one micro-batch is captured",
                      "trainer.accumulate_grad_batches", (long long)f->accumulate);
    if (f->loss_scaling)
        return refuse(err, "[precision] %s: dynamic loss scaling checks the gradients for "
                      "inf/NaN on the host every step here (it runs on the device only with "
                      "a softmax cross-entropy loss and fused updates of the whole model)",
                      f->precision);
    if (!fg_config_is_true(f->cfg, "data", "drop_last"))
        return refuse(err, "%s is false: the last batch of an epoch may be smaller, a shape "
                      "the captured step does not have; set it to true",
                      "[data] drop_last");
    if (f->timing)
        return refuse(err, "%s: a callback times the step's phases (throughput), waiting "
                      "for the device inside the step", "[callback.*]");
    if (f->finite_every > 0)
        return refuse(err, "%s: a callback checks the loss and gradients for inf/NaN on the "
                      "host every %lld step(s) (nan_guard)", "[callback.*]",
                      (long long)f->finite_every);
    if (f->tctx->batch_groups > 1 && batchnorm_groups(f->tctx->model))
        return refuse(err, "[model] batch_groups = %d: batch norm adds its groups' sums on "
                      "the host in every step", f->tctx->batch_groups);
    const char *drop = layer_with_dropout(f->cfg);
    if (drop)
        return refuse(err, "[%s]: attention dropout takes the step's dropout offset by "
                      "value, so a replay would draw the captured step's mask (dropout "
                      "layers are captured)", drop);
    return FG_OK;
}

fg_status fg_step_graph_setup(fg_step_graph *g, const fg_step_graph_fit *f, fg_error *err)
{
    memset(g, 0, sizeof *g);
    if (!fg_config_is_true(f->cfg, "backend", "cuda_graphs")) return FG_OK;
    fg_status st = check_fit(f, err);
    if (st != FG_OK) return st;
    const fg_strategy_vtable *sv = f->strategy;
    void *stage = sv->primary_replica ? sv->primary_replica(f->strategy_state) : NULL;
    if (!stage)
        return refuse(err, "[strategy] %s has no primary stage to capture", f->strategy_name);
    if (f->clip_val > 0 && !f->clip_by_value && !fg_train_stage_can_clip_on_device(f->tctx, stage))
        return refuse(err, "%s: clipping by norm reads the norm on the host unless the "
                      "backend clips on the device (grad_clip_coef and the fused update)",
                      "trainer.gradient_clip_val");
    st = fg_train_stage_graph_check(f->tctx, stage, err);
    if (st == FG_OK) st = fg_train_stage_graph_prepare(f->tctx, stage, err);
    if (st == FG_OK) g->stage = stage;
    return st;
}

fg_status fg_step_graph_before(fg_step_graph *g, fg_train_ctx *c, const fg_batch *b, float lr,
                               int64_t step, int *done, fg_error *err)
{
    *done = 0;
    fg_status st = fg_train_stage_graph_values(c, g->stage, lr, step, err);
    if (st != FG_OK || g->steps < STEP_GRAPH_WARMUP) return st;
    st = fg_train_stage_graph_inputs(c, g->stage, b, err);
    if (st != FG_OK) return st;
    if (g->steps == STEP_GRAPH_WARMUP) {
        st = fg_train_stage_graph_begin(c, g->stage, err);
        g->capturing = st == FG_OK;
        return st;
    }
    st = fg_train_stage_graph_replay(c, g->stage, step, err);
    if (st != FG_OK) return st;
    g->steps++;
    *done = 1;
    return FG_OK;
}

void fg_step_graph_report(const fg_step_graph *g, FILE *out)
{
    if (!g->stage) return;
    if (g->steps <= STEP_GRAPH_WARMUP)
        fprintf(out, "cuda graphs: %lld eager step(s), none captured (the capture comes "
                "after %d)\n", (long long)g->steps, STEP_GRAPH_WARMUP);
    else
        fprintf(out, "cuda graphs: step %d of the fit captured, %lld step(s) replayed\n",
                STEP_GRAPH_WARMUP + 1, (long long)(g->steps - STEP_GRAPH_WARMUP - 1));
}

fg_status fg_step_graph_after(fg_step_graph *g, fg_train_ctx *c, fg_status st, fg_error *err)
{
    if (g->capturing) {
        g->capturing = 0;
        st = fg_train_stage_graph_end(c, g->stage, st, err);
    }
    if (st == FG_OK) g->steps++;
    return st;
}
