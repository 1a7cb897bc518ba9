/* Argument checks of the CPU backend's f32 ops: each failure is FG_INVALID_ARGUMENT with
 * "cpu backend: OP: what is wrong". */
#ifndef FG_CPU_CHECKS_H
#define FG_CPU_CHECKS_H

#define FG_CPU_REQUIRE(cond, ...)                                              \
    do {                                                                       \
        if (!(cond))                                                           \
            return fg_error_set(err, FG_INVALID_ARGUMENT, "cpu backend: " __VA_ARGS__); \
    } while (0)

#define FG_CPU_NOT_NULL(op, ptr) FG_CPU_REQUIRE((ptr) != NULL, "%s: %s is NULL", op, #ptr)

/* A NULL queue is refused: ops belong to a device through their queue. */
#define FG_CPU_QUEUE(op) FG_CPU_REQUIRE(queue != NULL, "%s: queue is NULL", op)

#define FG_CPU_POOL(state) (((fg_cpu_backend *)(state))->pool)

#endif
