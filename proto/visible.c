/* CUDA_VISIBLE_DEVICES from a Pick's answer (see gmt_visible.h). The
 * reply comes from a daemon: what goes into the environment is checked
 * here, so that a comma or a blank in a UUID cannot make CUDA see GPUs
 * that were not picked. */
#include "gmt_visible.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* "GPU-xxxxxxxx-...", "MIG-...": letters, digits, '-' (and '/' of old MIG
 * names); nothing CUDA would split on. */
static int uuid_ok(const char *u)
{
  for (; *u; u++)
    if (!isalnum((unsigned char)*u) && *u != '-' && *u != '/')
      return 0;
  return 1;
}

int gmt_visible_from_pick(const Gmt__PickReply *r, char *buf, size_t len)
{
  if (len)
    buf[0] = '\0';
  if (!r || r->n_devices == 0)
    return -ENODEV;
  if (r->n_uuids > r->n_devices)
    return -EPROTO;
  size_t o = 0;
  for (size_t i = 0; i < r->n_devices; i++) {
    const char *u = i < r->n_uuids && r->uuids[i] ? r->uuids[i] : "";
    if (r->devices[i] < 0 || !uuid_ok(u)) {
      if (len)
        buf[0] = '\0';
      return -EPROTO;
    }
    int n = u[0] ? snprintf(buf + o, len > o ? len - o : 0, "%s%s", i ? "," : "", u)
                 : snprintf(buf + o, len > o ? len - o : 0, "%s%d", i ? "," : "", r->devices[i]);
    if (n < 0 || (size_t)n >= (len > o ? len - o : 0)) {
      if (len)
        buf[0] = '\0';
      return -ENOSPC;
    }
    o += (size_t)n;
  }
  return 0;
}

int gmt_visible_from_allowed(const Gmt__PickReply *r, char *buf, size_t len)
{
  if (len)
    buf[0] = '\0';
  if (!r)
    return -EPROTO;
  if (!r->confined)
    return GMT_VISIBLE_ALL;
  return gmt_visible_from_pick(r, buf, len);
}

const char *gmt_visible_allowed_strerror(int rc)
{
  switch (rc) {
  case -ENODEV: return "its devices= names none of this node's GPUs";
  case -ENOSPC: return "its GPUs' UUIDs are too long for CUDA_VISIBLE_DEVICES";
  default: return "the scheduler's answer could not be used (malformed)";
  }
}
