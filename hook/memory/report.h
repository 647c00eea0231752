/* The hook's side of the pod manager protocol (report.c): registration
 * and the reporter thread. */
#ifndef GMT_HOOK_REPORT_H
#define GMT_HOOK_REPORT_H

/* Registers this process with its pod manager on the first call (per
 * process: again in a forked child). Cheap after the first call. */
void gmt__report_ensure(void);

#endif
