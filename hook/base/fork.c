/* The fork registry (see fork.h): one pthread_atfork for the whole hook,
 * the modules' handlers run by rank. */
#include "fork.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static const gmt_fork_ops_t *g_ops[GMT_LOCK_RANKS];

void gmt__fork_register(int rank, const gmt_fork_ops_t *ops)
{
  if (rank < 0 || rank >= GMT_LOCK_RANKS || g_ops[rank]) {
    /* A programming error that would break the lock order silently. */
    fprintf(stderr, "gmt: fork rank %d registered twice or out of range\n", rank);
    abort();
  }
  g_ops[rank] = ops;
}

static void prepare_all(void)
{
  for (int r = 0; r < GMT_LOCK_RANKS; r++)
    if (g_ops[r] && g_ops[r]->prepare)
      g_ops[r]->prepare();
}

static void parent_all(void)
{
  for (int r = GMT_LOCK_RANKS - 1; r >= 0; r--)
    if (g_ops[r] && g_ops[r]->parent)
      g_ops[r]->parent();
}

static void child_all(void)
{
  for (int r = GMT_LOCK_RANKS - 1; r >= 0; r--)
    if (g_ops[r] && g_ops[r]->child)
      g_ops[r]->child();
}

/* At load, before any thread of the program can fork or use CUDA, so the
 * registration never races a fork. In a process that never touches CUDA
 * the handlers find nothing to do. */
__attribute__((constructor)) static void fork_install(void)
{
  pthread_atfork(prepare_all, parent_all, child_all);
}
