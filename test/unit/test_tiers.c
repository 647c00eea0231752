/* Memory tiers (server/tiers.c): spaces and their thresholds, every
 * strategy, every limit policy, waiting requests (oldest first, granted on
 * release, ended exactly once), double release, no underflow, and what a
 * dead process or a removed pod gives back. Every test ends with
 * gmt_tiers_check(): the spaces' totals recounted from the reservations. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tiers.h"

#define NOW 100000u /* ms; any monotonic time */

typedef struct {
  gmt_tiers_t *t;
  /* What the waiters' callbacks saw, in order. */
  int n;
  uint64_t ids[64];
  int status[64];
  gmt_tier_resv_t resv[64];
  /* on_end_release: reservations a callback frees as soon as it gets them */
  bool release_in_callback;
} fixture_t;

static int setup(void **state)
{
  fixture_t *f = calloc(1, sizeof *f);
  if (!f || gmt_tiers_new(&f->t) < 0)
    return -1;
  *state = f;
  return 0;
}

static int teardown(void **state)
{
  fixture_t *f = *state;
  if (f->t)
    assert_int_equal(gmt_tiers_check(f->t), 0);
  gmt_tiers_free(f->t);
  free(f);
  return 0;
}

static void on_end(void *arg, int status, const gmt_tier_resv_t *resv)
{
  fixture_t *f = arg;
  assert_true(f->n < 64);
  f->ids[f->n] = resv->id;
  f->status[f->n] = status;
  f->resv[f->n] = *resv;
  f->n++;
  if (status == 0 && f->release_in_callback)
    assert_int_equal(gmt_tiers_release(f->t, resv->id), 0);
}

/* How many times the callbacks saw id end. */
static int ends_of(const fixture_t *f, uint64_t id)
{
  int n = 0;
  for (int i = 0; i < f->n; i++)
    n += f->ids[i] == id;
  return n;
}

static gmt_tier_request_t in_tier(gmt_tier_t tier, uint64_t bytes)
{
  return (gmt_tier_request_t){
      .strategy = GMT_TIER_ANY_IN_TIER, .tier = tier, .bytes = bytes, .pod = "a", .pid = 10};
}

static gmt_tier_request_t specific(gmt_tier_t tier, int index, uint64_t bytes)
{
  gmt_tier_request_t r = in_tier(tier, bytes);
  r.strategy = GMT_TIER_SPECIFIC;
  r.index = index;
  return r;
}

/* Reserves and returns the id, asserting it worked. */
static uint64_t take(gmt_tiers_t *t, gmt_tier_request_t req, gmt_tier_t tier, int index)
{
  gmt_tier_resv_t r;
  assert_int_equal(gmt_tiers_reserve(t, &req, NOW, &r), 0);
  assert_int_equal(r.tier, tier);
  assert_int_equal(r.index, index);
  assert_int_equal(r.bytes, req.bytes);
  assert_int_equal(r.used, 0);
  assert_true(r.id != 0);
  return r.id;
}

/* Queues req (wait_ms, callbacks to f) and returns its id. */
static uint64_t wait_for(fixture_t *f, gmt_tier_request_t req, uint64_t wait_ms)
{
  gmt_tier_resv_t r;
  req.wait_ms = wait_ms;
  req.cb = on_end;
  req.arg = f;
  assert_int_equal(gmt_tiers_reserve(f->t, &req, NOW, &r), -EINPROGRESS);
  assert_true(r.id != 0);
  return r.id;
}

/* GPU 0, 1000 bytes, all reserved by "a" 10: returns the reservation. */
static uint64_t full_gpu(fixture_t *f)
{
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 1000, 0, 0, 0), 0);
  return take(f->t, in_tier(GMT_TIER_GPU, 1000), GMT_TIER_GPU, 0);
}

static gmt_tier_space_info_t info(const gmt_tiers_t *t, size_t i)
{
  gmt_tier_space_info_t s;
  assert_int_equal(gmt_tiers_space_info(t, i, &s), 0);
  return s;
}

/* One space per tier, index 0 each, with the defaults. */
static void add_three(gmt_tiers_t *t, uint64_t gpu, uint64_t host, uint64_t disk)
{
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_GPU, 0, gpu, 0, 0, 0), 0);
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_HOST, 0, host, 0, 0, 0), 0);
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_DISK, 0, disk, 0, 0, 0), 0);
}

static void test_space_defaults_and_bad_spaces_are_refused(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 1000, 0, 0, 0), 0);
  gmt_tier_space_info_t s = info(f->t, 0);
  assert_int_equal(s.limit, 1000);
  assert_true(s.trigger == GMT_TIERS_TRIGGER && s.stop == GMT_TIERS_STOP);
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 5, 0, 0, 0), -EEXIST);
  /* The same index in another tier is another space. */
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_HOST, 0, 2000, 1500, 0.9, 0.5), 0);
  s = info(f->t, 1);
  assert_int_equal(s.tier, GMT_TIER_HOST);
  assert_int_equal(s.limit, 1500);
  assert_true(s.trigger == 0.9 && s.stop == 0.5);
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_DISK, 0, 0, 0, 0, 0), -EINVAL);
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_DISK, 0, 10, 11, 0, 0), -EINVAL);
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_DISK, -1, 10, 0, 0, 0), -EINVAL);
  assert_int_equal(gmt_tiers_add_space(f->t, (gmt_tier_t)3, 0, 10, 0, 0, 0), -EINVAL);
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_DISK, 0, 10, 0, 0.5, 0.5), -EINVAL);
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_DISK, 0, 10, 0, 0.5, 0.6), -EINVAL);
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_DISK, 0, 10, 0, 1.1, 0.6), -EINVAL);
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_DISK, 0, 10, 0, 0.5, -0.1), -EINVAL);
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_DISK, 0, 10, 0, NAN, 0.5), -EINVAL);
  assert_int_equal(gmt_tiers_nspaces(f->t), 2);
  assert_int_equal(gmt_tiers_space_info(f->t, 2, &s), -ENOENT);
  assert_string_equal(gmt_tier_name(GMT_TIER_DISK), "disk");
}

static void test_any_in_tier_takes_the_space_with_most_room(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 1000, 0, 0, 0), 0);
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 1, 2000, 0, 0, 0), 0);
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_HOST, 0, 9000, 0, 0, 0), 0);
  take(f->t, in_tier(GMT_TIER_GPU, 100), GMT_TIER_GPU, 1);  /* 1900 left vs 1000 */
  take(f->t, in_tier(GMT_TIER_GPU, 1000), GMT_TIER_GPU, 1); /* 900 left vs 1000 */
  take(f->t, in_tier(GMT_TIER_GPU, 50), GMT_TIER_GPU, 0);   /* now device 0 has more */
  /* 950 and 900 left: 950 fits nowhere but device 0, 951 nowhere at all,
   * though the tiers hold 1850 between them. */
  gmt_tier_request_t big = in_tier(GMT_TIER_GPU, 951);
  assert_int_equal(gmt_tiers_reserve(f->t, &big, NOW, NULL), -ENOSPC);
  take(f->t, in_tier(GMT_TIER_GPU, 950), GMT_TIER_GPU, 0);
  /* Never more than any space's limit: fails at once as never possible. */
  big.bytes = 2001;
  assert_int_equal(gmt_tiers_reserve(f->t, &big, NOW, NULL), -E2BIG);
  /* A tier without spaces. */
  gmt_tier_request_t disk = in_tier(GMT_TIER_DISK, 1);
  assert_int_equal(gmt_tiers_reserve(f->t, &disk, NOW, NULL), -ENODEV);
  assert_int_equal(info(f->t, 0).reserved, 1000);
  assert_int_equal(info(f->t, 1).reserved, 1100);
  assert_int_equal(info(f->t, 2).reserved, 0);
}

static void test_prefer_takes_the_preferred_space_when_it_fits(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 1000, 0, 0, 0), 0);
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 1, 2000, 0, 0, 0), 0);
  gmt_tier_request_t r = in_tier(GMT_TIER_GPU, 600);
  r.strategy = GMT_TIER_ANY_IN_TIER_PREFER;
  r.index = 0; /* fewer free bytes than device 1, still taken */
  take(f->t, r, GMT_TIER_GPU, 0);
  /* 400 left on device 0: the most room elsewhere instead. */
  take(f->t, r, GMT_TIER_GPU, 1);
  /* A preferred space that does not exist: as ANY_IN_TIER. */
  r.index = 7;
  r.bytes = 100;
  take(f->t, r, GMT_TIER_GPU, 1);
}

static void test_specific_takes_that_space_or_nothing(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_HOST, 0, 1000, 0, 0, 0), 0);
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_HOST, 1, 1000, 0, 0, 0), 0);
  take(f->t, specific(GMT_TIER_HOST, 1, 1000), GMT_TIER_HOST, 1);
  /* Full, while node 0 is empty: nothing. */
  gmt_tier_request_t r = specific(GMT_TIER_HOST, 1, 1);
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -ENOSPC);
  r = specific(GMT_TIER_HOST, 0, 1001);
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -E2BIG);
  r = specific(GMT_TIER_HOST, 2, 1);
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -ENODEV);
  r = specific(GMT_TIER_GPU, 0, 1);
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -ENODEV);
  assert_int_equal(info(f->t, 0).reserved, 0);
}

static void test_any_in_tiers_takes_the_first_tier_that_fits(void **state)
{
  fixture_t *f = *state;
  add_three(f->t, 1000, 4000, 9000);
  gmt_tier_request_t r = {.strategy = GMT_TIER_ANY_IN_TIERS,
                          .tiers = {GMT_TIER_GPU, GMT_TIER_HOST},
                          .ntiers = 2,
                          .bytes = 800,
                          .pod = "a",
                          .pid = 10};
  take(f->t, r, GMT_TIER_GPU, 0);
  take(f->t, r, GMT_TIER_HOST, 0); /* 200 left on the GPU */
  /* The order is the caller's, not the tiers'. */
  r.tiers[0] = GMT_TIER_DISK;
  r.tiers[1] = GMT_TIER_GPU;
  r.bytes = 100;
  take(f->t, r, GMT_TIER_DISK, 0);
  /* Too big for both listed tiers' limits (the host is not listed). */
  r.bytes = 9001;
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -E2BIG);
  r.ntiers = 0;
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -EINVAL);
}

static void test_to_downgrade_goes_to_a_lower_tier_nearest_first(void **state)
{
  fixture_t *f = *state;
  add_three(f->t, 1000, 500, 5000);
  gmt_tier_request_t r = in_tier(GMT_TIER_GPU, 400);
  r.strategy = GMT_TIER_TO_DOWNGRADE;
  take(f->t, r, GMT_TIER_HOST, 0); /* the GPU has room, but it is not lower */
  take(f->t, r, GMT_TIER_DISK, 0); /* 100 left on the host */
  r.tier = GMT_TIER_HOST;
  r.bytes = 50;
  take(f->t, r, GMT_TIER_DISK, 0); /* the host has room, but it is not lower */
  r.tier = GMT_TIER_DISK;
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -ENODEV);
  assert_int_equal(info(f->t, 0).reserved, 0);
}

static void test_to_upgrade_goes_to_a_higher_tier_nearest_first(void **state)
{
  fixture_t *f = *state;
  add_three(f->t, 1000, 500, 5000);
  gmt_tier_request_t r = in_tier(GMT_TIER_DISK, 400);
  r.strategy = GMT_TIER_TO_UPGRADE;
  take(f->t, r, GMT_TIER_HOST, 0);
  take(f->t, r, GMT_TIER_GPU, 0);
  r.tier = GMT_TIER_HOST;
  take(f->t, r, GMT_TIER_GPU, 0);
  r.tier = GMT_TIER_GPU;
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -ENODEV);
  /* 200 left on the GPU, 100 on the host: from the disk, 150 fits on
   * the GPU only, past the host. */
  r.tier = GMT_TIER_DISK;
  r.bytes = 150;
  take(f->t, r, GMT_TIER_GPU, 0);
  assert_int_equal(info(f->t, 2).reserved, 0);
}

static void test_reservation_limit_below_capacity_bounds_reservations(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 1000, 800, 0, 0), 0);
  take(f->t, in_tier(GMT_TIER_GPU, 500), GMT_TIER_GPU, 0);
  take(f->t, in_tier(GMT_TIER_GPU, 300), GMT_TIER_GPU, 0); /* exactly the limit */
  gmt_tier_request_t r = in_tier(GMT_TIER_GPU, 1);
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -ENOSPC);
  r.bytes = 801;
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -E2BIG);
  /* A huge request does not wrap any sum. */
  r.bytes = UINT64_MAX;
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -E2BIG);
  assert_int_equal(info(f->t, 0).reserved, 800);
  assert_int_equal(info(f->t, 0).nresv, 2);
}

/* Held bytes (a GPU space's device ledger) occupy the space like a
 * reservation: room, pressure and the view count them; less held serves
 * a waiter that now fits. */
static void test_held_bytes_take_room_and_make_pressure(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 1000, 0, 0, 0), 0);
  uint64_t room = 0;
  assert_int_equal(gmt_tiers_room(f->t, GMT_TIER_GPU, 1, &room), -ENOENT);
  assert_int_equal(gmt_tiers_set_held(f->t, GMT_TIER_HOST, 0, 5), -ENOENT);
  assert_int_equal(gmt_tiers_set_held(f->t, GMT_TIER_GPU, 0, 700), 0);
  assert_int_equal(gmt_tiers_room(f->t, GMT_TIER_GPU, 0, &room), 0);
  assert_int_equal(room, 300);
  assert_int_equal(info(f->t, 0).held, 700);
  assert_int_equal(info(f->t, 0).occupied, 700);
  assert_int_equal(gmt_tiers_pressure(f->t, GMT_TIER_GPU, 0), 0); /* below 850 */
  take(f->t, in_tier(GMT_TIER_GPU, 200), GMT_TIER_GPU, 0);
  assert_int_equal(gmt_tiers_pressure(f->t, GMT_TIER_GPU, 0), 900 - 650);
  uint64_t w = wait_for(f, in_tier(GMT_TIER_GPU, 400), 1000);
  assert_int_equal(ends_of(f, w), 0);
  assert_int_equal(gmt_tiers_set_held(f->t, GMT_TIER_GPU, 0, 500), 0); /* 300 room: no */
  assert_int_equal(ends_of(f, w), 0);
  assert_int_equal(gmt_tiers_set_held(f->t, GMT_TIER_GPU, 0, 0), 0); /* 800 room: granted */
  assert_int_equal(ends_of(f, w), 1);
  assert_int_equal(f->status[0], 0);
  /* Held past the capacity (a report adopted after a restart) leaves no
   * room and wraps nothing. */
  assert_int_equal(gmt_tiers_set_held(f->t, GMT_TIER_GPU, 0, UINT64_MAX), 0);
  assert_int_equal(gmt_tiers_room(f->t, GMT_TIER_GPU, 0, &room), 0);
  assert_int_equal(room, 0);
  assert_int_equal(info(f->t, 0).occupied, UINT64_MAX);
  assert_int_equal(gmt_tiers_set_held(f->t, GMT_TIER_GPU, 0, 0), 0);
}

static void test_fail_policy_refuses_use_past_the_reservation(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 1000, 0, 0, 0), 0);
  uint64_t id = take(f->t, in_tier(GMT_TIER_GPU, 100), GMT_TIER_GPU, 0);
  gmt_tier_resv_t r;
  assert_int_equal(gmt_tiers_use(f->t, id, 60, &r), 0);
  assert_int_equal(gmt_tiers_use(f->t, id, 40, &r), 0);
  assert_int_equal(r.used, 100);
  assert_int_equal(gmt_tiers_use(f->t, id, 1, &r), -ENOSPC);
  assert_int_equal(gmt_tiers_use(f->t, id, UINT64_MAX, &r), -ENOSPC);
  assert_int_equal(gmt_tiers_get(f->t, id, &r), 0);
  assert_int_equal(r.used, 100);
  assert_int_equal(r.bytes, 100);
  assert_int_equal(info(f->t, 0).used, 100);
  assert_int_equal(info(f->t, 0).occupied, 100);
  assert_int_equal(gmt_tiers_use(f->t, id + 1, 1, NULL), -ENOENT);
}

static void test_ignore_policy_passes_the_reservation_but_never_the_capacity(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 1000, 800, 0, 0), 0);
  gmt_tier_request_t req = in_tier(GMT_TIER_GPU, 500);
  req.policy = GMT_TIER_LIMIT_IGNORE;
  uint64_t id = take(f->t, req, GMT_TIER_GPU, 0);
  gmt_tier_resv_t r;
  assert_int_equal(gmt_tiers_use(f->t, id, 900, &r), 0); /* past the limit too */
  assert_int_equal(r.bytes, 500);
  assert_int_equal(r.used, 900);
  gmt_tier_space_info_t s = info(f->t, 0);
  assert_int_equal(s.reserved, 500);
  assert_int_equal(s.used, 900);
  assert_int_equal(s.occupied, 900);
  /* Over the limit: no room for anyone new. */
  gmt_tier_request_t one = in_tier(GMT_TIER_GPU, 1);
  assert_int_equal(gmt_tiers_reserve(f->t, &one, NOW, NULL), -ENOSPC);
  assert_int_equal(gmt_tiers_use(f->t, id, 101, &r), -ENOSPC);
  assert_int_equal(gmt_tiers_use(f->t, id, 100, &r), 0); /* exactly the capacity */
  assert_int_equal(info(f->t, 0).occupied, 1000);
  /* Giving back the over-use frees the space: 500 reserved, 300 used. */
  uint64_t taken = 0;
  assert_int_equal(gmt_tiers_unuse(f->t, id, 700, &taken), 0);
  assert_int_equal(taken, 700);
  s = info(f->t, 0);
  assert_int_equal(s.used, 300);
  assert_int_equal(s.occupied, 500);
  take(f->t, in_tier(GMT_TIER_GPU, 300), GMT_TIER_GPU, 0);
}

static void test_grow_policy_grows_to_a_quarter_more_than_used(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 1000, 0, 0, 0), 0);
  gmt_tier_request_t req = in_tier(GMT_TIER_GPU, 400);
  req.policy = GMT_TIER_LIMIT_GROW;
  uint64_t id = take(f->t, req, GMT_TIER_GPU, 0);
  gmt_tier_resv_t r;
  assert_int_equal(gmt_tiers_use(f->t, id, 400, &r), 0);
  assert_int_equal(r.bytes, 400); /* within: no growth */
  assert_int_equal(gmt_tiers_use(f->t, id, 200, &r), 0);
  assert_int_equal(r.used, 600);
  assert_int_equal(r.bytes, 750);
  assert_int_equal(info(f->t, 0).reserved, 750);
  /* 900 wants 1125: as far as the space has room. */
  assert_int_equal(gmt_tiers_use(f->t, id, 300, &r), 0);
  assert_int_equal(r.bytes, 1000);
  assert_int_equal(gmt_tiers_use(f->t, id, 101, &r), -ENOSPC);
  assert_int_equal(gmt_tiers_get(f->t, id, &r), 0);
  assert_int_equal(r.used, 900);
  assert_int_equal(r.bytes, 1000);
}

static void test_grow_policy_fails_when_not_even_the_use_fits(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 1000, 0, 0, 0), 0);
  gmt_tier_request_t req = in_tier(GMT_TIER_GPU, 400);
  req.policy = GMT_TIER_LIMIT_GROW;
  uint64_t id = take(f->t, req, GMT_TIER_GPU, 0);
  take(f->t, in_tier(GMT_TIER_GPU, 500), GMT_TIER_GPU, 0);
  /* 100 free: using 501 needs 101 more. */
  assert_int_equal(gmt_tiers_use(f->t, id, 501, NULL), -ENOSPC);
  gmt_tier_resv_t r;
  assert_int_equal(gmt_tiers_get(f->t, id, &r), 0);
  assert_int_equal(r.bytes, 400);
  assert_int_equal(r.used, 0);
  assert_int_equal(gmt_tiers_use(f->t, id, 500, &r), 0); /* needs exactly 100 */
  assert_int_equal(r.bytes, 500);
  assert_int_equal(info(f->t, 0).occupied, 1000);
}

static void test_release_twice_is_enoent_and_never_double_counted(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_HOST, 0, 1000, 0, 0, 0), 0);
  uint64_t a = take(f->t, in_tier(GMT_TIER_HOST, 300), GMT_TIER_HOST, 0);
  uint64_t b = take(f->t, in_tier(GMT_TIER_HOST, 200), GMT_TIER_HOST, 0);
  assert_int_equal(gmt_tiers_use(f->t, a, 300, NULL), 0);
  assert_int_equal(gmt_tiers_release(f->t, a), 0);
  assert_int_equal(gmt_tiers_release(f->t, a), -ENOENT);
  assert_int_equal(gmt_tiers_release(f->t, 0), -ENOENT);
  assert_int_equal(gmt_tiers_release(f->t, 999), -ENOENT);
  assert_int_equal(gmt_tiers_use(f->t, a, 1, NULL), -ENOENT);
  assert_int_equal(gmt_tiers_unuse(f->t, a, 1, NULL), -ENOENT);
  gmt_tier_space_info_t s = info(f->t, 0);
  assert_int_equal(s.reserved, 200);
  assert_int_equal(s.used, 0);
  assert_int_equal(s.nresv, 1);
  assert_int_equal(gmt_tiers_release(f->t, b), 0);
  s = info(f->t, 0);
  assert_int_equal(s.reserved, 0);
  assert_int_equal(s.occupied, 0);
  assert_int_equal(s.nresv, 0);
}

static void test_giving_back_more_than_used_stops_at_zero(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 1000, 0, 0, 0), 0);
  uint64_t id = take(f->t, in_tier(GMT_TIER_GPU, 100), GMT_TIER_GPU, 0);
  assert_int_equal(gmt_tiers_use(f->t, id, 40, NULL), 0);
  uint64_t taken = 1;
  assert_int_equal(gmt_tiers_unuse(f->t, id, 100, &taken), 0);
  assert_int_equal(taken, 40);
  assert_int_equal(gmt_tiers_unuse(f->t, id, UINT64_MAX, &taken), 0);
  assert_int_equal(taken, 0);
  gmt_tier_resv_t r;
  assert_int_equal(gmt_tiers_get(f->t, id, &r), 0);
  assert_int_equal(r.used, 0);
  gmt_tier_space_info_t s = info(f->t, 0);
  assert_int_equal(s.used, 0);
  assert_int_equal(s.reserved, 100);
  assert_int_equal(gmt_tiers_check(f->t), 0);
  assert_int_equal(gmt_tiers_release(f->t, id), 0);
  s = info(f->t, 0);
  assert_int_equal(s.reserved, 0);
  assert_int_equal(s.used, 0);
  assert_int_equal(s.occupied, 0);
  /* An owner that holds nothing gives back nothing. */
  assert_int_equal(gmt_tiers_release_owner(f->t, "a", 10), 0);
  assert_int_equal(gmt_tiers_release_pod(f->t, "zz"), 0);
  assert_int_equal(info(f->t, 0).occupied, 0);
}

static void test_pressure_is_what_brings_the_space_down_to_stop(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 1000, 0, 0, 0), 0);
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 1, 1000, 0, 0.5, 0.25), 0);
  uint64_t id = take(f->t, in_tier(GMT_TIER_GPU, 849), GMT_TIER_GPU, 0);
  assert_int_equal(gmt_tiers_pressure(f->t, GMT_TIER_GPU, 0), 0); /* below 850 */
  uint64_t one = take(f->t, specific(GMT_TIER_GPU, 0, 1), GMT_TIER_GPU, 0);
  assert_int_equal(gmt_tiers_pressure(f->t, GMT_TIER_GPU, 0), 200); /* 850 - 650 */
  assert_int_equal(info(f->t, 0).pressure, 200);
  assert_int_equal(gmt_tiers_release(f->t, one), 0);
  assert_int_equal(gmt_tiers_pressure(f->t, GMT_TIER_GPU, 0), 0);
  assert_int_equal(gmt_tiers_release(f->t, id), 0);
  /* Device 1's own thresholds; use past the reservation counts too. */
  gmt_tier_request_t req = specific(GMT_TIER_GPU, 1, 400);
  req.policy = GMT_TIER_LIMIT_IGNORE;
  id = take(f->t, req, GMT_TIER_GPU, 1);
  assert_int_equal(gmt_tiers_pressure(f->t, GMT_TIER_GPU, 1), 0);
  assert_int_equal(gmt_tiers_use(f->t, id, 1000, NULL), 0);
  assert_int_equal(gmt_tiers_pressure(f->t, GMT_TIER_GPU, 1), 750);
  assert_int_equal(gmt_tiers_pressure(f->t, GMT_TIER_GPU, 0), 0);
  assert_int_equal(gmt_tiers_pressure(f->t, GMT_TIER_DISK, 0), 0); /* no such space */
}

static void test_waiters_are_granted_on_release_oldest_first(void **state)
{
  fixture_t *f = *state;
  uint64_t a = full_gpu(f);
  uint64_t w1 = wait_for(f, in_tier(GMT_TIER_GPU, 600), 1000);
  uint64_t w2 = wait_for(f, in_tier(GMT_TIER_GPU, 300), 1000);
  uint64_t w3 = wait_for(f, in_tier(GMT_TIER_GPU, 500), 1000);
  assert_int_equal(gmt_tiers_nwaiting(f->t), 3);
  assert_int_equal(f->n, 0);
  assert_int_equal(gmt_tiers_release(f->t, a), 0);
  /* 600 then 300; 500 does not fit in the 100 left. */
  assert_int_equal(f->n, 2);
  assert_int_equal(f->ids[0], w1);
  assert_int_equal(f->status[0], 0);
  assert_int_equal(f->resv[0].bytes, 600);
  assert_int_equal(f->resv[0].tier, GMT_TIER_GPU);
  assert_int_equal(f->ids[1], w2);
  assert_int_equal(f->status[1], 0);
  assert_int_equal(gmt_tiers_nwaiting(f->t), 1);
  gmt_tier_resv_t r;
  assert_int_equal(gmt_tiers_get(f->t, w1, &r), 0); /* the id it waited under */
  assert_int_equal(r.bytes, 600);
  assert_int_equal(info(f->t, 0).reserved, 900);
  assert_int_equal(gmt_tiers_release(f->t, w1), 0);
  assert_int_equal(f->n, 3);
  assert_int_equal(f->ids[2], w3);
  assert_int_equal(f->status[2], 0);
  assert_int_equal(info(f->t, 0).reserved, 800);
  assert_int_equal(gmt_tiers_nwaiting(f->t), 0);
  /* Granted once: later releases call nothing. */
  assert_int_equal(gmt_tiers_release(f->t, w2), 0);
  assert_int_equal(gmt_tiers_release(f->t, w3), 0);
  assert_int_equal(f->n, 3);
}

static void test_waiter_that_does_not_fit_does_not_hold_back_younger_ones(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 1000, 0, 0, 0), 0);
  take(f->t, in_tier(GMT_TIER_GPU, 600), GMT_TIER_GPU, 0);
  uint64_t b = take(f->t, in_tier(GMT_TIER_GPU, 400), GMT_TIER_GPU, 0);
  uint64_t big = wait_for(f, in_tier(GMT_TIER_GPU, 800), 1000);
  uint64_t small = wait_for(f, in_tier(GMT_TIER_GPU, 300), 1000);
  assert_int_equal(gmt_tiers_release(f->t, b), 0);
  assert_int_equal(f->n, 1);
  assert_int_equal(f->ids[0], small);
  assert_int_equal(ends_of(f, big), 0);
  assert_int_equal(gmt_tiers_nwaiting(f->t), 1);
}

static void test_waiter_is_expired_exactly_once_at_its_deadline(void **state)
{
  fixture_t *f = *state;
  uint64_t a = full_gpu(f);
  uint64_t w1 = wait_for(f, in_tier(GMT_TIER_GPU, 100), 50);
  uint64_t w2 = wait_for(f, in_tier(GMT_TIER_GPU, 100), 200);
  uint64_t next = 0;
  assert_true(gmt_tiers_next_deadline(f->t, &next));
  assert_int_equal(next, NOW + 50);
  assert_int_equal(gmt_tiers_expire(f->t, NOW + 49), 0);
  assert_int_equal(f->n, 0);
  assert_int_equal(gmt_tiers_expire(f->t, NOW + 50), 1);
  assert_int_equal(f->n, 1);
  assert_int_equal(f->ids[0], w1);
  assert_int_equal(f->status[0], -ETIMEDOUT);
  assert_int_equal(gmt_tiers_expire(f->t, NOW + 60), 0);
  assert_true(gmt_tiers_next_deadline(f->t, &next));
  assert_int_equal(next, NOW + 200);
  /* The release grants the one still waiting, and never the expired one. */
  assert_int_equal(gmt_tiers_release(f->t, a), 0);
  assert_int_equal(f->n, 2);
  assert_int_equal(f->ids[1], w2);
  assert_int_equal(f->status[1], 0);
  assert_int_equal(gmt_tiers_expire(f->t, UINT64_MAX), 0);
  assert_int_equal(ends_of(f, w1), 1);
  assert_int_equal(ends_of(f, w2), 1);
  assert_false(gmt_tiers_next_deadline(f->t, &next));
  assert_int_equal(gmt_tiers_get(f->t, w1, NULL), -ENOENT);
  assert_int_equal(info(f->t, 0).reserved, 100);
}

static void test_request_that_can_never_fit_fails_at_once(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 1000, 900, 0, 0), 0);
  gmt_tier_request_t r = in_tier(GMT_TIER_GPU, 901); /* under the capacity, over the limit */
  r.wait_ms = 1000;
  r.cb = on_end;
  r.arg = f;
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -E2BIG);
  r = specific(GMT_TIER_GPU, 3, 1);
  r.wait_ms = 1000;
  r.cb = on_end;
  r.arg = f;
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -ENODEV);
  assert_int_equal(gmt_tiers_nwaiting(f->t), 0);
  /* Without a wait or a callback a request that could fit later does not
   * wait either. */
  take(f->t, in_tier(GMT_TIER_GPU, 900), GMT_TIER_GPU, 0);
  r = in_tier(GMT_TIER_GPU, 1);
  r.cb = on_end;
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -ENOSPC);
  r.cb = NULL;
  r.wait_ms = 10;
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -ENOSPC);
  assert_int_equal(gmt_tiers_nwaiting(f->t), 0);
  assert_int_equal(f->n, 0);
}

static void on_count(void *arg, int status, const gmt_tier_resv_t *resv)
{
  (void)resv;
  assert_int_equal(status, -ETIMEDOUT);
  (*(int *)arg)++;
}

static void test_waiters_are_bounded(void **state)
{
  fixture_t *f = *state;
  full_gpu(f);
  int ends = 0;
  gmt_tier_request_t r = in_tier(GMT_TIER_GPU, 1);
  r.wait_ms = 10;
  r.cb = on_count;
  r.arg = &ends;
  for (int i = 0; i < GMT_TIERS_MAX_WAITERS; i++)
    assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -EINPROGRESS);
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -EAGAIN);
  assert_int_equal(gmt_tiers_nwaiting(f->t), GMT_TIERS_MAX_WAITERS);
  assert_int_equal(gmt_tiers_expire(f->t, NOW + 10), GMT_TIERS_MAX_WAITERS);
  assert_int_equal(ends, GMT_TIERS_MAX_WAITERS);
  assert_int_equal(gmt_tiers_nwaiting(f->t), 0);
}

static void test_cancel_and_free_end_waiters_exactly_once(void **state)
{
  fixture_t *f = *state;
  uint64_t a = full_gpu(f);
  uint64_t w1 = wait_for(f, in_tier(GMT_TIER_GPU, 100), 1000);
  uint64_t w2 = wait_for(f, in_tier(GMT_TIER_GPU, 100), 1000);
  assert_int_equal(gmt_tiers_cancel(f->t, w1), 0);
  assert_int_equal(gmt_tiers_cancel(f->t, w1), -ENOENT);
  assert_int_equal(gmt_tiers_cancel(f->t, a), -ENOENT); /* a reservation, not a waiter */
  assert_int_equal(f->n, 1);
  assert_int_equal(f->status[0], -ECANCELED);
  assert_int_equal(f->ids[0], w1);
  gmt_tiers_free(f->t);
  f->t = NULL;
  assert_int_equal(f->n, 2);
  assert_int_equal(f->ids[1], w2);
  assert_int_equal(f->status[1], -ECANCELED);
}

static void test_callback_may_release_what_it_was_granted(void **state)
{
  fixture_t *f = *state;
  uint64_t a = full_gpu(f);
  uint64_t w1 = wait_for(f, in_tier(GMT_TIER_GPU, 1000), 1000);
  uint64_t w2 = wait_for(f, in_tier(GMT_TIER_GPU, 1000), 1000);
  uint64_t w3 = wait_for(f, in_tier(GMT_TIER_GPU, 1000), 1000);
  f->release_in_callback = true;
  assert_int_equal(gmt_tiers_release(f->t, a), 0);
  /* Each frees the whole space in its callback, so the next gets it. */
  assert_int_equal(f->n, 3);
  assert_int_equal(f->ids[0], w1);
  assert_int_equal(f->ids[1], w2);
  assert_int_equal(f->ids[2], w3);
  for (int i = 0; i < 3; i++)
    assert_int_equal(f->status[i], 0);
  assert_int_equal(info(f->t, 0).reserved, 0);
  assert_int_equal(gmt_tiers_nwaiting(f->t), 0);
}

static void test_a_dead_process_gives_back_exactly_what_it_held(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 1000, 0, 0, 0), 0);
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_HOST, 0, 1000, 0, 0, 0), 0);
  gmt_tier_request_t r = in_tier(GMT_TIER_GPU, 300);
  r.policy = GMT_TIER_LIMIT_IGNORE;
  uint64_t a10 = take(f->t, r, GMT_TIER_GPU, 0);
  assert_int_equal(gmt_tiers_use(f->t, a10, 350, NULL), 0); /* occupies 350 */
  take(f->t, in_tier(GMT_TIER_HOST, 100), GMT_TIER_HOST, 0);
  r.pid = 11;
  uint64_t a11 = take(f->t, r, GMT_TIER_GPU, 0);
  r.pod = "b";
  r.pid = 10; /* the same pid in another pod is another owner */
  take(f->t, r, GMT_TIER_GPU, 0);
  assert_int_equal(gmt_tiers_owner_bytes(f->t, "a", 10, GMT_TIER_GPU), 350);
  assert_int_equal(gmt_tiers_owner_bytes(f->t, "a", 10, GMT_TIER_HOST), 100);
  assert_int_equal(gmt_tiers_owner_bytes(f->t, "a", 0, GMT_TIER_GPU), 650);
  /* Process 10 of a waits for 200 on the GPU; b's 11 too. */
  gmt_tier_request_t w = in_tier(GMT_TIER_GPU, 200);
  uint64_t wa = wait_for(f, w, 1000);
  w.pod = "b";
  w.pid = 11;
  uint64_t wb = wait_for(f, w, 1000);
  assert_int_equal(gmt_tiers_release_owner(f->t, "a", 10), 450);
  /* Its waiter is cancelled, not granted; the freed room goes to b's. */
  assert_int_equal(f->n, 2);
  assert_int_equal(f->ids[0], wa);
  assert_int_equal(f->status[0], -ECANCELED);
  assert_int_equal(f->ids[1], wb);
  assert_int_equal(f->status[1], 0);
  assert_int_equal(gmt_tiers_owner_bytes(f->t, "a", 10, GMT_TIER_GPU), 0);
  assert_int_equal(gmt_tiers_owner_bytes(f->t, "a", 10, GMT_TIER_HOST), 0);
  assert_int_equal(gmt_tiers_owner_bytes(f->t, "a", 11, GMT_TIER_GPU), 300);
  assert_int_equal(gmt_tiers_owner_bytes(f->t, "b", 0, GMT_TIER_GPU), 500);
  assert_int_equal(info(f->t, 0).occupied, 800);
  assert_int_equal(info(f->t, 1).occupied, 0);
  assert_int_equal(gmt_tiers_release_owner(f->t, "a", 10), 0); /* nothing twice */
  assert_int_equal(gmt_tiers_release_owner(f->t, "a", 0), 0);  /* not a process */
  assert_int_equal(gmt_tiers_get(f->t, a11, NULL), 0);
  /* A pod removed: all of its processes. */
  assert_int_equal(gmt_tiers_release_pod(f->t, "b"), 500);
  assert_int_equal(gmt_tiers_release_pod(f->t, "a"), 300);
  assert_int_equal(info(f->t, 0).occupied, 0);
  assert_int_equal(info(f->t, 0).nresv, 0);
}

static void test_bad_requests_are_refused(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(gmt_tiers_add_space(f->t, GMT_TIER_GPU, 0, 1000, 0, 0, 0), 0);
  gmt_tier_request_t r = in_tier(GMT_TIER_GPU, 0);
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -EINVAL);
  r.bytes = 1;
  r.pod = NULL;
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -EINVAL);
  r.pod = "";
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -EINVAL);
  r.pod = "a23456789012345678901234567890123456789012345678901234567890123"; /* 63 */
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -EINVAL);
  r.pod = "a2345678901234567890123456789012345678901234567890123456789012"; /* 62 */
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), 0);
  r.tier = (gmt_tier_t)7;
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -EINVAL);
  r = specific(GMT_TIER_GPU, -1, 1);
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -EINVAL);
  r = in_tier(GMT_TIER_GPU, 1);
  r.strategy = (gmt_tier_strategy_t)42;
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -EINVAL);
  r = in_tier(GMT_TIER_GPU, 1);
  r.policy = (gmt_tier_limit_policy_t)9;
  assert_int_equal(gmt_tiers_reserve(f->t, &r, NOW, NULL), -EINVAL);
  assert_int_equal(info(f->t, 0).reserved, 1);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
      T(test_space_defaults_and_bad_spaces_are_refused),
      T(test_any_in_tier_takes_the_space_with_most_room),
      T(test_prefer_takes_the_preferred_space_when_it_fits),
      T(test_specific_takes_that_space_or_nothing),
      T(test_any_in_tiers_takes_the_first_tier_that_fits),
      T(test_to_downgrade_goes_to_a_lower_tier_nearest_first),
      T(test_to_upgrade_goes_to_a_higher_tier_nearest_first),
      T(test_reservation_limit_below_capacity_bounds_reservations),
      T(test_held_bytes_take_room_and_make_pressure),
      T(test_fail_policy_refuses_use_past_the_reservation),
      T(test_ignore_policy_passes_the_reservation_but_never_the_capacity),
      T(test_grow_policy_grows_to_a_quarter_more_than_used),
      T(test_grow_policy_fails_when_not_even_the_use_fits),
      T(test_release_twice_is_enoent_and_never_double_counted),
      T(test_giving_back_more_than_used_stops_at_zero),
      T(test_pressure_is_what_brings_the_space_down_to_stop),
      T(test_waiters_are_granted_on_release_oldest_first),
      T(test_waiter_that_does_not_fit_does_not_hold_back_younger_ones),
      T(test_waiter_is_expired_exactly_once_at_its_deadline),
      T(test_request_that_can_never_fit_fails_at_once),
      T(test_waiters_are_bounded),
      T(test_cancel_and_free_end_waiters_exactly_once),
      T(test_callback_may_release_what_it_was_granted),
      T(test_a_dead_process_gives_back_exactly_what_it_held),
      T(test_bad_requests_are_refused),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
