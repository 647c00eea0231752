/* Pin profiles as pin advice reads and writes them: the histories that
 * pin=profile runs send go to the store (store.c), and for pin=use each
 * executable's buffers are classified hot or cold (pin_policy.c) from all
 * of its rows, the result kept in memory for the executables asked about
 * last and worked out again once new histories for it have come. */
#ifndef GMT_SERVER_PIN_PROFILE_H
#define GMT_SERVER_PIN_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pin_policy.h"
#include "store.h"

/* Executables whose classification is kept in memory (each at most
 * GMT_STORE_PROFILE_ROWS buffers, about 32 bytes each). */
#define GMT_PIN_PROFILE_CACHE 16

typedef struct gmt_pin_profiles gmt_pin_profiles_t;

/* store may be NULL: nothing is recorded, every site is unknown. */
int gmt_pin_profiles_new(gmt_pin_profiles_t **out, gmt_store_t *store);
void gmt_pin_profiles_free(gmt_pin_profiles_t *p);

/* Records n histories under exe (gmt_store_profile_add(), with its bounds;
 * *added may be NULL) and forgets exe's classification, so that the next
 * question about it learns from them too. */
int gmt_pin_profiles_add(gmt_pin_profiles_t *p, const char *exe, const gmt_store_profile_row_t *h,
                         size_t n, int64_t now_ms, size_t *added);

/* What exe's profile says of the site (module, offset, nth, size_class):
 * hot or cold when it holds that exact key, else unknown. A site seen
 * only with another nth or size class is unknown too: the hook numbers a
 * site's allocations the same way in every run, so another nth is another
 * buffer, whose use may differ. Unknown too when the profile cannot be
 * read (logged). */
gmt_pin_site_t gmt_pin_profiles_site(gmt_pin_profiles_t *p, const char *exe, const char *module,
                                     uint64_t offset, uint32_t nth, uint32_t size_class);

/* The same profile, of a whole site: the nths at (module, offset,
 * size_class) that it calls hot, up to cap of them into nths (the count
 * is returned); *known says whether it holds any buffer of that site. */
size_t gmt_pin_profiles_site_hot(gmt_pin_profiles_t *p, const char *exe, const char *module,
                                 uint64_t offset, uint32_t size_class, uint32_t *nths, size_t cap,
                                 bool *known);

#endif
