/* The admission webhook without HTTP: the JSONPatch a Pod gets
 * (deploy/webhook/patch.c) and the answer a review gets (review.c). The
 * patches are applied to the pod in test/e2e/test_webhook.py; here each
 * operation is checked by path and value. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "patch.h"
#include "review.h"

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

/* The op at path, or NULL. */
static json_object *op_at(json_object *patch, const char *verb, const char *path)
{
  for (size_t i = 0; i < json_object_array_length(patch); i++) {
    json_object *op = json_object_array_get_idx(patch, i), *v;
    json_object_object_get_ex(op, "path", &v);
    if (strcmp(json_object_get_string(v), path) != 0)
      continue;
    json_object_object_get_ex(op, "op", &v);
    assert_string_equal(json_object_get_string(v), verb);
    json_object_object_get_ex(op, "value", &v);
    return v;
  }
  return NULL;
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
  json_object *run = op_at(p, "add", "/spec/volumes/-");
  assert_non_null(run);
  assert_string_equal(field(run, "name"), "gmt-run");
  json_object *hp;
  assert_true(json_object_object_get_ex(run, "hostPath", &hp));
  assert_string_equal(field(hp, "path"), "/run/gmt");

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
                       "ipc:///run/gmt/schd.sock",
                       "--ipc",
                       "/tmp/gmt-pmgr.sock"};
  json_object *argv;
  assert_true(json_object_object_get_ex(pmgr, "command", &argv));
  assert_int_equal(json_object_array_length(argv), 9);
  for (size_t i = 0; i < 9; i++)
    assert_string_equal(json_object_get_string(json_object_array_get_idx(argv, i)), cmd[i]);

  json_object *mounts = op_at(p, "add", "/spec/containers/0/volumeMounts");
  assert_non_null(mounts);
  assert_string_equal(field(json_object_array_get_idx(mounts, 0), "mountPath"),
                      "/usr/local/lib/gmt");
  json_object *env = op_at(p, "add", "/spec/containers/0/env");
  assert_non_null(env);
  assert_string_equal(field(json_object_array_get_idx(env, 0), "value"),
                      "/usr/local/lib/gmt/libgmthook.so");
  json_object *pm = op_at(p, "add", "/spec/containers/0/env/-");
  assert_non_null(pm);
  assert_string_equal(field(pm, "name"), "GMT_PMGR");
  assert_string_equal(field(pm, "value"), "tcp://127.0.0.1:50052");
  /* After GMT_PMGR: the hook confines the process to the gmt pod's devices=. */
  size_t n_env = 0;
  for (size_t i = 0; i < json_object_array_length(p); i++) {
    json_object *o = json_object_array_get_idx(p, i), *v;
    json_object_object_get_ex(o, "path", &v);
    if (strcmp(json_object_get_string(v), "/spec/containers/0/env/-"))
      continue;
    json_object_object_get_ex(o, "value", &v);
    const char *want[] = {"GMT_PMGR", "GMT_AUTO_DEVICE"};
    assert_true(n_env < 2);
    assert_string_equal(field(v, "name"), want[n_env]);
    if (n_env++ == 1)
      assert_string_equal(field(v, "value"), "pod");
  }
  assert_int_equal(n_env, 2);

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
                      "tcp://127.0.0.1:50052");
  assert_non_null(op_at(p, "add", "/spec/containers/0/volumeMounts/-"));
  assert_non_null(op_at(p, "add", "/spec/containers/1/volumeMounts"));
  assert_non_null(op_at(p, "add", "/spec/containers/1/env/-"));
  size_t appends = 0;
  for (size_t i = 0; i < json_object_array_length(p); i++) {
    json_object *v;
    json_object_object_get_ex(json_object_array_get_idx(p, i), "path", &v);
    appends += !strcmp(json_object_get_string(v), "/spec/containers/1/env/-");
  }
  assert_int_equal(appends, 3); /* LD_PRELOAD, GMT_PMGR and GMT_AUTO_DEVICE after K */
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
      cmocka_unit_test(test_webhook_json_pointer_escapes_tilde_and_slash),
      cmocka_unit_test(test_webhook_options_refuse_a_hook_path_ld_preload_cannot_hold),
      cmocka_unit_test(test_webhook_base64_pads),
      cmocka_unit_test(test_webhook_review_of_gmt_pod_is_allowed_with_a_patch),
      cmocka_unit_test(test_webhook_review_of_other_pod_is_allowed_without_patch),
      cmocka_unit_test(test_webhook_review_refuses_bad_gmt_pod_with_message),
      cmocka_unit_test(test_webhook_malformed_reviews_get_400_saying_why),
      cmocka_unit_test(test_webhook_review_with_uid_but_no_pod_is_refused_in_a_review),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
