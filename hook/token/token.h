/* The launch gate (hook/token/token.c): a kernel starts only while this process
 * holds its pod's token on the device (docs/protocol.md, "Token"). */
#ifndef GMT_HOOK_TOKEN_H
#define GMT_HOOK_TOKEN_H

#include "driver.h"

/* Devices gated by ordinal; a launch on a higher one passes ungated. */
#define GMT_TOKEN_MAX_DEVICES 64

/* Called by every launch wrapper before the real launch, on the calling
 * context's device. Fast path: one clock read compared with the device's
 * token expiry. Slow path (no valid token): waits for a token from the pod
 * manager; never blocks a process that has no pod manager. Returns
 * CUDA_SUCCESS, or CUDA_ERROR_INVALID_DEVICE when the scheduler refuses
 * the device (not among the pod's devices=; asked again a second later):
 * the launch then fails with it. */
CUresult gmt__token_check(void);

/* The same, its answer dropped: the gate that swap's waits pass. */
void gmt__token_gate(void);

/* gmt__token_check for a launch on stream s
 * (cuLaunchCooperativeKernelMultiDevice: one launch per device, each on
 * its own stream's context). */
CUresult gmt__token_check_stream(CUstream s);

/* A synchronize of the calling thread begins: a latency process waits for
 * its work there, which may be queued behind a batch kernel for longer
 * than a launch's ring, so the bell rings on (GMT_BELL_DRAIN_US) until it
 * returns; else a batch pod launches meanwhile and the process's next
 * request waits behind that kernel too. */
void gmt__token_syncing(void);

/* A synchronize of the calling thread returned: a latency process's work
 * there is done, so the bell it rang on the context's device is hushed. */
void gmt__token_synced(void);

#endif
