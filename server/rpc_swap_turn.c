/* mode=swap pods' turns in the scheduler (server/swap_turn.h): each token
 * decision plans a swap pod's turn from what it would bring back to the
 * card and the card's measured switch rate, and what it would move out
 * again and its own rate out (from its reports); each grant to a pod with
 * bytes to bring back starts timing a switch, which ends when the pod's
 * Resident calls have claimed room for those bytes and its reports say
 * they are on the card (a Resident is granted before the copy in: with
 * room free a switch of 5.2 GiB "took" 10 ms, the rate read 92 GB/s and
 * the next turns were planned 2-10x too short, H200); and status tells
 * the last turn's plan per pod and the rate per card. docs/tiers.md, "The turn's
 * length". Loop thread only. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_log.h"
#include "ledger.h"
#include "schd.h"
#include "swap.h"
#include "swap_turn.h"

#define MIB (1024.0 * 1024.0)

/* A pod's turns on one card: how many began with bytes to bring back,
 * the last such turn's plan, and the most the pod held there (its
 * Resident grants' total: a turn expects it to grow back to that, once
 * its peak is known: grown). */
typedef struct turnrec {
  char pod[GMT_POD_NAME_MAX + 1];
  int device;
  uint64_t turns;
  gmt_swap_turn_t plan;
  uint64_t peak;
  double grant_ms;     /* its last grant began (0: none since its processes came) */
  uint64_t grant_peak; /* its peak then */
  bool folded;         /* that grant's run is in steady_ms (or was not steady) */
  double steady_ms;    /* its grants' run since its peak last rose */
  gmt_swap_rate_t out; /* its moves out off the card (rate_out) */
  uint64_t out_bytes_seen, out_us_seen; /* its processes' totals counted in out */
} turnrec_t;

/* A card: its switches' rate and the one being timed. */
typedef struct card {
  gmt_swap_rate_t rate;
  bool timing;
  bool claimed; /* the pod's Resident calls have claimed the room */
  char pod[GMT_POD_NAME_MAX + 1];
  double t0;        /* the grant, ms */
  uint64_t pod0;    /* the pod's resident bytes then */
  uint64_t in;      /* what it had to bring back */
  uint64_t others0; /* every other process's */
  double last_ms;   /* the last switch measured */
  uint64_t last_bytes;
} card_t;

struct gmt_turns {
  card_t cards[GMT_SWAP_DEVICES];
  turnrec_t *recs;
  size_t n, cap;
};

int gmt__turns_init(gmt_schd_t *s)
{
  s->turns = calloc(1, sizeof *s->turns);
  return s->turns ? 0 : -ENOMEM;
}

void gmt__turns_close(gmt_schd_t *s)
{
  if (s->turns)
    free(s->turns->recs);
  free(s->turns);
  s->turns = NULL;
}

static turnrec_t *rec_of(struct gmt_turns *t, const char *pod, int device, bool make)
{
  for (size_t i = 0; i < t->n; i++)
    if (t->recs[i].device == device && !strcmp(t->recs[i].pod, pod))
      return &t->recs[i];
  if (!make)
    return NULL;
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 8;
    turnrec_t *r = realloc(t->recs, cap * sizeof *r);
    if (!r)
      return NULL;
    t->recs = r;
    t->cap = cap;
  }
  turnrec_t *r = &t->recs[t->n++];
  *r = (turnrec_t){.device = device};
  snprintf(r->pod, sizeof r->pod, "%s", pod);
  return r;
}

/* A switch is over when at most this part of what it brings back is
 * still reported off the card (an allocation may stay out). */
#define GMT_SWAP_SWITCH_LEFT 16

/* What the pod's processes last reported off device: host and disk. */
static uint64_t reported_off(const gmt_pod_t *pod, int device)
{
  uint64_t out = 0;
  for (size_t i = 0; i < pod->nprocs; i++) {
    const Gmt__ProcessCounters *c = &pod->procs[i].c;
    if (c->swap_device == device)
      out = gmt_bytes_add(out, gmt_bytes_add(c->swap_host, c->swap_disk));
  }
  return out;
}

static void switch_end(gmt_schd_t *s, card_t *c, int device);

/* The rate r's pod moves out at (bytes per second): its own, assumed
 * until measured (r NULL: no record yet). */
static double rate_out_bps(const turnrec_t *r)
{
  return r ? gmt_swap_rate_bps(&r->out) : GMT_SWAP_RATE_DEFAULT_BPS;
}

/* What the pod has to bring back to device with resident bytes there
 * (gmt_swap_turn_in): its processes' last reports and its reservations. */
static uint64_t moved_off(gmt_schd_t *s, const gmt_pod_t *pod, int device, uint64_t resident)
{
  return gmt_swap_turn_in(reported_off(pod, device),
                          gmt_ledger_pod_device_total(s->ledger, pod->cfg.name, device), resident);
}

/* A pod's peak is known (grown) once its grants have run this long in
 * all, each ended, without its peak rising. One grant ending without
 * growth said too little: cut short 0.6 ms in, a transformer job starting
 * was marked at a few MiB of its 10.75 GiB, and the two jobs were planned
 * no turns as they grew through each other's memory for 2.2 s (H200);
 * marked at a 199 ms turn from 40 MiB, one read a peak of 682 MiB and its
 * rival's next step took 15.5 s. A training step is 0.1-0.3 s. */
#define GMT_SWAP_GROWN_MS 500.0

/* Adds r's last grant's run to its steady time once the grant has ended
 * (last_run, the token's), if its peak did not rise in it. */
static void fold(turnrec_t *r, double last_run)
{
  if (r->folded || !(r->grant_ms > 0) || !(last_run >= r->grant_ms))
    return;
  r->folded = true;
  if (r->peak <= r->grant_peak)
    r->steady_ms += last_run - r->grant_ms;
}

/* Whether r's pod's peak is known: its grants ran GMT_SWAP_GROWN_MS since
 * it last rose. */
static bool grown(gmt_schd_t *s, const gmt__turns_tokens_t *tok, turnrec_t *r)
{
  fold(r, tok->last_run(s, r->pod, r->device));
  return r->steady_ms >= GMT_SWAP_GROWN_MS;
}

/* A pod that ran on a card this recently, or waits for its token, is a
 * rival of a pod planned a turn there: between two grants a busy pod is
 * neither holding nor waiting. */
#define GMT_SWAP_RIVAL_MS 1000.0

/* What other's processes will add to what device holds once other runs,
 * when it is a rival (waits for the token, holds it, or ran within
 * GMT_SWAP_RIVAL_MS): what it brings back, and what it grows by, to its
 * quota until its peak is known (grown) and to its peak after. Once the
 * first of three AdamW jobs at 2.0x an H200 had finished, the other two
 * each fitted beside what the card held: both came back, grew and pushed
 * each other out for 1.3 s before one was planned a turn. 0 for a pod
 * that is idle, gone, or not in mode=swap. */
static uint64_t rival_growth(gmt_schd_t *s, const gmt__turns_tokens_t *tok, const gmt_pod_t *other,
                             int device, double now)
{
  if (other->cfg.mode != GMT__MEM_MODE__MEM_SWAP || !other->nprocs)
    return 0;
  const char *name = other->cfg.name;
  if (!tok->waits(s, name, device) && !tok->holds(s, name, device) &&
      !(tok->last_run(s, name, device) >= now - GMT_SWAP_RIVAL_MS))
    return 0;
  uint64_t resident = gmt_swap_pod_device_total(s->swap, name, device);
  uint64_t in = moved_off(s, other, device, resident);
  turnrec_t *r = rec_of(s->turns, name, device, false);
  uint64_t to = r && grown(s, tok, r) ? r->peak : other->cfg.memory_limit;
  return gmt_bytes_add(in, gmt_swap_turn_grow(to, resident, in));
}

/* pod when it is a mode=swap pod, turns are kept and device is in range;
 * else NULL. */
static const gmt_pod_t *if_swap(gmt_schd_t *s, const gmt_pod_t *pod, int device)
{
  if (!s->turns || !s->swap || !s->ledger || !pod || pod->cfg.mode != GMT__MEM_MODE__MEM_SWAP ||
      device < 0 || device >= GMT_SWAP_DEVICES)
    return NULL;
  return pod;
}

/* The mode=swap pod named name (if_swap). */
static const gmt_pod_t *swap_pod(gmt_schd_t *s, const char *name, int device)
{
  return if_swap(s, gmt_pods_find(s->pods, name), device);
}

/* The pod's turn on device as things stand, or false when it has none
 * (not a mode=swap pod, no GPU space, a device out of range). */
static bool plan_now(gmt_schd_t *s, const gmt__turns_tokens_t *tok, const char *name, int device,
                     gmt_swap_turn_t *out)
{
  const gmt_pod_t *pod = swap_pod(s, name, device);
  uint64_t limit = 0, base = 0;
  if (!pod || gmt__tiers_gpu_space(s, device, &limit, &base, NULL, NULL) < 0)
    return false;
  uint64_t occupied = gmt_bytes_add(base, gmt_swap_device_total(s->swap, device));
  double now = gmt_now_ms_f();
  for (size_t i = 0; i < s->pods->npods; i++)
    if (&s->pods->pods[i] != pod)
      occupied = gmt_bytes_add(occupied, rival_growth(s, tok, &s->pods->pods[i], device, now));
  uint64_t resident = gmt_swap_pod_device_total(s->swap, name, device);
  uint64_t in = moved_off(s, pod, device, resident);
  turnrec_t *r = rec_of(s->turns, name, device, false);
  gmt_swap_rates_t rate = {gmt_swap_rate_bps(&s->turns->cards[device].rate), rate_out_bps(r)};
  double share = s->token_params.swap_move_share;
  *out = gmt_swap_turn_plan(in, gmt_swap_turn_grow(r ? r->peak : 0, resident, in), occupied, limit,
                            rate, share);
  /* Until its peak is known (grown), a pod may grow to its quota
   * (gmt_swap_turn_start): a job starting, or one pushed out before it
   * grew (once the first of three had finished, the other two were each
   * planned no turn from the little they had held, and both came back,
   * grew and pushed each other out again). */
  if (!(r && grown(s, tok, r)))
    *out =
        gmt_swap_turn_start(*out, resident, gmt_swap_turn_grow(pod->cfg.memory_limit, resident, in),
                            occupied, limit, rate, share);
  return true;
}

double gmt__turns_plan(gmt_schd_t *s, const gmt__turns_tokens_t *tok, const char *pod, int device)
{
  gmt_swap_turn_t plan;
  return plan_now(s, tok, pod, device, &plan) ? plan.turn_ms : 0;
}

/* When (gmt_now_ms_f) pod would begin to count as waking on device at its
 * next launch: once it ran there since its processes came, then nothing
 * for its idle-out (at least GMT_SWAP_RIVAL_MS); INFINITY for a pod that
 * never does (idle-out=0: one that takes turns whenever it is idle; off;
 * not mode=swap; never ran: a job starting). */
static double wakes_at(gmt_schd_t *s, const gmt__turns_tokens_t *tok, const gmt_pod_t *pod,
                       int device)
{
  if (!pod || pod->cfg.idle_out_ms <= 0)
    return INFINITY;
  turnrec_t *r = rec_of(s->turns, pod->cfg.name, device, false);
  if (!r || !(r->grant_ms > 0))
    return INFINITY;
  /* The token forgets a pod's runs after its window: its last grant's
   * start bounds its last run then. */
  double last = fmax(tok->last_run(s, pod->cfg.name, device), r->grant_ms);
  return last + fmax((double)pod->cfg.idle_out_ms, GMT_SWAP_RIVAL_MS);
}

bool gmt__turns_waking(gmt_schd_t *s, const gmt__turns_tokens_t *tok, const char *name, int device)
{
  const gmt_pod_t *pod = swap_pod(s, name, device);
  if (!(gmt_now_ms_f() >= wakes_at(s, tok, pod, device)))
    return false;
  return moved_off(s, pod, device, gmt_swap_pod_device_total(s->swap, name, device)) > 0;
}

bool gmt__turns_may_wake(gmt_schd_t *s, const gmt__turns_tokens_t *tok, const char *holder,
                         int device, double within_ms)
{
  double by = gmt_now_ms_f() + within_ms;
  for (size_t i = 0; s->pods && i < s->pods->npods; i++) {
    const gmt_pod_t *p = &s->pods->pods[i];
    if (!p->connected || p->nprocs == 0 || strcmp(p->cfg.name, holder) == 0 ||
        tok->waits(s, p->cfg.name, device))
      continue;
    /* Memory on the device, on the card or off it: what is on may be
     * moved out for the holder within the grant, then wake. */
    if (wakes_at(s, tok, if_swap(s, p, device), device) < by &&
        gmt_ledger_pod_device_total(s->ledger, p->cfg.name, device) > 0)
      return true;
  }
  return false;
}

void gmt__turns_granted(gmt_schd_t *s, const gmt__turns_tokens_t *tok, const char *pod, int device)
{
  gmt_swap_turn_t plan;
  if (!plan_now(s, tok, pod, device, &plan))
    return;
  turnrec_t *r = rec_of(s->turns, pod, device, true);
  if (r) { /* whether it grows in this grant (grown) */
    fold(r, tok->last_run(s, pod, device));
    r->grant_ms = gmt_now_ms_f();
    r->grant_peak = r->peak;
    r->folded = false;
  }
  card_t *c = &s->turns->cards[device];
  double out_gbs = rate_out_bps(r) / 1e9;
  /* Granted again while its memory is still coming (the grant ran out as
   * it waited): the same turn and the same switch, timed from its start. */
  if (c->timing && !strcmp(c->pod, pod) && plan.in_bytes > 0)
    return;
  c->timing = plan.in_bytes > 0;
  if (!c->timing) {
    if (plan.turn_ms > 0) /* to grow in (gmt_swap_turn_start): nothing to time */
      gmt_debug("swap: device %d: pod '%s' is granted a turn of %.0f ms to grow in (it holds "
                "%.1f MiB; the turn moves %.1f MiB out again, %.0f ms at %.2f GB/s out)",
                device, pod, plan.turn_ms,
                (double)gmt_swap_pod_device_total(s->swap, pod, device) / MIB,
                (double)plan.moved_bytes / MIB, plan.cost_ms, out_gbs);
    return;
  }
  if (r) {
    r->turns++;
    r->plan = plan;
  }
  snprintf(c->pod, sizeof c->pod, "%s", pod);
  c->claimed = false;
  c->t0 = gmt_now_ms_f();
  c->pod0 = gmt_swap_pod_device_total(s->swap, pod, device);
  c->in = plan.in_bytes;
  uint64_t all = gmt_swap_device_total(s->swap, device);
  c->others0 = all > c->pod0 ? all - c->pod0 : 0;
  gmt_debug("swap: device %d: pod '%s' is granted a turn of %.0f ms with %.1f MiB to bring back "
            "(the turn moves %.1f MiB, %.0f ms at %.2f GB/s in and %.2f GB/s out)",
            device, pod, plan.turn_ms, (double)plan.in_bytes / MIB, (double)plan.moved_bytes / MIB,
            plan.cost_ms, gmt_swap_rate_bps(&c->rate) / 1e9, out_gbs);
}

void gmt__turns_resident(gmt_schd_t *s, const char *pod, int device, uint64_t raised, bool restore)
{
  if (!s->turns || device < 0 || device >= GMT_SWAP_DEVICES)
    return;
  card_t *c = &s->turns->cards[device];
  uint64_t mine = gmt_swap_pod_device_total(s->swap, pod, device);
  turnrec_t *r = rec_of(s->turns, pod, device, true);
  if (r && mine > r->peak) {
    r->peak = mine;
    r->steady_ms = 0; /* it grows: its peak is not known yet (grown) */
  }
  if (!c->timing || strcmp(c->pod, pod) != 0) {
    /* Its memory came back before a grant (there was room when it
     * asked): a turn too, untimed. A restore says so itself; its reports
     * may not have told the move out yet. */
    const gmt_pod_t *p = gmt_pods_find(s->pods, pod);
    uint64_t before = mine > raised ? mine - raised : 0;
    if (r && p && (restore || moved_off(s, p, device, before) > 0))
      r->turns++;
    return;
  }
  if (mine < gmt_bytes_add(c->pod0, c->in))
    return; /* more to come */
  c->claimed = true;
  switch_end(s, c, device);
}

/* The pod's moves out off device since its last report, added to its
 * rate out: its processes' totals, once they moved enough to measure (a
 * report comes every 20 ms or more while a move runs). A process gone
 * takes its totals with it: counted from what is left. */
static void rate_out(gmt_schd_t *s, const gmt_pod_t *pod, int device)
{
  uint64_t bytes = 0, us = 0;
  for (size_t i = 0; i < pod->nprocs; i++) {
    const Gmt__ProcessCounters *c = &pod->procs[i].c;
    if (c->swap_device == device) {
      bytes = gmt_bytes_add(bytes, c->swap_out_bytes);
      us = gmt_bytes_add(us, c->swap_out_us);
    }
  }
  turnrec_t *r = rec_of(s->turns, pod->cfg.name, device, bytes > 0);
  if (!r)
    return;
  if (bytes < r->out_bytes_seen || us < r->out_us_seen) {
    r->out_bytes_seen = bytes;
    r->out_us_seen = us;
    return;
  }
  if (gmt_swap_rate_add(&r->out, bytes - r->out_bytes_seen, (double)(us - r->out_us_seen) / 1e3)) {
    r->out_bytes_seen = bytes;
    r->out_us_seen = us;
  }
}

void gmt__turns_reported(gmt_schd_t *s, const gmt_pod_t *pod)
{
  if (!s->turns)
    return;
  /* Its processes are gone: the next job of the pod has its own peak
   * (its rate out stays: the card and the host are the same). */
  for (size_t i = 0; !pod->nprocs && i < s->turns->n; i++)
    if (!strcmp(s->turns->recs[i].pod, pod->cfg.name)) {
      s->turns->recs[i].peak = 0;
      s->turns->recs[i].grant_ms = 0;
      s->turns->recs[i].steady_ms = 0;
    }
  for (int d = 0; d < GMT_SWAP_DEVICES; d++)
    rate_out(s, pod, d);
  for (int d = 0; d < GMT_SWAP_DEVICES; d++) {
    card_t *c = &s->turns->cards[d];
    if (c->timing && c->claimed && !strcmp(c->pod, pod->cfg.name))
      switch_end(s, c, d);
  }
}

/* The switch to c->pod on device ends once the pod's processes report no
 * more than GMT_SWAP_SWITCH_LEFT of what it had to bring back still off
 * the card (its Resident calls claimed the room: c->claimed). */
static void switch_end(gmt_schd_t *s, card_t *c, int device)
{
  const char *pod = c->pod;
  const gmt_pod_t *p = gmt_pods_find(s->pods, pod);
  if (!p || reported_off(p, device) > c->in / GMT_SWAP_SWITCH_LEFT)
    return; /* the copies in are still under way, or not reported yet */
  uint64_t mine = gmt_swap_pod_device_total(s->swap, pod, device);
  c->timing = false;
  uint64_t all = gmt_swap_device_total(s->swap, device);
  uint64_t others = all > mine ? all - mine : 0;
  /* What it brought back, not the new allocations that came meanwhile. */
  uint64_t in = c->in;
  uint64_t out = c->others0 > others ? c->others0 - others : 0;
  double ms = gmt_now_ms_f() - c->t0;
  if (!gmt_swap_rate_add(&c->rate, in + out, ms))
    return;
  c->last_ms = ms;
  c->last_bytes = in + out;
  gmt_debug("swap: device %d: the switch to pod '%s' moved %.1f MiB in and %.1f MiB out in %.1f "
            "ms; the card's rate is %.2f GB/s over %" PRIu64 " switches",
            device, pod, (double)in / MIB, (double)out / MIB, ms, gmt_swap_rate_bps(&c->rate) / 1e9,
            c->rate.switches);
}

void gmt__turns_pod_status(gmt_schd_t *s, const char *pod, Gmt__PodDeviceStatus *e)
{
  const turnrec_t *r = s->turns ? rec_of(s->turns, pod, e->device, false) : NULL;
  if (!r)
    return;
  e->swap_turns = r->turns;
  e->turn_ms = r->plan.turn_ms;
  e->turn_cost_ms = r->plan.cost_ms;
  e->turn_moves_bytes = r->plan.moved_bytes;
  e->out_rate = r->out.switches ? gmt_swap_rate_bps(&r->out) : 0;
}

void gmt__turns_space_status(gmt_schd_t *s, int device, Gmt__TierSpace *t)
{
  if (!s->turns || device < 0 || device >= GMT_SWAP_DEVICES)
    return;
  const card_t *c = &s->turns->cards[device];
  t->switches = c->rate.switches;
  t->move_rate = gmt_swap_rate_bps(&c->rate);
  t->last_switch_ms = c->last_ms;
  t->last_switch_bytes = c->last_bytes;
}

void gmt__turns_forget(gmt_schd_t *s)
{
  struct gmt_turns *t = s->turns;
  size_t k = 0;
  for (size_t i = 0; t && i < t->n; i++) {
    const gmt_pod_t *pod = gmt_pods_find(s->pods, t->recs[i].pod);
    if (pod && pod->cfg.mode == GMT__MEM_MODE__MEM_SWAP)
      t->recs[k++] = t->recs[i];
  }
  if (t)
    t->n = k;
}
