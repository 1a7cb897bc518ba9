/* The HParams dashboard's summaries (tensorboard/plugins/hparams), hand-encoded like the
 * scalars in tb_event.c. Each is an Event whose summary holds one Value:
 *   Value { tag = 1; TensorProto tensor = 8; SummaryMetadata metadata = 9 }
 *   tensor:   the plugin's null tensor, TensorProto{dtype: DT_FLOAT, tensor_shape {dim {size: 0}}}
 *   metadata: SummaryMetadata{plugin_data = 1: PluginData{plugin_name = 1: "hparams",
 *             content = 2: HParamsPluginData bytes}}
 *   HParamsPluginData { int32 version = 1 (0, left out); oneof data { Experiment
 *       experiment = 2; SessionStartInfo session_start_info = 3; SessionEndInfo
 *       session_end_info = 4; } }
 *   Experiment { double time_created_secs = 3; repeated HParamInfo hparam_infos = 4;
 *       repeated MetricInfo metric_infos = 5 }
 *   HParamInfo { string name = 1; DataType type = 4 }  (STRING 1, BOOL 2, FLOAT64 3)
 *   MetricInfo { MetricName name = 1 { string tag = 2 } }
 *   SessionStartInfo { map<string, google.protobuf.Value> hparams = 1 (entries {key = 1;
 *       value = 2}); double start_time_secs = 5 }
 *   google.protobuf.Value { double number_value = 2; string string_value = 3;
 *       bool bool_value = 4 }
 *   SessionEndInfo { Status status = 1 (SUCCESS 1, FAILURE 2); double end_time_secs = 2 }
 * Tags: _hparams_/experiment, _hparams_/session_start_info, _hparams_/session_end_info. */
#ifndef TB_HPARAMS_H
#define TB_HPARAMS_H

#include <fulgur/plugin.h>

#include "tb_event.h"

enum { TB_STATUS_SUCCESS = 1, TB_STATUS_FAILURE = 2 };

/* The hyperparameters: every config entry as "section.key", typed FLOAT64 when the value
 * is a number, BOOL for true/false, else STRING. The metrics: {train,val,test}/{loss,acc}.
 * Returns 0, or -1 when out of memory. */
int tb_encode_hparams_experiment(tb_bytes *out, double wall_time, const fg_host *host);
int tb_encode_hparams_session_start(tb_bytes *out, double wall_time, const fg_host *host);
int tb_encode_hparams_session_end(tb_bytes *out, double wall_time, int status);

#endif
