/* The NCCL calls comm-nccl makes, for ranks that are processes (comm-nccl bootstraps over
 * MPI: one rank per process, the ncclUniqueId sent by MPI_Bcast). The unique id names a
 * POSIX shared-memory segment; the ranks meet there: a process-shared barrier, one data
 * slot per rank for collectives, one mailbox per (sender, receiver) pair for send/recv.
 * A call checks its arguments and enqueues: the communicator's thread runs the operations in
 * order (the emulated "device side") and completes the stream's work, so events recorded
 * after it complete then, as on a GPU, and comm-nccl's watchdog sees a stalled peer.
 * Semantics (NCCL documentation): all_reduce/reduce_scatter reduce in rank order (sum,
 * prod, max, min; avg: floats pre-multiplied by 1/nranks then summed, integers summed then
 * divided); all_gather places rank r's data at r * count; broadcast copies the root's.
 * Rejected as NCCL does: a rank out of range (ncclInvalidArgument), two ranks on one device
 * (ncclInvalidUsage, "Duplicate GPU detected"), a buffer that is not device memory of the
 * communicator's device (ncclInvalidArgument), an unknown type or op; and, stricter than
 * NCCL (which would hang or corrupt), ranks calling different collectives or counts in the
 * same slot (ncclInvalidUsage). A peer that never arrives fails the call after
 * FGEMU_NCCL_TIMEOUT seconds (default 300) or when ncclCommAbort is called. Init with
 * config.blocking = 0 answers ncclInProgress once, as a non-blocking init may. Test-only. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <functional>

#include <nccl.h>

#include "emu_api.h"
#include "emu_types.h"

namespace {

constexpr int kMaxRanks = 8;
constexpr size_t kSlot = 4 << 20;

struct call_sig {
    int kind;
    size_t count;
    int dtype, op, root;
};

struct shm_hdr {
    std::atomic<int> init; /* 0 fresh, 1 being initialised, 2 ready */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int nranks, joined, arrived, aborted;
    uint64_t gen;
    int device[kMaxRanks];
    call_sig sig[kMaxRanks];
    uint64_t sent[kMaxRanks][kMaxRanks], taken[kMaxRanks][kMaxRanks];
    size_t box_bytes[kMaxRanks][kMaxRanks];
};

struct comm {
    uint32_t magic;
    int rank, nranks, device;
    int pending_init; /* non-blocking init: the first GetAsyncError says InProgress */
    std::atomic<int> aborted;
    std::atomic<int> busy;   /* a call is inside (NCCL forbids concurrent calls on a comm) */
    const char *busy_in;
    ncclResult_t async;
    shm_hdr *hdr;
    size_t map_bytes;
    char name[NCCL_UNIQUE_ID_BYTES + 1];
    char last[256];
    /* the communicator's "device side": a thread running the enqueued operations in order */
    pthread_t worker;
    int worker_started, stop, running;
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    std::deque<std::function<void()>> jobs;
};

constexpr uint32_t kMagic = 0x6e63636cu;
std::atomic<unsigned> g_ids;
thread_local char t_last[256];

size_t map_size(int nranks)
{
    return sizeof(shm_hdr) + 4096 + (size_t)(nranks + nranks * nranks) * kSlot;
}

char *slot(comm *c, int r)
{
    return (char *)c->hdr + sizeof(shm_hdr) + 4096 - (sizeof(shm_hdr) + 4096) % 4096 +
           (size_t)r * kSlot;
}

char *box(comm *c, int src, int dst)
{
    return slot(c, c->nranks + src * c->nranks + dst);
}

ncclResult_t say(comm *c, ncclResult_t r, const char *fmt, ...)
{
    char *buf = c ? c->last : t_last;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, 256, fmt, ap);
    va_end(ap);
    fprintf(stderr, "NCCL (emulated)%s%d: %s\n", c ? " rank " : "", c ? c->rank : 0, buf);
    if (c && r != ncclInvalidArgument && r != ncclInvalidUsage)
        c->async = r;
    return r;
}

/* NCCL's "Thread Safety" rule: no two threads may call into one communicator at once (an
 * abort racing another call frees what that call uses). A violation is reported, becomes
 * the communicator's asynchronous error, and fails the call. */
struct entry {
    comm *c;
    bool ok;
    entry(comm *cm, const char *what) : c(cm), ok(true)
    {
        int idle = 0;
        if (!c->busy.compare_exchange_strong(idle, 1)) {
            ok = false;
            say(c, ncclInvalidUsage, "%s called while another thread is inside %s on the same "
                "communicator: NCCL forbids concurrent calls on one communicator (an abort "
                "racing a call is a use after free)", what, c->busy_in);
            c->async = ncclInvalidUsage;
            return;
        }
        c->busy_in = what;
    }
    ~entry()
    {
        if (ok)
            c->busy = 0;
    }
};

double timeout_s()
{
    const char *t = getenv("FGEMU_NCCL_TIMEOUT");
    return t && *t ? atof(t) : 300.0;
}

/* Waits on the segment's condition until pred() holds; fails on abort or timeout. The
 * caller holds hdr->mu. */
template <class P> ncclResult_t wait_for(comm *c, P pred, const char *what)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    double limit = timeout_s();
    while (!pred()) {
        if (c->aborted || c->hdr->aborted) {
            c->async = ncclRemoteError;
            return say(c, ncclRemoteError, "%s: the communicator was aborted", what);
        }
        struct timespec now, until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 50 * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&c->hdr->cv, &c->hdr->mu, &until);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - start.tv_sec) + 1e-9 * (double)(now.tv_nsec - start.tv_nsec) >
            limit)
            return say(c, ncclSystemError, "%s: a peer did not arrive within %g s", what, limit);
    }
    return ncclSuccess;
}

ncclResult_t barrier(comm *c, const char *what)
{
    shm_hdr *h = c->hdr;
    pthread_mutex_lock(&h->mu);
    uint64_t gen = h->gen;
    ncclResult_t r = ncclSuccess;
    if (++h->arrived == c->nranks) {
        h->arrived = 0;
        h->gen++;
        pthread_cond_broadcast(&h->cv);
    } else {
        r = wait_for(c, [&] { return h->gen != gen; }, what);
    }
    pthread_mutex_unlock(&h->mu);
    return r;
}

size_t type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

int is_float(ncclDataType_t t)
{
    return t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat32 || t == ncclFloat64;
}

double get(const char *p, ncclDataType_t t, size_t i)
{
    switch (t) {
    case ncclInt8: return ((const int8_t *)p)[i];
    case ncclUint8: return ((const uint8_t *)p)[i];
    case ncclInt32: return ((const int32_t *)p)[i];
    case ncclUint32: return ((const uint32_t *)p)[i];
    case ncclInt64: return (double)((const int64_t *)p)[i];
    case ncclUint64: return (double)((const uint64_t *)p)[i];
    case ncclFloat16: return fgemu::load(p, CUDA_R_16F, i);
    case ncclBfloat16: return fgemu::load(p, CUDA_R_16BF, i);
    case ncclFloat32: return ((const float *)p)[i];
    default: return ((const double *)p)[i];
    }
}

void put(char *p, ncclDataType_t t, size_t i, double v)
{
    switch (t) {
    case ncclInt8: ((int8_t *)p)[i] = (int8_t)v; break;
    case ncclUint8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case ncclInt32: ((int32_t *)p)[i] = (int32_t)v; break;
    case ncclUint32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case ncclInt64: ((int64_t *)p)[i] = (int64_t)v; break;
    case ncclUint64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case ncclFloat16: fgemu::store(p, CUDA_R_16F, i, (float)v); break;
    case ncclBfloat16: fgemu::store(p, CUDA_R_16BF, i, (float)v); break;
    case ncclFloat32: ((float *)p)[i] = (float)v; break;
    default: ((double *)p)[i] = v; break;
    }
}

/* v rounded to the type (f32 arithmetic rounds at every step, as NCCL's kernels do). */
double round_to(double v, ncclDataType_t t)
{
    char tmp[8];
    put(tmp, t, 0, v);
    return get(tmp, t, 0);
}

double combine(double a, double b, ncclRedOp_t op, ncclDataType_t t)
{
    double r;
    switch (op) {
    case ncclProd: r = a * b; break;
    case ncclMax: r = a > b || a != a ? a : b; break;
    case ncclMin: r = a < b || a != a ? a : b; break;
    default: r = a + b; break; /* sum, avg */
    }
    return round_to(r, t);
}

/* out[i] = the ranks' values (slot r at offset `at`) reduced in rank order. */
void reduce_slots(comm *c, size_t at, char *out, size_t n, ncclDataType_t t, ncclRedOp_t op)
{
    double inv = 1.0 / c->nranks;
    for (size_t i = 0; i < n; i++) {
        double acc = 0.0;
        for (int r = 0; r < c->nranks; r++) {
            double v = get(slot(c, r) + at, t, i);
            if (op == ncclAvg && is_float(t))
                v = round_to(v * round_to(inv, t), t);
            acc = r == 0 ? v : combine(acc, v, op, t);
        }
        if (op == ncclAvg && !is_float(t))
            acc = (double)((int64_t)acc / c->nranks);
        put(out, t, i, acc);
    }
}

const char *kind_name(int k)
{
    static const char *names[] = { "ncclAllReduce", "ncclReduceScatter", "ncclAllGather",
                                   "ncclBroadcast", "ncclCommFinalize" };
    return k >= 0 && k <= 4 ? names[k] : "ncclSend/ncclRecv";
}

/* Checks shared by every operation; publishes the call's signature for the peers. */
ncclResult_t begin(comm *c, int kind, const void *in, size_t in_bytes, const void *out,
                   size_t out_bytes, size_t count, ncclDataType_t t, int op, int root,
                   cudaStream_t s)
{
    if (!c || c->magic != kMagic)
        return say(NULL, ncclInvalidArgument, "%s: not a communicator", kind_name(kind));
    if (c->aborted)
        return say(c, ncclInvalidUsage, "%s on an aborted communicator", kind_name(kind));
    if (!type_size(t) || (op >= 0 && op > ncclAvg) || root < -1 || root >= c->nranks)
        return say(c, ncclInvalidArgument, "%s: unknown type %d or op %d, or root %d",
                   kind_name(kind), (int)t, op, root);
    if (!fgemu_stream_valid(s))
        return say(c, ncclInvalidArgument, "%s: the stream is not live", kind_name(kind));
    const void *bufs[2] = { in, out };
    size_t sizes[2] = { in_bytes, out_bytes };
    for (int i = 0; i < 2; i++)
        if (sizes[i] && (fgemu_device_of(bufs[i]) != c->device ||
                         !fgemu_is_device(bufs[i], sizes[i])))
            return say(c, ncclInvalidArgument, "%s: %s buffer %p (%zu bytes) is not memory of "
                       "device %d (cudaMalloc there): device of the pointer %d",
                       kind_name(kind), i ? "receive" : "send", bufs[i], sizes[i], c->device,
                       fgemu_device_of(bufs[i]));
    (void)count;
    return ncclSuccess;
}

void *worker_main(void *arg)
{
    comm *c = (comm *)arg;
    pthread_mutex_lock(&c->qmu);
    for (;;) {
        while (c->jobs.empty() && !c->stop)
            pthread_cond_wait(&c->qcv, &c->qmu);
        if (c->jobs.empty())
            break;
        std::function<void()> job = std::move(c->jobs.front());
        c->jobs.pop_front();
        c->running = 1;
        pthread_mutex_unlock(&c->qmu);
        job();
        pthread_mutex_lock(&c->qmu);
        c->running = 0;
        pthread_cond_broadcast(&c->qcv);
    }
    pthread_mutex_unlock(&c->qmu);
    return NULL;
}

void submit(comm *c, cudaStream_t s, std::function<void()> work);

/* An operation recorded while its stream captured: each launch of the graph enqueues it
 * again, on the launch stream, as a graph's NCCL kernel node runs on a GPU (same buffers,
 * same communicator; the peers must launch their graphs too). */
struct captured_op {
    comm *c;
    std::function<void()> work;
};

void run_captured(void *ctx, cudaStream_t s)
{
    captured_op *op = (captured_op *)ctx;
    submit(op->c, s, op->work);
}

void drop_captured(void *ctx)
{
    delete (captured_op *)ctx;
}

/* Enqueues work on the stream, as NCCL's kernels are: the call returns, the stream's events
 * complete when the communicator's thread has run it. On a capturing stream the work is
 * recorded instead (NCCL's collectives are capturable), and runs at each graph launch. */
void submit(comm *c, cudaStream_t s, std::function<void()> work)
{
    if (fgemu_capturing(s)) {
        fgemu_capture_add(s, run_captured, new captured_op{ c, work }, drop_captured);
        return;
    }
    uint64_t ticket = fgemu_async_begin(s);
    pthread_mutex_lock(&c->qmu);
    c->jobs.push_back([work, s, ticket] {
        work();
        fgemu_async_end(s, ticket);
    });
    pthread_cond_broadcast(&c->qcv);
    pthread_mutex_unlock(&c->qmu);
}

/* Until every enqueued operation ran. */
void quiesce(comm *c)
{
    pthread_mutex_lock(&c->qmu);
    while (!c->jobs.empty() || c->running)
        pthread_cond_wait(&c->qcv, &c->qmu);
    pthread_mutex_unlock(&c->qmu);
}

/* FGEMU_NCCL_ENQUEUE_MS: an enqueue takes that long (a real one does work too); longer
 * than comm-nccl's 50 ms watchdog poll, a concurrent call from the watchdog is certain to
 * meet it. */
void enqueue_delay()
{
    static int ms = -1;
    if (ms < 0) {
        const char *e = getenv("FGEMU_NCCL_ENQUEUE_MS");
        ms = e && *e ? atoi(e) : 0;
    }
    if (ms > 0)
        usleep((useconds_t)ms * 1000);
}

ncclResult_t check_peers(comm *c)
{
    const call_sig *a = &c->hdr->sig[c->rank];
    for (int r = 0; r < c->nranks; r++) {
        const call_sig *b = &c->hdr->sig[r];
        if (memcmp(a, b, sizeof *a) != 0)
            return c->async = ncclInvalidUsage,
                   say(c, ncclInvalidUsage, "rank %d called %s(count %zu, type %d, op %d, root "
                       "%d) while rank %d called %s(count %zu, type %d, op %d, root %d)",
                       c->rank, kind_name(a->kind), a->count, a->dtype, a->op, a->root, r,
                       kind_name(b->kind), b->count, b->dtype, b->op, b->root);
    }
    return ncclSuccess;
}

/* The collectives' work, on the communicator's thread: chunk by chunk, write my part,
 * barrier, read, barrier. */
void run_collective(comm *c, int kind, const void *send, void *recv, size_t count,
                    ncclDataType_t t, ncclRedOp_t op, int root)
{
    size_t es = type_size(t), n = (size_t)c->nranks;
    c->hdr->sig[c->rank] = call_sig{ kind, count, (int)t, kind <= 1 ? (int)op : -1,
                                     kind == 3 ? root : -1 };
    ncclResult_t r = barrier(c, kind_name(kind));
    if (r == ncclSuccess)
        r = check_peers(c);
    size_t per = kind == 1 ? kSlot / es / n : kSlot / es;
    for (size_t lo = 0; r == ncclSuccess && lo < count; lo += per) {
        size_t m = count - lo < per ? count - lo : per;
        char *mine = slot(c, c->rank);
        if (kind == 1)
            for (size_t b = 0; b < n; b++)
                memcpy(mine + b * m * es, (const char *)send + (b * count + lo) * es, m * es);
        else if (kind != 3 || c->rank == root)
            memcpy(mine, (const char *)send + lo * es, m * es);
        r = barrier(c, kind_name(kind));
        if (r != ncclSuccess)
            break;
        char *out = (char *)recv + lo * es;
        if (kind == 0)
            reduce_slots(c, 0, out, m, t, op);
        else if (kind == 1)
            reduce_slots(c, (size_t)c->rank * m * es, out, m, t, op);
        else if (kind == 2)
            for (size_t q = 0; q < n; q++)
                memcpy((char *)recv + (q * count + lo) * es, slot(c, (int)q), m * es);
        else
            memcpy(out, slot(c, root), m * es);
        r = barrier(c, kind_name(kind));
    }
    if (r != ncclSuccess && c->async == ncclSuccess)
        c->async = r;
}

/* Checks the call where NCCL checks it (at enqueue), then enqueues the work. */
ncclResult_t collective(comm *c, int kind, const void *send, void *recv, size_t count,
                        ncclDataType_t t, ncclRedOp_t op, int root, cudaStream_t s)
{
    if (!c || c->magic != kMagic)
        return say(NULL, ncclInvalidArgument, "%s: not a communicator", kind_name(kind));
    entry in_comm(c, kind_name(kind));
    if (!in_comm.ok)
        return ncclInvalidUsage;
    enqueue_delay();
    size_t es = type_size(t), n = (size_t)c->nranks;
    size_t in_n = kind == 1 ? count * n : count, out_n = kind == 2 ? count * n : count;
    ncclResult_t r = begin(c, kind, send, (kind != 3 || c->rank == root) ? in_n * es : 0, recv,
                           out_n * es, count, t, kind <= 1 ? (int)op : -1, kind == 3 ? root : -1,
                           s);
    if (r != ncclSuccess)
        return r;
    submit(c, s, [=] { run_collective(c, kind, send, recv, count, t, op, root); });
    return ncclSuccess;
}

} // namespace

extern "C" {

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t c)
{
    comm *m = (comm *)c;
    return m && m->magic == kMagic ? m->last : t_last;
}

ncclResult_t ncclGetVersion(int *v)
{
    if (!v)
        return ncclInvalidArgument;
    *v = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    if (!id)
        return ncclInvalidArgument;
    memset(id, 0, sizeof *id);
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    snprintf(id->internal, sizeof id->internal, "/fgemu-nccl-%d-%u-%ld", (int)getpid(),
             g_ids.fetch_add(1), (long)t.tv_nsec);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    if (!out)
        return say(NULL, ncclInvalidArgument, "ncclCommInitRankConfig: comm is NULL");
    *out = NULL;
    if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks)
        return say(NULL, ncclInvalidArgument, "ncclCommInitRankConfig: rank %d of %d (the "
                   "emulation takes up to %d ranks)", rank, nranks, kMaxRanks);
    if (strncmp(id.internal, "/fgemu-nccl-", 12) != 0)
        return say(NULL, ncclInvalidArgument, "ncclCommInitRankConfig: not a unique id from "
                   "ncclGetUniqueId");
    comm *c = new comm();
    c->magic = kMagic;
    c->rank = rank;
    c->nranks = nranks;
    cudaGetDevice(&c->device);
    memcpy(c->name, id.internal, NCCL_UNIQUE_ID_BYTES);
    c->name[NCCL_UNIQUE_ID_BYTES] = 0;
    c->map_bytes = map_size(nranks);
    int fd = shm_open(c->name, O_CREAT | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)c->map_bytes) != 0) {
        ncclResult_t r = say(NULL, ncclSystemError, "shm_open/ftruncate %s: %s", c->name,
                             strerror(errno));
        if (fd >= 0)
            close(fd);
        delete c;
        return r;
    }
    void *m = mmap(NULL, c->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        delete c;
        return say(NULL, ncclSystemError, "mmap %s: %s", c->name, strerror(errno));
    }
    shm_hdr *h = (shm_hdr *)m;
    c->hdr = h;
    int expect = 0;
    if (h->init.compare_exchange_strong(expect, 1)) {
        pthread_mutexattr_t ma;
        pthread_condattr_t ca;
        pthread_mutexattr_init(&ma);
        pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
        pthread_mutex_init(&h->mu, &ma);
        pthread_condattr_init(&ca);
        pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
        pthread_cond_init(&h->cv, &ca);
        h->nranks = nranks;
        h->init.store(2);
    }
    while (h->init.load() != 2)
        usleep(1000);
    pthread_mutex_lock(&h->mu);
    h->device[rank] = c->device + 1; /* 0: not joined */
    h->joined++;
    pthread_cond_broadcast(&h->cv);
    ncclResult_t r = wait_for(c, [&] { return h->joined >= nranks; }, "ncclCommInitRankConfig");
    pthread_mutex_unlock(&h->mu);
    for (int q = 0; r == ncclSuccess && q < nranks; q++)
        if (q != rank && h->device[q] == h->device[rank])
            r = say(c, ncclInvalidUsage, "Duplicate GPU detected: rank %d and rank %d both on "
                    "device %d", rank, q, c->device);
    if (r == ncclSuccess)
        r = barrier(c, "ncclCommInitRankConfig");
    if (r == ncclSuccess && rank == 0)
        shm_unlink(c->name); /* every rank has it mapped: no file left behind */
    if (r != ncclSuccess) {
        shm_unlink(c->name); /* a failed init leaves no segment behind either */
        munmap(h, c->map_bytes);
        delete c;
        return r;
    }
    pthread_mutex_init(&c->qmu, NULL);
    pthread_cond_init(&c->qcv, NULL);
    c->worker_started = pthread_create(&c->worker, NULL, worker_main, c) == 0;
    if (!c->worker_started) {
        munmap(h, c->map_bytes);
        delete c;
        return say(NULL, ncclSystemError, "cannot start the communicator's thread");
    }
    *out = (ncclComm_t)c;
    c->pending_init = config && !config->blocking;
    return c->pending_init ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t cm, ncclResult_t *state)
{
    comm *c = (comm *)cm;
    if (!c || c->magic != kMagic || !state)
        return ncclInvalidArgument;
    entry in_comm(c, "ncclCommGetAsyncError");
    if (!in_comm.ok) {
        *state = ncclInvalidUsage;
        return ncclInvalidUsage;
    }
    if (c->pending_init) {
        c->pending_init = 0;
        *state = ncclInProgress;
        return ncclSuccess;
    }
    *state = c->async;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t cm)
{
    comm *c = (comm *)cm;
    if (!c || c->magic != kMagic)
        return ncclInvalidArgument;
    entry in_comm(c, "ncclCommFinalize");
    if (!in_comm.ok)
        return ncclInvalidUsage;
    quiesce(c);
    if (c->aborted)
        return ncclSuccess;
    c->hdr->sig[c->rank] = call_sig{ 4, 0, 0, -1, -1 };
    ncclResult_t r = barrier(c, "ncclCommFinalize");
    return r == ncclSuccess ? check_peers(c) : r;
}

static ncclResult_t release(comm *c)
{
    pthread_mutex_lock(&c->qmu);
    c->stop = 1;
    pthread_cond_broadcast(&c->qcv);
    pthread_mutex_unlock(&c->qmu);
    pthread_join(c->worker, NULL);
    c->magic = 0;
    munmap(c->hdr, c->map_bytes);
    delete c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t cm)
{
    comm *c = (comm *)cm;
    if (!c || c->magic != kMagic)
        return ncclInvalidArgument;
    {
        entry in_comm(c, "ncclCommDestroy");
        if (!in_comm.ok)
            return ncclInvalidUsage;
    }
    return release(c);
}

/* Makes every rank's waits fail (ncclRemoteError) and frees the handle, as NCCL does
 * (here the mapping is kept so that a peer's process still waiting sees the flag). */
ncclResult_t ncclCommAbort(ncclComm_t cm)
{
    comm *c = (comm *)cm;
    if (!c || c->magic != kMagic)
        return ncclInvalidArgument;
    entry in_comm(c, "ncclCommAbort");
    if (!in_comm.ok)
        return ncclInvalidUsage;
    c->aborted = 1;
    c->hdr->aborted = 1;
    pthread_cond_broadcast(&c->hdr->cv);
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t cm, cudaStream_t s)
{
    return collective((comm *)cm, 0, send, recv, count, t, op, -1, s);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t cm, cudaStream_t s)
{
    return collective((comm *)cm, 1, send, recv, count, t, op, -1, s);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclComm_t cm, cudaStream_t s)
{
    return collective((comm *)cm, 2, send, recv, count, t, ncclSum, -1, s);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t,
                           int root, ncclComm_t cm, cudaStream_t s)
{
    if (root < 0)
        return say((comm *)cm, ncclInvalidArgument, "ncclBroadcast: root %d", root);
    return collective((comm *)cm, 3, send, recv, count, t, ncclSum, root, s);
}

/* Point to point: the sender fills the pair's mailbox chunk by chunk; the receiver empties
 * it. The byte counts must agree (NCCL would hang or truncate). Both run on the
 * communicator's thread, in enqueue order. */
static void run_send(comm *c, const void *buf, size_t bytes, int peer)
{
    shm_hdr *h = c->hdr;
    size_t done = 0;
    ncclResult_t r = ncclSuccess;
    do {
        size_t m = bytes - done < kSlot ? bytes - done : kSlot;
        pthread_mutex_lock(&h->mu);
        r = wait_for(c, [&] { return h->taken[c->rank][peer] == h->sent[c->rank][peer]; },
                     "ncclSend");
        if (r == ncclSuccess) {
            memcpy(box(c, c->rank, peer), (const char *)buf + done, m);
            h->box_bytes[c->rank][peer] = done + m == bytes ? bytes : (size_t)-1;
            h->sent[c->rank][peer]++;
            pthread_cond_broadcast(&h->cv);
        }
        pthread_mutex_unlock(&h->mu);
        done += m;
    } while (r == ncclSuccess && done < bytes);
    if (r != ncclSuccess && c->async == ncclSuccess)
        c->async = r;
}

static void run_recv(comm *c, void *buf, size_t bytes, int peer)
{
    shm_hdr *h = c->hdr;
    size_t done = 0;
    ncclResult_t r = ncclSuccess;
    do {
        size_t m = bytes - done < kSlot ? bytes - done : kSlot;
        pthread_mutex_lock(&h->mu);
        r = wait_for(c, [&] { return h->sent[peer][c->rank] > h->taken[peer][c->rank]; },
                     "ncclRecv");
        if (r == ncclSuccess) {
            size_t sent = h->box_bytes[peer][c->rank];
            if ((done + m == bytes) != (sent != (size_t)-1) ||
                (sent != (size_t)-1 && sent != bytes))
                r = c->async = ncclInvalidUsage,
                say(c, ncclInvalidUsage, "ncclRecv of %zu bytes from rank %d, which sends "
                    "another size", bytes, peer);
            else
                memcpy((char *)buf + done, box(c, peer, c->rank), m);
            h->taken[peer][c->rank]++;
            pthread_cond_broadcast(&h->cv);
        }
        pthread_mutex_unlock(&h->mu);
        done += m;
    } while (r == ncclSuccess && done < bytes);
    if (r != ncclSuccess && c->async == ncclSuccess)
        c->async = r;
}

static ncclResult_t p2p(const char *who, int sending, void *buf, size_t count,
                        ncclDataType_t t, int peer, ncclComm_t cm, cudaStream_t s)
{
    comm *c = (comm *)cm;
    if (!c || c->magic != kMagic)
        return say(NULL, ncclInvalidArgument, "%s: not a communicator", who);
    entry in_comm(c, who);
    if (!in_comm.ok)
        return ncclInvalidUsage;
    enqueue_delay();
    size_t bytes = count * type_size(t);
    ncclResult_t r = sending ? begin(c, -1, buf, bytes, NULL, 0, count, t, -1, peer, s)
                             : begin(c, -1, NULL, 0, buf, bytes, count, t, -1, peer, s);
    if (r != ncclSuccess)
        return r;
    if (peer < 0 || peer == c->rank)
        return say(c, ncclInvalidArgument, "%s with peer %d", who, peer);
    if (sending)
        submit(c, s, [=] { run_send(c, buf, bytes, peer); });
    else
        submit(c, s, [=] { run_recv(c, buf, bytes, peer); });
    return ncclSuccess;
}

ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t cm,
                      cudaStream_t s)
{
    return p2p("ncclSend", 1, (void *)buf, count, t, peer, cm, s);
}

ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t cm,
                      cudaStream_t s)
{
    return p2p("ncclRecv", 0, buf, count, t, peer, cm, s);
}

} // extern "C"
