/* CUDA graphs (ABI 1.7, `[backend] cuda_graphs`): a queue's stream captured into a graph,
 * instantiated once, launched on the queue each step. Thread-local capture mode: the
 * capturing thread may not allocate or synchronise (the runtime refuses it and the capture
 * fails at graph_end), while the data loader's threads go on with their own streams. */
#include <stdlib.h>

#include "cuda_backend.h"
#include "cuda_graph.h"

typedef struct fg_cuda_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
} fg_cuda_graph;

fg_status fg_cuda_graph_begin(void *state, void *queue, fg_error *err)
{
    (void)state;
    fg_status st = fg_cuda_enter(queue, "graph_begin", err);
    if (st != FG_OK)
        return st;
    cudaError_t e = cudaStreamBeginCapture(((fg_cuda_queue *)queue)->stream,
                                           cudaStreamCaptureModeThreadLocal);
    return e == cudaSuccess ? FG_OK : fg_cuda_fail(err, e, "graph_begin: cudaStreamBeginCapture");
}

fg_status fg_cuda_graph_end(void *state, void *queue, void **graph, fg_error *err)
{
    (void)state;
    *graph = NULL;
    fg_status st = fg_cuda_enter(queue, "graph_end", err);
    if (st != FG_OK)
        return st;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(((fg_cuda_queue *)queue)->stream, &g);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* the capture's error is reported here, not at the next op */
        return fg_cuda_fail(err, e, "graph_end: cudaStreamEndCapture (a call of the captured "
                            "step cannot be captured)");
    }
    fg_cuda_graph *h = calloc(1, sizeof *h);
    if (!h) {
        cudaGraphDestroy(g);
        return fg_error_set(err, FG_OUT_OF_MEMORY, "graph_end: out of host memory");
    }
    h->graph = g;
    e = cudaGraphInstantiate(&h->exec, g, 0);
    if (e != cudaSuccess) {
        fg_cuda_graph_destroy(state, h);
        return fg_cuda_fail(err, e, "graph_end: cudaGraphInstantiate");
    }
    *graph = h;
    ((fg_cuda_queue *)queue)->graphs++;
    return FG_OK;
}

fg_status fg_cuda_graph_launch(void *state, void *queue, void *graph, fg_error *err)
{
    (void)state;
    fg_status st = fg_cuda_enter(queue, "graph_launch", err);
    if (st != FG_OK)
        return st;
    if (!graph)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "graph_launch: no graph");
    cudaError_t e = cudaGraphLaunch(((fg_cuda_graph *)graph)->exec,
                                    ((fg_cuda_queue *)queue)->stream);
    return e == cudaSuccess ? FG_OK : fg_cuda_fail(err, e, "graph_launch: cudaGraphLaunch");
}

void fg_cuda_graph_destroy(void *state, void *graph)
{
    (void)state;
    fg_cuda_graph *h = graph;
    if (!h)
        return;
    if (h->exec)
        cudaGraphExecDestroy(h->exec);
    if (h->graph)
        cudaGraphDestroy(h->graph);
    free(h);
}
