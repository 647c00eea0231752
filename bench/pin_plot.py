#!/usr/bin/env python3
"""Draws bench/pin_advice.py's JSON as PNGs (matplotlib, run where it is
installed: the GPU machine may lack it, so fetch the JSON and draw here).

usage: bench/pin_plot.py PIN_ADVICE_JSON OUT_DIR [--prefix NAME]

Writes into OUT_DIR (e.g. docs/img/):
  PREFIX_time.png      whole-run time (with and without the fill) and
                       copy-phase time against buffer size, per mode,
                       log-log (bars: the runs' min-max of the whole run)
  PREFIX_bytes.png     % of the buffers' bytes pinned per mode and size: as
                       the driver says (bars) and as `gmt status` saw at
                       its peak (markers)
  PREFIX_profile.png   profile against all pinned: both modes' times, and
                       every mode's speed relative to all pinned with the
                       issue's targets
  PREFIX_dataloader.png  the PyTorch DataLoader loop's steps/s per variant
                       (only when the JSON has it)
PREFIX defaults to "pin". Exits 2 when matplotlib is missing."""
import argparse
import json
import os
import sys

MIB = 1 << 20
MODES = ("native", "unpinned", "pinned", "profile", "use", "use-nostage", "adaptive",
         "adaptive-nostage")
LABEL = {"native": "native (no hook)", "unpinned": "unpinned (pin=off)",
         "pinned": "all pinned (cuMemHostAlloc)", "profile": "pin=profile", "use": "pin=use",
         "adaptive": "pin=adaptive", "use-nostage": "pin=use, copies not staged",
         "adaptive-nostage": "pin=adaptive, copies not staged"}
STYLE = {"native": ("tab:gray", "x", ":"), "unpinned": ("tab:red", "v", "-"),
         "pinned": ("black", "s", "-"), "profile": ("tab:orange", "^", "--"),
         "use": ("tab:green", "o", "-"), "adaptive": ("tab:blue", "D", "-."),
         "use-nostage": ("tab:olive", "o", ":"), "adaptive-nostage": ("tab:cyan", "D", ":")}
# Speed relative to all pinned that each mode must reach (whole run).
TARGET = {"use": 0.95, "adaptive": 0.90, "profile": 1 / 1.03}


def load_pyplot():
    try:
        import matplotlib
    except ImportError:
        sys.stderr.write("pin_plot: matplotlib is not installed here. Install it (Debian: "
                         "apt-get install -y python3-matplotlib; or pip install matplotlib) "
                         "and run pin_plot.py again on the JSON (the GPU machine need not "
                         "have it).\n")
        sys.exit(2)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def seconds_axis(ax):
    """A log axis of seconds labelled 0.3, 1, 2 rather than 3x10^-1."""
    from matplotlib import ticker
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(ticker.FormatStrFormatter("%g"))
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_ylabel("seconds (median)")


def series(summary, mode, key):
    rows = sorted((s for s in summary if s["mode"] == mode and s.get(key) is not None),
                  key=lambda s: s["size"])
    return [s["size"] / MIB for s in rows], [s[key] for s in rows], rows


def title(data, what, workload=True):
    where = "fake driver (dry run)" if data.get("fake") else (data.get("gpu") or "GPU")
    w = data.get("workload", {})
    if not workload:
        return "%s\n%s, %s" % (what, where, data.get("date", "")[:10])
    return "%s\n%s, %s; %d hot x %d+%d copies, %d cold x %d+%d" % (
        what, where, data.get("date", "")[:10], w.get("hot", 0), w.get("hot_copies", 0),
        w.get("hot_copies", 0), w.get("cold", 0), w.get("cold_copies", 0),
        w.get("cold_copies", 0))


def size_axis(ax, sizes):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels(["%g" % s for s in sizes])
    ax.set_xlabel("buffer size (MiB)")


def plot_time(plt, data, path):
    summary = data["summary"]
    sizes = sorted({s["size"] / MIB for s in summary})
    fig, axes = plt.subplots(1, 3, figsize=(17, 5))
    for ax, key, name in ((axes[0], "whole_s", "whole run (alloc + fill + copies + free)"),
                          (axes[1], "nofill_s", "whole run less the fill (first touch)"),
                          (axes[2], "copy_s", "copy phase alone")):
        for mode in MODES:
            x, y, rows = series(summary, mode, key)
            if not x:
                continue
            color, marker, line = STYLE[mode]
            if key == "whole_s":
                err = [[v - r["whole_min_s"] for v, r in zip(y, rows)],
                       [r["whole_max_s"] - v for v, r in zip(y, rows)]]
                ax.errorbar(x, y, yerr=err, color=color, marker=marker, linestyle=line,
                            label=LABEL[mode], capsize=3)
            else:
                ax.plot(x, y, color=color, marker=marker, linestyle=line, label=LABEL[mode])
        size_axis(ax, sizes)
        seconds_axis(ax)
        ax.set_title(name)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title(data, "Time against buffer size, per pin mode"))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_bytes(plt, data, path):
    summary = data["summary"]
    sizes = sorted({s["size"] for s in summary})
    modes = [m for m in MODES if any(s["mode"] == m for s in summary)]
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / max(1, len(modes))
    by = {(s["size"], s["mode"]): s for s in summary}
    for k, mode in enumerate(modes):
        xs = [i + (k - (len(modes) - 1) / 2) * width for i in range(len(sizes))]
        drv = [(by.get((s, mode)) or {}).get("pinned_pct") for s in sizes]
        st = [(by.get((s, mode)) or {}).get("status_peak_pinned_pct") for s in sizes]
        color = STYLE[mode][0]
        ax.bar(xs, [v or 0 for v in drv], width, color=color, alpha=0.75, label=LABEL[mode])
        pts = [(x, v) for x, v in zip(xs, st) if v is not None]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], color=color, marker="_", s=200,
                       linewidths=2.5, zorder=3)
    ax.axhline(10, color="tab:green", linestyle=":", linewidth=1)
    ax.text(len(sizes) - 0.5, 11, "use: <= 10%", color="tab:green", ha="right", fontsize=8)
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels(["%g MiB" % (s / MIB) for s in sizes])
    ax.set_ylabel("% of the buffers' bytes pinned")
    ax.set_ylim(0, 110)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", ncol=3)
    ax.set_title(title(data, "Bytes pinned per mode: bars as the driver says at the end of the "
                             "copies, dashes the peak of `gmt status` host.pinned_bytes"),
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_profile(plt, data, path):
    summary = data["summary"]
    sizes = sorted({s["size"] / MIB for s in summary})
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    ax = axes[0]
    for mode in ("pinned", "profile"):
        color, marker, _ = STYLE[mode]
        for key, line, what in (("whole_s", "-", "whole"), ("copy_s", "--", "copies")):
            x, y, _ = series(summary, mode, key)
            if x:
                ax.plot(x, y, color=color, marker=marker, linestyle=line,
                        label="%s, %s" % (LABEL[mode], what))
    size_axis(ax, sizes)
    seconds_axis(ax)
    ax.set_title("pin=profile against all pinned")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)

    ax = axes[1]
    for mode in MODES:
        x, y, _ = series(summary, mode, "speed_vs_pinned")
        if not x or mode == "pinned":
            continue
        color, marker, line = STYLE[mode]
        ax.plot(x, y, color=color, marker=marker, linestyle=line, label=LABEL[mode])
        if mode == "use":
            xc, yc, _ = series(summary, mode, "copy_speed_vs_pinned")
            ax.plot(xc, yc, color=color, marker=marker, linestyle=":", alpha=0.6,
                    label="pin=use, copy phase")
    for mode, want in TARGET.items():
        ax.axhline(want, color=STYLE[mode][0], linestyle=":", linewidth=1)
        ax.text(sizes[0] if sizes else 1, want, " %s target %.2f" % (mode, want),
                color=STYLE[mode][0], fontsize=7, va="bottom")
    ax.axhline(0.75, color=STYLE["use"][0], linestyle=(0, (1, 4)), linewidth=1)
    ax.text(sizes[0] if sizes else 1, 0.75, " use copy target 0.75", color=STYLE["use"][0],
            fontsize=7, va="bottom")
    ax.axhline(1.0, color="black", linewidth=0.8)
    size_axis(ax, sizes)
    ax.set_ylabel("speed relative to all pinned (its time / this mode's)")
    ax.set_title("every mode against all pinned (whole run)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle(title(data, "Profile against all pinned"))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_dataloader(plt, data, path):
    summary = data["dataloader"]["summary"]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    names = [s["variant"] for s in summary]
    ax.barh(range(len(names)), [s["steps_per_s"] for s in summary],
            color=["tab:gray" if s["pin"] is None else "tab:blue" for s in summary])
    for i, s in enumerate(summary):
        ax.text(s["steps_per_s"], i, " %.2f" % s["steps_per_s"], va="center", fontsize=8)
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names)
    ax.invert_yaxis()
    ax.set_xlabel("training steps/s (median); gray: no hook")
    ax.set_title(title(data, "PyTorch DataLoader training loop per pin mode", workload=False), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("out_dir")
    ap.add_argument("--prefix", default="pin")
    args = ap.parse_args()
    with open(args.json) as f:
        data = json.load(f)
    if not data.get("summary"):
        raise SystemExit("pin_plot: %s has no results (no run succeeded?)" % args.json)
    plt = load_pyplot()
    os.makedirs(args.out_dir, exist_ok=True)
    made = []
    for name, fn in (("time", plot_time), ("bytes", plot_bytes), ("profile", plot_profile)):
        path = os.path.join(args.out_dir, "%s_%s.png" % (args.prefix, name))
        fn(plt, data, path)
        made.append(path)
    if (data.get("dataloader") or {}).get("summary"):
        path = os.path.join(args.out_dir, "%s_dataloader.png" % args.prefix)
        plot_dataloader(plt, data, path)
        made.append(path)
    print("\n".join(made))


if __name__ == "__main__":
    main()
