/* The peers of a one-process-per-device strategy (ddp, sharded): the comm it runs on and
 * the backend device of this rank. */
#ifndef FULGUR_PLUGIN_COMMON_RANK_PEERS_H
#define FULGUR_PLUGIN_COMMON_RANK_PEERS_H

#include "fulgur/backend.h"
#include "fulgur/comm.h"

/* The run's comm for strategy `who` ("strategy.ddp"): FG_INVALID_ARGUMENT naming the
 * [comm] section and mpirun when the run has none. */
fg_status fg_plugin_find_rank_comm(const fg_host *host, const char *who,
                                   const fg_comm_vtable **comm, void **comm_state,
                                   fg_error *err);

/* The run's backend and this rank's device: `device` as the [strategy] key says (-1:
 * local_rank modulo the backend's device count); refused, naming `who` or the key, when
 * the backend cannot count its devices, has none, or has `device` or fewer. */
fg_status fg_plugin_bind_rank_device(const fg_host *host, const char *who, int64_t device,
                                     int local_rank, const fg_backend_vtable **be,
                                     void **be_state, int *out_device, fg_error *err);

#endif
