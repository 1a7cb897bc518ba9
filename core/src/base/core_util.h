/* What every core folder shares: the element count of an array, a monotonic clock. */
#ifndef FG_CORE_UTIL_H
#define FG_CORE_UTIL_H

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Monotonic seconds, for durations: never the wall clock. */
double fg_now_seconds(void);

#endif
