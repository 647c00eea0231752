/* The admission webhook without HTTP: the JSONPatch a Pod gets
 * (deploy/webhook/patch.c), the answer a review gets (review.c) and the
 * bounded scan before any parse (scan.c). The patches are applied to the
 * pod in test/e2e/test_webhook.py; here each operation is checked by path
 * and value. */
#include <errno.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#if defined(__SANITIZE_ADDRESS__)
/* ASan's allocator (sanitizer/allocator_interface.h, which gcc lacks). */
size_t __sanitizer_get_current_allocated_bytes(void);
#else
#include <malloc.h>
#endif

#include "patch.h"
#include "review.h"
#include "scan.h"

static gmt_webhook_opts_t opts(void)
{
  gmt_webhook_opts_t o;
  gmt_webhook_opts_default(&o);
  o.hook_image = "reg/gmt:1";
  o.pmgr_image = "reg/gmt-pmgr:1";
  return o;
}

static json_object *parse(const char *text)
{
  json_object *o = json_tokener_parse(text);
  assert_non_null(o);
  return o;
}

/* The nth op (from 0) at path, or NULL. */
static json_object *nth_op_at(json_object *patch, const char *verb, const char *path, size_t nth)
{
  for (size_t i = 0; i < json_object_array_length(patch); i++) {
    json_object *op = json_object_array_get_idx(patch, i), *v;
    json_object_object_get_ex(op, "path", &v);
    if (strcmp(json_object_get_string(v), path) != 0 || nth-- > 0)
      continue;
    json_object_object_get_ex(op, "op", &v);
    assert_string_equal(json_object_get_string(v), verb);
    json_object_object_get_ex(op, "value", &v);
    return v;
  }
  return NULL;
}

static json_object *op_at(json_object *patch, const char *verb, const char *path)
{
  return nth_op_at(patch, verb, path, 0);
}

static const char *field(json_object *o, const char *key)
{
  json_object *v;
  assert_true(json_object_object_get_ex(o, key, &v));
  return json_object_get_string(v);
}

static json_object *patch_of(const char *pod_text, int want_rc, char *why)
{
  gmt_webhook_opts_t o = opts();
  json_object *pod = parse(pod_text), *patch = (json_object *)1;
  assert_int_equal(gmt_webhook_patch(pod, &o, &patch, why, 256), want_rc);
  json_object_put(pod);
  return patch;
}

#define GMT_POD(spec)                                                                              \
  "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"gmt.io/pod\":\"train\"}},\"spec\":" spec "}"

static void test_webhook_pod_without_annotation_gets_no_patch(void **state)
{
  (void)state;
  char why[256];
  assert_null(patch_of(
      "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"a\"}]}}", 0, why));
  assert_null(patch_of("{\"metadata\":{\"annotations\":{\"other\":\"x\"}},\"spec\":{\"containers\":"
                       "[{\"name\":\"a\"}]}}",
                       0, why));
  assert_null(patch_of("{}", 0, why));
}

static void test_webhook_patch_creates_lists_that_are_absent(void **state)
{
  (void)state;
  char why[256];
  json_object *p = patch_of(GMT_POD("{\"containers\":[{\"name\":\"a\",\"image\":\"x\"}]}"), 0, why);
  assert_non_null(p);
  json_object *vols = op_at(p, "add", "/spec/volumes");
  assert_non_null(vols);
  assert_int_equal(json_object_array_length(vols), 1);
  assert_string_equal(field(json_object_array_get_idx(vols, 0), "name"), "gmt-hook");
  /* The pod's own /run/gmt (its pod manager's socket), then the node's. */
  json_object *run = nth_op_at(p, "add", "/spec/volumes/-", 0), *hp;
  assert_non_null(run);
  assert_string_equal(field(run, "name"), "gmt-run");
  assert_true(json_object_object_get_ex(run, "emptyDir", &hp));
  assert_false(json_object_object_get_ex(run, "hostPath", &hp));
  json_object *node = nth_op_at(p, "add", "/spec/volumes/-", 1);
  assert_non_null(node);
  assert_string_equal(field(node, "name"), "gmt-node");
  assert_true(json_object_object_get_ex(node, "hostPath", &hp));
  assert_string_equal(field(hp, "path"), "/run/gmt");
  assert_null(nth_op_at(p, "add", "/spec/volumes/-", 2));

  json_object *inits = op_at(p, "add", "/spec/initContainers");
  assert_non_null(inits);
  assert_string_equal(field(json_object_array_get_idx(inits, 0), "name"), "gmt-hook-copy");
  assert_string_equal(field(json_object_array_get_idx(inits, 0), "image"), "reg/gmt:1");
  json_object *pmgr = op_at(p, "add", "/spec/initContainers/-");
  assert_non_null(pmgr);
  assert_string_equal(field(pmgr, "name"), "gmt-pmgr");
  assert_string_equal(field(pmgr, "image"), "reg/gmt-pmgr:1");
  assert_string_equal(field(pmgr, "restartPolicy"), "Always");
  const char *cmd[] = {"gmt-pmgr",
                       "--port",
                       "50052",
                       "--name",
                       "train",
                       "--schd",
                       "ipc:///run/gmt-node/schd.sock",
                       "--ipc",
                       "/run/gmt/pmgr-50052.sock"};
  json_object *argv;
  assert_true(json_object_object_get_ex(pmgr, "command", &argv));
  assert_int_equal(json_object_array_length(argv), 9);
  for (size_t i = 0; i < 9; i++)
    assert_string_equal(json_object_get_string(json_object_array_get_idx(argv, i)), cmd[i]);
  json_object *pm_mounts;
  assert_true(json_object_object_get_ex(pmgr, "volumeMounts", &pm_mounts));
  assert_int_equal(json_object_array_length(pm_mounts), 2);
  assert_string_equal(field(json_object_array_get_idx(pm_mounts, 0), "name"), "gmt-run");
  assert_string_equal(field(json_object_array_get_idx(pm_mounts, 0), "mountPath"), "/run/gmt");
  assert_string_equal(field(json_object_array_get_idx(pm_mounts, 1), "name"), "gmt-node");
  assert_string_equal(field(json_object_array_get_idx(pm_mounts, 1), "mountPath"), "/run/gmt-node");

  json_object *mounts = op_at(p, "add", "/spec/containers/0/volumeMounts");
  assert_non_null(mounts);
  assert_string_equal(field(json_object_array_get_idx(mounts, 0), "mountPath"),
                      "/usr/local/lib/gmt");
  /* The application sees the pod manager's socket, and may not put one there. */
  json_object *sock = op_at(p, "add", "/spec/containers/0/volumeMounts/-");
  assert_non_null(sock);
  assert_string_equal(field(sock, "name"), "gmt-run");
  assert_string_equal(field(sock, "mountPath"), "/run/gmt");
  assert_string_equal(field(sock, "readOnly"), "true");
  json_object *env = op_at(p, "add", "/spec/containers/0/env");
  assert_non_null(env);
  assert_string_equal(field(json_object_array_get_idx(env, 0), "value"),
                      "/usr/local/lib/gmt/libgmthook.so");
  /* Then GMT_PMGR over ipc, GMT_AUTO_DEVICE (the hook confines the process
   * to the gmt pod's devices=) and GMT_FAIL_CLOSED. */
  const char *want[][2] = {{"GMT_PMGR", "ipc:///run/gmt/pmgr-50052.sock"},
                           {"GMT_AUTO_DEVICE", "pod"},
                           {"GMT_FAIL_CLOSED", "1"}};
  for (size_t i = 0; i < 3; i++) {
    json_object *e = nth_op_at(p, "add", "/spec/containers/0/env/-", i);
    assert_non_null(e);
    assert_string_equal(field(e, "name"), want[i][0]);
    assert_string_equal(field(e, "value"), want[i][1]);
  }
  assert_null(nth_op_at(p, "add", "/spec/containers/0/env/-", 3));

  json_object *share = op_at(p, "add", "/spec/shareProcessNamespace");
  assert_non_null(share);
  assert_true(json_object_get_boolean(share));
  json_object *mark = op_at(p, "add", "/metadata/annotations/gmt.io~1injected");
  assert_non_null(mark);
  assert_string_equal(json_object_get_string(mark), "train");
  json_object_put(p);
}

static void test_webhook_patch_appends_to_lists_that_exist_and_keeps_env(void **state)
{
  (void)state;
  char why[256];
  json_object *p = patch_of(
      GMT_POD("{\"volumes\":[{\"name\":\"data\",\"emptyDir\":{}}],"
              "\"initContainers\":[{\"name\":\"i\",\"image\":\"x\"}],"
              "\"containers\":[{\"name\":\"a\",\"image\":\"x\",\"env\":[{\"name\":\"K\",\"value\":"
              "\"v\"},"
              "{\"name\":\"LD_PRELOAD\",\"value\":\"/lib/"
              "x.so\"},{\"name\":\"GMT_PMGR\",\"value\":\"tcp://h:1\"}],"
              "\"volumeMounts\":[{\"name\":\"data\",\"mountPath\":\"/d\"}]},"
              "{\"name\":\"b\",\"image\":\"x\",\"env\":[{\"name\":\"K\",\"value\":\"v\"}]}]}"),
      0, why);
  assert_non_null(p);
  assert_null(op_at(p, "add", "/spec/volumes"));
  assert_null(op_at(p, "add", "/spec/initContainers"));
  assert_null(op_at(p, "add", "/spec/containers/0/env"));
  /* both replaced in place; only GMT_AUTO_DEVICE appended */
  assert_string_equal(field(op_at(p, "add", "/spec/containers/0/env/-"), "name"),
                      "GMT_AUTO_DEVICE");
  assert_string_equal(json_object_get_string(op_at(p, "add", "/spec/containers/0/env/1/value")),
                      "/usr/local/lib/gmt/libgmthook.so /lib/x.so");
  assert_string_equal(field(op_at(p, "replace", "/spec/containers/0/env/2"), "value"),
                      "ipc:///run/gmt/pmgr-50052.sock");
  assert_non_null(op_at(p, "add", "/spec/containers/0/volumeMounts/-"));
  assert_non_null(op_at(p, "add", "/spec/containers/1/volumeMounts"));
  assert_non_null(op_at(p, "add", "/spec/containers/1/env/-"));
  size_t appends = 0;
  for (size_t i = 0; i < json_object_array_length(p); i++) {
    json_object *v;
    json_object_object_get_ex(json_object_array_get_idx(p, i), "path", &v);
    appends += !strcmp(json_object_get_string(v), "/spec/containers/1/env/-");
  }
  assert_int_equal(appends, 4); /* LD_PRELOAD, GMT_PMGR, GMT_AUTO_DEVICE, GMT_FAIL_CLOSED after K */
  json_object_put(p);
}

static void test_webhook_patch_keeps_a_containers_own_gmt_auto_device(void **state)
{
  (void)state;
  char why[256];
  json_object *p = patch_of(GMT_POD("{\"containers\":[{\"name\":\"a\",\"env\":[{\"name\":"
                                    "\"GMT_AUTO_DEVICE\",\"value\":\"1\"}]}]}"),
                            0, why);
  assert_non_null(p);
  for (size_t i = 0; i < json_object_array_length(p); i++) {
    json_object *o = json_object_array_get_idx(p, i), *v;
    json_object_object_get_ex(o, "path", &v);
    assert_null(strstr(json_object_get_string(v), "/env/0")); /* not replaced */
    if (strcmp(json_object_get_string(v), "/spec/containers/0/env/-"))
      continue;
    json_object_object_get_ex(o, "value", &v);
    assert_string_not_equal(field(v, "name"), "GMT_AUTO_DEVICE"); /* not added */
  }
  json_object_put(p);
}

static void test_webhook_host_pid_pod_gets_no_share_process_namespace(void **state)
{
  (void)state;
  char why[256];
  json_object *p =
      patch_of(GMT_POD("{\"hostPID\":true,\"containers\":[{\"name\":\"a\"}]}"), 0, why);
  assert_non_null(p);
  assert_null(op_at(p, "add", "/spec/shareProcessNamespace"));
  json_object_put(p);
}

static void test_webhook_injected_pod_is_left_alone(void **state)
{
  (void)state;
  char why[256];
  assert_null(
      patch_of("{\"metadata\":{\"annotations\":{\"gmt.io/pod\":\"a\",\"gmt.io/injected\":\"a\"}},"
               "\"spec\":{\"containers\":[{\"name\":\"a\"}]}}",
               0, why));
  assert_null(patch_of(
      GMT_POD("{\"initContainers\":[{\"name\":\"gmt-pmgr\"}],\"containers\":[{\"name\":\"a\"}]}"),
      0, why));
}

static void test_webhook_refuses_bad_pod_names_and_taken_names(void **state)
{
  (void)state;
  char why[256];
  assert_null(patch_of(
      "{\"metadata\":{\"annotations\":{\"gmt.io/pod\":\"a/b\"}},\"spec\":{\"containers\":[{}]}}",
      -EINVAL, why));
  assert_non_null(strstr(why, "bad character '/'"));
  assert_null(patch_of(
      "{\"metadata\":{\"annotations\":{\"gmt.io/pod\":\"\"}},\"spec\":{\"containers\":[{}]}}",
      -EINVAL, why));
  assert_non_null(strstr(why, "1 to 62"));
  assert_null(
      patch_of("{\"metadata\":{\"annotations\":{\"gmt.io/pod\":7}},\"spec\":{\"containers\":[{}]}}",
               -EINVAL, why));
  assert_non_null(strstr(why, "not a string"));
  assert_null(
      patch_of(GMT_POD("{\"volumes\":[{\"name\":\"gmt-run\"}],\"containers\":[{\"name\":\"a\"}]}"),
               -EINVAL, why));
  assert_non_null(strstr(why, "'gmt-run'"));
  assert_null(
      patch_of(GMT_POD("{\"volumes\":[{\"name\":\"gmt-node\"}],\"containers\":[{\"name\":\"a\"}]}"),
               -EINVAL, why));
  assert_non_null(strstr(why, "'gmt-node'"));
  assert_null(patch_of(GMT_POD("{\"containers\":[]}"), -EINVAL, why));
  assert_null(
      patch_of(GMT_POD("{\"containers\":[{\"name\":\"a\",\"env\":[{\"name\":\"LD_PRELOAD\","
                       "\"valueFrom\":{\"configMapKeyRef\":{\"name\":\"c\",\"key\":\"k\"}}}]}]}"),
               -EINVAL, why));
  assert_non_null(strstr(why, "valueFrom"));
  char name[70];
  memset(name, 'a', 63);
  name[63] = '\0';
  assert_int_equal(gmt_webhook_pod_name_check(name, why, sizeof why), -EINVAL);
  name[62] = '\0';
  assert_int_equal(gmt_webhook_pod_name_check(name, why, sizeof why), 0);
  assert_int_equal(gmt_webhook_pod_name_check("A-z_0.9", why, sizeof why), 0);
}

static void test_webhook_replaces_a_containers_gmt_pmgr_and_gmt_fail_closed(void **state)
{
  (void)state;
  char why[256];
  json_object *p = patch_of(GMT_POD("{\"containers\":[{\"name\":\"a\",\"env\":[{\"name\":"
                                    "\"GMT_FAIL_CLOSED\",\"value\":\"0\"},{\"name\":\"GMT_PMGR\","
                                    "\"value\":\"tcp://127.0.0.1:50052\"}]}]}"),
                            0, why);
  assert_non_null(p);
  /* The operator's, not the pod's: a pod cannot run unlimited by saying so. */
  assert_string_equal(field(op_at(p, "replace", "/spec/containers/0/env/0"), "value"), "1");
  assert_string_equal(field(op_at(p, "replace", "/spec/containers/0/env/1"), "value"),
                      "ipc:///run/gmt/pmgr-50052.sock");
  for (size_t i = 0; i < 3; i++) {
    json_object *e = nth_op_at(p, "add", "/spec/containers/0/env/-", i);
    if (!e)
      break;
    assert_string_not_equal(field(e, "name"), "GMT_FAIL_CLOSED");
    assert_string_not_equal(field(e, "name"), "GMT_PMGR");
  }
  json_object_put(p);
}

static void test_webhook_refuses_a_container_that_mounts_something_at_run_gmt(void **state)
{
  (void)state;
  char why[256];
  const char *mount_at[] = {"/run/gmt", "/run/gmt/"};
  for (size_t i = 0; i < 2; i++) {
    char pod[400];
    snprintf(pod, sizeof pod,
             GMT_POD("{\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}}],\"containers\":[{\"name\":"
                     "\"a\"},{\"name\":\"b\",\"volumeMounts\":[{\"name\":\"v\",\"mountPath\":"
                     "\"%s\"}]}]}"),
             mount_at[i]);
    assert_null(patch_of(pod, -EINVAL, why));
    assert_non_null(strstr(why, "container 1 mounts a volume at /run/gmt"));
  }
  /* Beside it or below it is the container's own business. */
  json_object *p = patch_of(GMT_POD("{\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}}],"
                                    "\"containers\":[{\"name\":\"a\",\"volumeMounts\":[{\"name\":"
                                    "\"v\",\"mountPath\":\"/run/gmtx\"}]}]}"),
                            0, why);
  assert_non_null(p);
  json_object_put(p);
}

/* A pod of n containers (and as many init containers when inits). */
static char *pod_of_containers(size_t n, bool inits)
{
  size_t cap = 200 + n * 80, o = 0;
  char *s = malloc(cap);
  assert_non_null(s);
  o += (size_t)snprintf(s + o, cap - o,
                        "{\"metadata\":{\"annotations\":{\"gmt.io/pod\":\"train\"}},\"spec\":{");
  for (int list = inits ? 0 : 1; list < 2; list++) {
    o += (size_t)snprintf(s + o, cap - o, "\"%s\":[", list == 0 ? "initContainers" : "containers");
    for (size_t i = 0; i < n; i++)
      o += (size_t)snprintf(s + o, cap - o, "%s{\"name\":\"c%zu\",\"image\":\"x\"}", i ? "," : "",
                            i);
    o += (size_t)snprintf(s + o, cap - o, "]%s", list == 0 ? "," : "");
  }
  snprintf(s + o, cap - o, "}}");
  return s;
}

static void test_webhook_refuses_pods_of_more_than_64_containers(void **state)
{
  (void)state;
  char why[256];
  char *pod = pod_of_containers(GMT_WEBHOOK_MAX_CONTAINERS + 1, false);
  assert_null(patch_of(pod, -EINVAL, why));
  assert_non_null(strstr(why, "the pod has 65 containers; gmt hooks pods of at most 64"));
  free(pod);
  pod = pod_of_containers(GMT_WEBHOOK_MAX_CONTAINERS + 1, true);
  assert_null(patch_of(pod, -EINVAL, why));
  assert_non_null(strstr(why, "65"));
  free(pod);
  pod = pod_of_containers(GMT_WEBHOOK_MAX_CONTAINERS, true);
  json_object *p = patch_of(pod, 0, why);
  assert_non_null(p);
  assert_non_null(op_at(p, "add", "/spec/containers/63/env"));
  /* The largest pod's patch is far inside its bound. */
  assert_true(strlen(json_object_to_json_string_ext(p, JSON_C_TO_STRING_PLAIN)) <
              GMT_WEBHOOK_PATCH_MAX / 4);
  json_object_put(p);
  free(pod);
}

static void test_webhook_refuses_a_patch_past_its_bound(void **state)
{
  (void)state;
  char why[256];
  /* A container's own LD_PRELOAD is carried into the patch. */
  size_t big = GMT_WEBHOOK_PATCH_MAX;
  char *pod = malloc(big + 300);
  assert_non_null(pod);
  int o = snprintf(pod, 300,
                   GMT_POD("{\"containers\":[{\"name\":\"a\",\"env\":[{\"name\":\"LD_PRELOAD\","
                           "\"value\":\""));
  memset(pod + o, 'x', big);
  snprintf(pod + o + big, 100, "\"}]}]}}");
  assert_null(patch_of(pod, -EINVAL, why));
  assert_non_null(strstr(why, "the patch would be"));
  /* Half of it fits. */
  snprintf(pod + o + big / 2, 100, "\"}]}]}}");
  json_object *p = patch_of(pod, 0, why);
  assert_non_null(p);
  json_object_put(p);
  free(pod);
}

static void test_webhook_json_pointer_escapes_tilde_and_slash(void **state)
{
  (void)state;
  char out[32];
  assert_int_equal(gmt_json_pointer_escape("a/b~c", out, sizeof out), 0);
  assert_string_equal(out, "a~1b~0c");
  assert_int_equal(gmt_json_pointer_escape("~/", out, 5), 0);
  assert_string_equal(out, "~0~1");
  assert_int_equal(gmt_json_pointer_escape("~/", out, 4), -ENOSPC);
}

static void test_webhook_options_refuse_a_hook_path_ld_preload_cannot_hold(void **state)
{
  (void)state;
  gmt_webhook_opts_t o = opts();
  char why[256];
  assert_int_equal(gmt_webhook_opts_check(&o, why, sizeof why), 0);
  o.hook_path = "lib/gmt";
  assert_int_equal(gmt_webhook_opts_check(&o, why, sizeof why), -EINVAL);
  o.hook_path = "/a b";
  assert_int_equal(gmt_webhook_opts_check(&o, why, sizeof why), -EINVAL);
  o.hook_path = "/a:b";
  assert_int_equal(gmt_webhook_opts_check(&o, why, sizeof why), -EINVAL);
}

static void test_webhook_options_refuse_a_scheduler_socket_in_the_pods_run_gmt(void **state)
{
  (void)state;
  gmt_webhook_opts_t o = opts();
  char why[300];
  assert_string_equal(o.schd_url, "ipc:///run/gmt-node/schd.sock");
  /* The old default: the sidecar's /run/gmt is the pod's own folder now. */
  o.schd_url = "ipc:///run/gmt/schd.sock";
  assert_int_equal(gmt_webhook_opts_check(&o, why, sizeof why), -EINVAL);
  assert_non_null(strstr(why, "/run/gmt-node"));
  o.schd_url = "tcp://10.0.0.1:50051";
  assert_int_equal(gmt_webhook_opts_check(&o, why, sizeof why), 0);
}

static void test_webhook_base64_pads(void **state)
{
  (void)state;
  const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
  const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
  for (size_t i = 0; i < 7; i++) {
    char *b = gmt_base64((const unsigned char *)in[i], strlen(in[i]));
    assert_string_equal(b, want[i]);
    free(b);
  }
}

/* ---- reviews ---- */

static gmt_webhook_answer_t review(const char *body)
{
  gmt_webhook_opts_t o = opts();
  gmt_webhook_answer_t a;
  assert_int_equal(gmt_webhook_review(body, strlen(body), &o, &a), 0);
  assert_non_null(a.body);
  return a;
}

#define REVIEW(req)                                                                                \
  "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":" req "}"
#define POD_REQ(obj)                                                                               \
  "{\"uid\":\"u-1\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},\"operation\":"  \
  "\"CREATE\",\"object\":" obj "}"

static void test_webhook_review_of_gmt_pod_is_allowed_with_a_patch(void **state)
{
  (void)state;
  gmt_webhook_answer_t a = review(REVIEW(POD_REQ(GMT_POD("{\"containers\":[{\"name\":\"a\"}]}"))));
  assert_int_equal(a.status, 200);
  json_object *root = parse(a.body), *resp;
  assert_string_equal(field(root, "apiVersion"), "admission.k8s.io/v1");
  assert_string_equal(field(root, "kind"), "AdmissionReview");
  assert_true(json_object_object_get_ex(root, "response", &resp));
  assert_string_equal(field(resp, "uid"), "u-1");
  assert_string_equal(field(resp, "allowed"), "true");
  assert_string_equal(field(resp, "patchType"), "JSONPatch");
  assert_true(strlen(field(resp, "patch")) > 100);
  json_object_put(root);
  free(a.body);
}

static void test_webhook_review_of_other_pod_is_allowed_without_patch(void **state)
{
  (void)state;
  const char *bodies[] = {
      REVIEW(
          POD_REQ("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"a\"}]}}")),
      REVIEW("{\"uid\":\"u-1\",\"kind\":{\"kind\":\"Pod\"},\"operation\":\"UPDATE\","
             "\"object\":" GMT_POD("{\"containers\":[{\"name\":\"a\"}]}") "}"),
      REVIEW("{\"uid\":\"u-1\",\"kind\":{\"kind\":\"Service\"},\"operation\":\"CREATE\",\"object\":"
             "{}}")};
  for (size_t i = 0; i < 3; i++) {
    gmt_webhook_answer_t a = review(bodies[i]);
    assert_int_equal(a.status, 200);
    json_object *root = parse(a.body), *resp, *v;
    assert_true(json_object_object_get_ex(root, "response", &resp));
    assert_string_equal(field(resp, "uid"), "u-1");
    assert_string_equal(field(resp, "allowed"), "true");
    assert_false(json_object_object_get_ex(resp, "patch", &v));
    json_object_put(root);
    free(a.body);
  }
}

static void test_webhook_review_refuses_bad_gmt_pod_with_message(void **state)
{
  (void)state;
  gmt_webhook_answer_t a =
      review(REVIEW(POD_REQ("{\"metadata\":{\"annotations\":{\"gmt.io/pod\":\"no "
                            "way\"}},\"spec\":{\"containers\":[{}]}}")));
  assert_int_equal(a.status, 200);
  json_object *root = parse(a.body), *resp, *st;
  assert_true(json_object_object_get_ex(root, "response", &resp));
  assert_string_equal(field(resp, "uid"), "u-1");
  assert_string_equal(field(resp, "allowed"), "false");
  assert_true(json_object_object_get_ex(resp, "status", &st));
  assert_string_equal(field(st, "code"), "400");
  assert_non_null(strstr(field(st, "message"), "bad character ' '"));
  json_object_put(root);
  free(a.body);
}

static void test_webhook_malformed_reviews_get_400_saying_why(void **state)
{
  (void)state;
  struct {
    const char *body, *says;
  } cases[] = {
      {"{not json", "not JSON"},
      {"[1]", "not a JSON object"},
      {"{} {}", "more than one JSON value"},
      {"{\"apiVersion\":\"admission.k8s.io/"
       "v1beta1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\"}}",
       "apiVersion"},
      {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"Pod\",\"request\":{\"uid\":\"u\"}}",
       "kind"},
      {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}", "no request"},
      {REVIEW("{\"kind\":{\"kind\":\"Pod\"}}"), "request.uid"},
      {REVIEW("{\"uid\":\"\"}"), "request.uid"},
      {REVIEW("{\"uid\":5}"), "request.uid"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    gmt_webhook_answer_t a = review(cases[i].body);
    assert_int_equal(a.status, 400);
    assert_non_null(strstr(a.body, "bad AdmissionReview"));
    if (!strstr(a.body, cases[i].says))
      fail_msg("case %zu: '%s' does not say '%s'", i, a.body, cases[i].says);
    free(a.body);
  }
  gmt_webhook_opts_t o = opts();
  gmt_webhook_answer_t a;
  assert_int_equal(gmt_webhook_review("", 0, &o, &a), 0);
  assert_int_equal(a.status, 400);
  free(a.body);
  assert_int_equal(gmt_webhook_review("{\"a\":1}\0x", 9, &o, &a), 0);
  assert_int_equal(a.status, 400);
  free(a.body);
}

static void test_webhook_review_with_uid_but_no_pod_is_refused_in_a_review(void **state)
{
  (void)state;
  gmt_webhook_answer_t a =
      review(REVIEW("{\"uid\":\"u-2\",\"kind\":{\"kind\":\"Pod\"},\"operation\":\"CREATE\"}"));
  assert_int_equal(a.status, 200);
  json_object *root = parse(a.body), *resp, *st;
  assert_true(json_object_object_get_ex(root, "response", &resp));
  assert_string_equal(field(resp, "uid"), "u-2");
  assert_string_equal(field(resp, "allowed"), "false");
  assert_true(json_object_object_get_ex(resp, "status", &st));
  assert_non_null(strstr(field(st, "message"), "request.object"));
  json_object_put(root);
  free(a.body);
}

/* ---- the scan before the parse ---- */

/* A body of n copies of item in an array, or as the members of an object. */
static char *repeated(const char *item, size_t n, bool members, size_t *len)
{
  size_t il = strlen(item), cap = n * (il + 16) + 8, o = 0;
  char *s = malloc(cap);
  assert_non_null(s);
  s[o++] = members ? '{' : '[';
  for (size_t i = 0; i < n; i++) {
    if (i)
      s[o++] = ',';
    if (members)
      o += (size_t)snprintf(s + o, cap - o, "\"k%zu\":", i);
    memcpy(s + o, item, il);
    o += il;
  }
  s[o++] = members ? '}' : ']';
  s[o] = '\0';
  *len = o;
  return s;
}

static void test_webhook_scan_refuses_a_body_of_empty_objects_before_parsing(void **state)
{
  (void)state;
  size_t len;
  char *body = repeated("{}", 1000000, false, &len); /* 3 MB: 761 MiB parsed */
  gmt_webhook_scan_t sc;
  char why[600];
  assert_int_equal(gmt_webhook_scan(body, len, &sc, why, sizeof why), -E2BIG);
  assert_string_equal(why, "the document holds more than 4096 elements (gmt-webhook reads at most "
                           "4096)");
  assert_int_equal(sc.nodes, 4098); /* it stopped there, not at the end */
  gmt_webhook_opts_t o = opts();
  gmt_webhook_answer_t a;
  assert_int_equal(gmt_webhook_review(body, len, &o, &a), 0);
  assert_int_equal(a.status, 400);
  assert_non_null(strstr(a.body, "bad AdmissionReview: too large"));
  free(a.body);
  free(body);
  /* Spread over arrays of 4,000: past what a parse may take. */
  char *inner = repeated("{}", 4000, false, &len);
  body = repeated(inner, 250, false, &len);
  assert_int_equal(gmt_webhook_scan(body, len, &sc, why, sizeof why), -E2BIG);
  assert_non_null(strstr(why, "the JSON would take more than 16 MiB parsed"));
  assert_true(sc.nodes < 25000);
  free(inner);
  free(body);
  /* Cheap values count too: past 65,536 of them. */
  inner = repeated("0", 4000, false, &len);
  body = repeated(inner, 20, false, &len);
  assert_int_equal(gmt_webhook_scan(body, len, &sc, why, sizeof why), -E2BIG);
  assert_non_null(strstr(why, "the JSON holds more than 65536 values"));
  free(inner);
  free(body);
}

static void test_webhook_scan_names_where_an_array_or_object_holds_too_many(void **state)
{
  (void)state;
  size_t len;
  char *list = repeated("{\"name\":\"c\",\"image\":\"busybox\"}", 40000, false, &len);
  char *body = malloc(len + 400);
  assert_non_null(body);
  len = (size_t)sprintf(body, REVIEW(POD_REQ(GMT_POD("{\"containers\":%s}"))), list);
  gmt_webhook_scan_t sc;
  char why[600];
  assert_int_equal(gmt_webhook_scan(body, len, &sc, why, sizeof why), -E2BIG);
  assert_string_equal(why, "request.object.spec.containers holds more than 4096 elements "
                           "(gmt-webhook reads at most 4096)");
  /* Seen before the limit: the review can be answered as one. */
  assert_int_equal(sc.uid_len, 3);
  assert_memory_equal(sc.uid, "u-1", 3);
  assert_int_equal(sc.api_len, strlen("admission.k8s.io/v1"));
  free(list);
  free(body);
  list = repeated("1", GMT_WEBHOOK_JSON_ELEMENTS + 1, true, &len);
  body = malloc(len + 400);
  assert_non_null(body);
  len = (size_t)sprintf(body, "{\"a\":[0,{\"b~/\\n\":%s}]}", list);
  assert_int_equal(gmt_webhook_scan(body, len, &sc, why, sizeof why), -E2BIG);
  assert_non_null(strstr(why, "a[1].b~/\\n holds more than 4096 members"));
  free(list);
  free(body);
  /* At the limit: within it. */
  body = repeated("1", GMT_WEBHOOK_JSON_ELEMENTS, false, &len);
  assert_int_equal(gmt_webhook_scan(body, len, &sc, why, sizeof why), 0);
  assert_int_equal(sc.nodes, GMT_WEBHOOK_JSON_ELEMENTS + 1);
  free(body);
}

static void test_webhook_review_of_40000_containers_is_refused_in_a_review(void **state)
{
  (void)state;
  size_t len;
  char *list = repeated("{\"name\":\"c\",\"image\":\"busybox\"}", 40000, false, &len);
  char *body = malloc(len + 400);
  assert_non_null(body);
  sprintf(body, REVIEW(POD_REQ(GMT_POD("{\"containers\":%s}"))), list);
  gmt_webhook_answer_t a = review(body);
  /* Refused whatever the failurePolicy: the pod is not created unhooked. */
  assert_int_equal(a.status, 200);
  json_object *root = parse(a.body), *resp, *st;
  assert_true(json_object_object_get_ex(root, "response", &resp));
  assert_string_equal(field(resp, "uid"), "u-1");
  assert_string_equal(field(resp, "allowed"), "false");
  assert_true(json_object_object_get_ex(resp, "status", &st));
  assert_non_null(strstr(field(st, "message"), "request.object.spec.containers holds more than"));
  json_object_put(root);
  free(a.body);
  free(list);
  free(body);
}

static void test_webhook_scan_refuses_nesting_past_the_depth_limit(void **state)
{
  (void)state;
  char body[2 * GMT_WEBHOOK_JSON_DEPTH + 8];
  gmt_webhook_scan_t sc;
  char why[600];
  for (int depth = GMT_WEBHOOK_JSON_DEPTH; depth <= GMT_WEBHOOK_JSON_DEPTH + 1; depth++) {
    memset(body, '[', (size_t)depth);
    memset(body + depth, ']', (size_t)depth);
    int rc = gmt_webhook_scan(body, 2 * (size_t)depth, &sc, why, sizeof why);
    if (depth == GMT_WEBHOOK_JSON_DEPTH) {
      assert_int_equal(rc, 0);
      assert_int_equal(sc.depth, GMT_WEBHOOK_JSON_DEPTH);
    } else {
      assert_int_equal(rc, -E2BIG);
      assert_non_null(strstr(why, "nests deeper than 64"));
    }
  }
  /* And json-c parses what the scan let through. */
  memset(body, '[', GMT_WEBHOOK_JSON_DEPTH);
  memset(body + GMT_WEBHOOK_JSON_DEPTH, ']', GMT_WEBHOOK_JSON_DEPTH);
  json_tokener *tok = json_tokener_new_ex(GMT_WEBHOOK_JSON_DEPTH);
  json_object *o = json_tokener_parse_ex(tok, body, 2 * GMT_WEBHOOK_JSON_DEPTH);
  assert_non_null(o);
  json_object_put(o);
  json_tokener_free(tok);
}

static void
test_webhook_scan_counts_what_strings_hide_and_refuses_what_json_does_not_hold(void **state)
{
  (void)state;
  gmt_webhook_scan_t sc;
  char why[600];
  /* Escaped quotes and backslashes do not end a string: one member. */
  const char *s = "{\"a\":\"x\\\"[{},{}]\\\\\",\"b\":\"\\\\\"}";
  assert_int_equal(gmt_webhook_scan(s, strlen(s), &sc, why, sizeof why), 0);
  assert_int_equal(sc.nodes, 3);
  /* A comment or a single-quoted string would hide values from a count
   * that json-c's lax mode then builds. */
  const char *bad[] = {"[/* \" */ {}, {} /* \" */]", "['{},{}']", "[{}]#", "[\"open"};
  for (size_t i = 0; i < 4; i++)
    assert_int_equal(gmt_webhook_scan(bad[i], strlen(bad[i]), &sc, why, sizeof why), -EINVAL);
  gmt_webhook_answer_t a = review("{\"apiVersion\":/* \" */\"admission.k8s.io/v1\"}");
  assert_int_equal(a.status, 400);
  assert_non_null(strstr(a.body, "not JSON"));
  free(a.body);
  /* A uid with an escape is not taken raw. */
  s = "{\"request\":{\"uid\":\"a\\\"b\"}}";
  assert_int_equal(gmt_webhook_scan(s, strlen(s), &sc, why, sizeof why), 0);
  assert_null(sc.uid);
}

static size_t heap_used(void)
{
#if defined(__SANITIZE_ADDRESS__)
  return __sanitizer_get_current_allocated_bytes();
#else
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

static void test_webhook_scan_estimate_is_above_what_json_c_allocates(void **state)
{
  (void)state;
  const struct {
    const char *item;
    bool members;
  } shapes[] = {
      {"{}", false},
      {"[]", false},
      {"0", false},
      {"-1.5e3", false},
      {"true", false},
      {"null", false},
      {"\"\"", true},
      {"\"xxxxxxxxxxxxxxxxxxxxxxxx\"", false},
      {"{}", true},
      {"{\"name\":\"c1\",\"image\":\"busybox\"}", false},
      {"[1,[2,{\"a\":[]}]]", true},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
    size_t len;
    char *body = repeated(shapes[i].item, 4000, shapes[i].members, &len);
    gmt_webhook_scan_t sc;
    char why[600];
    assert_int_equal(gmt_webhook_scan(body, len, &sc, why, sizeof why), 0);
    size_t before = heap_used();
    json_tokener *tok = json_tokener_new_ex(GMT_WEBHOOK_JSON_DEPTH);
    json_object *o = json_tokener_parse_ex(tok, body, (int)len);
    size_t took = heap_used() - before;
    assert_non_null(o);
    if (took > sc.tree_bytes || took < sc.tree_bytes / 4)
      fail_msg("%s x 4000: json-c took %zu bytes, estimated %zu", shapes[i].item, took,
               sc.tree_bytes);
    json_object_put(o);
    json_tokener_free(tok);
    free(body);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_webhook_pod_without_annotation_gets_no_patch),
      cmocka_unit_test(test_webhook_patch_creates_lists_that_are_absent),
      cmocka_unit_test(test_webhook_patch_appends_to_lists_that_exist_and_keeps_env),
      cmocka_unit_test(test_webhook_patch_keeps_a_containers_own_gmt_auto_device),
      cmocka_unit_test(test_webhook_host_pid_pod_gets_no_share_process_namespace),
      cmocka_unit_test(test_webhook_injected_pod_is_left_alone),
      cmocka_unit_test(test_webhook_refuses_bad_pod_names_and_taken_names),
      cmocka_unit_test(test_webhook_replaces_a_containers_gmt_pmgr_and_gmt_fail_closed),
      cmocka_unit_test(test_webhook_refuses_a_container_that_mounts_something_at_run_gmt),
      cmocka_unit_test(test_webhook_refuses_pods_of_more_than_64_containers),
      cmocka_unit_test(test_webhook_refuses_a_patch_past_its_bound),
      cmocka_unit_test(test_webhook_json_pointer_escapes_tilde_and_slash),
      cmocka_unit_test(test_webhook_options_refuse_a_hook_path_ld_preload_cannot_hold),
      cmocka_unit_test(test_webhook_options_refuse_a_scheduler_socket_in_the_pods_run_gmt),
      cmocka_unit_test(test_webhook_base64_pads),
      cmocka_unit_test(test_webhook_review_of_gmt_pod_is_allowed_with_a_patch),
      cmocka_unit_test(test_webhook_review_of_other_pod_is_allowed_without_patch),
      cmocka_unit_test(test_webhook_review_refuses_bad_gmt_pod_with_message),
      cmocka_unit_test(test_webhook_malformed_reviews_get_400_saying_why),
      cmocka_unit_test(test_webhook_review_with_uid_but_no_pod_is_refused_in_a_review),
      cmocka_unit_test(test_webhook_scan_refuses_a_body_of_empty_objects_before_parsing),
      cmocka_unit_test(test_webhook_scan_names_where_an_array_or_object_holds_too_many),
      cmocka_unit_test(test_webhook_review_of_40000_containers_is_refused_in_a_review),
      cmocka_unit_test(test_webhook_scan_refuses_nesting_past_the_depth_limit),
      cmocka_unit_test(
          test_webhook_scan_counts_what_strings_hide_and_refuses_what_json_does_not_hold),
      cmocka_unit_test(test_webhook_scan_estimate_is_above_what_json_c_allocates),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
