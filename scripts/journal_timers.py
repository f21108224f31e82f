#!/usr/bin/env python3
"""The kernel's own timers inside journal-size-as-published's phases, against the disk clock's
pause (the figure in that preset's header).

The emulated disk's clock stops while the emulator is behind; jbd2's commit timer (5 s after a
transaction starts) and periodic writeback (every 5 s) keep the wall. A phase whose disk
clock paused P of its wall time W met the timers over W where a host that kept time would have
run the same disk work in W − P: at most P / 5 s more timer firings. This runs the study's
tree once (`bench fdtree` as the preset has it, 16M journal on RAM, the whole emulated
ST3500641AS, 9 levels) under ftrace and prints, per phase: W, P, the jbd2 commits in it
(timer-driven: not requested, the transaction 5 s old, against requested: an fsync, the sync,
a full transaction), periodic writeback starts on the testbed's disk, and P / 5 s.

Phase boundaries come from fsgauge's own system calls (ftrace instance with set_event_pid,
following its threads): dir_create is the N mkdirat closest together (N its directories),
file_remove the N unlinkat without AT_REMOVEDIR closest together, dir_remove those with it; file_create lies between
dir_create and file_remove, dir_remove_sync after dir_remove (its wall time, from the
result). Gaps between phases are the runner's few milliseconds.

  journal_timers.py BIN OUTDIR [LEVELS]   (root; mounts tracefs if it is not, unmounts it after)
"""

import glob
import json
import os
import re
import subprocess
import sys

TRACEFS = "/sys/kernel/tracing"
TIMER_S = 5.0
SYS_EVENTS = ["syscalls/sys_enter_mkdirat", "syscalls/sys_enter_unlinkat"]
KERNEL_EVENTS = ["jbd2/jbd2_start_commit", "jbd2/jbd2_run_stats", "writeback/writeback_start"]
AT_REMOVEDIR = 0x200


def fsgauge_argv(levels):
    return ["bench", "fdtree", "--fs", "ext4", "--fs-size", "465G", "--image-alloc", "sparse",
            "--journal", "ram:16M", "--device-model", "st3500641as", "--device-offset", "0",
            "--levels", str(levels), "--dirs-per-level", "3", "--files-per-dir", "4",
            "--file-size", "4K", "--fsync", "last", "--cold", "none", "--seed", "1", "-q"]


def put(path, value):
    with open(path, "w") as f:
        f.write(value)


class Instance:
    """An ftrace instance of its own (removed after), on the monotonic clock."""

    def __init__(self, name, events, kb):
        self.dir = os.path.join(TRACEFS, "instances", name)
        os.mkdir(self.dir)
        put(os.path.join(self.dir, "trace_clock"), "mono")
        put(os.path.join(self.dir, "buffer_size_kb"), str(kb))
        self.events = events
        for e in events:
            put(os.path.join(self.dir, "events", e, "enable"), "1")

    def read(self):
        with open(os.path.join(self.dir, "trace")) as f:
            return f.read().splitlines()

    def remove(self):
        put(os.path.join(self.dir, "tracing_on"), "0")
        for e in self.events:
            put(os.path.join(self.dir, "events", e, "enable"), "0")
        os.rmdir(self.dir)


# "TASK-PID [CPU] FLAGS TIMESTAMP: event: args", a system call's "...: sys_unlinkat(args)".
LINE = re.compile(r"^\s*(\S+)-(\d+)\s+\[\d+\]\s+\S+\s+([\d.]+):\s+(\w+)[:(]\s*(.*)$")


def events(lines):
    for line in lines:
        m = LINE.match(line)
        if m:
            yield float(m.group(3)), m.group(4), m.group(5)


def run(binary, outdir, levels):
    mounted = not os.path.exists(os.path.join(TRACEFS, "instances"))
    if mounted:
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=True)
    sysi = kern = None
    try:
        sysi = Instance(f"fsgauge-sys-{os.getpid()}", SYS_EVENTS, 65536)
        put(os.path.join(sysi.dir, "options", "event-fork"), "1")
        kern = Instance(f"fsgauge-kernel-{os.getpid()}", KERNEL_EVENTS, 8192)
        res = os.path.join(outdir, "res")
        with open(os.path.join(outdir, "err"), "w") as err:
            subprocess.run([binary, *fsgauge_argv(levels), "--out", res], stderr=err, stdout=subprocess.DEVNULL,
                           preexec_fn=lambda: put(os.path.join(sysi.dir, "set_event_pid"), str(os.getpid())),
                           check=True)
        return sysi.read(), kern.read(), res
    finally:
        for i in (sysi, kern):
            if i:
                i.remove()
        if mounted:
            subprocess.run(["umount", TRACEFS], check=True)


def phases_of(res):
    [f] = glob.glob(os.path.join(res, "*.json"))
    return {p["name"]: p for p in json.load(open(f))["phases"]}


def densest(ts, n):
    """The n consecutive times of `ts` closest together: a phase's calls, among the runner's
    own (its directories, its clean-up) before and after it."""
    i = min(range(len(ts) - n + 1), key=lambda i: ts[i + n - 1] - ts[i])
    return ts[i:i + n]


def spans(sys_lines, ph):
    """Each phase's [start, end) on the monotonic clock."""
    mk, rm, rmdir = [], [], []
    for t, name, args in events(sys_lines):
        if name == "sys_mkdirat":
            mk.append(t)
        elif name == "sys_unlinkat":
            flag = int(re.search(r"flag: (0x[0-9a-f]+|0)", args).group(1), 0)
            (rmdir if flag & AT_REMOVEDIR else rm).append(t)
    dc, fr, dr = (densest(sorted(ts), int(ph[name]["ops"]))
                  for ts, name in ((mk, "dir_create"), (rm, "file_remove"), (rmdir, "dir_remove")))
    end = dr[-1] + ph["dir_remove_sync"]["wall_s"]
    return {"dir_create": (dc[0], dc[-1]), "file_create": (dc[-1], fr[0]),
            "file_remove": (fr[0], fr[-1]), "dir_remove": (dr[0], dr[-1]),
            "dir_remove_sync": (dr[-1], end)}


def kernel_timers(kern_lines):
    """jbd2 commits (start time, timer-driven) and periodic writeback starts (time, bdi)."""
    started, commits, writeback = {}, [], []
    for t, name, args in events(kern_lines):
        if name == "jbd2_start_commit":
            m = re.search(r"dev (\d+),(\d+) transaction (\d+)", args)
            started[(m.group(1), m.group(2), m.group(3))] = t
        elif name == "jbd2_run_stats":
            m = re.search(r"dev (\d+),(\d+) tid (\d+) wait \d+ request_delay (\d+) running (\d+)", args)
            key = (m.group(1), m.group(2), m.group(3))
            timer = int(m.group(4)) == 0 and int(m.group(5)) >= TIMER_S * 1000 - 100
            commits.append((started.get(key, t), f"{key[0]}:{key[1]}", timer))
        elif name == "writeback_start" and "reason=periodic" in args:
            writeback.append((t, re.search(r"bdi (\S+):", args).group(1)))
    return commits, writeback


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    binary, outdir = argv[1], argv[2]
    levels = int(argv[3]) if len(argv) > 3 else 9
    os.makedirs(outdir, exist_ok=True)
    sys_lines, kern_lines, res = run(binary, outdir, levels)
    ph = phases_of(res)
    sp = spans(sys_lines, ph)
    commits, writeback = kernel_timers(kern_lines)
    # The testbed's device: the one whose commits come while the tree is made.
    devs = [d for t, d, _ in commits if sp["dir_create"][0] <= t <= sp["dir_remove_sync"][1]]
    dev = max(set(devs), key=devs.count) if devs else None
    bdi = dev
    print(f"levels {levels}; the testbed's disk {dev}; timer: {TIMER_S:.0f} s")
    print("phase | wall s | pause s | disk s | jbd2 commits: timer / requested | periodic writeback "
          "starts (its disk) | pause / 5 s")
    for name, (a, b) in sp.items():
        p = ph[name]
        pause = (p.get("device_model") or {}).get("pause_ns", 0) / 1e9
        inside = [c for c in commits if c[1] == dev and a <= c[0] < b]
        timer = sum(1 for c in inside if c[2])
        wb = sum(1 for t, d in writeback if a <= t < b and d == bdi)
        print(f"{name} | {p['wall_s']:.2f} | {pause:.3f} | {p['wall_s'] - pause:.2f} | "
              f"{timer} / {len(inside) - timer} | {wb} | {pause / TIMER_S:.3f}")


if __name__ == "__main__":
    main(sys.argv)
