/* comm.mpi staging: collectives on device memory through pinned host memory.
 *
 * MPI reads and writes host memory. When `[comm] stage_device_buffers` says so (auto: when
 * the configured backend is not "cpu"), every buffer is copied device -> host into a
 * region of pinned memory from the backend (host_alloc), the collective runs on the host
 * copy, and the result is copied host -> device (for a started collective, in wait()).
 * That lets several processes share one GPU in tests without NCCL.
 *
 * Device and queue: the ABI passes the queue the buffers are ordered on (NULL for memory
 * the caller has synchronised) but no way to ask a queue for its device, and the
 * strategies pass NULL. The device is taken as local rank modulo the backend's device
 * count (the default of strategy.ddp/sharded `device`); a NULL queue gets a queue of this
 * plugin's own on that device, created once. The backends' copies address memory by
 * pointer (cudaMemcpyDefault, memcpy), so the index only has to be a valid one, and a host
 * buffer handed in with a NULL queue (the core's small agreements) stages correctly too.
 *
 * The pinned memory is a few chunks used as bump arenas, allocated at the first need and
 * kept: a chunk is reused from its start once its collectives are waited, and when nothing
 * is in flight several chunks are merged into one of their total size. After the first
 * steps have shown the peak, a step allocates nothing. */
#ifndef FULGUR_COMM_MPI_STAGING_H
#define FULGUR_COMM_MPI_STAGING_H

#include <stddef.h>
#include <stdint.h>

#include "fulgur/backend.h"
#include "fulgur/comm.h"

#define FG_MPI_STAGE_CHUNKS 16

typedef struct fg_mpi_stage_chunk {
    char *base;
    size_t cap, top;
    int users; /* staged regions not yet released */
} fg_mpi_stage_chunk;

typedef struct fg_mpi_staging {
    int enabled;
    const fg_backend_vtable *be;
    void *be_state;
    int device;
    void *own_queue; /* for callers that pass a NULL queue; created at the first need */
    fg_mpi_stage_chunk chunk[FG_MPI_STAGE_CHUNKS];
    int chunks;
    int in_flight; /* regions not yet released, over all chunks */
    uint64_t calls, bytes_in, bytes_out, allocations;
    size_t peak; /* bytes of pinned memory held at most */
} fg_mpi_staging;

/* One collective's host copy: bytes at `host` in chunk `chunk`, copies on `queue`. */
typedef struct fg_mpi_stage {
    char *host;
    int chunk;
    void *queue;
} fg_mpi_stage;

struct fg_mpi_comm;

/* Reads stage_device_buffers, finds the backend through the host when staging, checks it
 * can copy and allocate pinned memory; logs the decision. */
fg_status fg_mpi_staging_init(struct fg_mpi_comm *c, fg_error *err);
/* Logs what was staged, frees the pinned memory and the own queue. */
void fg_mpi_staging_deinit(struct fg_mpi_comm *c);

/* Takes a region of `bytes` and copies `in_bytes` from device memory src (may be 0/NULL)
 * to its start, synchronised: MPI may read it on return. */
fg_status fg_mpi_stage_in(struct fg_mpi_comm *c, void *queue, const void *src, size_t in_bytes,
                          size_t bytes, fg_mpi_stage *out, fg_error *err);
/* Copies `bytes` from the region at `offset` to device memory dst, synchronised, and
 * releases the region (also on failure). */
fg_status fg_mpi_stage_out(struct fg_mpi_comm *c, fg_mpi_stage *s, void *dst, size_t offset,
                           size_t bytes, fg_error *err);
/* Releases a region without copying (the collective failed). */
void fg_mpi_stage_release(struct fg_mpi_comm *c, fg_mpi_stage *s);

#endif
