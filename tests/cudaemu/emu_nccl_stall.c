/* comm.nccl on the emulated NCCL, 2 ranks under mpirun: rank 1 never joins an all_reduce of
 * a host buffer (strategy.ddp's metric sums are host arrays); rank 0's watchdog must abort it
 * after timeout_s (2 s), naming it, well before rank 1 comes back (8 s). A staged result
 * copied back into pageable memory before the operation is watched blocks in the copy,
 * where no watchdog sees it (review finding 1).
 *   mpirun -n 2 emu_nccl_stall PLUGIN.so */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fake_host.h"
#include "fulgur/comm.h"
#include "plugin_load.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: emu_nccl_stall PLUGIN.so\n");
        return 2;
    }
    const fg_plugin *p = fg_test_load_plugin(argv[1], FG_KIND_COMM, "nccl");
    if (!p) return 1;
    fg_fake_host host;
    fg_fake_host_init(&host, p, NULL);
    fg_fake_host_set(&host, "timeout_s", "2");
    void *state = NULL;
    fg_error e = {0};
    fg_status st = p->init(&host.host, &state, &e);
    if (st != FG_OK) {
        fprintf(stderr, "FAIL: init: %s: %s\n", fg_status_name(st), e.message);
        return 1;
    }
    const fg_comm_vtable *vt = p->vtable;
    fg_comm_topology t = {sizeof t, 0, 0, 0, 0, 0, 0};
    vt->topology(state, &t, &e);
    double h[3] = {t.rank + 1.0, 2.0, 3.0};
    CHECK_OK(vt->all_reduce(state, NULL, h, 3, FG_F64, FG_REDUCE_SUM, &fg_test_err));
    CHECK(h[0] == 3 && h[2] == 6, "host all_reduce: %g %g", h[0], h[2]);
    if (t.rank == 0) {
        double t0 = now();
        fg_error e2 = {0};
        st = vt->all_reduce(state, NULL, h, 3, FG_F64, FG_REDUCE_SUM, &e2);
        double took = now() - t0;
        CHECK(st == FG_FATAL && strstr(e2.message, "all_reduce of 3 f64 values") &&
                  strstr(e2.message, "timed out after 2 s") && took < 6.0,
              "want the watchdog's timeout naming the host all_reduce within 6 s, got %s after "
              "%.1f s: %s", fg_status_name(st), took, e2.message);
        if (!fg_test_failures) printf("rank 0 after %.1f s: %s\n", took, e2.message);
    } else {
        sleep(8);
    }
    p->deinit(state);
    return fg_test_failures ? 1 : 0;
}
