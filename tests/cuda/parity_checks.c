/* The checks group: every op of the op list (fulgur/backend.h) runs the shared argument
 * checks (fulgur/backend_checks.h) on both backends. Each op is called, through the vtable,
 * with a NULL queue (both must refuse it naming the op and the queue), then on a valid queue
 * with every argument zero or NULL: both must answer the same status, and a refusal the
 * same words after the backend's own prefix. The calls are generated from the op list, so
 * an op appended later is covered without touching this file. */
#include <string.h>

#include "parity.h"

#define ZERO_ARG_(type, name) , (type)0
#define CALL_ZERO_(vt, state, queue, err, entry)                                             \
    (vt)->entry((state), (queue) FG_OP_SIG_##entry(ZERO_ARG_), (err))

/* The message after "WHO: ", or the whole message. */
static const char *after_prefix(const char *msg, const char *who)
{
    size_t n = strlen(who);
    return strncmp(msg, who, n) == 0 && msg[n] == ':' ? msg + n + 2 : msg;
}

static void expect_null_queue(const char *op, const char *who, fg_status st, const fg_error *e)
{
    char want[128];
    snprintf(want, sizeof want, "%s: %s: queue is NULL", who, op);
    checks++;
    if (st != FG_INVALID_ARGUMENT || strcmp(e->message, want) != 0)
        fail("%s with a NULL queue: %s '%s', want FG_INVALID_ARGUMENT '%s'", op,
             fg_status_name(st), st ? e->message : "", want);
}

static void expect_same(const char *op, fg_status sc, const fg_error *ec, fg_status sg,
                        const fg_error *eg, const char *dut_who)
{
    checks++;
    const char *mc = sc ? after_prefix(ec->message, "cpu backend") : "";
    const char *mg = sg ? after_prefix(eg->message, dut_who) : "";
    if (sc != sg || strcmp(mc, mg) != 0)
        fail("%s with zero arguments: cpu %s '%s', %s %s '%s'", op, fg_status_name(sc), mc,
             P.dut_name, fg_status_name(sg), mg);
}

#define CHECK_OP_(ctx, id, entry, ...)                                                       \
    do {                                                                                     \
        if (!FG_HAS_FIELD(P.dut, fg_backend_vtable, entry) || !P.dut->entry)                 \
            break; /* a partial backend's missing op: the setup check names it */           \
        fg_error ec = { 0 }, eg = { 0 };                                                     \
        expect_null_queue(#entry, "cpu backend",                                             \
                          CALL_ZERO_(P.ref, P.rs, NULL, &ec, entry), &ec);                   \
        expect_null_queue(#entry, dut_who, CALL_ZERO_(P.dut, P.ds, NULL, &eg, entry), &eg);  \
        fg_status sc = CALL_ZERO_(P.ref, P.rs, P.rq, &ec, entry);                            \
        fg_status sg = CALL_ZERO_(P.dut, P.ds, P.dq, &eg, entry);                            \
        expect_same(#entry, sc, &ec, sg, &eg, dut_who);                                      \
    } while (0);

void test_checks(void)
{
    const char *dut_who = strcmp(P.dut_name, "cpu") == 0 ? "cpu backend" : "backend.cuda";
    FG_BACKEND_OPS(CHECK_OP_, ~)
}
