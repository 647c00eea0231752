/* CUDA graphs of the fake driver: kernel nodes only. Parameters are copied
 * when a node is added, as the real driver does, and a launch of the
 * instantiated graph queues its kernels on the stream in the order they
 * were added. */
#include "fakecuda.h"

#include <stdlib.h>
#include <string.h>

struct gmt__node {
  struct gmt__graph *g;
  CUfunction f;
  uint64_t us;
  unsigned dims[6];
};

struct gmt__graph {
  struct gmt__node **nodes;
  size_t n, cap;
};

struct gmt__exec {
  size_t n;
  struct gmt__node *nodes; /* copies */
};

static void graph_free_child(void *p)
{
  struct gmt__graph *g = p;
  free(g->nodes);
}
static void exec_free_child(void *p)
{
  struct gmt__exec *e = p;
  free(e->nodes);
}

/* After fork: free what graphs and execs own; state.c frees the rest. */
void gmt__graph_reset_child(void)
{
  gmt__handle_each(GMT__K_GRAPH, graph_free_child);
  gmt__handle_each(GMT__K_EXEC, exec_free_child);
}

CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
  GMT_FAKE_NEED_INIT();
  if (!phGraph || flags != 0)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  gmt__fake_lock();
  struct gmt__graph *g = calloc(1, sizeof *g);
  if (g && gmt__handle_add(g, GMT__K_GRAPH) != 0) {
    free(g);
    g = NULL;
  }
  gmt__fake_unlock();
  if (!g)
    GMT_FAKE_RET(CUDA_ERROR_OUT_OF_MEMORY);
  *phGraph = (CUgraph)g;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

static CUresult add_kernel_node(CUgraphNode *ph, CUgraph hg, const CUgraphNode *deps, size_t ndeps,
                                CUfunction f, const unsigned dims[6], void **params, void **extra)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!ph || (ndeps && !deps))
    return CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < 6; i++)
    if (!dims[i])
      return CUDA_ERROR_INVALID_VALUE;
  gmt__fake_lock();
  struct gmt__graph *g = (struct gmt__graph *)hg;
  CUresult r = CUDA_SUCCESS;
  if (!gmt__handle_ok(g, GMT__K_GRAPH))
    r = CUDA_ERROR_INVALID_VALUE;
  else if (!gmt__handle_ok(f, GMT__K_FUNC))
    r = CUDA_ERROR_INVALID_HANDLE;
  for (size_t i = 0; r == CUDA_SUCCESS && i < ndeps; i++)
    if (!gmt__handle_ok(deps[i], GMT__K_NODE))
      r = CUDA_ERROR_INVALID_VALUE;
  struct gmt__node *n = NULL;
  if (r == CUDA_SUCCESS && g->n == g->cap) {
    size_t ncap = g->cap ? g->cap * 2 : 8;
    struct gmt__node **nn = realloc(g->nodes, ncap * sizeof *nn);
    if (!nn)
      r = CUDA_ERROR_OUT_OF_MEMORY;
    else
      g->nodes = nn, g->cap = ncap;
  }
  if (r == CUDA_SUCCESS) {
    n = calloc(1, sizeof *n);
    if (!n || gmt__handle_add(n, GMT__K_NODE) != 0) {
      free(n);
      n = NULL;
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (n) {
    n->g = g;
    n->f = f;
    n->us = gmt__kernel_duration((struct gmt__func *)f, params, extra);
    memcpy(n->dims, dims, sizeof n->dims);
    g->nodes[g->n++] = n;
    *ph = (CUgraphNode)n;
  }
  gmt__fake_unlock();
  return r;
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                 const CUDA_KERNEL_NODE_PARAMS *p)
{
  if (!p)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  CUfunction f = p->func ? p->func : (CUfunction)p->kern;
  unsigned dims[6] = {p->gridDimX,  p->gridDimY,  p->gridDimZ,
                      p->blockDimX, p->blockDimY, p->blockDimZ};
  GMT_FAKE_RET(add_kernel_node(ph, g, deps, ndeps, f, dims, p->kernelParams, p->extra));
}

CUresult cuGraphAddKernelNode(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                              const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
  if (!p)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  unsigned dims[6] = {p->gridDimX,  p->gridDimY,  p->gridDimZ,
                      p->blockDimX, p->blockDimY, p->blockDimZ};
  GMT_FAKE_RET(add_kernel_node(ph, g, deps, ndeps, p->func, dims, p->kernelParams, p->extra));
}

static CUresult instantiate(CUgraphExec *out, CUgraph hg)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!out)
    return CUDA_ERROR_INVALID_VALUE;
  gmt__fake_lock();
  struct gmt__graph *g = (struct gmt__graph *)hg;
  CUresult r = CUDA_SUCCESS;
  struct gmt__exec *e = NULL;
  if (!gmt__handle_ok(g, GMT__K_GRAPH)) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else {
    e = calloc(1, sizeof *e);
    if (e)
      e->nodes = calloc(g->n ? g->n : 1, sizeof *e->nodes);
    if (!e || !e->nodes || gmt__handle_add(e, GMT__K_EXEC) != 0) {
      if (e)
        free(e->nodes);
      free(e);
      e = NULL;
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (e) {
    for (size_t i = 0; i < g->n; i++)
      e->nodes[i] = *g->nodes[i];
    e->n = g->n;
    *out = (CUgraphExec)e;
  }
  gmt__fake_unlock();
  return r;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                     unsigned long long flags)
{
  (void)flags;
  GMT_FAKE_RET(instantiate(phGraphExec, hGraph));
}

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                               char *logBuffer, size_t bufferSize)
{
  if (phErrorNode)
    *phErrorNode = NULL;
  if (logBuffer && bufferSize)
    logBuffer[0] = '\0';
  GMT_FAKE_RET(instantiate(phGraphExec, hGraph));
}

static CUresult graph_launch(CUgraphExec he, CUstream s)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  struct gmt__exec *e = (struct gmt__exec *)he;
  int dev = 0;
  struct gmt__queue *q = NULL;
  CUresult r = gmt__stream_queue_locked(s, &dev, &q);
  if (r == CUDA_SUCCESS && !gmt__handle_ok(e, GMT__K_EXEC))
    r = CUDA_ERROR_INVALID_VALUE;
  /* One operation per kernel node, each with its own copy of the duration,
   * so the exec may be destroyed while they wait; queued together, so no
   * other work on the stream comes between them. */
  struct gmt__op *first = NULL, **tail = &first;
  size_t n = r == CUDA_SUCCESS ? e->n : 0;
  for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
    *tail = gmt__kernel_op(dev, e->nodes[i].us);
    if (!*tail)
      r = CUDA_ERROR_OUT_OF_MEMORY;
    else
      tail = &(*tail)->next;
  }
  if (r == CUDA_SUCCESS)
    r = gmt__queue_submit(q, first, NULL);
  else
    gmt__op_free(first);
  gmt__fake_unlock();
  if (r == CUDA_SUCCESS)
    gmt__fake_log("graph launch of %zu kernel(s) on device %d: queued", n, dev);
  return r;
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
  GMT_FAKE_RET(graph_launch(hGraphExec, hStream));
}
CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
  GMT_FAKE_RET(graph_launch(hGraphExec, GMT_PTSZ(hStream)));
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
  GMT_FAKE_NEED_INIT();
  gmt__fake_lock();
  struct gmt__exec *e = (struct gmt__exec *)hGraphExec;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if (gmt__handle_ok(e, GMT__K_EXEC)) {
    gmt__handle_del(e);
    free(e->nodes);
    free(e);
    r = CUDA_SUCCESS;
  }
  gmt__fake_unlock();
  GMT_FAKE_RET(r);
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
  GMT_FAKE_NEED_INIT();
  gmt__fake_lock();
  struct gmt__graph *g = (struct gmt__graph *)hGraph;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if (gmt__handle_ok(g, GMT__K_GRAPH)) {
    for (size_t i = 0; i < g->n; i++) {
      gmt__handle_del(g->nodes[i]);
      free(g->nodes[i]);
    }
    gmt__handle_del(g);
    free(g->nodes);
    free(g);
    r = CUDA_SUCCESS;
  }
  gmt__fake_unlock();
  GMT_FAKE_RET(r);
}
