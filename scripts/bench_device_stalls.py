#!/usr/bin/env python3
"""The disk's own clock against injected stalls (`scripts/bench-device --stalls`).

Each case runs with no stalls and with FSGAUGE_DEVICE_STALLS (the timing thread held asleep
before a share of its replies), interleaved per repetition (plain, stalled, plain, ...), and
prints per case: its disk time (wall − the disk clock's pause; for a time-boxed phase, its
work per disk second) with a 95% interval over the repetitions, stalled/plain of disk time
(goal: within 3%) and of wall time (goal: at least 20% longer, so the check has teeth), and
the pause against the stalls injected, and the disk work each arm did (requests and flushes
in the case's phases, mean and range), which must match for the comparison to hold, and the
drive's own busy time (its modelled service summed over the phases), stalled/plain and the
plain arm's spread.

What the spread is: the same requests keep the drive busy for a different time in each
repetition, in either arm: its write cache's destaging and its rotation depend on when, to the
microsecond, each request came. tio seqwrite t8 (216 requests, 134 MB, the drive busy for 99%
of the disk time) measured busy 2.24–2.36 s over 5 plain repetitions and 2.24–2.33 s stalled,
the two arms' means 0.1% apart; clients-4 7.94–8.81 s. That spread (±2–4% a repetition) is
what moves stalled/plain of disk time from table to table, and a run of 5 pairs had a 95%
interval of about ±3.5% for it at those sizes: read a ratio off 1 by about its interval
against the busy column before suspecting the clock. The idle column is the rest of the disk time: the drive
waiting on the host (the workload's CPU work, its threads held off their CPU), which the
disk's clock does not take out. On this shared 2-CPU machine a repetition of either arm now
and then has its writers held off for 0.4–0.6 s (tio seqwrite t8, idle 0.44–0.64 s against
0.01–0.07 s, CPU pressure 76–80%), which moves that pair's ratio by 20% and the mean of 5–7
pairs by 3–4%.

The sizes, a departure from the first stall tables' (tio seqwrite t8 wrote 8 x 16M, 2.3 s of
disk time; clients-4 made 2 passes, 8.7 s): tio seqwrite t8 now writes 8 x 64M (844 requests,
about 9.3 s) and clients-4 makes 4 passes of its mix (about 4,400 requests, 17.4 s); --short
keeps the small sizes. The cases still measure what the issue names (tio seqwrite, 8 threads,
64K blocks; 4 clients of the same mix) and each pair still compares the same requests. Why,
and what it bought, measured (coefficient of variation within an arm, pooled over arms;
repetitions 10% off their arm's median request count left out; old size: the 6 tables of
/work/wt/h-stall-runs, 5-7 pairs each; new: the first of session 24's second tables, 7 pairs):
  - A host hold-off is diluted: a repetition whose writers the host held off for 0.5 s moved
    a 2.3 s phase's disk time by 20%, a 9.3 s one's by 5%. tio seqwrite t8's disk-time CV,
    plain / stalled: 5.9% / 3.4% at 8 x 16M, 2.7% / 2.0% at 8 x 64M; clients-4's 3.1% / 2.3%
    at 2 passes, 1.2% / 1.3% at 4.
  - The drive's own busy-time spread did not shrink as 1/sqrt(size) for tio seqwrite t8:
    2.2% / 1.3% at 8 x 16M, 2.2% / 1.5% at 8 x 64M (1/sqrt(4) predicted 1.1% / 0.6%). It is
    not the sum of independent per-request draws but a few whole repetitions whose drive
    works 3-5% longer (9.38-9.67 s against 9.10-9.27 s for the other 11 of 14). Those three
    had the drive idle on the host 0.15-0.21 s (as had 4 of the 11), but over the 72 old-size
    repetitions a repetition's busy excess did not track its idle share (correlation 0.00):
    what makes a whole repetition's drive slower is not found.
    clients-4's busy CV went 3.3% / 3.5% -> 2.3% / 2.8% (1/sqrt(2) predicted 2.3% / 2.4%).
So 7 pairs read tio seqwrite t8's stalled/plain to about ±3% (the hold-offs diluted, the
drive's tail not), and clients-4's to about ±1.7% when no repetition is disturbed; a longer
clients phase meets more of other processes' cache drops (below), which remain its main miss.
No guard remakes a repetition whose writers the host held off (as one with foreign cache
drops is): at 8 x 64M no tio repetition of 20 had the drive idle more than 0.23 s (2.4% of its
disk time), the busy-time tail does not track the idle share, and clients-4's idle (5-8.5%) is
mostly its own CPU work, so no one share of disk time tells a hold-off from the workload.

The stall holds one reply, not the server's intake: the held timing thread still takes the
requests that come meanwhile, at their arrival (a ring request is stamped when the timing
thread takes it; taken only after the stall, it would be mapped to the stop's start, and the
host's work during the stall would cost no disk time).

The kernel's timers: a stall stretches a phase's wall time, and jbd2's commit (every 5 s) and
periodic writeback (every 5 s, of data dirty for 30 s) keep the wall: in a stretched phase they
fire more often and write more (a tree remove measured 28–57 flushes stalled against 9–23
plain, and about 3,500 requests against about 90 when writeback landed in it). The disk's
clock cannot hold them back, so the cases on a filesystem that carry them (clients-4,
tree-remove; "timers held off" below) hold them off instead, as departures from the bench
defaults:
  - the testbed is mounted with `commit=3600` (jbd2 commits when the workload asks: an fsync,
    the closing syncfs, a full transaction; not on its timer);
  - periodic writeback is off (`vm.dirty_writeback_centisecs` = 0) for each run of these
    cases and restored after it (also on SIGTERM/SIGINT), so only the workload's own syncs
    and the dirty thresholds (far off on this 24 GiB machine) write back;
  - each such phase starts right after a sync: tree remove's file_remove follows
    file_create's closing syncfs and dir_remove file_remove's, and clients-4 does a fixed
    amount of work (`--loops 4`, about 17 s of disk time plain) rather than a wall-clock time
    box, which would let the two arms do different work.
The counts of requests and flushes in each arm show whether the two arms did the same work.

The dirty thresholds (vm.dirty_*bytes, vm.dirty_*ratio) are the machine's: another process may
set them (a lowmem study's run holds 10/20 MB), and under small ones balance_dirty_pages paces
the writers on the wall clock, which a stall changes, so the arms no longer do the same work
(stalled tio seqwrite t8 at 10/20 MB: 465 requests and 16 flushes against 441 and 8). The
thresholds are recorded with each repetition, printed under the table, and a repetition during
which they changed is made again (as one during which another process dropped the caches).

Other processes: a repetition during whose phases another process dropped the kernel's caches
(the result's `foreign_cache_drops`; a test suite or benchmark beside) is made again, up to 3
times, its output kept as OUT.disturbed-N: such a drop makes the phase read back its metadata
and write what the drop's `sync` forced out (one stalled clients-4 repetition of an earlier
table wrote 5,139 requests against about 2,100 while test suites ran beside it). A repetition
still disturbed at its last attempt is left out of the table with its pair (the other arm's
repetition k), and the goals column says how many pairs were: a drop is not the clock's doing,
and averaged in it decided the table (session 24's second tables: two stalled clients-4
repetitions of 4 passes met drops in all 3 attempts, 6,341 and 6,625 requests against
4,221-4,417, and read 1.163 with them).

stalled/plain of disk time is the ratio of the two arms' means, and its 95% interval is that of
the repetitions' paired ratios (repetition k of each arm, run one after the other): the
geometric mean's t interval on the log scale, so it stays positive.

  bench_device_stalls.py BIN OUTDIR REPS STALLS CASES [--short] [--json PATH] [--workdir DIR]
      CASES: comma-separated, of CASES below (empty: all); --short: each case smaller (the
      test's version, about a minute in all); --json: the per-repetition records there;
      --workdir: the benches' testbeds there
  bench_device_stalls.py --selftest
"""

import fcntl
import glob
import json
import math
import os
import signal
import subprocess
import sys

from bench_device_loads import ratio_ci

FS = ["--fs", "ext4", "--fs-size", "1G", "--device-model", "deskstar-7k250", "--device-offset", "0",
      "--seed", "1", "-q"]
HOLD = ["--mount-opts", "commit=3600"]
CASES = {
    # name: (what, argv after the binary, how to read the result, timers held off,
    #        --short: {flag: its smaller value})
    "qd1-read": ("QD1 random 4K reads (devices check deskstar-7k250), ms per read",
                 ["devices", "check", "deskstar-7k250", "--seconds", "2", "--json", "-q"], "check", False,
                 {"--seconds": "1"}),
    "tio-seqwrite-t8": ("tio seqwrite, 8 threads, 64K blocks, 8 x 64M, s",
                        ["bench", "tio", *FS, "--mode", "seqwrite", "--threads", "8", "--block", "64K",
                         "--file-size", "64M", "--cold", "none"], "seqwrite", False, {"--file-size": "2M"}),
    "clients-4": ("bench clients, 4 clients, 4 passes of the 2,000-transaction mix each, timers held off, s",
                  ["bench", "clients", *FS, *HOLD, "--clients", "4", "--loops", "4", "--mix-ops", "2000",
                   "--cold", "none"], "clients", True, {"--loops": "1", "--mix-ops": "300"}),
    "tree-remove": ("fdtree remove with syncfs (7 levels, 3 dirs, 4 files of 4K; file_remove + dir_remove), "
                    "timers held off, s",
                    ["bench", "fdtree", *FS, *HOLD, "--levels", "7", "--dirs-per-level", "3", "--files-per-dir",
                     "4", "--file-size", "4K", "--fsync", "end", "--cold", "none"], "remove", True,
                    {"--levels": "4"}),
}
# Periodic writeback's interval, held at 0 (off) while a `held` case runs.
WRITEBACK = "/proc/sys/vm/dirty_writeback_centisecs"


# Held blocks of every table on the machine take turns: two overlapping ones (a table and the
# test's short one) would each put back what they found, and the later could put back the
# other's 0, leaving periodic writeback off (it did, once).
WRITEBACK_LOCK = "/run/fsgauge-bench-stalls-writeback.lock"


class WritebackHeld:
    """Periodic writeback off for a `with` block; the value before is put back after it, and
    on SIGTERM/SIGINT (turned into SystemExit, so the block's exit runs). One such block at a
    time on the machine (WRITEBACK_LOCK)."""

    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda n, _f: sys.exit(128 + n))
        self.lock = open(WRITEBACK_LOCK, "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        with open(WRITEBACK) as f:
            self.before = f.read().strip()
        with open(WRITEBACK, "w") as f:
            f.write("0")
        return self

    def __exit__(self, *_exc):
        try:
            with open(WRITEBACK, "w") as f:
                f.write(self.before)
        finally:
            self.lock.close()
        return False


def argv_of(case, short):
    """The case's argv; with `short`, its --short values in place."""
    argv = list(CASES[case][1])
    if short:
        for flag, value in CASES[case][4].items():
            argv[argv.index(flag) + 1] = value
    return argv


def t975(df):
    table = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
    return table.get(df, 2.0 + 2.4 / df)


def mean_ci(xs):
    """Mean and half-width of its 95% interval (0 for one value)."""
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, 0.0
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    return m, t975(n - 1) * sd / math.sqrt(n)


def record(wall, disk, pause_ms, stops, requests, flushes, disturbed=0, busy=None):
    return {"wall": wall, "disk": disk, "pause_ms": pause_ms, "stops": stops, "requests": requests,
            "flushes": flushes, "disturbed": disturbed, "busy": busy}


def paired_ci(plain, stalled):
    """The 95% interval of stalled/plain from the paired ratios (geometric mean, t on logs):
    bench_device_loads.py's ratio_ci, over (plain, stalled) pairs."""
    r = ratio_ci(list(zip(plain, stalled)))
    return r[1] if r else None


def from_check(path):
    """QD1 reads: wall and disk ms per read, the pause (ms) and stops, requests (no flushes)."""
    b = json.load(open(path))["benches"][0]
    lat = b["lateness"]
    n = b["requests"]
    return record(b["measured"], b["measured"] - lat["pause_ms"] / n, lat["pause_ms"], lat["pauses"], n, 0)


def phase_is(kind, name):
    if kind == "remove":
        return name.endswith("_remove")
    if kind == "clients":
        return name.startswith("clients-")
    return name.startswith(kind)


def from_results(out, kind):
    """The case's phases (of `kind`), summed: wall and disk s, pause ms, stops, requests and
    flushes."""
    wall = pause = stops = requests = flushes = disturbed = busy = 0
    for f in sorted(glob.glob(os.path.join(out, "*.json"))):
        for p in json.load(open(f)).get("phases", []):
            d = p.get("device_model")
            disturbed += p.get("foreign_cache_drops", 0)
            if d and phase_is(kind, p["name"]):
                wall += p["wall_s"]
                pause += d.get("pause_ns", 0) / 1e9
                stops += d.get("pauses", 0)
                requests += d["reads"] + d["writes"] + d["flushes"]
                flushes += d["flushes"]
                s = d.get("service_ns") or {}
                busy += s.get("count", 0) * s.get("mean", 0.0) / 1e9
    if wall == 0:
        raise ValueError(f"no {kind} phase with an emulated disk's record in {out}")
    return record(wall, wall - pause, pause * 1e3, stops, requests, flushes, disturbed, busy)


ATTEMPTS = 3


# The machine-wide dirty thresholds: another process (a lowmem study's run holds 10/20 MB)
# may set them while a table runs; under small ones balance_dirty_pages throttles the writers
# at a pace it measures on the wall clock, which a stall changes (a stalled tio seqwrite t8
# wrote 465 requests and 16 flushes against 441 and 8, disk time 1.14x plain, at 10/20 MB).
DIRTY = ["dirty_background_bytes", "dirty_bytes", "dirty_background_ratio", "dirty_ratio"]


def dirty_now():
    """The dirty thresholds now, e.g. "dirty_background_bytes=0 dirty_bytes=0 ..."."""
    try:
        return " ".join(f"{k}={open('/proc/sys/vm/' + k).read().strip()}" for k in DIRTY)
    except OSError as e:
        return f"unreadable ({e})"


def run_case(binary, case, out, stalls, opts):
    """One repetition of a case, made again (up to ATTEMPTS) while another process disturbs
    it: drops the kernel's caches, or changes the dirty thresholds."""
    for attempt in range(1, ATTEMPTS + 1):
        before = dirty_now()
        r = run_once(binary, case, out, stalls, opts)
        after = dirty_now()
        r["dirty"] = before if before == after else f"{before} -> {after}"
        if not r["disturbed"] and before == after or attempt == ATTEMPTS:
            return r
        aside = f"{out}.disturbed-{attempt}"
        os.rename(out, aside)
        why = (f"dropped the kernel's caches during it ({r['disturbed']}x)" if r["disturbed"]
               else f"changed the dirty thresholds during it ({r['dirty']})")
        print(f"{os.path.basename(out)}: another process {why}; made again, kept as {aside}",
              file=sys.stderr)
    return r


def dirty_lines(rows):
    """The dirty thresholds each case's repetitions ran under, with how many of each arm."""
    lines = []
    for case, r in rows.items():
        seen = {}
        for which in ("plain", "stalled"):
            for x in r[which]:
                seen.setdefault(x.get("dirty", "not recorded"), {"plain": 0, "stalled": 0})[which] += 1
        for d, n in seen.items():
            lines.append(f"  {case}: {d} ({n['plain']} plain, {n['stalled']} stalled)")
    return "\n".join(lines)


def run_once(binary, case, out, stalls, opts):
    argv, kind, held = argv_of(case, opts["short"]), CASES[case][2], CASES[case][3]
    env = dict(os.environ)
    env.pop("FSGAUGE_DEVICE_STALLS", None)
    if stalls:
        env["FSGAUGE_DEVICE_STALLS"] = stalls
    os.makedirs(out, exist_ok=True)
    if kind == "check":
        with open(os.path.join(out, "check.json"), "w") as o, open(os.path.join(out, "err"), "w") as e:
            run_child([binary, *argv], stdout=o, stderr=e, env=env)
        return from_check(os.path.join(out, "check.json"))
    with open(os.path.join(out, "err"), "w") as e:
        cmd = [binary, *argv, "--out", os.path.join(out, "res")]
        if opts["workdir"]:
            cmd += ["--workdir", opts["workdir"]]
        if held:
            with WritebackHeld():
                run_child(cmd, stdout=subprocess.DEVNULL, stderr=e, env=env)
        else:
            run_child(cmd, stdout=subprocess.DEVNULL, stderr=e, env=env)
    return from_results(os.path.join(out, "res"), kind)


def run_child(cmd, **kw):
    """Runs fsgauge to its end (CalledProcessError when it failed). When this script is
    stopped meanwhile (SIGTERM/SIGINT, made SystemExit by WritebackHeld, or ^C), fsgauge gets a
    SIGTERM and is waited for, so that it takes its testbed down (subprocess.run would SIGKILL
    it, leaving its mount, loop device and disk server behind)."""
    p = subprocess.Popen(cmd, **kw)
    try:
        rc = p.wait()
    except BaseException:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        raise
    if rc:
        raise subprocess.CalledProcessError(rc, cmd)


def spread(xs):
    """Mean and range of counts, e.g. "91 (88–95)"."""
    return f"{sum(xs) / len(xs):.0f} ({min(xs)}–{max(xs)})"


def table(rows):
    """rows: case -> {"plain": [record], "stalled": [record]}."""
    lines = ["case | plain disk (95% CI) | stalled disk (95% CI) | disk stalled/plain [95% CI] | wall stalled/plain | "
             "pause ms stalled (plain) | stops | requests plain / stalled | flushes plain / stalled | "
             "drive busy stalled/plain (plain's spread); idle plain / stalled | goals"]
    for case, r in rows.items():
        p, s, left_out = undisturbed_pairs(r["plain"], r["stalled"])
        if not p or not s:
            lines.append(f"{case} | (failed{', every pair disturbed' if left_out else ''})")
            continue
        pd, pci = mean_ci([x["disk"] for x in p])
        sd, sci = mean_ci([x["disk"] for x in s])
        pw, _ = mean_ci([x["wall"] for x in p])
        sw, _ = mean_ci([x["wall"] for x in s])
        ratio, wall = sd / pd, sw / pw
        ci = paired_ci([x["disk"] for x in p], [x["disk"] for x in s])
        ci = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
        ok = ("disk within 3%: " + ("yes" if abs(ratio - 1) <= 0.03 else "NO")
              + "; wall +20%: " + ("yes" if wall >= 1.2 else "NO")
              + (f"; {left_out} disturbed pair(s) left out" if left_out else ""))
        lines.append(
            f"{case} | {pd:.4f} ± {pci:.4f} | {sd:.4f} ± {sci:.4f} | {ratio:.3f}{ci} | {wall:.3f} | "
            f"{mean_ci([x['pause_ms'] for x in s])[0]:.1f} ({mean_ci([x['pause_ms'] for x in p])[0]:.1f}) | "
            f"{mean_ci([x['stops'] for x in s])[0]:.0f} | "
            f"{spread([x['requests'] for x in p])} / {spread([x['requests'] for x in s])} | "
            f"{spread([x['flushes'] for x in p])} / {spread([x['flushes'] for x in s])} | {busy_column(p, s)} | {ok}")
    return "\n".join(lines)


def disturbed(x):
    """Whether another process disturbed the repetition (at its last attempt): dropped the
    caches during it, or changed the dirty thresholds."""
    return bool(x.get("disturbed")) or "->" in x.get("dirty", "")


def undisturbed_pairs(plain, stalled):
    """(plain, stalled, pairs left out): the pairs (repetition k of each arm) neither of whose
    repetitions was disturbed. Unpaired repetitions (the other arm's failed) are kept."""
    keep = [not disturbed(a) and not disturbed(b) for a, b in zip(plain, stalled)]
    pick = lambda xs: [x for i, x in enumerate(xs) if i >= len(keep) or keep[i]]
    return pick(plain), pick(stalled), keep.count(False)


def busy_column(plain, stalled):
    """The drive's modelled service time summed over the case's phases, stalled/plain of the
    arms' means, and the plain arm's coefficient of variation: how much of the disk time's
    spread is the drive's own (its write cache's destaging and rotation depend on when each
    request came, to the microsecond, so the same requests take a different time each
    repetition), which no clock removes; and the disk time the drive sat idle, waiting on the
    host (plain / stalled means: the workload's own CPU work and its threads held off their
    CPU, which the disk's clock does not take out). "—" where the case has no such record."""
    bp, bs = [x.get("busy") for x in plain], [x.get("busy") for x in stalled]
    if None in bp or None in bs or not all(bp):
        return "—"
    m, _ = mean_ci(bp)
    sd = math.sqrt(sum((x - m) ** 2 for x in bp) / (len(bp) - 1)) if len(bp) > 1 else 0.0
    idle = [mean_ci([x["disk"] - x["busy"] for x in arm])[0] for arm in (plain, stalled)]
    return f"{mean_ci(bs)[0] / m:.3f} (±{100 * sd / m:.1f}%); idle {idle[0]:.3f} / {idle[1]:.3f}"


def selftest():
    rows = {"a": {"plain": [record(10, 10, 0, 0, 90, 9), record(10.2, 10.1, 1, 3, 92, 9)],
                  "stalled": [record(13, 10.05, 2950, 30, 91, 9), record(13.1, 10.1, 3000, 31, 90, 10)]}}
    t = table(rows)
    assert "disk within 3%: yes; wall +20%: yes" in t, t
    assert "91 (90–92) / 90 (90–91) | 9 (9–9) / 10 (9–10)" in t, t
    assert mean_ci([1.0])[1] == 0.0
    assert machine_line((0.0, 10, 1000, 0), (2.0, 12, 2000, 1_000_000)) == "steal 0.20%, CPU pressure 'some' 50%"
    assert "| 1.002 [0.971, 1.035] |" in t, t
    assert "| — | disk within" in t, t
    # A repetition still disturbed at its last attempt leaves the table with its pair.
    noisy = {"a": {"plain": rows["a"]["plain"] + [record(10, 10, 0, 0, 90, 9)],
                   "stalled": rows["a"]["stalled"] + [record(30, 25, 3000, 30, 300, 20, disturbed=4)]}}
    assert table(noisy) == t + "; 1 disturbed pair(s) left out", table(noisy)
    changed = dict(record(10, 10, 0, 0, 90, 9), dirty="dirty_bytes=0 -> dirty_bytes=20971520")
    assert undisturbed_pairs([changed], [record(10, 10, 0, 0, 90, 9)]) == ([], [], 1)
    assert "every pair disturbed" in table({"a": {"plain": [changed], "stalled": [changed]}})
    b = [record(10, 10, 0, 0, 90, 9, busy=9.0), record(10, 10, 0, 0, 90, 9, busy=11.0)]
    assert busy_column(b, [record(13, 10, 3000, 30, 90, 9, busy=10.5)] * 2) == "1.050 (±14.1%); idle 0.000 / -0.500"
    lo, hi = paired_ci([1.0, 2.0, 4.0], [1.1, 2.2, 4.4])
    assert abs(lo - 1.1) < 1e-9 and abs(hi - 1.1) < 1e-9, (lo, hi)
    assert argv_of("tree-remove", True)[argv_of("tree-remove", True).index("--levels") + 1] == "4"
    assert "commit=3600" in argv_of("clients-4", False)
    # Phases long enough for the drive's own spread to average out; the test's --short small.
    for case, flag, full, short in (("tio-seqwrite-t8", "--file-size", "64M", "2M"),
                                    ("clients-4", "--loops", "4", "1")):
        for s, want in ((False, full), (True, short)):
            a = argv_of(case, s)
            assert a[a.index(flag) + 1] == want, (case, s, a)
    rows["a"]["plain"][0]["dirty"] = "dirty_bytes=0"
    assert dirty_lines(rows) == ("  a: dirty_bytes=0 (1 plain, 0 stalled)\n"
                                 "  a: not recorded (1 plain, 2 stalled)"), dirty_lines(rows)
    assert dirty_now().startswith("dirty_background_bytes=") or dirty_now().startswith("unreadable")
    print("selftest ok")


def machine_mark():
    """(seconds, steal ticks, all ticks, CPU pressure `some` µs) now; None where unreadable."""
    import time
    try:
        f = [int(x) for x in open("/proc/stat").readline().split()[1:9]]
        steal, total = f[7], sum(f)
    except (OSError, ValueError, IndexError):
        steal = total = None
    try:
        some = next(l for l in open("/proc/pressure/cpu") if l.startswith("some "))
        psi = int(some.split("total=")[1])
    except (OSError, StopIteration, ValueError, IndexError):
        psi = None
    return time.monotonic(), steal, total, psi


def machine_line(a, b):
    """"steal 0.07%, CPU pressure 91%" over [a, b]."""
    parts = []
    if a[1] is not None and b[1] is not None and b[2] > a[2]:
        parts.append(f"steal {100 * (b[1] - a[1]) / (b[2] - a[2]):.2f}%")
    if a[3] is not None and b[3] is not None and b[0] > a[0]:
        parts.append(f"CPU pressure 'some' {100 * (b[3] - a[3]) / 1e6 / (b[0] - a[0]):.0f}%")
    return ", ".join(parts) or "not readable"


def main(argv):
    if argv[1:] == ["--selftest"]:
        return selftest()
    start = machine_mark()
    binary, outdir, reps, stalls, cases = argv[1:6]
    rest = argv[6:]
    value = lambda flag: rest[rest.index(flag) + 1] if flag in rest else None
    opts = {"short": "--short" in rest, "workdir": value("--workdir")}
    short, json_out = opts["short"], value("--json")
    cases = cases.split(",") if cases else list(CASES)
    for c in cases:
        if c not in CASES:
            sys.exit(f"bench-device --stalls: no case {c} (the cases: {', '.join(CASES)})")
    rows = {c: {"plain": [], "stalled": []} for c in cases}
    failed = 0
    for rep in range(int(reps)):
        for c in cases:
            for which, s in (("plain", ""), ("stalled", stalls)):
                out = os.path.join(outdir, f"{c}-{which}-{rep}")
                try:
                    rows[c][which].append(run_case(binary, c, out, s, opts))
                except (subprocess.CalledProcessError, KeyError, ValueError) as e:
                    failed += 1
                    print(f"{c} {which} rep {rep}: failed ({e}); see {out}/err", file=sys.stderr)
        print(f"after repetition {rep + 1}:\n{table(rows)}\n", flush=True)
    print(f"stalls {stalls}; {reps} repetitions, plain and stalled interleaved{'; short' if short else ''}")
    print(f"the machine over the table: {machine_line(start, machine_mark())}")
    for c in cases:
        print(f"  {c}: {CASES[c][0]}")
    print(table(rows))
    print(f"dirty thresholds (vm.*) the repetitions ran under:\n{dirty_lines(rows)}")
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"stalls": stalls, "short": short, "rows": rows}, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(sys.argv)
