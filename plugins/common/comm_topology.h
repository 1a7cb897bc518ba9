/* What the comm plugins share: answering topology(). */
#ifndef FULGUR_PLUGIN_COMMON_COMM_TOPOLOGY_H
#define FULGUR_PLUGIN_COMMON_COMM_TOPOLOGY_H

#include "fulgur/comm.h"

/* Copies the place of this rank into the caller's struct (its struct_size stays);
 * FG_INVALID_ARGUMENT "who: topology: out is NULL" without one. */
fg_status fg_plugin_topology_copy(const fg_comm_topology *topo, fg_comm_topology *out,
                                  const char *who, fg_error *err);

#endif
