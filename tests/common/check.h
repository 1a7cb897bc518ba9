/* The checks every unit test uses. A failed check prints file:line, the expression and
 * the values, counts itself in fg_test_failures and lets the test go on; the test's exit
 * status comes from fg_test_report() (or fg_test_main()) at the end.
 *
 *   CHECK(cond)                       CHECK(cond, "printf format", args...)
 *   CHECK_EQ(actual, expected)        integers, compared as long long
 *   CHECK_NEAR(actual, expected, tol) doubles, |actual - expected| <= tol (NaN fails)
 *   CHECK_STR(actual, expected)       strings (NULL fails)
 *   CHECK_CONTAINS(text, fragment)
 *   CHECK_STATUS(st, expected)        fg_status; CHECK_STATUS(st, expected, err) also
 *                                     prints err.message (an fg_error, not a pointer)
 *   CHECK_OK(call)                    FG_OK, printing fg_test_err.message otherwise;
 *                                     CHECK_OK(call, &err) prints err's */
#ifndef FG_TEST_CHECK_H
#define FG_TEST_CHECK_H

#include <stddef.h>
#include <string.h>

#include <fulgur/plugin.h>

extern int fg_test_failures;
/* The error struct a test may pass to every call; CHECK_OK(call) prints its message. */
extern fg_error fg_test_err;

/* Prints "file:line: what" (and the message) and counts a failure. */
void fg_check_failed(const char *file, int line, const char *what);
FG_PRINTF(4, 5)
void fg_check_failed_msg(const char *file, int line, const char *what, const char *fmt, ...);

/* "NAME: all checks passed" on stdout and 0, or "NAME: N check(s) failed" on stderr and 1. */
int fg_test_report(const char *name);

/* A test program of named cases: argv[1] picks the case; run_arg ones get argv[2] (a
 * scratch folder, a path), or NULL when it is absent. */
typedef struct fg_test_case {
    const char *name;
    void (*run)(void);
    void (*run_arg)(const char *arg);
} fg_test_case;
/* The exit status: fg_test_report()'s, or 2 for a missing or unknown case. */
int fg_test_main(int argc, char **argv, const fg_test_case *cases, size_t count);

/* ---- the macros ----------------------------------------------------------------------- */

/* Picks NAME by argument count: FG_CHECK_ONE_OR_MORE(one, more, args...). */
#define FG_CHECK_PICK_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, \
                       _17, _18, _19, _20, name, ...)                                          \
    name
#define FG_CHECK_ONE_OR_MORE(one, more, ...)                                                  \
    FG_CHECK_PICK_(__VA_ARGS__, more, more, more, more, more, more, more, more, more, more,   \
                   more, more, more, more, more, more, more, more, more, one, unused)
#define FG_CHECK_ARG3_(_1, _2, _3, name, ...) name
#define FG_CHECK_ARG2_(_1, _2, name, ...) name

#define CHECK(...) FG_CHECK_ONE_OR_MORE(FG_CHECK_, FG_CHECK_MSG_, __VA_ARGS__)(__VA_ARGS__)
#define FG_CHECK_(cond)                                                                    \
    do {                                                                                   \
        if (!(cond))                                                                       \
            fg_check_failed(__FILE__, __LINE__, "CHECK(" #cond ") failed");                \
    } while (0)
#define FG_CHECK_MSG_(cond, ...)                                                           \
    do {                                                                                   \
        if (!(cond))                                                                       \
            fg_check_failed_msg(__FILE__, __LINE__, "CHECK(" #cond ") failed", __VA_ARGS__); \
    } while (0)

#define CHECK_EQ(actual, expected)                                                         \
    do {                                                                                   \
        long long fg_a_ = (long long)(actual), fg_e_ = (long long)(expected);              \
        if (fg_a_ != fg_e_)                                                                \
            fg_check_failed_msg(__FILE__, __LINE__, "CHECK_EQ(" #actual ", " #expected ")",  \
                                "%lld, expected %lld", fg_a_, fg_e_);                      \
    } while (0)

#define CHECK_NEAR(actual, expected, tol)                                                  \
    do {                                                                                   \
        double fg_a_ = (actual), fg_e_ = (expected), fg_t_ = (tol);                        \
        if (!(fg_a_ - fg_e_ <= fg_t_ && fg_e_ - fg_a_ <= fg_t_))                           \
            fg_check_failed_msg(__FILE__, __LINE__, "CHECK_NEAR(" #actual ")",             \
                                "%.17g, expected %.17g within %g", fg_a_, fg_e_, fg_t_);   \
    } while (0)

#define CHECK_STR(actual, expected)                                                        \
    do {                                                                                   \
        const char *fg_a_ = (actual), *fg_e_ = (expected);                                 \
        if (!fg_a_ || !fg_e_ || strcmp(fg_a_, fg_e_) != 0)                                 \
            fg_check_failed_msg(__FILE__, __LINE__, "CHECK_STR(" #actual ")",              \
                                "\n  got:      \"%s\"\n  expected: \"%s\"",                \
                                fg_a_ ? fg_a_ : "(null)", fg_e_ ? fg_e_ : "(null)");       \
    } while (0)

#define CHECK_CONTAINS(text, fragment)                                                     \
    do {                                                                                   \
        const char *fg_t_ = (text), *fg_f_ = (fragment);                                   \
        if (!fg_t_ || !strstr(fg_t_, fg_f_))                                               \
            fg_check_failed_msg(__FILE__, __LINE__, "CHECK_CONTAINS(" #text ")",           \
                                "\n  got:     \"%s\"\n  missing: \"%s\"",                  \
                                fg_t_ ? fg_t_ : "(null)", fg_f_);                          \
    } while (0)

#define CHECK_STATUS(...)                                                                  \
    FG_CHECK_ARG3_(__VA_ARGS__, FG_CHECK_STATUS_ERR_, FG_CHECK_STATUS_, unused)(__VA_ARGS__)
#define FG_CHECK_STATUS_(st, expected)                                                     \
    do {                                                                                   \
        fg_status fg_s_ = (st), fg_x_ = (expected);                                        \
        if (fg_s_ != fg_x_)                                                                \
            fg_check_failed_msg(__FILE__, __LINE__, "CHECK_STATUS(" #st ")",               \
                                "status %s, expected %s",                                  \
                                fg_status_name(fg_s_), fg_status_name(fg_x_));             \
    } while (0)
#define FG_CHECK_STATUS_ERR_(st, expected, err)                                            \
    do {                                                                                   \
        fg_status fg_s_ = (st), fg_x_ = (expected);                                        \
        if (fg_s_ != fg_x_)                                                                \
            fg_check_failed_msg(__FILE__, __LINE__, "CHECK_STATUS(" #st ")",               \
                                "status %s (%s), expected %s",                             \
                                fg_status_name(fg_s_), fg_s_ == FG_OK ? "" : (err).message, \
                                fg_status_name(fg_x_));                                    \
    } while (0)

#define CHECK_OK(...)                                                                      \
    FG_CHECK_ARG2_(__VA_ARGS__, FG_CHECK_OK_ERR_, FG_CHECK_OK_, unused)(__VA_ARGS__)
#define FG_CHECK_OK_(call) FG_CHECK_OK_ERR_(call, &fg_test_err)
#define FG_CHECK_OK_ERR_(call, errp)                                                       \
    do {                                                                                   \
        fg_status fg_s_ = (call);                                                          \
        if (fg_s_ != FG_OK)                                                                \
            fg_check_failed_msg(__FILE__, __LINE__, "CHECK_OK(" #call ")", "returned %s: %s", \
                                fg_status_name(fg_s_), (errp)->message);                   \
    } while (0)

#endif
