/* The parts' own structs, filled from the trainer (trainer_parts.h). */
#include "trainer_parts.h"

#include "runtime.h"
#include "trainer_internal.h"

fg_ranks fg_trainer_ranks(const fg_trainer *t)
{
    void *state = NULL;
    const fg_comm_vtable *comm = t->world_size > 1 ? fg_runtime_comm(t->rt, &state) : NULL;
    return (fg_ranks){comm, state, t->rank, t->world_size};
}

fg_rank_agreement fg_trainer_rank_agreement(const fg_trainer *t)
{
    return (fg_rank_agreement){
        .ranks = fg_trainer_ranks(t),
        .cfg = t->cfg,
        .model = t->model,
        .data = t->data.vt,
        .data_state = t->data.state,
        .train = &t->train,
        .val = &t->val,
        .test = &t->test,
        .resumed = t->ckpt.loaded,
    };
}

fg_step_graph_fit fg_trainer_step_graph_fit(fg_trainer *t)
{
    const fg_instance *comm = fg_runtime_instance_of_kind(t->rt, FG_KIND_COMM);
    return (fg_step_graph_fit){
        .cfg = t->cfg,
        .tctx = &t->tctx,
        .backend = t->backend.inst->name,
        .strategy_name = t->strategy.inst->name,
        .precision = t->precision.inst->name,
        .comm_name = comm ? comm->name : NULL,
        .has_buffers = fg_model_buffers_size(t->model) > 0,
        .strategy = t->strategy.vt,
        .strategy_state = t->strategy.state,
        .accumulate = t->keys.accumulate,
        .clip_val = t->keys.clip_val,
        .clip_by_value = t->keys.clip_by_value,
        .loss_scaling = t->scaler.loss_scaling && !t->scaler.dev_stage, /* on the host */
        .timing = t->checks.timing,
        .finite_every = t->checks.finite_every,
    };
}

fg_requeue_fit fg_trainer_requeue_fit(const fg_trainer *t)
{
    return (fg_requeue_fit){
        .ranks = fg_trainer_ranks(t),
        .verbosity = t->rt->verbosity,
        .out = t->out,
        .cfg = t->cfg,
        .run_dir = t->run_dir,
        .progress = &t->progress,
        .max_time_s = t->keys.max_time_s,
        .max_steps = t->keys.max_steps,
        .max_epochs = t->keys.max_epochs,
    };
}

fg_status fg_trainer_requeue_poll(fg_trainer *t, int now, fg_error *err)
{
    fg_requeue_fit f = fg_trainer_requeue_fit(t);
    fg_status st = now ? fg_requeue_poll_now(&t->requeue, &f, err)
                       : fg_requeue_poll(&t->requeue, &f, err);
    if (fg_requeue_stops(&t->requeue)) t->stop = 1;
    return st;
}

fg_verb_model fg_trainer_verb_model(fg_trainer *t)
{
    return (fg_verb_model){
        .cfg = t->cfg,
        .model = t->model,
        .init_params = t->init_params,
        .out = t->out,
        .text_out = t->text_out,
        .run_dir = t->run_dir,
        .world_size = t->world_size,
        .be = t->backend.vt,
        .bs = t->backend.state,
        .strategy = t->strategy.vt,
        .strategy_state = t->strategy.state,
        .strategy_name = t->strategy.inst->name,
        .svc = &t->tctx.svc,
        .predict = &t->predict,
        .eval_batch_size = t->keys.eval_batch_size,
    };
}
