/* The comm and the rank's device of a one-process-per-device strategy (rank_peers.h). */
#include "rank_peers.h"

fg_status fg_plugin_find_rank_comm(const fg_host *host, const char *who,
                                   const fg_comm_vtable **comm, void **comm_state,
                                   fg_error *err)
{
    const void *vt = NULL;
    fg_error e = {0};
    if (host->find_plugin(host, FG_KIND_COMM, &vt, comm_state, &e) != FG_OK)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s needs a [comm] section (name = mpi) "
                            "and runs one process per device: mpirun -n N fulgur fit CONFIG",
                            who);
    *comm = vt;
    return FG_OK;
}

fg_status fg_plugin_bind_rank_device(const fg_host *host, const char *who, int64_t device,
                                     int local_rank, const fg_backend_vtable **be,
                                     void **be_state, int *out_device, fg_error *err)
{
    const void *vt = NULL;
    fg_error e = {0};
    if (host->find_plugin(host, FG_KIND_BACKEND, &vt, be_state, &e) != FG_OK)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: %s", who, e.message);
    *be = vt;
    int count = 0;
    fg_status st = FG_OK;
    if (!(*be)->device_count || (st = (*be)->device_count(*be_state, &count, err)) != FG_OK)
        return st != FG_OK ? st : fg_error_set(err, FG_INCOMPATIBLE, "%s: the backend cannot "
                                               "count its devices", who);
    if (count < 1)
        return fg_error_set(err, FG_UNAVAILABLE, "%s: the backend has no devices", who);
    if (device >= count)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "[%s] device = %lld, but the backend has "
                            "%d device(s)", host->section, (long long)device, count);
    *out_device = device >= 0 ? (int)device : local_rank % count;
    return FG_OK;
}
