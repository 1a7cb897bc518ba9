/* cuda_graph.c: the backend's graph entries (ABI 1.7): capture of a queue, launch, destroy. */
#ifndef FULGUR_CUDA_GRAPH_H
#define FULGUR_CUDA_GRAPH_H

#include <fulgur/backend.h>

fg_status fg_cuda_graph_begin(void *state, void *queue, fg_error *err);
fg_status fg_cuda_graph_end(void *state, void *queue, void **graph, fg_error *err);
fg_status fg_cuda_graph_launch(void *state, void *queue, void *graph, fg_error *err);
void fg_cuda_graph_destroy(void *state, void *graph);

#endif
