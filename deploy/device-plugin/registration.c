/* Register with the kubelet (registration.h): a channel of its own per
 * call, closed when the call ends. */
#include "registration.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <grpc/grpc_security.h>

#include "cq_tag.h"
#include "grpc_msg.h"

struct gmt_dp_reg {
  gmt_dp_tag_t tag;
  grpc_channel *channel;
  grpc_call *call;
  grpc_byte_buffer *send_buf, *recv_buf;
  grpc_metadata_array initial, trailing;
  grpc_status_code status;
  grpc_slice details;
  gmt_dp_register_cb cb;
  void *arg;
};
typedef struct gmt_dp_reg reg_t;

static void on_done(gmt_dp_tag_t *t, bool ok)
{
  reg_t *r = gmt_dp_container_of(t, reg_t, tag);
  char why[256];
  int status = r->status;
  if (!ok) {
    status = GRPC_STATUS_UNKNOWN;
    snprintf(why, sizeof why, "the call failed");
  } else {
    snprintf(why, sizeof why, "%.*s", (int)GRPC_SLICE_LENGTH(r->details),
             (const char *)GRPC_SLICE_START_PTR(r->details));
  }
  grpc_slice_unref(r->details);
  grpc_metadata_array_destroy(&r->initial);
  grpc_metadata_array_destroy(&r->trailing);
  if (r->recv_buf)
    grpc_byte_buffer_destroy(r->recv_buf);
  grpc_byte_buffer_destroy(r->send_buf);
  grpc_call_unref(r->call);
  grpc_channel_destroy(r->channel);
  gmt_dp_register_cb cb = r->cb;
  void *arg = r->arg;
  free(r);
  cb(arg, status, why);
}

int gmt_dp_register(grpc_completion_queue *cq, const char *kubelet_sock,
                    const V1beta1__RegisterRequest *req, gmt_dp_register_cb cb, void *arg,
                    gmt_dp_reg_t **reg)
{
  reg_t *r = calloc(1, sizeof *r);
  if (!r)
    return -ENOMEM;
  if (!(r->send_buf = gmt_dp_msg_pack(&req->base))) {
    free(r);
    return -ENOMEM;
  }
  r->tag.done = on_done;
  r->cb = cb;
  r->arg = arg;
  char target[4200];
  snprintf(target, sizeof target, "unix:%s", kubelet_sock);
  grpc_arg a = {.type = GRPC_ARG_INTEGER,
                .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                .value.integer = (int)GMT_DP_MAX_MESSAGE};
  grpc_channel_args args = {.num_args = 1, .args = &a};
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  r->channel = grpc_channel_create(target, creds, &args);
  grpc_channel_credentials_release(creds);
  r->call =
      grpc_channel_create_call(r->channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                               grpc_slice_from_static_string("/v1beta1.Registration/Register"),
                               NULL, gmt_dp_deadline(GMT_DP_REGISTER_MS), NULL);
  grpc_metadata_array_init(&r->initial);
  grpc_metadata_array_init(&r->trailing);
  r->details = grpc_empty_slice();

  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = r->send_buf;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &r->initial;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &r->recv_buf;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &r->trailing;
  ops[5].data.recv_status_on_client.status = &r->status;
  ops[5].data.recv_status_on_client.status_details = &r->details;
  grpc_call_error e = grpc_call_start_batch(r->call, ops, 6, &r->tag, NULL);
  if (e != GRPC_CALL_OK) {
    grpc_metadata_array_destroy(&r->initial);
    grpc_metadata_array_destroy(&r->trailing);
    grpc_byte_buffer_destroy(r->send_buf);
    grpc_call_unref(r->call);
    grpc_channel_destroy(r->channel);
    free(r);
    return -EIO;
  }
  *reg = r;
  return 0;
}

void gmt_dp_register_cancel(gmt_dp_reg_t *reg)
{
  grpc_call_cancel(reg->call, NULL);
}

bool gmt_dp_socket_id(const char *path, dev_t *dev, ino_t *ino)
{
  struct stat st;
  if (lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode))
    return false;
  *dev = st.st_dev;
  *ino = st.st_ino;
  return true;
}
