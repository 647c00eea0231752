/* Why a pod or a process waits, in words for people: `gmt status` and
 * `gmt top` say it the same way (the numbers are PodStatus.limit_wait_us
 * and ProcessCounters.token_wait_us / token_waiting_us, docs/operators.md).
 * Part of gmtstatusjson, so that a unit test can check the words. */
#ifndef GMT_STATUS_WAITS_H
#define GMT_STATUS_WAITS_H

#include <stddef.h>

#include "gmt.pb-c.h"

/* A process's token wait: "12.3 s", with ", now 0.4" while one goes on. */
void gmt_status_proc_wait(char *buf, size_t len, const Gmt__ProcessCounters *c);

/* A pod's waits: "for tokens 12.3 s, now 0.4 s; held back at its LIMIT
 * 2.1 s" (the token wait added over its processes, the longest of theirs
 * going on now, the time gmt-schd held it back at its LIMIT: part of the
 * first, though the processes' reports may lag it by a second), each part
 * only when not 0. Empty when it never waited; returns the length. */
size_t gmt_status_pod_waits(char *buf, size_t len, const Gmt__PodStatus *pod);

#endif
