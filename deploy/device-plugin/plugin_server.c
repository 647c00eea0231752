/* The DevicePlugin service on one Unix socket (plugin_server.h). Each
 * incoming call is a call_t with three operations of its own: the request
 * message (recv), what the server sends (send: the reply and the status,
 * or a stream's next list), and the call's end (close: gRPC reports it
 * once the status went out, the peer went away or the server shut down).
 * A call is freed when none of the three is pending. */
#include "plugin_server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpc/grpc_security.h>

#include "cq_tag.h"
#include "gmt_log.h"
#include "grpc_msg.h"

typedef enum method {
  M_UNKNOWN,
  M_OPTIONS,
  M_LIST,
  M_PREFER,
  M_ALLOCATE,
  M_PRESTART,
} method_t;

static const struct {
  const char *path;
  method_t m;
} methods[] = {
    {"/v1beta1.DevicePlugin/GetDevicePluginOptions", M_OPTIONS},
    {"/v1beta1.DevicePlugin/ListAndWatch", M_LIST},
    {"/v1beta1.DevicePlugin/GetPreferredAllocation", M_PREFER},
    {"/v1beta1.DevicePlugin/Allocate", M_ALLOCATE},
    {"/v1beta1.DevicePlugin/PreStartContainer", M_PRESTART},
};

typedef struct call call_t;
struct call {
  gmt_dp_server_t *s;
  grpc_call *call;
  method_t m;
  gmt_dp_tag_t recv_tag, send_tag, close_tag;
  grpc_byte_buffer *recv_buf, *send_buf;
  grpc_slice status_details;
  int cancelled; /* RECV_CLOSE_ON_SERVER's: the call ended without our status */
  bool recv_pending, send_pending, close_pending;
  bool sent_metadata;
  bool has_details;
  bool stream; /* ListAndWatch, once its first list is on its way */
  bool dirty;  /* a stream whose devices changed while a list was being sent */
  bool gone;   /* the call has ended */
  bool over;   /* came past GMT_DP_SERVER_MAX_CALLS */
  uint64_t started_ms, send_ms;
  call_t *prev, *next;
};

struct gmt_dp_server {
  grpc_server *srv;
  grpc_completion_queue *cq;
  char path[108];
  char name[64];
  dev_t dev;
  ino_t ino;
  V1beta1__DevicePluginOptions options;
  const gmt_dp_server_ops_t *ops;
  void *data;
  /* The next call gRPC hands over. */
  gmt_dp_tag_t new_tag;
  grpc_call *new_call;
  grpc_call_details details;
  grpc_metadata_array metadata;
  bool requesting;
  gmt_dp_tag_t shutdown_tag;
  bool closing, shutdown_pending;
  void (*closed)(void *);
  void *closed_arg;
  call_t *calls;
  unsigned n_calls, n_streams;
};

static void on_new(gmt_dp_tag_t *t, bool ok);
static void on_recv(gmt_dp_tag_t *t, bool ok);
static void on_send(gmt_dp_tag_t *t, bool ok);
static void on_close(gmt_dp_tag_t *t, bool ok);
static void on_shutdown(gmt_dp_tag_t *t, bool ok);

static void maybe_free_server(gmt_dp_server_t *s)
{
  if (!s->closing || s->shutdown_pending || s->requesting || s->n_calls)
    return;
  grpc_server_destroy(s->srv);
  gmt_debug("%s: server on %s closed", s->name, s->path);
  void (*closed)(void *) = s->closed;
  void *arg = s->closed_arg;
  free(s);
  if (closed)
    closed(arg);
}

static void request_next(gmt_dp_server_t *s)
{
  grpc_call_details_init(&s->details);
  grpc_metadata_array_init(&s->metadata);
  s->new_call = NULL;
  grpc_call_error e = grpc_server_request_call(s->srv, &s->new_call, &s->details, &s->metadata,
                                               s->cq, s->cq, &s->new_tag);
  s->requesting = e == GRPC_CALL_OK;
  if (!s->requesting) {
    gmt_error("%s: cannot take calls on %s: %s", s->name, s->path, grpc_call_error_to_string(e));
    grpc_call_details_destroy(&s->details);
    grpc_metadata_array_destroy(&s->metadata);
  }
}

int gmt_dp_server_start(gmt_dp_server_t **out, grpc_completion_queue *cq, const char *path,
                        const char *name, const V1beta1__DevicePluginOptions *options,
                        const gmt_dp_server_ops_t *ops, void *data)
{
  gmt_dp_server_t *s = calloc(1, sizeof *s);
  if (!s)
    return -ENOMEM;
  if (snprintf(s->path, sizeof s->path, "%s", path) >= (int)sizeof s->path) {
    free(s);
    return -ENAMETOOLONG;
  }
  snprintf(s->name, sizeof s->name, "%s", name);
  s->cq = cq;
  s->options = *options;
  s->ops = ops;
  s->data = data;
  s->new_tag.done = on_new;
  s->shutdown_tag.done = on_shutdown;

  grpc_arg arg = {.type = GRPC_ARG_INTEGER,
                  .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                  .value.integer = (int)GMT_DP_MAX_MESSAGE};
  grpc_channel_args args = {.num_args = 1, .args = &arg};
  s->srv = grpc_server_create(&args, NULL);
  grpc_server_register_completion_queue(s->srv, cq, NULL);
  struct stat st;
  if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
    unlink(path); /* ours from before, or a dead plugin's */
  char addr[sizeof s->path + 8];
  snprintf(addr, sizeof addr, "unix:%s", path);
  grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
  int port = grpc_server_add_http2_port(s->srv, addr, creds);
  grpc_server_credentials_release(creds);
  if (!port || lstat(path, &st) != 0) {
    /* No listener was added: a server never started may be destroyed. */
    grpc_server_destroy(s->srv);
    free(s);
    return -EADDRINUSE;
  }
  s->dev = st.st_dev;
  s->ino = st.st_ino;
  grpc_server_start(s->srv);
  request_next(s);
  *out = s;
  return 0;
}

static void unlink_call(call_t *c)
{
  gmt_dp_server_t *s = c->s;
  if (c->prev)
    c->prev->next = c->next;
  else
    s->calls = c->next;
  if (c->next)
    c->next->prev = c->prev;
  s->n_calls--;
}

/* Frees c once nothing of it is pending. */
static void maybe_end(call_t *c)
{
  if (c->recv_pending || c->send_pending || c->close_pending)
    return;
  gmt_dp_server_t *s = c->s;
  if (c->recv_buf)
    grpc_byte_buffer_destroy(c->recv_buf);
  grpc_call_unref(c->call);
  unlink_call(c);
  free(c);
  maybe_free_server(s);
}

static void cancel(call_t *c)
{
  if (!c->gone)
    grpc_call_cancel(c->call, NULL);
}

/* What a send held until gRPC was done with it. */
static void send_done(call_t *c)
{
  if (c->send_buf)
    grpc_byte_buffer_destroy(c->send_buf);
  c->send_buf = NULL;
  if (c->has_details)
    grpc_slice_unref(c->status_details);
  c->has_details = false;
}

/* Sends msg (may be NULL) and, when final, the status: one batch. */
static void send_batch(call_t *c, const ProtobufCMessage *msg, bool final, grpc_status_code status,
                       const char *details)
{
  grpc_op ops[3];
  size_t n = 0;
  memset(ops, 0, sizeof ops);
  if (!c->sent_metadata) {
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    c->sent_metadata = true;
  }
  if (msg) {
    c->send_buf = gmt_dp_msg_pack(msg);
    if (!c->send_buf) {
      final = true;
      status = GRPC_STATUS_RESOURCE_EXHAUSTED;
      details = "gmt-device-plugin: out of memory";
    } else {
      ops[n].op = GRPC_OP_SEND_MESSAGE;
      ops[n++].data.send_message.send_message = c->send_buf;
    }
  }
  if (final) {
    c->status_details = grpc_slice_from_copied_string(details ? details : "");
    c->has_details = true;
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = status;
    ops[n++].data.send_status_from_server.status_details = &c->status_details;
  }
  c->send_pending = true;
  c->send_ms = gmt_now_ms();
  grpc_call_error e = grpc_call_start_batch(c->call, ops, n, &c->send_tag, NULL);
  if (e != GRPC_CALL_OK) {
    gmt_error("%s: cannot answer a call: %s", c->s->name, grpc_call_error_to_string(e));
    c->send_pending = false;
    send_done(c);
    cancel(c); /* the caller's maybe_end() frees it once its close came */
  }
}

static void send_list(call_t *c)
{
  gmt_dp_server_t *s = c->s;
  V1beta1__ListAndWatchResponse *list = NULL;
  char err[256] = "";
  int rc = s->ops->list(s->data, &list, err, sizeof err);
  if (rc != GRPC_STATUS_OK) {
    send_batch(c, NULL, true, (grpc_status_code)rc, err);
    return;
  }
  gmt_debug("%s: ListAndWatch: sending %zu devices", s->name, list->n_devices);
  send_batch(c, &list->base, false, GRPC_STATUS_OK, NULL);
  protobuf_c_message_free_unpacked(&list->base, NULL);
}

static void on_new(gmt_dp_tag_t *t, bool ok)
{
  gmt_dp_server_t *s = gmt_dp_container_of(t, gmt_dp_server_t, new_tag);
  s->requesting = false;
  grpc_call *gc = s->new_call;
  method_t m = M_UNKNOWN;
  for (size_t i = 0; ok && i < sizeof methods / sizeof methods[0]; i++)
    if (grpc_slice_str_cmp(s->details.method, methods[i].path) == 0)
      m = methods[i].m;
  grpc_call_details_destroy(&s->details);
  grpc_metadata_array_destroy(&s->metadata);
  if (!ok || !gc || s->closing) {
    if (gc && ok) {
      grpc_call_cancel(gc, NULL);
      grpc_call_unref(gc);
    }
    maybe_free_server(s);
    return;
  }
  request_next(s);

  call_t *c = calloc(1, sizeof *c);
  if (!c) {
    grpc_call_cancel(gc, NULL);
    grpc_call_unref(gc);
    return;
  }
  c->s = s;
  c->call = gc;
  c->m = m;
  c->recv_tag.done = on_recv;
  c->send_tag.done = on_send;
  c->close_tag.done = on_close;
  c->started_ms = gmt_now_ms();
  c->over = s->n_calls >= GMT_DP_SERVER_MAX_CALLS;
  c->next = s->calls;
  if (s->calls)
    s->calls->prev = c;
  s->calls = c;
  s->n_calls++;

  grpc_op close_op = {.op = GRPC_OP_RECV_CLOSE_ON_SERVER};
  close_op.data.recv_close_on_server.cancelled = &c->cancelled;
  c->close_pending = grpc_call_start_batch(gc, &close_op, 1, &c->close_tag, NULL) == GRPC_CALL_OK;
  grpc_op recv_op = {.op = GRPC_OP_RECV_MESSAGE};
  recv_op.data.recv_message.recv_message = &c->recv_buf;
  c->recv_pending = grpc_call_start_batch(gc, &recv_op, 1, &c->recv_tag, NULL) == GRPC_CALL_OK;
  if (!c->close_pending || !c->recv_pending) {
    gmt_error("%s: cannot read a call", s->name);
    cancel(c);
    maybe_end(c);
  }
}

/* The request of a unary call decoded as desc's message, or an
 * INVALID_ARGUMENT status sent and NULL. */
static ProtobufCMessage *request(call_t *c, const ProtobufCMessageDescriptor *desc)
{
  ProtobufCMessage *m = gmt_dp_msg_unpack(c->recv_buf, desc);
  if (!m) {
    char why[160];
    snprintf(why, sizeof why, "gmt-device-plugin: %s: no request, or it is not a %s", c->s->name,
             desc->name);
    send_batch(c, NULL, true, GRPC_STATUS_INVALID_ARGUMENT, why);
  }
  return m;
}

/* A handler's reply, or its status. */
static void answer(call_t *c, int rc, ProtobufCMessage *reply, const char *err)
{
  if (rc != GRPC_STATUS_OK) {
    gmt_warn("%s: refused a call: %s", c->s->name, err);
    send_batch(c, NULL, true, (grpc_status_code)rc, err);
  } else {
    send_batch(c, reply, true, GRPC_STATUS_OK, NULL);
  }
  if (reply)
    protobuf_c_message_free_unpacked(reply, NULL);
}

static void on_recv(gmt_dp_tag_t *t, bool ok)
{
  call_t *c = gmt_dp_container_of(t, call_t, recv_tag);
  gmt_dp_server_t *s = c->s;
  c->recv_pending = false;
  if (!ok || c->gone || s->closing) {
    cancel(c);
    maybe_end(c);
    return;
  }
  if (c->over) {
    send_batch(c, NULL, true, GRPC_STATUS_RESOURCE_EXHAUSTED, "gmt-device-plugin: too many calls");
    maybe_end(c);
    return;
  }
  char err[256] = "";
  ProtobufCMessage *req = NULL;
  switch (c->m) {
  case M_OPTIONS:
    if ((req = request(c, &v1beta1__empty__descriptor)))
      send_batch(c, &s->options.base, true, GRPC_STATUS_OK, NULL);
    break;
  case M_LIST:
    if ((req = request(c, &v1beta1__empty__descriptor))) {
      c->stream = true;
      s->n_streams++;
      gmt_info("%s: the kubelet watches the devices (ListAndWatch)", s->name);
      send_list(c);
    }
    break;
  case M_PREFER:
    if ((req = request(c, &v1beta1__preferred_allocation_request__descriptor))) {
      V1beta1__PreferredAllocationResponse *r = NULL;
      int rc =
          s->ops->prefer(s->data, (V1beta1__PreferredAllocationRequest *)req, &r, err, sizeof err);
      answer(c, rc, r ? &r->base : NULL, err);
    }
    break;
  case M_ALLOCATE:
    if ((req = request(c, &v1beta1__allocate_request__descriptor))) {
      V1beta1__AllocateResponse *r = NULL;
      int rc = s->ops->allocate(s->data, (V1beta1__AllocateRequest *)req, &r, err, sizeof err);
      answer(c, rc, r ? &r->base : NULL, err);
    }
    break;
  case M_PRESTART:
    if ((req = request(c, &v1beta1__pre_start_container_request__descriptor))) {
      V1beta1__PreStartContainerResponse r = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
      send_batch(c, &r.base, true, GRPC_STATUS_OK, NULL);
    }
    break;
  case M_UNKNOWN:
    send_batch(c, NULL, true, GRPC_STATUS_UNIMPLEMENTED, "gmt-device-plugin: no such method");
    break;
  }
  if (req)
    protobuf_c_message_free_unpacked(req, NULL);
  maybe_end(c);
}

static void on_send(gmt_dp_tag_t *t, bool ok)
{
  call_t *c = gmt_dp_container_of(t, call_t, send_tag);
  c->send_pending = false;
  send_done(c);
  if (!ok)
    cancel(c);
  else if (c->stream && c->dirty && !c->gone && !c->s->closing) {
    c->dirty = false;
    send_list(c);
  }
  maybe_end(c);
}

static void on_close(gmt_dp_tag_t *t, bool ok)
{
  (void)ok; /* RECV_CLOSE_ON_SERVER always succeeds */
  call_t *c = gmt_dp_container_of(t, call_t, close_tag);
  c->close_pending = false;
  c->gone = true;
  if (c->stream) {
    c->s->n_streams--;
    gmt_info("%s: a ListAndWatch stream ended%s", c->s->name,
             c->cancelled ? " (cancelled, or its peer went away)" : "");
  }
  maybe_end(c);
}

static void on_shutdown(gmt_dp_tag_t *t, bool ok)
{
  (void)ok;
  gmt_dp_server_t *s = gmt_dp_container_of(t, gmt_dp_server_t, shutdown_tag);
  s->shutdown_pending = false;
  maybe_free_server(s);
}

void gmt_dp_server_changed(gmt_dp_server_t *s)
{
  for (call_t *c = s->calls; c; c = c->next) {
    if (!c->stream || c->gone)
      continue;
    if (c->send_pending)
      c->dirty = true;
    else
      send_list(c);
  }
}

void gmt_dp_server_tick(gmt_dp_server_t *s, uint64_t now_ms)
{
  for (call_t *c = s->calls; c; c = c->next) {
    /* A send may have started after now_ms was read. */
    uint64_t since = c->stream ? c->send_ms : c->started_ms;
    bool late =
        (!c->stream || c->send_pending) && now_ms > since && now_ms - since > GMT_DP_CALL_MS;
    if (late && !c->gone) {
      gmt_warn("%s: cancelled a %s that took over %d ms", s->name,
               c->stream ? "ListAndWatch stream whose send" : "call", GMT_DP_CALL_MS);
      cancel(c);
    }
  }
}

bool gmt_dp_server_socket_ok(const gmt_dp_server_t *s)
{
  struct stat st;
  return lstat(s->path, &st) == 0 && st.st_dev == s->dev && st.st_ino == s->ino;
}

unsigned gmt_dp_server_streams(const gmt_dp_server_t *s)
{
  return s->n_streams;
}

void gmt_dp_server_close(gmt_dp_server_t *s, void (*closed)(void *arg), void *arg)
{
  s->closing = true;
  s->closed = closed;
  s->closed_arg = arg;
  if (gmt_dp_server_socket_ok(s))
    unlink(s->path);
  s->shutdown_pending = true;
  grpc_server_shutdown_and_notify(s->srv, s->cq, &s->shutdown_tag);
  grpc_server_cancel_all_calls(s->srv);
}
