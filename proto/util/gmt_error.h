/* Error codes shared by every gmt program: 0 or a negative errno, or a
 * negative GMT_E* of our own; gmt_strerror() says either in words. */
#ifndef GMT_ERROR_H
#define GMT_ERROR_H

#include <errno.h>

enum {
  GMT_EDECODE = -1001,     /* a message that does not decode */
  GMT_EVERSION = -1002,    /* a peer speaks a newer protocol */
  GMT_EUNEXPECTED = -1003, /* a reply of the wrong kind */
  GMT_ENOPOD = -1004,      /* a pod name the config does not list */
  GMT_EQUOTA = -1005,      /* no room: the pod's memory quota, or the GPU's declared space */
  GMT_EUNIMPL = -1006,     /* an RPC this peer does not serve */
  GMT_ENOPROC = -1007,     /* a process the pod manager does not know */
  GMT_ECONFIG = -1008,     /* a bad configuration file */
  GMT_EDEVICE = -1009,     /* a GPU the pod may not use (devices= in its config) */
};

const char *gmt_strerror(int code);

/* nng's error numbers to ours. */
int gmt__from_nng(int nng_rv);

#endif
