/* The memory ledger: the glue between the wire and the ledger. Not
 * implemented yet: Reserve, Release and MemInfo get a clear error. */
#include "gmt_error.h"
#include "gmt_log.h"
#include "schd.h"

int gmt__ledger_init(gmt_schd_t *s)
{
  s->ledger = NULL;
  return 0;
}

void gmt__ledger_close(gmt_schd_t *s) { (void)s; }

static void unimplemented(gmt_call_t *call, const char *what)
{
  gmt_call_reply_error(call, GMT_EUNIMPL, "%s is not implemented yet", what);
}

void gmt__rpc_reserve(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  (void)s;
  (void)req;
  unimplemented(call, "Reserve");
}

void gmt__rpc_release(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  (void)s;
  (void)req;
  unimplemented(call, "Release");
}

void gmt__rpc_meminfo(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  (void)s;
  (void)req;
  unimplemented(call, "MemInfo");
}

void gmt__ledger_pod_changed(gmt_schd_t *s, const gmt_pod_t *pod)
{
  (void)s;
  (void)pod;
}

void gmt__ledger_status(gmt_schd_t *s, const gmt_pod_t *pod, Gmt__PodStatus *ps)
{
  (void)s;
  (void)pod;
  (void)ps;
}
