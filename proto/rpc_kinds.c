/* The table of envelope bodies (gmt_rpc_kinds.h), and the caller-naming
 * fields found through protobuf-c's descriptors by the names it gives. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_rpc_kinds.h"
#include "gmt_wire.h"

/* Below the hook's bound on an Advise (500 ms), and one more reason: a
 * process that gets no answer sends its release again with its next call,
 * so the pod manager must answer (UNREACHABLE: the release is lost, the
 * safe error) before the process gives up, or a release the scheduler
 * applied late would be given back twice. */
#define PMGR_ADVISE_WAIT_MS 400
/* A Resident comes before an allocation's memory is made or brought back:
 * the process waits for it, so the pod manager answers (UNREACHABLE) well
 * before the hook would give up on it. */
#define PMGR_RESIDENT_WAIT_MS 400
/* A Pick may wait for the scheduler's probe of every GPU (daemon.probe-
 * timeout, 3 s by default; under 1 s for two H200s): above that, and
 * below the hook's bound on it (GMT_AUTO_DEVICE_TIMEOUT_MS, 5 s). */
#define PMGR_PICK_WAIT_MS 4000

/* One row per RPC: its request and its reply. */
#define RPC(C, NAME, POD, PID, VIEW, PMGR, OUTAGE, WAIT)                                           \
  [GMT__ENVELOPE__BODY_##C##_REQ] = {.name = NAME,                                                 \
                                     .reply = GMT__ENVELOPE__BODY_##C##_REP,                       \
                                     .pod = POD,                                                   \
                                     .pid = PID,                                                   \
                                     .view = VIEW,                                                 \
                                     .pmgr = GMT_RPC_PMGR_##PMGR,                                  \
                                     .outage = GMT_RPC_OUTAGE_##OUTAGE,                            \
                                     .pmgr_wait_ms = WAIT},                                        \
  [GMT__ENVELOPE__BODY_##C##_REP] = {.name = NAME "Reply"}
#define ACTS false
#define READS true

static const gmt_rpc_kind_t kinds[] = {
    [GMT__ENVELOPE__BODY_ERROR] = {.name = "Error"},
    // clang-format off
    /*  case         name          pod    pid            view   pod manager  outage   its wait */
    RPC(REGISTER,    "Register",   "pod", "pid",         ACTS,  OWN,     NONE,    0),
    RPC(HEARTBEAT,   "Heartbeat",  "pod", NULL,          ACTS,  NONE,    NONE,    0),
    RPC(REPORT,      "Report",     NULL,  "process.pid", ACTS,  OWN,     NONE,    0),
    /* The pod manager's token code asks gmt-schd itself, and grants
     * locally in an outage, paced (client/pmgr/pmgr_token.c). */
    RPC(TOKEN,       "Token",      "pod", "pid",         ACTS,  SHARE,   GRANT,   0),
    /* Held until the pod's grant ends: the pod manager keeps one upstream
     * per device for all its processes (client/pmgr/pmgr_token.c). */
    RPC(TOKEN_WATCH, "TokenWatch", "pod", "pid",         ACTS,  SHARE,   NONE,    0),
    RPC(RESERVE,     "Reserve",    "pod", "pid",         ACTS,  FORWARD, COUNT,   GMT_RPC_PMGR_WAIT_MS),
    RPC(RELEASE,     "Release",    "pod", "pid",         ACTS,  FORWARD, COUNT,   GMT_RPC_PMGR_WAIT_MS),
    RPC(MEMINFO,     "MemInfo",    "pod", NULL,          ACTS,  FORWARD, COUNT,   GMT_RPC_PMGR_WAIT_MS),
    RPC(STATUS,      "Status",     NULL,  NULL,          READS, NONE,    NONE,    0),
    RPC(TRACE_SPOTS, "TraceSpots", NULL,  NULL,          ACTS,  NONE,    NONE,    0),
    /* The pinned budget is the node's: no pod manager pins without
     * gmt-schd's ledger. */
    RPC(ADVISE,      "Advise",     "pod", "pid",         ACTS,  FORWARD, REFUSE,  PMGR_ADVISE_WAIT_MS),
    /* mode=swap: the card's own out-of-memory bounds it meanwhile. */
    RPC(RESIDENT,    "Resident",   "pod", "pid",         ACTS,  FORWARD, GRANT,   PMGR_RESIDENT_WAIT_MS),
    /* Views (what the node's GPUs are called, which is emptiest); through
     * a pod manager, asked for its pod. */
    RPC(DEVICES,     "Devices",    "pod", "pid",         READS, FORWARD, UNKNOWN, GMT_RPC_PMGR_WAIT_MS),
    RPC(PICK,        "Pick",       "pod", NULL,          READS, FORWARD, REFUSE,  PMGR_PICK_WAIT_MS),
    // clang-format on
};

const gmt_rpc_kind_t *gmt_rpc_kind(Gmt__Envelope__BodyCase c)
{
  if ((unsigned)c >= sizeof kinds / sizeof kinds[0] || !kinds[c].name)
    return NULL;
  return &kinds[c];
}

Gmt__Envelope__BodyCase gmt_rpc_case(const gmt_rpc_kind_t *k)
{
  return (Gmt__Envelope__BodyCase)(k - kinds);
}

/* env's body as a message; NULL when it has none. */
static ProtobufCMessage *body_of(const Gmt__Envelope *env)
{
  /* The oneof's case is its field's number (as in gmt_wire_set_body). */
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field(&gmt__envelope__descriptor, env->body_case);
  ProtobufCMessage *m = NULL;
  if (f && f->type == PROTOBUF_C_TYPE_MESSAGE)
    memcpy(&m, (const char *)env + f->offset, sizeof m);
  return m;
}

/* Where path ("pid", "process.pid") lives in m, when it is a single field
 * of type want; NULL when it is not (or a sub-message on the way is
 * missing). */
static void *field_at(ProtobufCMessage *m, const char *path, ProtobufCType want)
{
  while (m && path) {
    char name[64];
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    if (n >= sizeof name)
      return NULL;
    memcpy(name, path, n);
    name[n] = '\0';
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
    if (!f || f->label == PROTOBUF_C_LABEL_REPEATED)
      return NULL;
    char *at = (char *)m + f->offset;
    if (!dot)
      return f->type == want ? at : NULL;
    if (f->type != PROTOBUF_C_TYPE_MESSAGE)
      return NULL;
    memcpy(&m, at, sizeof m);
    path = dot + 1;
  }
  return NULL;
}

char **gmt_rpc_pod(const Gmt__Envelope *env)
{
  const gmt_rpc_kind_t *k = gmt_rpc_kind(env->body_case);
  return k && k->pod ? field_at(body_of(env), k->pod, PROTOBUF_C_TYPE_STRING) : NULL;
}

uint32_t *gmt_rpc_pid(const Gmt__Envelope *env)
{
  const gmt_rpc_kind_t *k = gmt_rpc_kind(env->body_case);
  return k && k->pid ? field_at(body_of(env), k->pid, PROTOBUF_C_TYPE_UINT32) : NULL;
}

int gmt_rpc_with_pod(const Gmt__Envelope *env, const char *pod, Gmt__Envelope *out, void **copy)
{
  const gmt_rpc_kind_t *k = gmt_rpc_kind(env->body_case);
  ProtobufCMessage *body = body_of(env);
  *copy = NULL;
  /* A pod inside a sub-message would be shared with env's: not copied. */
  if (!k || !k->pod || strchr(k->pod, '.') || !body)
    return -EINVAL;
  ProtobufCMessage *m = malloc(body->descriptor->sizeof_message);
  if (!m)
    return -ENOMEM;
  memcpy(m, body, body->descriptor->sizeof_message);
  char **at = field_at(m, k->pod, PROTOBUF_C_TYPE_STRING);
  *out = *env;
  if (!at || gmt_wire_set_body(out, env->body_case, m) < 0) {
    free(m);
    return -EINVAL;
  }
  *at = (char *)pod;
  *copy = m;
  return 0;
}
