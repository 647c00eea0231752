/* Waits with a bound, for what must not hang on a peer or on nng: a
 * deadline on CLOCK_MONOTONIC, condition variables that wait on it, and
 * closing an nng socket that stops waiting at the deadline. For gmtwire
 * (client.c, server.c); the hook's timed waits (hook/base/thread.c) take their
 * deadline from here too. */
#ifndef GMT_BOUNDED_H
#define GMT_BOUNDED_H

#include <pthread.h>
#include <time.h>

#include <nng/nng.h>

/* ms from now on CLOCK_MONOTONIC: a step of the wall clock neither cuts a
 * bound short nor stretches it. */
struct timespec gmt__deadline_in(int ms);

/* A condition variable whose pthread_cond_timedwait() counts on
 * CLOCK_MONOTONIC, for deadlines from gmt__deadline_in(). */
void gmt__cond_init_monotonic(pthread_cond_t *cv);

/* nng_close(sock), waiting for it no later than until: 0 once closed, or
 * -ETIMEDOUT with the close still going on a thread of its own (nng 1.5's
 * close can wait for ever on a connection it never reaps). what names the
 * socket in the log line said then. */
int gmt__close_until(nng_socket sock, const struct timespec *until, const char *what);

#endif
