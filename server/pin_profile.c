/* Pin profiles (see pin_profile.h): the store's rows of one executable,
 * classified once and looked up by site. A node runs a handful of
 * programs, so a small table of executables, the least recently asked
 * about making room, is the right size of cache; within one, the sites
 * are sorted and searched by halves. */
#include "pin_profile.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_error.h"
#include "gmt_log.h"

typedef struct {
  const char *module; /* one of its exe's modules[] */
  uint64_t offset;
  uint32_t nth, size_class;
  bool hot;
} site_t;

typedef struct {
  char *exe; /* NULL: a free slot */
  uint64_t used;
  size_t nsites;
  site_t *sites; /* sorted by site_cmp */
  size_t nmodules;
  char **modules;
} exe_t;

struct gmt_pin_profiles {
  gmt_store_t *store;
  uint64_t tick;
  exe_t cache[GMT_PIN_PROFILE_CACHE];
};

int gmt_pin_profiles_new(gmt_pin_profiles_t **out, gmt_store_t *store)
{
  *out = calloc(1, sizeof **out);
  if (!*out)
    return -ENOMEM;
  (*out)->store = store;
  return 0;
}

static void exe_clear(exe_t *e)
{
  for (size_t i = 0; i < e->nmodules; i++)
    free(e->modules[i]);
  free(e->modules);
  free(e->sites);
  free(e->exe);
  memset(e, 0, sizeof *e);
}

void gmt_pin_profiles_free(gmt_pin_profiles_t *p)
{
  if (!p)
    return;
  for (size_t i = 0; i < GMT_PIN_PROFILE_CACHE; i++)
    exe_clear(&p->cache[i]);
  free(p);
}

static exe_t *cached(gmt_pin_profiles_t *p, const char *exe)
{
  for (size_t i = 0; i < GMT_PIN_PROFILE_CACHE; i++)
    if (p->cache[i].exe && strcmp(p->cache[i].exe, exe) == 0)
      return &p->cache[i];
  return NULL;
}

int gmt_pin_profiles_add(gmt_pin_profiles_t *p, const char *exe, const gmt_store_profile_row_t *h,
                         size_t n, int64_t now_ms, size_t *added)
{
  int rc = gmt_store_profile_add(p->store, exe, h, n, now_ms, added);
  exe_t *e = exe ? cached(p, exe) : NULL;
  if (e)
    exe_clear(e); /* learned again at the next question */
  return rc;
}

static int site_cmp(const void *a, const void *b)
{
  const site_t *x = a, *y = b;
  int c = strcmp(x->module, y->module);
  if (c)
    return c;
  if (x->offset != y->offset)
    return x->offset < y->offset ? -1 : 1;
  if (x->nth != y->nth)
    return x->nth < y->nth ? -1 : 1;
  return (x->size_class > y->size_class) - (x->size_class < y->size_class);
}

/* The rows of one executable as they are read. */
typedef struct {
  exe_t *e;
  gmt_pin_usage_t *usage;
  size_t ucap, scap, mcap;
} load_t;

static int grow(void **v, size_t *cap, size_t need, size_t elem)
{
  if (need <= *cap)
    return 0;
  size_t ncap = *cap ? *cap * 2 : 64;
  void *n = realloc(*v, ncap * elem);
  if (!n)
    return -ENOMEM;
  *v = n;
  *cap = ncap;
  return 0;
}

static int on_row(void *arg, const gmt_store_profile_row_t *row)
{
  load_t *l = arg;
  exe_t *e = l->e;
  /* The store keeps no more than this; a file edited by hand may. */
  if (e->nsites == GMT_STORE_PROFILE_ROWS)
    return 1;
  if (grow((void **)&l->usage, &l->ucap, e->nsites + 1, sizeof *l->usage) < 0 ||
      grow((void **)&e->sites, &l->scap, e->nsites + 1, sizeof *e->sites) < 0)
    return -ENOMEM;
  /* Rows come sorted by module: one copy of each. */
  if (!e->nmodules || strcmp(e->modules[e->nmodules - 1], row->module) != 0) {
    if (grow((void **)&e->modules, &l->mcap, e->nmodules + 1, sizeof *e->modules) < 0 ||
        !(e->modules[e->nmodules] = strdup(row->module)))
      return -ENOMEM;
    e->nmodules++;
  }
  e->sites[e->nsites] = (site_t){.module = e->modules[e->nmodules - 1],
                                 .offset = row->offset,
                                 .nth = row->nth,
                                 .size_class = row->size_class};
  l->usage[e->nsites] = (gmt_pin_usage_t){
      .size = row->size, .h2d_bytes = row->h2d_bytes, .d2h_bytes = row->d2h_bytes};
  e->nsites++;
  return 0;
}

/* Reads and classifies exe's profile into e (a cleared slot). */
static int load(gmt_pin_profiles_t *p, exe_t *e, const char *exe)
{
  load_t l = {.e = e};
  bool *hot = NULL;
  int rc = -ENOMEM;
  if (!(e->exe = strdup(exe)))
    goto out;
  rc = gmt_store_profile_each(p->store, exe, on_row, &l);
  if (rc > 0)
    rc = 0; /* stopped at the bound */
  if (rc < 0)
    goto out;
  rc = -ENOMEM;
  if (!(hot = malloc((e->nsites ? e->nsites : 1) * sizeof *hot)))
    goto out;
  double cut = 0;
  if ((rc = gmt_pin_classify(l.usage, e->nsites, hot, &cut)) < 0)
    goto out;
  size_t nhot = 0;
  for (size_t i = 0; i < e->nsites; i++) {
    e->sites[i].hot = hot[i];
    nhot += hot[i];
  }
  if (e->nsites)
    qsort(e->sites, e->nsites, sizeof *e->sites, site_cmp);
  gmt_debug("pin profile of %s: %zu buffers, %zu hot (reuse at least %.1f)", exe, e->nsites, nhot,
            cut);
out:
  free(hot);
  free(l.usage);
  if (rc < 0)
    exe_clear(e);
  return rc;
}

/* exe's classified profile, loaded when not in the cache; NULL when it
 * cannot be read (logged). */
static exe_t *profile_of(gmt_pin_profiles_t *p, const char *exe)
{
  exe_t *e = cached(p, exe);
  if (!e) {
    /* A free slot, else the one asked about least recently. */
    e = &p->cache[0];
    for (size_t i = 0; i < GMT_PIN_PROFILE_CACHE && e->exe; i++)
      if (!p->cache[i].exe || p->cache[i].used < e->used)
        e = &p->cache[i];
    exe_clear(e);
    int rc = load(p, e, exe);
    if (rc < 0) {
      gmt_warn("pin profile of %s cannot be read: %s; its sites count as unprofiled", exe,
               gmt_strerror(rc));
      return NULL;
    }
  }
  e->used = ++p->tick;
  return e;
}

gmt_pin_site_t gmt_pin_profiles_site(gmt_pin_profiles_t *p, const char *exe, const char *module,
                                     uint64_t offset, uint32_t nth, uint32_t size_class)
{
  exe_t *e = exe && exe[0] && module ? profile_of(p, exe) : NULL;
  if (!e)
    return GMT_PIN_SITE_UNKNOWN;
  site_t key = {.module = module, .offset = offset, .nth = nth, .size_class = size_class};
  const site_t *s =
      e->nsites ? bsearch(&key, e->sites, e->nsites, sizeof *e->sites, site_cmp) : NULL;
  if (!s)
    return GMT_PIN_SITE_UNKNOWN;
  return s->hot ? GMT_PIN_SITE_HOT : GMT_PIN_SITE_COLD;
}

size_t gmt_pin_profiles_site_hot(gmt_pin_profiles_t *p, const char *exe, const char *module,
                                 uint64_t offset, uint32_t size_class, uint32_t *nths, size_t cap,
                                 bool *known)
{
  *known = false;
  exe_t *e = exe && exe[0] && module ? profile_of(p, exe) : NULL;
  if (!e)
    return 0;
  /* A site's buffers sit together, by nth: from the first at or past nth 0. */
  site_t key = {.module = module, .offset = offset};
  size_t lo = 0, hi = e->nsites, n = 0;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (site_cmp(&e->sites[mid], &key) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (size_t i = lo;
       i < e->nsites && e->sites[i].offset == offset && strcmp(e->sites[i].module, module) == 0;
       i++) {
    if (e->sites[i].size_class != size_class)
      continue;
    *known = true;
    if (e->sites[i].hot && n < cap)
      nths[n++] = e->sites[i].nth;
  }
  return n;
}
