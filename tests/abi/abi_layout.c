/* The ABI layout as this compiler sees the SDK headers: sizeof every public struct, offset
 * and size of each field, the values of the ABI's enums and constants. Checked against the
 * record of ABI major 1 (layout-v1.txt): a recorded line that changes means a field was
 * inserted, removed, reordered or retyped, and old plugins would read garbage.
 *   abi_layout --print             the current layout, in the record's format
 *   abi_layout --print-new FILE    what the headers add to the record, as lines to append
 *   abi_layout --check FILE        compare with the record; exit 1 on a break
 * The record is frozen at ABI 1.0 and grows in sections: `minor N` opens the lines that minor
 * N appended (a struct that grew gets a new sizeof line there). The versioning rule it
 * enforces: the headers' FG_ABI_MINOR must equal the record's last `minor`, and every line of
 * the headers must be recorded; so appending a field fails until FG_ABI_MINOR is bumped and
 * the new lines are recorded under the new minor. Inserting, removing, reordering or retyping
 * a recorded field always fails. */
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fulgur/sdk.h"

typedef struct layout_line {
    const char *what; /* "sizeof", "field", "enum", "const" */
    const char *key;  /* "fg_error", "fg_error.message", "fg_status.FG_OK", ... */
    long long value;  /* size, offset, enum or constant value */
    long long size;   /* field size; 0 otherwise */
} layout_line;

#define SIZE(T) {"sizeof", #T, (long long)sizeof(T), 0}
#define FIELD(T, f) {"field", #T "." #f, (long long)offsetof(T, f), (long long)sizeof(((T *)0)->f)}
#define ENUM(E, v) {"enum", #E "." #v, (long long)(v), 0}
#define CONST(c) {"const", #c, (long long)(c), 0}

static const layout_line current[] = {
    /* plugin.h */
    SIZE(fg_error), FIELD(fg_error, status), FIELD(fg_error, message),

    SIZE(fg_option), FIELD(fg_option, key), FIELD(fg_option, type),
    FIELD(fg_option, default_value), FIELD(fg_option, min), FIELD(fg_option, max),
    FIELD(fg_option, choices), FIELD(fg_option, help),

    SIZE(fg_host), FIELD(fg_host, struct_size), FIELD(fg_host, abi_major),
    FIELD(fg_host, abi_minor), FIELD(fg_host, section), FIELD(fg_host, log),
    FIELD(fg_host, get_bool), FIELD(fg_host, get_int), FIELD(fg_host, get_float),
    FIELD(fg_host, get_string), FIELD(fg_host, aligned_alloc), FIELD(fg_host, aligned_free),
    FIELD(fg_host, metric), FIELD(fg_host, find_plugin), FIELD(fg_host, config_entry),

    SIZE(fg_plugin), FIELD(fg_plugin, magic), FIELD(fg_plugin, struct_size),
    FIELD(fg_plugin, abi_major), FIELD(fg_plugin, abi_minor),
    FIELD(fg_plugin, min_host_minor), FIELD(fg_plugin, kind), FIELD(fg_plugin, name),
    FIELD(fg_plugin, version), FIELD(fg_plugin, description), FIELD(fg_plugin, options),
    FIELD(fg_plugin, option_count), FIELD(fg_plugin, option_size), FIELD(fg_plugin, init),
    FIELD(fg_plugin, deinit), FIELD(fg_plugin, vtable),
#ifdef FG_LAYOUT_FIXTURE /* tests/abi/CMakeLists.txt: a field appended to a copy of plugin.h */
    FIELD(fg_plugin, fixture_appended_field),
#endif

    /* backend.h */
    SIZE(fg_device_info), FIELD(fg_device_info, struct_size), FIELD(fg_device_info, index),
    FIELD(fg_device_info, name), FIELD(fg_device_info, total_memory),
    FIELD(fg_device_info, free_memory),

    SIZE(fg_conv2d_desc), FIELD(fg_conv2d_desc, struct_size), FIELD(fg_conv2d_desc, n),
    FIELD(fg_conv2d_desc, c), FIELD(fg_conv2d_desc, h), FIELD(fg_conv2d_desc, w),
    FIELD(fg_conv2d_desc, k), FIELD(fg_conv2d_desc, r), FIELD(fg_conv2d_desc, s),
    FIELD(fg_conv2d_desc, pad_h), FIELD(fg_conv2d_desc, pad_w),
    FIELD(fg_conv2d_desc, stride_h), FIELD(fg_conv2d_desc, stride_w),
    FIELD(fg_conv2d_desc, out_h), FIELD(fg_conv2d_desc, out_w),
    FIELD(fg_conv2d_desc, layout), /* ABI 1.9 */
    ENUM(fg_tensor_layout, FG_LAYOUT_NCHW), ENUM(fg_tensor_layout, FG_LAYOUT_NHWC), /* ABI 1.9 */

    SIZE(fg_attention_desc), FIELD(fg_attention_desc, struct_size),
    FIELD(fg_attention_desc, batch), FIELD(fg_attention_desc, seq),
    FIELD(fg_attention_desc, heads), FIELD(fg_attention_desc, head_dim),
    FIELD(fg_attention_desc, causal), FIELD(fg_attention_desc, dropout),
    FIELD(fg_attention_desc, seed), FIELD(fg_attention_desc, offset),
    FIELD(fg_attention_desc, kv_heads),

    SIZE(fg_sgd_args), FIELD(fg_sgd_args, struct_size), FIELD(fg_sgd_args, lr),
    FIELD(fg_sgd_args, momentum), FIELD(fg_sgd_args, dampening),
    FIELD(fg_sgd_args, weight_decay), FIELD(fg_sgd_args, nesterov),
    FIELD(fg_sgd_args, first_step), FIELD(fg_sgd_args, lr_dev),

    SIZE(fg_adamw_args), FIELD(fg_adamw_args, struct_size), FIELD(fg_adamw_args, lr),
    FIELD(fg_adamw_args, beta1), FIELD(fg_adamw_args, beta2), FIELD(fg_adamw_args, eps),
    FIELD(fg_adamw_args, weight_decay), FIELD(fg_adamw_args, step),
    FIELD(fg_adamw_args, step_dev),

    SIZE(fg_backend_vtable), FIELD(fg_backend_vtable, struct_size),
    FIELD(fg_backend_vtable, device_count), FIELD(fg_backend_vtable, device_info),
    FIELD(fg_backend_vtable, alloc), FIELD(fg_backend_vtable, free),
    FIELD(fg_backend_vtable, host_alloc), FIELD(fg_backend_vtable, host_free),
    FIELD(fg_backend_vtable, queue_create), FIELD(fg_backend_vtable, queue_destroy),
    FIELD(fg_backend_vtable, queue_sync), FIELD(fg_backend_vtable, copy),
    FIELD(fg_backend_vtable, supports), FIELD(fg_backend_vtable, gemm),
    FIELD(fg_backend_vtable, bias_add), FIELD(fg_backend_vtable, bias_grad),
    FIELD(fg_backend_vtable, activation_forward), FIELD(fg_backend_vtable, activation_backward),
    FIELD(fg_backend_vtable, conv2d_workspace), FIELD(fg_backend_vtable, conv2d_forward),
    FIELD(fg_backend_vtable, conv2d_backward), FIELD(fg_backend_vtable, pool2d_forward),
    FIELD(fg_backend_vtable, pool2d_backward), FIELD(fg_backend_vtable, batchnorm_forward),
    FIELD(fg_backend_vtable, batchnorm_backward), FIELD(fg_backend_vtable, dropout_forward),
    FIELD(fg_backend_vtable, dropout_backward), FIELD(fg_backend_vtable, softmax_xent_forward),
    FIELD(fg_backend_vtable, softmax_xent_backward), FIELD(fg_backend_vtable, fill),
    FIELD(fg_backend_vtable, scale), FIELD(fg_backend_vtable, axpy),
    FIELD(fg_backend_vtable, clamp), FIELD(fg_backend_vtable, sum_squares),
    FIELD(fg_backend_vtable, cast), FIELD(fg_backend_vtable, sgd_update),
    FIELD(fg_backend_vtable, adamw_update),
    FIELD(fg_backend_vtable, copy_queue_create), FIELD(fg_backend_vtable, event_create),
    FIELD(fg_backend_vtable, event_destroy), FIELD(fg_backend_vtable, event_record),
    FIELD(fg_backend_vtable, queue_wait_event), FIELD(fg_backend_vtable, event_sync),
    FIELD(fg_backend_vtable, pointwise_loss),
    FIELD(fg_backend_vtable, layernorm_forward), FIELD(fg_backend_vtable, layernorm_backward),
    FIELD(fg_backend_vtable, embedding_forward), FIELD(fg_backend_vtable, embedding_backward),
    FIELD(fg_backend_vtable, attention_workspace), FIELD(fg_backend_vtable, attention_forward),
    FIELD(fg_backend_vtable, attention_backward), FIELD(fg_backend_vtable, attention_decode),
    FIELD(fg_backend_vtable, gemm_bias), FIELD(fg_backend_vtable, host_synchronous),
    FIELD(fg_backend_vtable, classifier), FIELD(fg_backend_vtable, queue_native),
    FIELD(fg_backend_vtable, event_query),
    FIELD(fg_backend_vtable, gemm_epilogue), FIELD(fg_backend_vtable, grad_clip_coef),
    FIELD(fg_backend_vtable, sgd_fused), FIELD(fg_backend_vtable, adamw_fused),
    FIELD(fg_backend_vtable, layernorm_residual_forward),
    FIELD(fg_backend_vtable, layernorm_residual_backward),
    FIELD(fg_backend_vtable, rope_forward), FIELD(fg_backend_vtable, rope_backward),
    FIELD(fg_backend_vtable, swiglu_forward), FIELD(fg_backend_vtable, swiglu_backward),
    FIELD(fg_backend_vtable, graph_begin), FIELD(fg_backend_vtable, graph_end),
    FIELD(fg_backend_vtable, graph_launch), FIELD(fg_backend_vtable, graph_destroy),
    /* ABI 1.8: batch norm with statistics across replicas */
    FIELD(fg_backend_vtable, batchnorm_stats), FIELD(fg_backend_vtable, batchnorm_apply),
    FIELD(fg_backend_vtable, batchnorm_backward_reduce),
    FIELD(fg_backend_vtable, batchnorm_backward_apply),
    /* ABI 1.9: fp8 gemms */
    FIELD(fg_backend_vtable, gemm_fp8),
    SIZE(fg_fp8_gemm_args), FIELD(fg_fp8_gemm_args, struct_size),
    FIELD(fg_fp8_gemm_args, a_format), FIELD(fg_fp8_gemm_args, b_format),
    FIELD(fg_fp8_gemm_args, history_len), FIELD(fg_fp8_gemm_args, amax_algo),
    FIELD(fg_fp8_gemm_args, margin), FIELD(fg_fp8_gemm_args, a_scale),
    FIELD(fg_fp8_gemm_args, a_history), FIELD(fg_fp8_gemm_args, b_scale),
    FIELD(fg_fp8_gemm_args, b_history), FIELD(fg_fp8_gemm_args, update_a),
    FIELD(fg_fp8_gemm_args, update_b),
    /* ABI 1.9: rope scaling */
    FIELD(fg_backend_vtable, rope_freq_forward), FIELD(fg_backend_vtable, rope_freq_backward),
    /* ABI 1.10: channels-last activations */
    FIELD(fg_backend_vtable, transpose_batched),
    /* ABI 1.10: dropout under CUDA graphs */
    FIELD(fg_backend_vtable, dropout_forward_dev),
    /* ABI 1.10: the loss scaler on the device */
    FIELD(fg_backend_vtable, loss_scale_update),
    FIELD(fg_backend_vtable, softmax_xent_backward_scaled),
    /* ABI 1.11: label smoothing */
    FIELD(fg_backend_vtable, classifier_smoothed),
    FIELD(fg_sgd_args, skip_dev), FIELD(fg_adamw_args, skip_dev),
    FIELD(fg_precision_vtable, scaler_rule),
    SIZE(fg_loss_scale_dev), FIELD(fg_loss_scale_dev, scale),
    FIELD(fg_loss_scale_dev, growth_tracker), FIELD(fg_loss_scale_dev, hysteresis_left),
    FIELD(fg_loss_scale_dev, skipped_steps), FIELD(fg_loss_scale_dev, found_inf),
    SIZE(fg_loss_scale_rule), FIELD(fg_loss_scale_rule, struct_size),
    FIELD(fg_loss_scale_rule, growth_factor), FIELD(fg_loss_scale_rule, backoff_factor),
    FIELD(fg_loss_scale_rule, min_scale), FIELD(fg_loss_scale_rule, growth_interval),
    FIELD(fg_loss_scale_rule, hysteresis),
    SIZE(fg_backend_op_desc),
    FIELD(fg_backend_op_desc, name), FIELD(fg_backend_op_desc, offset),
    FIELD(fg_backend_op_desc, dtype_count), FIELD(fg_backend_op_desc, dtype_names),

    /* precision.h */
    SIZE(fg_precision_info), FIELD(fg_precision_info, struct_size),
    FIELD(fg_precision_info, param_dtype), FIELD(fg_precision_info, compute_dtype),
    FIELD(fg_precision_info, grad_dtype), FIELD(fg_precision_info, master_weights),
    FIELD(fg_precision_info, loss_scaling),
    FIELD(fg_precision_info, fp8_format), FIELD(fg_precision_info, fp8_amax_history_len),
    FIELD(fg_precision_info, fp8_amax_compute_algo), FIELD(fg_precision_info, fp8_margin),

    SIZE(fg_precision_vtable), FIELD(fg_precision_vtable, struct_size),
    FIELD(fg_precision_vtable, info), FIELD(fg_precision_vtable, loss_scale),
    FIELD(fg_precision_vtable, update_scale), FIELD(fg_precision_vtable, get_scaler_state),
    FIELD(fg_precision_vtable, set_scaler_state),

    SIZE(fg_loss_scaler_state), FIELD(fg_loss_scaler_state, struct_size),
    FIELD(fg_loss_scaler_state, scale), FIELD(fg_loss_scaler_state, growth_tracker),
    FIELD(fg_loss_scaler_state, hysteresis_left), FIELD(fg_loss_scaler_state, skipped_steps),

    /* comm.h */
    SIZE(fg_comm_topology), FIELD(fg_comm_topology, struct_size), FIELD(fg_comm_topology, rank),
    FIELD(fg_comm_topology, world_size), FIELD(fg_comm_topology, local_rank),
    FIELD(fg_comm_topology, local_size), FIELD(fg_comm_topology, node),
    FIELD(fg_comm_topology, node_count),

    SIZE(fg_comm_vtable), FIELD(fg_comm_vtable, struct_size), FIELD(fg_comm_vtable, topology),
    FIELD(fg_comm_vtable, all_reduce), FIELD(fg_comm_vtable, reduce_scatter),
    FIELD(fg_comm_vtable, all_gather), FIELD(fg_comm_vtable, broadcast),
    FIELD(fg_comm_vtable, send), FIELD(fg_comm_vtable, recv), FIELD(fg_comm_vtable, barrier),
    FIELD(fg_comm_vtable, all_reduce_start), FIELD(fg_comm_vtable, test),
    FIELD(fg_comm_vtable, wait), FIELD(fg_comm_vtable, reduce_scatter_v_start),
    FIELD(fg_comm_vtable, all_gather_v_start), FIELD(fg_comm_vtable, abort),
    FIELD(fg_comm_vtable, wait_on_queue),

    /* data.h */
    SIZE(fg_dataset_info), FIELD(fg_dataset_info, struct_size), FIELD(fg_dataset_info, length),
    FIELD(fg_dataset_info, rank), FIELD(fg_dataset_info, shape),
    FIELD(fg_dataset_info, sample_dtype), FIELD(fg_dataset_info, num_classes),
    FIELD(fg_dataset_info, label_dtype), FIELD(fg_dataset_info, label_elems),
    FIELD(fg_dataset_info, stand_in),

    SIZE(fg_data_read_args), FIELD(fg_data_read_args, struct_size),
    FIELD(fg_data_read_args, split), FIELD(fg_data_read_args, seed),
    FIELD(fg_data_read_args, epoch),

    SIZE(fg_data_vtable), FIELD(fg_data_vtable, struct_size), FIELD(fg_data_vtable, open),
    FIELD(fg_data_vtable, close), FIELD(fg_data_vtable, read),

    /* callback.h */
    SIZE(fg_metric), FIELD(fg_metric, name), FIELD(fg_metric, value),

    SIZE(fg_event), FIELD(fg_event, struct_size), FIELD(fg_event, type), FIELD(fg_event, epoch),
    FIELD(fg_event, global_step), FIELD(fg_event, step_in_epoch),
    FIELD(fg_event, steps_per_epoch), FIELD(fg_event, learning_rate), FIELD(fg_event, metrics),
    FIELD(fg_event, metric_count), FIELD(fg_event, is_rank_zero), FIELD(fg_event, run_dir),
    FIELD(fg_event, max_epochs), FIELD(fg_event, nonfinite_layer),

    SIZE(fg_callback_action), FIELD(fg_callback_action, struct_size),
    FIELD(fg_callback_action, stop), FIELD(fg_callback_action, reason),
    FIELD(fg_callback_action, save_checkpoint), FIELD(fg_callback_action, checkpoint_path),
    FIELD(fg_callback_action, checkpoint_also_path),

    SIZE(fg_callback_requests), FIELD(fg_callback_requests, struct_size),
    FIELD(fg_callback_requests, flags), FIELD(fg_callback_requests, finite_check_every),

    SIZE(fg_callback_vtable), FIELD(fg_callback_vtable, struct_size),
    FIELD(fg_callback_vtable, on_event), FIELD(fg_callback_vtable, requests),

    /* strategy.h */
    SIZE(fg_strategy_info), FIELD(fg_strategy_info, struct_size),
    FIELD(fg_strategy_info, launch_mode), FIELD(fg_strategy_info, needs_comm),
    FIELD(fg_strategy_info, devices), FIELD(fg_strategy_info, rank),
    FIELD(fg_strategy_info, world_size), FIELD(fg_strategy_info, half_storage),
    FIELD(fg_strategy_info, own_master), FIELD(fg_strategy_info, primary_grads),

    SIZE(fg_batch), FIELD(fg_batch, struct_size), FIELD(fg_batch, samples),
    FIELD(fg_batch, labels), FIELD(fg_batch, count), FIELD(fg_batch, sample_elems),
    FIELD(fg_batch, staging), FIELD(fg_batch, label_elems), FIELD(fg_batch, inputs),
    FIELD(fg_batch, inputs_dtype), FIELD(fg_batch, targets), FIELD(fg_batch, targets_dtype),

    SIZE(fg_step_metrics), FIELD(fg_step_metrics, struct_size),
    FIELD(fg_step_metrics, loss_sum), FIELD(fg_step_metrics, correct),
    FIELD(fg_step_metrics, count),

    SIZE(fg_train_services), FIELD(fg_train_services, struct_size),
    FIELD(fg_train_services, ctx), FIELD(fg_train_services, param_count),
    FIELD(fg_train_services, buffer_count), FIELD(fg_train_services, max_batch),
    FIELD(fg_train_services, layer_count), FIELD(fg_train_services, param_dtype),
    FIELD(fg_train_services, grad_dtype), FIELD(fg_train_services, strategy_master),
    FIELD(fg_train_services, layer_info), FIELD(fg_train_services, create),
    FIELD(fg_train_services, destroy), FIELD(fg_train_services, queue),
    FIELD(fg_train_services, forward), FIELD(fg_train_services, backward),
    FIELD(fg_train_services, output), FIELD(fg_train_services, input_grad),
    FIELD(fg_train_services, region), FIELD(fg_train_services, memory),
    FIELD(fg_train_services, read_metrics), FIELD(fg_train_services, grad_norm_sq),
    FIELD(fg_train_services, scale_grads), FIELD(fg_train_services, optimizer_step),
    FIELD(fg_train_services, set_grad_ready_hook),
    FIELD(fg_train_services, set_layer_memory_hook), FIELD(fg_train_services, read_init_params),
    FIELD(fg_train_services, set_replica_allreduce), /* ABI 1.8 */

    SIZE(fg_stage_spec), FIELD(fg_stage_spec, struct_size), FIELD(fg_stage_spec, device),
    FIELD(fg_stage_spec, max_batch), FIELD(fg_stage_spec, first_layer),
    FIELD(fg_stage_spec, layer_count), FIELD(fg_stage_spec, chunks),
    FIELD(fg_stage_spec, no_params), FIELD(fg_stage_spec, no_grads),
    FIELD(fg_stage_spec, opt_range), FIELD(fg_stage_spec, opt_offset),
    FIELD(fg_stage_spec, opt_count), FIELD(fg_stage_spec, rng_stream),

    SIZE(fg_step_args), FIELD(fg_step_args, struct_size), FIELD(fg_step_args, lr),
    FIELD(fg_step_args, skip), FIELD(fg_step_args, step),

    SIZE(fg_layer_desc), FIELD(fg_layer_desc, struct_size), FIELD(fg_layer_desc, name),
    FIELD(fg_layer_desc, param_offset), FIELD(fg_layer_desc, param_count),
    FIELD(fg_layer_desc, param_bytes), FIELD(fg_layer_desc, activation_bytes),
    FIELD(fg_layer_desc, out_elems), FIELD(fg_layer_desc, flops),

    SIZE(fg_memory_report), FIELD(fg_memory_report, struct_size),
    FIELD(fg_memory_report, device), FIELD(fg_memory_report, param_bytes),
    FIELD(fg_memory_report, master_bytes), FIELD(fg_memory_report, grad_bytes),
    FIELD(fg_memory_report, optimizer_bytes), FIELD(fg_memory_report, activation_bytes),
    FIELD(fg_memory_report, other_bytes),

    SIZE(fg_strategy_vtable), FIELD(fg_strategy_vtable, struct_size),
    FIELD(fg_strategy_vtable, info), FIELD(fg_strategy_vtable, setup),
    FIELD(fg_strategy_vtable, teardown), FIELD(fg_strategy_vtable, train_step),
    FIELD(fg_strategy_vtable, optimizer_step), FIELD(fg_strategy_vtable, eval_step),
    FIELD(fg_strategy_vtable, read_metrics), FIELD(fg_strategy_vtable, primary_replica),
    FIELD(fg_strategy_vtable, sync_grads), FIELD(fg_strategy_vtable, grad_norm_sq),
    FIELD(fg_strategy_vtable, scale_grads), FIELD(fg_strategy_vtable, memory_report),
    FIELD(fg_strategy_vtable, gather_state), FIELD(fg_strategy_vtable, scatter_state),
    FIELD(fg_strategy_vtable, shard_describe), FIELD(fg_strategy_vtable, shard_read),

    SIZE(fg_shard_desc), FIELD(fg_shard_desc, struct_size),
    FIELD(fg_shard_desc, per_rank_files), FIELD(fg_shard_desc, layout),
    FIELD(fg_shard_desc, offset), FIELD(fg_shard_desc, count),

    /* enums */
    ENUM(fg_status, FG_OK), ENUM(fg_status, FG_UNAVAILABLE), ENUM(fg_status, FG_INCOMPATIBLE),
    ENUM(fg_status, FG_INVALID_ARGUMENT), ENUM(fg_status, FG_NOT_FOUND),
    ENUM(fg_status, FG_OUT_OF_MEMORY), ENUM(fg_status, FG_BACKEND_ERROR),
    ENUM(fg_status, FG_INTERNAL), ENUM(fg_status, FG_FATAL), ENUM(fg_status, FG_IO_ERROR),

    ENUM(fg_plugin_kind, FG_KIND_BACKEND), ENUM(fg_plugin_kind, FG_KIND_PRECISION),
    ENUM(fg_plugin_kind, FG_KIND_STRATEGY), ENUM(fg_plugin_kind, FG_KIND_COMM),
    ENUM(fg_plugin_kind, FG_KIND_DATA), ENUM(fg_plugin_kind, FG_KIND_CALLBACK),

    ENUM(fg_dtype, FG_F32), ENUM(fg_dtype, FG_F16), ENUM(fg_dtype, FG_BF16),
    ENUM(fg_dtype, FG_F64), ENUM(fg_dtype, FG_I32), ENUM(fg_dtype, FG_I64),
    ENUM(fg_dtype, FG_F8E4M3), ENUM(fg_dtype, FG_F8E5M2), /* ABI 1.9 */
    ENUM(fg_fp8_format, FG_FP8_NONE), ENUM(fg_fp8_format, FG_FP8_HYBRID),
    ENUM(fg_fp8_format, FG_FP8_E4M3), ENUM(fg_fp8_amax_algo, FG_FP8_AMAX_MAX),
    ENUM(fg_fp8_amax_algo, FG_FP8_AMAX_MOST_RECENT),
    ENUM(fg_dtype, FG_U8),

    ENUM(fg_option_type, FG_OPT_BOOL), ENUM(fg_option_type, FG_OPT_INT),
    ENUM(fg_option_type, FG_OPT_FLOAT), ENUM(fg_option_type, FG_OPT_STRING),
    ENUM(fg_option_type, FG_OPT_ENUM), ENUM(fg_option_type, FG_OPT_LIST),

    ENUM(fg_log_level, FG_LOG_ERROR), ENUM(fg_log_level, FG_LOG_WARN),
    ENUM(fg_log_level, FG_LOG_INFO), ENUM(fg_log_level, FG_LOG_DEBUG),

    ENUM(fg_activation, FG_ACT_NONE), ENUM(fg_activation, FG_ACT_RELU),
    ENUM(fg_activation, FG_ACT_GELU), ENUM(fg_activation, FG_ACT_TANH),
    ENUM(fg_activation, FG_ACT_SIGMOID),
    ENUM(fg_gemm_epilogue, FG_EPI_BIAS), ENUM(fg_gemm_epilogue, FG_EPI_GELU_AUX_BIAS),
    ENUM(fg_gemm_epilogue, FG_EPI_DGELU_BGRAD), ENUM(fg_gemm_epilogue, FG_EPI_BGRADB),
    ENUM(fg_pool_mode, FG_POOL_MAX), ENUM(fg_pool_mode, FG_POOL_AVG),
    ENUM(fg_pointwise_loss_kind, FG_LOSS_MSE), ENUM(fg_pointwise_loss_kind, FG_LOSS_BCE_LOGITS),
    ENUM(fg_backend_op, FG_OP_GEMM), ENUM(fg_backend_op, FG_OP_BIAS_ADD),
    ENUM(fg_backend_op, FG_OP_BIAS_GRAD), ENUM(fg_backend_op, FG_OP_ACTIVATION_FORWARD),
    ENUM(fg_backend_op, FG_OP_ACTIVATION_BACKWARD), ENUM(fg_backend_op, FG_OP_CONV2D_FORWARD),
    ENUM(fg_backend_op, FG_OP_CONV2D_BACKWARD), ENUM(fg_backend_op, FG_OP_POOL2D_FORWARD),
    ENUM(fg_backend_op, FG_OP_POOL2D_BACKWARD), ENUM(fg_backend_op, FG_OP_BATCHNORM_FORWARD),
    ENUM(fg_backend_op, FG_OP_BATCHNORM_BACKWARD), ENUM(fg_backend_op, FG_OP_DROPOUT_FORWARD),
    ENUM(fg_backend_op, FG_OP_DROPOUT_BACKWARD),
    ENUM(fg_backend_op, FG_OP_SOFTMAX_XENT_FORWARD),
    ENUM(fg_backend_op, FG_OP_SOFTMAX_XENT_BACKWARD), ENUM(fg_backend_op, FG_OP_FILL),
    ENUM(fg_backend_op, FG_OP_SCALE), ENUM(fg_backend_op, FG_OP_AXPY),
    ENUM(fg_backend_op, FG_OP_CLAMP), ENUM(fg_backend_op, FG_OP_SUM_SQUARES),
    ENUM(fg_backend_op, FG_OP_CAST), ENUM(fg_backend_op, FG_OP_SGD_UPDATE),
    ENUM(fg_backend_op, FG_OP_ADAMW_UPDATE), ENUM(fg_backend_op, FG_OP_POINTWISE_LOSS),
    ENUM(fg_backend_op, FG_OP_LAYERNORM_FORWARD),
    ENUM(fg_backend_op, FG_OP_LAYERNORM_BACKWARD), ENUM(fg_backend_op, FG_OP_EMBEDDING_FORWARD),
    ENUM(fg_backend_op, FG_OP_EMBEDDING_BACKWARD), ENUM(fg_backend_op, FG_OP_ATTENTION_FORWARD),
    ENUM(fg_backend_op, FG_OP_ATTENTION_BACKWARD), ENUM(fg_backend_op, FG_OP_ATTENTION_DECODE),
    ENUM(fg_backend_op, FG_OP_GEMM_BIAS), ENUM(fg_backend_op, FG_OP_CLASSIFIER),
    ENUM(fg_backend_op, FG_OP_GEMM_EPILOGUE),
    ENUM(fg_backend_op, FG_OP_GRAD_CLIP_COEF), ENUM(fg_backend_op, FG_OP_SGD_FUSED),
    ENUM(fg_backend_op, FG_OP_ADAMW_FUSED),
    ENUM(fg_backend_op, FG_OP_LAYERNORM_RESIDUAL_FORWARD),
    ENUM(fg_backend_op, FG_OP_LAYERNORM_RESIDUAL_BACKWARD),
    ENUM(fg_backend_op, FG_OP_ROPE_FORWARD), ENUM(fg_backend_op, FG_OP_ROPE_BACKWARD),
    ENUM(fg_backend_op, FG_OP_SWIGLU_FORWARD), ENUM(fg_backend_op, FG_OP_SWIGLU_BACKWARD),
    ENUM(fg_backend_op, FG_OP_BATCHNORM_STATS), ENUM(fg_backend_op, FG_OP_BATCHNORM_APPLY),
    ENUM(fg_backend_op, FG_OP_BATCHNORM_BACKWARD_REDUCE),
    ENUM(fg_backend_op, FG_OP_BATCHNORM_BACKWARD_APPLY), /* ABI 1.8 */
    ENUM(fg_backend_op, FG_OP_GEMM_FP8), /* ABI 1.9 */
    ENUM(fg_backend_op, FG_OP_ROPE_FREQ_FORWARD),
    ENUM(fg_backend_op, FG_OP_ROPE_FREQ_BACKWARD), /* ABI 1.9 */
    ENUM(fg_backend_op, FG_OP_TRANSPOSE_BATCHED), /* ABI 1.10 */
    ENUM(fg_backend_op, FG_OP_DROPOUT_FORWARD_DEV), /* ABI 1.10 */
    ENUM(fg_backend_op, FG_OP_LOSS_SCALE_UPDATE),
    ENUM(fg_backend_op, FG_OP_SOFTMAX_XENT_BACKWARD_SCALED), /* ABI 1.10 */
    ENUM(fg_backend_op, FG_OP_CLASSIFIER_SMOOTHED), /* ABI 1.11 */
    /* FG_OP_COUNT is not recorded: it grows with every op a minor appends. */
    ENUM(fg_reduce_op, FG_REDUCE_SUM), ENUM(fg_reduce_op, FG_REDUCE_AVG),
    ENUM(fg_reduce_op, FG_REDUCE_MAX),
    ENUM(fg_split, FG_SPLIT_TRAIN), ENUM(fg_split, FG_SPLIT_VAL), ENUM(fg_split, FG_SPLIT_TEST),
    ENUM(fg_split, FG_SPLIT_PREDICT),
    ENUM(fg_event_type, FG_EVENT_FIT_START), ENUM(fg_event_type, FG_EVENT_EPOCH_START),
    ENUM(fg_event_type, FG_EVENT_TRAIN_STEP_END), ENUM(fg_event_type, FG_EVENT_VALIDATION_END),
    ENUM(fg_event_type, FG_EVENT_EPOCH_END), ENUM(fg_event_type, FG_EVENT_FIT_END),
    ENUM(fg_event_type, FG_EVENT_TEST_END), ENUM(fg_event_type, FG_EVENT_EXCEPTION),
    ENUM(fg_event_type, FG_EVENT_NONFINITE),
    ENUM(fg_launch_mode, FG_LAUNCH_ONE_PROCESS), ENUM(fg_launch_mode, FG_LAUNCH_PROCESS_PER_DEVICE),

    /* constants a plugin compiles in (FG_ABI_MINOR and FG_KIND_LAST may grow) */
    CONST(FG_PLUGIN_MAGIC), CONST(FG_ABI_MAJOR), CONST(FG_ERROR_MESSAGE_MAX),
    CONST(FG_MAX_DIMS), CONST(FG_KIND_FIRST), CONST(FG_OP_MAX_DTYPES),
};

#define CURRENT_COUNT (sizeof current / sizeof current[0])

/* Alignment of each struct, to tell padding from unlisted fields. */
typedef struct struct_align {
    const char *name;
    size_t align;
} struct_align;

#define STRUCT_ALIGN(T) {#T, alignof(T)}
static const struct_align aligns[] = {
    STRUCT_ALIGN(fg_error), STRUCT_ALIGN(fg_option), STRUCT_ALIGN(fg_host),
    STRUCT_ALIGN(fg_plugin), STRUCT_ALIGN(fg_device_info), STRUCT_ALIGN(fg_conv2d_desc),
    STRUCT_ALIGN(fg_attention_desc),
    STRUCT_ALIGN(fg_sgd_args), STRUCT_ALIGN(fg_adamw_args), STRUCT_ALIGN(fg_fp8_gemm_args), STRUCT_ALIGN(fg_backend_vtable),
    STRUCT_ALIGN(fg_precision_info), STRUCT_ALIGN(fg_precision_vtable),
    STRUCT_ALIGN(fg_backend_op_desc), STRUCT_ALIGN(fg_loss_scaler_state),
    STRUCT_ALIGN(fg_comm_topology), STRUCT_ALIGN(fg_comm_vtable),
    STRUCT_ALIGN(fg_dataset_info), STRUCT_ALIGN(fg_data_read_args),
    STRUCT_ALIGN(fg_data_vtable), STRUCT_ALIGN(fg_metric),
    STRUCT_ALIGN(fg_event), STRUCT_ALIGN(fg_callback_action),
    STRUCT_ALIGN(fg_callback_requests),
    STRUCT_ALIGN(fg_callback_vtable), STRUCT_ALIGN(fg_strategy_info),
    STRUCT_ALIGN(fg_strategy_vtable), STRUCT_ALIGN(fg_stage_spec), STRUCT_ALIGN(fg_step_args), STRUCT_ALIGN(fg_layer_desc), STRUCT_ALIGN(fg_batch), STRUCT_ALIGN(fg_step_metrics),
    STRUCT_ALIGN(fg_train_services), STRUCT_ALIGN(fg_loss_scale_dev),
    STRUCT_ALIGN(fg_loss_scale_rule),
};

static void format_line(const layout_line *l, char *out, size_t size)
{
    if (strcmp(l->what, "field") == 0)
        snprintf(out, size, "field %s %lld %lld", l->key, l->value, l->size);
    else
        snprintf(out, size, "%s %s %lld", l->what, l->key, l->value);
}

static const layout_line *find_current(const char *what, const char *key)
{
    for (size_t i = 0; i < CURRENT_COUNT; i++)
        if (strcmp(current[i].what, what) == 0 && strcmp(current[i].key, key) == 0)
            return &current[i];
    return NULL;
}

/* "fg_event.run_dir" -> length of "fg_event" */
static size_t owner_length(const char *key)
{
    const char *dot = strchr(key, '.');
    return dot ? (size_t)(dot - key) : strlen(key);
}

static int same_owner(const char *a, const char *b)
{
    size_t n = owner_length(a);
    return n == owner_length(b) && strncmp(a, b, n) == 0;
}

#define MAX_RECORD 1024

typedef struct record_line {
    char what[16];
    char key[128];
    long long value, size;
    int line;
    int minor; /* the `minor N` section the line is in */
} record_line;

/* The record's last `minor N` section; -1 when it has none. */
static int record_minor = -1;

static int read_record(const char *path, record_line *rec, size_t *count)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "%s: cannot open the recorded layout\n", path);
        return 0;
    }
    char buf[512];
    int line = 0, ok = 1;
    *count = 0;
    while (fgets(buf, sizeof buf, f)) {
        line++;
        if (buf[0] == '#' || buf[0] == '\n')
            continue;
        int minor;
        if (sscanf(buf, "minor %d", &minor) == 1) {
            if (minor != record_minor + 1) {
                fprintf(stderr, "%s:%d: FAIL: section minor %d follows minor %d: minors are "
                        "recorded in order, one section each\n", path, line, minor, record_minor);
                ok = 0;
                break;
            }
            record_minor = minor;
            continue;
        }
        record_line *r = &rec[*count];
        r->minor = record_minor;
        r->size = 0;
        r->line = line;
        int n = sscanf(buf, "%15s %127s %lld %lld", r->what, r->key, &r->value, &r->size);
        int want = strcmp(r->what, "field") == 0 ? 4 : 3;
        if (n != want || *count + 1 >= MAX_RECORD) {
            fprintf(stderr, "%s:%d: malformed line: %s", path, line, buf);
            ok = 0;
            break;
        }
        (*count)++;
    }
    fclose(f);
    return ok;
}

static const record_line *find_record(const record_line *rec, size_t count, const char *what,
                                      const char *key)
{
    for (size_t i = count; i-- > 0;) /* the latest: a sizeof is recorded again as it grows */
        if (strcmp(rec[i].what, what) == 0 && strcmp(rec[i].key, key) == 0)
            return &rec[i];
    return NULL;
}

/* One recorded line against the headers; returns 1 when it still holds. A sizeof recorded
 * again under a later minor is checked in its latest value only. */
static int check_recorded(const char *path, const record_line *r, const record_line *latest)
{
    const layout_line *c = find_current(r->what, r->key);
    if (c == NULL) {
        fprintf(stderr, "%s:%d: FAIL: %s %s is recorded but gone (removed or renamed)\n", path,
                r->line, r->what, r->key);
        return 0;
    }
    if (strcmp(r->what, "sizeof") == 0) {
        if (c->value < r->value) {
            fprintf(stderr, "%s:%d: FAIL: sizeof %s shrank from %lld to %lld\n", path, r->line,
                    r->key, r->value, c->value);
            return 0;
        }
        if (r != latest)
            return 1;
        if (c->value > r->value) {
            fprintf(stderr, "%s:%d: FAIL: sizeof %s grew from %lld to %lld: fields were "
                    "appended without recording them under a new minor\n", path, r->line,
                    r->key, r->value, c->value);
            return 0;
        }
        return 1;
    }
    if (strcmp(r->what, "field") == 0) {
        if (c->value != r->value || c->size != r->size) {
            fprintf(stderr,
                    "%s:%d: FAIL: field %s was at offset %lld size %lld, now offset %lld size "
                    "%lld: a field was inserted, removed, reordered or retyped\n",
                    path, r->line, r->key, r->value, r->size, c->value, c->size);
            return 0;
        }
        return 1;
    }
    if (c->value != r->value) {
        fprintf(stderr, "%s:%d: FAIL: %s %s was %lld, now %lld\n", path, r->line, r->what,
                r->key, r->value, c->value);
        return 0;
    }
    return 1;
}

/* A line of the headers that is not recorded: fine when appended, a break otherwise. */
static int check_new(const char *path, const layout_line *c, const record_line *rec,
                     size_t count)
{
    char text[256];
    format_line(c, text, sizeof text);
    for (size_t i = 0; i < count; i++) {
        const record_line *r = &rec[i];
        if (strcmp(r->what, c->what) != 0 || !same_owner(r->key, c->key))
            continue;
        if (strcmp(c->what, "field") == 0 && c->value < r->value + r->size) {
            fprintf(stderr, "%s: FAIL: new field %s at offset %lld sits before the end of "
                    "recorded field %s: new fields go at the end\n", path, c->key, c->value,
                    r->key);
            return 0;
        }
        if (strcmp(c->what, "enum") == 0 && c->value == r->value) {
            fprintf(stderr, "%s: FAIL: new enum value %s = %lld reuses the value of %s\n",
                    path, c->key, c->value, r->key);
            return 0;
        }
    }
    fprintf(stderr, "%s: FAIL: %s is not recorded: an appended field needs FG_ABI_MINOR "
            "bumped to %d and its lines recorded under `minor %d` (abi_layout --print-new)\n",
            path, text, record_minor + 1, record_minor + 1);
    return 0;
}

/* The headers' minor against the record's last section. */
static int check_minor(const char *path)
{
    if (record_minor < 0) {
        fprintf(stderr, "%s: FAIL: no `minor 0` section: the record is not frozen\n", path);
        return 0;
    }
    if (FG_ABI_MINOR != record_minor) {
        fprintf(stderr, "%s: FAIL: FG_ABI_MINOR is %d but the record's last section is minor "
                "%d: record what minor %d appended (abi_layout --print-new) under `minor %d`\n",
                path, FG_ABI_MINOR, record_minor, FG_ABI_MINOR, FG_ABI_MINOR);
        return 0;
    }
    return 1;
}

/* Bytes past the last listed field, beyond padding: fields this program does not list. */
static void note_unlisted_fields(void)
{
    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
        long long end = 0, size = 0;
        for (size_t i = 0; i < CURRENT_COUNT; i++) {
            if (!same_owner(current[i].key, aligns[a].name))
                continue;
            if (strcmp(current[i].what, "sizeof") == 0)
                size = current[i].value;
            else if (current[i].value + current[i].size > end)
                end = current[i].value + current[i].size;
        }
        if (size - end >= (long long)aligns[a].align)
            printf("note: %s has %lld bytes after its last listed field: list the new fields "
                   "in tests/abi/abi_layout.c\n", aligns[a].name, size - end);
    }
}

static int check(const char *path)
{
    static record_line rec[MAX_RECORD];
    size_t count = 0;
    if (!read_record(path, rec, &count))
        return 1;
    if (count == 0) {
        fprintf(stderr, "%s: FAIL: the record is empty\n", path);
        return 1;
    }
    int failures = !check_minor(path);
    for (size_t i = 0; i < count; i++)
        failures += !check_recorded(path, &rec[i],
                                    find_record(rec, count, rec[i].what, rec[i].key));
    for (size_t i = 0; i < CURRENT_COUNT; i++)
        if (find_record(rec, count, current[i].what, current[i].key) == NULL)
            failures += !check_new(path, &current[i], rec, count);
    note_unlisted_fields();
    if (failures) {
        fprintf(stderr, "%d ABI layout break(s) against %s\n", failures, path);
        return 1;
    }
    printf("abi layout: %zu recorded lines hold at ABI %d.%d\n", count, FG_ABI_MAJOR,
           FG_ABI_MINOR);
    return 0;
}

/* The lines of the headers the record lacks (a grown struct's sizeof included), to append
 * under the new minor's section. */
static int print_new(const char *path)
{
    static record_line rec[MAX_RECORD];
    size_t count = 0;
    if (!read_record(path, rec, &count))
        return 1;
    printf("minor %d\n", FG_ABI_MINOR);
    char text[256];
    for (size_t i = 0; i < CURRENT_COUNT; i++) {
        const record_line *r = find_record(rec, count, current[i].what, current[i].key);
        if (r && r->value == current[i].value)
            continue;
        format_line(&current[i], text, sizeof text);
        printf("%s\n", text);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--print") == 0) {
        printf("# fulgur plugin ABI major 1: layout on LP64 (x86_64, aarch64), frozen at 1.0.\n"
               "# Written by `abi_layout --print`; checked by ctest abi.layout. Append only:\n"
               "# a new minor appends a `minor N` section (abi_layout --print-new).\n"
               "minor %d\n", FG_ABI_MINOR);
        char text[256];
        for (size_t i = 0; i < CURRENT_COUNT; i++) {
            format_line(&current[i], text, sizeof text);
            printf("%s\n", text);
        }
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--check") == 0)
        return check(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--print-new") == 0)
        return print_new(argv[2]);
    fprintf(stderr, "usage: %s --print | --print-new LAYOUT_FILE | --check LAYOUT_FILE\n",
            argv[0]);
    return 2;
}
