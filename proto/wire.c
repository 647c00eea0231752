/* Envelopes: packing, unpacking with version and sanity checks, and the
 * check a caller makes on a reply. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_error.h"
#include "gmt_wire.h"

int gmt_wire_pack(const Gmt__Envelope *env, void **buf, size_t *len)
{
  Gmt__Envelope copy = *env;
  size_t n;
  void *p;

  copy.version = GMT_PROTOCOL_VERSION;
  n = gmt__envelope__get_packed_size(&copy);
  p = malloc(n ? n : 1);
  if (!p)
    return -ENOMEM;
  gmt__envelope__pack(&copy, p);
  *buf = p;
  *len = n;
  return 0;
}

/* Whether m or a message inside it kept an unknown field numbered 0.
 * protobuf-c refuses field 0 written as 0x00 but keeps it when written as
 * an overlong varint (0x80 0x00), and then packs it as 0x00: a frame we
 * took would not decode again where a pod manager forwards it (found by
 * test/fuzz). gmt.proto has no recursive message, so this ends. */
static bool has_field_zero(const ProtobufCMessage *m)
{
  for (unsigned i = 0; i < m->n_unknown_fields; i++)
    if (m->unknown_fields[i].tag == 0)
      return true;
  const ProtobufCMessageDescriptor *d = m->descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    const char *at = (const char *)m + f->offset;
    const ProtobufCMessage *sub;
    if (f->type != PROTOBUF_C_TYPE_MESSAGE)
      continue;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
      uint32_t c; /* the members of a oneof share their storage */
      memcpy(&c, (const char *)m + f->quantifier_offset, sizeof c);
      if (c != f->id)
        continue;
    }
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t n;
      ProtobufCMessage **v;
      memcpy(&n, (const char *)m + f->quantifier_offset, sizeof n);
      memcpy(&v, at, sizeof v);
      for (size_t k = 0; k < n; k++)
        if (has_field_zero(v[k]))
          return true;
    } else {
      memcpy(&sub, at, sizeof sub);
      if (sub && has_field_zero(sub))
        return true;
    }
  }
  return false;
}

int gmt_wire_unpack(const void *buf, size_t len, Gmt__Envelope **env)
{
  Gmt__Envelope *e;

  *env = NULL;
  e = gmt__envelope__unpack(NULL, len, buf);
  if (!e)
    return GMT_EDECODE;
  if (e->version > GMT_PROTOCOL_VERSION) {
    gmt__envelope__free_unpacked(e, NULL);
    return GMT_EVERSION;
  }
  /* Version 0 is an empty or foreign frame, not an old gmt. */
  if (e->version == 0 || has_field_zero(&e->base)) {
    gmt__envelope__free_unpacked(e, NULL);
    return GMT_EDECODE;
  }
  *env = e;
  return 0;
}

int gmt_wire_set_body(Gmt__Envelope *env, Gmt__Envelope__BodyCase c, const void *msg)
{
  /* The oneof's case is its field's number; the field says where its
   * pointer lives and what message it points to. */
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field(&gmt__envelope__descriptor, (unsigned)c);

  if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE || !msg ||
      ((const ProtobufCMessage *)msg)->descriptor != f->descriptor)
    return -EINVAL;
  memcpy((char *)env + f->offset, &msg, sizeof(msg));
  env->body_case = c;
  return 0;
}

void gmt_wire_free(Gmt__Envelope *env)
{
  if (env)
    gmt__envelope__free_unpacked(env, NULL);
}

int gmt_wire_expect(const Gmt__Envelope *rep, Gmt__Envelope__BodyCase expect, char *errbuf,
                    size_t errlen)
{
  if (errbuf && errlen)
    errbuf[0] = '\0';
  if (rep->body_case == expect)
    return 0;
  if (rep->body_case == GMT__ENVELOPE__BODY_ERROR && rep->error) {
    int code = rep->error->code < 0 ? rep->error->code : -EIO;

    if (errbuf && errlen)
      snprintf(errbuf, errlen, "%s",
               rep->error->message && rep->error->message[0] ? rep->error->message
                                                             : gmt_strerror(code));
    return code;
  }
  if (errbuf && errlen)
    snprintf(errbuf, errlen, "unexpected reply (body %d, wanted %d)", (int)rep->body_case,
             (int)expect);
  return GMT_EUNEXPECTED;
}

/* A config enum's value <-> its name in resource-config.txt and gmt status. */
static const char *enum_name(const char *const *names, size_t n, int v)
{
  return v >= 0 && (size_t)v < n ? names[v] : "unknown";
}

static int enum_parse(const char *const *names, size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(name, names[i]) == 0)
      return (int)i;
  return -EINVAL;
}

#define NAMES(a) (a), sizeof(a) / sizeof((a)[0])

static const char *const pin_names[] = {
    [GMT__PIN_MODE__PIN_OFF] = "off",
    [GMT__PIN_MODE__PIN_PROFILE] = "profile",
    [GMT__PIN_MODE__PIN_USE] = "use",
    [GMT__PIN_MODE__PIN_ADAPTIVE] = "adaptive",
};

static const char *const mem_names[] = {
    [GMT__MEM_MODE__MEM_STRICT] = "strict",
    [GMT__MEM_MODE__MEM_SWAP] = "swap",
    [GMT__MEM_MODE__MEM_UM] = "um",
};

static const char *const class_names[] = {
    [GMT__POD_CLASS__CLASS_BATCH] = "batch",
    [GMT__POD_CLASS__CLASS_LATENCY] = "latency",
};

const char *gmt_pod_class_name(int c)
{
  return enum_name(NAMES(class_names), c);
}

int gmt_pod_class_parse(const char *name)
{
  return enum_parse(NAMES(class_names), name);
}

gmt_token_terms_t gmt_token_terms_of(const Gmt__TokenReply *r)
{
  return (gmt_token_terms_t){r->queue_bound_us, r->idle_us, r->ahead_us,
                             r->bell_max_us,    r->turn_ms, r->alone ? 1u : 0u};
}

void gmt_token_terms_put(Gmt__TokenReply *r, gmt_token_terms_t t)
{
  r->queue_bound_us = t.queue_bound_us;
  r->idle_us = t.idle_us;
  r->ahead_us = t.ahead_us;
  r->bell_max_us = t.bell_max_us;
  r->turn_ms = t.turn_ms;
  r->alone = t.alone != 0;
}

const char *gmt_pin_mode_name(int mode)
{
  return enum_name(NAMES(pin_names), mode);
}

int gmt_pin_mode_parse(const char *name)
{
  return enum_parse(NAMES(pin_names), name);
}

const char *gmt_mem_mode_name(int mode)
{
  return enum_name(NAMES(mem_names), mode);
}

int gmt_mem_mode_parse(const char *name)
{
  return enum_parse(NAMES(mem_names), name);
}

bool gmt_mem_mode_moves(int mode)
{
  return mode == GMT__MEM_MODE__MEM_SWAP || mode == GMT__MEM_MODE__MEM_UM;
}

const char *gmt_schd_from_env(void)
{
  const char *env = getenv(GMT_SCHD_ENV);
  return env && env[0] ? env : NULL;
}
