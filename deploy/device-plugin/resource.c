/* One resource: its server kept up and registered with the kubelet
 * (resource.h). */
#include "resource.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_bytes.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "plugin_server.h"
#include "registration.h"

struct gmt_dp_res {
  const gmt_dp_resource_t *res;
  uint64_t unit;
  const gmt_dp_node_t *node;
  grpc_completion_queue *cq;
  char path[108];     /* its socket */
  char kubelet[4096]; /* kubelet.sock */
  gmt_dp_server_t *server;
  bool server_closing;       /* the old server has not let go of the path yet */
  gmt_dp_reg_t *registering; /* the Register in flight */
  bool registered;           /* with the kubelet whose socket is k_dev/k_ino */
  dev_t k_dev, try_dev;
  ino_t k_ino, try_ino;
  unsigned serve_failures, register_failures;
  uint64_t serve_at, register_at; /* no try before these */
  uint64_t left_out;              /* devices past GMT_DP_MAX_DEVICES, last said */
  bool closing;
};

static const V1beta1__DevicePluginOptions *options(void)
{
  static V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
  o.pre_start_required = false;
  o.get_preferred_allocation_available = true;
  return &o;
}

/* 0.5 s, doubling with each failure up to GMT_DP_RETRY_MAX_MS. */
static uint64_t backoff(unsigned failures)
{
  uint64_t ms = 500;
  for (unsigned i = 1; i < failures && ms < GMT_DP_RETRY_MAX_MS; i++)
    ms *= 2;
  return ms < GMT_DP_RETRY_MAX_MS ? ms : GMT_DP_RETRY_MAX_MS;
}

/* ---- the DevicePlugin service's answers ---- */

static int on_list(void *data, V1beta1__ListAndWatchResponse **out, char *err, size_t errlen)
{
  gmt_dp_res_t *r = data;
  uint64_t left = 0;
  if (gmt_dp_list(r->node, r->res->kind, r->unit, out, &left) < 0) {
    snprintf(err, errlen, "gmt-device-plugin: out of memory");
    return GRPC_STATUS_RESOURCE_EXHAUSTED;
  }
  if (left && left != r->left_out)
    gmt_warn("%s: %" PRIu64 " devices past the %u one resource may list are left out: raise "
             "--memory-unit",
             r->res->name, left, GMT_DP_MAX_DEVICES);
  r->left_out = left;
  return GRPC_STATUS_OK;
}

static int on_prefer(void *data, const V1beta1__PreferredAllocationRequest *req,
                     V1beta1__PreferredAllocationResponse **out, char *err, size_t errlen)
{
  (void)data;
  V1beta1__PreferredAllocationResponse *p = malloc(sizeof *p);
  if (!p)
    goto nomem;
  v1beta1__preferred_allocation_response__init(p);
  if (req->n_container_requests &&
      !(p->container_responses = calloc(req->n_container_requests, sizeof *p->container_responses)))
    goto nomem;
  for (size_t i = 0; i < req->n_container_requests; i++) {
    if (gmt_dp_prefer(req->container_requests[i], &p->container_responses[i]) < 0)
      goto nomem;
    p->n_container_responses++;
  }
  *out = p;
  return GRPC_STATUS_OK;
nomem:
  if (p)
    protobuf_c_message_free_unpacked(&p->base, NULL);
  snprintf(err, errlen, "gmt-device-plugin: out of memory");
  return GRPC_STATUS_RESOURCE_EXHAUSTED;
}

static int on_allocate(void *data, const V1beta1__AllocateRequest *req,
                       V1beta1__AllocateResponse **out, char *err, size_t errlen)
{
  gmt_dp_res_t *r = data;
  V1beta1__AllocateResponse *a = malloc(sizeof *a);
  int rc = -ENOMEM;
  if (!a)
    goto fail;
  v1beta1__allocate_response__init(a);
  if (req->n_container_requests &&
      !(a->container_responses = calloc(req->n_container_requests, sizeof *a->container_responses)))
    goto fail;
  for (size_t i = 0; i < req->n_container_requests; i++) {
    rc = gmt_dp_allocate(r->node, r->res->kind, r->unit, req->container_requests[i],
                         &a->container_responses[i], err, errlen);
    if (rc < 0)
      goto fail;
    a->n_container_responses++;
    const V1beta1__ContainerAllocateResponse *c = a->container_responses[i];
    gmt_info("%s: Allocate: a container gets %zu devices: %s=%s, %s=%s", r->res->name,
             req->container_requests[i]->n_devices_ids, c->envs[0]->key, c->envs[0]->value,
             c->envs[1]->key, c->envs[1]->value);
  }
  *out = a;
  return GRPC_STATUS_OK;
fail:
  if (a)
    protobuf_c_message_free_unpacked(&a->base, NULL);
  if (rc == -EINVAL)
    return GRPC_STATUS_INVALID_ARGUMENT;
  snprintf(err, errlen, "gmt-device-plugin: out of memory");
  return GRPC_STATUS_RESOURCE_EXHAUSTED;
}

static const gmt_dp_server_ops_t ops = {on_list, on_prefer, on_allocate};

/* ---- serving and registering ---- */

int gmt_dp_res_new(gmt_dp_res_t **out, gmt_dp_kind_t kind, const char *dir,
                   const char *kubelet_sock, uint64_t unit, const gmt_dp_node_t *node,
                   grpc_completion_queue *cq)
{
  gmt_dp_res_t *r = calloc(1, sizeof *r);
  if (!r)
    return -ENOMEM;
  r->res = gmt_dp_resource(kind);
  r->unit = unit;
  r->node = node;
  r->cq = cq;
  if (snprintf(r->path, sizeof r->path, "%s/%s", dir, r->res->endpoint) >= (int)sizeof r->path ||
      snprintf(r->kubelet, sizeof r->kubelet, "%s", kubelet_sock) >= (int)sizeof r->kubelet) {
    free(r);
    return -ENAMETOOLONG;
  }
  *out = r;
  return 0;
}

void gmt_dp_res_changed(gmt_dp_res_t *r)
{
  if (r->server)
    gmt_dp_server_changed(r->server);
}

static void on_server_closed(void *arg)
{
  gmt_dp_res_t *r = arg;
  r->server_closing = false;
}

static void on_registered(void *arg, int status, const char *why)
{
  gmt_dp_res_t *r = arg;
  r->registering = NULL;
  if (r->closing)
    return;
  if (status == GRPC_STATUS_OK) {
    r->registered = true;
    r->k_dev = r->try_dev;
    r->k_ino = r->try_ino;
    r->register_failures = 0;
    gmt_info("%s: registered with the kubelet at %s (endpoint %s)", r->res->name, r->kubelet,
             r->res->endpoint);
    return;
  }
  r->register_failures++;
  uint64_t wait = backoff(r->register_failures);
  r->register_at = gmt_now_ms() + wait;
  char shown[256];
  gmt_error("%s: the kubelet at %s did not take the registration (gRPC status %d: %s); trying "
            "again in %.1f s",
            r->res->name, r->kubelet, status, gmt_shown(why, shown, sizeof shown),
            (double)wait / 1e3);
}

static void serve(gmt_dp_res_t *r, uint64_t now)
{
  int rc = gmt_dp_server_start(&r->server, r->cq, r->path, r->res->name, options(), &ops, r);
  if (rc < 0) {
    r->server = NULL;
    r->serve_failures++;
    uint64_t wait = backoff(r->serve_failures);
    r->serve_at = now + wait;
    gmt_error("%s: cannot serve on %s (%s; does the folder exist?); trying again in %.1f s",
              r->res->name, r->path, gmt_strerror(rc), (double)wait / 1e3);
    return;
  }
  r->serve_failures = 0;
  r->registered = false;
  char unit[32] = "";
  if (r->res->kind == GMT_DP_MEMORY)
    gmt_human_bytes(unit, sizeof unit, r->unit);
  gmt_info("%s: serving on %s%s%s", r->res->name, r->path, unit[0] ? ", one device per " : "",
           unit);
}

void gmt_dp_res_tick(gmt_dp_res_t *r, uint64_t now)
{
  if (r->closing)
    return;
  if (r->server && !gmt_dp_server_socket_ok(r->server)) {
    gmt_warn("%s: its socket %s was removed (a starting kubelet removes its folder's sockets): "
             "serving anew",
             r->res->name, r->path);
    r->server_closing = true;
    gmt_dp_server_close(r->server, on_server_closed, r);
    r->server = NULL;
    r->registered = false;
  }
  if (!r->server && !r->server_closing && now >= r->serve_at)
    serve(r, now);
  if (!r->server)
    return;
  gmt_dp_server_tick(r->server, now);

  dev_t dev;
  ino_t ino;
  if (!gmt_dp_socket_id(r->kubelet, &dev, &ino)) {
    if (r->registered)
      gmt_warn("%s: the kubelet's socket %s is gone: registering again when it is back",
               r->res->name, r->kubelet);
    r->registered = false;
    return;
  }
  if (r->registering || now < r->register_at ||
      (r->registered && dev == r->k_dev && ino == r->k_ino))
    return;
  if (r->registered)
    gmt_info("%s: the kubelet restarted (a new %s): registering again", r->res->name, r->kubelet);
  r->registered = false;

  V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
  req.version = (char *)GMT_DP_API_VERSION;
  req.endpoint = (char *)r->res->endpoint;
  req.resource_name = (char *)r->res->name;
  req.options = (V1beta1__DevicePluginOptions *)options();
  r->try_dev = dev;
  r->try_ino = ino;
  int rc = gmt_dp_register(r->cq, r->kubelet, &req, on_registered, r, &r->registering);
  if (rc < 0) {
    r->registering = NULL;
    r->register_failures++;
    r->register_at = now + backoff(r->register_failures);
    gmt_error("%s: cannot call the kubelet at %s: %s", r->res->name, r->kubelet, gmt_strerror(rc));
  }
}

void gmt_dp_res_close(gmt_dp_res_t *r)
{
  r->closing = true;
  if (r->registering)
    gmt_dp_register_cancel(r->registering);
  if (r->server) {
    r->server_closing = true;
    gmt_dp_server_close(r->server, on_server_closed, r);
    r->server = NULL;
  }
}

void gmt_dp_res_free(gmt_dp_res_t *r)
{
  free(r);
}
