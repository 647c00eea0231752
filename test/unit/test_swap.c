/* mode=swap's resident bytes and eviction targets (server/swap.c): the
 * occupancy rule, Resident's answers, who is asked to move out and how
 * much, when targets end, and reclaim. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "swap.h"

#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)
#define NOW 100000u /* ms; any monotonic time */

/* Which pods hold the token (may not be asked), for may_ask. */
typedef struct {
  const char *running[4];
} world_t;

static bool may_ask(void *arg, const char *pod, int device)
{
  (void)device;
  const world_t *w = arg;
  for (int i = 0; i < 4 && w->running[i]; i++)
    if (strcmp(w->running[i], pod) == 0)
      return false;
  return true;
}

static world_t nobody_runs;

/* A 1 GiB space with base bytes of strict reservations in it, asked by a
 * pod whose quota does not bound it. */
static gmt_swap_space_t space(uint64_t base, world_t *w, uint64_t now)
{
  return (gmt_swap_space_t){.limit = GIB,
                            .base = base,
                            .quota = UINT64_MAX,
                            .now_ms = now,
                            .may_ask = may_ask,
                            .arg = w ? w : &nobody_runs};
}

static int setup(void **state)
{
  gmt_swap_t *sw;
  if (gmt_swap_new(&sw) < 0)
    return -1;
  *state = sw;
  return 0;
}

static int teardown(void **state)
{
  gmt_swap_free(*state);
  return 0;
}

/* Grants bytes to pid of pod on device 0 (asserting it was granted). */
static void have(gmt_swap_t *sw, const char *pod, uint32_t pid, uint64_t bytes)
{
  gmt_swap_space_t sp = space(0, NULL, NOW);
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, pod, pid, 0, bytes, &sp, &a), 0);
  assert_true(a.granted);
}

static void test_swap_raise_within_room_is_granted_and_counted_once(void **state)
{
  gmt_swap_t *sw = *state;
  gmt_swap_space_t sp = space(100 * MIB, NULL, NOW);
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, "b", 10, 0, 300 * MIB, &sp, &a), 0);
  assert_true(a.granted);
  assert_int_equal(a.reason, GMT_SWAP_ROOM);
  assert_int_equal(a.room, GIB - 400 * MIB);
  /* A total, not a change: asking for the same again adds nothing. */
  assert_int_equal(gmt_swap_request(sw, "b", 10, 0, 300 * MIB, &sp, &a), 0);
  assert_true(a.granted);
  assert_int_equal(a.room, GIB - 400 * MIB);
  assert_int_equal(gmt_swap_device_total(sw, 0), 300 * MIB);
  /* Raising replaces the total. */
  assert_int_equal(gmt_swap_request(sw, "b", 10, 0, 500 * MIB, &sp, &a), 0);
  assert_true(a.granted);
  assert_int_equal(gmt_swap_resident(sw, "b", 10, 0), 500 * MIB);
  assert_int_equal(gmt_swap_device_total(sw, 0), 500 * MIB);
  assert_int_equal(gmt_swap_device_total(sw, 1), 0);
}

static void test_swap_raise_that_fits_exactly_is_granted_one_byte_more_waits(void **state)
{
  gmt_swap_t *sw = *state;
  gmt_swap_space_t sp = space(GIB / 2, NULL, NOW);
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, "b", 10, 0, GIB / 2, &sp, &a), 0);
  assert_true(a.granted);
  assert_int_equal(a.room, 0);
  assert_int_equal(gmt_swap_request(sw, "c", 20, 0, 1, &sp, &a), 0);
  assert_false(a.granted);
  assert_int_equal(a.reason, GMT_SWAP_WAIT);
  assert_int_equal(a.shortfall, 1);
  assert_int_equal(gmt_swap_resident(sw, "c", 20, 0), 0);
}

static void test_swap_lowering_is_always_granted_even_over_the_limit(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "b", 10, 800 * MIB);
  /* Strict pods grew meanwhile: the space is over its limit. */
  gmt_swap_space_t sp = space(900 * MIB, NULL, NOW);
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, "b", 10, 0, 700 * MIB, &sp, &a), 0);
  assert_true(a.granted);
  assert_int_equal(a.reason, GMT_SWAP_ROOM);
  assert_int_equal(a.room, 0); /* never wraps below 0 */
  assert_int_equal(gmt_swap_request(sw, "b", 10, 0, 0, &sp, &a), 0);
  assert_true(a.granted);
  assert_int_equal(a.room, GIB - 900 * MIB);
  assert_int_equal(gmt_swap_device_total(sw, 0), 0);
  /* Lowering what it never had (0 to 0) is granted too, and counts nothing. */
  assert_int_equal(gmt_swap_request(sw, "z", 99, 3, 0, &sp, &a), 0);
  assert_true(a.granted);
  assert_int_equal(gmt_swap_device_total(sw, 3), 0);
}

static void test_swap_more_than_the_limit_alone_is_too_big(void **state)
{
  gmt_swap_t *sw = *state;
  gmt_swap_space_t sp = space(0, NULL, NOW);
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, "b", 10, 0, GIB + 1, &sp, &a), 0);
  assert_false(a.granted);
  assert_int_equal(a.reason, GMT_SWAP_TOO_BIG);
  assert_int_equal(a.retry_ms, 0);
  assert_int_equal(a.room, GIB);
  assert_int_equal(gmt_swap_request(sw, "b", 10, 0, UINT64_MAX, &sp, &a), 0);
  assert_int_equal(a.reason, GMT_SWAP_TOO_BIG);
  assert_int_equal(gmt_swap_device_total(sw, 0), 0);
}

/* The pod: a quota of 256 MiB, holding nothing, asks for 1 GiB
 * of a 2 GiB card where another pod's idle process has 512 MiB. Refused
 * at once (not WAIT), nobody asked, nothing counted. */
static void test_swap_raise_past_the_pods_quota_is_refused_and_asks_nobody(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "c", 3, 512 * MIB);
  gmt_swap_space_t sp = space(0, NULL, NOW);
  sp.limit = 2 * GIB;
  sp.quota = 256 * MIB;
  gmt_swap_answer_t a;
  for (uint64_t ask = GIB; ask <= 2 * GIB; ask += GIB) {
    assert_int_equal(gmt_swap_request_part(sw, "b", 2, 0, ask, MIB, &sp, &a), 0);
    assert_false(a.granted);
    assert_int_equal(a.reason, GMT_SWAP_QUOTA);
    assert_int_equal(a.retry_ms, 0);
    assert_int_equal(a.asked, 0);
    assert_int_equal(a.granted_total, 0);
    assert_int_equal(a.room, 2 * GIB - 512 * MIB);
  }
  assert_false(gmt_swap_target(sw, "c", 3, 0, NULL));
  assert_int_equal(gmt_swap_device_total(sw, 0), 512 * MIB);
  /* The quota fits exactly; one byte more does not. */
  assert_int_equal(gmt_swap_request(sw, "b", 2, 0, 256 * MIB + 1, &sp, &a), 0);
  assert_int_equal(a.reason, GMT_SWAP_QUOTA);
  assert_int_equal(gmt_swap_request(sw, "b", 2, 0, 256 * MIB, &sp, &a), 0);
  assert_true(a.granted);
  assert_int_equal(a.pod_total, 256 * MIB);
  /* Past the space is still TOO_BIG (the space's answer comes first). */
  assert_int_equal(gmt_swap_request(sw, "b", 2, 0, 2 * GIB + 1, &sp, &a), 0);
  assert_int_equal(a.reason, GMT_SWAP_TOO_BIG);
  assert_int_equal(gmt_swap_request(sw, "b", 2, 0, UINT64_MAX, &sp, &a), 0);
  assert_false(a.granted);
  assert_int_equal(gmt_swap_resident(sw, "b", 2, 0), 256 * MIB);
}

/* The quota is the pod's over every process and device: what the others
 * have counts, lowering is always granted and frees it for them. */
static void test_swap_quota_counts_every_process_and_device_of_the_pod(void **state)
{
  gmt_swap_t *sw = *state;
  gmt_swap_space_t sp = space(0, NULL, NOW);
  sp.quota = 300 * MIB;
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, "b", 1, 0, 200 * MIB, &sp, &a), 0);
  assert_true(a.granted);
  assert_int_equal(gmt_swap_request(sw, "b", 1, 1, 50 * MIB, &sp, &a), 0);
  assert_true(a.granted);
  assert_int_equal(a.pod_total, 250 * MIB);
  assert_int_equal(gmt_swap_request(sw, "b", 2, 0, 50 * MIB + 1, &sp, &a), 0);
  assert_int_equal(a.reason, GMT_SWAP_QUOTA);
  assert_int_equal(a.pod_total, 250 * MIB);
  /* Partial grants stay within it too: nothing more than 50 MiB. */
  assert_int_equal(gmt_swap_request_part(sw, "b", 2, 0, 100 * MIB, 1, &sp, &a), 0);
  assert_int_equal(a.reason, GMT_SWAP_QUOTA);
  assert_int_equal(gmt_swap_request(sw, "b", 2, 0, 50 * MIB, &sp, &a), 0);
  assert_true(a.granted);
  /* Another pod's bytes do not count against b's quota. */
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 300 * MIB, &sp, &a), 0);
  assert_true(a.granted);
  /* A lowering, even by a pod over its quota (a reload lowered it). */
  sp.quota = 100 * MIB;
  assert_int_equal(gmt_swap_request(sw, "b", 1, 0, 100 * MIB, &sp, &a), 0);
  assert_true(a.granted);
  assert_int_equal(a.pod_total, 200 * MIB);
  assert_int_equal(gmt_swap_request(sw, "b", 1, 0, 100 * MIB + 1, &sp, &a), 0);
  assert_int_equal(a.reason, GMT_SWAP_QUOTA);
  /* A quota of 0: nothing on the GPU. */
  sp.quota = 0;
  assert_int_equal(gmt_swap_request(sw, "d", 4, 0, 1, &sp, &a), 0);
  assert_int_equal(a.reason, GMT_SWAP_QUOTA);
}

static void test_swap_bad_requests_are_einval(void **state)
{
  gmt_swap_t *sw = *state;
  gmt_swap_space_t sp = space(0, NULL, NOW);
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, "b", 10, -1, 1, &sp, &a), -EINVAL);
  assert_int_equal(gmt_swap_request(sw, "b", 10, GMT_SWAP_DEVICES, 1, &sp, &a), -EINVAL);
  assert_int_equal(gmt_swap_request(sw, "b", 0, 0, 1, &sp, &a), -EINVAL);
  assert_int_equal(gmt_swap_request(sw, NULL, 10, 0, 1, &sp, &a), -EINVAL);
}

/* The shortfall is asked of the other pods' idle processes, the largest
 * first, and only as much as is missing. */
static void test_swap_wait_asks_the_largest_idle_process_for_the_shortfall(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "a", 1, 100 * MIB);
  have(sw, "b", 2, 600 * MIB);
  gmt_swap_space_t sp = space(100 * MIB, NULL, NOW);
  gmt_swap_answer_t a;
  /* 100 base + 700 resident + 400 = 1200: 176 MiB short (1 GiB = 1024). */
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 400 * MIB, &sp, &a), 0);
  assert_false(a.granted);
  assert_int_equal(a.reason, GMT_SWAP_WAIT);
  assert_true(a.retry_ms >= 20 && a.retry_ms <= 50);
  assert_int_equal(a.shortfall, 176 * MIB);
  assert_int_equal(a.asked, 1);
  assert_int_equal(a.room, GIB - 800 * MIB);
  uint64_t keep = 0;
  assert_true(gmt_swap_target(sw, "b", 2, 0, &keep));
  assert_int_equal(keep, 600 * MIB - 176 * MIB);
  assert_false(gmt_swap_target(sw, "a", 1, 0, NULL));
  assert_false(gmt_swap_target(sw, "c", 3, 0, NULL));
  /* Nothing moved yet: the resident bytes are as they were. */
  assert_int_equal(gmt_swap_device_total(sw, 0), 700 * MIB);
}

static void test_swap_shortfall_spread_over_victims_largest_first(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "a", 1, 300 * MIB);
  have(sw, "b", 2, 400 * MIB);
  have(sw, "b", 3, 200 * MIB);
  gmt_swap_space_t sp = space(0, NULL, NOW);
  gmt_swap_answer_t a;
  /* 900 + 700 = 1600: 576 short; b/2 gives its 400, a/1 176 of 300. */
  assert_int_equal(gmt_swap_request(sw, "c", 9, 0, 700 * MIB, &sp, &a), 0);
  assert_int_equal(a.shortfall, 576 * MIB);
  assert_int_equal(a.asked, 2);
  uint64_t keep = 1;
  assert_true(gmt_swap_target(sw, "b", 2, 0, &keep));
  assert_int_equal(keep, 0);
  assert_true(gmt_swap_target(sw, "a", 1, 0, &keep));
  assert_int_equal(keep, 124 * MIB);
  assert_false(gmt_swap_target(sw, "b", 3, 0, NULL));
}

/* The requester's own pod is never its victim, even when it alone could
 * make room. */
static void test_swap_requesters_own_pod_is_never_its_victim(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "c", 1, 900 * MIB);
  gmt_swap_space_t sp = space(0, NULL, NOW);
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, "c", 2, 0, 200 * MIB, &sp, &a), 0);
  assert_false(a.granted);
  assert_int_equal(a.reason, GMT_SWAP_WAIT);
  assert_int_equal(a.asked, 0);
  assert_false(gmt_swap_target(sw, "c", 1, 0, NULL));
}

static void test_swap_pod_holding_the_token_is_never_a_victim(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "a", 1, 500 * MIB);
  have(sw, "b", 2, 400 * MIB);
  world_t w = {{"a"}};
  gmt_swap_space_t sp = space(0, &w, NOW);
  gmt_swap_answer_t a;
  /* 900 + 300: 176 short. a is larger but runs: b is asked. */
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 300 * MIB, &sp, &a), 0);
  assert_int_equal(a.asked, 1);
  assert_false(gmt_swap_target(sw, "a", 1, 0, NULL));
  uint64_t keep = 0;
  assert_true(gmt_swap_target(sw, "b", 2, 0, &keep));
  assert_int_equal(keep, 400 * MIB - 176 * MIB);
}

/* When the idle processes cannot cover the shortfall together, none is
 * asked: moving them out would not let the requester in. */
static void test_swap_no_victim_is_asked_when_idle_ones_cannot_cover_it(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "a", 1, 500 * MIB);
  have(sw, "b", 2, 100 * MIB);
  world_t w = {{"a"}};
  gmt_swap_space_t sp = space(300 * MIB, &w, NOW);
  gmt_swap_answer_t a;
  /* 300 + 600 + 400 = 1300: 276 short; only b (100) may be asked. */
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 400 * MIB, &sp, &a), 0);
  assert_int_equal(a.reason, GMT_SWAP_WAIT);
  assert_int_equal(a.asked, 0);
  assert_false(gmt_swap_target(sw, "b", 2, 0, NULL));
  /* Strict reservations cannot be moved: with base alone over, nothing. */
  sp = space(GIB, NULL, NOW);
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 1, &sp, &a), 0);
  assert_int_equal(a.reason, GMT_SWAP_WAIT);
  assert_int_equal(a.asked, 0);
}

/* Asking again while targets are pending asks nothing more: targets are
 * idempotent, and what they will free counts. */
static void test_swap_asking_again_does_not_raise_the_targets(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "b", 2, 800 * MIB);
  gmt_swap_space_t sp = space(0, NULL, NOW);
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 400 * MIB, &sp, &a), 0);
  assert_int_equal(a.asked, 1);
  uint64_t keep = 0;
  assert_true(gmt_swap_target(sw, "b", 2, 0, &keep));
  assert_int_equal(keep, 624 * MIB);
  for (int i = 0; i < 3; i++) {
    sp.now_ms = NOW + 25 * (uint64_t)(i + 1);
    assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 400 * MIB, &sp, &a), 0);
    assert_int_equal(a.reason, GMT_SWAP_WAIT);
    assert_int_equal(a.asked, 0);
    assert_int_equal(a.coming, 176 * MIB);
    assert_true(gmt_swap_target(sw, "b", 2, 0, &keep));
    assert_int_equal(keep, 624 * MIB);
  }
  /* A larger ask lowers the pending target by the difference only. */
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 500 * MIB, &sp, &a), 0);
  assert_int_equal(a.asked, 1);
  assert_true(gmt_swap_target(sw, "b", 2, 0, &keep));
  assert_int_equal(keep, 524 * MIB);
}

/* The whole round: WAIT, the victim moves out to its target (its Resident
 * lowers, which is granted and meets the target), then the requester's
 * next ask is granted. */
static void test_swap_wait_then_granted_after_the_victim_lowers(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "b", 2, 800 * MIB);
  gmt_swap_space_t sp = space(0, NULL, NOW);
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 400 * MIB, &sp, &a), 0);
  assert_false(a.granted);
  uint64_t keep = 0;
  assert_true(gmt_swap_target(sw, "b", 2, 0, &keep));
  /* Half way: still pending. */
  assert_int_equal(gmt_swap_request(sw, "b", 2, 0, 700 * MIB, &sp, &a), 0);
  assert_true(a.granted);
  assert_true(gmt_swap_target(sw, "b", 2, 0, NULL));
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 400 * MIB, &sp, &a), 0);
  assert_false(a.granted);
  assert_int_equal(a.asked, 0);
  /* At the target: met. */
  assert_int_equal(gmt_swap_request(sw, "b", 2, 0, keep, &sp, &a), 0);
  assert_true(a.granted);
  assert_false(gmt_swap_target(sw, "b", 2, 0, NULL));
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 400 * MIB, &sp, &a), 0);
  assert_true(a.granted);
  assert_int_equal(a.room, 0);
  assert_int_equal(gmt_swap_device_total(sw, 0), GIB);
}

/* A victim that raises again (it runs) has its target ended. */
static void test_swap_raise_ends_the_requesters_own_target(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "b", 2, 800 * MIB);
  gmt_swap_space_t sp = space(0, NULL, NOW);
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 400 * MIB, &sp, &a), 0);
  assert_true(gmt_swap_target(sw, "b", 2, 0, NULL));
  assert_int_equal(gmt_swap_request(sw, "b", 2, 0, 900 * MIB, &sp, &a), 0);
  assert_false(gmt_swap_target(sw, "b", 2, 0, NULL));
}

typedef struct {
  int n;
  gmt_swap_drop_t why[8];
  uint32_t pid[8];
} drops_t;

static void on_drop(void *arg, const char *pod, uint32_t pid, int device, uint64_t keep,
                    uint64_t resident, gmt_swap_drop_t why)
{
  (void)pod, (void)device, (void)keep, (void)resident;
  drops_t *d = arg;
  if (d->n < 8) {
    d->why[d->n] = why;
    d->pid[d->n] = pid;
  }
  d->n++;
}

static void test_swap_targets_expire_after_their_bound(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "b", 2, 800 * MIB);
  gmt_swap_space_t sp = space(0, NULL, NOW);
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 400 * MIB, &sp, &a), 0);
  drops_t d = {0};
  assert_int_equal(
      gmt_swap_expire(sw, NOW + GMT_SWAP_TARGET_MS - 1, may_ask, &nobody_runs, on_drop, &d), 0);
  assert_true(gmt_swap_target(sw, "b", 2, 0, NULL));
  assert_int_equal(
      gmt_swap_expire(sw, NOW + GMT_SWAP_TARGET_MS, may_ask, &nobody_runs, on_drop, &d), 1);
  assert_int_equal(d.n, 1);
  assert_int_equal(d.why[0], GMT_SWAP_DROP_EXPIRED);
  assert_false(gmt_swap_target(sw, "b", 2, 0, NULL));
  /* The resident bytes stay: only the ask ended. */
  assert_int_equal(gmt_swap_resident(sw, "b", 2, 0), 800 * MIB);
}

static void test_swap_target_of_a_pod_that_takes_the_token_is_dropped(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "b", 2, 800 * MIB);
  gmt_swap_space_t sp = space(0, NULL, NOW);
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 400 * MIB, &sp, &a), 0);
  world_t w = {{"b"}};
  /* Its pending target frees nothing now: not counted as coming. */
  sp = space(0, &w, NOW + 10);
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 400 * MIB, &sp, &a), 0);
  assert_int_equal(a.coming, 0);
  drops_t d = {0};
  assert_int_equal(gmt_swap_expire(sw, NOW + 20, may_ask, &w, on_drop, &d), 1);
  assert_int_equal(d.why[0], GMT_SWAP_DROP_RUNNING);
  assert_false(gmt_swap_target(sw, "b", 2, 0, NULL));
}

static void test_swap_evicts_lists_one_keep_per_process_of_the_pod(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "b", 7, 300 * MIB);
  have(sw, "b", 5, 500 * MIB);
  have(sw, "a", 1, 100 * MIB);
  /* b/7 also has 50 MiB on device 1, without a target there: it stays. */
  gmt_swap_space_t sp1 = space(0, NULL, NOW);
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, "b", 7, 1, 50 * MIB, &sp1, &a), 0);
  gmt_swap_space_t sp = space(0, NULL, NOW);
  /* 900 + 824 = 1724: 700 short; b/5 gives 500, b/7 200 of 300. */
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 824 * MIB, &sp, &a), 0);
  assert_int_equal(a.asked, 2);
  gmt_swap_evict_t ev[4];
  assert_int_equal(gmt_swap_evicts(sw, "b", ev, 4), 2);
  assert_int_equal(ev[0].pid, 5);
  assert_int_equal(ev[0].keep_bytes, 0);
  assert_int_equal(ev[1].pid, 7);
  assert_int_equal(ev[1].keep_bytes, 100 * MIB + 50 * MIB);
  assert_int_equal(gmt_swap_evicts(sw, "a", ev, 4), 0);
  assert_int_equal(gmt_swap_evicts(sw, "c", ev, 4), 0);
  /* Counting only. */
  assert_int_equal(gmt_swap_evicts(sw, "b", NULL, 0), 2);
}

typedef struct {
  int n;
  uint64_t bytes;
  bool had_target;
} reclaims_t;

static void on_reclaim(void *arg, const char *pod, uint32_t pid, int device, uint64_t resident,
                       bool had_target)
{
  (void)pod, (void)pid, (void)device;
  reclaims_t *r = arg;
  r->n++;
  r->bytes += resident;
  r->had_target |= had_target;
}

static void test_swap_reclaim_forgets_exited_processes_and_their_targets(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "b", 2, 600 * MIB);
  have(sw, "b", 4, 100 * MIB);
  gmt_swap_space_t sp = space(0, NULL, NOW);
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 500 * MIB, &sp, &a), 0);
  assert_true(gmt_swap_target(sw, "b", 2, 0, NULL));
  /* Within its grace a process never listed stays. */
  uint32_t both[] = {2, 4};
  assert_int_equal(gmt_swap_retain(sw, "b", both, 2, NOW + 1, NULL, NULL), 0);
  uint32_t only4[] = {4};
  reclaims_t r = {0};
  assert_int_equal(gmt_swap_retain(sw, "b", only4, 1, NOW + 2, on_reclaim, &r), 600 * MIB);
  assert_int_equal(r.n, 1);
  assert_true(r.had_target);
  assert_false(gmt_swap_target(sw, "b", 2, 0, NULL));
  assert_int_equal(gmt_swap_device_total(sw, 0), 100 * MIB);
  /* Forgetting again changes nothing (no double count, no underflow). */
  assert_int_equal(gmt_swap_retain(sw, "b", only4, 1, NOW + 3, on_reclaim, &r), 0);
  assert_int_equal(gmt_swap_device_total(sw, 0), 100 * MIB);
  /* The room came back: the requester fits now. */
  assert_int_equal(gmt_swap_request(sw, "c", 3, 0, 500 * MIB, &sp, &a), 0);
  assert_true(a.granted);
}

static void test_swap_process_in_grace_is_kept_then_reclaimed(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "b", 2, 100 * MIB); /* born at NOW, never listed */
  assert_int_equal(gmt_swap_retain(sw, "b", NULL, 0, NOW + GMT_SWAP_GRACE_MS - 1, NULL, NULL), 0);
  assert_int_equal(gmt_swap_resident(sw, "b", 2, 0), 100 * MIB);
  assert_int_equal(gmt_swap_retain(sw, "b", NULL, 0, NOW + GMT_SWAP_GRACE_MS, NULL, NULL),
                   100 * MIB);
  assert_int_equal(gmt_swap_device_total(sw, 0), 0);
}

static bool keep_not_b(void *arg, const char *pod)
{
  (void)arg;
  return strcmp(pod, "b") != 0;
}

static void test_swap_retain_pods_forgets_pods_removed_or_out_of_swap(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "a", 1, 100 * MIB);
  have(sw, "b", 2, 200 * MIB);
  have(sw, "b", 3, 300 * MIB);
  reclaims_t r = {0};
  assert_int_equal(gmt_swap_retain_pods(sw, keep_not_b, on_reclaim, &r), 500 * MIB);
  assert_int_equal(r.n, 2);
  assert_int_equal(gmt_swap_device_total(sw, 0), 100 * MIB);
  assert_int_equal(gmt_swap_resident(sw, "b", 2, 0), 0);
}

static void test_swap_adopt_takes_reports_only_for_unknown_processes(void **state)
{
  gmt_swap_t *sw = *state;
  assert_int_equal(gmt_swap_adopt(sw, "b", 2, 0, 300 * MIB, UINT64_MAX, NOW), 300 * MIB);
  assert_int_equal(gmt_swap_device_total(sw, 0), 300 * MIB);
  /* Known: its own calls are the truth, a (maybe older) report is not. */
  assert_int_equal(gmt_swap_adopt(sw, "b", 2, 0, 900 * MIB, UINT64_MAX, NOW), 0);
  gmt_swap_space_t sp = space(0, NULL, NOW);
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, "b", 2, 0, 0, &sp, &a), 0);
  assert_int_equal(gmt_swap_adopt(sw, "b", 2, 0, 300 * MIB, UINT64_MAX, NOW), 0);
  assert_int_equal(gmt_swap_device_total(sw, 0), 0);
  assert_int_equal(gmt_swap_adopt(sw, "b", 5, -1, 1, UINT64_MAX, NOW), 0);
  /* An adopted process was listed (by the heartbeat it came in): once a
   * heartbeat no longer lists it, it has no grace. */
  assert_int_equal(gmt_swap_adopt(sw, "b", 6, 0, 10, UINT64_MAX, NOW), 10);
  assert_int_equal(gmt_swap_retain(sw, "b", NULL, 0, NOW, NULL, NULL), 10);
}

/* A report is believed as far as the pod may hold: no further than its
 * quota less what its processes have already. */
static void test_swap_adopt_stays_within_the_pods_quota(void **state)
{
  gmt_swap_t *sw = *state;
  assert_int_equal(gmt_swap_adopt(sw, "b", 2, 0, UINT64_MAX, 256 * MIB, NOW), 256 * MIB);
  assert_int_equal(gmt_swap_adopt(sw, "b", 3, 1, 1, 256 * MIB, NOW), 0);
  assert_int_equal(gmt_swap_adopt(sw, "c", 4, 0, 100 * MIB, 1 << 30, NOW), 100 * MIB);
  assert_int_equal(gmt_swap_adopt(sw, "c", 5, 1, 1 << 30, 1 << 30, NOW), (1 << 30) - 100 * MIB);
  assert_int_equal(gmt_swap_device_total(sw, 0), 356 * MIB);
  assert_int_equal(gmt_swap_resident(sw, "b", 3, 1), 0);
}

/* When each pod last ran: c never, a at 10, b at 50. */
static double last_run(void *arg, const char *pod, int device)
{
  (void)arg;
  (void)device;
  return strcmp(pod, "a") == 0 ? 10 : strcmp(pod, "b") == 0 ? 50 : -INFINITY;
}

static void test_swap_victims_least_recently_run_first(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "a", 1, 100 * MIB);
  have(sw, "b", 2, 300 * MIB);
  have(sw, "c", 3, 200 * MIB);
  /* d wants 674 MiB: 250 MiB short. c (never ran) gives all it has, then
   * a (ran at 10) the rest; b, the largest but the last to run, stays. */
  gmt_swap_space_t sp = space(0, NULL, NOW);
  sp.last_run = last_run;
  gmt_swap_answer_t a;
  assert_int_equal(gmt_swap_request(sw, "d", 4, 0, 674 * MIB, &sp, &a), 0);
  assert_int_equal(a.reason, GMT_SWAP_WAIT);
  assert_int_equal(a.shortfall, 250 * MIB);
  assert_int_equal(a.asked, 2);
  uint64_t keep;
  assert_true(gmt_swap_target(sw, "c", 3, 0, &keep));
  assert_int_equal(keep, 0);
  assert_true(gmt_swap_target(sw, "a", 1, 0, &keep));
  assert_int_equal(keep, 50 * MIB);
  assert_false(gmt_swap_target(sw, "b", 2, 0, &keep));
}

/* A restore that does not fit is granted in part once its smallest
 * allocation fits, while the victims' targets stand for the rest: the
 * two moves of a turn overlap. Without at_least, all or nothing. */
static void test_swap_a_restore_is_granted_in_part_as_room_comes(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "a", 1, 700 * MIB);
  have(sw, "b", 2, 100 * MIB);
  gmt_swap_space_t sp = space(0, NULL, NOW);
  gmt_swap_answer_t x;
  /* b wants 700 (600 more): 224 MiB more fit, its smallest piece is 250. */
  assert_int_equal(gmt_swap_request_part(sw, "b", 2, 0, 700 * MIB, 250 * MIB, &sp, &x), 0);
  assert_false(x.granted);
  assert_int_equal(x.reason, GMT_SWAP_WAIT);
  assert_int_equal(x.granted_total, 100 * MIB);
  assert_int_equal(x.asked, 1);
  uint64_t keep;
  assert_true(gmt_swap_target(sw, "a", 1, 0, &keep));
  assert_int_equal(keep, GIB - 700 * MIB);
  /* a has moved 200 out: 424 MiB more fit, b is counted at all of it. */
  assert_int_equal(gmt_swap_request(sw, "a", 1, 0, 500 * MIB, &sp, &x), 0);
  assert_int_equal(gmt_swap_request_part(sw, "b", 2, 0, 700 * MIB, 250 * MIB, &sp, &x), 0);
  assert_true(x.granted);
  assert_int_equal(x.reason, GMT_SWAP_PARTIAL);
  assert_int_equal(x.granted_total, GIB - 500 * MIB);
  assert_int_equal(gmt_swap_resident(sw, "b", 2, 0), GIB - 500 * MIB);
  assert_int_equal(gmt_swap_device_total(sw, 0), GIB);
  /* a's target stands for the rest. */
  assert_true(gmt_swap_target(sw, "a", 1, 0, &keep));
  assert_int_equal(keep, GIB - 700 * MIB);
  /* All or nothing without at_least: the same ask waits. */
  assert_int_equal(gmt_swap_request(sw, "b", 2, 0, 700 * MIB, &sp, &x), 0);
  assert_false(x.granted);
  assert_int_equal(x.granted_total, GIB - 500 * MIB);
  /* a moves the rest out: b gets all it asked. */
  assert_int_equal(gmt_swap_request(sw, "a", 1, 0, GIB - 700 * MIB, &sp, &x), 0);
  assert_false(gmt_swap_target(sw, "a", 1, 0, &keep));
  assert_int_equal(gmt_swap_request_part(sw, "b", 2, 0, 700 * MIB, 250 * MIB, &sp, &x), 0);
  assert_true(x.granted);
  assert_int_equal(x.reason, GMT_SWAP_ROOM);
  assert_int_equal(x.granted_total, 700 * MIB);
}

/* The thresholds of a 1 GiB space as bytes: cuCascade's 0.85 / 0.65. */
#define TRIGGER (GIB * 85 / 100)
#define STOP (GIB * 65 / 100)

static void test_swap_pressure_below_the_trigger_asks_nobody(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "a", 1, 400 * MIB);
  have(sw, "b", 2, 400 * MIB); /* 800 MiB: 78%, below 85% */
  gmt_swap_space_t sp = space(0, NULL, NOW);
  uint64_t excess = 1;
  assert_int_equal(gmt_swap_pressure(sw, NULL, 0, &sp, TRIGGER, STOP, &excess), 0);
  assert_int_equal(excess, 0);
  uint64_t keep;
  assert_false(gmt_swap_target(sw, "a", 1, 0, &keep));
  assert_false(gmt_swap_target(sw, "b", 2, 0, &keep));
}

/* Past the trigger, but every pod that may be on the card can hold its
 * whole quota at once: nothing need ever wait, so nobody moves. */
static void test_swap_pressure_asks_nobody_where_every_quota_fits(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "a", 1, 450 * MIB);
  have(sw, "b", 2, 450 * MIB); /* 900 MiB: 88%, past 85% */
  gmt_swap_space_t sp = space(0, NULL, NOW);
  sp.committed = GIB; /* two quotas of 512 MiB */
  uint64_t excess = 1, keep;
  assert_int_equal(gmt_swap_pressure(sw, NULL, 0, &sp, TRIGGER, STOP, &excess), 0);
  assert_false(gmt_swap_target(sw, "a", 1, 0, &keep));
  assert_false(gmt_swap_target(sw, "b", 2, 0, &keep));
  /* Quotas that could pass the card: the thresholds act. */
  sp.committed = GIB + 1;
  assert_int_equal(gmt_swap_pressure(sw, NULL, 0, &sp, TRIGGER, STOP, &excess), 1);
}

static void test_swap_pressure_asks_idle_ones_largest_first_down_to_stop(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "a", 1, 300 * MIB);
  have(sw, "b", 2, 500 * MIB);
  /* With 100 MiB of strict reservations: 900 MiB, 88%, past the trigger;
   * down to 65% (665.6 MiB) is 234.4 MiB, all from the largest. */
  gmt_swap_space_t sp = space(100 * MIB, NULL, NOW);
  uint64_t excess = 0, keep = 0;
  /* Sparing b (it just raised): a is asked for all of the excess. */
  gmt_swap_t *other;
  assert_int_equal(gmt_swap_new(&other), 0);
  have(other, "a", 1, 300 * MIB);
  have(other, "b", 2, 500 * MIB);
  assert_int_equal(gmt_swap_pressure(other, "b", 0, &sp, TRIGGER, STOP, &excess), 1);
  assert_true(gmt_swap_target(other, "a", 1, 0, &keep));
  assert_int_equal(keep, 300 * MIB - (900 * MIB - STOP));
  assert_false(gmt_swap_target(other, "b", 2, 0, &keep));
  gmt_swap_free(other);
  assert_int_equal(gmt_swap_pressure(sw, NULL, 0, &sp, TRIGGER, STOP, &excess), 1);
  assert_int_equal(excess, 900 * MIB - STOP);
  assert_true(gmt_swap_target(sw, "b", 2, 0, &keep));
  assert_int_equal(keep, 500 * MIB - (900 * MIB - STOP));
  assert_false(gmt_swap_target(sw, "a", 1, 0, &keep));
  /* The pending target counts: asking again asks nothing more. */
  assert_int_equal(gmt_swap_pressure(sw, NULL, 0, &sp, TRIGGER, STOP, &excess), 0);
  assert_int_equal(excess, 0);
}

static void test_swap_pressure_spares_running_pods_and_asks_what_idle_ones_have(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "a", 1, 100 * MIB);
  have(sw, "b", 2, 850 * MIB); /* 950 MiB, 93% */
  world_t w = {{"b"}};         /* b runs: only a may be asked */
  gmt_swap_space_t sp = space(0, &w, NOW);
  uint64_t excess = 0, keep = 1;
  assert_int_equal(gmt_swap_pressure(sw, NULL, 0, &sp, TRIGGER, STOP, &excess), 1);
  assert_int_equal(excess, 950 * MIB - STOP);
  /* a cannot cover it: it is asked for all it has, not nothing. */
  assert_true(gmt_swap_target(sw, "a", 1, 0, &keep));
  assert_int_equal(keep, 0);
  assert_false(gmt_swap_target(sw, "b", 2, 0, &keep));
  assert_int_equal(gmt_swap_pressure(sw, NULL, 1, &sp, TRIGGER, STOP, &excess), 0); /* empty */
  assert_int_equal(gmt_swap_pressure(sw, NULL, -1, &sp, TRIGGER, STOP, &excess), -EINVAL);
}

/* A running pod that must make others move out asks room for all its
 * quota lets it grow to, as far as they have it: growing 20 MiB at a
 * time, it moved them out 20 MiB at a time. Without a quota, or when it
 * does not run, the shortfall alone. */
static void test_swap_a_request_makes_room_for_what_the_pod_may_grow_to(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "a", 1, 900 * MIB);
  world_t b_runs = {{"b"}};
  gmt_swap_space_t sp = space(0, &b_runs, NOW);
  sp.quota = 600 * MIB;
  gmt_swap_answer_t ans;
  /* b wants 200 MiB: 76 short, and it may grow 400 more. */
  assert_int_equal(gmt_swap_request(sw, "b", 2, 0, 200 * MIB, &sp, &ans), 0);
  assert_int_equal(ans.reason, GMT_SWAP_WAIT);
  assert_int_equal(ans.shortfall, 200 * MIB - (GIB - 900 * MIB));
  uint64_t keep = 0;
  assert_true(gmt_swap_target(sw, "a", 1, 0, &keep));
  assert_int_equal(keep, GIB - 600 * MIB);
  /* Its next segment finds the room coming: nobody asked again. */
  assert_int_equal(gmt_swap_request(sw, "b", 2, 0, 220 * MIB, &sp, &ans), 0);
  assert_int_equal(ans.asked, 0);
  assert_true(gmt_swap_target(sw, "a", 1, 0, &keep));
  assert_int_equal(keep, GIB - 600 * MIB);
  /* More than the victims have: all they have. */
  gmt_swap_t *two;
  assert_int_equal(gmt_swap_new(&two), 0);
  have(two, "a", 1, 900 * MIB);
  sp.quota = 4 * GIB;
  assert_int_equal(gmt_swap_request(two, "b", 2, 0, 200 * MIB, &sp, &ans), 0);
  assert_true(gmt_swap_target(two, "a", 1, 0, &keep));
  assert_int_equal(keep, 0);
  /* No quota (UINT64_MAX): the shortfall only. */
  gmt_swap_t *three;
  assert_int_equal(gmt_swap_new(&three), 0);
  have(three, "a", 1, 900 * MIB);
  sp.quota = UINT64_MAX;
  assert_int_equal(gmt_swap_request(three, "b", 2, 0, 200 * MIB, &sp, &ans), 0);
  assert_true(gmt_swap_target(three, "a", 1, 0, &keep));
  assert_int_equal(keep, 900 * MIB - ans.shortfall);
  /* Not running (allocating before its first launch): the shortfall. */
  gmt_swap_t *four;
  assert_int_equal(gmt_swap_new(&four), 0);
  have(four, "a", 1, 900 * MIB);
  gmt_swap_space_t idle = space(0, NULL, NOW);
  idle.quota = 600 * MIB;
  assert_int_equal(gmt_swap_request(four, "b", 2, 0, 200 * MIB, &idle, &ans), 0);
  assert_true(gmt_swap_target(four, "a", 1, 0, &keep));
  assert_int_equal(keep, 900 * MIB - ans.shortfall);
  gmt_swap_free(two);
  gmt_swap_free(three);
  gmt_swap_free(four);
}

/* When each pod last ran, for pressure at NOW: a just now (between two
 * grants of its turn), b a while ago. */
static double ran_lately(void *arg, const char *pod, int device)
{
  (void)arg;
  (void)device;
  return strcmp(pod, "a") == 0 ? NOW - 20 : NOW - GMT_SWAP_PRESSURE_IDLE_MS;
}

/* Pressure, which nobody waits for, leaves a pod that ran within
 * GMT_SWAP_PRESSURE_IDLE_MS (it would come back at once); a request that
 * waits for the room still asks it. */
static void test_swap_pressure_leaves_a_pod_that_just_ran(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "a", 1, 850 * MIB);
  have(sw, "b", 2, 100 * MIB); /* 950 MiB, 93% */
  gmt_swap_space_t sp = space(0, NULL, NOW);
  sp.last_run = ran_lately;
  uint64_t excess = 0, keep = 1;
  assert_int_equal(gmt_swap_pressure(sw, NULL, 0, &sp, TRIGGER, STOP, &excess), 1);
  assert_true(gmt_swap_target(sw, "b", 2, 0, &keep));
  assert_int_equal(keep, 0);
  assert_false(gmt_swap_target(sw, "a", 1, 0, &keep));
  /* Only a left with bytes: pressure asks nobody. */
  gmt_swap_t *one;
  assert_int_equal(gmt_swap_new(&one), 0);
  have(one, "a", 1, 950 * MIB);
  assert_int_equal(gmt_swap_pressure(one, NULL, 0, &sp, TRIGGER, STOP, &excess), 0);
  assert_false(gmt_swap_target(one, "a", 1, 0, &keep));
  /* c needs the room now: a is asked. */
  gmt_swap_answer_t ans;
  assert_int_equal(gmt_swap_request(one, "c", 3, 0, 200 * MIB, &sp, &ans), 0);
  assert_int_equal(ans.reason, GMT_SWAP_WAIT);
  assert_true(gmt_swap_target(one, "a", 1, 0, &keep));
  gmt_swap_free(one);
}

/* Idle-out: a waits for the token (a turn), b and c do not; b's idle-out
 * is 30 s, c's off. */
static bool waits_a(void *arg, const char *pod, int device)
{
  (void)arg;
  (void)device;
  return strcmp(pod, "a") == 0;
}

static double idle_out_30s(void *arg, const char *pod)
{
  (void)arg;
  return strcmp(pod, "c") == 0 ? -1 : 30000;
}

/* b last ran at NOW - 29 s (nothing since). */
static double ran_29s_ago(void *arg, const char *pod, int device)
{
  (void)arg;
  (void)device;
  return strcmp(pod, "b") == 0 ? NOW - 29000 : -INFINITY;
}

/* A pod that waits for the GPU moves by turns; one that does not keeps
 * its memory until it has run nothing for its idle-out, counted from its
 * last run or from when its bytes last grew, whichever is later; off
 * keeps it for good. Requests and pressure alike. */
static void test_swap_idle_pod_moves_only_after_its_idle_out(void **state)
{
  gmt_swap_t *sw = *state;
  have(sw, "a", 1, 300 * MIB); /* raised at NOW */
  have(sw, "b", 2, 300 * MIB);
  have(sw, "c", 3, 300 * MIB);
  gmt_swap_space_t sp = space(0, NULL, NOW + 1000);
  sp.last_run = ran_29s_ago;
  sp.waits = waits_a;
  sp.idle_out_ms = idle_out_30s;
  gmt_swap_answer_t ans;
  uint64_t keep = 0;
  /* d is 476 MiB short: a alone (300) cannot cover it, b has not been
   * idle long enough (its bytes grew at NOW), c never moves: nobody. */
  assert_int_equal(gmt_swap_request(sw, "d", 4, 0, 600 * MIB, &sp, &ans), 0);
  assert_int_equal(ans.reason, GMT_SWAP_WAIT);
  assert_int_equal(ans.asked, 0);
  /* 30 s after b's bytes grew (and 31 s after it ran): b is idle out. */
  sp.now_ms = NOW + 30000;
  assert_int_equal(gmt_swap_request(sw, "d", 4, 0, 600 * MIB, &sp, &ans), 0);
  assert_int_equal(ans.asked, 2);
  assert_true(gmt_swap_target(sw, "a", 1, 0, &keep));
  assert_true(gmt_swap_target(sw, "b", 2, 0, &keep));
  assert_false(gmt_swap_target(sw, "c", 3, 0, &keep));

  /* Pressure keeps to the same rule: with b just raised again, only a. */
  gmt_swap_t *p2;
  assert_int_equal(gmt_swap_new(&p2), 0);
  have(p2, "a", 1, 400 * MIB);
  have(p2, "b", 2, 550 * MIB);
  sp.now_ms = NOW + GMT_SWAP_PRESSURE_IDLE_MS;
  uint64_t excess = 0;
  assert_int_equal(gmt_swap_pressure(p2, NULL, 0, &sp, TRIGGER, STOP, &excess), 1);
  assert_true(gmt_swap_target(p2, "a", 1, 0, &keep));
  assert_false(gmt_swap_target(p2, "b", 2, 0, &keep));
  gmt_swap_free(p2);
}

/* Prepared host copies: due only past the stop threshold and when what
 * may come could pass the limit; exactly at either is not past it. */
static void test_swap_prepare_due_past_stop_when_the_card_is_oversubscribed(void **state)
{
  (void)state;
  const uint64_t stop = 650, limit = 1000;
  assert_true(gmt_swap_prepare_due(700, stop, 2000, limit));
  assert_false(gmt_swap_prepare_due(650, stop, 2000, limit)); /* at the stop threshold */
  assert_false(gmt_swap_prepare_due(700, stop, 1000, limit)); /* everything fits */
  assert_true(gmt_swap_prepare_due(700, stop, 1001, limit));
  assert_false(gmt_swap_prepare_due(0, stop, UINT64_MAX, limit));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
      T(test_swap_raise_within_room_is_granted_and_counted_once),
      T(test_swap_idle_pod_moves_only_after_its_idle_out),
      cmocka_unit_test(test_swap_prepare_due_past_stop_when_the_card_is_oversubscribed),
      T(test_swap_raise_that_fits_exactly_is_granted_one_byte_more_waits),
      T(test_swap_lowering_is_always_granted_even_over_the_limit),
      T(test_swap_more_than_the_limit_alone_is_too_big),
      T(test_swap_raise_past_the_pods_quota_is_refused_and_asks_nobody),
      T(test_swap_quota_counts_every_process_and_device_of_the_pod),
      T(test_swap_bad_requests_are_einval),
      T(test_swap_wait_asks_the_largest_idle_process_for_the_shortfall),
      T(test_swap_shortfall_spread_over_victims_largest_first),
      T(test_swap_requesters_own_pod_is_never_its_victim),
      T(test_swap_pod_holding_the_token_is_never_a_victim),
      T(test_swap_no_victim_is_asked_when_idle_ones_cannot_cover_it),
      T(test_swap_asking_again_does_not_raise_the_targets),
      T(test_swap_wait_then_granted_after_the_victim_lowers),
      T(test_swap_raise_ends_the_requesters_own_target),
      T(test_swap_targets_expire_after_their_bound),
      T(test_swap_target_of_a_pod_that_takes_the_token_is_dropped),
      T(test_swap_evicts_lists_one_keep_per_process_of_the_pod),
      T(test_swap_reclaim_forgets_exited_processes_and_their_targets),
      T(test_swap_process_in_grace_is_kept_then_reclaimed),
      T(test_swap_retain_pods_forgets_pods_removed_or_out_of_swap),
      T(test_swap_adopt_takes_reports_only_for_unknown_processes),
      T(test_swap_adopt_stays_within_the_pods_quota),
      T(test_swap_victims_least_recently_run_first),
      T(test_swap_a_restore_is_granted_in_part_as_room_comes),
      T(test_swap_pressure_below_the_trigger_asks_nobody),
      T(test_swap_pressure_asks_nobody_where_every_quota_fits),
      T(test_swap_pressure_asks_idle_ones_largest_first_down_to_stop),
      T(test_swap_pressure_spares_running_pods_and_asks_what_idle_ones_have),
      T(test_swap_pressure_leaves_a_pod_that_just_ran),
      T(test_swap_a_request_makes_room_for_what_the_pod_may_grow_to),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
