/* The hook's own threads (the reporter, the token's idle thread): part of
 * the base, it names no module. */
#ifndef GMT_HOOK_THREAD_H
#define GMT_HOOK_THREAD_H

/* Starts fn(NULL) on a detached thread that blocks every signal, so that
 * the program's handlers (a SIGUSR1, a SIGINT meant for the main thread)
 * never run on it. 0, or a negative errno. */
int gmt__thread_start(void *(*fn)(void *));

#endif
