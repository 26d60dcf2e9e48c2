#!/usr/bin/env python3
"""Writes scripts/bench.sh's results as JSON, YAML and CSV, and judges
whether the machine was quiet enough for them to mean anything.

usage: bench_report.py WORKDIR OUTDIR

WORKDIR is bench.sh's scratch directory: meta.tsv (key, value: the run's
configuration and host), raw.tsv and provider.tsv (every run: ep impl
size rep order iters usec mbps), medians.tsv and provider_medians.tsv
(ep impl size iters usec mbps), ratios.tsv and provider_ratios.tsv (ep
size lib_usec impl_usec lat_ratio lib_mbps impl_mbps bw_ratio),
floor.tsv, shapes.tsv, skipped.tsv, verdicts.tsv, and with the verbs pass
verbs.json, verbs_tree.tsv (size rep iters usec mbps) and
verbs_tree_medians.tsv (size usec mbps); with the streaming pass
stream.tsv (every run: kind impl size rep order iters mbps rate cpu_s
msgs), stream_medians.tsv (kind impl size iters mbps rate cpu_per_mmsg),
stream_ratios.tsv (kind impl size rate_ratio bw_ratio),
stream_verdicts.tsv and stream_failed.tsv (kind impl size rep: the runs
that failed twice and have no figure); with the one-copy pass the same
as local*.tsv, its ratios to libfabric's shm and tcp in
local_ratios_shm.tsv and local_ratios_tcp.tsv. bench.sh computes the
medians, ratios and verdicts it prints; this script only adds the means
and percentiles of the repeats and the load check, and encodes.

Into OUTDIR it writes:
  bench.json      everything, with a real encoder (no NaN, no hand-made
                  quoting)
  bench.yaml      the medians in fabtests' machine-readable format (`-m`,
                  common/shared.c show_perf_mr): one YAML document per
                  program and endpoint type (or streaming kind), a flow
                  mapping per size
  bench.csv       one row per pass, endpoint type, implementation and size:
                  mean, p50 and p99 of usec/xfer and MB/sec over the
                  repeats, and for the streaming pass (pass "stream", ep
                  its kind) of the CPU seconds per million messages
  bench-runs.csv  one row per run (with the streaming pass's CPU seconds
                  and messages)
It prints the load verdict on stdout: a line starting with WARNING when
libfabric's own runs were more than LOAD_LIMIT times slower than on a
quiet machine.
"""
import csv
import json
import os
import sys

# libfabric's own ping-pong (FI_TCP_IFACE=lo fi_pingpong -p tcp -d lo),
# usec/xfer, on this project's 2-vCPU VM in quiet runs (docs/bench.md,
# "Load"). msg: scripts/bench.sh, 2026-11-21, fabricfs dcd2db2, medians of
# 5. rdm: scripts/bench.sh -r 3, fabricfs c1bec7b, nothing else running,
# medians of 3.
QUIET = {
    "msg": {1: 5.88, 2: 7.64, 4: 7.66, 8: 5.40, 16: 5.75, 32: 7.45, 64: 7.51,
            128: 7.55, 256: 7.53, 512: 7.84, 1024: 5.77, 2048: 6.27,
            4096: 6.58, 8192: 7.33, 16384: 9.45, 32768: 12.45, 65536: 22.13,
            131072: 38.61, 262144: 42.60, 524288: 63.37, 1048576: 188.66},
    "rdm": {64: 8.73, 4096: 9.50, 16384: 12.53, 32768: 36.21, 65536: 74.51,
            262144: 92.62, 524288: 112.92, 1048576: 211.10},
}
# libfabric's own streaming programs (fi_msg_bw, fi_rdm_tagged_bw,
# fi_rma_bw -o write|read, -p tcp, window 64), usec per message, in the
# stream pass of a quiet run: scripts/bench.sh -e stream,local, 2026-11-27,
# fabricfs 1647408, nothing else running, medians of 5.
QUIET_STREAM = {
    "msg": {1: 4.52, 64: 4.28, 1024: 5.88, 16384: 7.78, 65536: 20.98, 262144: 64.91, 1048576: 252.65},
    "rdm": {1: 4.97, 64: 5.57, 1024: 6.12, 16384: 12.36, 65536: 25.6, 262144: 69.94, 1048576: 260.39},
    "write": {1: 4.98, 64: 5.13, 1024: 5.84, 16384: 12.52, 65536: 39.67, 262144: 123.08, 1048576: 456.55},
    "read": {1: 12.24, 64: 9.98, 1024: 9.73, 16384: 17.1, 65536: 40.81, 262144: 133.14, 1048576: 624.15},
}
# A run whose libfabric took more than LOAD_LIMIT times its quiet time
# (the median over the sizes both have) was loaded.
LOAD_LIMIT = 1.5

# The streaming pass's kinds: fabtests' program and ringpong's flags.
STREAM_PROGS = {"msg": "fi_msg_bw", "rdm": "fi_rdm_tagged_bw",
                "write": "fi_rma_bw -e msg -o write", "read": "fi_rma_bw -e msg -o read"}
STREAM_RINGPONG = {"msg": "-e msg -op send", "rdm": "-e rdm -op send",
                   "write": "-e msg -op write", "read": "-e msg -op read"}
STREAM_KEYS = ("usec_per_xfer", "mb_per_sec", "mmsg_per_sec", "cpu_s_per_mmsg")

SHAPE_FLAGS = {"relay": "", "relay-pinned": "-p", "split": "-m split",
               "split-pinned": "-m split -p"}


def rows(path):
    """The tab-separated rows of path, [] when it does not exist."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def num(s):
    """s as an int or a float; None when empty."""
    if s == "":
        return None
    try:
        return int(s)
    except ValueError:
        return float(s)


def percentile(values, p):
    """The p-th percentile of values, interpolated linearly between the
    two nearest ranks (p 50 is the median)."""
    v = sorted(values)
    k = (len(v) - 1) * p / 100
    i = int(k)
    if i + 1 >= len(v):
        return v[-1]
    return v[i] + (v[i + 1] - v[i]) * (k - i)


def with_stats(record, runs, keys=("usec_per_xfer", "mb_per_sec")):
    """record with the mean and p99 of runs' keys (usec_per_xfer and
    mb_per_sec) beside its medians (bench.sh's), which are the p50."""
    for key in keys:
        values = [r[key] for r in runs]
        digits = 6 if key == "mmsg_per_sec" else 2  # rates well below 1 Mmsg/s
        record.update({key + "_mean": round(sum(values) / len(values), digits),
                       key + "_p50": record[key],
                       key + "_p99": round(percentile(values, 99), digits)})
    return record


def read_runs(path):
    runs = []
    for ep, impl, size, rep, order, iters, usec, mbps in rows(path):
        runs.append({"ep": ep, "impl": impl, "bytes": int(size),
                     "rep": int(rep), "order": int(order),
                     "iters": int(iters), "usec_per_xfer": float(usec),
                     "mb_per_sec": float(mbps)})
    return runs


def read_medians(path, runs):
    """The medians bench.sh computed, each with the mean, p50 and p99 of
    its runs (fi_pingpong and ringpong time whole runs, not single round
    trips, so the percentiles are over the repeats)."""
    by = {}
    for r in runs:
        by.setdefault((r["ep"], r["impl"], r["bytes"]), []).append(r)
    medians = []
    for ep, impl, size, iters, usec, mbps in rows(path):
        rs = by[(ep, impl, int(size))]
        medians.append(with_stats({"ep": ep, "impl": impl, "bytes": int(size),
                                   "iters": int(iters), "runs": len(rs),
                                   "usec_per_xfer": float(usec), "mb_per_sec": float(mbps)}, rs))
    return medians


def read_ratios(path):
    return [{"ep": ep, "bytes": int(size), "latency_ratio": float(lat),
             "bandwidth_ratio": float(bw)}
            for ep, size, _, _, lat, _, _, bw in rows(path)]


def verdict(lat, lat_ok, bwmin, bw_ok, at):
    ok = {"true": True, "false": False, "null": None}
    return {"latency_64B": {"ratio": num(lat), "limit": 1.5, "met": ok[lat_ok]},
            "bandwidth_from_64KiB": {"min_ratio": num(bwmin), "at_bytes": num(at),
                                     "limit": 1.0, "met": ok[bw_ok]}}


def targets(path, impls):
    """The verdicts of verdicts.tsv ("ep|impl|lat|lat_ok|min|bw_ok|at")
    for the (ep, impl) pairs of impls, keyed by the first of each pair's
    names; null verdicts for a pair without a line (no size run)."""
    lines = {}
    for row in rows(path):
        f = row[0].split("|")
        lines[(f[0], f[1])] = f[2:]
    out = {}
    for name, ep, impl in impls:
        out[name] = verdict(*lines.get((ep, impl), ["", "null", "", "null", ""]))
    return out


def read_rate_pass(work, name):
    """A pass of bench.sh's run_rate_pass (stream, local): its runs, the
    medians (with the repeats' mean and p99) and the runs that failed.
    usec_per_xfer is the inverse of the message rate, as fabtests prints
    it."""
    path = lambda f: os.path.join(work, name + f)
    runs = []
    for kind, impl, size, rep, order, iters, mbps, rate, cpu, msgs in rows(path(".tsv")):
        r = {"ep": kind, "impl": impl, "bytes": int(size), "rep": int(rep), "order": int(order),
             "iters": int(iters), "mb_per_sec": float(mbps), "mmsg_per_sec": float(rate),
             "usec_per_xfer": round(1 / float(rate), 4) if float(rate) > 0 else 0.0,
             "cpu_s": float(cpu), "msgs": int(msgs),
             "cpu_s_per_mmsg": round(float(cpu) * 1e6 / int(msgs), 4) if int(msgs) > 0 else 0.0}
        runs.append(r)
    by = {}
    for r in runs:
        by.setdefault((r["ep"], r["impl"], r["bytes"]), []).append(r)
    medians = []
    for kind, impl, size, iters, mbps, rate, cpu in rows(path("_medians.tsv")):
        rs = by[(kind, impl, int(size))]
        m = {"ep": kind, "impl": impl, "bytes": int(size), "iters": int(iters), "runs": len(rs),
             "mb_per_sec": float(mbps), "mmsg_per_sec": float(rate),
             "usec_per_xfer": round(percentile([r["usec_per_xfer"] for r in rs], 50), 4),
             "cpu_s_per_mmsg": float(cpu)}
        medians.append(with_stats(m, rs, STREAM_KEYS))
    failed = [{"ep": kind, "impl": impl, "bytes": int(size), "rep": int(rep)}
              for kind, impl, size, rep in rows(path("_failed.tsv"))]
    return runs, medians, failed


def read_rate_ratios(path):
    """A ratios file of rate_ratios: kind impl size rate_ratio bw_ratio."""
    return [{"ep": kind, "impl": impl, "bytes": int(size), "rate_ratio": float(rr),
             "bandwidth_ratio": float(br)} for kind, impl, size, rr, br in rows(path)]


CPU_NOTE = ("cpu_s: CPU seconds (user + system) of every process of the run and of the "
            "daemon, from the kernel's accounting of waited-for children and /proc/PID/stat; "
            "cpu_s_per_mmsg: per million messages moved, warm-up included (RMA and the "
            "ping-pong: both sides')")


def read_stream(work, meta):
    """The streaming pass: its runs, medians, ratios to libfabric -p tcp
    and verdicts."""
    path = lambda name: os.path.join(work, name)
    runs, medians, failed = read_rate_pass(work, "stream")
    targets = {}
    for row in rows(path("stream_verdicts.tsv")):
        kind, rate, rate_ok, bwmin, bw_ok, at, _, bw_from = row[0].split("|")
        ok = {"true": True, "false": False, "null": None}
        t = {"bandwidth": {"min_ratio": num(bwmin), "at_bytes": num(at), "from_bytes": int(bw_from),
                           "limit": 1.0, "met": ok[bw_ok]}}
        if kind in ("msg", "rdm"):
            t["message_rate_64B"] = {"ratio": num(rate), "limit": 2.0, "met": ok[rate_ok]}
        targets[kind] = t
    return {"window": int(meta["window"]),
            "sizes": [int(s) for s in meta["stream_sizes"].split(",")],
            "warmup": int(meta["warmup"]),
            "commands": {kind: {"libfabric": "FI_TCP_IFACE=lo %s -p tcp -d lo -W W -S SIZE -I ITERS -w WARMUP -m" % prog,
                                "provider": "FI_PROVIDER_PATH=bin FI_FABRICFS_ROOT=MNT %s -p fabricfs -d tcp/lo -W W -S SIZE -I ITERS -w WARMUP -m" % prog,
                                "fabricfs": "ringpong -mnt MNT -bw -W W %s -sizes SIZE -iters ITERS -warmup WARMUP -json" % STREAM_RINGPONG[kind]}
                         for kind, prog in STREAM_PROGS.items()},
            "cpu": CPU_NOTE, "runs": runs, "medians": medians, "failed": failed,
            "ratios": read_rate_ratios(path("stream_ratios.tsv")), "targets": targets}


# The one-copy pass's kinds: libfabric's program (-p shm and -p tcp) and
# ringpong's flags (over the tree's shm/shm).
LOCAL_PROGS = {"pingpong": "fi_pingpong -e rdm", "rdm": "fi_rdm_tagged_bw",
               "write": "fi_rma_bw -e rdm -o write", "read": "fi_rma_bw -e rdm -o read"}
LOCAL_RINGPONG = {"pingpong": "-e rdm", "rdm": "-bw -e rdm -op send",
                  "write": "-bw -e rdm -op write", "read": "-bw -e rdm -op read"}


def read_local(work, meta):
    """The one-copy pass (-e local): its runs and medians (impl fabricfs:
    ringpong over the tree's shm provider; shm and tcp: libfabric's), the
    ratios to libfabric's shm and tcp, and the verdicts."""
    path = lambda name: os.path.join(work, name)
    runs, medians, failed = read_rate_pass(work, "local")
    ok = {"true": True, "false": False, "null": None}
    targets = {}
    for row in rows(path("local_verdicts.tsv")):
        kind, rate, rate_ok, bs, bs_ok, bs_at, bt, bt_ok, bt_at = row[0].split("|")
        t = {"bandwidth_vs_shm": {"min_ratio": num(bs), "at_bytes": num(bs_at), "from_bytes": 65536,
                                  "limit": 1.0, "met": ok[bs_ok]},
             "bandwidth_vs_tcp": {"min_ratio": num(bt), "at_bytes": num(bt_at), "from_bytes": 65536,
                                  "limit": 1.5, "met": ok[bt_ok]}}
        if kind == "rdm":
            t["message_rate_64B_vs_shm"] = {"ratio": num(rate), "limit": 1.0, "met": ok[rate_ok]}
        targets[kind] = t
    lat = {m["impl"]: m["usec_per_xfer"] for m in medians if m["ep"] == "pingpong" and m["bytes"] == 64}
    if "fabricfs" in lat:
        targets["pingpong"] = {"latency_64B_usec": lat,
                               "ratio_to_shm": round(lat["fabricfs"] / lat["shm"], 4) if lat.get("shm") else None}
    return {"window": int(meta["window"]),
            "sizes": [int(s) for s in meta["stream_sizes"].split(",")],
            "warmup": int(meta["warmup"]),
            "commands": {kind: {"shm": "%s -p shm [-E=PORT] -S SIZE -I ITERS ..." % prog,
                                "tcp": "FI_TCP_IFACE=lo %s -p tcp -d lo -S SIZE -I ITERS ..." % prog,
                                "fabricfs": "ringpong -mnt MNT -prov shm -domain shm %s -sizes SIZE -iters ITERS -warmup WARMUP -json" % LOCAL_RINGPONG[kind]}
                         for kind, prog in LOCAL_PROGS.items()},
            "cpu": CPU_NOTE, "runs": runs, "medians": medians, "failed": failed,
            "ratios_to_shm": read_rate_ratios(path("local_ratios_shm.tsv")),
            "ratios_to_tcp": read_rate_ratios(path("local_ratios_tcp.tsv")),
            "targets": targets}


def load_check(medians, stream_medians):
    """Compares libfabric's medians (the ping-pong passes' and the stream
    pass's) with QUIET and QUIET_STREAM: the slowdown is the median over
    the cells of both of this run's time over the quiet one."""
    cells = []
    for table, ms in ((QUIET, medians), (QUIET_STREAM, stream_medians)):
        for m in ms:
            quiet = table.get(m["ep"], {}).get(m["bytes"])
            if m["impl"] == "libfabric" and quiet:
                cells.append(m["usec_per_xfer"] / quiet)
    check = {"reference": "libfabric's own fi_pingpong and stream programs -p tcp, usec/xfer "
                          "against a quiet run's (docs/bench.md, \"Load\")",
             "limit": LOAD_LIMIT, "compared": len(cells),
             "slowdown": None, "loaded": None,
             "quiet": [{"ep": ep, "bytes": size, "usec_per_xfer": usec}
                       for ep, sizes in QUIET.items() for size, usec in sizes.items()],
             "quiet_stream": [{"kind": kind, "bytes": size, "usec_per_xfer": usec}
                              for kind, sizes in QUIET_STREAM.items() for size, usec in sizes.items()]}
    if cells:
        check["slowdown"] = round(percentile(cells, 50), 4)
        check["loaded"] = check["slowdown"] > LOAD_LIMIT
    return check


def command_of(section, ep, impl):
    """The command an implementation's figures come from, as the key of
    its fabtests-style YAML document."""
    pp = "-e rdm -m tagged" if ep == "rdm-tagged" else "-e " + ep
    if section == "local":
        if impl == "fabricfs":
            return "ringpong %s -prov shm -domain shm" % LOCAL_RINGPONG[ep]
        return "%s -p %s" % (LOCAL_PROGS[ep], "tcp -d lo" if impl == "tcp" else impl)
    if section == "stream":
        prog = STREAM_PROGS[ep]
        if impl == "fabricfs":
            return "ringpong -bw %s" % STREAM_RINGPONG[ep]
        return "%s -p %s" % (prog, "tcp -d lo" if impl == "libfabric" else "fabricfs -d tcp/lo")
    if impl == "libfabric":
        return "fi_pingpong -p tcp %s -d lo" % pp
    if impl == "provider":
        return "fi_pingpong -p fabricfs %s -d tcp/lo" % pp
    if impl in SHAPE_FLAGS:
        return ("relay " + SHAPE_FLAGS[impl]).strip()
    if section == "verbs":
        return "ringpong -prov verbs -domain rxe_127_0_0_1 -e " + ep
    if impl == "fabricfs":
        return "ringpong -e " + ep
    return "ringpong -e %s (%s)" % (ep, impl)


def write_yaml(path, sections):
    """fabtests' -m output: per program a document "---", the command and
    " :", then "- { xfer_size: ..., Mxfers/sec: ... }" per size, with
    fabtests' fields and %f figures (a ping-pong moves two transfers per
    iteration, as fabtests' pingpong counts them; a bandwidth test one)."""
    with open(path, "w") as f:
        f.write("# scripts/bench.sh: medians of the repeats, in fabtests' -m format\n")
        for section, medians in sections:
            order = []
            for m in medians:
                if (m["ep"], m["impl"]) not in order:
                    order.append((m["ep"], m["impl"]))
            for ep, impl in order:
                xfers = 1 if section in ("stream", "local") and ep != "pingpong" else 2
                f.write("---\n%s :\n" % command_of(section, ep, impl))
                for m in medians:
                    if (m["ep"], m["impl"]) != (ep, impl):
                        continue
                    usec, iters = m["usec_per_xfer"], m["iters"]
                    f.write("- { xfer_size: %d, iterations: %d, total: %d, time: %f, "
                            "MB/sec: %f, usec/xfer: %f, Mxfers/sec: %f }\n"
                            % (m["bytes"], iters, iters * m["bytes"] * xfers,
                               usec * iters * xfers / 1e6, m["mb_per_sec"], usec,
                               m.get("mmsg_per_sec", 1 / usec if usec > 0 else 0)))


def write_csv(path, header, records):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for r in records:
            w.writerow(r)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    work, outdir = sys.argv[1], sys.argv[2]
    meta = {}
    for row in rows(os.path.join(work, "meta.tsv")):
        meta[row[0]] = row[1] if len(row) > 1 else ""
    path = lambda name: os.path.join(work, name)
    words = lambda key: meta.get(key, "").split()

    runs = read_runs(path("raw.tsv"))
    medians = read_medians(path("medians.tsv"), runs)
    ep_list, msg_extra = words("ep_list"), words("msg_extra")
    doc = {
        "command": meta["command"],
        "date": meta["date"],
        "host": {"kernel": meta["kernel"], "cpus": int(meta["cpus"]),
                 "go": meta["go"], "libfabric": meta["libfabric"],
                 "fabricfs_commit": meta["fabricfs_commit"],
                 "mapping": meta["mapping"] or "unknown",
                 "tcp_congestion_control": meta["tcp_congestion_control"],
                 "loadavg_start": meta["loadavg_start"],
                 "loadavg_end": meta["loadavg_end"]},
        "config": {"endpoint_types": meta["endpoint_types"].split(","),
                   "repeats": int(meta["repeats"]), "iters": int(meta["iters"]),
                   "iters_large": int(meta["iters_large"]),
                   "warmup": int(meta["warmup"]),
                   "sizes": [int(s) for s in meta["sizes"].split(",")],
                   "ringpong_flags": meta["ringpong_flags"],
                   "libfabric_cmd": "FI_TCP_IFACE=lo fi_pingpong -p tcp -e EP -d lo "
                                    "-I ITERS -S SIZE [-B PORT | -P PORT 127.0.0.1]",
                   "fabricfs_cmd": ("ringpong -mnt MNT -e EP -sizes SIZE -iters ITERS "
                                    "-warmup %s -json%s -role server|client"
                                    % (meta["warmup"], " " + meta["ringpong_flags"]
                                       if meta["ringpong_flags"] else "")),
                   "fabricfs_daemon": meta["fabricfs_daemon"]},
        "percentiles": "p50 and p99 are over the repeats' per-run figures: "
                       "fi_pingpong and ringpong report one average per run",
        "runs": runs,
        "medians": medians,
        "ratios": read_ratios(path("ratios.tsv")),
        "floor": [{"ep": "msg", "bytes": int(s), "relay_usec_per_xfer": float(r),
                   "relay_over_libfabric": float(rl), "fabricfs_over_relay": float(fr)}
                  for s, _, r, rl, _, fr in rows(path("floor.tsv"))],
        "shapes": [],
        "skipped": [{"ep": ep, "bytes": int(s), "reason": "above fabricfs max_msg_size " + mx}
                    for ep, s, mx in rows(path("skipped.tsv"))],
        "targets": targets(path("verdicts.tsv"), [(ep, ep, "fabricfs") for ep in ep_list]),
        "shape_targets": targets(path("verdicts.tsv"),
                                 [(i, "msg", i) for i in msg_extra] if "msg" in ep_list else []),
    }
    for row in rows(path("shapes.tsv")):
        for i, shape in enumerate(msg_extra):
            usec, x = row[2 + 2 * i], row[3 + 2 * i]
            if usec != "":
                doc["shapes"].append({"ep": "msg", "bytes": int(row[0]), "shape": shape,
                                      "usec_per_xfer": float(usec), "over_libfabric": float(x)})
    yaml_sections = [("pass", medians)]
    # (pass, record): a ring pass is named by its endpoint type.
    csv_medians = [(m["ep"], m) for m in medians]
    csv_runs = [(r["ep"], r) for r in runs]
    reference = list(medians)
    if meta.get("provider") == "1":
        pruns = read_runs(path("provider.tsv"))
        pmedians = read_medians(path("provider_medians.tsv"), pruns)
        doc["provider"] = {
            "libfabric_cmd": "FI_TCP_IFACE=lo fi_pingpong -p tcp -e EP [-m tagged] -d lo "
                             "-I ITERS -S SIZE [-B PORT | -P PORT 127.0.0.1]",
            "provider_cmd": "FI_PROVIDER_PATH=bin FI_FABRICFS_ROOT=MNT fi_pingpong -p fabricfs "
                            "-e EP [-m tagged] -d tcp/lo -I ITERS -S SIZE [-B PORT | -P PORT 127.0.0.1]",
            "endpoint_types": {"msg": "-e msg", "rdm": "-e rdm", "rdm-tagged": "-e rdm -m tagged"},
            "runs": pruns, "medians": pmedians,
            "ratios": read_ratios(path("provider_ratios.tsv"))}
        yaml_sections.append(("provider", pmedians))
        csv_medians += [("provider", m) for m in pmedians]
        csv_runs += [("provider", r) for r in pruns]
        reference += pmedians
    if meta.get("verbs") == "1":
        with open(path("verbs.json")) as f:
            doc["verbs"] = json.load(f)
        vruns = [{"ep": "msg", "impl": "fabricfs", "bytes": int(s), "rep": int(rep),
                  "order": 1, "iters": int(it), "usec_per_xfer": float(u), "mb_per_sec": float(m)}
                 for s, rep, it, u, m in rows(path("verbs_tree.tsv"))]
        vmedians = []
        for size, usec, mbps in rows(path("verbs_tree_medians.tsv")):
            rs = [r for r in vruns if r["bytes"] == int(size)]
            vmedians.append(with_stats({"ep": "msg", "impl": "fabricfs", "bytes": int(size),
                                        "iters": rs[0]["iters"], "runs": len(rs),
                                        "usec_per_xfer": float(usec), "mb_per_sec": float(mbps)}, rs))
        doc["verbs_tree"] = vmedians
        yaml_sections.append(("verbs", vmedians))
        csv_medians += [("verbs", m) for m in vmedians]
        csv_runs += [("verbs", r) for r in vruns]
    if meta.get("stream") == "1":
        doc["stream"] = read_stream(work, meta)
        yaml_sections.append(("stream", doc["stream"]["medians"]))
        csv_medians += [("stream", m) for m in doc["stream"]["medians"]]
        csv_runs += [("stream", r) for r in doc["stream"]["runs"]]
    if meta.get("local") == "1":
        doc["local"] = read_local(work, meta)
        yaml_sections.append(("local", doc["local"]["medians"]))
        csv_medians += [("local", m) for m in doc["local"]["medians"]]
        csv_runs += [("local", r) for r in doc["local"]["runs"]]
    load = load_check(reference, doc["stream"]["medians"] if "stream" in doc else [])
    load["loadavg_start"], load["loadavg_end"] = meta["loadavg_start"], meta["loadavg_end"]
    doc["load"] = load
    doc["loaded"] = load["loaded"]  # null when not judged

    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "bench.json"), "w") as f:
        json.dump(doc, f, indent=1, allow_nan=False)
        f.write("\n")
    write_yaml(os.path.join(outdir, "bench.yaml"), yaml_sections)
    stat_cols = ["usec_per_xfer_mean", "usec_per_xfer_p50", "usec_per_xfer_p99",
                 "mb_per_sec_mean", "mb_per_sec_p50", "mb_per_sec_p99",
                 "cpu_s_per_mmsg_mean", "cpu_s_per_mmsg_p50", "cpu_s_per_mmsg_p99"]
    # The CPU columns are empty for the passes that do not measure it.
    write_csv(os.path.join(outdir, "bench.csv"),
              ["pass", "ep", "impl", "bytes", "iters", "runs"] + stat_cols,
              [[p, m["ep"], m["impl"], m["bytes"], m["iters"], m["runs"]] + [m.get(c, "") for c in stat_cols]
               for p, m in csv_medians])
    write_csv(os.path.join(outdir, "bench-runs.csv"),
              ["pass", "ep", "impl", "bytes", "rep", "order", "iters", "usec_per_xfer", "mb_per_sec",
               "cpu_s", "msgs"],
              [[p, r["ep"], r["impl"], r["bytes"], r["rep"], r["order"], r["iters"],
                r["usec_per_xfer"], r["mb_per_sec"], r.get("cpu_s", ""), r.get("msgs", "")]
               for p, r in csv_runs])

    if load["loaded"] is None:
        print("load: not judged (no libfabric run at a size of the quiet references)")
    elif load["loaded"]:
        print("WARNING: the machine was loaded: libfabric's own programs took %.2fx their quiet-run "
              "time (median over %d sizes; limit %.1fx; load average %s at the start, %s at the end): "
              "the ratios of this run say little" % (load["slowdown"], load["compared"], LOAD_LIMIT,
                                                     meta["loadavg_start"], meta["loadavg_end"]))
    else:
        print("load: libfabric's own programs took %.2fx their quiet-run time (median over %d sizes; "
              "a run above %.1fx is loaded)" % (load["slowdown"], load["compared"], LOAD_LIMIT))


if __name__ == "__main__":
    main()
