#!/usr/bin/env python3
"""The arithmetic of `scripts/bench-device --loads`: one record per case, binary and repetition
from fsgauge's and fio's JSON, and the summary (geometric mean and 95% interval per binary, the
after/before ratio with an interval from log ratios, each goal next to its figure).

  bench_device_loads.py fio CHECK.json FIO.json OUT.json      a `devices check --run fio` case
  bench_device_loads.py ram CHECK.json FIO.json OUT.json      the same on `ram`, with QD1 reads
  bench_device_loads.py model CHECK.json OUT.json             `devices check` (QD1 reads vs model)
  bench_device_loads.py phase RESULTS_DIR PHASE OUT.json      one phase of `fsgauge bench` results
  bench_device_loads.py preset RESULTS_DIR OUT.json           the worst phase of a preset's results
  bench_device_loads.py summary RECORDS_DIR CASE...           the table
  bench_device_loads.py selftest
"""
import glob
import json
import math
import os
import sys

MIB = 1 << 20

# Two-sided 95% Student t quantiles by degrees of freedom.
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def t975(df):
    """The 95% t quantile for df degrees of freedom (the next tabled df below, else 1.96)."""
    if df >= 60:
        return 1.96
    return T975[max(k for k in T975 if k <= df)]


def mean_ci(xs):
    """Mean and 95% interval (None for fewer than two values)."""
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, None
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    h = t975(n - 1) * sd / math.sqrt(n)
    return m, (m - h, m + h)


def ratio_ci(pairs):
    """after/before over paired repetitions [(before, after)]: the geometric mean of the
    ratios and its 95% interval from the log ratios, so it stays positive. None unless every
    value is positive."""
    if not pairs or any(b is None or a is None or b <= 0 or a <= 0 for b, a in pairs):
        return None
    m, ci = mean_ci([math.log(a / b) for b, a in pairs])
    return math.exp(m), (ci and (math.exp(ci[0]), math.exp(ci[1])))


def lateness_fields(late):
    """p50/p99/max and late % from a `devices check` lateness record."""
    req = late.get("requests") or 0
    return {
        "p50": late["p50_ms"],
        "p99": late["p99_ms"],
        "max": late["max_ms"],
        "late_pct": 100.0 * late["late"] / req if req else None,
        "requests": req,
        # The disk's own clock (0 from a binary without one).
        "pause_ms": late.get("pause_ms", 0.0),
    }


def run_bench(check):
    return [b for b in check["benches"] if b["name"].startswith("--run")][0]


def fio_record(check, fio):
    """A `--run fio` case: the server's lateness and CPU over the fio run, fio's throughput."""
    b = run_bench(check)
    rec = lateness_fields(b["lateness"])
    cpu = b.get("server_cpu_us_per_request")
    rec["cpu_us"] = cpu
    job = fio["jobs"][0]
    io = max((job[d] for d in ("read", "write")), key=lambda x: x["io_bytes"])
    rec["iops"] = io["iops"]
    rec["mb_s"] = io["bw_bytes"] / 1e6
    # The server's CPU over the run per MiB fio moved (a 1M write is split into several
    # requests on its way to the server).
    moved = io["io_bytes"] / MIB
    rec["cpu_us_per_mib"] = cpu * rec["requests"] / moved if cpu is not None and moved else None
    return rec


def bench(check, name):
    return {b["name"]: b for b in check["benches"]}[name]


def ram_record(check, fio):
    rec = fio_record(check, fio)
    w = bench(check, "QD1 random 4K read, whole stroke")
    rec["qd1_us"] = w["measured"] * 1000
    rec["qd1_cpu_us"] = w.get("server_cpu_us_per_request")
    return rec


def model_record(check):
    """QD1 random 4K reads over the whole stroke against the model, and their lateness."""
    w = bench(check, "QD1 random 4K read, whole stroke")
    rec = lateness_fields(w["lateness"])
    rec["err_pct"] = w["error"] * 100
    rec["demerit_pct"] = w["demerit"] * 100 if w["demerit"] is not None else None
    rec["cpu_us"] = w.get("server_cpu_us_per_request")
    rec["iops"] = 1000.0 / w["measured"] if w["measured"] > 0 else None
    return rec


def phases(results_dir):
    """(run file, phase name, device record) of every phase with an emulated disk's record."""
    out = []
    for f in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        r = json.load(open(f))
        run = {"file": os.path.basename(f), "testbed": (r.get("testbed") or {}).get("label", "?")}
        for p in r.get("phases", []):
            for key in ("device_model", "journal_device_model"):
                d = p.get(key)
                if d:
                    out.append((run, p, d))
    return out


def modelled_requests(d):
    return d["reads"] + d["writes"] + d["flushes"]


def held_off_pct(d):
    """Of a phase's late requests, the share the machine held the server's timing thread off
    its CPU for (`late_held_off`, absent when none or from a binary that does not count it)."""
    return 100.0 * d.get("late_held_off", 0) / d["late"] if d["late"] else None


def phase_record(results_dir, name):
    """One named phase of `fsgauge bench` results (the first run that has it)."""
    for _, p, d in phases(results_dir):
        if p["name"] == name:
            req = modelled_requests(d)
            return {
                "p50": d["lateness_p50_ms"],
                "p99": d["lateness_p99_ms"],
                "max": d["lateness_max_ms"],
                "late_pct": 100.0 * d["late"] / req if req else None,
                "pause_ms": d.get("pause_ns", 0) / 1e6,
                "held_off_pct": held_off_pct(d),
                "requests": req,
                "mb_s": p["bytes_per_s"] / 1e6,
                "iops": p["ops_per_s"],
                "cpu_us": None,
            }
    raise SystemExit(f"no phase {name!r} with an emulated disk's record in {results_dir}")


def preset_record(results_dir):
    """The worst phase of a preset's runs: its lateness p99 and late share, each the worst
    over the phases, with the phases' count and how many missed a lateness goal."""
    ps = phases(results_dir)
    if not ps:
        raise SystemExit(f"no phase with an emulated disk's record in {results_dir}")
    rows = []
    for f, p, d in ps:
        req = modelled_requests(d)
        rows.append((f"{f['testbed']}/{p['name']}", d["lateness_p99_ms"], 100.0 * d["late"] / req if req else 0.0,
                     d["lateness_max_ms"], d["lateness_p50_ms"], d["late"], req))
    worst99 = max(rows, key=lambda r: r[1])
    worst_late = max(rows, key=lambda r: r[2])
    late = sum(r[5] for r in rows)
    req = sum(r[6] for r in rows)
    return {
        "p50": max(r[4] for r in rows),
        "p99": worst99[1],
        "max": max(r[3] for r in rows),
        "late_pct": worst_late[2],
        "late_pct_all": 100.0 * late / req if req else None,
        "requests": req,
        "phases": len(rows),
        "phases_missed": sum(1 for r in rows if r[1] >= 0.5 or r[2] >= 1.0),
        "cpu_us": None,
        "worst": f"p99 {worst99[0]}, late {worst_late[0]}",
    }


# Per case kind: (key, label, format, goal). A goal is (op, threshold, text).
LAT = [
    ("p50", "lateness p50 ms", "{:.3f}", None),
    ("p99", "lateness p99 ms", "{:.3f}", ("<", 0.5, "< 0.5 ms")),
    ("max", "lateness max ms", "{:.3f}", None),
    ("late_pct", "late / requests %", "{:.2f}", ("<", 1.0, "< 1%")),
    ("pause_ms", "disk clock pause ms", "{:.3f}", None),
]
# Through ram the model takes no time: lateness is the path's own latency, with no goal.
LAT_RAM = [(k, l, f, None) for k, l, f, _ in LAT]
CPU4K = ("cpu_us", "server CPU µs/request", "{:.1f}", ("<", 30.0, "< 30 µs per 4K request"))
CPU = ("cpu_us", "server CPU µs/request", "{:.1f}", None)
HELD = ("held_off_pct", "late held off CPU, %", "{:.0f}", None)
CASES = {
    "seqwrite-1m": ("QD1 sequential 1M direct writes (deskstar-7k250, fio)", LAT + [
        CPU,
        ("cpu_us_per_mib", "server CPU µs/MiB written", "{:.1f}", ("<", 150.0, "< 150 µs per 1M write")),
        ("mb_s", "MB/s", "{:.1f}", None)]),
    "randwrite-128k-qd8": ("QD8 128K random direct writes (deskstar-7k250, fio)", LAT + [
        CPU, ("mb_s", "MB/s", "{:.1f}", None), ("iops", "IOPS", "{:.0f}", None)]),
    "randwrite-4k-qd1": ("QD1 4K random direct writes (deskstar-7k250, fio)", LAT + [
        CPU4K, ("iops", "IOPS", "{:.0f}", None)]),
    "randwrite-4k-qd8": ("QD8 4K random direct writes (deskstar-7k250, fio)", LAT + [
        CPU4K, ("iops", "IOPS", "{:.0f}", None)]),
    "readahead": ("buffered sequential 1M reads with the default read-ahead, ext4 on deskstar-7k250 "
                  "(fsgauge bench tio, phase seqread; server CPU is not in results)", LAT + [
        CPU, ("mb_s", "MB/s", "{:.1f}", None)]),
    "ram-qd32": ("through ram: QD32 4K random reads (fio) and QD1 4K reads (devices check)", LAT_RAM + [
        CPU4K,
        ("iops", "QD32 IOPS", "{:.0f}", (">=", 100000.0, ">= 100k")),
        ("qd1_us", "QD1 4K read µs", "{:.1f}", ("<", 25.0, "< 25 µs")),
        ("qd1_cpu_us", "QD1 server CPU µs/request", "{:.1f}", ("<", 30.0, "< 30 µs per 4K request"))]),
    "journal-dir-remove": ("journal-size-as-published's dir_remove: fdtree's deep tree (9 levels of 3, "
                           "4 files of 4K), ext4 on the whole st3500641as, external RAM journal of 16M "
                           "(fsgauge bench fdtree, phase dir_remove; server CPU is not in results)", LAT + [
        HELD, ("requests", "requests", "{:.0f}", None), ("iops", "directories removed/s", "{:.0f}", None)]),
    "qd1-read-model": ("QD1 random 4K reads, whole stroke, vs the model (deskstar-7k250, devices check)", LAT + [
        ("err_pct", "error vs model %", "{:+.2f}", ("abs<", 3.0, "within 3%")),
        ("demerit_pct", "demerit %", "{:.2f}", None),
        CPU4K, ("iops", "IOPS", "{:.1f}", None)]),
}
PRESET = [
    ("p99", "worst phase lateness p99 ms", "{:.3f}", ("<", 0.5, "< 0.5 ms in every phase")),
    ("late_pct", "worst phase late %", "{:.2f}", ("<", 1.0, "< 1% in every phase")),
    ("max", "lateness max ms (all phases)", "{:.3f}", None),
    ("late_pct_all", "late / requests % (all)", "{:.2f}", None),
    ("phases_missed", "phases missing a goal", "{:.1f}", ("<", 0.5, "none")),
    ("phases", "phases", "{:.0f}", None),
]
for p in ("reservation", "fragmentation"):
    CASES[p] = (f"the {p}-as-published phases' worst case (fsgauge run, scaled down; "
                "server CPU is not in results)", PRESET)


def met(op, x, thr):
    return {"<": x < thr, ">=": x >= thr, "abs<": abs(x) < thr}[op]


def positive_ci(vals):
    """A figure over repetitions with a 95% interval that keeps its sign: every value
    positive, the geometric mean and its interval from the logs; any zero among values that
    are never negative (a late count), the mean with the interval cut at 0; otherwise (an
    error that may be negative) the mean and its interval."""
    if all(v > 0 for v in vals):
        m, ci = mean_ci([math.log(v) for v in vals])
        return math.exp(m), (ci and (math.exp(ci[0]), math.exp(ci[1])))
    m, ci = mean_ci(vals)
    if ci and all(v >= 0 for v in vals):
        ci = (max(ci[0], 0.0), ci[1])
    return m, ci


def cell(vals, fmt):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "n/a"
    m, ci = positive_ci(vals)
    s = fmt.format(m)
    if ci:
        s += f" [{fmt.format(ci[0])}, {fmt.format(ci[1])}]"
    return s


def load(records_dir, case):
    """{binary: [record by repetition]}, failed repetitions as None."""
    by = {}
    for f in sorted(glob.glob(os.path.join(records_dir, f"{case}.*.json"))):
        _, b, rep, _ = os.path.basename(f).rsplit(".", 3)
        rec = json.load(open(f))
        by.setdefault(b, {})[int(rep)] = rec
    return by


def summary(records_dir, cases):
    lines = []
    for case in cases:
        title, rows = CASES[case]
        by = load(records_dir, case)
        bins = [b for b in ("before", "after") if b in by]
        lines.append(f"{case}: {title}")
        if not bins:
            lines.append("  no repetition ran")
            continue
        reps = {b: by[b] for b in bins}
        ns = ", ".join(f"{b} n={sum(1 for r in reps[b].values() if r.get('ok', True))}" for b in bins)
        lines.append(f"  ({ns}; geometric mean [95% interval] where every value is positive, else mean)")
        head = f"  {'':<30}" + "".join(f"{b:<28}" for b in bins)
        if len(bins) == 2:
            head += f"{'after/before':<26}"
        lines.append(head + "goal")
        for key, label, fmt, goal in rows:
            vals = {b: [r.get(key) for r in reps[b].values() if r.get("ok", True)] for b in bins}
            line = f"  {label:<30}" + "".join(f"{cell(vals[b], fmt):<28}" for b in bins)
            if len(bins) == 2:
                both = sorted(set(reps["before"]) & set(reps["after"]))
                pairs = [(reps["before"][i].get(key), reps["after"][i].get(key)) for i in both
                         if reps["before"][i].get("ok", True) and reps["after"][i].get("ok", True)]
                r = ratio_ci(pairs)
                rs = "-" if r is None else f"{r[0]:.3g}" + (f" [{r[1][0]:.3g}, {r[1][1]:.3g}]" if r[1] else "")
                line += f"{rs:<26}"
            if goal:
                op, thr, text = goal
                verdicts = []
                for b in bins:
                    v = [x for x in vals[b] if x is not None]
                    verdicts.append(f"{b} " + ("n/a" if not v else "ok" if met(op, positive_ci(v)[0], thr) else "MISSED"))
                line += f"{text}: {', '.join(verdicts)}"
            lines.append(line.rstrip())
        for b in bins:
            failed = sorted(i for i, r in reps[b].items() if not r.get("ok", True))
            if failed:
                lines.append(f"  {b}: repetition(s) {failed} failed: {reps[b][failed[0]].get('error', '')}")
            worst = [r["worst"] for r in reps[b].values() if r.get("worst")]
            if worst:
                lines.append(f"  {b}: worst phases: " + "; ".join(worst))
    return "\n".join(lines)


def selftest():
    m, ci = mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and abs(ci[0] - (2 - 4.303 / math.sqrt(3))) < 1e-9, ci
    assert mean_ci([5.0]) == (5.0, None)
    # Lateness p99 of 0.1, 0.2 and 1.4 ms: the arithmetic interval would start below zero.
    g, gci = positive_ci([0.1, 0.2, 1.4])
    assert abs(g - (0.1 * 0.2 * 1.4) ** (1 / 3)) < 1e-12 and 0 < gci[0] < g < gci[1], gci
    assert mean_ci([0.1, 0.2, 1.4])[1][0] < 0
    z, zci = positive_ci([0.0, 0.0, 3.0])
    assert z == 1.0 and zci[0] == 0.0 and zci[1] > 3.0, zci
    e, eci = positive_ci([-1.0, 1.0, 3.0])
    assert e == 1.0 and eci[0] < -1.0, eci
    r, rci = ratio_ci([(1.0, 0.5), (2.0, 1.0), (4.0, 1.0)])
    assert abs(r - math.exp((math.log(0.5) * 2 + math.log(0.25)) / 3)) < 1e-12
    assert 0 < rci[0] < r < rci[1], rci
    assert ratio_ci([(1.0, 0.0)]) is None and ratio_ci([]) is None
    assert t975(2) == 4.303 and t975(11) == 2.228 and t975(100) == 1.96
    check = {"benches": [
        {"name": "QD1 random 4K read, whole stroke", "measured": 0.02, "error": 0.01, "demerit": 0.02,
         "lateness": {"requests": 10, "p50_ms": 0.1, "p99_ms": 0.2, "max_ms": 0.3, "late": 1, "early": 0},
         "server_cpu_us_per_request": 12.0},
        {"name": "--run fio", "lateness": {"requests": 8, "p50_ms": 0.01, "p99_ms": 0.6, "max_ms": 2.0,
                                           "late": 2, "early": 0}, "server_cpu_us_per_request": 50.0}]}
    fio = {"jobs": [{"read": {"io_bytes": 0, "iops": 0, "bw_bytes": 0},
                     "write": {"io_bytes": 4 * MIB, "iops": 4.0, "bw_bytes": 4e6}}]}
    rec = ram_record(check, fio)
    assert rec["late_pct"] == 25.0 and rec["p99"] == 0.6 and rec["mb_s"] == 4.0
    assert rec["cpu_us_per_mib"] == 100.0 and rec["qd1_us"] == 20.0 and rec["qd1_cpu_us"] == 12.0
    import tempfile
    with tempfile.TemporaryDirectory() as t:
        d = {"reads": 90, "writes": 10, "flushes": 0, "late": 4, "late_held_off": 3,
             "lateness_p50_ms": 0.05, "lateness_p99_ms": 0.7, "lateness_max_ms": 2.0}
        run = {"testbed": {"label": "journal-16M"},
               "phases": [{"name": "dir_remove", "bytes_per_s": 0.0, "ops_per_s": 5e4, "device_model": d}]}
        json.dump(run, open(os.path.join(t, "r.json"), "w"))
        prec = phase_record(t, "dir_remove")
        assert prec["late_pct"] == 4.0 and prec["held_off_pct"] == 75.0 and prec["requests"] == 100, prec
        del d["late_held_off"]
        json.dump(run, open(os.path.join(t, "r.json"), "w"))
        assert phase_record(t, "dir_remove")["held_off_pct"] == 0.0
    mrec = model_record(check)
    assert mrec["err_pct"] == 1.0 and mrec["late_pct"] == 10.0 and abs(mrec["iops"] - 50000.0) < 1e-6
    print("bench_device_loads.py selftest: ok")


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd in ("fio", "ram"):
        check, fio = json.load(open(args[0])), json.load(open(args[1]))
        rec = (fio_record if cmd == "fio" else ram_record)(check, fio)
    elif cmd == "model":
        rec = model_record(json.load(open(args[0])))
    elif cmd == "phase":
        rec = phase_record(args[0], args[1])
    elif cmd == "preset":
        rec = preset_record(args[0])
    elif cmd == "summary":
        print(summary(args[0], args[1:]))
        return
    elif cmd == "selftest":
        selftest()
        return
    else:
        raise SystemExit(f"bench_device_loads.py: unknown command {cmd!r}")
    with open(args[-1], "w") as f:
        json.dump(rec, f)


if __name__ == "__main__":
    main(sys.argv)
