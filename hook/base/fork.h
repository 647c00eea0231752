/* The hook's one fork handler, and the one order in which its locks are
 * taken, at fork and everywhere else.
 *
 * Each module registers its handlers under its rank below, from a
 * constructor (the table is then fixed before any thread can fork). The
 * registry installs a single pthread_atfork at load; at fork it runs the
 * modules' prepare handlers in rank order (each takes its module's locks)
 * and their parent and child handlers in reverse rank order. So the order
 * in which modules are first used, or in which their handlers were
 * registered, makes no difference.
 *
 * The lock order, outermost first. A thread holding one of these may take
 * only locks further down the list:
 *
 *   REPORT   report.c g_mu: serialises registration. Held while it calls
 *            reserve (gmt__reserve_set_limit) and channel
 *            (gmt__channels_start).
 *   TOKEN    token.c: one device's mutex (one at a time), then g_idle_mu.
 *            A device's mutex is held while it calls channel (the token
 *            RPC) and the driver (cuCtxSynchronize).
 *   POOLS    alloc.c g_pool_mu: held while it calls reserve
 *            (gmt__unreserve) and the driver (pool attributes).
 *   SWAP     swap.c, three locks in this order. gmt__swap_rw: held shared
 *            across a wrapper's real call that touches the GPU (copy.c's
 *            pin and stage calls included) and across a free of a swap
 *            allocation, exclusively across the driver calls of moves;
 *            never while waiting for a token or a Resident retry. Then
 *            g_res_mu: held across the Resident RPC (channel), never
 *            together with gmt__swap_rw. Then g_prep_mu: the state of the
 *            thread that prepares host copies, calls nothing while held
 *            (the pin runs without it). Then g_tab_mu: the table of swap
 *            allocations, calls nothing while held.
 *   RESERVE  reserve.c g_mu: calls nothing while held.
 *   CHANNEL  channel.c: each channel's mutex, in channel order (all three
 *            only at fork), held across its RPC.
 *   STATE    state.c g_mu: calls nothing while held.
 *   HOSTPIN  hostpin.c g_mu: calls nothing while held.
 *   HEAP     heap.c g_mu: the table of large host buffers and pin.c's
 *            state; taken inside malloc and free; calls nothing while
 *            held. Not taken at fork (the child forgets every buffer).
 *   PIN      pin.c: no lock of its own at fork (its Advise mutex is held
 *            across an RPC); the child owes nothing.
 *   PYRELEASE pyrelease.c g_mu: a request's counters; calls nothing while
 *            held (its thread runs Python without it).
 *   CALLLOG  calllog.c g_mu: the per-call logs' writer, held across its
 *            file writes; calls nothing else while held. The timed calls
 *            themselves take no lock.
 *   COUNTERS counters.c: no lock.
 *
 * Below all of them come the driver's own locks and libc's.
 *
 * At fork the REPORT, RESERVE, CHANNEL, STATE, HOSTPIN, PYRELEASE and CALLLOG locks, and swap.c's
 * g_res_mu, g_prep_mu and g_tab_mu, are taken (a fork
 * waits for a registration or an RPC under way to end). The TOKEN and POOLS
 * locks and gmt__swap_rw are not: they are held across driver calls, and the driver may take
 * its own locks in its fork handler before ours run, so taking them there
 * could wait forever on a thread that waits for the driver. Their modules
 * only reset their state in the child, which does not need it quiescent.
 *
 * Every child starts clean: no registration, no connection, no allocation,
 * no token, no launch counted; it registers itself at its next CUDA call. */
#ifndef GMT_HOOK_FORK_H
#define GMT_HOOK_FORK_H

enum {
  GMT_LOCK_REPORT,
  GMT_LOCK_TOKEN,
  GMT_LOCK_POOLS,
  GMT_LOCK_SWAP,
  GMT_LOCK_RESERVE,
  GMT_LOCK_CHANNEL,
  GMT_LOCK_STATE,
  GMT_LOCK_STAGE,
  GMT_LOCK_HOSTPIN,
  GMT_LOCK_HEAP,
  GMT_LOCK_PIN,
  GMT_LOCK_PYRELEASE,
  GMT_LOCK_CALLLOG,
  GMT_LOCK_COUNTERS,
  GMT_LOCK_RANKS
};

/* A module's fork handlers; any may be NULL. prepare takes the module's
 * locks, parent releases them, child resets the module's state (its locks
 * included) in the new process. */
typedef struct {
  void (*prepare)(void);
  void (*parent)(void);
  void (*child)(void);
} gmt_fork_ops_t;

/* Registers ops under rank (one module per rank). Call it from a
 * constructor: the table is read without a lock at fork. */
void gmt__fork_register(int rank, const gmt_fork_ops_t *ops);

#endif
