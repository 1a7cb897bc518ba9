/* callback2.report.*: the report page's cost and upkeep, driven through its ABI (its
 * content against real runs: ux.report_data, ux.report_render).
 *   write_cost  the bytes written (the process's write() total, /proc/self/io wchar) at a
 *               validation after 1008 rows equal those after 12 rows, within the digits the
 *               step numbers gain, and are a small part of the page: a write costs the new
 *               rows, not the run (issue 30, defect 10: the page was rewritten whole); every
 *               row logged is on the page, in the row blocks, once
 *   refresh     a running page reloads itself (<meta http-equiv="refresh">), the ended one
 *               no longer, and keeps its size
 *   replaced    a page removed during the run is written again at the next validation, with
 *               a note that the earlier rows are not on it */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_test.h"

#define NAME "report"
#define ROUND_STEPS 10

static const fg_plugin *plugin(void)
{
    return fg_test_need_plugin(FG_TEST_PLUGIN, FG_KIND_CALLBACK, NAME);
}

static void *start(const fg_plugin *p, fg_fake_host *h)
{
    void *state = NULL;
    fg_error err = {0};
    fg_status st = p->init(&h->host, &state, &err);
    CHECK(st == FG_OK, "init: %s", err.message);
    if (st != FG_OK)
        exit(1);
    return state;
}

static void send(const fg_plugin *p, void *state, uint32_t type, int64_t epoch, int64_t step,
                 const char *run, const fg_metric *m, uint32_t n)
{
    fg_event e = cb_event(type, epoch, step, run);
    cb_event_metrics(&e, m, n);
    fg_error err = {0};
    fg_status st = cb_send(p, state, &e, &err);
    CHECK(st == FG_OK, "event %u at step %lld: %s", type, (long long)step, err.message);
}

/* Bytes this process has passed to write() so far (Linux /proc/self/io). */
static long long written_bytes(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    char line[128];
    long long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "wchar: %lld", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* One epoch: ROUND_STEPS step rows, a validation row (the page is written there), an
 * epoch row (not written: the epoch was validated). Rows: ROUND_STEPS + 2. */
static void epoch_round(const fg_plugin *p, void *s, const char *run, int64_t epoch)
{
    for (int i = 1; i <= ROUND_STEPS; i++) {
        int64_t step = epoch * ROUND_STEPS + i;
        fg_metric m[] = {{"train/step_loss", 0.25}, {"time/step_s", 0.001}};
        send(p, s, FG_EVENT_TRAIN_STEP_END, epoch, step, run, m, 2);
    }
    int64_t last = (epoch + 1) * ROUND_STEPS;
    fg_metric v[] = {{"val/loss", 0.5}};
    send(p, s, FG_EVENT_VALIDATION_END, epoch, last, run, v, 1);
    fg_metric ep[] = {{"train/loss", 0.25}};
    send(p, s, FG_EVENT_EPOCH_END, epoch, last, run, ep, 1);
}

static size_t count_of(const char *text, const char *what)
{
    size_t n = 0;
    for (const char *q = strstr(text, what); q; q = strstr(q + 1, what))
        n++;
    return n;
}

static void case_write_cost(const char *base)
{
    char dir[4096], page[4200];
    cb_scratch(dir, sizeof dir, base, "write_cost");
    snprintf(page, sizeof page, "%s/report.html", dir);
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    void *s = start(p, &h);
    send(p, s, FG_EVENT_FIT_START, 0, 0, dir, NULL, 0);
    epoch_round(p, s, dir, 0);
    long long before = written_bytes();
    CHECK(before >= 0, "/proc/self/io has no wchar line");
    epoch_round(p, s, dir, 1);
    long long early = written_bytes() - before; /* the page at 12 + 12 rows */
    for (int64_t e = 2; e < 84; e++)
        epoch_round(p, s, dir, e); /* 1008 rows */
    before = written_bytes();
    epoch_round(p, s, dir, 84);
    long long late = written_bytes() - before;
    long long size = file_size(page);
    printf("bytes written at a validation: %lld after 12 rows, %lld after 1008 rows; page %lld "
           "bytes\n", early, late, size);
    /* 12 new rows each time, the same values: only the epoch and step numbers' digits
     * differ (0 or 1 -> 84, 11..20 -> 841..850: at most 3 a row) */
    CHECK(late - early <= 3 * (ROUND_STEPS + 2), "a validation wrote %lld bytes after 1008 rows, "
          "%lld after 12: the write grows with the run", late, early);
    CHECK(late * 2 < size, "a validation wrote %lld bytes of a %lld-byte page", late, size);
    send(p, s, FG_EVENT_FIT_END, 84, 850, dir, NULL, 0);
    p->deinit(s);
    char *text = cb_read_file(page);
    CHECK(text != NULL, "no page at %s", page);
    if (text) {
        /* a block per validation, and one at the end for the last epoch's row */
        CHECK_EQ((long long)count_of(text, "class=\"fulgur-report-rows\">["), 86LL);
        CHECK_EQ((long long)count_of(text, ",0.25,0.001]"), 850LL); /* step rows */
        CHECK_EQ((long long)count_of(text, ",null,null,0.5]"), 85LL); /* validations */
        CHECK_EQ((long long)count_of(text, ",null,null,null,0.25]"), 85LL); /* epochs */
        CHECK(strstr(text, "[84,850,0.25,0.001]") != NULL, "the last step row is missing");
        CHECK(strstr(text, "\"row_blocks\": true") != NULL, "the data block does not say row_blocks");
    }
    free(text);
}

static void case_refresh(const char *base)
{
    char dir[4096], page[4200];
    cb_scratch(dir, sizeof dir, base, "refresh");
    snprintf(page, sizeof page, "%s/report.html", dir);
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    void *s = start(p, &h);
    send(p, s, FG_EVENT_FIT_START, 0, 0, dir, NULL, 0);
    epoch_round(p, s, dir, 0);
    char *text = cb_read_file(page);
    CHECK(text && strstr(text, "<meta http-equiv=\"refresh\" content=\"30\">") != NULL,
          "the running page does not reload itself");
    free(text);
    send(p, s, FG_EVENT_FIT_END, 0, 10, dir, NULL, 0);
    p->deinit(s);
    text = cb_read_file(page);
    CHECK(text && strstr(text, "http-equiv=\"refresh\"") == NULL, "the ended page still reloads");
    CHECK(text && strstr(text, "\"state\": \"finished\"") != NULL, "the ended page is not finished");
    free(text);
}

static void case_replaced(const char *base)
{
    char dir[4096], page[4200];
    cb_scratch(dir, sizeof dir, base, "replaced");
    snprintf(page, sizeof page, "%s/report.html", dir);
    const fg_plugin *p = plugin();
    fg_fake_host h;
    cb_host_init(&h, p);
    void *s = start(p, &h);
    send(p, s, FG_EVENT_FIT_START, 0, 0, dir, NULL, 0);
    epoch_round(p, s, dir, 0);
    CHECK(unlink(page) == 0, "cannot remove %s", page);
    epoch_round(p, s, dir, 1);
    char *text = cb_read_file(page);
    CHECK(text != NULL, "the removed page was not written again");
    if (text) {
        CHECK(strstr(text, "replaced or changed by another program") != NULL, "no note");
        CHECK(strstr(text, "[1,20,") != NULL && strstr(text, "[0,5,") == NULL,
              "the new page holds the rows since the last write, only");
    }
    free(text);
    p->deinit(s);
}

int main(int argc, char **argv)
{
    static const fg_test_case cases[] = {
        {"write_cost", .run_arg = case_write_cost},
        {"refresh", .run_arg = case_refresh},
        {"replaced", .run_arg = case_replaced},
    };
    return fg_test_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
