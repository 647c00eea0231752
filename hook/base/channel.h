/* The hook's connections to its pod manager: one per kind of call, so that
 * a token request that waits for the GPU holds up neither the reports nor
 * a reservation made by another thread. */
#ifndef GMT_HOOK_CHANNEL_H
#define GMT_HOOK_CHANNEL_H

#include "conn.h"
#include "gmt_wire.h"

enum {
  GMT_CH_REPORT = 0, /* Report, from the reporter thread */
  GMT_CH_MEMORY = 1, /* Reserve, Release, MemInfo */
  GMT_CH_TOKEN = 2,  /* Token */
  GMT_CH_WATCH = 3,  /* TokenWatch: waits as long as a grant lasts */
  GMT_CH_COUNT
};

/* Once registered: calls may go to url; first (the registration's
 * connection) becomes the report channel's. first NULL: the pod manager
 * did not answer the registration, and counts as down until a report
 * reaches it (the report registers the process there). */
void gmt__channels_start(const char *url, gmt_conn_t *first);

/* One call on channel ch, serialised with the channel's other callers;
 * the connection is (re)opened as needed. -ENOTCONN while the process is
 * not registered (unhooked). Never call it with a lock held that a launch
 * or an allocation needs. */
int gmt__channel_call(int ch, const Gmt__Envelope *req, Gmt__Envelope **rep, int timeout_ms);

/* Nonzero while the pod manager counts as down (channel.c says when):
 * calls other than reports fail at once with -EHOSTDOWN. */
int gmt__channel_down(void);

/* The pod manager's URL in out ("" before the channels start). */
void gmt__channel_url(char *out, size_t n);

#endif
