/* Events as the trainer sends them; see test_event.h. */
#include "test_event.h"

#include <string.h>

fg_event fg_test_event(uint32_t type, int64_t epoch, int64_t global_step,
                       int64_t steps_per_epoch, double learning_rate, const char *run_dir)
{
    fg_event e;
    memset(&e, 0, sizeof e);
    e.struct_size = sizeof e;
    e.type = type;
    e.epoch = epoch;
    e.global_step = global_step;
    e.steps_per_epoch = steps_per_epoch;
    e.step_in_epoch = steps_per_epoch > 0 ? global_step - epoch * steps_per_epoch : 0;
    e.learning_rate = learning_rate;
    e.is_rank_zero = 1;
    e.run_dir = run_dir;
    return e;
}
