/* A process's counters as one value (gmt_counters.h). */
#include "gmt_counters.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* More than 16 varint counters and their tags ever take: a report whose
 * unknown fields pack to more is no old hook's. */
#define LEGACY_MAX_BYTES 1024

void gmt_counters_copy(Gmt__ProcessCounters *dst, const Gmt__ProcessCounters *src)
{
  if (!src) {
    gmt__process_counters__init(dst);
    return;
  }
  *dst = *src;
  dst->base.n_unknown_fields = 0;
  dst->base.unknown_fields = NULL;
}

void gmt_report_counters(const Gmt__ProcessReport *r, Gmt__ProcessCounters *out)
{
  gmt__process_counters__init(out);
  if (r->counters) {
    gmt_counters_copy(out, r->counters);
    return;
  }
  if (r->base.n_unknown_fields == 0)
    return;
  /* The old fields, packed again as they came, are a ProcessCounters. */
  Gmt__ProcessCounters carrier = GMT__PROCESS_COUNTERS__INIT;
  carrier.base.n_unknown_fields = r->base.n_unknown_fields;
  carrier.base.unknown_fields = r->base.unknown_fields;
  size_t n = gmt__process_counters__get_packed_size(&carrier);
  uint8_t *buf = n <= LEGACY_MAX_BYTES ? malloc(n ? n : 1) : NULL;
  if (!buf)
    return;
  gmt__process_counters__pack(&carrier, buf);
  Gmt__ProcessCounters *c = gmt__process_counters__unpack(NULL, n, buf);
  free(buf);
  if (c) {
    gmt_counters_copy(out, c);
    gmt__process_counters__free_unpacked(c, NULL);
  }
}

const Gmt__ProcessCounters *gmt_counters_of(const Gmt__ProcessCounters *c)
{
  static const Gmt__ProcessCounters zero = GMT__PROCESS_COUNTERS__INIT;
  return c ? c : &zero;
}

void gmt_counters_add(Gmt__ProcessCounters *dst, const Gmt__ProcessCounters *src)
{
  const ProtobufCMessageDescriptor *d = &gmt__process_counters__descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->type != PROTOBUF_C_TYPE_UINT64 || f->label == PROTOBUF_C_LABEL_REPEATED)
      continue;
    uint64_t *to = (uint64_t *)((char *)dst + f->offset);
    uint64_t add = *(const uint64_t *)((const char *)src + f->offset);
    *to = *to > UINT64_MAX - add ? UINT64_MAX : *to + add;
  }
}

/* The bytes a scalar field takes in its C struct (protobuf-c's layout). */
static size_t scalar_size(ProtobufCType t)
{
  switch (t) {
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_DOUBLE: return 8;
  case PROTOBUF_C_TYPE_INT32:
  case PROTOBUF_C_TYPE_SINT32:
  case PROTOBUF_C_TYPE_SFIXED32:
  case PROTOBUF_C_TYPE_UINT32:
  case PROTOBUF_C_TYPE_FIXED32:
  case PROTOBUF_C_TYPE_FLOAT:
  case PROTOBUF_C_TYPE_ENUM: return 4;
  case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
  default: return 0;
  }
}

bool gmt_counters_same(const Gmt__ProcessCounters *a, const Gmt__ProcessCounters *b)
{
  const ProtobufCMessageDescriptor *d = &gmt__process_counters__descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    size_t n = scalar_size(f->type);
    /* Counters are scalars (test_counters.c holds that): a field of
     * another kind is never called the same. */
    if (!n || f->label == PROTOBUF_C_LABEL_REPEATED)
      return false;
    if (memcmp((const char *)a + f->offset, (const char *)b + f->offset, n) != 0)
      return false;
  }
  return true;
}
