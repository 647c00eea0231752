#!/usr/bin/env python3
"""An inference service beside a training job on the real GPU (issue 25):
what a latency pod's requests wait, side by side in one run.

The service (test/gpu/serve_job.py: 8 x Linear(2048), .item() per call)
serves each load in turn (closed loop at batch 1 and 64, open loop at
batch 1 with Poisson arrivals at 100, 500 and 1000 requests/s):
  alone     no training, no gmt
  no gmt    beside the training job, the driver's own time slicing
  batch     under gmt, both pods batch, REQUEST 0.5 / 0.5
  latency   under gmt, the service's pod class=latency, the training's batch
  latency@MS  the same with gmt-schd --latency-idle-ms MS (default 2)
  latency-nobell  latency without the bell (GMT_BELL names no socket): the
            training hears of each request only through the daemons
  latency-nostay  latency with no stay of the bell after a request
            (GMT_BELL_STAY_US=0): a training kernel may slip in between
            requests that follow each other
for each training job:
  mlp       6 x Linear(4096), batch 8192, fp32, SGD, loss.item() each step
            (about 93 ms a step on an H200; its longest kernels several ms)
  fp16-2048 products of 2048x2048 fp16 matrices, a synchronize every 50
            (kernels under 0.5 ms)
It prints p50 / p99 / p99.9 of each load's latency and the training's rate
during it (as a fraction of its rate alone), and writes every latency to
$OUT/latency_cdf.txt ("<training>_<setup> <load> <ms>" lines) and a plot,
$OUT/latency_cdf.png, where matplotlib is.

usage: bench/latency.py [--seconds S] [--trains mlp,fp16-2048] [--loads L]
                        [--scenarios S] [--schd-args "FLAGS"] [--debug DIR]
GMT_BUILD_DIR names the build (default build/); needs a GPU."""
import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
import gmt_e2e  # noqa: E402

SERVE = os.path.join(HERE, "..", "test", "gpu", "serve_job.py")
TRAIN = os.path.join(HERE, "..", "test", "gpu", "matmul_job.py")
TRAINS = {
    "mlp": ["--mode", "train", "--dtype", "fp32", "--width", "4096", "--depth", "6"],
    "fp16-2048": ["--mode", "matmul", "--dtype", "fp16", "--size", "2048", "--sync", "50"],
}
CONFIGS = {
    "batch": "2\ninfer 0.5 1.0 64Gi\ntrain 0.5 1.0 64Gi\n",
    "latency": "2\ninfer 0.5 1.0 64Gi class=latency\ntrain 0.5 1.0 64Gi\n",
}


def start_train(train, env):
    p = gmt_e2e.Prog([sys.executable, TRAIN, "--seconds", "0"] + TRAINS[train], env)
    p.expect("READY", timeout=120)
    return p


def train_rows(p):
    p.finish(timeout=60)
    return [(float(r["mono_ms"]), float(r["work"])) for r in p.records(timeout=30)
            if "mono_ms" in r]


def rate_in(rows, t0, t1):
    """Work per second between the first T line after t0 and the last before t1."""
    inside = [r for r in rows if t0 <= r[0] <= t1]
    if len(inside) < 2:
        return float("nan")
    return (inside[-1][1] - inside[0][1]) / ((inside[-1][0] - inside[0][0]) / 1000.0)


def serve(env, args, cdf, tag, hooked):
    argv = [sys.executable, SERVE, "--loads", args.loads, "--seconds", str(args.seconds)]
    if cdf:
        argv += ["--cdf", cdf + "." + tag]
    if args.debug:
        argv += ["--trace", os.path.join(args.debug, tag + ".requests")]
    p = gmt_e2e.Prog(argv, env)
    p.expect("READY", timeout=120)
    rows = p.records(prefixes=("L ",), timeout=60 + 10 * args.seconds * len(args.loads.split(",")))
    rc, err = p.finish(timeout=60)
    if args.debug:
        with open(os.path.join(args.debug, tag + ".serve.err"), "w") as f:
            f.write(err)
    if rc != 0:
        raise SystemExit("serve_job failed: " + err[-2000:])
    if "unhooked" in err and hooked:
        raise SystemExit("the service did not register with its pod manager: " + err[-2000:])
    return [r for r in rows if "load" in r]


def scenario(name, train, args, cdf):
    """The service's L rows and the training's rate in each load."""
    tag = "%s_%s" % (train, name.replace(" ", "-"))
    config, _, idle_ms = name.partition("@")
    config, nobell = (config[:-len("-nobell")], True) if config.endswith("-nobell") \
        else (config, False)
    config, nostay = (config[:-len("-nostay")], True) if config.endswith("-nostay") \
        else (config, False)
    if config in CONFIGS:
        node = gmt_e2e.Node(CONFIGS[config], fake=False)
        try:
            node.start_schd(*(("--latency-idle-ms", idle_ms) if idle_ms else ()),
                            *args.schd_args.split())
            # As deployed: the pod managers reach gmt-schd on its ipc socket
            # and the processes theirs, beside which each hands out the bell.
            for pod in ("infer", "train"):
                node.start_pmgr(pod, "--schd", "ipc://" + node.schd_ipc)

            def env(pod):
                e = node.hook_env(pod, GMT_PMGR="ipc://" + os.path.join(
                    node.tmp, "run", "pmgr-%s.sock" % pod))
                if nobell:  # a socket with no bell behind it
                    e["GMT_BELL"] = os.path.join(node.tmp, "no-bell")
                if nostay:
                    e["GMT_BELL_STAY_US"] = "0"
                if args.debug:
                    e["GMT_HOOK_DEBUG"] = "2"
                return e
            t = start_train(train, env("train"))
            time.sleep(2)
            rows = serve(env("infer"), args, cdf, tag, True)
            trows = train_rows(t)
            if args.debug:
                with open(os.path.join(args.debug, tag + ".train.err"), "w") as f:
                    f.write(t.stderr())
                for d in node.daemons:  # before stop(), which removes them
                    with open(os.path.join(args.debug, "%s.%s.log" % (tag, d.name)), "w") as f:
                        f.write(d.output())
        finally:
            node.stop()
    else:
        env = gmt_e2e.Node("0\n", fake=False).prog_env()
        t = start_train(train, env) if name == "no gmt" else None
        if t:
            time.sleep(2)
        rows = serve(env, args, cdf, tag, False)
        trows = train_rows(t) if t else []
    for r in rows:
        r["train_rate"] = rate_in(trows, float(r["mono0_ms"]), float(r["mono1_ms"]))
    return rows


def alone_rate(train):
    env = gmt_e2e.Node("0\n", fake=False).prog_env()
    t = start_train(train, env)
    time.sleep(8)
    rows = train_rows(t)
    return rate_in(rows, rows[0][0] + 1000, rows[-1][0])


def plot(cdf, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no matplotlib: no plot; the latencies are in %s.*)" % cdf)
        return
    series = {}
    for path in sorted(p for p in os.listdir(os.path.dirname(cdf))
                       if p.startswith(os.path.basename(cdf) + ".")):
        tag = path.split(".", 1)[1].replace("_", " ")  # "mlp latency"
        for line in open(os.path.join(os.path.dirname(cdf), path)):
            load, ms = line.split()
            series.setdefault((load, tag), []).append(float(ms))
    loads = sorted({k[0] for k in series})
    fig, axes = plt.subplots(1, len(loads), figsize=(5 * len(loads), 4), squeeze=False)
    for ax, load in zip(axes[0], loads):
        for (ld, tag), xs in sorted(series.items()):
            if ld != load:
                continue
            xs.sort()
            ax.plot(xs, [1 - i / len(xs) for i in range(len(xs))], label=tag)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(load)
        ax.set_xlabel("latency (ms)")
        ax.set_ylabel("fraction slower")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("plot: %s" % out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5, help="each load")
    ap.add_argument("--trains", default="mlp,fp16-2048")
    ap.add_argument("--loads", default="closed:1,closed:64,open:1:100,open:1:500,open:1:1000")
    ap.add_argument("--scenarios", default="alone,no gmt,batch,latency")
    ap.add_argument("--schd-args", default="", help="more gmt-schd flags, e.g. --no-trace")
    ap.add_argument("--debug", metavar="DIR", help="the hooks' timed debug lines, each "
                    "request's arrival and latency, and the daemons' logs, into DIR")
    args = ap.parse_args()
    if args.debug:
        os.environ["GMT_LOG_TIMES"] = "1"  # the daemons' lines timed as the hooks'
    out = os.environ.get("OUT")
    tmp = tempfile.mkdtemp(prefix="gmt-latency-")
    cdf = os.path.join(tmp, "cdf")
    table = []
    alone_rows = None
    for train in args.trains.split(","):
        base = alone_rate(train)
        for name in args.scenarios.split(","):
            if name == "alone":
                if alone_rows is None:
                    alone_rows = scenario("alone", train, args, cdf)
                rows = alone_rows
            else:
                rows = scenario(name, train, args, cdf)
            for r in rows:
                table.append((train, name, r, base))
    print("\nLatency of an inference service beside training (ms), and the training's rate "
          "during each load over its rate alone")
    print("%-10s %-14s %-14s %8s %8s %8s %9s %9s %7s" % (
        "training", "setup", "load", "req/s", "p50", "p99", "p99.9", "max", "train"))
    for train, name, r, base in table:
        tr = r["train_rate"] / base if name != "alone" else float("nan")
        print("%-10s %-14s %-14s %8.1f %8.3f %8.3f %9.3f %9.3f %7.3f" % (
            train, name, r["load"], float(r["rate"]), float(r["p50_ms"]), float(r["p99_ms"]),
            float(r["p999_ms"]), float(r["max_ms"]), tr))
    print("targets (issue 25, latency): p99 within 1.1x and p99.9 within 1.5x of alone beside "
          "fp16-2048; within alone + the longest training kernel beside mlp; training keeps "
          ">= 0.8 of the GPU time the service leaves idle")
    if out:
        with open(os.path.join(out, "latency_cdf.txt"), "w") as f:
            for path in sorted(os.listdir(tmp)):
                tag = path.split(".", 1)[1]
                f.writelines("%s %s" % (tag, line) for line in open(os.path.join(tmp, path)))
        plot(cdf, os.path.join(out, "latency_cdf.png"))


if __name__ == "__main__":
    main()
