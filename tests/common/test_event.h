/* Events as the trainer sends them to a callback plugin, for the tests that drive one. */
#ifndef FG_TEST_EVENT_H
#define FG_TEST_EVENT_H

#include <fulgur/callback.h>

/* Rank 0, no metrics, no nonfinite layer; step_in_epoch is global_step less the steps of
 * the epochs before (0 when steps_per_epoch is not known, <= 0). */
fg_event fg_test_event(uint32_t type, int64_t epoch, int64_t global_step,
                       int64_t steps_per_epoch, double learning_rate, const char *run_dir);

#endif
