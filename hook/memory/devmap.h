/* The node's names of this process's GPUs (docs/devices.md). CUDA numbers
 * the GPUs a process sees from 0 whatever the node calls them
 * (CUDA_VISIBLE_DEVICES with indices or UUIDs, a container given one GPU),
 * but tokens, reservations and reports are per node GPU: the scheduler
 * turns each GPU's PCI bus id into the node's index (Devices), once. */
#ifndef GMT_HOOK_DEVMAP_H
#define GMT_HOOK_DEVMAP_H

#include "gmt_busid.h"

/* The most GPUs the hook tells apart in one process. */
#define GMT_DEVMAP_MAX_GPUS 64

/* Asks the scheduler, through the pod manager, for the node's index of
 * each GPU this process sees, unless known already; a failed ask is tried
 * again at most once a second. Calls the driver and the pod manager: from
 * cuInit and the reporter thread, never with a lock held. */
void gmt__devmap_ensure(void);

/* Each GPU this process sees: its PCI bus id as the driver writes it
 * (cuDeviceGetPCIBusId), by CUDA ordinal, at most max of them. The count,
 * or -1 when the driver cannot say (not initialized, or a device whose id
 * cannot be read). Calls the real driver only. */
int gmt__devmap_bus_ids(char ids[][GMT_BUSID_SIZE], int max);

/* The node's index of CUDA ordinal `ordinal`, for everything the hook
 * sends. In order: the scheduler's answer; else a CUDA_VISIBLE_DEVICES of
 * indices maps ordinal i to its i-th entry (read up to the first entry
 * that is not one, as CUDA reads it); else the ordinal itself. -1 stays
 * -1. */
int gmt__node_device(int ordinal);

#endif
