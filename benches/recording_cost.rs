//! What timing and recording one request costs on this machine, in nanoseconds: the
//! recorder's own path (`Recorder::lap`), a request loop's [`Lane`], a clock read, and
//! `Instant::now` for comparison. Run with `cargo bench --bench recording_cost`.
//!
//! [`Lane`]: fsgauge::measure::Lane

use std::time::Instant;

use fsgauge::measure::{Devices, OpDef, PhaseMeter, Progress};

fn main() {
    let meter = PhaseMeter::start(
        "x",
        &[OpDef::primary("read")],
        &Devices::default(),
        None,
        &Progress::hidden(),
    );
    let mut rec = meter.recorder(0);
    let op = rec.op("read");
    let n = 20_000_000u64;
    let t = Instant::now();
    let mut tick = rec.tick();
    for _ in 0..n {
        tick = rec.lap(op, tick, 4096);
    }
    let lap = t.elapsed().as_nanos() as f64 / n as f64;
    let clock = rec.clock();
    let t = Instant::now();
    rec.with_lane(op, |rec, lane| {
        let mut tick = clock.now();
        for _ in 0..n {
            let e = clock.now();
            lane.add(rec, clock.ns(tick, e), 4096, e);
            tick = e;
        }
    });
    let lane = t.elapsed().as_nanos() as f64 / n as f64;
    let t = Instant::now();
    let mut x = 0u64;
    for _ in 0..n {
        x = x.wrapping_add(std::hint::black_box(rec.tick()).0);
    }
    let tick_ns = t.elapsed().as_nanos() as f64 / n as f64;
    let t = Instant::now();
    for _ in 0..n {
        x = x.wrapping_add(std::hint::black_box(Instant::now()).elapsed().as_nanos() as u64);
    }
    let std_pair = t.elapsed().as_nanos() as f64 / n as f64 / 2.0;
    eprintln!(
        "Recorder::lap (clock read + record) {lap:.1} ns, with a Lane {lane:.1} ns, clock read {tick_ns:.1} ns (tsc: {}), Instant::now {std_pair:.1} ns ({})",
        rec.clock().is_tsc(),
        x & 1
    );
}
