/* The trainer loops. */
#include "trainer.h"

fg_status fg_trainer_run(fg_runtime *rt, fg_verb verb, fg_error *err)
{
    return fg_error_set(err, FG_UNAVAILABLE, "fulgur: training is not built yet");
}
