/* The node's GPUs: topology at start, lookups by bus id (devices.h). */
#include "devices.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "gmt_busid.h"

int gmt_devices_open(gmt_devices_t **out)
{
  gmt_devices_t *d = calloc(1, sizeof *d);
  if (!d)
    return -ENOMEM;
  int rc = gmt_nvml_load(NULL, &d->nvml, d->nvml_why, sizeof d->nvml_why);
  rc = gmt_topo_build(NULL, rc == 0 ? &d->nvml : NULL, d->nvml_why, &d->topo);
  if (rc < 0) {
    gmt_nvml_unload(&d->nvml);
    free(d);
    return rc;
  }
  /* gmt_topo_build initialized NVML and shut it down again; NVML counts
   * its inits, so one more keeps it up for the live numbers. */
  if (d->topo->nvml && d->nvml.Init_v2() == GMT_NVML_SUCCESS)
    d->have_nvml = true;
  else if (d->topo->nvml)
    snprintf(d->nvml_why, sizeof d->nvml_why, "nvmlInit_v2 failed after the topology was read");
  else
    snprintf(d->nvml_why, sizeof d->nvml_why, "%s", d->topo->nvml_error);
  if (!d->have_nvml)
    gmt_nvml_unload(&d->nvml);
  *out = d;
  return 0;
}

void gmt_devices_close(gmt_devices_t *d)
{
  if (!d)
    return;
  if (d->have_nvml) {
    (void)d->nvml.Shutdown();
    gmt_nvml_unload(&d->nvml);
  }
  gmt_topo_free(d->topo);
  free(d);
}

int gmt_devices_index_of_bus(const gmt_devices_t *d, const char *bus_id)
{
  gmt_busid_t want, have;
  if (!d || !d->topo || gmt_busid_parse(bus_id, &want) < 0)
    return -1;
  for (int i = 0; i < d->topo->n_gpus; i++)
    if (gmt_busid_parse(d->topo->gpus[i].bus_id, &have) == 0 && gmt_busid_equal(&want, &have))
      return d->topo->gpus[i].index;
  return -1;
}

const gmt_topo_gpu_t *gmt_devices_gpu(const gmt_devices_t *d, int index)
{
  for (int i = 0; d && d->topo && i < d->topo->n_gpus; i++)
    if (d->topo->gpus[i].index == index)
      return &d->topo->gpus[i];
  return NULL;
}

gmt_nvml_device_t gmt_devices_nvml_handle(const gmt_devices_t *d, int index)
{
  gmt_nvml_device_t h = NULL;
  if (!d || !d->have_nvml || index < 0 ||
      d->nvml.DeviceGetHandleByIndex_v2((unsigned)index, &h) != GMT_NVML_SUCCESS)
    return NULL;
  return h;
}
