/* Replies shared by gmt-schd's handlers (see reply.h). */
#include "reply.h"

#include <stdio.h>
#include <string.h>

#include "gmt_error.h"
#include "gmt_log.h"

void gmt__reply_nopod(gmt_call_t *call, const gmt_config_t *cfg, const char *name)
{
  char sb[96], list[320];
  size_t len = 0, i;
  list[0] = '\0';
  for (i = 0; i < cfg->npods; i++) {
    const char *n = cfg->pods[i].name;
    /* Leave room for ", ... (N more)". */
    if (len + strlen(n) + 2 > sizeof list - 24)
      break;
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", n);
  }
  if (i < cfg->npods)
    snprintf(list + len, sizeof list - len, ", ... (%zu more)", cfg->npods - i);
  gmt_call_reply_error(call, GMT_ENOPOD, "pod '%s' is not in %s (listed: %s)",
                       gmt_shown(name, sb, sizeof sb), cfg->path, cfg->npods ? list : "none");
}

void gmt__reply_device_refused(gmt_call_t *call, const gmt_config_t *cfg, gmt_pod_t *pod,
                               uint32_t pid, int device, const char *what)
{
  char devs[96], words[sizeof pod->last_refusal];
  gmt_pod_config_devices_str(&pod->cfg, devs, sizeof devs);
  gmt_info("pod '%s' pid %u: %s on GPU %d refused: its devices= is %s", pod->cfg.name, pid, what,
           device, devs);
  snprintf(words, sizeof words,
           "pod '%s' may use GPU%s %s only (devices= in %s); %s on GPU %d refused", pod->cfg.name,
           pod->cfg.ndevices == 1 ? "" : "s", devs, cfg->path, what, device);
  gmt_pods_refused(pod, GMT_REFUSED_DEVICES, words);
  gmt_call_reply_error(call, GMT_EDEVICE, "%s", words);
}
