/* What every op of the CUDA backend starts with after the shared argument checks
 * (fulgur/backend_checks.h, run by the trampolines of cuda_plugin.c): entering the queue's
 * device, its dtypes, and the kernels' own limits; each returns from the calling op with
 * FG_INVALID_ARGUMENT (or the queue's or dtype's status) and a message naming the op. */
#ifndef FG_CUDA_CHECKS_H
#define FG_CUDA_CHECKS_H

#include "cuda_backend.h"

#define STREAM(queue) (((fg_cuda_queue *)(queue))->stream)

#define FG_CUDA_REQUIRE(cond, ...)                                                         \
    do {                                                                                   \
        if (!(cond))                                                                       \
            return fg_error_set(err, FG_INVALID_ARGUMENT, "backend.cuda: " __VA_ARGS__);   \
    } while (0)

#define FG_CUDA_NOT_NULL(op, ptr) FG_CUDA_REQUIRE((ptr) != NULL, "%s: %s is NULL", op, #ptr)

/* Device and dtypes of an op; returns on failure. */
#define FG_CUDA_BEGIN(op, ...)                                                             \
    do {                                                                                   \
        const uint32_t types_[] = { __VA_ARGS__ };                                         \
        fg_status st_ = fg_cuda_enter(queue, op, err);                                     \
        if (st_ == FG_OK)                                                                  \
            st_ = fg_cuda_check_types(op, (int)(sizeof types_ / sizeof types_[0]), types_, \
                                      err);                                                \
        if (st_ != FG_OK)                                                                  \
            return st_;                                                                    \
    } while (0)

#endif
