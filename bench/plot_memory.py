#!/usr/bin/env python3
"""Draws bench/makespan.py --trace's CSV: for each run, each pod's bytes on
the GPU (solid) and in host memory (dashed) over time.

usage: bench/plot_memory.py TRACE.csv OUT.png   (needs matplotlib)"""
import collections
import csv
import sys

GIB = 1 << 30


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = collections.OrderedDict()
    with open(sys.argv[1]) as f:
        for run, t, pod, gpu, host in csv.reader(f):
            series = runs.setdefault(run, {}).setdefault(pod, ([], [], []))
            series[0].append(float(t))
            series[1].append(int(gpu) / GIB)
            series[2].append(int(host) / GIB)
    fig, axes = plt.subplots(len(runs), 1, figsize=(8, 2.6 * len(runs)), squeeze=False)
    for ax, (run, pods) in zip(axes[:, 0], runs.items()):
        for i, (pod, (t, gpu, host)) in enumerate(sorted(pods.items())):
            colour = "C%d" % i
            ax.plot(t, gpu, color=colour, label="%s on the GPU" % pod)
            ax.plot(t, host, color=colour, linestyle="--", label="%s in host memory" % pod)
        ax.set_title(run)
        ax.set_ylabel("GiB")
        ax.legend(loc="upper right", fontsize="small")
    axes[-1, 0].set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=90)
    return 0


if __name__ == "__main__":
    sys.exit(main())
