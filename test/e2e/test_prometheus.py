"""End-to-end: a real Prometheus scrapes gmt-schd --metrics (issue 14, item
3; docs/operators.md, "Prometheus metrics"). Prometheus and promtool are
the Debian package's static binaries, unpacked by scripts/setup.sh into
.cache/prometheus (not installed: no service starts on the machine);
GMT_PROMETHEUS_DIR names another unpacked tree. Without them the tests skip,
or fail under CI=true.

promtool's linter passes a scrape of a node with a strict and a swap pod
and a job holding memory; then Prometheus, scraping every second, stores
what `gmt status --json` says: each pod's quota and memory, the process's,
and `up` 1 for the target."""
import json
import os
import subprocess
import time
import unittest
import urllib.parse
import urllib.request

from gmt_e2e import BUILD, GmtTestCase, cannot_run, free_port, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
PROM_DIR = os.environ.get("GMT_PROMETHEUS_DIR",
                          os.path.join(HERE, "..", "..", ".cache", "prometheus"))
PROMETHEUS = os.path.join(PROM_DIR, "usr", "bin", "prometheus")
PROMTOOL = os.path.join(PROM_DIR, "usr", "bin", "promtool")
DEV_ALLOC = os.path.join(BUILD, "test", "e2e", "memprogs", "dev_alloc")
MIB = 1 << 20


class RealPrometheus(GmtTestCase):
    CONFIG = "2\na 0.5 1.0 1Gi\nb 0.5 1.0 2Gi mode=swap\n"

    def setUp(self):
        super().setUp()
        if not (os.access(PROMETHEUS, os.X_OK) and os.access(PROMTOOL, os.X_OK)):
            cannot_run(self, "no Prometheus at %s (scripts/setup.sh unpacks Debian's)" % PROM_DIR)
        self.metrics_port = free_port()
        self.start_schd("--metrics", "127.0.0.1:%d" % self.metrics_port)
        self.start_pmgr("a")
        self.start_pmgr("b")
        # A job of pod a holding 64 MiB, until the test ends.
        self.job = self.run_prog("a", DEV_ALLOC, "0:%d" % (64 * MIB))
        self.job.expect("READY", timeout=30)
        wait_for(lambda: (self.pod("a") or {}).get("memory_used") == 64 * MIB, timeout=10,
                 what="pod a to hold the job's 64 MiB")

    def scrape(self):
        url = "http://127.0.0.1:%d/metrics" % self.metrics_port
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read()

    def test_promtool_finds_nothing_to_lint(self):
        body = self.scrape()
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, (r.stdout + r.stderr).decode()[-3000:])
        self.assertEqual((r.stdout + r.stderr).decode().strip(), "")
        self.assertIn(b"gmt_pod_memory_used_bytes", body)

    def query(self, port, expr):
        """Prometheus's instant query of expr: {labels as a tuple: value}."""
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": expr}))
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                rep = json.load(r)
        except OSError:
            return {}
        if rep.get("status") != "success":
            return {}
        return {tuple(sorted(x["metric"].items())): float(x["value"][1])
                for x in rep["data"]["result"]}

    def test_prometheus_stores_what_gmt_status_says(self):
        port = free_port()
        conf = os.path.join(self.tmp, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: gmt\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % self.metrics_port)
        log = open(os.path.join(self.tmp, "prometheus.log"), "w")
        prom = subprocess.Popen([PROMETHEUS, "--config.file", conf,
                                 "--storage.tsdb.path", os.path.join(self.tmp, "tsdb"),
                                 "--web.listen-address", "127.0.0.1:%d" % port],
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            def logs():
                with open(log.name) as f:
                    return f.read()[-3000:]
            try:
                wait_for(lambda: list(self.query(port, 'up{job="gmt"}').values()) == [1],
                         timeout=30, what="Prometheus to scrape gmt-schd")
            except AssertionError as e:
                self.fail("%s\nprometheus: %s" % (e, logs()))
            status = self.status()
            for name in "ab":
                pod = next(p for p in status["pods"] if p["name"] == name)
                got = self.query(port, 'gmt_pod_memory_limit_bytes{pod="%s"}' % name)
                self.assertEqual(list(got.values()), [pod["memory_limit"]], got)
                got = self.query(port, 'gmt_pod_memory_used_bytes{pod="%s"}' % name)
                self.assertEqual(list(got.values()), [pod["memory_used"]], got)
            self.assertEqual(
                list(self.query(port, 'gmt_pod_memory_used_bytes{pod="a"}').values()), [64 * MIB])
            pid = str(self.job.proc.pid)
            got = self.query(port, 'gmt_process_memory_used_bytes{pod="a",pid="%s"}' % pid)
            self.assertEqual(list(got.values()), [64 * MIB], got)
        finally:
            prom.terminate()
            try:
                prom.wait(timeout=10)
            except subprocess.TimeoutExpired:
                prom.kill()
                prom.wait(timeout=10)
            log.close()


MONITORING = os.path.join(HERE, "..", "..", "deploy", "monitoring")
METRICS_C = os.path.join(HERE, "..", "..", "server", "metrics.c")


def families():
    """The metric families gmt-schd serves (server/metrics.c's table)."""
    import re
    with open(METRICS_C) as f:
        return set(re.findall(r'\{"(gmt_[a-z_]+)"', f.read()))


def metric_names(expr):
    import re
    return set(re.findall(r"\bgmt_[a-z_]+\b", expr))


class Monitoring(unittest.TestCase):
    """deploy/monitoring: the alert rules pass promtool's own rule tests
    (each alert fires on the series that should fire it and not on others),
    and every query of the Grafana dashboard and the rules is valid PromQL
    over metrics gmt-schd serves."""

    def setUp(self):
        if not os.access(PROMTOOL, os.X_OK):
            cannot_run(self, "no promtool at %s (scripts/setup.sh unpacks Debian's)" % PROM_DIR)

    def promtool(self, *args):
        r = subprocess.run([PROMTOOL] + list(args), cwd=MONITORING, capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, (r.stdout + r.stderr)[-3000:])
        return r.stdout

    def test_alert_rules_pass_their_own_tests(self):
        self.assertIn("SUCCESS: 9 rules found", self.promtool("check", "rules", "gmt-rules.yaml"))
        self.assertIn("SUCCESS", self.promtool("test", "rules", "gmt-rules.test.yaml"))
        import yaml
        with open(os.path.join(MONITORING, "gmt-rules.yaml")) as f:
            rules = yaml.safe_load(f)["groups"][0]["rules"]
        for r in rules:
            self.assertLessEqual(metric_names(r["expr"]), families(), r["alert"])

    def test_dashboard_queries_are_promql_over_served_metrics(self):
        import tempfile
        import yaml
        with open(os.path.join(MONITORING, "grafana-dashboard.json")) as f:
            dash = json.load(f)
        exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
        self.assertGreaterEqual(len(exprs), 8)
        for e in exprs:
            self.assertTrue(metric_names(e), e)
            self.assertLessEqual(metric_names(e), families(), e)
        # Grafana's variables as Prometheus would see them, each query a
        # recording rule: promtool parses every one.
        rules = [{"record": "gmt:dashboard:%d" % i,
                  "expr": e.replace("$__rate_interval", "1m").replace("$instance", ".*")}
                 for i, e in enumerate(exprs)]
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
        try:
            self.assertIn("SUCCESS: %d rules found" % len(rules),
                          self.promtool("check", "rules", f.name))
        finally:
            os.unlink(f.name)
