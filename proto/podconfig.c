/* A pod's config as both daemons hold it (gmt_podconfig.h). */
#include "gmt_podconfig.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gmt_podcfg_copy(Gmt__PodConfig *dst, const Gmt__PodConfig *src)
{
  char *name = src->name ? strdup(src->name) : NULL;
  int32_t *devices = src->n_devices ? malloc(src->n_devices * sizeof *devices) : NULL;
  if ((src->name && !name) || (src->n_devices && !devices)) {
    free(name);
    free(devices);
    return -ENOMEM;
  }
  if (src->n_devices)
    memcpy(devices, src->devices, src->n_devices * sizeof *devices);
  gmt_podcfg_clear(dst);
  *dst = *src;
  dst->base.n_unknown_fields = 0;
  dst->base.unknown_fields = NULL;
  dst->name = name;
  dst->devices = devices;
  return 0;
}

void gmt_podcfg_clear(Gmt__PodConfig *dst)
{
  /* An initialised config's name is protobuf-c's static "". */
  if (dst->name != protobuf_c_empty_string)
    free(dst->name);
  free(dst->devices);
  gmt__pod_config__init(dst);
}

bool gmt_podcfg_devices_allow(const int32_t *devices, size_t n, int32_t device)
{
  for (size_t i = 0; i < n; i++)
    if (devices[i] == device)
      return true;
  return n == 0;
}

const char *gmt_podcfg_devices_str(const int32_t *devices, size_t n, char *buf, size_t len)
{
  if (!len)
    return buf;
  snprintf(buf, len, "%s", n ? "" : "all");
  size_t at = strlen(buf);
  for (size_t i = 0; i < n; i++) {
    char one[16];
    int w = snprintf(one, sizeof one, "%s%d", i ? "," : "", (int)devices[i]);
    /* Room for this one, and for ",..." if more follow. */
    if (at + (size_t)w + (i + 1 < n ? 4 : 0) >= len) {
      snprintf(buf + at, len - at, "%s", len - at > 4 ? ",..." : "");
      break;
    }
    memcpy(buf + at, one, (size_t)w + 1);
    at += (size_t)w;
  }
  return buf;
}

/* An enum value by its config name: the value's name after its prefix,
 * in lower case (PIN_ADAPTIVE: "adaptive", MEM_SWAP: "swap"), as
 * gmt_pin_mode_name() and gmt_mem_mode_name() say it. */
static void enum_str(const ProtobufCEnumDescriptor *d, int v, char *buf, size_t len)
{
  const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, v);
  const char *name = ev ? strchr(ev->name, '_') : NULL;
  snprintf(buf, len, "%s", name ? name + 1 : "unknown");
  for (char *p = buf; *p; p++)
    *p = (char)tolower((unsigned char)*p);
}

/* One field of c as the log says it, or false for a kind of field that
 * PodConfig does not have (then it is left out of the diff). */
static bool field_str(const ProtobufCFieldDescriptor *f, const Gmt__PodConfig *c, char *buf,
                      size_t len)
{
  const char *at = (const char *)c + f->offset;
  if (f->label == PROTOBUF_C_LABEL_REPEATED) {
    if (f->type != PROTOBUF_C_TYPE_SINT32 && f->type != PROTOBUF_C_TYPE_INT32)
      return false;
    size_t n = *(const size_t *)((const char *)c + f->quantifier_offset);
    gmt_podcfg_devices_str(*(int32_t *const *)at, n, buf, len);
    return true;
  }
  switch (f->type) {
  case PROTOBUF_C_TYPE_DOUBLE: snprintf(buf, len, "%g", *(const double *)at); return true;
  case PROTOBUF_C_TYPE_UINT64: snprintf(buf, len, "%" PRIu64, *(const uint64_t *)at); return true;
  case PROTOBUF_C_TYPE_INT64: snprintf(buf, len, "%" PRId64, *(const int64_t *)at); return true;
  case PROTOBUF_C_TYPE_UINT32: snprintf(buf, len, "%" PRIu32, *(const uint32_t *)at); return true;
  case PROTOBUF_C_TYPE_INT32:
  case PROTOBUF_C_TYPE_SINT32: snprintf(buf, len, "%" PRId32, *(const int32_t *)at); return true;
  case PROTOBUF_C_TYPE_BOOL:
    snprintf(buf, len, "%s", *(const protobuf_c_boolean *)at ? "true" : "false");
    return true;
  case PROTOBUF_C_TYPE_ENUM: enum_str(f->descriptor, *(const int *)at, buf, len); return true;
  case PROTOBUF_C_TYPE_STRING:
    snprintf(buf, len, "%s", *(char *const *)at ? *(char *const *)at : "");
    return true;
  default: return false;
  }
}

/* Whether field f is the same in a and b: by value, not as printed. */
static bool field_same(const ProtobufCFieldDescriptor *f, const Gmt__PodConfig *a,
                       const Gmt__PodConfig *b)
{
  const char *x = (const char *)a + f->offset, *y = (const char *)b + f->offset;
  if (f->label == PROTOBUF_C_LABEL_REPEATED) {
    size_t n = *(const size_t *)((const char *)a + f->quantifier_offset);
    size_t m = *(const size_t *)((const char *)b + f->quantifier_offset);
    return n == m && (!n || !memcmp(*(void *const *)x, *(void *const *)y, n * sizeof(int32_t)));
  }
  switch (f->type) {
  case PROTOBUF_C_TYPE_DOUBLE: return *(const double *)x == *(const double *)y;
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_INT64: return *(const uint64_t *)x == *(const uint64_t *)y;
  case PROTOBUF_C_TYPE_STRING:
    return !strcmp(*(char *const *)x ? *(char *const *)x : "",
                   *(char *const *)y ? *(char *const *)y : "");
  case PROTOBUF_C_TYPE_BOOL:
    return !*(const protobuf_c_boolean *)x == !*(const protobuf_c_boolean *)y;
  default: return *(const int32_t *)x == *(const int32_t *)y; /* the 32-bit kinds and enums */
  }
}

size_t gmt_podcfg_diff(const Gmt__PodConfig *a, const Gmt__PodConfig *b, char *buf, size_t len)
{
  const ProtobufCMessageDescriptor *d = &gmt__pod_config__descriptor;
  size_t changed = 0, at = 0;
  if (len)
    buf[0] = '\0';
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    char was[96], now[96]; /* a long devices= list ends in ",..." where it always did */
    /* field_str first: it knows which kinds of field there are. */
    if (!strcmp(f->name, "name") || !field_str(f, a, was, sizeof was) || field_same(f, a, b) ||
        !field_str(f, b, now, sizeof now))
      continue;
    /* GPU_MEM, the config's fourth column, is "memory" in the log. */
    const char *label = strcmp(f->name, "memory_limit") ? f->name : "memory";
    if (at < len)
      at += (size_t)snprintf(buf + at, len - at, "%s%s %s -> %s", changed ? ", " : "", label, was,
                             now);
    changed++;
  }
  return changed;
}
