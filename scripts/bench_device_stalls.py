#!/usr/bin/env python3
"""The disk's own clock against injected stalls (`scripts/bench-device --stalls`).

Each case runs with no stalls and with FSGAUGE_DEVICE_STALLS (the timing thread held asleep
before a share of its replies), interleaved per repetition (plain, stalled, plain, ...), and
prints per case: its disk time (wall − the disk clock's pause; for a time-boxed phase, its
work per disk second) with a 95% interval over the repetitions, stalled/plain of disk time
(goal: within 3%) and of wall time (goal: at least 20% longer, so the check has teeth), and
the pause against the stalls injected.

  bench_device_stalls.py BIN OUTDIR REPS STALLS CASES   (CASES: comma-separated, of CASES below)
  bench_device_stalls.py --selftest
"""

import glob
import json
import math
import os
import subprocess
import sys

FS = ["--fs", "ext4", "--fs-size", "1G", "--device-model", "deskstar-7k250", "--device-offset", "0",
      "--seed", "1", "-q"]
CASES = {
    # name: (what, argv after the binary, how to read the result)
    "qd1-read": ("QD1 random 4K reads (devices check deskstar-7k250), ms per read",
                 ["devices", "check", "deskstar-7k250", "--seconds", "2", "--json", "-q"], "check"),
    "tio-seqwrite-t8": ("tio seqwrite, 8 threads, 64K blocks, 8 x 16M, s",
                        ["bench", "tio", *FS, "--mode", "seqwrite", "--threads", "8", "--block", "64K",
                         "--file-size", "16M", "--cold", "none"], "seqwrite"),
    "clients-4": ("bench clients, 4 clients, 5 s: s per 1000 ops (disk time / ops)",
                  ["bench", "clients", *FS, "--clients", "4", "--time", "5s", "--cold", "none"], "clients"),
    "tree-remove": ("fdtree remove with syncfs (7 levels, 3 dirs, 4 files of 4K; file_remove + dir_remove), s",
                    ["bench", "fdtree", *FS, "--levels", "7", "--dirs-per-level", "3", "--files-per-dir",
                     "4", "--file-size", "4K", "--fsync", "end", "--cold", "none"], "remove"),
}


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


def from_check(path):
    """QD1 reads: (wall ms per read, disk ms per read, pause ms, stops)."""
    b = json.load(open(path))["benches"][0]
    lat = b["lateness"]
    n = b["requests"]
    return b["measured"], b["measured"] - lat["pause_ms"] / n, lat["pause_ms"], lat["pauses"]


def from_results(out, prefix):
    """The phases named `prefix...`: (wall s, disk s, pause ms, stops); time-boxed (clients):
    per 1000 operations."""
    wall = pause = stops = ops = 0
    for f in sorted(glob.glob(os.path.join(out, "*.json"))):
        for p in json.load(open(f)).get("phases", []):
            d = p.get("device_model")
            if d and (prefix == "clients" and p["name"].startswith("clients")
                      or prefix == "remove" and p["name"].endswith("_remove")
                      or p["name"].startswith(prefix)):
                wall += p["wall_s"]
                pause += d.get("pause_ns", 0) / 1e9
                stops += d.get("pauses", 0)
                ops += p["ops"]
    if wall == 0:
        raise SystemExit(f"no phase {prefix}* with an emulated disk's record in {out}")
    if prefix == "clients":
        k = 1000.0 / ops
        return wall * k, (wall - pause) * k, pause * 1e3, stops
    return wall, wall - pause, pause * 1e3, stops


def run_case(binary, case, out, stalls):
    _, argv, kind = CASES[case]
    env = dict(os.environ)
    env.pop("FSGAUGE_DEVICE_STALLS", None)
    if stalls:
        env["FSGAUGE_DEVICE_STALLS"] = stalls
    os.makedirs(out, exist_ok=True)
    if kind == "check":
        with open(os.path.join(out, "check.json"), "w") as o, open(os.path.join(out, "err"), "w") as e:
            subprocess.run([binary, *argv], stdout=o, stderr=e, env=env, check=True)
        return from_check(os.path.join(out, "check.json"))
    with open(os.path.join(out, "err"), "w") as e:
        subprocess.run([binary, *argv, "--out", os.path.join(out, "res")], stdout=subprocess.DEVNULL,
                       stderr=e, env=env, check=True)
    return from_results(os.path.join(out, "res"), kind)


def table(rows):
    """rows: case -> {"plain": [(wall, disk, pause, stops)], "stalled": [...]}."""
    lines = ["case | plain disk (95% CI) | stalled disk (95% CI) | disk stalled/plain | wall stalled/plain | pause ms stalled (plain) | stops | goals"]
    for case, r in rows.items():
        p, s = r["plain"], r["stalled"]
        if not p or not s:
            lines.append(f"{case} | (failed)")
            continue
        pd, pci = mean_ci([x[1] for x in p])
        sd, sci = mean_ci([x[1] for x in s])
        pw, _ = mean_ci([x[0] for x in p])
        sw, _ = mean_ci([x[0] for x in s])
        ratio, wall = sd / pd, sw / pw
        ok = ("disk within 3%: " + ("yes" if abs(ratio - 1) <= 0.03 else "NO")
              + "; wall +20%: " + ("yes" if wall >= 1.2 else "NO"))
        lines.append(
            f"{case} | {pd:.4f} ± {pci:.4f} | {sd:.4f} ± {sci:.4f} | {ratio:.3f} | {wall:.3f} | "
            f"{mean_ci([x[2] for x in s])[0]:.1f} ({mean_ci([x[2] for x in p])[0]:.1f}) | "
            f"{mean_ci([x[3] for x in s])[0]:.0f} | {ok}")
    return "\n".join(lines)


def selftest():
    rows = {"a": {"plain": [(10, 10, 0, 0), (10.2, 10.1, 1, 3)], "stalled": [(13, 10.05, 2950, 30), (13.1, 10.1, 3000, 31)]}}
    t = table(rows)
    assert "disk within 3%: yes; wall +20%: yes" in t, t
    assert mean_ci([1.0])[1] == 0.0
    print("selftest ok")


def main(argv):
    if argv[1:] == ["--selftest"]:
        return selftest()
    binary, outdir, reps, stalls, cases = argv[1:6]
    cases = cases.split(",") if cases else list(CASES)
    for c in cases:
        if c not in CASES:
            sys.exit(f"bench-device --stalls: no case {c} (the cases: {', '.join(CASES)})")
    rows = {c: {"plain": [], "stalled": []} for c in cases}
    for rep in range(int(reps)):
        for c in cases:
            for which, s in (("plain", ""), ("stalled", stalls)):
                out = os.path.join(outdir, f"{c}-{which}-{rep}")
                try:
                    rows[c][which].append(run_case(binary, c, out, s))
                except (subprocess.CalledProcessError, SystemExit, KeyError, ValueError) as e:
                    print(f"{c} {which} rep {rep}: failed ({e}); see {out}/err", file=sys.stderr)
        print(f"after repetition {rep + 1}:\n{table(rows)}\n", flush=True)
    print(f"stalls {stalls}; {reps} repetitions, plain and stalled interleaved")
    for c in cases:
        print(f"  {c}: {CASES[c][0]}")
    print(table(rows))


if __name__ == "__main__":
    main(sys.argv)
