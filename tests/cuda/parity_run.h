/* Running one op on both backends: BOTH(what, expr) evaluates expr twice, with V, S, Q
 * and E naming the vtable, state, queue and error of the CPU backend, then the backend
 * under test, and X(p) the pair's pointer on that side. W() formats a case name. */
#ifndef FG_TEST_PARITY_RUN_H
#define FG_TEST_PARITY_RUN_H

#include <stdio.h>

#include "parity.h"

#define BOTH(what, expr)                                                                   \
    do {                                                                                   \
        fg_error e_[2] = { { 0 }, { 0 } };                                                 \
        fg_status s_[2];                                                                   \
        for (int side_ = 0; side_ < 2; side_++) {                                          \
            const fg_backend_vtable *V = side_ ? P.dut : P.ref;                            \
            void *S = side_ ? P.ds : P.rs;                                                 \
            void *Q = side_ ? P.dq : P.rq;                                                 \
            fg_error *E = &e_[side_];                                                      \
            s_[side_] = (expr);                                                            \
        }                                                                                  \
        both_ok(what, s_[0], &e_[0], s_[1], &e_[1]);                                       \
    } while (0)

#define X(p) (side_ ? (p).g : (p).c)
/* A NULL on both sides when `cond` is false. */
#define XN(cond, p) ((cond) ? X(p) : NULL)

#define W(...) (snprintf(case_name, sizeof case_name, __VA_ARGS__), case_name)
static char case_name[256];

#endif
