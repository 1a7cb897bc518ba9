/* The emulated device's execution: a launch runs its blocks one after the other on the
 * calling OS thread (one launch at a time in the process), each block's threads as fibers
 * switched by fgemu_switch (emu_switch.S). A fiber runs until a barrier, a shuffle, its
 * end, or (random mode) a scheduling point. A barrier that cannot complete is reported as
 * a deadlock naming the kernel and the block, and the kernel fails with a sticky error
 * (cudaErrorLaunchFailure), never a hang. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <vector>

#include "emu_api.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define FGEMU_ASAN 1
#endif

extern "C" void fgemu_switch(void **from, void *to);
extern "C" void fgemu_fiber_entry(void);

namespace {

enum state { RUNNABLE, AT_BLOCK_BARRIER, AT_WARP_BARRIER, DONE };

#ifdef FGEMU_ASAN
constexpr size_t kStack = 512 << 10;
#else
constexpr size_t kStack = 128 << 10;
#endif
constexpr int kMaxThreads = 1024;
constexpr size_t kDynamicShared = 48 << 10; /* the default limit without an opt-in */

struct fiber {
    fgemu_thread_view view;
    void *sp;
    char *stack;
    int linear, lane, warp;
    state st;
    unsigned wait_mask;
    alignas(16) unsigned char slot[16];
};

struct block_run {
    const char *kernel;
    fgemu_thread_view base;
    int nthreads;
    fiber *fibers;
    fiber *cur;
    void *sched_sp;
    int at_block;
    int done;
    void (*body)(void *);
    void *arg;
    int failed;
    const void *sched_stack_bottom;
    size_t sched_stack_size;
};

pthread_mutex_t g_launch = PTHREAD_MUTEX_INITIALIZER;
block_run *g_run;           /* the block that runs now (under g_launch) */
fiber g_fibers[kMaxThreads];
alignas(64) unsigned char g_dynamic[kDynamicShared];
uint64_t g_random;          /* xorshift state; 0: fixed order */
int g_poison = 1, g_modes_read, g_failures;
fgemu_thread_view g_host_view; /* what host code reading threadIdx would see: zeros */

uint64_t next_random()
{
    uint64_t x = g_random;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    g_random = x;
    return x;
}

void read_modes()
{
    if (g_modes_read)
        return;
    g_modes_read = 1;
    const char *r = getenv("FGEMU_RANDOM");
    if (r && *r && !g_random)
        fgemu_set_random(strtoull(r, NULL, 0));
    const char *p = getenv("FGEMU_POISON");
    if (p && *p == '0')
        g_poison = 0;
}

char *stack_for(int i)
{
    static char *stacks[kMaxThreads];
    if (!stacks[i]) {
        void *m = mmap(NULL, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            fprintf(stderr, "cudaemu: cannot map a %zu-byte fiber stack\n", kStack);
            abort();
        }
        mprotect(m, 4096, PROT_NONE); /* guard page: a stack overflow faults */
        stacks[i] = (char *)m;
    }
    return stacks[i];
}

void to_fiber(block_run *b, fiber *f)
{
    b->cur = f;
#ifdef FGEMU_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, f->stack, kStack);
    fgemu_switch(&b->sched_sp, f->sp);
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#else
    fgemu_switch(&b->sched_sp, f->sp);
#endif
    b->cur = NULL;
}

void to_scheduler(block_run *b, fiber *f, int exiting)
{
#ifdef FGEMU_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(exiting ? NULL : &fake, b->sched_stack_bottom,
                                   b->sched_stack_size);
    fgemu_switch(&f->sp, b->sched_sp);
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#else
    (void)exiting;
    fgemu_switch(&f->sp, b->sched_sp);
#endif
}

void fiber_main(void *p)
{
    fiber *f = (fiber *)p;
    block_run *b = g_run;
#ifdef FGEMU_ASAN
    __sanitizer_finish_switch_fiber(NULL, &b->sched_stack_bottom, &b->sched_stack_size);
#endif
    b->body(b->arg);
    f->st = DONE;
    b->done++;
    to_scheduler(b, f, 1);
    abort(); /* a finished fiber is never resumed */
}

void start_fiber(fiber *f)
{
    uintptr_t top = ((uintptr_t)f->stack + kStack) & ~(uintptr_t)15;
    void **sp = (void **)(top - 72); /* 6 registers + the return address; see emu_switch.S */
    sp[0] = 0;                       /* r15 */
    sp[1] = 0;                       /* r14 */
    sp[2] = (void *)f;               /* r13: the argument */
    sp[3] = (void *)&fiber_main;     /* r12: the function */
    sp[4] = 0;                       /* rbx */
    sp[5] = 0;                       /* rbp */
    sp[6] = (void *)&fgemu_fiber_entry;
    f->sp = sp;
}

/* Lanes of f's warp named in mask that have not exited all wait at a warp barrier with
 * that mask: release them. */
void try_release_warp(block_run *b, int warp, unsigned mask)
{
    int base = warp * 32;
    for (int l = 0; l < 32; l++) {
        if (!(mask >> l & 1u))
            continue;
        if (base + l >= b->nthreads)
            return; /* a lane that does not exist never arrives: deadlock, reported later */
        fiber *g = &b->fibers[base + l];
        if (g->st == DONE)
            continue;
        if (g->st != AT_WARP_BARRIER || g->wait_mask != mask)
            return;
    }
    for (int l = 0; l < 32 && base + l < b->nthreads; l++) {
        fiber *g = &b->fibers[base + l];
        if ((mask >> l & 1u) && g->st == AT_WARP_BARRIER)
            g->st = RUNNABLE;
    }
}

const char *state_name(state s)
{
    return s == RUNNABLE ? "running" : s == AT_BLOCK_BARRIER ? "at __syncthreads"
                           : s == AT_WARP_BARRIER ? "at a warp barrier (__syncwarp/__shfl)"
                                                  : "exited";
}

void report_deadlock(block_run *b)
{
    const fgemu_thread_view *v = &b->base;
    fprintf(stderr,
            "cudaemu: kernel %s block (%u,%u,%u): deadlock: a barrier not every thread "
            "reaches; threads by state:\n", b->kernel, v->block_idx.x, v->block_idx.y,
            v->block_idx.z);
    int i = 0;
    while (i < b->nthreads) {
        int j = i;
        fiber *f = &b->fibers[i];
        while (j + 1 < b->nthreads && b->fibers[j + 1].st == f->st &&
               b->fibers[j + 1].wait_mask == f->wait_mask)
            j++;
        if (f->st == AT_WARP_BARRIER)
            fprintf(stderr, "  threads %d-%d: %s, mask 0x%08x\n", i, j, state_name(f->st),
                    f->wait_mask);
        else
            fprintf(stderr, "  threads %d-%d: %s\n", i, j, state_name(f->st));
        i = j + 1;
    }
}

void fail_kernel(block_run *b)
{
    b->failed = 1;
    g_failures++;
    fgemu_set_sticky(cudaErrorLaunchFailure);
    if (getenv("FGEMU_ABORT"))
        abort();
}

/* Runs every fiber of the block until all are done; 0 on a deadlock. */
int schedule(block_run *b)
{
    int n = b->nthreads;
    int next = 0;
    while (b->done < n) {
        fiber *pick = NULL;
        if (g_random) {
            int start = (int)(next_random() % (uint64_t)n);
            for (int k = 0; k < n && !pick; k++)
                if (b->fibers[(start + k) % n].st == RUNNABLE)
                    pick = &b->fibers[(start + k) % n];
        } else {
            for (int k = 0; k < n && !pick; k++) {
                fiber *f = &b->fibers[(next + k) % n];
                if (f->st == RUNNABLE)
                    pick = f;
            }
        }
        if (!pick) {
            report_deadlock(b);
            return 0;
        }
        next = (int)(pick - b->fibers);
        to_fiber(b, pick);
        if (b->failed)
            return 0;
        if (pick->st == DONE) {
            if (b->at_block > 0) {
                fprintf(stderr, "cudaemu: kernel %s: thread %d exited while %d thread(s) "
                        "wait at __syncthreads\n", b->kernel, pick->linear, b->at_block);
                report_deadlock(b);
                return 0;
            }
            for (int w = 0; w * 32 < n; w++)
                for (int l = 0; l < 32 && w * 32 + l < n; l++)
                    if (b->fibers[w * 32 + l].st == AT_WARP_BARRIER) {
                        try_release_warp(b, w, b->fibers[w * 32 + l].wait_mask);
                        break;
                    }
        }
    }
    return 1;
}

fiber *self(const char *what)
{
    block_run *b = g_run;
    if (!b || !b->cur) {
        fprintf(stderr, "cudaemu: %s called outside a kernel\n", what);
        abort();
    }
    return b->cur;
}

int check_dims(const char *name, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream)
{
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    const char *why = NULL;
    cudaError_t e = cudaErrorInvalidConfiguration;
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z)
        why = "a zero grid or block dimension";
    else if (threads > kMaxThreads || block.x > 1024 || block.y > 1024 || block.z > 64)
        why = "more than 1024 threads a block (or a block dimension over its limit)";
    else if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535)
        why = "a grid dimension over its limit (2^31-1, 65535, 65535)";
    else if (shmem > kDynamicShared)
        why = "more dynamic shared memory than the default 48 KiB";
    else if (!fgemu_stream_valid(stream)) {
        why = "a stream that is not a live stream";
        e = cudaErrorInvalidResourceHandle;
    }
    if (!why)
        return 1;
    fprintf(stderr, "cudaemu: launch of %s refused: %s (grid %u,%u,%u block %u,%u,%u)\n", name,
            why, grid.x, grid.y, grid.z, block.x, block.y, block.z);
    fgemu_set_last(e);
    return 0;
}

void run_block(block_run *b, const fgemu_shared_range *shared, size_t shmem)
{
    if (g_poison) {
        if (shared && shared->begin && shared->end > shared->begin)
            memset(shared->begin, 0xff, (size_t)(shared->end - shared->begin));
        memset(g_dynamic, 0xff, shmem);
    }
    const dim3 bd = b->base.block_dim;
    for (int i = 0; i < b->nthreads; i++) {
        fiber *f = &b->fibers[i];
        f->view = b->base;
        f->view.thread_idx.x = (unsigned)i % bd.x;
        f->view.thread_idx.y = (unsigned)i / bd.x % bd.y;
        f->view.thread_idx.z = (unsigned)i / (bd.x * bd.y);
        f->linear = i;
        f->lane = i % 32;
        f->warp = i / 32;
        f->st = RUNNABLE;
        f->wait_mask = 0;
        f->stack = stack_for(i);
        start_fiber(f);
    }
    b->done = 0;
    b->at_block = 0;
    if (!schedule(b) && !b->failed)
        fail_kernel(b);
}

} // namespace

extern "C" {

const fgemu_thread_view *fgemu_current(void)
{
    block_run *b = g_run;
    return b && b->cur ? &b->cur->view : &g_host_view;
}

void fgemu_set_random(uint64_t seed)
{
    g_random = seed ? seed * 0x9e3779b97f4a7c15ull | 1u : 0;
}

void fgemu_set_poison(int on)
{
    g_poison = on;
}

int fgemu_failures(void)
{
    return g_failures;
}

void *fgemu_dynamic_shared(void)
{
    return g_dynamic;
}

void fgemu_launch(const char *name, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                  const fgemu_shared_range *shared, void (*body)(void *), void *arg)
{
    fgemu_stream_drain(stream); /* stream order: the asynchronous work before it */
    pthread_mutex_lock(&g_launch);
    read_modes();
    if (fgemu_sticky() != cudaSuccess || !check_dims(name, grid, block, shmem, stream)) {
        pthread_mutex_unlock(&g_launch);
        return;
    }
    block_run b{};
    b.kernel = name;
    b.nthreads = (int)(block.x * block.y * block.z);
    b.fibers = g_fibers;
    b.body = body;
    b.arg = arg;
    b.base.block_dim = block;
    b.base.grid_dim = grid;
    g_run = &b;
    for (unsigned z = 0; z < grid.z && !b.failed; z++)
        for (unsigned y = 0; y < grid.y && !b.failed; y++)
            for (unsigned x = 0; x < grid.x && !b.failed; x++) {
                b.base.block_idx = uint3{ x, y, z };
                run_block(&b, shared, shmem);
            }
    g_run = NULL;
    pthread_mutex_unlock(&g_launch);
}

void fgemu_point(void)
{
    block_run *b = g_run;
    if (!g_random || !b || !b->cur || next_random() % 4 != 0)
        return;
    to_scheduler(b, b->cur, 0);
}

void fgemu_syncthreads(void)
{
    fiber *f = self("__syncthreads");
    block_run *b = g_run;
    f->st = AT_BLOCK_BARRIER;
    if (++b->at_block == b->nthreads) {
        for (int i = 0; i < b->nthreads; i++)
            b->fibers[i].st = RUNNABLE;
        b->at_block = 0;
    }
    to_scheduler(b, f, 0);
}

void fgemu_syncwarp(unsigned mask)
{
    fiber *f = self("__syncwarp");
    block_run *b = g_run;
    if (!(mask >> f->lane & 1u)) {
        fprintf(stderr, "cudaemu: kernel %s: thread %d calls a warp barrier with mask 0x%08x "
                "that leaves out its own lane %d\n", b->kernel, f->linear, mask, f->lane);
        fail_kernel(b);
        to_scheduler(b, f, 0);
        return;
    }
    f->st = AT_WARP_BARRIER;
    f->wait_mask = mask;
    try_release_warp(b, f->warp, mask);
    to_scheduler(b, f, 0);
}

/* Every lane writes its value to its slot, a warp barrier, each reads its source lane's
 * slot, a second barrier (so no slot is overwritten before every lane read it). */
void fgemu_shfl(unsigned mask, const void *in, void *out, size_t size, int kind, int arg,
                int width)
{
    fiber *f = self("__shfl_*_sync");
    block_run *b = g_run;
    if (width < 1 || width > 32 || (width & (width - 1))) {
        fprintf(stderr, "cudaemu: kernel %s: shuffle width %d is not a power of two <= 32\n",
                b->kernel, width);
        fail_kernel(b);
        to_scheduler(b, f, 0);
        return;
    }
    memcpy(f->slot, in, size);
    fgemu_syncwarp(mask);
    if (b->failed)
        return;
    int lane = f->lane, seg = lane & ~(width - 1), src = lane;
    if (kind == FGEMU_SHFL_IDX)
        src = seg + (arg & (width - 1));
    else if (kind == FGEMU_SHFL_UP)
        src = lane - arg >= seg ? lane - arg : lane;
    else if (kind == FGEMU_SHFL_DOWN)
        src = lane + arg < seg + width ? lane + arg : lane;
    else
        src = (lane ^ arg) < seg + width ? lane ^ arg : lane;
    int idx = f->warp * 32 + src;
    if (src < 0 || src > 31 || !(mask >> src & 1u) || idx >= b->nthreads ||
        b->fibers[idx].st == DONE) {
        fprintf(stderr, "cudaemu: kernel %s: thread %d shuffles from lane %d, which is not "
                "in mask 0x%08x or has exited (an undefined value on a GPU)\n", b->kernel,
                f->linear, src, mask);
        fail_kernel(b);
        to_scheduler(b, f, 0);
        return;
    }
    memcpy(out, b->fibers[idx].slot, size);
    fgemu_syncwarp(mask);
}

} // extern "C"
