/* The hook's own threads (the reporter, the token's idle thread): part of
 * the base, it names no module. */
#ifndef GMT_HOOK_THREAD_H
#define GMT_HOOK_THREAD_H

#include <pthread.h>
#include <stdint.h>

/* Starts fn(NULL) on a detached thread that blocks every signal, so that
 * the program's handlers (a SIGUSR1, a SIGINT meant for the main thread)
 * never run on it, named name (at most 15 characters: what `top -H`, ps
 * and perf show, so that an operator can tell gmt's threads from the
 * program's). 0, or a negative errno. */
int gmt__thread_start(const char *name, void *(*fn)(void *));

/* Waits on cv (mu held) at most ms, measured on CLOCK_MONOTONIC whatever
 * clock cv was made with (a default condition variable's is
 * CLOCK_REALTIME, against which a monotonic deadline is long past). */
void gmt__cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t ms);

/* Locks mu, waiting at most ms on CLOCK_MONOTONIC: 0, or -ETIMEDOUT. */
int gmt__mutex_lock_ms(pthread_mutex_t *mu, uint64_t ms);

#endif
