/* The comm as the core hands it out: every call forwarded to the comm plugin, and a call
 * that failed with FG_FATAL (a lost peer or a timed-out collective: fulgur/comm.h) remembered,
 * so that status.json and the exit status say 3, the code the job really ends with. */
#ifndef FG_COMM_WATCH_H
#define FG_COMM_WATCH_H

#include "fulgur/comm.h"

typedef struct fg_comm_watch {
    fg_comm_vtable vt;          /* the forwarding table: an entry only where the plugin has one */
    const fg_comm_vtable *inner;
    void *inner_state;
    _Atomic int peer_failed;    /* a call returned FG_FATAL */
} fg_comm_watch;

/* Builds the forwarding table over the plugin's (entries past its struct_size stay NULL). */
void fg_comm_watch_init(fg_comm_watch *w, const fg_comm_vtable *inner, void *inner_state);

#endif
