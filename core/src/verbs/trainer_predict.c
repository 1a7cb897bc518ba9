/* fulgur predict: the class probabilities of every sample of the predict split, in order,
 * written to RUN_DIR/predictions.csv (index, prediction, label, one column per class). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dataloader.h"
#include "output_file.h"
#include "train_services.h"
#include "trainer_predict.h"


static void write_header(FILE *f, int classes)
{
    fprintf(f, "index,prediction,label");
    for (int c = 0; c < classes; c++) fprintf(f, ",p%d", c);
    fputc('\n', f);
}

/* Rows of one batch; returns the number predicted right. */
static int write_rows(FILE *f, const float *probs, const int32_t *labels, int count, int classes,
                      int64_t first_index)
{
    int right = 0;
    for (int i = 0; i < count; i++) {
        const float *p = probs + (size_t)i * classes;
        int best = 0;
        for (int c = 1; c < classes; c++) best = p[c] > p[best] ? c : best;
        right += best == labels[i];
        fprintf(f, "%lld,%d,%d", (long long)(first_index + i), best, labels[i]);
        for (int c = 0; c < classes; c++) fprintf(f, ",%.6g", p[c]);
        fputc('\n', f);
    }
    return right;
}

static fg_status predict_batches(const fg_verb_model *vm, FILE *f, float *host, int64_t *rows, int64_t *right,
                                 fg_error *err)
{
    const fg_train_services *svc = vm->svc;
    void *primary = vm->strategy->primary_replica(vm->strategy_state);
    if (!primary)
        return fg_error_set(err, FG_UNAVAILABLE, "fulgur predict: [strategy] %s keeps no whole "
                            "model on one device; predict under strategy.single (or ddp) from "
                            "the checkpoint, which any strategy can load", vm->strategy_name);
    fg_replica *r = fg_train_stage_model(primary);
    void *queue = fg_train_stage_queue(primary);
    int classes = vm->predict->info.num_classes;
    fg_dataloader *dl = vm->predict->loader;
    fg_status st = fg_dataloader_start_epoch(dl, 0, 0, err);
    while (st == FG_OK) {
        const fg_batch_view *v;
        st = fg_dataloader_next(dl, &v, err);
        if (st != FG_OK || !v) break;
        fg_batch b = fg_dataloader_batch(dl, v);
        st = svc->forward(svc->ctx, primary, 0, &b, 0, NULL, 0, err);
        size_t bytes = (size_t)v->count * (size_t)classes * sizeof(float);
        if (st == FG_OK)
            st = vm->be->copy(vm->bs, queue, host, -1, fg_replica_probs(r),
                             fg_train_stage_device(primary), bytes, err);
        if (st == FG_OK) st = vm->be->queue_sync(vm->bs, queue, err);
        if (st == FG_OK) *right += write_rows(f, host, v->labels, v->count, classes, *rows);
        *rows += v->count;
        fg_dataloader_release(dl, v);
    }
    return st;
}

fg_status fg_trainer_predict(const fg_verb_model *vm, fg_error *err)
{
    if (vm->world_size != 1)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "fulgur predict runs in one process; "
                            "start it without mpirun");
    if (fg_model_loss(vm->model) != FG_LOSS_KIND_XENT)
        return fg_error_set(err, FG_UNAVAILABLE, "fulgur predict writes class probabilities; "
                            "[model] loss = %s has none, and writing its outputs is not "
                            "supported yet", fg_loss_name(fg_model_loss(vm->model)));
    char path[4200];
    snprintf(path, sizeof path, "%s/predictions.csv", vm->run_dir);
    FILE *f;
    fg_status st = fg_output_open(path, "w", &f, err);
    if (st != FG_OK) return st;
    int classes = vm->predict->info.num_classes;
    float *host = malloc((size_t)vm->eval_batch_size * (size_t)classes * sizeof(float) + 1);
    int64_t rows = 0, right = 0;
    if (!host) st = fg_error_set(err, FG_OUT_OF_MEMORY, "out of memory for predictions");
    write_header(f, classes);
    if (st == FG_OK) st = predict_batches(vm, f, host, &rows, &right, err);
    free(host);
    errno = 0;
    int bad = fflush(f) != 0 || ferror(f);
    if ((fclose(f) != 0 || bad) && st == FG_OK)
        st = fg_error_set(err, fg_output_errno_status(errno ? errno : EIO), "%s: write failed: %s",
                          path, strerror(errno ? errno : EIO));
    if (st == FG_OK)
        fprintf(vm->out, "predictions: %lld rows in %s (accuracy %.4f against the labels)\n",
                (long long)rows, path, rows ? (double)right / (double)rows : 0.0);
    return st;
}
