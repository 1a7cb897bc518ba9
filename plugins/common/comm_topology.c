/* topology() of the comm plugins; see comm_topology.h. */
#include "comm_topology.h"

fg_status fg_plugin_topology_copy(const fg_comm_topology *topo, fg_comm_topology *out,
                                  const char *who, fg_error *err)
{
    if (!out) return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: topology: out is NULL", who);
    out->rank = topo->rank;
    out->world_size = topo->world_size;
    out->local_rank = topo->local_rank;
    out->local_size = topo->local_size;
    out->node = topo->node;
    out->node_count = topo->node_count;
    return FG_OK;
}
