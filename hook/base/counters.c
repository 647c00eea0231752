/* Counters that the hot paths bump without a lock (see counters.h). */
#include "counters.h"

#include "fork.h"

_Atomic uint64_t gmt__launches;
_Atomic uint64_t gmt__token_wait_ns;
_Atomic int64_t gmt__token_waiting_since_ns;
_Atomic int gmt__token_waiters;
_Atomic uint64_t gmt__bell_wait_ns;
_Atomic int gmt__token_held; /* reset in a child by token.c, with its grants */
_Atomic uint64_t gmt__token_cut_ms;

static void counters_child(void)
{
  atomic_store_explicit(&gmt__launches, 0, memory_order_relaxed);
  atomic_store_explicit(&gmt__token_wait_ns, 0, memory_order_relaxed);
  atomic_store_explicit(&gmt__token_waiting_since_ns, 0, memory_order_relaxed);
  atomic_store_explicit(&gmt__token_waiters, 0, memory_order_relaxed);
  atomic_store_explicit(&gmt__bell_wait_ns, 0, memory_order_relaxed);
  atomic_store_explicit(&gmt__token_cut_ms, 0, memory_order_relaxed);
}

static const gmt_fork_ops_t g_fork_ops = {.child = counters_child};

__attribute__((constructor)) static void counters_register(void)
{
  gmt__fork_register(GMT_LOCK_COUNTERS, &g_fork_ops);
}
