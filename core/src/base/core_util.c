/* What every core folder shares: the monotonic clock (COUNT is a macro in core_util.h). */
#include <time.h>

#include "core_util.h"

double fg_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
