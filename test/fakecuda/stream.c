/* Streams and events of the fake driver: the handles and their checks.
 * A stream is a queue of work (queue.c) on its device; an event is a mark
 * that its records set when the worker reaches them. Synchronizes wait
 * for the work, then are where pools trim. */
#include "fakecuda.h"

#include <stdlib.h>

struct gmt__stream {
  int dev;
  unsigned flags;
  int priority;
  struct gmt__queue *q;
};

struct gmt__event {
  unsigned flags;
  struct gmt__mark *m;
};

CUresult gmt__stream_queue_locked(CUstream s, int *dev, struct gmt__queue **q)
{
  if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
    CUresult r = gmt__ctx_dev_locked(dev);
    if (r != CUDA_SUCCESS || !q)
      return r;
    *q = s == CU_STREAM_PER_THREAD ? gmt__queue_per_thread(*dev) : gmt__queue_legacy(*dev);
    return *q ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (!gmt__handle_ok(s, GMT__K_STREAM))
    return CUDA_ERROR_INVALID_HANDLE;
  *dev = ((struct gmt__stream *)s)->dev;
  if (q)
    *q = ((struct gmt__stream *)s)->q;
  return CUDA_SUCCESS;
}

CUresult gmt__stream_dev_locked(CUstream s, int *dev)
{
  return gmt__stream_queue_locked(s, dev, NULL);
}

/* The handles are plain structs, freed by state.c; their queues and marks
 * go with queue.c's reset. */
void gmt__stream_reset_child(void) {}

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
    if (s)
      s->q = gmt__queue_new(dev, (flags & CU_STREAM_NON_BLOCKING) != 0);
    if (!s || !s->q || gmt__handle_add(s, GMT__K_STREAM) != 0) {
      if (s)
        gmt__queue_release(s->q);
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
    gmt__queue_release(((struct gmt__stream *)h)->q); /* its work still runs */
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

static CUresult stream_sync(CUstream h, int query)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  int dev = 0;
  struct gmt__queue *q = NULL;
  CUresult r = gmt__stream_queue_locked(h, &dev, &q);
  gmt__fake_unlock();
  if (r != CUDA_SUCCESS)
    return r;
  if (query)
    return gmt__queue_query(q) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  gmt__queue_sync(q);
  gmt__fake_lock();
  gmt__pool_sync_locked();
  gmt__fake_unlock();
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream hStream)
{
  GMT_FAKE_RET(stream_sync(hStream, 0));
}
CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
  GMT_FAKE_RET(stream_sync(GMT_PTSZ(hStream), 0));
}
CUresult cuStreamQuery(CUstream hStream)
{
  GMT_FAKE_RET(stream_sync(hStream, 1));
}
CUresult cuStreamQuery_ptsz(CUstream hStream)
{
  GMT_FAKE_RET(stream_sync(GMT_PTSZ(hStream), 1));
}

static CUresult stream_wait_event(CUstream h, CUevent e)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  int dev = 0;
  struct gmt__queue *q = NULL;
  CUresult r = gmt__stream_queue_locked(h, &dev, &q);
  if (r == CUDA_SUCCESS && !gmt__handle_ok(e, GMT__K_EVENT))
    r = CUDA_ERROR_INVALID_HANDLE;
  /* The event may have been recorded on another device: the wait is
   * between the two workers. */
  if (r == CUDA_SUCCESS)
    r = gmt__queue_wait_mark(q, ((struct gmt__event *)e)->m);
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
  GMT_FAKE_RET(stream_wait_event(GMT_PTSZ(hStream), hEvent));
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
    if (e)
      e->m = gmt__mark_new();
    if (!e || !e->m || gmt__handle_add(e, GMT__K_EVENT) != 0) {
      if (e)
        gmt__mark_release(e->m);
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
  struct gmt__queue *q = NULL;
  CUresult r = gmt__stream_queue_locked(s, &dev, &q);
  if (r == CUDA_SUCCESS && !gmt__handle_ok(h, GMT__K_EVENT))
    r = CUDA_ERROR_INVALID_HANDLE;
  /* Its time is taken when the worker reaches it, after the work before. */
  if (r == CUDA_SUCCESS)
    r = gmt__queue_record(q, ((struct gmt__event *)h)->m);
  gmt__fake_unlock();
  return r;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
  GMT_FAKE_RET(event_record(hEvent, hStream));
}
CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
  GMT_FAKE_RET(event_record(hEvent, GMT_PTSZ(hStream)));
}
CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
  (void)flags;
  GMT_FAKE_RET(event_record(hEvent, hStream));
}
CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
  (void)flags;
  GMT_FAKE_RET(event_record(hEvent, GMT_PTSZ(hStream)));
}

static CUresult event_check(CUevent h, int query)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  int ok = gmt__handle_ok(h, GMT__K_EVENT);
  struct gmt__mark *m = ok ? ((struct gmt__event *)h)->m : NULL;
  gmt__fake_unlock();
  if (!ok)
    return CUDA_ERROR_INVALID_HANDLE;
  /* An event never recorded counts as done, as with the driver. */
  if (query)
    return gmt__mark_query(m, NULL) == 0 ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
  gmt__mark_sync(m);
  gmt__fake_lock();
  gmt__pool_sync_locked();
  gmt__fake_unlock();
  return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
  GMT_FAKE_RET(event_check(hEvent, 0));
}
CUresult cuEventQuery(CUevent hEvent)
{
  GMT_FAKE_RET(event_check(hEvent, 1));
}

static CUresult event_destroy(CUevent h)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  CUresult r = CUDA_ERROR_INVALID_HANDLE;
  if (gmt__handle_ok(h, GMT__K_EVENT)) {
    gmt__handle_del(h);
    gmt__mark_release(((struct gmt__event *)h)->m); /* queued records keep it */
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
    uint64_t t0 = 0, t1 = 0;
    int st0 = gmt__mark_query(s->m, &t0), st1 = gmt__mark_query(e->m, &t1);
    if ((s->flags | e->flags) & CU_EVENT_DISABLE_TIMING)
      r = CUDA_ERROR_INVALID_HANDLE;
    else if (st0 < 0 || st1 < 0)
      r = CUDA_ERROR_INVALID_HANDLE;
    else if (st0 == 0 || st1 == 0)
      r = CUDA_ERROR_NOT_READY; /* the times are not known until both ran */
    else
      *ms = (float)(((double)t1 - (double)t0) / 1e6);
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
