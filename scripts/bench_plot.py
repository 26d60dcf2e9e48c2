#!/usr/bin/env python3
"""Draws scripts/bench.sh's results: latency.png (usec/xfer) and
bandwidth.png (MB/sec) against message size, one panel per pass and
endpoint type, fabricfs beside libfabric.

usage: bench_plot.py BENCH.JSON OUTDIR

Each line is the median of the repeats' usec/xfer, and MB/sec is drawn as
size over it (which is what MB/sec is in a ping-pong; fi_pingpong prints
it to two decimals, 0.00 at the smallest sizes, which a log axis cannot
show). Where the JSON has the p99 of usec/xfer (the repeats' 99th
percentile, bench_report.py) a band of the line's colour runs from the
median to it: the slow runs, up in latency, down in bandwidth.
Where bench.json's load check has a quiet run's libfabric figures for the
panel's endpoint type (msg, rdm), a dashed grey line shows them, so that
a loaded run shows as libfabric far above (latency) or below (bandwidth)
its quiet self. Both axes are logarithmic. The panels are the ring passes (ringpong
through the tree against fi_pingpong -p tcp: msg, rdm), the provider pass
(fi_pingpong -p fabricfs against -p tcp: msg, rdm, rdm-tagged) and, with
the verbs pass, ringpong over the verbs domain.

With the streaming pass, stream.png: a row per kind (msg, rdm, write,
read), message rate (Mmsg/s) and bandwidth (MB/sec) against size, each
line the median of the repeats: fabtests' program -p tcp (libfabric),
ringpong -bw (fabricfs) and the program -p fabricfs (the provider).
With the one-copy pass, local.png: the same per kind (pingpong, rdm,
write, read) for ringpong over the tree's shm provider beside libfabric's
shm and tcp. Without ping-pong passes (-e stream or -e local alone)
latency.png and bandwidth.png are not drawn.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"libfabric": "libfabric (fi_pingpong -p tcp)",
          "fabricfs": "fabricfs (ringpong through the tree)",
          "provider": "fabricfs provider (fi_pingpong -p fabricfs)"}
STREAM_LABELS = {"libfabric": "libfabric (-p tcp)", "fabricfs": "fabricfs (ringpong -bw)",
                 "provider": "fabricfs provider (-p fabricfs)"}
STREAM_COLOURS = {"libfabric": "C0", "fabricfs": "C1", "provider": "C2"}
STREAM_KINDS = ("msg", "rdm", "write", "read")  # the order bench.sh runs them
# The one-copy pass (local.png): ringpong over the tree's shm provider
# beside libfabric's shm and tcp.
LOCAL_LABELS = {"shm": "libfabric -p shm", "fabricfs": "fabricfs (ringpong over shm/shm)",
                "tcp": "libfabric -p tcp"}
LOCAL_COLOURS = {"shm": "C2", "fabricfs": "C1", "tcp": "C0"}
LOCAL_KINDS = ("pingpong", "rdm", "write", "read")
# Each rate pass: its kinds, implementations' labels and colours, and the
# title of a kind's panels from the pass's JSON member.
RATE_PASSES = {
    "stream": (STREAM_KINDS, STREAM_LABELS, STREAM_COLOURS,
               lambda st, kind: "stream %s: %s, window %d" % (kind, st["commands"][kind]["libfabric"].split()[1], st["window"])),
    "local": (LOCAL_KINDS, LOCAL_LABELS, LOCAL_COLOURS,
              lambda st, kind: "local %s: %s, window %d" % (kind, st["commands"][kind]["shm"].split(" -p")[0], st["window"])),
}
# libfabric is blue and fabricfs orange in every panel; the relay's shapes
# and fabricfs's pinned placements (-F) take the colours after them.
COLOURS = {"libfabric": "C0", "fabricfs": "C1", "provider": "C1"}


def size_label(n, _pos=None):
    """64, 4K, 1M: the sizes as the tables print them."""
    for unit, suffix in ((1 << 20, "M"), (1 << 10, "K")):
        if n >= unit:
            return "%g%s" % (n / unit, suffix)
    return "%g" % n


def panels(doc):
    """(title, ep, medians) per panel, in the order the passes ran."""
    out = []
    for ep in dict.fromkeys(m["ep"] for m in doc.get("medians", [])):
        out.append(("-e %s: ringpong against fi_pingpong" % ep, ep,
                    [m for m in doc["medians"] if m["ep"] == ep]))
    prov = doc.get("provider", {}).get("medians", [])
    for ep in dict.fromkeys(m["ep"] for m in prov):
        out.append(("provider, %s: fi_pingpong -p fabricfs against -p tcp"
                    % doc["provider"]["endpoint_types"].get(ep, ep), ep,
                    [m for m in prov if m["ep"] == ep]))
    if doc.get("verbs_tree"):
        out.append(("verbs: ringpong over rxe_127_0_0_1", "verbs",
                    [dict(m, impl="fabricfs") for m in doc["verbs_tree"]]))
    return out


def draw(doc, bandwidth, ylabel, path):
    """One figure: latency, or with bandwidth MB/sec (size / usec)."""
    def value(size, usec):
        return size / usec if bandwidth else usec

    ps = panels(doc)
    cols = min(len(ps), 3)
    rows = (len(ps) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4 * rows),
                             squeeze=False, dpi=100)
    quiet = (doc.get("load") or {}).get("quiet") or []
    for ax, (title, ep, medians) in zip(axes.flat, ps):
        lo, hi = min(m["bytes"] for m in medians), max(m["bytes"] for m in medians)
        q = sorted((r["bytes"], r["usec_per_xfer"]) for r in quiet
                   if r["ep"] == ep and lo <= r["bytes"] <= hi)
        if q:
            # MB/sec of a ping-pong is size over usec/xfer.
            ax.plot([b for b, _ in q], [value(b, u) for b, u in q],
                    linestyle="--", color="grey", linewidth=1,
                    label="libfabric on a quiet machine (docs/bench.md, \"Load\")")
        impls = sorted(dict.fromkeys(m["impl"] for m in medians),
                       key=lambda i: (i not in COLOURS, i != "libfabric"))
        others = iter("C%d" % i for i in range(2, 10))
        for impl in impls:
            ms = sorted((m for m in medians if m["impl"] == impl), key=lambda m: m["bytes"])
            x = [m["bytes"] for m in ms]
            y = [value(m["bytes"], m["usec_per_xfer"]) for m in ms]
            colour = COLOURS.get(impl) or next(others, "k")
            ax.plot(x, y, marker="o", markersize=3, color=colour, label=LABELS.get(impl, impl))
            if all("usec_per_xfer_p99" in m for m in ms):
                ax.fill_between(x, y, [value(m["bytes"], m["usec_per_xfer_p99"]) for m in ms],
                                color=colour, alpha=0.2, linewidth=0)
        ax.set_xscale("log", base=2)
        ax.set_xticks([4 ** k for k in range(11) if lo <= 4 ** k <= hi] or [lo])
        ax.xaxis.set_major_formatter(size_label)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(ps):]:
        ax.set_visible(False)
    fig.suptitle(suptitle(doc), fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def suptitle(doc):
    host = doc.get("host", {})
    return "scripts/bench.sh %s, fabricfs %s, %s CPUs%s" % (
        doc.get("date", ""), host.get("fabricfs_commit", "?"), host.get("cpus", "?"),
        " (the machine was LOADED)" if doc.get("loaded") else "")


def draw_rates(doc, section, path):
    """stream.png, local.png: per kind of the pass section, message rate
    and bandwidth against size."""
    st = doc[section]
    all_kinds, labels, colours, title = RATE_PASSES[section]
    kinds = [k for k in all_kinds if any(m["ep"] == k for m in st["medians"])]
    if not kinds:
        sys.exit("bench_plot: no %s medians in the JSON" % section)
    fig, axes = plt.subplots(len(kinds), 2, figsize=(10.4, 3.6 * len(kinds)), squeeze=False, dpi=100)
    for row, kind in zip(axes, kinds):
        medians = [m for m in st["medians"] if m["ep"] == kind]
        lo, hi = min(m["bytes"] for m in medians), max(m["bytes"] for m in medians)
        for ax, key, ylabel in ((row[0], "mmsg_per_sec", "Mmsg/s (higher is better)"),
                                (row[1], "mb_per_sec", "MB/sec (higher is better)")):
            for impl in labels:
                ms = sorted((m for m in medians if m["impl"] == impl), key=lambda m: m["bytes"])
                if ms:
                    ax.plot([m["bytes"] for m in ms], [max(m[key], 1e-6) for m in ms], marker="o",
                            markersize=3, color=colours[impl], label=labels[impl])
            ax.set_xscale("log", base=2)
            ax.set_xticks([4 ** k for k in range(11) if lo <= 4 ** k <= hi] or [lo])
            ax.xaxis.set_major_formatter(size_label)
            ax.set_yscale("log")
            ax.set_title(title(st, kind), fontsize=9)
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel(ylabel)
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle(suptitle(doc), fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    os.makedirs(sys.argv[2], exist_ok=True)
    if panels(doc):
        draw(doc, False, "usec/xfer (half a round trip; lower is better)",
             os.path.join(sys.argv[2], "latency.png"))
        draw(doc, True, "MB/sec (higher is better)",
             os.path.join(sys.argv[2], "bandwidth.png"))
    elif not any(section in doc for section in RATE_PASSES):
        sys.exit("bench_plot: no medians in the JSON")
    for section in RATE_PASSES:
        if section in doc:
            draw_rates(doc, section, os.path.join(sys.argv[2], section + ".png"))


if __name__ == "__main__":
    main()
