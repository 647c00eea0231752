/* protobuf-c messages in and out of gRPC byte buffers: the only place the
 * plugin meets gRPC's payloads. */
#ifndef GMT_DP_GRPC_MSG_H
#define GMT_DP_GRPC_MSG_H

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>

/* The largest message the plugin reads, and the receive limit of its
 * servers and channels: the kubelet's largest (an Allocate or a preferred
 * allocation naming every device) stays far below it. */
#define GMT_DP_MAX_MESSAGE (4u << 20)

/* msg packed into a new byte buffer (grpc_byte_buffer_destroy), or NULL
 * when out of memory. */
grpc_byte_buffer *gmt_dp_msg_pack(const ProtobufCMessage *msg);

/* bb unpacked as desc's message (protobuf_c_message_free_unpacked), or
 * NULL when bb is NULL (no message came) or does not decode. */
ProtobufCMessage *gmt_dp_msg_unpack(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *desc);

/* A deadline ms from now, on gRPC's monotonic clock. */
gpr_timespec gmt_dp_deadline(int ms);

#endif
