//! What the exerciser's durability record and its judge cost: exerciser operations per second
//! on a directory of the host with and without the record (alternating rounds, so a busy
//! machine weighs on both alike), and the time to judge a 1 MiB file with 3000 operations since
//! its durable point. Run with `cargo bench --bench durable_cost [DIR]` (default: a temporary
//! directory).

use std::time::Instant;

use fsgauge::workload::exercise::durable::{Found, Judge, Record, What};
use fsgauge::workload::exercise::model::Model;
use fsgauge::workload::exercise::ops::{Limits, OpGen};
use fsgauge::workload::exercise::{Config, Exerciser, OpKind};

const OPS: u64 = 20_000;

fn ops_per_s(dir: &std::path::Path, record: bool) -> f64 {
    let cfg = Config {
        max_len: 256 << 10,
        max_op_len: 64 << 10,
        direct: false,
        pollute_eof: false,
        kinds: OpKind::ALL.map(|k| (k, 1)).to_vec(),
        seed: 1,
        record: record.then_some(OPS as usize),
    };
    let file = dir.join("bench.dat");
    let mut ex = Exerciser::create(&file, cfg, None).expect("exerciser");
    let t = Instant::now();
    for _ in 0..OPS {
        if let Err(f) = ex.step() {
            panic!("{}", f.render());
        }
    }
    let rate = OPS as f64 / t.elapsed().as_secs_f64();
    assert_eq!(
        ex.record().map_or(0, |r| r.events.len()),
        if record { OPS as usize + 1 } else { 0 }
    );
    ex.close().expect("close");
    std::fs::remove_file(&file).expect("removing the bench's file");
    rate
}

fn judge_cost() {
    let (max, oplen, n) = (1u64 << 20, 64u64 << 10, 3000u64);
    let lim = Limits {
        max_len: max,
        max_op_len: oplen,
        align: 1,
        block: 4096,
    };
    let kinds: Vec<OpKind> = OpKind::ALL
        .into_iter()
        .filter(|k| !fsgauge::workload::exercise::durable::is_durability_point(*k))
        .collect();
    let mut gen = OpGen::new(5, &kinds, lim);
    let mut m = Model::new(max, oplen, 9).expect("a model of the bench's sizes");
    let mut rec = Record::new("/x".into(), 9, max, oplen, n as usize + 1);
    rec.push(What::Setup, 0, 1);
    for i in 1..=n {
        let op = gen.next(m.size());
        m.apply(i, op);
        rec.push(What::Op(i, op), 10 * i, 10 * i + 5);
    }
    let found = m.content().to_vec();
    let t = Instant::now();
    let mut j = Judge::new(&rec).expect("record");
    let v = j.judge(u64::MAX, Found::File(&found)).expect("judged");
    let first = t.elapsed();
    assert!(v.failure().is_none());
    let t = Instant::now();
    let v = j.judge(u64::MAX, Found::File(&found)).expect("judged");
    let again = t.elapsed();
    assert!(v.failure().is_none());
    eprintln!(
        "judge: 1 MiB file, {n} operations since the durable point: {:.1} ms (first, with the judge's set-up), {:.1} ms (again)",
        first.as_secs_f64() * 1e3,
        again.as_secs_f64() * 1e3
    );
}

fn main() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map_or_else(|| tmp.path().to_path_buf(), Into::into);
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        off.push(ops_per_s(&dir, false));
        on.push(ops_per_s(&dir, true));
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    eprintln!(
        "exerciser on {}: {OPS} ops x 3 rounds: without record {:.0} ops/s (median; {:?}), with record {:.0} ops/s ({:?})",
        dir.display(),
        med(&mut off),
        off.iter().map(|x| x.round()).collect::<Vec<_>>(),
        med(&mut on),
        on.iter().map(|x| x.round()).collect::<Vec<_>>()
    );
    judge_cost();
}
