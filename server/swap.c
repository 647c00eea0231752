/* mode=swap's resident bytes and eviction targets (see swap.h). One entry
 * per (pod, process, device) that told its resident bytes; a node runs
 * tens of swap processes, so a plain array searched linearly is the right
 * size of structure. Counters are unsigned: every subtraction below is of
 * a part from its whole, or checked first. */
#include "swap.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_bytes.h"

typedef struct {
  char *pod;
  uint32_t pid;
  int device;
  uint64_t resident;
  bool has_target;
  uint64_t keep;      /* the target: how much may stay */
  uint64_t target_ms; /* when it was set (or last lowered) */
  bool seen;          /* listed by a heartbeat at least once */
  uint64_t born_ms;
  uint64_t raised_ms; /* when its resident bytes last grew (its idle-out counts from then) */
} entry_t;

struct gmt_swap {
  size_t n, cap;
  entry_t *e;
};

int gmt_swap_new(gmt_swap_t **out)
{
  *out = calloc(1, sizeof **out);
  return *out ? 0 : -ENOMEM;
}

void gmt_swap_free(gmt_swap_t *sw)
{
  if (!sw)
    return;
  for (size_t i = 0; i < sw->n; i++)
    free(sw->e[i].pod);
  free(sw->e);
  free(sw);
}

static entry_t *find(const gmt_swap_t *sw, const char *pod, uint32_t pid, int device)
{
  for (size_t i = 0; i < sw->n; i++) {
    entry_t *e = &sw->e[i];
    if (e->pid == pid && e->device == device && strcmp(e->pod, pod) == 0)
      return e;
  }
  return NULL;
}

static entry_t *get(gmt_swap_t *sw, const char *pod, uint32_t pid, int device, uint64_t now_ms)
{
  entry_t *e = find(sw, pod, pid, device);
  if (e)
    return e;
  if (sw->n == sw->cap) {
    size_t ncap = sw->cap ? 2 * sw->cap : 8;
    entry_t *v = realloc(sw->e, ncap * sizeof *v);
    if (!v)
      return NULL;
    sw->e = v;
    sw->cap = ncap;
  }
  char *name = strdup(pod);
  if (!name)
    return NULL;
  /* A process already listed on another device is not new. */
  bool seen = false;
  for (size_t i = 0; i < sw->n; i++)
    if (sw->e[i].pid == pid && sw->e[i].seen && strcmp(sw->e[i].pod, pod) == 0)
      seen = true;
  e = &sw->e[sw->n++];
  *e = (entry_t){.pod = name,
                 .pid = pid,
                 .device = device,
                 .seen = seen,
                 .born_ms = now_ms,
                 .raised_ms = now_ms};
  return e;
}

uint64_t gmt_swap_resident(const gmt_swap_t *sw, const char *pod, uint32_t pid, int device)
{
  const entry_t *e = pod ? find(sw, pod, pid, device) : NULL;
  return e ? e->resident : 0;
}

/* What pod's processes have on every device (saturating). */
static uint64_t pod_total(const gmt_swap_t *sw, const char *pod)
{
  uint64_t sum = 0;
  for (size_t i = 0; i < sw->n; i++)
    if (strcmp(sw->e[i].pod, pod) == 0)
      sum = gmt_bytes_add(sum, sw->e[i].resident);
  return sum;
}

uint64_t gmt_swap_pod_device_total(const gmt_swap_t *sw, const char *pod, int device)
{
  uint64_t sum = 0;
  for (size_t i = 0; pod && i < sw->n; i++)
    if (sw->e[i].device == device && strcmp(sw->e[i].pod, pod) == 0)
      sum = gmt_bytes_add(sum, sw->e[i].resident);
  return sum;
}

uint64_t gmt_swap_device_total(const gmt_swap_t *sw, int device)
{
  uint64_t sum = 0;
  for (size_t i = 0; i < sw->n; i++)
    if (sw->e[i].device == device)
      sum = gmt_bytes_add(sum, sw->e[i].resident);
  return sum;
}

bool gmt_swap_target(const gmt_swap_t *sw, const char *pod, uint32_t pid, int device,
                     uint64_t *keep)
{
  const entry_t *e = pod ? find(sw, pod, pid, device) : NULL;
  if (!e || !e->has_target)
    return false;
  if (keep)
    *keep = e->keep;
  return true;
}

static uint64_t room_left(uint64_t limit, uint64_t occupied)
{
  return occupied < limit ? limit - occupied : 0;
}

/* Whether a process may be asked: not of the requester's pod, its pod
 * idle on the device. */
static bool askable(const gmt_swap_space_t *sp, const entry_t *e, const char *requester)
{
  if (requester && strcmp(e->pod, requester) == 0)
    return false;
  return !sp->may_ask || sp->may_ask(sp->arg, e->pod, e->device);
}

/* What e would still have on the GPU once its pending target is met. */
static uint64_t would_keep(const entry_t *e)
{
  return e->has_target && e->keep < e->resident ? e->keep : e->resident;
}

/* A victim and when its pod last ran. */
typedef struct {
  entry_t *e;
  double last;
} cand_t;

/* The least recently run first (the least likely to run next), then the
 * largest (the fewest moves), then by name and pid (a stable order). */
static int by_victim_order(const void *a, const void *b)
{
  const cand_t *p = a, *q = b;
  if (p->last != q->last)
    return p->last < q->last ? -1 : 1;
  const entry_t *x = p->e, *y = q->e;
  uint64_t gx = would_keep(x), gy = would_keep(y);
  if (gx != gy)
    return gx < gy ? 1 : -1;
  int c = strcmp(x->pod, y->pod);
  if (c)
    return c;
  return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Whether e may be asked by pressure, which nobody waits for: its pod has
 * not run on the device for GMT_SWAP_PRESSURE_IDLE_MS (a pod between two
 * grants of its own turn is not moved out to come back at once). The
 * token's clock and the loop's are both CLOCK_MONOTONIC in ms. */
static bool idle_long(const gmt_swap_space_t *sp, const entry_t *e)
{
  return !sp->last_run ||
         sp->last_run(sp->arg, e->pod, e->device) <= (double)sp->now_ms - GMT_SWAP_PRESSURE_IDLE_MS;
}

/* Whether e's memory may move for others although its pod does not wait
 * for the device: it has run nothing there, nor raised these bytes, for
 * its idle-out (an inference pod between requests keeps its memory and
 * wakes at once; docs/tiers.md, "Idle pods"). A pod that waits has work:
 * its memory moves by turns. */
static bool idle_out(const gmt_swap_space_t *sp, const entry_t *e)
{
  if (!sp->waits || sp->waits(sp->arg, e->pod, e->device))
    return true;
  double after = sp->idle_out_ms ? sp->idle_out_ms(sp->arg, e->pod) : 0;
  if (after < 0)
    return false;
  double last = sp->last_run ? sp->last_run(sp->arg, e->pod, e->device) : -INFINITY;
  if ((double)e->raised_ms > last)
    last = (double)e->raised_ms;
  return (double)sp->now_ms - last >= after;
}

/* Whether e may be asked to move out of device for pod's room (pressure:
 * no pod's, and only one idle_long). */
static bool victim(const gmt_swap_space_t *sp, const entry_t *e, const char *pod, int device,
                   bool pressure)
{
  return e->device == device && would_keep(e) > 0 && askable(sp, e, pod) &&
         (!pressure || idle_long(sp, e)) && idle_out(sp, e);
}

/* Asks the idle processes of other pods on device to free remaining bytes
 * more than their pending targets do, and as much of extra more as they
 * have, in by_victim_order; for pressure, only those idle_long. Sets
 * nothing when they cannot cover remaining, unless pressure (then as much
 * as they can). Returns how many were asked, or -ENOMEM. */
static long ask(gmt_swap_t *sw, const char *pod, int device, uint64_t remaining, uint64_t extra,
                const gmt_swap_space_t *sp, bool pressure)
{
  size_t n = 0;
  uint64_t available = 0;
  for (size_t i = 0; i < sw->n; i++) {
    if (victim(sp, &sw->e[i], pod, device, pressure)) {
      available = gmt_bytes_add(available, would_keep(&sw->e[i]));
      n++;
    }
  }
  if (n == 0 || (available < remaining && !pressure))
    return 0;
  if (available > remaining)
    remaining += extra < available - remaining ? extra : available - remaining;
  cand_t *c = malloc(n * sizeof *c);
  if (!c)
    return -ENOMEM;
  size_t k = 0;
  for (size_t i = 0; i < sw->n; i++) {
    entry_t *e = &sw->e[i];
    if (victim(sp, e, pod, device, pressure))
      c[k++] = (cand_t){e, sp->last_run ? sp->last_run(sp->arg, e->pod, device) : 0};
  }
  qsort(c, k, sizeof *c, by_victim_order);
  long asked = 0;
  for (size_t i = 0; i < k && remaining > 0; i++) {
    entry_t *e = c[i].e;
    uint64_t give = would_keep(e), take = give < remaining ? give : remaining;
    e->keep = give - take;
    e->has_target = true;
    e->target_ms = sp->now_ms;
    remaining -= take;
    asked++;
  }
  free(c);
  return asked;
}

/* What the targets already pending on device will free (those of pods
 * that may not be asked now are not counted: they will not move). */
static uint64_t coming(const gmt_swap_t *sw, int device, const gmt_swap_space_t *space)
{
  uint64_t c = 0;
  for (size_t i = 0; i < sw->n; i++) {
    const entry_t *v = &sw->e[i];
    if (v->device == device && v->has_target && v->keep < v->resident && askable(space, v, NULL))
      c = gmt_bytes_add(c, v->resident - v->keep);
  }
  return c;
}

long gmt_swap_pressure(gmt_swap_t *sw, const char *spare, int device, const gmt_swap_space_t *space,
                       uint64_t trigger, uint64_t stop, uint64_t *excess)
{
  *excess = 0;
  if (device < 0 || device >= GMT_SWAP_DEVICES)
    return -EINVAL;
  uint64_t occupied = gmt_bytes_add(space->base, gmt_swap_device_total(sw, device));
  if (occupied <= trigger || occupied <= stop ||
      (space->committed && space->committed <= space->limit))
    return 0;
  uint64_t c = coming(sw, device, space);
  if (c >= occupied - stop)
    return 0;
  *excess = occupied - stop - c;
  return ask(sw, spare, device, *excess, 0, space, true);
}

int gmt_swap_request(gmt_swap_t *sw, const char *pod, uint32_t pid, int device, uint64_t bytes,
                     const gmt_swap_space_t *space, gmt_swap_answer_t *out)
{
  return gmt_swap_request_part(sw, pod, pid, device, bytes, 0, space, out);
}

int gmt_swap_request_part(gmt_swap_t *sw, const char *pod, uint32_t pid, int device, uint64_t bytes,
                          uint64_t at_least, const gmt_swap_space_t *space, gmt_swap_answer_t *out)
{
  memset(out, 0, sizeof *out);
  if (!pod || pid == 0 || device < 0 || device >= GMT_SWAP_DEVICES)
    return -EINVAL;
  entry_t *e = find(sw, pod, pid, device);
  uint64_t own = e ? e->resident : 0;
  uint64_t total = gmt_swap_device_total(sw, device);
  uint64_t others = total - own; /* own is a part of total */
  /* The pod's bytes but these: own is a part of the sum unless it saturated. */
  uint64_t pod_rest = pod_total(sw, pod);
  pod_rest = pod_rest > own ? pod_rest - own : 0;

  if (bytes <= own) {
    if (e) { /* none: own is 0 and so are bytes, nothing to keep */
      e->resident = bytes;
      if (e->has_target && bytes <= e->keep)
        e->has_target = false;
    }
    out->granted = true;
    out->reason = GMT_SWAP_ROOM;
    out->room = room_left(space->limit, gmt_bytes_add(gmt_bytes_add(space->base, others), bytes));
    out->granted_total = bytes;
    out->pod_total = gmt_bytes_add(pod_rest, bytes);
    return 0;
  }
  out->granted_total = own;
  out->pod_total = gmt_bytes_add(pod_rest, own);
  uint64_t occupied = gmt_bytes_add(space->base, total);
  /* Never, however much room: more than the space, or more than the pod
   * may hold (asking others to move out for it would move them for
   * nothing the pod may have). */
  if (bytes > space->limit || bytes > space->quota || pod_rest > space->quota - bytes) {
    out->reason = bytes > space->limit ? GMT_SWAP_TOO_BIG : GMT_SWAP_QUOTA;
    out->room = room_left(space->limit, occupied);
    return 0;
  }
  /* A process that raises is running again: a target of its own ends. */
  if (e)
    e->has_target = false;
  uint64_t need = gmt_bytes_add(gmt_bytes_add(space->base, others), bytes);
  if (need <= space->limit) {
    if (!e && !(e = get(sw, pod, pid, device, space->now_ms)))
      return -ENOMEM;
    e->resident = bytes;
    e->raised_ms = space->now_ms;
    out->granted = true;
    out->reason = GMT_SWAP_ROOM;
    out->room = space->limit - need;
    out->granted_total = bytes;
    out->pod_total = pod_rest + bytes; /* within the quota: checked above */
    return 0;
  }
  out->reason = GMT_SWAP_WAIT;
  out->retry_ms = GMT_SWAP_RETRY_MS;
  out->room = room_left(space->limit, occupied);
  out->shortfall = need - space->limit;
  out->coming = coming(sw, device, space);
  if (out->coming < out->shortfall) {
    /* A pod that runs (it holds the token) gets room for all it may
     * still grow to (its quota), at once: a job whose allocations grow in
     * 20 MiB segments (PyTorch's expandable segments) otherwise moved the
     * other pod out 20 MiB at a time, 828 moves each way in one run on an
     * H200. One that does not run gets its shortfall: what is left of
     * the others moves only if it must. */
    uint64_t after = gmt_bytes_add(pod_rest, bytes);
    bool runs = space->may_ask && !space->may_ask(space->arg, pod, device);
    uint64_t grow =
        runs && space->quota != UINT64_MAX && space->quota > after ? space->quota - after : 0;
    long asked = ask(sw, pod, device, out->shortfall - out->coming, grow, space, false);
    if (asked < 0)
      return (int)asked;
    out->asked = (size_t)asked;
  }
  /* In part: the most this process may have now, when that lets at least
   * at_least more in. The targets above stand for the rest. */
  uint64_t others_in = gmt_bytes_add(space->base, others);
  uint64_t fits = room_left(space->limit, others_in);
  if (at_least && fits >= gmt_bytes_add(own, at_least)) {
    if (!e && !(e = get(sw, pod, pid, device, space->now_ms)))
      return -ENOMEM;
    e->resident = fits;
    e->raised_ms = space->now_ms;
    out->granted = true;
    out->reason = GMT_SWAP_PARTIAL;
    out->retry_ms = 0;
    out->room = 0;
    out->granted_total = fits;
    out->pod_total = pod_rest + fits; /* fits < bytes, within the quota */
  }
  return 0;
}

size_t gmt_swap_expire(gmt_swap_t *sw, uint64_t now_ms, gmt_swap_may_ask_fn may_ask, void *arg,
                       gmt_swap_drop_fn fn, void *fn_arg)
{
  size_t n = 0;
  for (size_t i = 0; i < sw->n; i++) {
    entry_t *e = &sw->e[i];
    if (!e->has_target)
      continue;
    gmt_swap_drop_t why;
    if (e->resident <= e->keep)
      why = GMT_SWAP_DROP_MET;
    else if (now_ms >= e->target_ms && now_ms - e->target_ms >= GMT_SWAP_TARGET_MS)
      why = GMT_SWAP_DROP_EXPIRED;
    else if (may_ask && !may_ask(arg, e->pod, e->device))
      why = GMT_SWAP_DROP_RUNNING;
    else
      continue;
    e->has_target = false;
    if (fn)
      fn(fn_arg, e->pod, e->pid, e->device, e->keep, e->resident, why);
    n++;
  }
  return n;
}

static int by_pid(const void *a, const void *b)
{
  uint32_t x = ((const gmt_swap_evict_t *)a)->pid, y = ((const gmt_swap_evict_t *)b)->pid;
  return (x > y) - (x < y);
}

size_t gmt_swap_evicts(const gmt_swap_t *sw, const char *pod, gmt_swap_evict_t *out, size_t max)
{
  size_t n = 0;
  for (size_t i = 0; pod && i < sw->n; i++) {
    const entry_t *e = &sw->e[i];
    if (!e->has_target || strcmp(e->pod, pod) != 0)
      continue;
    /* Once per process: at its first entry with a target. */
    bool done = false;
    for (size_t j = 0; j < i && !done; j++)
      done = sw->e[j].has_target && sw->e[j].pid == e->pid && strcmp(sw->e[j].pod, pod) == 0;
    if (done)
      continue;
    uint64_t keep = 0;
    for (size_t j = 0; j < sw->n; j++) {
      const entry_t *d = &sw->e[j];
      if (d->pid == e->pid && strcmp(d->pod, pod) == 0)
        keep = gmt_bytes_add(keep, d->has_target ? d->keep : d->resident);
    }
    if (n < max)
      out[n] = (gmt_swap_evict_t){.pid = e->pid, .keep_bytes = keep};
    n++;
  }
  if (out && n <= max)
    qsort(out, n, sizeof *out, by_pid);
  return n;
}

static bool listed(const uint32_t *pids, size_t n, uint32_t pid)
{
  for (size_t i = 0; i < n; i++)
    if (pids[i] == pid)
      return true;
  return false;
}

/* Removes the entries for which drop() says so, telling fn; returns the
 * resident bytes they had. */
static uint64_t sweep(gmt_swap_t *sw, bool (*drop)(const entry_t *e, const void *ctx),
                      const void *ctx, gmt_swap_reclaim_fn fn, void *arg)
{
  uint64_t gone = 0;
  size_t k = 0;
  for (size_t i = 0; i < sw->n; i++) {
    entry_t *e = &sw->e[i];
    if (!drop(e, ctx)) {
      sw->e[k++] = *e;
      continue;
    }
    if (fn && (e->resident || e->has_target))
      fn(arg, e->pod, e->pid, e->device, e->resident, e->has_target);
    gone = gmt_bytes_add(gone, e->resident);
    free(e->pod);
  }
  sw->n = k;
  return gone;
}

typedef struct {
  const char *pod;
  const uint32_t *pids;
  size_t npids;
  uint64_t now_ms;
} retain_ctx_t;

static bool drop_unlisted(const entry_t *e, const void *ctx)
{
  const retain_ctx_t *r = ctx;
  if (strcmp(e->pod, r->pod) != 0 || listed(r->pids, r->npids, e->pid))
    return false;
  /* A process whose Resident overtook the first heartbeat that lists it
   * is not gone: it gets a grace period. */
  return e->seen || r->now_ms - e->born_ms >= GMT_SWAP_GRACE_MS;
}

uint64_t gmt_swap_retain(gmt_swap_t *sw, const char *pod, const uint32_t *pids, size_t npids,
                         uint64_t now_ms, gmt_swap_reclaim_fn fn, void *arg)
{
  if (!pod)
    return 0;
  for (size_t i = 0; i < sw->n; i++)
    if (strcmp(sw->e[i].pod, pod) == 0 && listed(pids, npids, sw->e[i].pid))
      sw->e[i].seen = true;
  retain_ctx_t r = {pod, pids, npids, now_ms};
  return sweep(sw, drop_unlisted, &r, fn, arg);
}

typedef struct {
  bool (*keep)(void *arg, const char *pod);
  void *arg;
} pods_ctx_t;

static bool drop_pod(const entry_t *e, const void *ctx)
{
  const pods_ctx_t *p = ctx;
  return !p->keep(p->arg, e->pod);
}

uint64_t gmt_swap_retain_pods(gmt_swap_t *sw, bool (*keep)(void *arg, const char *pod),
                              gmt_swap_reclaim_fn fn, void *arg)
{
  pods_ctx_t p = {keep, arg};
  return sweep(sw, drop_pod, &p, fn, arg);
}

uint64_t gmt_swap_adopt(gmt_swap_t *sw, const char *pod, uint32_t pid, int device, uint64_t bytes,
                        uint64_t quota, uint64_t now_ms)
{
  if (!pod || pid == 0 || device < 0 || device >= GMT_SWAP_DEVICES)
    return 0;
  /* Known on any device: its own calls are the truth, not a report that
   * may be older than them. */
  for (size_t i = 0; i < sw->n; i++)
    if (sw->e[i].pid == pid && strcmp(sw->e[i].pod, pod) == 0)
      return 0;
  /* A report is believed only as far as the pod may hold. */
  uint64_t room = room_left(quota, pod_total(sw, pod));
  if (bytes > room)
    bytes = room;
  if (bytes == 0)
    return 0;
  entry_t *e = get(sw, pod, pid, device, now_ms);
  if (!e)
    return 0;
  e->seen = true; /* adopted from a heartbeat */
  e->resident = bytes;
  return bytes;
}

bool gmt_swap_prepare_due(uint64_t occupied, uint64_t stop, uint64_t committed, uint64_t limit)
{
  return occupied > stop && committed > limit;
}
