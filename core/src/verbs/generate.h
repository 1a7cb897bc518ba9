/* fulgur generate: a language model's continuation of [generate] prompt, or with
 * [generate] chat = true (fulgur chat) its replies to the turns read from stdin. */
#ifndef FG_GENERATE_H
#define FG_GENERATE_H

#include "fulgur/plugin.h"

struct fg_trainer;

fg_status fg_trainer_generate(struct fg_trainer *t, fg_error *err);

#endif
