/* fulgur generate: a language model's continuation of [generate] prompt, or with
 * [generate] chat = true (fulgur chat) its replies to the turns read from stdin. */
#ifndef FG_GENERATE_H
#define FG_GENERATE_H

#include "fulgur/plugin.h"
#include "trainer.h"

fg_status fg_trainer_generate(const fg_verb_model *vm, fg_error *err);

#endif
