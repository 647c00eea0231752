/* The busy/idle rule of a grant (see busy.h). */
#include "busy.h"

static int64_t max64(int64_t a, int64_t b)
{
  return a > b ? a : b;
}

int gmt__busy_next(const gmt_busy_t *b, uint64_t launches, int64_t last_ns, int64_t now)
{
  int64_t act = max64(last_ns, b->grant_ns);
  /* Still launching: the work is not all queued yet. */
  if (now - act < (b->tick_ns ? b->tick_ns : GMT_BUSY_TICK_NS))
    return GMT_BUSY_WAIT;
  if (!b->drained_ns || b->drained_launches != launches)
    return GMT_BUSY_DRAIN;
  /* The process gets the idle time to launch again after its own
   * synchronize returns (the next step of a training loop). */
  int64_t idle = b->idle_ns ? b->idle_ns : GMT_BUSY_IDLE_NS;
  int64_t quiet = now - max64(act, b->drained_ns);
  /* In a swap turn only a long quiet is idle: the job ended, or left the
   * GPU for longer than a gap between two steps. */
  int in_turn = now < b->keep_until_ns && quiet < GMT_BUSY_TURN_IDLE_NS;
  return quiet >= idle && !in_turn ? GMT_BUSY_IDLE : GMT_BUSY_WAIT;
}

int64_t gmt__busy_sleep_ns(int latency, int alone, int launching)
{
  if (latency)
    return GMT_BUSY_LATENCY_TICK_NS;
  return alone && launching ? GMT_BUSY_ALONE_TICK_NS : GMT_BUSY_TICK_NS;
}

void gmt__busy_drained(gmt_busy_t *b, uint64_t before, uint64_t after, int64_t last_ns,
                       int64_t start_ns, int64_t end_ns)
{
  if (before != after) {
    b->drained_ns = 0; /* more work came while we waited */
    return;
  }
  int64_t end = end_ns;
  if (end_ns - start_ns < GMT_BUSY_WAITED_NS) {
    /* Done before we asked: no earlier than the last launch we saw. */
    end = last_ns < start_ns ? last_ns : start_ns;
    end = max64(end, b->grant_ns);
  }
  b->drained_ns = end;
  b->drained_launches = after;
}

void gmt__busy_grant(gmt_busy_t *b, int64_t now, double quota_ms, uint32_t idle_us)
{
  b->grant_ns = now;
  b->idle_ns = idle_us ? (int64_t)idle_us * 1000 : GMT_BUSY_IDLE_NS;
  b->tick_ns = idle_us ? GMT_BUSY_LATENCY_TICK_NS : GMT_BUSY_TICK_NS;
  b->expiry_ns = now + (int64_t)(quota_ms * 1e6);
  if (!b->busy_start_ns)
    b->busy_start_ns = now;
  b->drained_ns = 0;
  b->keep_until_ns = 0;
}

void gmt__busy_turn(gmt_busy_t *b, double turn_ms)
{
  int64_t until = b->grant_ns + (int64_t)(turn_ms * 1e6);
  b->keep_until_ns = turn_ms > 0 ? (until < b->expiry_ns ? until : b->expiry_ns) : 0;
  b->turn_bytes = 0;
}

void gmt__busy_held(gmt_busy_t *b, uint64_t bytes)
{
  if (!b->keep_until_ns)
    return;
  if (bytes > b->turn_bytes)
    b->turn_bytes = bytes;
  else if (bytes < b->turn_bytes / GMT_BUSY_TURN_LIGHT)
    b->keep_until_ns = 0;
}

gmt_busy_end_t gmt__busy_end(gmt_busy_t *b, int64_t now, int idle)
{
  gmt_busy_end_t e = {0, 0};
  /* Where the work ended: known when a wait found it done, else now (the
   * caller has just waited for it). */
  int64_t end = b->drained_ns ? b->drained_ns : now;
  if (end > b->expiry_ns)
    e.overuse_ms = (double)(end - b->expiry_ns) / 1e6;
  if (idle) {
    e.idle_ms = now > end ? (double)(now - end) / 1e6 : 0;
    /* A busy period that ended before its quota ran out is a natural
     * burst; one cut short by the quota says only that more was wanted
     * (a continuous load would otherwise be measured as one endless burst
     * at its first pause, and ask for the longest quota there is). */
    if (end <= b->expiry_ns && b->busy_start_ns && !b->busy_cut) {
      double burst = (double)(end - b->busy_start_ns) / 1e6;
      b->burst_ema_ms = b->burst_ema_ms > 0 ? (1 - GMT_BUSY_EMA_WEIGHT) * b->burst_ema_ms +
                                                  GMT_BUSY_EMA_WEIGHT * burst
                                            : burst;
    }
    b->busy_start_ns = 0;
    b->busy_cut = 0;
  } else {
    b->busy_cut = 1;
  }
  b->grant_ns = b->expiry_ns = 0;
  b->drained_ns = 0;
  return e;
}

int64_t gmt__busy_stay_ns(int64_t gap_ns, int64_t last_ns, int64_t max_ns)
{
  int64_t half = last_ns / 2;
  if (gap_ns < 0 || gap_ns >= max_ns)
    return half < max_ns ? half : max_ns;
  int64_t stay = max64(2 * gap_ns + GMT_BELL_NAP_NS, half);
  return stay < max_ns ? stay : max_ns;
}
