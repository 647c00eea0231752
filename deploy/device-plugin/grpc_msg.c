/* protobuf-c messages in and out of gRPC byte buffers (grpc_msg.h). */
#include "grpc_msg.h"

#include <grpc/byte_buffer_reader.h>
#include <grpc/support/time.h>
#include <stdlib.h>

grpc_byte_buffer *gmt_dp_msg_pack(const ProtobufCMessage *msg)
{
  size_t len = protobuf_c_message_get_packed_size(msg);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf)
    return NULL;
  protobuf_c_message_pack(msg, buf);
  grpc_slice s = grpc_slice_from_copied_buffer((const char *)buf, len);
  free(buf);
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
  return bb;
}

ProtobufCMessage *gmt_dp_msg_unpack(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *desc)
{
  if (!bb || grpc_byte_buffer_length(bb) > GMT_DP_MAX_MESSAGE)
    return NULL;
  grpc_byte_buffer_reader r;
  if (!grpc_byte_buffer_reader_init(&r, bb))
    return NULL;
  grpc_slice s = grpc_byte_buffer_reader_readall(&r);
  grpc_byte_buffer_reader_destroy(&r);
  ProtobufCMessage *m =
      protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
  grpc_slice_unref(s);
  return m;
}

gpr_timespec gmt_dp_deadline(int ms)
{
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}
