/* The signal-time status.json record (run_status_signal.h). */
#include "run_status_signal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TEMPLATE_MAX 65536
#define PATH_MAX_LEN 8300

static char template_text[TEMPLATE_MAX];
static char record[TEMPLATE_MAX + 256];
static char final_path[PATH_MAX_LEN], temp_path[PATH_MAX_LEN];
static volatile sig_atomic_t armed;
static const volatile int64_t *watched_step;

int fg_run_status_signal_arm(const char *status_path, const char *json_template)
{
    armed = 0;
    size_t n = strlen(json_template);
    if (n >= sizeof template_text || strlen(status_path) + 32 >= sizeof final_path) return -1;
    memcpy(template_text, json_template, n + 1);
    snprintf(final_path, sizeof final_path, "%s", status_path);
    snprintf(temp_path, sizeof temp_path, "%s.tmp.signal.%ld", status_path, (long)getpid());
    armed = 1;
    return 0;
}

void fg_run_status_signal_watch_step(const volatile int64_t *step)
{
    watched_step = step;
}

void fg_run_status_signal_disarm(void)
{
    armed = 0;
}

/* Decimal digits of v at out (no locale, no stdio: signal-safe); returns the length. */
static size_t put_int(char *out, long long v)
{
    char digits[24];
    size_t n = 0, len = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do digits[n++] = (char)('0' + u % 10); while ((u /= 10) && n < sizeof digits);
    if (v < 0) out[len++] = '-';
    while (n) out[len++] = digits[--n];
    return len;
}

static size_t put_text(char *out, const char *s)
{
    size_t n = strlen(s);
    memcpy(out, s, n);
    return n;
}

static const char *signal_text(int signo)
{
    return signo == SIGTERM ? "SIGTERM" : signo == SIGINT ? "SIGINT" : "a signal";
}

/* The template with its markers filled; returns the length. */
static size_t fill(int signo, int exit_code)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long step = watched_step ? (long long)*watched_step : 0;
    size_t len = 0;
    for (const char *p = template_text; *p && len < TEMPLATE_MAX;) {
        if (strncmp(p, "\"@@STEP@@\"", 10) == 0) { len += put_int(record + len, step); p += 10; }
        else if (strncmp(p, "\"@@CODE@@\"", 10) == 0) { len += put_int(record + len, exit_code); p += 10; }
        else if (strncmp(p, "\"@@END@@\"", 9) == 0) { len += put_int(record + len, now.tv_sec); p += 9; }
        else if (strncmp(p, "@@N@@", 5) == 0) { len += put_int(record + len, step); p += 5; }
        else if (strncmp(p, "@@SIG@@", 7) == 0) { len += put_text(record + len, signal_text(signo)); p += 7; }
        else record[len++] = *p++;
    }
    return len;
}

void fg_run_status_signal_record(int signo, int exit_code)
{
    if (!armed) return;
    int saved_errno = errno;
    size_t len = fill(signo, exit_code);
    int fd = open(temp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, record, len);
        close(fd);
        if (w == (ssize_t)len && armed) rename(temp_path, final_path);
        else unlink(temp_path);
    }
    errno = saved_errno;
}
