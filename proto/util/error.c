/* Error codes to words, and nng's errors to ours. */
#include <string.h>

#include <nng/nng.h>

#include "gmt_error.h"

const char *gmt_strerror(int code)
{
  switch (code) {
  case 0: return "success";
  case GMT_EDECODE: return "message does not decode";
  case GMT_EVERSION: return "peer speaks a newer protocol";
  case GMT_EUNEXPECTED: return "unexpected reply";
  case GMT_ENOPOD: return "pod not in the scheduler's config";
  case GMT_EQUOTA: return "no room for it (the pod's memory quota, or the GPU's declared space)";
  case GMT_EUNIMPL: return "not implemented by this peer";
  case GMT_ENOPROC: return "unknown process";
  case GMT_ECONFIG: return "bad configuration";
  case GMT_EDEVICE: return "a GPU outside the pod's devices=";
  default: break;
  }
  if (code < 0 && code > -4096)
    return strerror(-code);
  return "unknown error";
}

int gmt__from_nng(int rv)
{
  switch (rv) {
  case 0: return 0;
  case NNG_EINTR: return -EINTR;
  case NNG_ENOMEM: return -ENOMEM;
  case NNG_EINVAL: return -EINVAL;
  case NNG_EBUSY: return -EBUSY;
  case NNG_ETIMEDOUT: return -ETIMEDOUT;
  case NNG_ECONNREFUSED: return -ECONNREFUSED;
  case NNG_ECLOSED: return -ESHUTDOWN;
  case NNG_EAGAIN: return -EAGAIN;
  case NNG_ENOTSUP: return -ENOTSUP;
  case NNG_EADDRINUSE: return -EADDRINUSE;
  case NNG_ESTATE: return -EINVAL;
  case NNG_ENOENT: return -ENOENT;
  case NNG_EPROTO: return -EPROTO;
  case NNG_EUNREACHABLE: return -EHOSTUNREACH;
  case NNG_EADDRINVAL: return -EINVAL;
  case NNG_EPERM: return -EPERM;
  case NNG_EMSGSIZE: return -EMSGSIZE;
  case NNG_ECONNABORTED: return -ECONNABORTED;
  case NNG_ECONNRESET: return -ECONNRESET;
  case NNG_ECANCELED: return -ECANCELED;
  case NNG_ENOFILES: return -EMFILE;
  case NNG_ENOSPC: return -ENOSPC;
  case NNG_EEXIST: return -EEXIST;
  case NNG_ECONNSHUT: return -ECONNRESET;
  default: return -EIO;
  }
}
