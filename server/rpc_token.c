/* GPU time tokens: the glue between the wire and the token policy. Not
 * implemented yet: Token gets a clear error rather than a timeout. */
#include "gmt_error.h"
#include "gmt_log.h"
#include "schd.h"

int gmt__tokens_init(gmt_schd_t *s)
{
  s->tokens = NULL;
  return 0;
}

void gmt__tokens_close(gmt_schd_t *s) { (void)s; }

void gmt__rpc_token(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  (void)s;
  (void)req;
  gmt_call_reply_error(call, GMT_EUNIMPL, "Token is not implemented yet");
}

void gmt__tokens_pod_changed(gmt_schd_t *s, const gmt_pod_t *pod)
{
  (void)s;
  (void)pod;
}

void gmt__tokens_status(gmt_schd_t *s, const gmt_pod_t *pod, Gmt__PodStatus *ps)
{
  (void)s;
  (void)pod;
  (void)ps;
}
