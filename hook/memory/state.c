/* What this process holds on the devices: a table of live allocations
 * (address -> size, kind, device), the running totals, and the bounded
 * queue of allocation and free events not yet reported.
 *
 * One mutex guards it all and is held only for a few memory operations;
 * nothing here calls the driver or the network. The launch counter lives
 * apart (gmt__launches) so that launches take no lock at all. */
#include "state.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "counters.h"
#include "driver.h"
#include "fork.h"
#include "log.h"
#include "thread.h"

typedef struct {
  uint64_t address;
  uint64_t size;
  int32_t device;
  uint8_t kind;
  uint8_t ns;
  uint8_t used;
} slot_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;

/* The live allocations: open addressing, linear probing, deletion by
 * backward shift (no tombstones, so thousands of alloc/free cycles do not
 * slow lookups down), at most half full. */
static slot_t *g_slots;
static size_t g_cap; /* a power of two, or 0 before the first insert */
static size_t g_count;

static uint64_t g_memory_used, g_allocs, g_frees, g_dropped;
static _Atomic uint64_t g_calls; /* g_allocs + g_frees, read without g_mu */
static int g_dirty;

static gmt_hook_event_t g_ring[GMT_HOOK_EVENT_CAP];
static size_t g_head, g_len;

static size_t hash_key(int ns, uint64_t address)
{
  uint64_t x = address ^ ((uint64_t)ns << 61);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return (size_t)x;
}

static size_t find_slot(int ns, uint64_t address)
{
  size_t mask = g_cap - 1;
  for (size_t i = hash_key(ns, address) & mask;; i = (i + 1) & mask) {
    if (!g_slots[i].used || (g_slots[i].address == address && g_slots[i].ns == ns))
      return i;
  }
}

static int grow(void)
{
  size_t ncap = g_cap ? 2 * g_cap : 1024;
  slot_t *old = g_slots;
  size_t ocap = g_cap;
  slot_t *n = calloc(ncap, sizeof(*n));
  if (!n)
    return -ENOMEM;
  g_slots = n;
  g_cap = ncap;
  for (size_t i = 0; i < ocap; i++)
    if (old[i].used)
      g_slots[find_slot(old[i].ns, old[i].address)] = old[i];
  free(old);
  return 0;
}

static void remove_at(size_t i)
{
  size_t mask = g_cap - 1;
  g_slots[i].used = 0;
  /* Shift back every later entry of the run that would no longer be
   * found past the hole. */
  for (size_t j = (i + 1) & mask; g_slots[j].used; j = (j + 1) & mask) {
    size_t home = hash_key(g_slots[j].ns, g_slots[j].address) & mask;
    /* Entry j may move to i if its home is not cyclically within (i, j]. */
    int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!stays) {
      g_slots[i] = g_slots[j];
      g_slots[j].used = 0;
      i = j;
    }
  }
}

static void push_event(const gmt_hook_event_t *e)
{
  if (g_len == GMT_HOOK_EVENT_CAP) {
    /* The totals stay right; only the detail of the oldest is lost. */
    g_head = (g_head + 1) % GMT_HOOK_EVENT_CAP;
    g_len--;
    g_dropped++;
  }
  g_ring[(g_head + g_len) % GMT_HOOK_EVENT_CAP] = *e;
  g_len++;
}

static void changed(void)
{
  g_dirty = 1;
  pthread_cond_signal(&g_cond);
}

int gmt__state_alloc(int ns, uint64_t address, uint64_t size, int kind, int device,
                     gmt_hook_event_t *replaced)
{
  gmt_hook_event_t e = {
      .address = address, .size = size, .device = device, .kind = (uint8_t)kind, .free = 0};
  int was_live = 0;
  pthread_mutex_lock(&g_mu);
  if ((g_count + 1) * 2 > g_cap && grow() < 0) {
    pthread_mutex_unlock(&g_mu);
    GMT_HOOK_DEBUG("out of memory recording an allocation of %llu bytes", (unsigned long long)size);
    return 0;
  }
  size_t i = find_slot(ns, address);
  if (g_slots[i].used) {
    /* The driver handed out an address we think is live: we missed its
     * free (a route we do not see). The new allocation replaces it. */
    g_memory_used -= g_slots[i].size;
    if (replaced)
      *replaced = (gmt_hook_event_t){.address = address,
                                     .size = g_slots[i].size,
                                     .device = g_slots[i].device,
                                     .kind = g_slots[i].kind,
                                     .free = 1};
    was_live = 1;
  } else {
    g_count++;
  }
  g_slots[i] = (slot_t){.address = address,
                        .size = size,
                        .device = device,
                        .kind = (uint8_t)kind,
                        .ns = (uint8_t)ns,
                        .used = 1};
  g_memory_used += size;
  g_allocs++;
  atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
  push_event(&e);
  changed();
  pthread_mutex_unlock(&g_mu);
  GMT_HOOK_DEBUG("alloc kind=%d device=%d address=0x%llx size=%llu", kind, device,
                 (unsigned long long)address, (unsigned long long)size);
  return was_live;
}

int gmt__state_free(int ns, uint64_t address, gmt_hook_event_t *freed)
{
  pthread_mutex_lock(&g_mu);
  if (!g_cap) {
    pthread_mutex_unlock(&g_mu);
    return 0;
  }
  size_t i = find_slot(ns, address);
  if (!g_slots[i].used) {
    pthread_mutex_unlock(&g_mu);
    return 0;
  }
  gmt_hook_event_t e = {.address = address,
                        .size = g_slots[i].size,
                        .device = g_slots[i].device,
                        .kind = g_slots[i].kind,
                        .free = 1};
  g_memory_used -= g_slots[i].size;
  g_frees++;
  atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
  g_count--;
  remove_at(i);
  push_event(&e);
  changed();
  pthread_mutex_unlock(&g_mu);
  if (freed)
    *freed = e;
  GMT_HOOK_DEBUG("free kind=%d address=0x%llx size=%llu", e.kind, (unsigned long long)address,
                 (unsigned long long)e.size);
  return 1;
}

uint64_t gmt__state_calls(void)
{
  return atomic_load_explicit(&g_calls, memory_order_relaxed);
}

static void totals_locked(gmt_hook_totals_t *t)
{
  t->memory_used = g_memory_used;
  t->allocs = g_allocs;
  t->frees = g_frees;
  t->dropped = g_dropped;
  t->launches = atomic_load_explicit(&gmt__launches, memory_order_relaxed);
}

int gmt__state_wait_change(uint64_t last_launches, int poll_ms)
{
  pthread_mutex_lock(&g_mu);
  if (!g_dirty)
    gmt__cond_wait_ms(&g_cond, &g_mu, (uint64_t)poll_ms);
  int r = g_dirty || atomic_load_explicit(&gmt__launches, memory_order_relaxed) != last_launches;
  pthread_mutex_unlock(&g_mu);
  return r;
}

size_t gmt__state_take(gmt_hook_totals_t *t, gmt_hook_event_t *ev, size_t cap)
{
  pthread_mutex_lock(&g_mu);
  size_t n = g_len < cap ? g_len : cap;
  for (size_t i = 0; i < n; i++)
    ev[i] = g_ring[(g_head + i) % GMT_HOOK_EVENT_CAP];
  g_head = (g_head + n) % GMT_HOOK_EVENT_CAP;
  g_len -= n;
  g_dirty = g_len > 0;
  totals_locked(t);
  pthread_mutex_unlock(&g_mu);
  return n;
}

void gmt__state_untake(const gmt_hook_event_t *ev, size_t n)
{
  pthread_mutex_lock(&g_mu);
  /* Newest of the taken first, each ahead of the queue; when it is full
   * the rest are older than anything kept and are the ones to lose. */
  size_t i = n;
  while (i > 0 && g_len < GMT_HOOK_EVENT_CAP) {
    i--;
    g_head = (g_head + GMT_HOOK_EVENT_CAP - 1) % GMT_HOOK_EVENT_CAP;
    g_ring[g_head] = ev[i];
    g_len++;
  }
  g_dropped += i;
  /* Report again even without events: the totals have not gone out. */
  g_dirty = 1;
  pthread_mutex_unlock(&g_mu);
}

/* ---- fork and exit ---- */

static void state_prepare(void)
{
  pthread_mutex_lock(&g_mu);
}

static void state_parent(void)
{
  pthread_mutex_unlock(&g_mu);
}

static void state_child(void)
{
  /* The child holds none of its parent's allocations (device memory is not
   * inherited) and no thread waits on the condition variable. */
  free(g_slots);
  g_slots = NULL;
  g_cap = g_count = 0;
  g_memory_used = g_allocs = g_frees = g_dropped = 0;
  g_dirty = 0;
  g_head = g_len = 0;
  pthread_mutex_init(&g_mu, NULL);
  pthread_cond_init(&g_cond, NULL);
}

static const gmt_fork_ops_t g_fork_ops = {state_prepare, state_parent, state_child};

__attribute__((constructor)) static void state_register(void)
{
  gmt__fork_register(GMT_LOCK_STATE, &g_fork_ops);
}

/* With GMT_HOOK_DEBUG, what this process did, for checking by hand without
 * a pod manager. */
__attribute__((destructor)) static void state_exit(void)
{
  if (!gmt__debug || !gmt__driver_ready())
    return;
  gmt_hook_totals_t t;
  pthread_mutex_lock(&g_mu);
  totals_locked(&t);
  pthread_mutex_unlock(&g_mu);
  gmt__say("exit: memory_used=%llu launches=%llu allocs=%llu frees=%llu dropped=%llu",
           (unsigned long long)t.memory_used, (unsigned long long)t.launches,
           (unsigned long long)t.allocs, (unsigned long long)t.frees,
           (unsigned long long)t.dropped);
}
