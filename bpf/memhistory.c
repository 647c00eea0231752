/* MemHistory: the per-allocation histories and the indexes over them.
 *
 * Three indexes, each chosen for the query the tracer makes most:
 * - Interior lookups (every copy and fault asks "which allocation holds
 *   this address?"): a sorted array of the active ranges, searched by
 *   bisection. Active ranges of one process never overlap (an overlapping
 *   newcomer ends the old one), so the array is enough; an insert moves
 *   memory, but allocations are rare next to copies and the array stays
 *   small (it only holds what is alive), so this beats a tree here.
 * - Top-k by transfers (hot and cold spots): two binary heaps over every
 *   history, a max-heap and a min-heap keyed by H2D+D2H count, kept in
 *   order as counters grow (O(log n) per copy, and a copy only ever moves
 *   an entry one way in each heap). A query walks the heap top-down with a
 *   small frontier heap: O(k log k), never a scan of all histories.
 * - Address reuse: a hash of (pid, start address) to the newest history
 *   that started there, each linked to the one before it.
 *
 * Attach buffers (memory never seen allocated, found by the copies that
 * touch it) are the one kind whose range changes: a move takes a history
 * out of the range index and the address hash and puts it back, and a
 * merge takes the merged one out of every index. Both are rare next to
 * the copies that only look a buffer up.
 */
#include "memhistory.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  uint32_t pid;
  uint64_t start, end;
  gmt_alloc_history_t *h;
} range_t;

typedef struct {
  gmt_alloc_history_t **v;
  size_t n, cap;
  int hot; /* max-heap by transfers when 1, min-heap when 0 */
} heap_t;

typedef struct site_count {
  char *key;
  uint32_t count;
  struct site_count *next;
} site_count_t;

#define ADDR_BUCKETS 4096u
#define SITE_BUCKETS 1024u

struct gmt_memhistory {
  pthread_rwlock_t lock;
  gmt_alloc_history_t **all; /* in id order (ids are positions until a process is forgotten) */
  size_t nall, capall;
  uint64_t last_id;
  size_t max_events;
  size_t max_ended;           /* ended histories kept; 0: all (see prune_ended) */
  uint64_t dropped_histories; /* ended histories let go past max_ended */
  range_t *active;
  size_t nactive, capactive;
  heap_t hot, cold;
  gmt_alloc_history_t *addr_hash[ADDR_BUCKETS];
  site_count_t *sites[SITE_BUCKETS];
  gmt_trace_process_t *procs;
  size_t nprocs, capprocs;
  size_t last_proc; /* procs[last_proc] was the last one found: events come in runs */
  uint64_t unmatched_faults, unmatched_copies;
  /* Copies counted once each (a history counts a copy between two tracked
   * buffers at both ends). */
  uint64_t copy_count[GMT_AEV_MAX], copy_bytes[GMT_AEV_MAX];
  bool attach_on;
  gmt_attach_opts_t attach;
  uint64_t attach_changes; /* attach buffers made, moved or merged so far */
};

/* ---- names ---- */

static const char *const kind_names[GMT_ALLOC_KIND_MAX] = {"device", "host_pinned", "host_pageable",
                                                           "managed"};
static const char *const origin_names[GMT_ORIGIN_MAX] = {"call", "mmap", "register", "map",
                                                         "attach"};
static const char *const aev_names[GMT_AEV_MAX] = {
    [GMT_AEV_ALLOC] = "alloc",       [GMT_AEV_FREE] = "free",
    [GMT_AEV_H2D] = "h2d",           [GMT_AEV_D2H] = "d2h",
    [GMT_AEV_D2D] = "d2d",           [GMT_AEV_FAULT] = "fault",
    [GMT_AEV_PREFETCH] = "prefetch", [GMT_AEV_PIN] = "pin",
    [GMT_AEV_UNPIN] = "unpin",       [GMT_AEV_EXIT] = "exit",
    [GMT_AEV_REPLACED] = "replaced", [GMT_AEV_MOVE_OUT] = "move_out",
    [GMT_AEV_MOVE_IN] = "move_in",
};

/* One table of names, for printing and for reading a dump back. */
static const char *name_of(const char *const *names, int n, int i)
{
  return i >= 0 && i < n && names[i] ? names[i] : "unknown";
}

static int parse_name(const char *const *names, int n, const char *name)
{
  for (int i = 0; name && i < n; i++)
    if (names[i] && !strcmp(name, names[i]))
      return i;
  return -EINVAL;
}

#define NNAMES(t) ((int)(sizeof(t) / sizeof((t)[0])))

const char *gmt_alloc_kind_name(int kind)
{
  return name_of(kind_names, NNAMES(kind_names), kind);
}

int gmt_alloc_kind_parse(const char *name)
{
  return parse_name(kind_names, NNAMES(kind_names), name);
}

const char *gmt_aev_name(int type)
{
  return name_of(aev_names, NNAMES(aev_names), type);
}

int gmt_aev_parse(const char *name)
{
  return parse_name(aev_names, NNAMES(aev_names), name);
}

const char *gmt_alloc_origin_name(int origin)
{
  return name_of(origin_names, NNAMES(origin_names), origin);
}

int gmt_alloc_origin_parse(const char *name)
{
  return parse_name(origin_names, NNAMES(origin_names), name);
}

void gmt_alloc_site_format(const gmt_alloc_site_t *s, char *buf, size_t len)
{
  if (!s->module[0]) {
    snprintf(buf, len, "0x%llx", (unsigned long long)s->pc);
    return;
  }
  const char *base = strrchr(s->module, '/');
  base = base ? base + 1 : s->module;
  if (s->function[0])
    snprintf(buf, len, "%s+0x%llx (%s)", base, (unsigned long long)s->offset, s->function);
  else
    snprintf(buf, len, "%s+0x%llx", base, (unsigned long long)s->offset);
}

/* ---- heaps ---- */

static bool before(const heap_t *hp, const gmt_alloc_history_t *a, const gmt_alloc_history_t *b)
{
  uint64_t ta = gmt_alloc_transfers(&a->info), tb = gmt_alloc_transfers(&b->info);
  if (hp->hot) {
    if (ta != tb)
      return ta > tb;
    uint64_t ba = a->info.h2d_bytes + a->info.d2h_bytes, bb = b->info.h2d_bytes + b->info.d2h_bytes;
    if (ba != bb)
      return ba > bb;
  } else {
    if (ta != tb)
      return ta < tb;
    if (a->info.size != b->info.size)
      return a->info.size > b->info.size;
  }
  return a->info.id < b->info.id;
}

static void heap_set(heap_t *hp, size_t i, gmt_alloc_history_t *h)
{
  hp->v[i] = h;
  if (hp->hot)
    h->hot_pos = i;
  else
    h->cold_pos = i;
}

static void heap_up(heap_t *hp, size_t i)
{
  gmt_alloc_history_t *h = hp->v[i];
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!before(hp, h, hp->v[p]))
      break;
    heap_set(hp, i, hp->v[p]);
    i = p;
  }
  heap_set(hp, i, h);
}

static void heap_down(heap_t *hp, size_t i)
{
  gmt_alloc_history_t *h = hp->v[i];
  for (;;) {
    size_t l = 2 * i + 1, best = l;
    if (l >= hp->n)
      break;
    if (l + 1 < hp->n && before(hp, hp->v[l + 1], hp->v[l]))
      best = l + 1;
    if (!before(hp, hp->v[best], h))
      break;
    heap_set(hp, i, hp->v[best]);
    i = best;
  }
  heap_set(hp, i, h);
}

static int heap_push(heap_t *hp, gmt_alloc_history_t *h)
{
  if (hp->n == hp->cap) {
    size_t ncap = hp->cap ? hp->cap * 2 : 64;
    gmt_alloc_history_t **nv = realloc(hp->v, ncap * sizeof *nv);
    if (!nv)
      return -ENOMEM;
    hp->v = nv;
    hp->cap = ncap;
  }
  hp->v[hp->n] = h;
  heap_up(hp, hp->n++);
  return 0;
}

/* h's key changed: it moves up or down, whichever it now must. */
static void heap_fix(heap_t *hp, gmt_alloc_history_t *h)
{
  heap_up(hp, hp->hot ? h->hot_pos : h->cold_pos);
  heap_down(hp, hp->hot ? h->hot_pos : h->cold_pos);
}

static void counters_changed(gmt_memhistory_t *mh, gmt_alloc_history_t *h)
{
  heap_fix(&mh->hot, h);
  heap_fix(&mh->cold, h);
}

static void heap_remove(heap_t *hp, gmt_alloc_history_t *h)
{
  size_t i = hp->hot ? h->hot_pos : h->cold_pos;
  gmt_alloc_history_t *last = hp->v[--hp->n];
  if (i == hp->n)
    return;
  heap_set(hp, i, last);
  heap_fix(hp, last);
}

static bool pid_in(uint32_t pid, const uint32_t *pids, size_t npids)
{
  size_t lo = 0, hi = npids;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (pids[mid] == pid)
      return true;
    if (pids[mid] < pid)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}

/* The k best of hp without disturbing it: a frontier of heap positions,
 * itself a small heap, from which the best is taken and its children
 * added. With pids, entries of other processes are passed over (their
 * children still join the frontier), so the frontier may outgrow 2k. */
static size_t heap_top(const heap_t *hp, size_t k, const uint32_t *pids, size_t npids,
                       gmt_alloc_info_t *out)
{
  if (k > hp->n)
    k = hp->n;
  if (!k || (pids && !npids))
    return 0;
  size_t cap = 2 * k + 1, nfr = 0, got = 0;
  size_t *fr = malloc(cap * sizeof *fr);
  if (!fr)
    return 0;
  fr[nfr++] = 0;
  while (got < k && nfr) {
    size_t top = fr[0];
    fr[0] = fr[--nfr];
    for (size_t i = 0;;) { /* sift down in the frontier */
      size_t l = 2 * i + 1, b = l;
      if (l >= nfr)
        break;
      if (l + 1 < nfr && before(hp, hp->v[fr[l + 1]], hp->v[fr[l]]))
        b = l + 1;
      if (!before(hp, hp->v[fr[b]], hp->v[fr[i]]))
        break;
      size_t t = fr[i];
      fr[i] = fr[b];
      fr[b] = t;
      i = b;
    }
    if (!pids || pid_in(hp->v[top]->info.pid, pids, npids))
      out[got++] = hp->v[top]->info;
    if (nfr + 2 > cap) {
      size_t *n = realloc(fr, 2 * cap * sizeof *fr);
      if (!n)
        break;
      fr = n;
      cap *= 2;
    }
    for (size_t c = 2 * top + 1; c <= 2 * top + 2 && c < hp->n; c++) {
      size_t i = nfr++;
      fr[i] = c;
      while (i > 0 && before(hp, hp->v[fr[i]], hp->v[fr[(i - 1) / 2]])) {
        size_t p = (i - 1) / 2, t = fr[i];
        fr[i] = fr[p];
        fr[p] = t;
        i = p;
      }
    }
  }
  free(fr);
  return got;
}

/* ---- active ranges ---- */

static int range_cmp(uint32_t pid, uint64_t addr, const range_t *r)
{
  if (pid != r->pid)
    return pid < r->pid ? -1 : 1;
  if (addr != r->start)
    return addr < r->start ? -1 : 1;
  return 0;
}

/* Index of the first range after (pid, addr). */
static size_t range_upper(const gmt_memhistory_t *mh, uint32_t pid, uint64_t addr)
{
  size_t lo = 0, hi = mh->nactive;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (range_cmp(pid, addr, &mh->active[mid]) >= 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static gmt_alloc_history_t *find_active(const gmt_memhistory_t *mh, uint32_t pid, uint64_t addr)
{
  size_t i = range_upper(mh, pid, addr);
  if (i == 0)
    return NULL;
  const range_t *r = &mh->active[i - 1];
  return r->pid == pid && addr >= r->start && addr < r->end ? r->h : NULL;
}

static int range_insert(gmt_memhistory_t *mh, gmt_alloc_history_t *h)
{
  if (mh->nactive == mh->capactive) {
    size_t ncap = mh->capactive ? mh->capactive * 2 : 64;
    range_t *n = realloc(mh->active, ncap * sizeof *n);
    if (!n)
      return -ENOMEM;
    mh->active = n;
    mh->capactive = ncap;
  }
  size_t i = range_upper(mh, h->info.pid, h->info.address);
  memmove(&mh->active[i + 1], &mh->active[i], (mh->nactive - i) * sizeof *mh->active);
  uint64_t size = h->info.size ? h->info.size : 1;
  mh->active[i] = (range_t){h->info.pid, h->info.address, h->info.address + size, h};
  mh->nactive++;
  return 0;
}

static void range_remove(gmt_memhistory_t *mh, gmt_alloc_history_t *h)
{
  size_t i = range_upper(mh, h->info.pid, h->info.address);
  if (i == 0 || mh->active[i - 1].h != h)
    return;
  i--;
  memmove(&mh->active[i], &mh->active[i + 1], (mh->nactive - i - 1) * sizeof *mh->active);
  mh->nactive--;
}

/* ---- processes (their records; the writers are below) ---- */

static gmt_trace_process_t *proc_find(gmt_memhistory_t *mh, uint32_t pid)
{
  if (mh->last_proc < mh->nprocs && mh->procs[mh->last_proc].pid == pid)
    return &mh->procs[mh->last_proc];
  for (size_t i = mh->nprocs; i-- > 0;) /* the newest with this pid */
    if (mh->procs[i].pid == pid) {
      mh->last_proc = i;
      return &mh->procs[i];
    }
  return NULL;
}

static gmt_trace_process_t *proc_add(gmt_memhistory_t *mh)
{
  if (mh->nprocs == mh->capprocs) {
    size_t ncap = mh->capprocs ? mh->capprocs * 2 : 8;
    gmt_trace_process_t *n = realloc(mh->procs, ncap * sizeof *n);
    if (!n)
      return NULL;
    mh->procs = n;
    mh->capprocs = ncap;
  }
  mh->last_proc = mh->nprocs;
  gmt_trace_process_t *p = &mh->procs[mh->nprocs++];
  memset(p, 0, sizeof *p);
  return p;
}

/* ---- histories ---- */

static void add_event(gmt_memhistory_t *mh, gmt_alloc_history_t *h, uint32_t type, uint64_t ts,
                      uint64_t dur, uint64_t addr, uint64_t bytes, uint32_t tid, uint64_t stream)
{
  if (h->nevents >= mh->max_events) {
    h->info.events_dropped++;
    return;
  }
  if (h->nevents == h->capevents) {
    size_t ncap = h->capevents ? h->capevents * 2 : 8;
    gmt_alloc_event_t *n = realloc(h->events, ncap * sizeof *n);
    if (!n) {
      h->info.events_dropped++;
      return;
    }
    h->events = n;
    h->capevents = ncap;
  }
  h->events[h->nevents++] = (gmt_alloc_event_t){.ts_ns = ts,
                                                .dur_ns = dur,
                                                .addr = addr,
                                                .bytes = bytes,
                                                .stream = stream,
                                                .tid = tid,
                                                .type = type};
}

static void end_history(gmt_memhistory_t *mh, gmt_alloc_history_t *h, uint32_t type, uint64_t ts,
                        uint32_t tid)
{
  range_remove(mh, h);
  h->info.active = false;
  h->info.registered = false;
  h->info.free_ns = ts;
  add_event(mh, h, type, ts, 0, h->info.address, 0, tid, 0);
}

static unsigned addr_bucket(uint32_t pid, uint64_t addr)
{
  uint64_t x = addr ^ ((uint64_t)pid << 47) ^ (addr >> 29);
  x *= 0x9e3779b97f4a7c15ull;
  return (unsigned)(x >> 52) % ADDR_BUCKETS;
}

static gmt_alloc_history_t **addr_slot(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr)
{
  gmt_alloc_history_t **p = &mh->addr_hash[addr_bucket(pid, addr)];
  while (*p && ((*p)->info.pid != pid || (*p)->info.address != addr))
    p = &(*p)->hash_next;
  return p;
}

static uint32_t site_next(gmt_memhistory_t *mh, const gmt_alloc_site_t *s)
{
  char key[GMT_SITE_MODULE_LEN + 32];
  if (s->module[0])
    snprintf(key, sizeof key, "%s+%llx", s->module, (unsigned long long)s->offset);
  else
    snprintf(key, sizeof key, "0x%llx", (unsigned long long)s->pc);
  unsigned hsh = 5381;
  for (const char *c = key; *c; c++)
    hsh = hsh * 33 + (unsigned char)*c;
  site_count_t **p = &mh->sites[hsh % SITE_BUCKETS];
  for (; *p; p = &(*p)->next)
    if (!strcmp((*p)->key, key))
      return ++(*p)->count;
  site_count_t *n = calloc(1, sizeof *n);
  if (!n || !(n->key = strdup(key))) {
    free(n);
    return 0;
  }
  n->count = 1;
  *p = n;
  return 1;
}

/* h becomes the newest history at its (pid, address). */
static void addr_link(gmt_memhistory_t *mh, gmt_alloc_history_t *h)
{
  gmt_alloc_history_t **slot = addr_slot(mh, h->info.pid, h->info.address);
  h->prev_same = NULL;
  h->hash_next = NULL;
  if (*slot) { /* replace the chain head, keep the older behind */
    h->prev_same = *slot;
    h->hash_next = (*slot)->hash_next;
    (*slot)->hash_next = NULL;
  }
  *slot = h;
}

/* h leaves the histories at its (pid, address); the older ones stay. */
static void addr_unlink(gmt_memhistory_t *mh, gmt_alloc_history_t *h)
{
  gmt_alloc_history_t **slot = addr_slot(mh, h->info.pid, h->info.address);
  if (*slot == h) {
    gmt_alloc_history_t *older = h->prev_same;
    if (older)
      older->hash_next = h->hash_next;
    *slot = older ? older : h->hash_next;
  } else {
    for (gmt_alloc_history_t *q = *slot; q; q = q->prev_same)
      if (q->prev_same == h) {
        q->prev_same = h->prev_same;
        break;
      }
  }
  h->prev_same = h->hash_next = NULL;
}

/* Adds h (info filled, id not yet) to every index. */
static int add_history(gmt_memhistory_t *mh, gmt_alloc_history_t *h)
{
  if (mh->nall == mh->capall) {
    size_t ncap = mh->capall ? mh->capall * 2 : 64;
    gmt_alloc_history_t **n = realloc(mh->all, ncap * sizeof *n);
    if (!n)
      return -ENOMEM;
    mh->all = n;
    mh->capall = ncap;
  }
  if (h->info.active && range_insert(mh, h) != 0)
    return -ENOMEM;
  if (heap_push(&mh->hot, h) != 0 || heap_push(&mh->cold, h) != 0) {
    /* Only on ENOMEM; a history in one heap and not the other would
     * corrupt the heaps later, so give up on the whole history set. */
    abort();
  }
  mh->all[mh->nall++] = h;
  addr_link(mh, h);
  return 0;
}

int gmt_memhistory_new(gmt_memhistory_t **out)
{
  gmt_memhistory_t *mh = calloc(1, sizeof *mh);
  if (!mh)
    return -ENOMEM;
  if (pthread_rwlock_init(&mh->lock, NULL) != 0) {
    free(mh);
    return -ENOMEM;
  }
  mh->hot.hot = 1;
  mh->max_events = GMT_HISTORY_MAX_EVENTS;
  *out = mh;
  return 0;
}

void gmt_memhistory_free(gmt_memhistory_t *mh)
{
  if (!mh)
    return;
  for (size_t i = 0; i < mh->nall; i++) {
    free(mh->all[i]->events);
    free(mh->all[i]);
  }
  for (unsigned b = 0; b < SITE_BUCKETS; b++)
    for (site_count_t *s = mh->sites[b], *n; s; s = n) {
      n = s->next;
      free(s->key);
      free(s);
    }
  free(mh->all);
  free(mh->active);
  free(mh->hot.v);
  free(mh->cold.v);
  free(mh->procs);
  pthread_rwlock_destroy(&mh->lock);
  free(mh);
}

static void prune_ended(gmt_memhistory_t *mh);

static void wr(gmt_memhistory_t *mh)
{
  pthread_rwlock_wrlock(&mh->lock);
}
static void rd(gmt_memhistory_t *mh)
{
  pthread_rwlock_rdlock(&mh->lock);
}
static void un(gmt_memhistory_t *mh)
{
  pthread_rwlock_unlock(&mh->lock);
}

int gmt_memhistory_alloc(gmt_memhistory_t *mh, uint32_t pid, int kind, int origin, uint64_t addr,
                         uint64_t size, const gmt_alloc_site_t *site, uint64_t ts, uint32_t tid)
{
  if (kind < 0 || kind >= GMT_ALLOC_KIND_MAX)
    return -EINVAL;
  gmt_alloc_history_t *h = calloc(1, sizeof *h);
  if (!h)
    return -ENOMEM;
  wr(mh);
  /* Whatever of pid this overlaps is gone (freed on a path we do not see,
   * or unmapped below the threshold). */
  uint64_t end = addr + (size ? size : 1);
  size_t i = range_upper(mh, pid, addr);
  if (i > 0 && mh->active[i - 1].pid == pid && mh->active[i - 1].end > addr)
    i--;
  while (i < mh->nactive && mh->active[i].pid == pid && mh->active[i].start < end)
    end_history(mh, mh->active[i].h, GMT_AEV_REPLACED, ts, tid); /* removes entry i */

  h->info.id = ++mh->last_id;
  h->info.pid = pid;
  h->info.kind = (uint8_t)kind;
  h->info.origin = (uint8_t)origin;
  h->info.registered = origin == GMT_ORIGIN_REGISTER;
  h->info.active = true;
  h->info.address = addr;
  h->info.size = size;
  if (site)
    h->info.site = *site;
  h->info.site_nth = site_next(mh, &h->info.site);
  h->info.alloc_ns = ts;
  add_event(mh, h, GMT_AEV_ALLOC, ts, 0, addr, size, tid, 0);
  int rc = add_history(mh, h);
  gmt_trace_process_t *p = rc == 0 ? proc_find(mh, pid) : NULL;
  if (p)
    p->allocations++;
  prune_ended(mh);
  un(mh);
  if (rc != 0) {
    free(h->events);
    free(h);
  }
  return rc;
}

int gmt_memhistory_free_at(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, uint64_t ts,
                           uint32_t tid)
{
  wr(mh);
  gmt_alloc_history_t *h = find_active(mh, pid, addr);
  int rc = -ENOENT;
  if (h && (h->info.address == addr || h->info.origin == GMT_ORIGIN_ATTACH)) {
    end_history(mh, h, GMT_AEV_FREE, ts, tid);
    rc = 0;
  }
  prune_ended(mh);
  un(mh);
  return rc;
}

void gmt_memhistory_unmap(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, uint64_t len,
                          uint64_t ts, uint32_t tid)
{
  wr(mh);
  uint64_t end = addr + (len ? len : 1);
  size_t i = range_upper(mh, pid, addr);
  if (i > 0 && mh->active[i - 1].pid == pid && mh->active[i - 1].end > addr)
    i--;
  while (i < mh->nactive && mh->active[i].pid == pid && mh->active[i].start < end) {
    gmt_alloc_history_t *h = mh->active[i].h;
    if (h->info.kind == GMT_ALLOC_HOST_PAGEABLE || h->info.kind == GMT_ALLOC_HOST_PINNED)
      end_history(mh, h, GMT_AEV_FREE, ts, tid);
    else
      i++;
  }
  prune_ended(mh);
  un(mh);
}

static void count_copy(gmt_alloc_history_t *h, int type, uint64_t bytes)
{
  switch (type) {
  case GMT_AEV_H2D:
    h->info.h2d_count++;
    h->info.h2d_bytes += bytes;
    break;
  case GMT_AEV_D2H:
    h->info.d2h_count++;
    h->info.d2h_bytes += bytes;
    break;
  default:
    h->info.d2d_count++;
    h->info.d2d_bytes += bytes;
    break;
  }
}

static bool is_device(const gmt_alloc_history_t *h)
{
  return h && (h->info.kind == GMT_ALLOC_DEVICE || h->info.kind == GMT_ALLOC_MANAGED);
}

/* ---- attach buffers ---- */

void gmt_memhistory_set_attach(gmt_memhistory_t *mh, const gmt_attach_opts_t *o)
{
  wr(mh);
  mh->attach = *o;
  mh->attach_on = true;
  un(mh);
}

static bool attach_of_side(const gmt_alloc_history_t *h, bool host)
{
  return h->info.origin == GMT_ORIGIN_ATTACH && is_device(h) != host;
}

/* Whether any active range of pid overlaps [lo, hi). */
static bool overlaps_active(const gmt_memhistory_t *mh, uint32_t pid, uint64_t lo, uint64_t hi)
{
  size_t i = range_upper(mh, pid, lo);
  if (i > 0 && mh->active[i - 1].pid == pid && mh->active[i - 1].end > lo)
    return true;
  return i < mh->nactive && mh->active[i].pid == pid && mh->active[i].start < hi;
}

/* h now spans [lo, hi): its place in the range index, the address hash
 * and the cold heap (which ranks by size) follow. */
static void attach_move(gmt_memhistory_t *mh, gmt_alloc_history_t *h, uint64_t lo, uint64_t hi)
{
  if (h->info.address == lo && h->info.size == hi - lo)
    return;
  range_remove(mh, h);
  addr_unlink(mh, h);
  h->info.address = lo;
  h->info.size = hi - lo;
  range_insert(mh, h); /* cannot fail: it just left a slot */
  addr_link(mh, h);
  counters_changed(mh, h);
}

/* Both event lists in time order, as many as a history keeps. */
static void merge_events(gmt_memhistory_t *mh, gmt_alloc_history_t *into,
                         const gmt_alloc_history_t *h)
{
  size_t n = into->nevents + h->nevents, keep = n < mh->max_events ? n : mh->max_events;
  gmt_alloc_event_t *ev = keep ? malloc(keep * sizeof *ev) : NULL;
  if (keep && !ev) { /* out of memory: the counters stay exact */
    into->info.events_dropped += h->nevents;
    return;
  }
  size_t a = 0, b = 0;
  for (size_t i = 0; i < keep; i++) {
    bool from_a =
        b == h->nevents || (a < into->nevents && into->events[a].ts_ns <= h->events[b].ts_ns);
    ev[i] = from_a ? into->events[a++] : h->events[b++];
  }
  into->info.events_dropped += n - keep;
  free(into->events);
  into->events = ev;
  into->nevents = into->capevents = keep;
}

/* h was part of into all along: its counters and events join into's, and
 * h leaves every index (it was never a buffer of its own). */
static void attach_fold(gmt_memhistory_t *mh, gmt_alloc_history_t *into, gmt_alloc_history_t *h)
{
  gmt_alloc_info_t *a = &into->info;
  const gmt_alloc_info_t *b = &h->info;
  a->h2d_count += b->h2d_count;
  a->h2d_bytes += b->h2d_bytes;
  a->d2h_count += b->d2h_count;
  a->d2h_bytes += b->d2h_bytes;
  a->d2d_count += b->d2d_count;
  a->d2d_bytes += b->d2d_bytes;
  a->faults += b->faults;
  a->prefetches += b->prefetches;
  a->events_dropped += b->events_dropped;
  a->moves_out += b->moves_out;
  a->moves_out_bytes += b->moves_out_bytes;
  a->moves_out_ns += b->moves_out_ns;
  a->moves_in += b->moves_in;
  a->moves_in_bytes += b->moves_in_bytes;
  a->moves_in_ns += b->moves_in_ns;
  a->pinned_by_gmt |= b->pinned_by_gmt;
  if (b->alloc_ns < a->alloc_ns)
    a->alloc_ns = b->alloc_ns;
  merge_events(mh, into, h);

  range_remove(mh, h);
  addr_unlink(mh, h);
  heap_remove(&mh->hot, h);
  heap_remove(&mh->cold, h);
  size_t lo = 0, hi = mh->nall; /* all[] is in id order */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (mh->all[mid]->info.id < b->id)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < mh->nall && mh->all[lo] == h) {
    memmove(&mh->all[lo], &mh->all[lo + 1], (mh->nall - lo - 1) * sizeof *mh->all);
    mh->nall--;
  }
  gmt_trace_process_t *p = proc_find(mh, b->pid);
  if (p && p->allocations)
    p->allocations--;
  free(h->events);
  free(h);
}

static gmt_alloc_history_t *attach_new(gmt_memhistory_t *mh, uint32_t pid, bool host, uint64_t lo,
                                       uint64_t hi, uint64_t ts)
{
  gmt_alloc_history_t *h = calloc(1, sizeof *h);
  if (!h)
    return NULL;
  h->info = (gmt_alloc_info_t){.id = mh->last_id + 1,
                               .pid = pid,
                               .kind = host ? GMT_ALLOC_HOST_PAGEABLE : GMT_ALLOC_DEVICE,
                               .origin = GMT_ORIGIN_ATTACH,
                               .active = true,
                               .address = lo,
                               .size = hi - lo,
                               .alloc_ns = ts};
  if (add_history(mh, h) != 0) {
    free(h);
    return NULL;
  }
  mh->last_id++;
  gmt_trace_process_t *p = proc_find(mh, pid);
  if (p)
    p->allocations++;
  return h;
}

/* The attach buffer that a copy's end at addr, n bytes, on the host or the
 * device side, falls in: made, grown or merged as gmt_memhistory_set_attach()
 * says. NULL when the end cannot be placed; nothing changed then. addr is in
 * no active range, or in an attach one of this side that the copy reaches
 * past. */
static gmt_alloc_history_t *attach_place(gmt_memhistory_t *mh, uint32_t pid, bool host,
                                         uint64_t addr, uint64_t n, uint64_t ts)
{
  if (!addr)
    return NULL; /* what a probe could not read */
  uint64_t lo = addr, hi = addr + (n ? n : 1);
  if (hi < lo)
    hi = UINT64_MAX;
  if (host) {
    gmt_host_region_t r;
    if (!mh->attach.host_region || mh->attach.host_region(mh->attach.arg, pid, addr, &r) != 0 ||
        addr < r.start || addr >= r.end)
      return NULL;
    if (hi > r.end)
      hi = r.end;
    if (r.whole && !overlaps_active(mh, pid, r.start, r.end)) {
      lo = r.start;
      hi = r.end;
    }
  }
  /* What [lo, hi) overlaps, in address order: attach buffers of this side
   * merge into it; anything else (a buffer seen allocated, the other
   * side's) ends it where it begins. */
  size_t i = range_upper(mh, pid, lo), nmerge = 0;
  if (i > 0 && mh->active[i - 1].pid == pid && mh->active[i - 1].end > lo)
    i--;
  size_t first = i;
  gmt_alloc_history_t *keep = NULL;
  uint64_t top = 0;
  for (; i < mh->nactive && mh->active[i].pid == pid && mh->active[i].start < hi; i++) {
    const range_t *r = &mh->active[i];
    if (!attach_of_side(r->h, host)) {
      if (r->start <= addr)
        return NULL;
      hi = r->start;
      break;
    }
    nmerge++;
    if (!keep || r->h->info.id < keep->info.id)
      keep = r->h;
    if (r->start < lo)
      lo = r->start;
    if (r->end > top)
      top = r->end;
  }
  if (top > hi)
    hi = top;
  if (!keep)
    return host && hi - lo < mh->attach.min_host_bytes ? NULL
                                                       : attach_new(mh, pid, host, lo, hi, ts);

  /* Folding changes the index under us: the others first, by pointer. */
  gmt_alloc_history_t *few[8], **others = few;
  if (nmerge - 1 > 8 && !(others = malloc((nmerge - 1) * sizeof *others)))
    return NULL;
  size_t nothers = 0;
  for (size_t j = first; j < first + nmerge; j++)
    if (mh->active[j].h != keep)
      others[nothers++] = mh->active[j].h;
  for (size_t j = 0; j < nothers; j++)
    attach_fold(mh, keep, others[j]);
  if (others != few)
    free(others);
  attach_move(mh, keep, lo, hi);
  return keep;
}

/* A copy's end: the history it falls in, placed or grown when attach
 * buffers are on and it is not a buffer seen allocated. */
static gmt_alloc_history_t *place_end(gmt_memhistory_t *mh, uint32_t pid, gmt_alloc_history_t *h,
                                      bool host, uint64_t addr, uint64_t n, uint64_t ts)
{
  if (!mh->attach_on)
    return h;
  if (h && (!attach_of_side(h, host) || addr + n <= h->info.address + h->info.size))
    return h;
  gmt_alloc_history_t *a = attach_place(mh, pid, host, addr, n, ts);
  if (a)
    mh->attach_changes++;
  return a ? a : h;
}

int gmt_memhistory_copy(gmt_memhistory_t *mh, uint32_t pid, int dir, uint64_t dst, uint64_t src,
                        uint64_t bytes, uint64_t ts, uint64_t dur, uint32_t tid, uint64_t stream)
{
  wr(mh);
  gmt_alloc_history_t *hd = find_active(mh, pid, dst), *hs = find_active(mh, pid, src);
  int type = 0;
  if (dir == GMT_COPY_H2D)
    type = GMT_AEV_H2D;
  else if (dir == GMT_COPY_D2H)
    type = GMT_AEV_D2H;
  else if (is_device(hd) && is_device(hs))
    type = GMT_AEV_D2D;
  else if (is_device(hd))
    type = GMT_AEV_H2D;
  else if (is_device(hs))
    type = GMT_AEV_D2H;
  if (!type) {
    mh->unmatched_copies++;
    un(mh);
    return 0;
  }
  if (mh->attach_on) {
    uint64_t changes = mh->attach_changes;
    hd = place_end(mh, pid, hd, type == GMT_AEV_D2H, dst, bytes, ts);
    if (mh->attach_changes != changes) /* a merge may have taken hs */
      hs = find_active(mh, pid, src);
    hs = place_end(mh, pid, hs, type == GMT_AEV_H2D, src, bytes, ts);
    if (mh->attach_changes != changes)
      hd = find_active(mh, pid, dst);
  }
  mh->copy_count[type]++;
  mh->copy_bytes[type] += bytes;
  gmt_trace_process_t *p = proc_find(mh, pid);
  if (p && type == GMT_AEV_H2D) {
    p->h2d_count++;
    p->h2d_bytes += bytes;
  } else if (p && type == GMT_AEV_D2H) {
    p->d2h_count++;
    p->d2h_bytes += bytes;
  } else if (p) {
    p->d2d_count++;
    p->d2d_bytes += bytes;
  }
  if (!hd && !hs) {
    mh->unmatched_copies++;
    un(mh);
    return 0;
  }
  if (hd) {
    count_copy(hd, type, bytes);
    add_event(mh, hd, type, ts, dur, dst, bytes, tid, stream);
    counters_changed(mh, hd);
  }
  if (hs && hs != hd) {
    count_copy(hs, type, bytes);
    add_event(mh, hs, type, ts, dur, src, bytes, tid, stream);
    counters_changed(mh, hs);
  }
  un(mh);
  return type;
}

int gmt_memhistory_fault(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, uint64_t n, uint64_t ts,
                         uint32_t tid)
{
  wr(mh);
  gmt_alloc_history_t *h = find_active(mh, pid, addr);
  if (!h) {
    mh->unmatched_faults += n;
    un(mh);
    return -ENOENT;
  }
  h->info.faults += n;
  gmt_trace_process_t *p = proc_find(mh, pid);
  if (p)
    p->faults += n;
  add_event(mh, h, GMT_AEV_FAULT, ts, 0, addr, n, tid, 0);
  un(mh);
  return 0;
}

int gmt_memhistory_prefetch(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, uint64_t bytes,
                            uint64_t ts, uint32_t tid, uint64_t stream)
{
  wr(mh);
  gmt_alloc_history_t *h = find_active(mh, pid, addr);
  if (h) {
    h->info.prefetches++;
    add_event(mh, h, GMT_AEV_PREFETCH, ts, 0, addr, bytes, tid, stream);
  }
  un(mh);
  return h ? 0 : -ENOENT;
}

int gmt_memhistory_pin(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, uint64_t size,
                       const gmt_alloc_site_t *site, uint64_t ts, uint32_t tid)
{
  wr(mh);
  gmt_alloc_history_t *h = find_active(mh, pid, addr);
  if (h) {
    if (h->info.kind == GMT_ALLOC_HOST_PAGEABLE)
      h->info.kind = GMT_ALLOC_HOST_PINNED;
    h->info.registered = true;
    add_event(mh, h, GMT_AEV_PIN, ts, 0, addr, size, tid, 0);
    un(mh);
    return 0;
  }
  un(mh);
  return gmt_memhistory_alloc(mh, pid, GMT_ALLOC_HOST_PINNED, GMT_ORIGIN_REGISTER, addr, size, site,
                              ts, tid);
}

int gmt_memhistory_unpin(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, uint64_t ts,
                         uint32_t tid)
{
  wr(mh);
  gmt_alloc_history_t *h = find_active(mh, pid, addr);
  int rc = -ENOENT;
  if (h && h->info.registered) {
    rc = 0;
    if (h->info.origin == GMT_ORIGIN_REGISTER) {
      end_history(mh, h, GMT_AEV_UNPIN, ts, tid);
    } else {
      if (h->info.origin == GMT_ORIGIN_MMAP || h->info.origin == GMT_ORIGIN_ATTACH)
        h->info.kind = GMT_ALLOC_HOST_PAGEABLE;
      h->info.registered = false;
      add_event(mh, h, GMT_AEV_UNPIN, ts, 0, addr, 0, tid, 0);
    }
  }
  prune_ended(mh);
  un(mh);
  return rc;
}

int gmt_memhistory_pinned_by_gmt(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, uint64_t size,
                                 bool pinned, uint64_t ts, uint32_t tid)
{
  wr(mh);
  gmt_alloc_history_t *h = find_active(mh, pid, addr);
  if (!h && !pinned)
    h = *addr_slot(mh, pid, addr); /* ended by that unregistration, if anything */
  if (h || !pinned) {
    if (h)
      h->info.pinned_by_gmt = pinned;
    un(mh);
    return h ? 0 : -ENOENT;
  }
  un(mh);
  int rc = gmt_memhistory_pin(mh, pid, addr, size, NULL, ts, tid);
  if (rc != 0)
    return rc;
  wr(mh);
  if ((h = find_active(mh, pid, addr)))
    h->info.pinned_by_gmt = true;
  un(mh);
  return h ? 0 : -ENOENT;
}

int gmt_memhistory_moved(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, uint64_t bytes,
                         bool out, uint64_t ts, uint64_t dur, uint32_t tid)
{
  wr(mh);
  gmt_alloc_history_t *h = find_active(mh, pid, addr);
  if (!h)
    h = *addr_slot(mh, pid, addr); /* ended by the move's own unmap, if anything */
  if (h) {
    gmt_alloc_info_t *in = &h->info;
    if (out) {
      in->moves_out++;
      in->moves_out_bytes += bytes;
      in->moves_out_ns += dur;
    } else {
      in->moves_in++;
      in->moves_in_bytes += bytes;
      in->moves_in_ns += dur;
    }
    add_event(mh, h, out ? GMT_AEV_MOVE_OUT : GMT_AEV_MOVE_IN, ts, dur, addr, bytes, tid, 0);
  }
  un(mh);
  return h ? 0 : -ENOENT;
}

/* ---- processes ---- */

int gmt_memhistory_process_start(gmt_memhistory_t *mh, uint32_t pid, uint32_t parent, uint64_t ts)
{
  wr(mh);
  gmt_trace_process_t *p = proc_find(mh, pid);
  if (!p || p->exited)
    p = proc_add(mh);
  if (p) {
    p->pid = pid;
    p->parent = parent;
    p->start_ns = ts;
  }
  un(mh);
  return p ? 0 : -ENOMEM;
}

void gmt_memhistory_process_exit(gmt_memhistory_t *mh, uint32_t pid, int code, uint64_t ts)
{
  wr(mh);
  gmt_trace_process_t *p = proc_find(mh, pid);
  if (p && !p->exited) {
    p->exited = true;
    p->exit_ns = ts;
    p->exit_code = code;
  }
  size_t i = range_upper(mh, pid, 0);
  while (i < mh->nactive && mh->active[i].pid == pid)
    end_history(mh, mh->active[i].h, GMT_AEV_EXIT, ts, pid);
  prune_ended(mh);
  un(mh);
}

void gmt_memhistory_process_event(gmt_memhistory_t *mh, uint32_t pid, gmt_proc_event_t what,
                                  uint64_t n, uint64_t dur_ns)
{
  wr(mh);
  gmt_trace_process_t *p = proc_find(mh, pid);
  gmt_trace_kernel_t *k = p ? &p->kernel : NULL;
  if (k) {
    switch (what) {
    case GMT_PROC_RECLAIM:
      k->reclaim_stalls += n;
      k->reclaim_ns += dur_ns;
      break;
    case GMT_PROC_COMPACT:
      k->compact_stalls += n;
      k->compact_ns += dur_ns;
      break;
    case GMT_PROC_PCFAULTS: k->pagecache_faults += n; break;
    }
  }
  un(mh);
}

/* Heapify from scratch: after histories were taken out of the middle. */
static void heap_rebuild(heap_t *hp, gmt_alloc_history_t **all, size_t n)
{
  hp->n = 0;
  for (size_t i = 0; i < n; i++)
    hp->v[hp->n++] = all[i]; /* cap >= n: the heap held these and more */
  for (size_t i = 0; i < hp->n; i++)
    heap_set(hp, i, hp->v[i]);
  for (size_t i = hp->n / 2; i-- > 0;)
    heap_down(hp, i);
}

/* Ends in time order, ids breaking ties. */
static int ended_before(const void *a, const void *b)
{
  const gmt_alloc_info_t *x = &(*(gmt_alloc_history_t *const *)a)->info;
  const gmt_alloc_info_t *y = &(*(gmt_alloc_history_t *const *)b)->info;
  if (x->free_ns != y->free_ns)
    return x->free_ns < y->free_ns ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* A process that allocates and frees for hours would otherwise keep a
 * history (about 1 KiB) per allocation it ever made. Past max_ended ended
 * histories by an eighth, the oldest-ended go, down to 7/8 of it: one
 * pass over the histories per quarter of the bound's frees. Their copies
 * stay counted in the totals (copy_count); what was let go is counted. */
static void prune_ended(gmt_memhistory_t *mh)
{
  size_t max = mh->max_ended, ended = mh->nall - mh->nactive;
  if (!max || ended <= max + max / 8)
    return;
  gmt_alloc_history_t **v = malloc(ended * sizeof *v);
  if (!v)
    return; /* tried again at the next end */
  size_t n = 0;
  for (size_t i = 0; i < mh->nall; i++)
    if (!mh->all[i]->info.active && n < ended)
      v[n++] = mh->all[i];
  size_t drop = n > max - max / 8 ? n - (max - max / 8) : 0;
  if (drop == 0) {
    free(v);
    return;
  }
  qsort(v, n, sizeof *v, ended_before);
  /* The last to go, by value: it is freed in the pass. */
  gmt_alloc_history_t cut = {
      .info = {.free_ns = v[drop - 1]->info.free_ns, .id = v[drop - 1]->info.id}};
  const gmt_alloc_history_t *last = &cut;
  size_t kept = 0;
  for (size_t i = 0; i < mh->nall; i++) {
    gmt_alloc_history_t *h = mh->all[i];
    if (h->info.active || ended_before(&h, &last) > 0) {
      mh->all[kept++] = h;
      continue;
    }
    addr_unlink(mh, h);
    free(h->events);
    free(h);
  }
  mh->dropped_histories += mh->nall - kept;
  mh->nall = kept;
  heap_rebuild(&mh->hot, mh->all, kept);
  heap_rebuild(&mh->cold, mh->all, kept);
  free(v);
}

void gmt_memhistory_set_max_ended(gmt_memhistory_t *mh, size_t max)
{
  wr(mh);
  mh->max_ended = max;
  prune_ended(mh);
  un(mh);
}

size_t gmt_memhistory_forget_process(gmt_memhistory_t *mh, uint32_t pid)
{
  wr(mh);
  /* Its active ranges are one run in the sorted index. */
  size_t lo = range_upper(mh, pid, 0), hi = lo;
  if (lo > 0 && mh->active[lo - 1].pid == pid && mh->active[lo - 1].start == 0)
    lo--;
  while (hi < mh->nactive && mh->active[hi].pid == pid)
    hi++;
  memmove(&mh->active[lo], &mh->active[hi], (mh->nactive - hi) * sizeof *mh->active);
  mh->nactive -= hi - lo;

  size_t kept = 0, gone = 0;
  for (size_t i = 0; i < mh->nall; i++) {
    gmt_alloc_history_t *h = mh->all[i];
    if (h->info.pid != pid) {
      mh->all[kept++] = h;
      continue;
    }
    /* Every history at (pid, address) goes: unlink the whole chain once. */
    gmt_alloc_history_t **slot = addr_slot(mh, pid, h->info.address);
    if (*slot)
      *slot = (*slot)->hash_next;
    free(h->events);
    free(h);
    gone++;
  }
  mh->nall = kept;
  if (gone) {
    heap_rebuild(&mh->hot, mh->all, kept);
    heap_rebuild(&mh->cold, mh->all, kept);
  }

  size_t np = 0;
  for (size_t i = 0; i < mh->nprocs; i++)
    if (mh->procs[i].pid != pid)
      mh->procs[np++] = mh->procs[i];
  mh->nprocs = np;
  mh->last_proc = 0;
  un(mh);
  return gone;
}

void gmt_memhistory_set_max_events(gmt_memhistory_t *mh, size_t max)
{
  wr(mh);
  mh->max_events = max ? max : GMT_HISTORY_MAX_EVENTS;
  un(mh);
}

/* ---- restore ---- */

int gmt_memhistory_restore(gmt_memhistory_t *mh, const gmt_alloc_info_t *info,
                           const gmt_alloc_event_t *events, size_t nevents)
{
  if (info->kind >= GMT_ALLOC_KIND_MAX)
    return -EINVAL;
  gmt_alloc_history_t *h = calloc(1, sizeof *h);
  if (!h)
    return -ENOMEM;
  h->info = *info;
  if (nevents) {
    h->events = malloc(nevents * sizeof *events);
    if (!h->events) {
      free(h);
      return -ENOMEM;
    }
    memcpy(h->events, events, nevents * sizeof *events);
    h->nevents = h->capevents = nevents;
  }
  wr(mh);
  h->info.id = ++mh->last_id; /* ids are positions; a dump keeps them in order */
  site_next(mh, &h->info.site);
  /* An active history that overlaps one already restored would break the
   * range index: the later one wins, as it would have live. */
  if (h->info.active && find_active(mh, h->info.pid, h->info.address))
    h->info.active = false;
  int rc = add_history(mh, h);
  un(mh);
  if (rc != 0) {
    free(h->events);
    free(h);
  }
  return rc;
}

int gmt_memhistory_restore_process(gmt_memhistory_t *mh, const gmt_trace_process_t *src)
{
  wr(mh);
  gmt_trace_process_t *p = proc_add(mh);
  if (p)
    *p = *src;
  un(mh);
  return p ? 0 : -ENOMEM;
}

/* ---- readers ---- */

int gmt_memhistory_lookup(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, gmt_alloc_info_t *out)
{
  rd(mh);
  gmt_alloc_history_t *h = find_active(mh, pid, addr);
  if (h)
    *out = h->info;
  un(mh);
  return h ? 0 : -ENOENT;
}

size_t gmt_memhistory_hotspots(gmt_memhistory_t *mh, size_t k, gmt_alloc_info_t *out)
{
  rd(mh);
  size_t n = heap_top(&mh->hot, k, NULL, 0, out);
  un(mh);
  return n;
}

size_t gmt_memhistory_coldspots(gmt_memhistory_t *mh, size_t k, gmt_alloc_info_t *out)
{
  rd(mh);
  size_t n = heap_top(&mh->cold, k, NULL, 0, out);
  un(mh);
  return n;
}

size_t gmt_memhistory_hotspots_of(gmt_memhistory_t *mh, const uint32_t *pids, size_t npids,
                                  size_t k, gmt_alloc_info_t *out)
{
  rd(mh);
  size_t n = heap_top(&mh->hot, k, pids, npids, out);
  un(mh);
  return n;
}

size_t gmt_memhistory_coldspots_of(gmt_memhistory_t *mh, const uint32_t *pids, size_t npids,
                                   size_t k, gmt_alloc_info_t *out)
{
  rd(mh);
  size_t n = heap_top(&mh->cold, k, pids, npids, out);
  un(mh);
  return n;
}

static uint64_t moved_bytes(const gmt_alloc_info_t *i)
{
  return i->moves_out_bytes + i->moves_in_bytes;
}

size_t gmt_memhistory_most_moved(gmt_memhistory_t *mh, size_t k, gmt_alloc_info_t *out)
{
  size_t n = 0;
  rd(mh);
  for (size_t i = 0; i < mh->nall && k; i++) { /* all[] is in id order: older first */
    const gmt_alloc_info_t *in = &mh->all[i]->info;
    if (!in->moves_out && !in->moves_in)
      continue;
    if (n == k && moved_bytes(in) <= moved_bytes(&out[n - 1]))
      continue;
    size_t at = n < k ? n++ : n - 1;
    while (at > 0 && moved_bytes(&out[at - 1]) < moved_bytes(in)) {
      out[at] = out[at - 1];
      at--;
    }
    out[at] = *in;
  }
  un(mh);
  return n;
}

int gmt_memhistory_process_info(gmt_memhistory_t *mh, uint32_t pid, gmt_trace_process_t *out)
{
  rd(mh);
  /* Not proc_find: its cache is the writer's, and readers share the lock. */
  const gmt_trace_process_t *p = NULL;
  for (size_t i = mh->nprocs; i-- > 0 && !p;)
    if (mh->procs[i].pid == pid)
      p = &mh->procs[i];
  if (p)
    *out = *p;
  un(mh);
  return p ? 0 : -ENOENT;
}

void gmt_memhistory_totals(gmt_memhistory_t *mh, gmt_memhistory_totals_t *t)
{
  memset(t, 0, sizeof *t);
  rd(mh);
  t->allocations = mh->nall;
  t->active = mh->nactive;
  t->processes = mh->nprocs;
  t->dropped_histories = mh->dropped_histories;
  for (size_t i = 0; i < mh->nall; i++) {
    const gmt_alloc_info_t *in = &mh->all[i]->info;
    t->by_kind[in->kind]++;
    if (in->origin < GMT_ORIGIN_MAX)
      t->by_origin[in->origin]++;
    t->pinned_by_gmt += in->pinned_by_gmt;
    t->faults += in->faults;
    t->moves_out += in->moves_out;
    t->moves_out_bytes += in->moves_out_bytes;
    t->moves_out_ns += in->moves_out_ns;
    t->moves_in += in->moves_in;
    t->moves_in_bytes += in->moves_in_bytes;
    t->moves_in_ns += in->moves_in_ns;
  }
  t->h2d_count = mh->copy_count[GMT_AEV_H2D];
  t->h2d_bytes = mh->copy_bytes[GMT_AEV_H2D];
  t->d2h_count = mh->copy_count[GMT_AEV_D2H];
  t->d2h_bytes = mh->copy_bytes[GMT_AEV_D2H];
  t->d2d_count = mh->copy_count[GMT_AEV_D2D];
  t->d2d_bytes = mh->copy_bytes[GMT_AEV_D2D];
  t->unmatched_faults = mh->unmatched_faults;
  t->unmatched_copies = mh->unmatched_copies;
  for (size_t i = 0; i < mh->nprocs; i++) {
    const gmt_trace_kernel_t *k = &mh->procs[i].kernel;
    t->kernel.reclaim_stalls += k->reclaim_stalls;
    t->kernel.reclaim_ns += k->reclaim_ns;
    t->kernel.compact_stalls += k->compact_stalls;
    t->kernel.compact_ns += k->compact_ns;
    t->kernel.pagecache_faults += k->pagecache_faults;
  }
  un(mh);
}

void gmt_memhistory_rdlock(gmt_memhistory_t *mh)
{
  rd(mh);
}
void gmt_memhistory_unlock(gmt_memhistory_t *mh)
{
  un(mh);
}

size_t gmt_memhistory_size(const gmt_memhistory_t *mh)
{
  return mh->nall;
}

const gmt_alloc_history_t *gmt_memhistory_at(const gmt_memhistory_t *mh, size_t i)
{
  return i < mh->nall ? mh->all[i] : NULL;
}

size_t gmt_memhistory_at_address(const gmt_memhistory_t *mh, uint32_t pid, uint64_t addr,
                                 const gmt_alloc_history_t **out, size_t n)
{
  const gmt_alloc_history_t *h = mh->addr_hash[addr_bucket(pid, addr)];
  while (h && (h->info.pid != pid || h->info.address != addr))
    h = h->hash_next;
  size_t got = 0;
  for (; h && got < n; h = h->prev_same)
    out[got++] = h;
  return got;
}

size_t gmt_memhistory_nprocesses(const gmt_memhistory_t *mh)
{
  return mh->nprocs;
}

const gmt_trace_process_t *gmt_memhistory_process(const gmt_memhistory_t *mh, size_t i)
{
  return i < mh->nprocs ? &mh->procs[i] : NULL;
}

void gmt_memhistory_counters(const gmt_memhistory_t *mh, gmt_memhistory_counters_t *c)
{
  *c = (gmt_memhistory_counters_t){.unmatched_faults = mh->unmatched_faults,
                                   .unmatched_copies = mh->unmatched_copies,
                                   .h2d_count = mh->copy_count[GMT_AEV_H2D],
                                   .h2d_bytes = mh->copy_bytes[GMT_AEV_H2D],
                                   .d2h_count = mh->copy_count[GMT_AEV_D2H],
                                   .d2h_bytes = mh->copy_bytes[GMT_AEV_D2H],
                                   .d2d_count = mh->copy_count[GMT_AEV_D2D],
                                   .d2d_bytes = mh->copy_bytes[GMT_AEV_D2D]};
}

void gmt_memhistory_set_counters(gmt_memhistory_t *mh, const gmt_memhistory_counters_t *c)
{
  wr(mh);
  mh->unmatched_faults = c->unmatched_faults;
  mh->unmatched_copies = c->unmatched_copies;
  mh->copy_count[GMT_AEV_H2D] = c->h2d_count;
  mh->copy_bytes[GMT_AEV_H2D] = c->h2d_bytes;
  mh->copy_count[GMT_AEV_D2H] = c->d2h_count;
  mh->copy_bytes[GMT_AEV_D2H] = c->d2h_bytes;
  mh->copy_count[GMT_AEV_D2D] = c->d2d_count;
  mh->copy_bytes[GMT_AEV_D2D] = c->d2d_bytes;
  un(mh);
}
