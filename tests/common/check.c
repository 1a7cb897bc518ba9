/* Failure counting, reports and the case runner of check.h. */
#include "check.h"

#include <stdarg.h>
#include <stdio.h>

int fg_test_failures;
fg_error fg_test_err;

void fg_check_failed(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: %s\n", file, line, what);
    fg_test_failures++;
}

void fg_check_failed_msg(const char *file, int line, const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: %s: ", file, line, what);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fg_test_failures++;
}

int fg_test_report(const char *name)
{
    if (fg_test_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, fg_test_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    fflush(stdout);
    return 0;
}

int fg_test_main(int argc, char **argv, const fg_test_case *cases, size_t count)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CASE [ARG]\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < count; i++) {
        if (strcmp(cases[i].name, argv[1]) != 0)
            continue;
        if (cases[i].run_arg)
            cases[i].run_arg(argc > 2 ? argv[2] : NULL);
        else
            cases[i].run();
        return fg_test_report(argv[1]);
    }
    fprintf(stderr, "%s: unknown case %s\n", argv[0], argv[1]);
    return 2;
}
