/* `gmt top`'s per-pod history (top_history.h). A node has at most a few
 * hundred pods, so a list searched by name is enough. */
#include "top_history.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char *name;
  double *ring; /* depth values; the oldest at head once full */
  size_t head, count;
  uint64_t seen; /* the refresh that last added it */
} pod_hist_t;

struct gmt_top_history {
  size_t depth;
  pod_hist_t *pods;
  size_t n, cap;
  uint64_t refresh;
};

int gmt_top_history_new(gmt_top_history_t **out, size_t depth)
{
  *out = NULL;
  if (!depth)
    return -EINVAL;
  gmt_top_history_t *h = calloc(1, sizeof *h);
  if (!h)
    return -ENOMEM;
  h->depth = depth;
  *out = h;
  return 0;
}

static void pod_free(pod_hist_t *p)
{
  free(p->name);
  free(p->ring);
}

void gmt_top_history_free(gmt_top_history_t *h)
{
  if (!h)
    return;
  for (size_t i = 0; i < h->n; i++)
    pod_free(&h->pods[i]);
  free(h->pods);
  free(h);
}

static pod_hist_t *find(const gmt_top_history_t *h, const char *name)
{
  for (size_t i = 0; i < h->n; i++)
    if (!strcmp(h->pods[i].name, name))
      return &h->pods[i];
  return NULL;
}

void gmt_top_history_begin(gmt_top_history_t *h)
{
  h->refresh++;
}

static void push(gmt_top_history_t *h, pod_hist_t *p, double value)
{
  if (p->count < h->depth) {
    p->ring[(p->head + p->count++) % h->depth] = value;
  } else {
    p->ring[p->head] = value;
    p->head = (p->head + 1) % h->depth;
  }
}

int gmt_top_history_add(gmt_top_history_t *h, const char *name, double value)
{
  pod_hist_t *p = find(h, name);
  if (p && p->seen == h->refresh) {
    /* Added twice in one refresh: the newest value replaces it. */
    p->ring[(p->head + p->count - 1) % h->depth] = value;
    return 0;
  }
  if (!p) {
    if (h->n == h->cap) {
      size_t cap = h->cap ? 2 * h->cap : 16;
      pod_hist_t *pods = realloc(h->pods, cap * sizeof *pods);
      if (!pods)
        return -ENOMEM;
      h->pods = pods;
      h->cap = cap;
    }
    p = &h->pods[h->n];
    memset(p, 0, sizeof *p);
    p->name = strdup(name);
    p->ring = calloc(h->depth, sizeof *p->ring);
    if (!p->name || !p->ring) {
      pod_free(p);
      return -ENOMEM;
    }
    h->n++;
  }
  p->seen = h->refresh;
  push(h, p, value);
  return 0;
}

void gmt_top_history_end(gmt_top_history_t *h)
{
  size_t kept = 0;
  for (size_t i = 0; i < h->n; i++) {
    if (h->pods[i].seen == h->refresh)
      h->pods[kept++] = h->pods[i];
    else
      pod_free(&h->pods[i]);
  }
  h->n = kept;
}

size_t gmt_top_history_get(const gmt_top_history_t *h, const char *name, double *out, size_t max)
{
  const pod_hist_t *p = h && name ? find(h, name) : NULL;
  if (!p)
    return 0;
  size_t skip = p->count > max ? p->count - max : 0;
  size_t n = 0;
  for (size_t i = skip; i < p->count; i++)
    out[n++] = p->ring[(p->head + i) % h->depth];
  return n;
}

size_t gmt_top_history_depth(const gmt_top_history_t *h)
{
  return h->depth;
}
