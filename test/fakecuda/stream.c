/* Streams and events of the fake driver. All work completes inside the call
 * that issues it, so a stream is only a device tag and an event is the time
 * at which it was recorded; synchronizes are where pools trim. */
#include "fakecuda.h"

#include <stdlib.h>
#include <time.h>

struct gmt__stream {
  int dev;
  unsigned flags;
  int priority;
};

struct gmt__event {
  unsigned flags;
  int recorded;
  struct timespec t;
};

CUresult gmt__stream_dev_locked(CUstream s, int *dev)
{
  if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
    return gmt__ctx_dev_locked(dev);
  if (!gmt__handle_ok(s, GMT__K_STREAM))
    return CUDA_ERROR_INVALID_HANDLE;
  *dev = ((struct gmt__stream *)s)->dev;
  return CUDA_SUCCESS;
}

void gmt__stream_reset_child(void) {} /* plain handles, freed by state.c */

static CUresult stream_create(CUstream *ph, unsigned flags, int priority)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
    return CUDA_ERROR_INVALID_VALUE;
  gmt__fake_lock();
  int dev = 0;
  CUresult r = gmt__ctx_dev_locked(&dev);
  struct gmt__stream *s = NULL;
  if (r == CUDA_SUCCESS) {
    s = calloc(1, sizeof *s);
    if (!s || gmt__handle_add(s, GMT__K_STREAM) != 0) {
      free(s);
      s = NULL;
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (s) {
    s->dev = dev;
    s->flags = flags;
    s->priority = priority < -5 ? -5 : priority > 0 ? 0 : priority;
    *ph = (CUstream)s;
  }
  gmt__fake_unlock();
  return r;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
  GMT_FAKE_RET(stream_create(phStream, Flags, 0));
}
CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
  GMT_FAKE_RET(stream_create(phStream, flags, priority));
}

CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
  GMT_FAKE_NEED_INIT();
  if (leastPriority)
    *leastPriority = 0;
  if (greatestPriority)
    *greatestPriority = -5;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

static CUresult stream_destroy(CUstream h)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  CUresult r = CUDA_ERROR_INVALID_HANDLE;
  if (gmt__handle_ok(h, GMT__K_STREAM)) {
    gmt__handle_del(h);
    free(h);
    r = CUDA_SUCCESS;
  }
  gmt__fake_unlock();
  return r;
}

CUresult cuStreamDestroy(CUstream hStream)
{
  GMT_FAKE_RET(stream_destroy(hStream));
}
CUresult cuStreamDestroy_v2(CUstream hStream)
{
  GMT_FAKE_RET(stream_destroy(hStream));
}

static CUresult stream_sync(CUstream h, int trim)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  int dev = 0;
  CUresult r = gmt__stream_dev_locked(h, &dev);
  if (r == CUDA_SUCCESS && trim)
    gmt__pool_sync_locked();
  gmt__fake_unlock();
  return r;
}

CUresult cuStreamSynchronize(CUstream hStream)
{
  GMT_FAKE_RET(stream_sync(hStream, 1));
}
CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
  GMT_FAKE_RET(stream_sync(hStream, 1));
}
CUresult cuStreamQuery(CUstream hStream)
{
  GMT_FAKE_RET(stream_sync(hStream, 0));
}
CUresult cuStreamQuery_ptsz(CUstream hStream)
{
  GMT_FAKE_RET(stream_sync(hStream, 0));
}

static CUresult stream_wait_event(CUstream h, CUevent e)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  int dev = 0;
  CUresult r = gmt__stream_dev_locked(h, &dev);
  if (r == CUDA_SUCCESS && !gmt__handle_ok(e, GMT__K_EVENT))
    r = CUDA_ERROR_INVALID_HANDLE;
  gmt__fake_unlock();
  return r;
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
  (void)Flags;
  GMT_FAKE_RET(stream_wait_event(hStream, hEvent));
}
CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
  (void)Flags;
  GMT_FAKE_RET(stream_wait_event(hStream, hEvent));
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
  GMT_FAKE_NEED_INIT();
  if (!phEvent)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  gmt__fake_lock();
  int dev = 0;
  CUresult r = gmt__ctx_dev_locked(&dev);
  struct gmt__event *e = NULL;
  if (r == CUDA_SUCCESS) {
    e = calloc(1, sizeof *e);
    if (!e || gmt__handle_add(e, GMT__K_EVENT) != 0) {
      free(e);
      e = NULL;
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (e) {
    e->flags = Flags;
    *phEvent = (CUevent)e;
  }
  gmt__fake_unlock();
  GMT_FAKE_RET(r);
}

static CUresult event_record(CUevent h, CUstream s)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  int dev = 0;
  CUresult r = gmt__stream_dev_locked(s, &dev);
  if (r == CUDA_SUCCESS && !gmt__handle_ok(h, GMT__K_EVENT))
    r = CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS) {
    struct gmt__event *e = (struct gmt__event *)h;
    clock_gettime(CLOCK_MONOTONIC, &e->t);
    e->recorded = 1;
  }
  gmt__fake_unlock();
  return r;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
  GMT_FAKE_RET(event_record(hEvent, hStream));
}
CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
  GMT_FAKE_RET(event_record(hEvent, hStream));
}
CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
  (void)flags;
  GMT_FAKE_RET(event_record(hEvent, hStream));
}
CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
  (void)flags;
  GMT_FAKE_RET(event_record(hEvent, hStream));
}

static CUresult event_check(CUevent h, int trim)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  CUresult r = gmt__handle_ok(h, GMT__K_EVENT) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS && trim)
    gmt__pool_sync_locked();
  gmt__fake_unlock();
  return r;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
  GMT_FAKE_RET(event_check(hEvent, 1));
}
CUresult cuEventQuery(CUevent hEvent)
{
  GMT_FAKE_RET(event_check(hEvent, 0));
}

static CUresult event_destroy(CUevent h)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  CUresult r = CUDA_ERROR_INVALID_HANDLE;
  if (gmt__handle_ok(h, GMT__K_EVENT)) {
    gmt__handle_del(h);
    free(h);
    r = CUDA_SUCCESS;
  }
  gmt__fake_unlock();
  return r;
}

CUresult cuEventDestroy(CUevent hEvent)
{
  GMT_FAKE_RET(event_destroy(hEvent));
}
CUresult cuEventDestroy_v2(CUevent hEvent)
{
  GMT_FAKE_RET(event_destroy(hEvent));
}

static CUresult elapsed(float *ms, CUevent a, CUevent b)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!ms)
    return CUDA_ERROR_INVALID_VALUE;
  gmt__fake_lock();
  CUresult r = CUDA_SUCCESS;
  if (!gmt__handle_ok(a, GMT__K_EVENT) || !gmt__handle_ok(b, GMT__K_EVENT)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else {
    struct gmt__event *s = (struct gmt__event *)a, *e = (struct gmt__event *)b;
    if ((s->flags | e->flags) & CU_EVENT_DISABLE_TIMING)
      r = CUDA_ERROR_INVALID_HANDLE;
    else if (!s->recorded || !e->recorded)
      r = CUDA_ERROR_INVALID_HANDLE;
    else
      *ms = (float)((double)(e->t.tv_sec - s->t.tv_sec) * 1e3 +
                    (double)(e->t.tv_nsec - s->t.tv_nsec) / 1e6);
  }
  gmt__fake_unlock();
  return r;
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
  GMT_FAKE_RET(elapsed(pMilliseconds, hStart, hEnd));
}
CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
  GMT_FAKE_RET(elapsed(pMilliseconds, hStart, hEnd));
}
