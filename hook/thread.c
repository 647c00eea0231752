/* Background threads of the hook (see thread.h). */
#include "thread.h"

#include <pthread.h>
#include <signal.h>

int gmt__thread_start(void *(*fn)(void *))
{
  /* The new thread inherits this mask: block all, create, restore ours. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  pthread_t th;
  int rc = pthread_create(&th, &a, fn, NULL);
  pthread_attr_destroy(&a);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return -rc;
}
