/* One Pick, as `gmt run --auto-device` or a hooked process sends it, for
 * test_pick.py: to gmt-schd directly or through a pod manager.
 *
 *   pick_call URL [--pod POD] [--count N] [--bytes B] [--timeout-ms MS]
 *
 * Prints one line of JSON: {"ok":true,"cached":...,"devices":[...],
 * "uuids":[...],"scored":[{"index":..,"score":..,...}]} for a PickReply,
 * {"ok":false,"code":N,"message":"..."} for an Error, and exits 0; prints
 * {"ok":false,"noreply":"why"} and exits 1 when no reply came. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_error.h"
#include "gmt_wire.h"

static void json_str(const char *s)
{
  putchar('"');
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: pick_call URL [--pod POD] [--count N] [--bytes B] [--timeout-ms MS]\n");
    return 2;
  }
  Gmt__PickRequest r = GMT__PICK_REQUEST__INIT;
  int timeout_ms = 10000;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--pod"))
      r.pod = argv[i + 1];
    else if (!strcmp(argv[i], "--count"))
      r.count = (uint32_t)strtoul(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--bytes"))
      r.bytes = strtoull(argv[i + 1], NULL, 0);
    else if (!strcmp(argv[i], "--timeout-ms"))
      timeout_ms = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "pick_call: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  gmt_client_t *c = NULL;
  Gmt__Envelope req = GMT__ENVELOPE__INIT, *rep = NULL;
  gmt_wire_set_body(&req, GMT__ENVELOPE__BODY_PICK_REQ, &r);
  int rc = gmt_client_open(&c, argv[1], GMT_CLIENT_DIAL_NOW);
  if (rc == 0)
    rc = gmt_client_call(c, &req, &rep, timeout_ms);
  if (rc == 0 && !rep)
    rc = -EIO;
  if (rc < 0) {
    printf("{\"ok\":false,\"noreply\":");
    json_str(gmt_strerror(rc));
    printf("}\n");
    gmt_client_close(c);
    return 1;
  }
  if (rep->body_case == GMT__ENVELOPE__BODY_ERROR) {
    printf("{\"ok\":false,\"code\":%d,\"message\":", rep->error->code);
    json_str(rep->error->message);
    printf("}\n");
  } else if (rep->body_case == GMT__ENVELOPE__BODY_PICK_REP) {
    const Gmt__PickReply *p = rep->pick_rep;
    printf("{\"ok\":true,\"cached\":%s,\"devices\":[", p->cached ? "true" : "false");
    for (size_t i = 0; i < p->n_devices; i++)
      printf("%s%d", i ? "," : "", p->devices[i]);
    printf("],\"uuids\":[");
    for (size_t i = 0; i < p->n_uuids; i++) {
      printf("%s", i ? "," : "");
      json_str(p->uuids[i]);
    }
    printf("],\"scored\":[");
    for (size_t i = 0; i < p->n_scored; i++) {
      const Gmt__DeviceStatus *d = p->scored[i];
      printf("%s{\"index\":%d,\"bus_id\":", i ? "," : "", d->index);
      json_str(d->bus_id);
      printf(",\"uuid\":");
      json_str(d->uuid);
      printf(",\"memory_total\":%llu,\"memory_free\":%llu,\"memory_reserved\":%llu,"
             "\"utilization\":%g,\"probe_delay_ms\":%g,\"tokens_waiting\":%u,\"token_holder\":",
             (unsigned long long)d->memory_total, (unsigned long long)d->memory_free,
             (unsigned long long)d->memory_reserved, d->utilization, d->probe_delay_ms,
             d->tokens_waiting);
      json_str(d->token_holder);
      printf(",\"score\":%.17g,\"sample_age_ms\":%llu}", d->score,
             (unsigned long long)d->sample_age_ms);
    }
    printf("]}\n");
  } else {
    printf("{\"ok\":false,\"code\":0,\"message\":\"reply of kind %d\"}\n", (int)rep->body_case);
  }
  gmt_wire_free(rep);
  gmt_client_close(c);
  return 0;
}
