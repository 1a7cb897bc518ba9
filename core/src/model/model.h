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
#include "loss.h"

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
 * layer type 'linaer'; did you mean 'linear'? (types: linear, conv2d, ...)", and for a
 * `recompute` key on a kind that cannot recompute (naming the key's file:line). */
fg_status fg_layer_check_type(const fg_config *cfg, const char *section, fg_error *err);

/* ---- the model ---------------------------------------------------------------------- */

/* sample_shape/sample_rank: the data set's sample shape (without batch); may be NULL/0
 * when [model] input is set. When both are given they must hold the same number of values
 * ([model] input wins: a reshape is free). num_classes: the last layer's output features.
 * Every layer section is validated against its schema; every shape error is reported
 * here, naming the section's file:line. */
fg_status fg_model_build(const fg_config *cfg, const int64_t *sample_shape, int sample_rank,
                         int num_classes, fg_model **out, fg_error *err);
/* The same under an fp8 recipe (NULL or FG_FP8_NONE: fg_model_build): linear layers that
 * can declare their scaling state and run their gemms in fp8 (linear_fp8.c). */
fg_status fg_model_build_fp8(const fg_config *cfg, const int64_t *sample_shape,
                             int sample_rank, int num_classes, const fg_fp8_recipe *fp8,
                             fg_model **out, fg_error *err);
/* Whether t is an fp8 map's scale pair or amax history (linear_fp8.c): training state that
 * no weights file holds (init_from skips it, export writes none). */
int fg_tensor_is_fp8_state(const fg_tensor_info *t);
/* The model's fp8 recipe; NULL when it has none. */
const fg_fp8_recipe *fg_model_fp8(const fg_model *m);
/* What an fp8 recipe did with each linear layer, one line each ("" without fp8). */
const char *fg_model_fp8_note(const fg_model *m);
void fg_model_fp8_note_add(fg_model *m, const char *line);
void fg_model_destroy(fg_model *m);

size_t fg_model_layer_count(const fg_model *m);
/* How many relu / max pooling pairs run the pooling first (layer_order.c). */
size_t fg_model_relu_after_pool(const fg_model *m);
const fg_layer *fg_model_layer(const fg_model *m, size_t i);
const fg_shape *fg_model_input_shape(const fg_model *m);
int fg_model_num_classes(const fg_model *m);
/* Labels (and loss rows) per sample: 1, or T when the last layer gives (T, classes): a
 * language model's loss is the mean over every position. */
int fg_model_positions(const fg_model *m);
/* What the model reads: FG_I32 token ids when its first layer is an embedding, else FG_F32
 * values. */
uint32_t fg_model_input_dtype(const fg_model *m);
/* [model] loss (loss.h). */
fg_loss_kind fg_model_loss(const fg_model *m);

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
/* A training pass that is not its optimizer step's first (a later micro-batch of gradient
 * accumulation or pipeline chunk): fp8 gemms hold their scales and record no amax, so the
 * amax histories advance once per step (linear_fp8.c). */
void fg_replica_set_fp8_hold(fg_replica *r, int hold);
void fg_replica_set_seed(fg_replica *r, uint64_t seed);
void fg_replica_set_grad_ready_hook(fg_replica *r, fg_grad_ready_fn fn, void *user);
/* Sums count f64 values of device memory in place across the replicas holding the same
 * layers (a layer under [model] sync_batchnorm calls it in forward and backward). */
typedef fg_status (*fg_replica_allreduce_hook)(void *user, void *queue, double *buf,
                                               int64_t count, fg_error *err);
/* NULL fn: this replica is the only one (its layers sum over themselves). */
void fg_replica_set_allreduce(fg_replica *r, fg_replica_allreduce_hook fn, void *user);
/* [model] batch_groups: a training pass of this replica runs `groups` groups of its batch
 * (batch_groups.h); allocates the groups' scratch. 1: one pass over the batch (the default;
 * a dp replica, whose shard is one group). */
fg_status fg_replica_set_batch_groups(fg_replica *r, int groups, fg_error *err);
/* Asks backward for d(loss)/d(input) too (a pipeline stage needs it); off by default. */
void fg_replica_set_need_input_grad(fg_replica *r, int on);
/* (batch, classes) softmax of the last forward, on the device; NULL when the replica keeps
 * none (the fused classifier runs its loss and the model was not asked to keep them). */
const float *fg_replica_probs(const fg_replica *r);
/* Replicas created after this keep the softmax of every forward (fg_replica_probs): what
 * predict and generate read. Off: a backend with the fused classifier (ABI 1.4) computes
 * the loss and its gradient without the (batch, classes) f32 buffer. */
void fg_model_set_keep_probs(fg_model *m, int on);
/* [model] sync_batchnorm: batch norm layers reduce their statistics across the replicas. */
int fg_model_sync_batchnorm(const fg_model *m);
/* [model] batch_groups (batch_groups.h): groups per training batch; 1: off. */
int fg_model_batch_groups(const fg_model *m);
/* A layer's plan says it calls the replica all-reduce; the count of such layers. */
void fg_model_count_synced_layer(fg_model *m);
int fg_model_synced_layers(const fg_model *m);
/* num_classes rounded up to [model] pad_vocab_to: the row stride of the logits a replica
 * running the fused classifier keeps (num_classes when the key is off). */
int fg_model_padded_classes(const fg_model *m);
/* (batch, sample...) on the device (act dtype), written by the last backward when asked
 * for. */
const void *fg_replica_input_grad(const fg_replica *r);

/* x_dev (batch, sample...) and labels_dev (batch) must stay valid until backward. Adds
 * the summed loss and the number of correct argmax predictions to the device scalars.
 * training = 0: dropout is the identity, batchnorm uses its running statistics. */
fg_status fg_replica_forward(fg_replica *r, void *queue, const void *x_dev,
                             const int32_t *labels_dev, int batch, int training,
                             float *loss_sum_dev, float *correct_dev, fg_error *err);
/* Back from the last training forward (same batch): d(mean loss)/d(logits) times
 * loss_scale, through the layers into the grad region. accumulate = 0 overwrites the
 * gradients, 1 adds to them. */
fg_status fg_replica_backward(fg_replica *r, void *queue, int batch, float loss_scale,
                              int accumulate, fg_error *err);

/* Layer l's context for one sample (batch 1, not training) on queue: its parameters,
 * buffers, arena (aux) and the shared workspace, and y = the start of its output in the
 * arena, (1, out...). For fulgur generate's KV cache (decode.h): the arena then holds what
 * a forward of batch 1 left there. */
void fg_replica_decode_ctx(const fg_replica *r, const fg_layer *l, void *queue,
                           fg_layer_ctx *c);

/* ---- sharded memory (strategy.sharded) ------------------------------------------------ */

enum { FG_REPLICA_NO_PARAMS = 1u << 0, FG_REPLICA_NO_GRADS = 1u << 1 };
enum { FG_LAYER_PHASE_FORWARD = 0, FG_LAYER_PHASE_BACKWARD = 1 };

/* fg_replica_create, without the flat params and/or grads (flags): a layer memory hook
 * then says where each layer's are. */
fg_status fg_replica_create_flags(const fg_model *m, const fg_backend_vtable *be, void *bs,
                                  int device, int max_batch, unsigned flags, fg_replica **out,
                                  fg_error *err);
/* Called before each layer with parameters runs forward (eval too) or backward, with the
 * layer's range [offset, offset + count) of the flat regions: sets *params and *grads to
 * where element `offset` of each is for this pass (*grads may stay NULL in forward). */
typedef fg_status (*fg_layer_memory_fn)(void *user, int layer, int phase, size_t offset,
                                        size_t count, float **params, float **grads,
                                        fg_error *err);
void fg_replica_set_layer_memory_hook(fg_replica *r, fg_layer_memory_fn fn, void *user);
fg_status fg_replica_map_layer(fg_replica *r, const fg_layer *l, int phase, fg_error *err);

/* ---- pipeline stages (model-parallel, dp) -------------------------------------------- */

/* A replica of layers [first, first + count) only: it holds just their slices of the
 * parameter, gradient and buffer regions (fg_replica_params() points at the slice's
 * start, fg_replica_param_range says where it lies in the model's region), and an arena
 * for those layers. Forward takes the range's input (the model input for first = 0); a
 * range that does not end with the model's last layer computes no loss and goes back
 * from its output gradient (fg_replica_backward_from). share: a replica of the same range
 * and device whose parameters, gradients and buffers this one uses, with an arena of its
 * own (a micro-batch in flight); it must outlive this one. */
fg_status fg_replica_create_range(const fg_model *m, const fg_backend_vtable *be, void *bs,
                                  int device, int max_batch, size_t first, size_t count,
                                  fg_replica *share, fg_replica **out, fg_error *err);
/* [*offset, *offset + *size) floats of the model's flat regions this replica holds. */
void fg_replica_param_range(const fg_replica *r, size_t *offset, size_t *size);
void fg_replica_buffer_range(const fg_replica *r, size_t *offset, size_t *size);
/* (batch, out...) on the device (act dtype): the range's last layer's output of the last
 * forward. */
const void *fg_replica_output(const fg_replica *r);
/* Backward from dy = d(loss)/d(output) (batch, out...) on the device, kept valid until it
 * returns. Gradients as fg_replica_backward. */
fg_status fg_replica_backward_from(fg_replica *r, void *queue, const void *dy, int batch,
                                   int accumulate, fg_error *err);
/* [backend] cuda_graphs: the dropout layers take the step's part of their offset from a
 * counter each in device memory that their op advances (dropout_forward_dev), set from the
 * step at the next training forward; the masks are those of the offset by value. Nothing
 * without a dropout layer. Setup only. */
fg_status fg_replica_dropout_on_device(fg_replica *r, fg_error *err);
/* This replica's batch starts at sample `first` of a larger batch (a shard or a
 * micro-batch): dropout then draws for each sample what the whole batch would. */
void fg_replica_set_sample_offset(fg_replica *r, uint64_t first);
/* Of the next forward's batch * positions labels, `counted` are not FG_IGNORED_LABEL: the
 * loss is the mean over those ([model] ignore_index). Negative: all of them count. */
void fg_replica_set_counted_labels(fg_replica *r, int64_t counted);
/* The loss scaler on the device (ABI 1.10): backward multiplies the loss gradient by
 * loss_scale times the scale dev holds, read on the device (NULL: loss_scale alone). Only
 * where fg_replica_takes_loss_scale_dev (the replica computes a softmax cross-entropy with
 * softmax_xent_backward); elsewhere it stays unset. */
int fg_replica_takes_loss_scale_dev(const fg_replica *r);
void fg_replica_set_loss_scale_dev(fg_replica *r, const fg_loss_scale_dev *dev);

/* ---- precision (model.c) ------------------------------------------------------------ */

/* Activations and their gradients in `act`, the working parameters the layers read in
 * `param`, parameter gradients in `grad` (f32, f16 or bf16). Replicas
 * created afterwards use them; all f32 by default. With a half `param` a replica keeps its
 * f32 parameters (fg_replica_params: the master copy the optimizer updates) and a working
 * copy that fg_replica_cast_params refreshes. A half replica's x_dev (forward),
 * fg_replica_input_grad and fg_replica_output are in `act`; probs stay f32. */
fg_status fg_model_set_dtypes(fg_model *m, uint32_t act, uint32_t param, uint32_t grad,
                              fg_error *err);
/* NULL when every dtype is f32. */
const fg_role_dtypes *fg_model_dtypes(const fg_model *m);
/* Working parameters = the f32 parameters rounded to the param dtype (nothing when f32).
 * Enqueued on queue; once after each change of the parameters. */
fg_status fg_replica_cast_params(fg_replica *r, void *queue, fg_error *err);
/* Bytes of the working parameters (0 when the layers read the f32 ones). */
size_t fg_replica_work_bytes(const fg_replica *r);
/* The working parameters (laid out as fg_replica_params, in *dtype), or NULL when the
 * layers read the f32 ones: what a fused optimizer step writes (ABI 1.5). */
void *fg_replica_work(const fg_replica *r, uint32_t *dtype);
uint32_t fg_replica_act_dtype(const fg_replica *r);
/* Who keeps the f32 master weights of half parameters: the one name for it in the core,
 * decided once by the trainer (trainer_precision.c) and read from the model by the stage
 * services. The plugin ABI spells FG_MASTER_STRATEGY fg_strategy_info.own_master (what a
 * strategy offers) and fg_train_services.strategy_master (what the core granted). */
typedef enum fg_master_owner {
    FG_MASTER_REPLICA = 0,  /* each replica keeps f32 parameters and a half working copy */
    FG_MASTER_NONE = 1,     /* "true" half modes: the half parameters are the only copy */
    FG_MASTER_STRATEGY = 2, /* the strategy keeps the f32 master of what it updates */
} fg_master_owner;
/* With FG_MASTER_NONE or FG_MASTER_STRATEGY a replica holds no f32 master:
 * fg_replica_params points at param-dtype values (the optimizer updates them in place, or
 * the strategy writes them from its master). Call after fg_model_set_dtypes (which sets
 * FG_MASTER_REPLICA); refused for f32 parameters, their own master. */
fg_status fg_model_set_master_owner(fg_model *m, fg_master_owner owner, fg_error *err);
fg_master_owner fg_model_master_owner(const fg_model *m);
/* The dtypes of the memory fg_replica_params and fg_replica_grads point at. */
uint32_t fg_replica_param_dtype(const fg_replica *r);
uint32_t fg_replica_grad_dtype(const fg_replica *r);
/* The dtypes whole replicas of the model store parameters and gradients in. */
void fg_model_storage_dtypes(const fg_model *m, uint32_t *param, uint32_t *grad);
/* Adds the backend ops the model's replicas call (layers, loss, gradient zeroing, metric
 * sums, casts of a half model), in the dtypes set above; training: backward's too. */
fg_status fg_model_op_needs(const fg_model *m, int training, fg_op_needs *n);
/* Host copy of the replica's parameters as f32 (cast from half ones), waiting for queue. */
fg_status fg_replica_download_params(fg_replica *r, void *queue, float *host, fg_error *err);

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
