/* Why a pod or a process waits, in words (see status_waits.h). */
#include "status_waits.h"

#include <stdint.h>
#include <stdio.h>

#include "gmt_counters.h"

void gmt_status_proc_wait(char *buf, size_t len, const Gmt__ProcessCounters *c)
{
  int n = snprintf(buf, len, "%.1f s", (double)c->token_wait_us / 1e6);
  if (c->token_waiting_us && n > 0 && (size_t)n < len)
    snprintf(buf + n, len - (size_t)n, ", now %.1f", (double)c->token_waiting_us / 1e6);
}

size_t gmt_status_pod_waits(char *buf, size_t len, const Gmt__PodStatus *pod)
{
  const Gmt__ProcessCounters *t = gmt_counters_of(pod->totals);
  /* The pod's wait now: the longest of its processes' (their totals add
   * the waits up, which says nothing of how long any has lasted). */
  uint64_t now = 0;
  for (size_t i = 0; i < pod->n_processes; i++) {
    uint64_t w = gmt_counters_of(pod->processes[i]->counters)->token_waiting_us;
    now = w > now ? w : now;
  }
  size_t off = 0;
  if (len)
    buf[0] = '\0';
  if (!t->token_wait_us && !now && !pod->limit_wait_us)
    return 0;
  int n = snprintf(buf, len, "for tokens %.1f s", (double)t->token_wait_us / 1e6);
  off = n > 0 && (size_t)n < len ? (size_t)n : off;
  if (now && off < len) {
    n = snprintf(buf + off, len - off, ", now %.1f s", (double)now / 1e6);
    off += n > 0 && (size_t)n < len - off ? (size_t)n : 0;
  }
  if (pod->limit_wait_us && off < len) {
    n = snprintf(buf + off, len - off, "; held back at its LIMIT %.1f s",
                 (double)pod->limit_wait_us / 1e6);
    off += n > 0 && (size_t)n < len - off ? (size_t)n : 0;
  }
  return off;
}
