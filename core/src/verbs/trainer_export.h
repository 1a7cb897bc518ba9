/* fulgur export: the model's weights (init_from's, or --ckpt-path's) in Hugging Face's Llama
 * layout, model.safetensors and config.json, into [export] out. */
#ifndef FG_TRAINER_EXPORT_H
#define FG_TRAINER_EXPORT_H

#include "fulgur/plugin.h"
#include "trainer.h"

fg_status fg_trainer_export(const fg_verb_model *vm, fg_error *err);

#endif
