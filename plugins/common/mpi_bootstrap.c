/* Starting MPI and the topology; see mpi_bootstrap.h. */
#define _GNU_SOURCE
#include "mpi_bootstrap.h"

#include <dlfcn.h>
#include <stdio.h>

fg_status fg_mpi_error(fg_status status, const char *who, const char *call, int rc,
                       fg_error *err)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", rc);
    return fg_error_set(err, status, "%s: %s failed: %s", who, call, text);
}

/* Open MPI loads its components with dlopen, and some of them (pml ob1, ...) resolve
 * libmpi's symbols from the global namespace. The host opened the plugin RTLD_LOCAL, so
 * libmpi came in local too: promote the already-loaded library to RTLD_GLOBAL before
 * MPI_Init, or component loading fails with "undefined symbol". */
static void make_libmpi_global(void)
{
    Dl_info info;
    if (dladdr((void *)MPI_Init_thread, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

fg_status fg_mpi_start(const char *who, int *owns_mpi, fg_error *err)
{
    int started = 0, provided = 0, rc;
    *owns_mpi = 0;
    if ((rc = MPI_Initialized(&started)) != MPI_SUCCESS)
        return fg_mpi_error(FG_FATAL, who, "MPI_Initialized", rc, err);
    if (started) {
        rc = MPI_Query_thread(&provided);
        if (rc != MPI_SUCCESS) return fg_mpi_error(FG_FATAL, who, "MPI_Query_thread", rc, err);
    } else {
        make_libmpi_global();
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) return fg_mpi_error(FG_FATAL, who, "MPI_Init_thread", rc, err);
        *owns_mpi = 1;
    }
    if (provided < MPI_THREAD_SERIALIZED)
        return fg_error_set(err, FG_UNAVAILABLE, "%s: MPI provides thread level %d, fulgur "
                            "needs MPI_THREAD_SERIALIZED (%d) or better", who, provided,
                            MPI_THREAD_SERIALIZED);
    return FG_OK;
}

fg_status fg_mpi_find_topology(MPI_Comm world, fg_comm_topology *topo, const char *who,
                               fg_error *err)
{
    MPI_Comm local = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
    MPI_Comm_rank(world, &topo->rank);
    MPI_Comm_size(world, &topo->world_size);
    int rc = MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, topo->rank, MPI_INFO_NULL, &local);
    if (rc != MPI_SUCCESS) return fg_mpi_error(FG_FATAL, who, "MPI_Comm_split_type", rc, err);
    MPI_Comm_rank(local, &topo->local_rank);
    MPI_Comm_size(local, &topo->local_size);
    rc = MPI_Comm_split(world, topo->local_rank == 0 ? 0 : MPI_UNDEFINED, topo->rank, &leaders);
    int node[2] = {0, 1};
    if (rc == MPI_SUCCESS && leaders != MPI_COMM_NULL) {
        MPI_Comm_rank(leaders, &node[0]);
        MPI_Comm_size(leaders, &node[1]);
        MPI_Comm_free(&leaders);
    }
    if (rc == MPI_SUCCESS) rc = MPI_Bcast(node, 2, MPI_INT, 0, local);
    MPI_Comm_free(&local);
    if (rc != MPI_SUCCESS)
        return fg_mpi_error(FG_FATAL, who, "the node split (MPI_Comm_split/MPI_Bcast)", rc, err);
    topo->node = node[0];
    topo->node_count = node[1];
    return FG_OK;
}
