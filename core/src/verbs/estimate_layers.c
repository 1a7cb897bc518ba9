/* The config's layers for fulgur estimate: the data plugin's sample shape, the model built
 * from it as the trainer builds it, each layer's parameters and flops. */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "estimate.h"
#include "fulgur/data.h"
#include "model.h"
#include "runtime.h"

static fg_status sample_info(fg_runtime *rt, fg_dataset_info *info, fg_error *err)
{
    fg_instance *inst = fg_runtime_instance_of_kind(rt, FG_KIND_DATA);
    if (!inst) return fg_error_set(err, FG_INVALID_ARGUMENT, "the config has no [data] section");
    fg_error perr = {0};
    fg_status st = inst->initialized ? FG_OK : inst->plugin->init(&inst->host, &inst->state, &perr);
    if (st != FG_OK)
        return fg_error_set(err, st, "[data] data.%s failed to start: %s", inst->name, perr.message);
    inst->initialized = 1;
    const fg_data_vtable *vt = inst->plugin->vtable;
    void *ds = NULL;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    st = vt->open(inst->state, FG_SPLIT_TRAIN, &ds, info, err);
    if (st == FG_OK && vt->close) vt->close(inst->state, ds);
    return st;
}

static void add_layer(fg_est_model *m, const fg_model *model, const fg_layer *l)
{
    fg_est_layer *e = &m->layer[m->count++];
    snprintf(e->name, sizeof e->name, "%s", l->name);
    for (int k = 0; !l->tied && k < l->param_count; k++)
        e->params += (int64_t)fg_model_tensor(model, l->param_tensor[k])->numel;
    e->flops = l->ops->flops ? l->ops->flops(l) : 0;
    e->out_elems = (int64_t)fg_shape_numel(&l->out);
    e->plan_flops = l->ops->flops ? e->flops : e->out_elems; /* as train_services.c says */
    e->plan_act_bytes = ((l->ops->flags & FG_LAYER_ALIAS) ? 0 : e->out_elems * (int64_t)sizeof(float)) +
                        (int64_t)l->aux_per_sample;
    m->params += e->params;
}

fg_status fg_est_layers(fg_runtime *rt, fg_est_model *m, fg_error *err)
{
    fg_dataset_info info;
    fg_status st = sample_info(rt, &info, err);
    fg_model *model = NULL;
    if (st == FG_OK)
        st = fg_model_build(rt->cfg, info.shape, info.rank, info.num_classes, &model, err);
    if (st != FG_OK) return st;
    size_t n = fg_model_layer_count(model);
    if (n > FG_EST_MAX_LAYERS) {
        fg_model_destroy(model);
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur estimate: %zu layers, at most %d",
                            n, FG_EST_MAX_LAYERS);
    }
    for (size_t i = 0; i < n; i++) add_layer(m, model, fg_model_layer(model, i));
    m->positions = fg_model_positions(model);
    if (m->positions < 1) m->positions = 1;
    fg_model_destroy(model);
    const char *bs = fg_config_get(rt->cfg, "data", "batch_size");
    m->batch = bs ? strtoll(bs, NULL, 10) : 64;
    if (m->batch < 1) m->batch = 1;
    m->grad_bytes = 4;
    const char *precision = fg_config_get(rt->cfg, "precision", "name");
    m->act_bytes = precision && (strstr(precision, "bf16") || strstr(precision, "fp16")) ? 2 : 4;
    return FG_OK;
}
