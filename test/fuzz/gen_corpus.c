/* Writes the seed corpus of test/fuzz/corpus/ (run by hand when the
 * schema or the dump format changes; the fuzz runs only read it):
 *
 *   gen_corpus DIR   DIR/envelope/<body>.bin  one envelope per body case,
 *                                              every field set
 *                    DIR/dump/sample.{json,gmtz}  a small traced history
 *
 * Seeds that reach every body and field let the fuzzer start deep in the
 * decoder instead of finding each field number by chance. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dump.h"
#include "gmt_wire.h"
#include "memhistory.h"

static void *xcalloc(size_t n, size_t size)
{
  void *p = calloc(n ? n : 1, size);
  if (!p) {
    perror("gen_corpus");
    exit(1);
  }
  return p; /* never freed: the program writes a few files and exits */
}

static ProtobufCMessage *filled(const ProtobufCMessageDescriptor *d, int depth);

/* It is built with ASan like the targets; its messages live until exit. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
  return "detect_leaks=0";
}

/* One value of field f at p: small and non-zero, so that it is packed. */
static void fill_value(const ProtobufCFieldDescriptor *f, void *p, int depth)
{
  switch (f->type) {
  case PROTOBUF_C_TYPE_INT32:
  case PROTOBUF_C_TYPE_SINT32:
  case PROTOBUF_C_TYPE_SFIXED32:
  case PROTOBUF_C_TYPE_UINT32:
  case PROTOBUF_C_TYPE_FIXED32: *(uint32_t *)p = 7; break;
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64: *(uint64_t *)p = 4096; break;
  case PROTOBUF_C_TYPE_FLOAT: *(float *)p = 0.25f; break;
  case PROTOBUF_C_TYPE_DOUBLE: *(double *)p = 0.5; break;
  case PROTOBUF_C_TYPE_BOOL: *(protobuf_c_boolean *)p = 1; break;
  case PROTOBUF_C_TYPE_ENUM: {
    const ProtobufCEnumDescriptor *e = f->descriptor;
    *(int *)p = e->n_values ? e->values[e->n_values - 1].value : 0;
    break;
  }
  case PROTOBUF_C_TYPE_STRING: *(const char **)p = "pod-a"; break;
  case PROTOBUF_C_TYPE_BYTES:
    *(ProtobufCBinaryData *)p = (ProtobufCBinaryData){.len = 3, .data = (uint8_t *)"abc"};
    break;
  case PROTOBUF_C_TYPE_MESSAGE:
    *(ProtobufCMessage **)p = depth > 0 ? filled(f->descriptor, depth - 1) : NULL;
    break;
  }
}

static size_t value_size(const ProtobufCFieldDescriptor *f)
{
  switch (f->type) {
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_DOUBLE: return 8;
  case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
  case PROTOBUF_C_TYPE_STRING:
  case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
  case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
  default: return 4;
  }
}

/* A message of type d with every field set; repeated fields get two
 * elements, nested messages down to depth levels. */
static ProtobufCMessage *filled(const ProtobufCMessageDescriptor *d, int depth)
{
  ProtobufCMessage *m = xcalloc(1, d->sizeof_message);
  protobuf_c_message_init(d, m);
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    char *at = (char *)m + f->offset;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
      continue; /* only the envelope has a oneof; its body is set by hand */
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      if (f->type == PROTOBUF_C_TYPE_MESSAGE && depth == 0)
        continue;
      size_t n = 2, sz = value_size(f);
      char *arr = xcalloc(n, sz);
      for (size_t k = 0; k < n; k++)
        fill_value(f, arr + k * sz, depth);
      memcpy(at, &arr, sizeof arr);
      *(size_t *)((char *)m + f->quantifier_offset) = n;
      continue;
    }
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset)
      *(protobuf_c_boolean *)((char *)m + f->quantifier_offset) = 1;
    fill_value(f, at, depth);
  }
  return m;
}

static void write_file(const char *dir, const char *name, const void *buf, size_t len)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
    fprintf(stderr, "gen_corpus: cannot write %s\n", path);
    exit(1);
  }
}

static void envelopes(const char *dir)
{
  const ProtobufCMessageDescriptor *d = &gmt__envelope__descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
      continue;
    Gmt__Envelope env = GMT__ENVELOPE__INIT;
    if (gmt_wire_set_body(&env, (Gmt__Envelope__BodyCase)f->id, filled(f->descriptor, 2)) != 0)
      exit(1);
    void *buf;
    size_t len;
    char name[128];
    if (gmt_wire_pack(&env, &buf, &len) != 0)
      exit(1);
    snprintf(name, sizeof name, "%s.bin", f->name);
    write_file(dir, name, buf, len);
    free(buf);
  }
}

/* A short trace: two processes, device and host memory, copies, a fault,
 * a pin, a free and an exit. */
static void dumps(const char *dir)
{
  gmt_memhistory_t *mh;
  uint64_t ts = 1000;
  gmt_alloc_site_t s = {.pc = 0x401234, .offset = 0x1234};
  snprintf(s.module, sizeof s.module, "train");
  snprintf(s.function, sizeof s.function, "load_batch");
  if (gmt_memhistory_new(&mh) != 0)
    exit(1);
  gmt_memhistory_process_start(mh, 100, 0, ts);
  gmt_memhistory_process_start(mh, 101, 100, ++ts);
  gmt_memhistory_alloc(mh, 100, GMT_ALLOC_DEVICE, GMT_ORIGIN_CALL, 0x200000000000, 1 << 20, &s,
                       ++ts, 100);
  gmt_memhistory_alloc(mh, 100, GMT_ALLOC_HOST_PAGEABLE, GMT_ORIGIN_MMAP, 0x7f0000000000, 4 << 20,
                       &s, ++ts, 100);
  for (int i = 0; i < 3; i++)
    gmt_memhistory_copy(mh, 100, GMT_COPY_H2D, 0x200000000000, 0x7f0000000000, 4096, ++ts, 50, 100,
                        0x10);
  gmt_memhistory_fault(mh, 100, 0x7f0000002000, 2, ++ts, 100);
  gmt_memhistory_pin(mh, 100, 0x7f0000000000, 4 << 20, &s, ++ts, 100);
  gmt_memhistory_alloc(mh, 101, GMT_ALLOC_MANAGED, GMT_ORIGIN_CALL, 0x300000000000, 1 << 20, NULL,
                       ++ts, 101);
  gmt_memhistory_free_at(mh, 100, 0x200000000000, ++ts, 100);
  gmt_memhistory_process_event(mh, 100, GMT_PROC_RECLAIM, 1, 500);
  gmt_memhistory_process_exit(mh, 101, 0, ++ts);
  gmt_trace_meta_t meta = {.root_pid = 100, .start_ns = 1000, .end_ns = ts + 1};
  char path[4096];
  snprintf(path, sizeof path, "%s/sample.json", dir);
  if (gmt_trace_dump_json(mh, &meta, path) != 0)
    exit(1);
  snprintf(path, sizeof path, "%s/sample.gmtz", dir);
  if (gmt_trace_dump_gmtz(mh, &meta, path) != 0)
    exit(1);
  gmt_memhistory_free(mh);
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: gen_corpus DIR\n");
    return 2;
  }
  char sub[4096];
  snprintf(sub, sizeof sub, "%s/envelope", argv[1]);
  if (mkdir(sub, 0755) != 0 && errno != EEXIST)
    return 1;
  envelopes(sub);
  snprintf(sub, sizeof sub, "%s/dump", argv[1]);
  if (mkdir(sub, 0755) != 0 && errno != EEXIST)
    return 1;
  dumps(sub);
  return 0;
}
