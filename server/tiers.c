/* Memory tiers (see tiers.h): spaces, the reservations in them, and the
 * requests that wait for room.
 *
 * A node has a handful of spaces, so they are a plain array. Reservations
 * are an array sorted by id (ids only grow), found by binary search.
 * Waiting requests are an array in arrival order. Callbacks run only once
 * the tables are consistent again, and never inside a walk of the waiters,
 * so a callback may reserve, release or cancel. */
#include "tiers.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

typedef struct {
  gmt_tier_t tier;
  int index;
  uint64_t capacity, limit;
  double trigger, stop;
  uint64_t trigger_bytes, stop_bytes;
  /* Kept in step with the reservations (gmt_tiers_check recounts them):
   * over is the sum of what reservations use beyond their bytes, so a
   * reservation occupies bytes + its over. */
  uint64_t reserved, over, used;
  /* Held outside any reservation, as its owner says (gmt_tiers_set_held):
   * a GPU space's is the device ledger's reservations. */
  uint64_t held;
  size_t nresv;
} space_t;

typedef struct {
  uint64_t id;
  size_t space; /* index into t->spaces, which may move */
  char pod[GMT_POD_NAME_MAX + 1];
  uint32_t pid;
  gmt_tier_limit_policy_t policy;
  uint64_t bytes, used;
} resv_t;

typedef struct waiter {
  uint64_t id;
  gmt_tier_request_t req; /* req.pod points at pod below */
  char pod[GMT_POD_NAME_MAX + 1];
  uint64_t deadline_ms;
  gmt_tier_resv_t granted; /* once served */
  struct waiter *next;     /* on a list of ended waiters, before their callbacks */
} waiter_t;

struct gmt_tiers {
  space_t *spaces;
  size_t nspaces, spaces_cap;
  resv_t *resv;
  size_t nresv, resv_cap;
  waiter_t **waiters;
  size_t nwaiters, waiters_cap;
  uint64_t next_id;
  /* A callback released memory while waiters were being served: serve
   * them again from the outer call rather than recursing. */
  bool serving, again;
};

static uint64_t over_of(uint64_t bytes, uint64_t used)
{
  return used > bytes ? used - bytes : 0;
}

static uint64_t occupied(const space_t *s)
{
  uint64_t r = s->reserved + s->over;
  return r > UINT64_MAX - s->held ? UINT64_MAX : r + s->held;
}

/* What a new reservation may take. IGNORE may have pushed the space past
 * its limit: then nothing. */
static uint64_t room(const space_t *s)
{
  uint64_t occ = occupied(s);
  return occ < s->limit ? s->limit - occ : 0;
}

/* Room for one more of n elements of size in arr, which has room for *cap:
 * arr, or a larger copy (and *cap), or NULL (arr unchanged) when out of
 * memory. */
static void *room_for_one(void *arr, size_t n, size_t *cap, size_t size)
{
  if (n < *cap)
    return arr;
  size_t ncap = *cap ? 2 * *cap : 16;
  void *p = realloc(arr, ncap * size);
  if (p)
    *cap = ncap;
  return p;
}

int gmt_tiers_new(gmt_tiers_t **out)
{
  *out = calloc(1, sizeof **out);
  if (!*out)
    return -ENOMEM;
  (*out)->next_id = 1;
  return 0;
}

/* Calls the callbacks of a list of ended waiters and frees them; with
 * status 0 each gets the reservation it was granted. */
static void finish(waiter_t *list, int status)
{
  while (list) {
    waiter_t *w = list;
    list = w->next;
    gmt_tier_resv_t r = status == 0 ? w->granted : (gmt_tier_resv_t){.id = w->id};
    w->req.cb(w->req.arg, status, &r);
    free(w);
  }
}

/* Takes the waiters for which match() is true off the queue, in order,
 * as a list for finish(). */
static waiter_t *waiters_take(gmt_tiers_t *t, bool (*match)(waiter_t *w, void *arg), void *arg)
{
  waiter_t *list = NULL, **tail = &list;
  size_t keep = 0;
  for (size_t i = 0; i < t->nwaiters; i++) {
    waiter_t *w = t->waiters[i];
    if (match(w, arg)) {
      *tail = w;
      tail = &w->next;
    } else {
      t->waiters[keep++] = w;
    }
  }
  *tail = NULL;
  t->nwaiters = keep;
  return list;
}

static bool any_waiter(waiter_t *w, void *arg)
{
  (void)w;
  (void)arg;
  return true;
}

void gmt_tiers_free(gmt_tiers_t *t)
{
  if (!t)
    return;
  finish(waiters_take(t, any_waiter, NULL), -ECANCELED);
  free(t->waiters);
  free(t->resv);
  free(t->spaces);
  free(t);
}

const char *gmt_tier_name(gmt_tier_t tier)
{
  switch (tier) {
  case GMT_TIER_GPU: return "gpu";
  case GMT_TIER_HOST: return "host";
  case GMT_TIER_DISK: return "disk";
  }
  return "?";
}

static bool tier_ok(gmt_tier_t tier)
{
  return (unsigned)tier < GMT_TIERS;
}

static space_t *space_find(const gmt_tiers_t *t, gmt_tier_t tier, int index)
{
  for (size_t i = 0; i < t->nspaces; i++)
    if (t->spaces[i].tier == tier && t->spaces[i].index == index)
      return &t->spaces[i];
  return NULL;
}

static void serve(gmt_tiers_t *t);

int gmt_tiers_add_space(gmt_tiers_t *t, gmt_tier_t tier, int index, uint64_t capacity,
                        uint64_t limit, double trigger, double stop)
{
  if (limit == 0)
    limit = capacity;
  if (trigger == 0)
    trigger = GMT_TIERS_TRIGGER;
  if (stop == 0)
    stop = GMT_TIERS_STOP;
  /* Written so that NaN fails too. */
  if (!tier_ok(tier) || index < 0 || capacity == 0 || limit > capacity ||
      !(stop > 0 && stop < trigger && trigger <= 1))
    return -EINVAL;
  if (space_find(t, tier, index))
    return -EEXIST;
  space_t *spaces = room_for_one(t->spaces, t->nspaces, &t->spaces_cap, sizeof *spaces);
  if (!spaces)
    return -ENOMEM;
  t->spaces = spaces;
  t->spaces[t->nspaces++] = (space_t){
      .tier = tier,
      .index = index,
      .capacity = capacity,
      .limit = limit,
      .trigger = trigger,
      .stop = stop,
      .trigger_bytes = (uint64_t)(trigger * (double)capacity),
      .stop_bytes = (uint64_t)(stop * (double)capacity),
  };
  serve(t);
  return 0;
}

/* ---- choosing a space: a pure function of the spaces and the request ---- */

/* The space of tier with the most room (the first declared on a tie), or
 * -1 when the tier has none. Sets *ever when one of them could hold bytes
 * once emptied. */
static long best_in_tier(const gmt_tiers_t *t, gmt_tier_t tier, uint64_t bytes, bool *ever)
{
  long best = -1;
  for (size_t i = 0; i < t->nspaces; i++) {
    const space_t *s = &t->spaces[i];
    if (s->tier != tier)
      continue;
    if (s->limit >= bytes)
      *ever = true;
    if (best < 0 || room(s) > room(&t->spaces[best]))
      best = (long)i;
  }
  return best;
}

/* The tiers a request may use, in the order it prefers them. */
static size_t candidate_tiers(const gmt_tier_request_t *req, gmt_tier_t *out)
{
  size_t n = 0;
  switch (req->strategy) {
  case GMT_TIER_ANY_IN_TIER:
  case GMT_TIER_ANY_IN_TIER_PREFER:
  case GMT_TIER_SPECIFIC: out[n++] = req->tier; break;
  case GMT_TIER_ANY_IN_TIERS:
    for (size_t i = 0; i < req->ntiers && i < GMT_TIERS; i++)
      out[n++] = req->tiers[i];
    break;
  case GMT_TIER_TO_DOWNGRADE:
    for (int k = (int)req->tier + 1; k < GMT_TIERS; k++)
      out[n++] = (gmt_tier_t)k;
    break;
  case GMT_TIER_TO_UPGRADE:
    for (int k = (int)req->tier - 1; k >= 0; k--)
      out[n++] = (gmt_tier_t)k;
    break;
  }
  return n;
}

/* The space req gets now: 0 and *chosen; -ENOSPC (none fits now, one
 * could later), -E2BIG (none ever could), -ENODEV (no candidate). */
static int choose(const gmt_tiers_t *t, const gmt_tier_request_t *req, size_t *chosen)
{
  bool any = false, ever = false;
  if (req->strategy == GMT_TIER_SPECIFIC || req->strategy == GMT_TIER_ANY_IN_TIER_PREFER) {
    const space_t *s = space_find(t, req->tier, req->index);
    if (s) {
      any = true;
      ever = s->limit >= req->bytes;
      if (room(s) >= req->bytes) {
        *chosen = (size_t)(s - t->spaces);
        return 0;
      }
    }
    if (req->strategy == GMT_TIER_SPECIFIC)
      return !any ? -ENODEV : ever ? -ENOSPC : -E2BIG;
  }
  gmt_tier_t tiers[GMT_TIERS];
  size_t n = candidate_tiers(req, tiers);
  for (size_t k = 0; k < n; k++) {
    long best = best_in_tier(t, tiers[k], req->bytes, &ever);
    if (best < 0)
      continue;
    any = true;
    if (room(&t->spaces[best]) >= req->bytes) {
      *chosen = (size_t)best;
      return 0;
    }
  }
  return !any ? -ENODEV : ever ? -ENOSPC : -E2BIG;
}

/* ---- reservations ---- */

/* The position of id in t->resv, or where it would go. */
static size_t resv_pos(const gmt_tiers_t *t, uint64_t id)
{
  size_t lo = 0, hi = t->nresv;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->resv[mid].id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static resv_t *resv_find(const gmt_tiers_t *t, uint64_t id)
{
  size_t i = resv_pos(t, id);
  return i < t->nresv && t->resv[i].id == id ? &t->resv[i] : NULL;
}

static int resv_reserve_room(gmt_tiers_t *t)
{
  resv_t *resv = room_for_one(t->resv, t->nresv, &t->resv_cap, sizeof *resv);
  if (!resv)
    return -ENOMEM;
  t->resv = resv;
  return 0;
}

static void resv_out(const gmt_tiers_t *t, const resv_t *r, gmt_tier_resv_t *out)
{
  if (!out)
    return;
  const space_t *s = &t->spaces[r->space];
  *out = (gmt_tier_resv_t){
      .id = r->id, .tier = s->tier, .index = s->index, .bytes = r->bytes, .used = r->used};
}

/* Makes reservation id of req in space si (room checked, and room in
 * t->resv made, by the caller). */
static resv_t *resv_add(gmt_tiers_t *t, uint64_t id, const gmt_tier_request_t *req, size_t si)
{
  size_t pos = resv_pos(t, id);
  memmove(&t->resv[pos + 1], &t->resv[pos], (t->nresv - pos) * sizeof *t->resv);
  t->nresv++;
  resv_t *r = &t->resv[pos];
  *r = (resv_t){.id = id, .space = si, .pid = req->pid, .policy = req->policy, .bytes = req->bytes};
  strcpy(r->pod, req->pod);
  t->spaces[si].reserved += req->bytes;
  t->spaces[si].nresv++;
  return r;
}

/* Takes r out of its space's totals and out of the table: returns what it
 * occupied. */
static uint64_t resv_remove(gmt_tiers_t *t, resv_t *r)
{
  space_t *s = &t->spaces[r->space];
  uint64_t over = over_of(r->bytes, r->used), held = r->bytes + over;
  s->reserved -= r->bytes;
  s->over -= over;
  s->used -= r->used;
  s->nresv--;
  size_t pos = (size_t)(r - t->resv);
  memmove(&t->resv[pos], &t->resv[pos + 1], (t->nresv - pos - 1) * sizeof *t->resv);
  t->nresv--;
  return held;
}

static bool request_ok(const gmt_tier_request_t *req)
{
  if (!req->pod || !req->pod[0] || strlen(req->pod) > GMT_POD_NAME_MAX || req->bytes == 0 ||
      (unsigned)req->policy > GMT_TIER_LIMIT_GROW)
    return false;
  switch (req->strategy) {
  case GMT_TIER_ANY_IN_TIER:
  case GMT_TIER_TO_DOWNGRADE:
  case GMT_TIER_TO_UPGRADE: return tier_ok(req->tier);
  case GMT_TIER_ANY_IN_TIER_PREFER:
  case GMT_TIER_SPECIFIC: return tier_ok(req->tier) && req->index >= 0;
  case GMT_TIER_ANY_IN_TIERS:
    if (req->ntiers == 0 || req->ntiers > GMT_TIERS)
      return false;
    for (size_t i = 0; i < req->ntiers; i++)
      if (!tier_ok(req->tiers[i]))
        return false;
    return true;
  }
  return false;
}

int gmt_tiers_reserve(gmt_tiers_t *t, const gmt_tier_request_t *req, uint64_t now_ms,
                      gmt_tier_resv_t *out)
{
  if (!request_ok(req))
    return -EINVAL;
  size_t si;
  int rc = choose(t, req, &si);
  if (rc == 0) {
    if ((rc = resv_reserve_room(t)) < 0)
      return rc;
    resv_out(t, resv_add(t, t->next_id++, req, si), out);
    return 0;
  }
  if (rc != -ENOSPC || req->wait_ms == 0 || !req->cb)
    return rc;
  if (t->nwaiters == GMT_TIERS_MAX_WAITERS)
    return -EAGAIN;
  waiter_t **waiters = room_for_one(t->waiters, t->nwaiters, &t->waiters_cap, sizeof *waiters);
  if (!waiters)
    return -ENOMEM;
  t->waiters = waiters;
  waiter_t *w = calloc(1, sizeof *w);
  if (!w)
    return -ENOMEM;
  w->id = t->next_id++;
  w->req = *req;
  strcpy(w->pod, req->pod);
  w->req.pod = w->pod;
  w->deadline_ms = now_ms > UINT64_MAX - req->wait_ms ? UINT64_MAX : now_ms + req->wait_ms;
  t->waiters[t->nwaiters++] = w;
  if (out)
    *out = (gmt_tier_resv_t){.id = w->id};
  return -EINPROGRESS;
}

int gmt_tiers_get(const gmt_tiers_t *t, uint64_t id, gmt_tier_resv_t *out)
{
  const resv_t *r = resv_find(t, id);
  if (!r)
    return -ENOENT;
  resv_out(t, r, out);
  return 0;
}

int gmt_tiers_use(gmt_tiers_t *t, uint64_t id, uint64_t bytes, gmt_tier_resv_t *out)
{
  resv_t *r = resv_find(t, id);
  if (!r)
    return -ENOENT;
  space_t *s = &t->spaces[r->space];
  if (bytes > UINT64_MAX - r->used)
    return -ENOSPC;
  uint64_t need = r->used + bytes;
  if (need > r->bytes) {
    switch (r->policy) {
    case GMT_TIER_LIMIT_FAIL: return -ENOSPC;
    case GMT_TIER_LIMIT_IGNORE: {
      uint64_t more = over_of(r->bytes, need) - over_of(r->bytes, r->used);
      if (occupied(s) >= s->capacity || more > s->capacity - occupied(s))
        return -ENOSPC;
      s->over += more;
      break;
    }
    case GMT_TIER_LIMIT_GROW: {
      /* Grown like any new reservation: within the limit. Under GROW a
       * reservation never uses past its bytes, so its over is 0. */
      uint64_t avail = room(s);
      if (need - r->bytes > avail)
        return -ENOSPC;
      uint64_t want = need > UINT64_MAX - need / 4 ? UINT64_MAX : need + need / 4;
      uint64_t grow = want - r->bytes < avail ? want - r->bytes : avail;
      r->bytes += grow;
      s->reserved += grow;
      break;
    }
    }
  }
  r->used = need;
  s->used += bytes;
  resv_out(t, r, out);
  return 0;
}

int gmt_tiers_unuse(gmt_tiers_t *t, uint64_t id, uint64_t bytes, uint64_t *taken)
{
  resv_t *r = resv_find(t, id);
  if (!r)
    return -ENOENT;
  space_t *s = &t->spaces[r->space];
  uint64_t take = bytes < r->used ? bytes : r->used;
  uint64_t over_before = over_of(r->bytes, r->used);
  r->used -= take;
  s->used -= take;
  s->over -= over_before - over_of(r->bytes, r->used);
  if (taken)
    *taken = take;
  if (over_before)
    serve(t); /* the space may have room again */
  return 0;
}

int gmt_tiers_release(gmt_tiers_t *t, uint64_t id)
{
  resv_t *r = resv_find(t, id);
  if (!r)
    return -ENOENT;
  resv_remove(t, r);
  serve(t);
  return 0;
}

/* ---- waiting requests ---- */

/* Grants w now if it fits. */
static bool grant(waiter_t *w, void *arg)
{
  gmt_tiers_t *t = arg;
  size_t si;
  if (choose(t, &w->req, &si) < 0 || resv_reserve_room(t) < 0)
    return false;
  resv_out(t, resv_add(t, w->id, &w->req, si), &w->granted);
  return true;
}

/* Grants each waiter that fits now, oldest first, then calls their
 * callbacks, the tables consistent by then. A callback that frees memory
 * asks for one more round rather than recursing. */
static void serve(gmt_tiers_t *t)
{
  if (t->serving) {
    t->again = true;
    return;
  }
  t->serving = true;
  do {
    t->again = false;
    finish(waiters_take(t, grant, t), 0);
  } while (t->again);
  t->serving = false;
}

static bool has_id(waiter_t *w, void *arg)
{
  return w->id == *(uint64_t *)arg;
}

int gmt_tiers_cancel(gmt_tiers_t *t, uint64_t id)
{
  waiter_t *list = waiters_take(t, has_id, &id);
  if (!list)
    return -ENOENT;
  finish(list, -ECANCELED);
  return 0;
}

static bool overdue(waiter_t *w, void *arg)
{
  return w->deadline_ms <= *(uint64_t *)arg;
}

size_t gmt_tiers_expire(gmt_tiers_t *t, uint64_t now_ms)
{
  waiter_t *list = waiters_take(t, overdue, &now_ms);
  size_t n = 0;
  for (const waiter_t *w = list; w; w = w->next)
    n++;
  finish(list, -ETIMEDOUT);
  return n;
}

bool gmt_tiers_next_deadline(const gmt_tiers_t *t, uint64_t *ms)
{
  if (t->nwaiters == 0)
    return false;
  uint64_t min = UINT64_MAX;
  for (size_t i = 0; i < t->nwaiters; i++)
    if (t->waiters[i]->deadline_ms < min)
      min = t->waiters[i]->deadline_ms;
  *ms = min;
  return true;
}

size_t gmt_tiers_nwaiting(const gmt_tiers_t *t)
{
  return t->nwaiters;
}

/* ---- owners ---- */

typedef struct {
  const char *pod;
  uint32_t pid; /* 0: every process */
} owner_t;

static bool owns(const char *pod, uint32_t pid, const owner_t *o)
{
  return strcmp(pod, o->pod) == 0 && (o->pid == 0 || pid == o->pid);
}

static bool waiter_owned(waiter_t *w, void *arg)
{
  return owns(w->pod, w->req.pid, arg);
}

static uint64_t release_matching(gmt_tiers_t *t, owner_t *o)
{
  if (!o->pod)
    return 0;
  uint64_t freed = 0;
  for (size_t i = t->nresv; i-- > 0;)
    if (owns(t->resv[i].pod, t->resv[i].pid, o))
      freed += resv_remove(t, &t->resv[i]);
  /* Its own waiters end first, so that serving does not grant them. */
  finish(waiters_take(t, waiter_owned, o), -ECANCELED);
  serve(t);
  return freed;
}

uint64_t gmt_tiers_release_owner(gmt_tiers_t *t, const char *pod, uint32_t pid)
{
  if (pid == 0)
    return 0; /* not a process; gmt_tiers_release_pod frees a whole pod */
  return release_matching(t, &(owner_t){pod, pid});
}

uint64_t gmt_tiers_release_pod(gmt_tiers_t *t, const char *pod)
{
  return release_matching(t, &(owner_t){pod, 0});
}

uint64_t gmt_tiers_owner_bytes(const gmt_tiers_t *t, const char *pod, uint32_t pid, gmt_tier_t tier)
{
  if (!pod)
    return 0;
  owner_t o = {pod, pid};
  uint64_t sum = 0;
  for (size_t i = 0; i < t->nresv; i++) {
    const resv_t *r = &t->resv[i];
    if (t->spaces[r->space].tier == tier && owns(r->pod, r->pid, &o))
      sum += r->bytes + over_of(r->bytes, r->used);
  }
  return sum;
}

/* ---- pressure and views ---- */

static uint64_t space_pressure(const space_t *s)
{
  uint64_t occ = occupied(s);
  if (occ < s->trigger_bytes || occ <= s->stop_bytes)
    return 0;
  return occ - s->stop_bytes;
}

uint64_t gmt_tiers_pressure(const gmt_tiers_t *t, gmt_tier_t tier, int index)
{
  const space_t *s = space_find(t, tier, index);
  return s ? space_pressure(s) : 0;
}

int gmt_tiers_set_held(gmt_tiers_t *t, gmt_tier_t tier, int index, uint64_t bytes)
{
  space_t *s = space_find(t, tier, index);
  if (!s)
    return -ENOENT;
  bool less = bytes < s->held;
  s->held = bytes;
  if (less)
    serve(t);
  return 0;
}

int gmt_tiers_room(const gmt_tiers_t *t, gmt_tier_t tier, int index, uint64_t *room_out)
{
  const space_t *s = space_find(t, tier, index);
  if (!s)
    return -ENOENT;
  *room_out = room(s);
  return 0;
}

size_t gmt_tiers_nspaces(const gmt_tiers_t *t)
{
  return t->nspaces;
}

int gmt_tiers_space_info(const gmt_tiers_t *t, size_t i, gmt_tier_space_info_t *out)
{
  if (i >= t->nspaces)
    return -ENOENT;
  const space_t *s = &t->spaces[i];
  *out = (gmt_tier_space_info_t){
      .tier = s->tier,
      .index = s->index,
      .capacity = s->capacity,
      .limit = s->limit,
      .trigger = s->trigger,
      .stop = s->stop,
      .reserved = s->reserved,
      .held = s->held,
      .used = s->used,
      .occupied = occupied(s),
      .pressure = space_pressure(s),
      .nresv = s->nresv,
  };
  return 0;
}

int gmt_tiers_check(const gmt_tiers_t *t)
{
  for (size_t si = 0; si < t->nspaces; si++) {
    const space_t *s = &t->spaces[si];
    uint64_t reserved = 0, over = 0, used = 0;
    size_t n = 0;
    for (size_t i = 0; i < t->nresv; i++) {
      const resv_t *r = &t->resv[i];
      if (r->space != si)
        continue;
      reserved += r->bytes;
      over += over_of(r->bytes, r->used);
      used += r->used;
      n++;
    }
    if (reserved != s->reserved || over != s->over || used != s->used || n != s->nresv ||
        occupied(s) > s->capacity)
      return -EFAULT;
  }
  for (size_t i = 1; i < t->nresv; i++)
    if (t->resv[i - 1].id >= t->resv[i].id)
      return -EFAULT;
  return 0;
}
