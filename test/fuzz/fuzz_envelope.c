/* libFuzzer target: a frame off the wire, as gmt-schd and gmt-pmgr decode
 * every request (gmt_wire_unpack), then what a handler does with it: walk
 * the message and its body, check the reply, pack it again. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_error.h"
#include "gmt_wire.h"

/* A decoded envelope must be one a handler can trust: a body case with its
 * message behind it, every field present that protobuf-c says must be. */
static void walk(const Gmt__Envelope *env)
{
  if (!protobuf_c_message_check(&env->base))
    abort();
  if (env->body_case != GMT__ENVELOPE__BODY__NOT_SET) {
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(&gmt__envelope__descriptor, env->body_case);
    if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE)
      abort();
    const ProtobufCMessage *body;
    memcpy(&body, (const char *)env + f->offset, sizeof body);
    if (!body || body->descriptor != f->descriptor)
      abort();
  }
  char err[128];
  (void)gmt_wire_expect(env, GMT__ENVELOPE__BODY_STATUS_REP, err, sizeof err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  Gmt__Envelope *env = NULL;
  int rc = gmt_wire_unpack(data, size, &env);
  if (rc != 0) {
    if (env || (rc != GMT_EDECODE && rc != GMT_EVERSION))
      abort();
    return 0;
  }
  walk(env);

  /* What decoded packs again, and that packing is a fixed point: the reply
   * path and a pod manager's forwarding repack what they received. */
  void *p1 = NULL, *p2 = NULL;
  size_t n1 = 0, n2 = 0;
  Gmt__Envelope *again = NULL;
  if (gmt_wire_pack(env, &p1, &n1) != 0)
    abort();
  if (gmt_wire_unpack(p1, n1, &again) != 0)
    abort();
  walk(again);
  if (gmt_wire_pack(again, &p2, &n2) != 0 || n1 != n2 || memcmp(p1, p2, n1) != 0)
    abort();
  free(p1);
  free(p2);
  gmt_wire_free(again);
  gmt_wire_free(env);
  return 0;
}
