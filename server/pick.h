/* Best-GPU selection (the CUDA Run Wrapper's, as meant; docs/devices.md,
 * "Picking a GPU"): how each GPU is scored from numbers sampled on it, which
 * GPUs a Pick may be given, and when the sampled numbers are stale. Pure:
 * no NVML, no loop, no wire, so that unit tests (test/unit/test_pick.c)
 * cover the order of the decision. rpc_pick.c gathers the numbers (NVML,
 * the ledger, the token queues, gmt-probe) and answers the calls.
 *
 * The score of a GPU, among the GPUs considered together, is
 *
 *   ( W_FREE  x free / most free of them
 *   + W_DELAY x (least delay + F) / (delay + F)
 *   + W_UTIL  x (1 - utilization)
 *   + W_WAIT  x 1 / (1 + tokens waiting + 1 if its token is held) )
 *   / the sum of the weights of the terms that are known,
 *
 * so 0 < score <= 1, higher is better. Free memory and the probe delay are
 * each normalized across the GPUs as in the paper, but a LONGER delay
 * LOWERS the score (the paper's formula raises it, which would send jobs to
 * the busiest GPU). F (GMT_PICK_DELAY_FLOOR_MS) keeps the jitter of idle
 * GPUs (microseconds) from deciding anything. A GPU the probe did not
 * finish on counts as the slowest: its delay term is 0. Without a probe
 * (off, or it failed) the delay term is left out for every GPU, as is
 * utilization where NVML does not give it. */
#ifndef GMT_SERVER_PICK_H
#define GMT_SERVER_PICK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define GMT_PICK_W_FREE 0.4
#define GMT_PICK_W_DELAY 0.4
#define GMT_PICK_W_UTIL 0.1
#define GMT_PICK_W_WAIT 0.1
#define GMT_PICK_DELAY_FLOOR_MS 0.1
/* At most this many GPUs in one Pick's answer. */
#define GMT_PICK_MAX_COUNT 64

/* One GPU's sampled numbers, and what gmt_pick_score makes of them. */
typedef struct gmt_pick_dev {
  int index;          /* the node's (NVML's) index */
  bool mem_known;     /* NVML gave total and free */
  uint64_t total;     /* bytes */
  uint64_t nvml_free; /* the card's free bytes (NVML) */
  uint64_t reserved;  /* what gmt's ledger holds reserved on it */
  double utilization; /* 0..1 (NVML); < 0 unknown */
  double probe_ms;    /* gmt-probe's delay there; < 0 not probed */
  bool probe_failed;  /* the probe did not finish there (timeout, CUDA error): the slowest */
  unsigned tokens_waiting;
  char holder[GMT_POD_NAME_MAX + 1]; /* the pod holding its token; "" none */
  /* Filled by gmt_pick_score: */
  uint64_t free; /* what counts as free (gmt_pick_free) */
  double score;  /* 0 < score <= 1; 0 not a candidate */
} gmt_pick_dev_t;

/* What counts as free on d: the smaller of what the card says is free and
 * what gmt's reservations leave of its total, so that memory reserved but
 * not allocated yet is not promised twice, and memory used outside gmt
 * (other programs, contexts) counts too. 0 when memory is unknown. */
uint64_t gmt_pick_free(const gmt_pick_dev_t *d);

/* Scores the n GPUs against each other (the formula above): fills each
 * one's free and score. */
void gmt_pick_score(gmt_pick_dev_t *devs, size_t n);

/* What a Pick asks for. */
typedef struct gmt_pick_ask {
  const int32_t *allowed; /* the pod's devices= (node indices); NULL or */
  size_t nallowed;        /* 0: every GPU */
  uint64_t bytes;         /* free memory needed on each GPU given (0: any) */
  unsigned count;         /* how many GPUs (0: one) */
} gmt_pick_ask_t;

/* The decision: the GPUs of devs[0..n) that ask allows are considered and
 * scored against each other (gmt_pick_score on them alone: others get
 * score 0); of those, the ones with fewer than ask->bytes free get score 0;
 * the rest are ranked by score, ties by lower index, and the best count
 * are written to chosen[] (indexes into devs, best first), *nchosen of
 * them. considered[i] (may be NULL) says whether devs[i] was considered.
 * Returns 0, or: -ENODEV no GPU to consider (none known, or the pod's
 * devices= names none of them); -EINVAL count above GMT_PICK_MAX_COUNT or
 * above the GPUs considered; -ENOSPC fewer than count have bytes free.
 * On failure why says it in words. */
int gmt_pick_choose(gmt_pick_dev_t *devs, size_t n, const gmt_pick_ask_t *ask, bool *considered,
                    size_t *chosen, size_t *nchosen, char *why, size_t whylen);

/* A GPU a Pick gave, until the job it was given to shows there: the
 * sampled numbers know nothing of a job that has not allocated yet, so
 * that jobs started together would all get the same GPU. */
typedef struct gmt_pick_pending {
  int index;         /* the node's index of the GPU given */
  uint64_t bytes;    /* the Pick's bytes (0: it did not say) */
  uint64_t until_ms; /* it counts until then (daemon.pick-hold) */
} gmt_pick_pending_t;

/* Adds the pending picks not past until_ms to the sampled numbers of the
 * GPUs they name: each counts as one more job waiting for its token, and
 * its bytes as reserved (so as not free). Call before gmt_pick_choose. */
void gmt_pick_apply_pending(gmt_pick_dev_t *devs, size_t n, const gmt_pick_pending_t *p, size_t np,
                            uint64_t now_ms);

/* The rule of the cache of sampled numbers: stale when there is none, when
 * it is OLDER than max_age_ms (0: always), or once it has served
 * max_requests Picks. (The paper has the comparisons the other way
 * round, which would keep old numbers forever and throw fresh ones away.) */
typedef struct gmt_pick_cache {
  bool valid;
  uint64_t taken_ms; /* when it was sampled */
  uint64_t served;   /* Picks answered from it */
} gmt_pick_cache_t;

bool gmt_pick_cache_stale(const gmt_pick_cache_t *c, uint64_t max_age_ms, uint64_t max_requests,
                          uint64_t now_ms);

#endif
