/* The node's GPUs in `gmt status` (status_devices.h). */
#include "status_devices.h"
#include "gmt_bytes.h"
#include "json_fmt.h"

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static json_object *u64(uint64_t v)
{
  return json_object_new_int64(v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v);
}

/* A number as short as it reads back, or null when not known. */
static json_object *num_or_null(double v, bool known)
{
  return known ? gmt_json_double(v) : NULL;
}

static json_object *str_or_null(const char *s)
{
  return s && s[0] ? json_object_new_string(s) : NULL;
}

/* Adds key: val, where a NULL val is JSON null unless it was meant to be
 * an object (then want is true and it is out of memory). */
static int put(json_object *o, const char *key, json_object *val, bool want)
{
  if (!val && want)
    return -1;
  if (json_object_object_add(o, key, val) != 0) {
    json_object_put(val);
    return -1;
  }
  return 0;
}

static json_object *device_json(const Gmt__DeviceStatus *d)
{
  json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  int rc = put(o, "index", json_object_new_int64(d->index), true);
  rc |= put(o, "bus_id", str_or_null(d->bus_id), false);
  rc |= put(o, "uuid", str_or_null(d->uuid), false);
  rc |= put(o, "name", str_or_null(d->name), false);
  rc |= put(o, "memory_total", d->memory_total ? u64(d->memory_total) : NULL, d->memory_total);
  rc |= put(o, "memory_free", u64(d->memory_free), true);
  rc |= put(o, "memory_reserved", u64(d->memory_reserved), true);
  rc |= put(o, "utilization", num_or_null(d->utilization, d->utilization >= 0), false);
  rc |= put(o, "probe_delay_ms", num_or_null(d->probe_delay_ms, d->probe_delay_ms >= 0), false);
  rc |= put(o, "tokens_waiting", json_object_new_int64(d->tokens_waiting), true);
  rc |= put(o, "token_holder", str_or_null(d->token_holder), false);
  rc |= put(o, "score", num_or_null(d->score, true), true);
  rc |= put(o, "sample_age_ms", u64(d->sample_age_ms), true);
  if (rc) {
    json_object_put(o);
    return NULL;
  }
  return o;
}

json_object *gmt_status_devices_json(const Gmt__StatusReply *st)
{
  json_object *arr = json_object_new_array();
  for (size_t i = 0; arr && i < st->n_devices; i++) {
    json_object *d = device_json(st->devices[i]);
    if (!d || json_object_array_add(arr, d) != 0) {
      json_object_put(d);
      json_object_put(arr);
      return NULL;
    }
  }
  return arr;
}

/* A name from NVML or a pod: no control characters on the terminal. */
static void safe(FILE *f, const char *s, int width)
{
  int n = 0;
  for (; s && *s; s++, n++)
    fputc(iscntrl((unsigned char)*s) ? '?' : *s, f);
  for (; n < width; n++)
    fputc(' ', f);
}

void gmt_status_device_memory(char *buf, size_t len, const Gmt__DeviceStatus *d)
{
  char fr[32], tot[32] = "?";
  gmt_human_bytes(fr, sizeof fr, d->memory_free);
  if (d->memory_total)
    gmt_human_bytes(tot, sizeof tot, d->memory_total);
  snprintf(buf, len, "%s / %s", fr, tot);
}

void gmt_status_devices_print(FILE *f, const Gmt__StatusReply *st)
{
  if (st->n_devices == 0)
    return;
  /* FREE is the card's (NVML); RESERVED is gmt's ledger; PROBE the last
   * gmt-probe delay; TOKENS the calls waiting for its token and the pod
   * holding it; SCORE the best-GPU score (docs/devices.md). */
  fprintf(f, "\n%-3s  %-12s  %-21s  %-10s  %-4s  %-9s  %-6s  %-12s  %-5s  %s\n", "GPU", "BUS ID",
          "FREE / TOTAL", "RESERVED", "UTIL", "PROBE", "TOKENS", "HOLDER", "SCORE", "NAME");
  uint64_t age = 0;
  for (size_t i = 0; i < st->n_devices; i++) {
    const Gmt__DeviceStatus *d = st->devices[i];
    char mem[80], resv[32], util[16], probe[40];
    gmt_status_device_memory(mem, sizeof mem, d);
    gmt_human_bytes(resv, sizeof resv, d->memory_reserved);
    if (d->utilization >= 0)
      snprintf(util, sizeof util, "%.0f%%", d->utilization * 100);
    else
      snprintf(util, sizeof util, "-");
    if (d->probe_delay_ms >= 0)
      snprintf(probe, sizeof probe, "%.3f ms", d->probe_delay_ms);
    else
      snprintf(probe, sizeof probe, "-");
    fprintf(f, "%-3d  ", d->index);
    safe(f, d->bus_id && d->bus_id[0] ? d->bus_id : "?", 12);
    fprintf(f, "  %-21s  %-10s  %-4s  %-9s  %-6u  ", mem, resv, util, probe, d->tokens_waiting);
    safe(f, d->token_holder && d->token_holder[0] ? d->token_holder : "-", 12);
    fprintf(f, "  %-5.3f  ", d->score);
    safe(f, d->name && d->name[0] ? d->name : "?", 0);
    fputc('\n', f);
    if (d->sample_age_ms > age)
      age = d->sample_age_ms;
  }
  fprintf(f, "(sampled %llu ms ago)\n", (unsigned long long)age);
}
