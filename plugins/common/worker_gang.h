/* Persistent worker threads that run their parts of one job per generation (strategy-dp's
 * replicas, strategy-model-parallel's stages): the caller publishes a job, runs its own part
 * (worker 0) on its thread, then waits for the workers' parts. Nothing is created per job. */
#ifndef FULGUR_PLUGIN_COMMON_WORKER_GANG_H
#define FULGUR_PLUGIN_COMMON_WORKER_GANG_H

#include <pthread.h>
#include <stdint.h>

#include "fulgur/plugin.h"

typedef struct fg_plugin_gang fg_plugin_gang;

/* Worker `worker`'s part of `job`, on that worker's thread. */
typedef void (*fg_plugin_gang_part)(void *ctx, int worker, int job);

typedef struct fg_plugin_gang_thread {
    fg_plugin_gang *gang;
    int worker;
    int started;
    pthread_t thread;
} fg_plugin_gang_thread;

struct fg_plugin_gang {
    pthread_mutex_t lock;  /* the job's, and what the parts share */
    pthread_cond_t go, done;
    pthread_cond_t wake;   /* the parts' own waits under lock (dp's all-reduce meeting,
                            * model-parallel's arrivals) */
    int ready;             /* lock and conditions initialised */
    uint64_t generation;
    int job;
    int running;           /* workers still on this generation's job */
    int stop_job;          /* the job that ends a worker */
    fg_plugin_gang_part part;
    void *ctx;
    int count;             /* worker 0 (the caller) and the threads 1..count-1 */
    fg_plugin_gang_thread *threads; /* (count); [0] unused */
};

/* The lock and the conditions: 0, 1 when the mutex could not be made, 2 when a condition
 * could not (nothing is left initialised then). */
int fg_plugin_gang_init(fg_plugin_gang *g);

/* Starts the threads of workers 1..count-1, which run `part` of each job until `stop_job`.
 * Worker i drives device i (so the messages say): "who: cannot start the thread of device i
 * (pthread_create: error N)" (FG_INTERNAL; the workers started before it run until
 * fg_plugin_gang_stop), or "who: out of memory". */
fg_status fg_plugin_gang_start(fg_plugin_gang *g, int count, fg_plugin_gang_part part,
                               void *ctx, int stop_job, const char *who, fg_error *err);

/* With the lock held: `job` for every worker thread. */
void fg_plugin_gang_publish_locked(fg_plugin_gang *g, int job);

/* Until every worker thread has finished this generation's part. */
void fg_plugin_gang_wait(fg_plugin_gang *g);

/* The stop job published, the threads joined, the lock and conditions destroyed (nothing
 * when not initialised). */
void fg_plugin_gang_stop(fg_plugin_gang *g);

#endif
