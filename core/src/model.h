/* The model: layers built from the config ([model] and the [layer.NAME] sections in file
 * order), every shape computed and checked at build time, all parameters in one flat
 * region and all non-trained buffers (running statistics) in another, each tensor a view
 * at an offset aligned to FG_TENSOR_ALIGN floats.
 *
 * A replica is the model on one backend device: flat params, grads (same layout) and
 * buffers, plus an activation arena sized once for a maximum batch. Nothing is allocated
 * per step. Thread rule: a replica is driven by one host thread at a time. */
#ifndef FG_MODEL_H
#define FG_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "fulgur/backend.h"
#include "layer.h"

#define FG_TENSOR_ALIGN 16 /* floats: 64 bytes, a cache line and a vector width */
#define FG_TENSOR_NAME_MAX 96

typedef struct fg_tensor_info {
    char name[FG_TENSOR_NAME_MAX]; /* "fc1.weight", "bn1.running_mean" */
    int is_buffer;                 /* 0: in the params/grads regions, 1: in buffers */
    size_t offset;                 /* floats from the start of its region */
    size_t numel;
    int rank;
    int64_t shape[4];
    fg_init_rule init;
    double bound; /* FG_INIT_UNIFORM: U(-bound, bound) */
    int layer;    /* index of the owning layer */
} fg_tensor_info;

/* ---- schemas ------------------------------------------------------------------------ */

/* Keys of a [layer.NAME] section of `type` (the `type` key included); NULL for an unknown
 * type. */
const fg_option *fg_layer_schema(const char *type, size_t *count);
/* Keys of [model]. */
const fg_option *fg_model_schema(size_t *count);
/* Fails for a [layer.NAME] section without a known `type`: "ORIGIN: [layer.x] unknown
 * layer type 'linaer'; did you mean 'linear'? (types: linear, conv2d, ...)". */
fg_status fg_layer_check_type(const fg_config *cfg, const char *section, fg_error *err);

/* ---- the model ---------------------------------------------------------------------- */

/* sample_shape/sample_rank: the data set's sample shape (without batch); may be NULL/0
 * when [model] input is set. When both are given they must hold the same number of values
 * ([model] input wins: a reshape is free). num_classes: the last layer's output features.
 * Every layer section is validated against its schema; every shape error is reported
 * here, naming the section's file:line. */
fg_status fg_model_build(const fg_config *cfg, const int64_t *sample_shape, int sample_rank,
                         int num_classes, fg_model **out, fg_error *err);
void fg_model_destroy(fg_model *m);

size_t fg_model_layer_count(const fg_model *m);
const fg_layer *fg_model_layer(const fg_model *m, size_t i);
const fg_shape *fg_model_input_shape(const fg_model *m);
int fg_model_num_classes(const fg_model *m);

/* Trainable values (without alignment padding). */
size_t fg_model_param_count(const fg_model *m);
/* Floats of the flat parameter region (and of the gradient region), padding included. */
size_t fg_model_params_size(const fg_model *m);
/* Floats of the flat buffer region. */
size_t fg_model_buffers_size(const fg_model *m);

/* Every tensor, parameters and buffers, in layer order: for checkpoints. */
size_t fg_model_tensor_count(const fg_model *m);
const fg_tensor_info *fg_model_tensor(const fg_model *m, size_t i);

/* PyTorch's default initialisation into host memory of fg_model_params_size() and
 * fg_model_buffers_size() floats (padding set to 0). Tensor i draws from stream
 * (seed, i): the same seed gives bitwise the same values. Records seed as the replica's
 * default dropout seed. */
void fg_model_init_params(fg_model *m, uint64_t seed, float *params, float *buffers);

/* ---- a replica ---------------------------------------------------------------------- */

typedef struct fg_replica fg_replica;

/* Called after a layer's parameter gradients are final, with its range of the flat grad
 * region (in floats); ranges come last layer first. */
typedef void (*fg_grad_ready_fn)(void *user, size_t offset, size_t count);

/* Allocates params, grads (zeroed), buffers and the arena on `device` through the backend.
 * The model must outlive the replica. Enqueues work on no queue: the caller uploads the
 * parameters (fg_replica_upload) before the first step. */
fg_status fg_replica_create(const fg_model *m, const fg_backend_vtable *be, void *bs,
                            int device, int max_batch, fg_replica **out, fg_error *err);
void fg_replica_destroy(fg_replica *r);

float *fg_replica_params(const fg_replica *r);
float *fg_replica_grads(const fg_replica *r);
float *fg_replica_buffers(const fg_replica *r);
size_t fg_replica_arena_bytes(const fg_replica *r);
int fg_replica_max_batch(const fg_replica *r);
int fg_replica_device(const fg_replica *r);
const fg_model *fg_replica_model(const fg_replica *r);

/* Copies host params and buffers (NULL: skip) to the device, on queue. */
fg_status fg_replica_upload(fg_replica *r, void *queue, const float *params,
                            const float *buffers, fg_error *err);

/* Dropout draws depend on (seed, layer, step) only. */
void fg_replica_set_step(fg_replica *r, uint64_t step);
void fg_replica_set_seed(fg_replica *r, uint64_t seed);
void fg_replica_set_grad_ready_hook(fg_replica *r, fg_grad_ready_fn fn, void *user);
/* Asks backward for d(loss)/d(input) too (a pipeline stage needs it); off by default. */
void fg_replica_set_need_input_grad(fg_replica *r, int on);
/* (batch, classes) softmax of the last forward, on the device. */
const float *fg_replica_probs(const fg_replica *r);
/* (batch, sample...) on the device, written by the last backward when asked for. */
const float *fg_replica_input_grad(const fg_replica *r);

/* x_dev (batch, sample...) and labels_dev (batch) must stay valid until backward. Adds
 * the summed loss and the number of correct argmax predictions to the device scalars.
 * training = 0: dropout is the identity, batchnorm uses its running statistics. */
fg_status fg_replica_forward(fg_replica *r, void *queue, const float *x_dev,
                             const int32_t *labels_dev, int batch, int training,
                             float *loss_sum_dev, float *correct_dev, fg_error *err);
/* Back from the last training forward (same batch): d(mean loss)/d(logits) times
 * loss_scale, through the layers into the grad region. accumulate = 0 overwrites the
 * gradients, 1 adds to them. */
fg_status fg_replica_backward(fg_replica *r, void *queue, int batch, float loss_scale,
                              int accumulate, fg_error *err);

/* ---- reading keys ------------------------------------------------------------------- */

/* The value of `key` in `section`, or the schema default (NULL when the key is neither set
 * nor defaulted); *origin says where it came from ("default" for a default). */
const char *fg_section_value(const fg_config *cfg, const char *section, const fg_option *opts,
                             size_t count, const char *key, const char **origin);
/* Reads and checks (type, range) a key against its option in `opts`. A missing required
 * key fails naming the section's line. */
fg_status fg_section_read_int(const fg_config *cfg, const char *section, const fg_option *opts,
                              size_t count, const char *key, int64_t *out, fg_error *err);
fg_status fg_section_read_float(const fg_config *cfg, const char *section,
                                const fg_option *opts, size_t count, const char *key,
                                double *out, fg_error *err);
fg_status fg_section_read_bool(const fg_config *cfg, const char *section,
                               const fg_option *opts, size_t count, const char *key, int *out,
                               fg_error *err);

#endif
