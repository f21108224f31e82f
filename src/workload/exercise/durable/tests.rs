#![allow(clippy::unwrap_used)]

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::workload::exercise::engine::{Config, Exerciser};
use crate::workload::exercise::model::Model;
use crate::workload::exercise::ops::{Limits, OpGen};

const MAX: u64 = 8192;
const OPLEN: u64 = 2048;

/// A record of `ops` with made-up times: set-up over 0..1, operation `n` over 10n..10n+5.
fn record(ops: &[Op]) -> Record {
    let mut r = Record::new("/t/f".into(), 7, MAX, OPLEN, ops.len() + 1);
    r.push(What::Setup, 0, 1);
    for (i, &op) in ops.iter().enumerate() {
        let n = i as u64 + 1;
        r.push(What::Op(n, op), 10 * n, 10 * n + 5);
    }
    r
}

/// Every version of the file: `v[k]` after operation k (`v[0]` empty), with its size.
fn versions(r: &Record) -> Vec<(Vec<u8>, u64)> {
    let mut m = Model::new(r.max_len, r.max_op_len, r.seed).expect("a small model");
    let mut v = vec![(m.range(0, r.max_len).to_vec(), 0)];
    for (n, op) in r.ops() {
        m.apply(n, op);
        v.push((m.range(0, r.max_len).to_vec(), m.size()));
    }
    v
}

fn content(v: &(Vec<u8>, u64)) -> Vec<u8> {
    v.0[..v.1 as usize].to_vec()
}

fn w(off: u64, len: u64) -> Op {
    Op::new(OpKind::Write, off, len)
}

/// write, write, fsync (3), then a write over 0..1000 (4) and one over 5000..6000 (5).
fn basic() -> Record {
    record(&[
        w(0, 4096),
        w(2048, 4096),
        Op::new(OpKind::Fsync, 0, 0),
        w(0, 1000),
        w(5000, 1000),
    ])
}

fn fail(v: Verdict) -> Mismatch {
    match v {
        Verdict::Fail(m) => *m,
        Verdict::Pass { .. } => panic!("passed"),
    }
}

#[test]
fn a_file_exactly_as_at_the_durable_point_passes() {
    let r = basic();
    let v = versions(&r);
    let at_d = content(&v[3]);
    // Between the fsync's end (35) and the next start (40): only V3 is allowed.
    let got = judge(&r, 37, Found::File(&at_d)).unwrap();
    assert_eq!(
        got,
        Verdict::Pass {
            durable_point: Some(What::Op(3, Op::new(OpKind::Fsync, 0, 0))),
            versions: 1
        }
    );
    // After both later writes started, V3 is still allowed, and so is V5.
    for found in [&at_d, &content(&v[5])] {
        let got = judge(&r, 1000, Found::File(found)).unwrap();
        assert!(matches!(got, Verdict::Pass { versions: 3, .. }), "{got:?}");
    }
    // The file as of write 1 lacks write 2, which the fsync made durable.
    let got = fail(judge(&r, 37, Found::File(&content(&v[1]))).unwrap());
    assert_eq!(got.class, Class::LostDurableData);
}

#[test]
fn an_in_flight_write_half_applied_passes_and_not_before_it_started() {
    let r = basic();
    let v = versions(&r);
    let mut found = content(&v[3]);
    // Half of write 4 (0..1000) reached the disk.
    found[..500].copy_from_slice(&v[4].0[..500]);
    assert_ne!(found, content(&v[3]), "write 4 changes those bytes");
    // Cut at 42: write 4 started at 40 and had not ended (45).
    let got = judge(&r, 42, Found::File(&found)).unwrap();
    assert!(matches!(got, Verdict::Pass { versions: 2, .. }), "{got:?}");
    // At 38 it had not started: only the durable bytes are allowed there.
    let got = fail(judge(&r, 38, Found::File(&found)).unwrap());
    let first = (0..500).find(|&i| v[4].0[i] != v[3].0[i]).unwrap() as u64;
    assert_eq!(got.class, Class::LostDurableData, "{}", got.render());
    assert_eq!((got.versions, got.since_count), (1, 0));
    match got.problem {
        Problem::Data { offset, .. } => assert_eq!(offset, first),
        p => panic!("{p:?}"),
    }
}

#[test]
fn a_corrupted_durable_byte_is_lost_durable_data_at_its_offset() {
    let r = basic();
    let v = versions(&r);
    let mut found = content(&v[5]);
    // 3000 is in neither write 4 (0..1000) nor write 5 (5000..6000).
    found[3000] ^= 0x5a;
    found[3001] ^= 0x5a;
    let m = fail(judge(&r, 1000, Found::File(&found)).unwrap());
    assert_eq!(m.class, Class::LostDurableData);
    match &m.problem {
        Problem::Data {
            offset,
            run,
            allowed,
            durable,
            found: f,
            ..
        } => {
            assert_eq!((*offset, *run), (3000, 2));
            assert_eq!(allowed, &vec![v[3].0[3000]], "only the durable byte");
            assert_eq!(durable[0], v[3].0[3000]);
            assert_eq!(f[0], v[3].0[3000] ^ 0x5a);
        }
        p => panic!("{p:?}"),
    }
    assert_eq!(m.versions, 3);
    assert_eq!(m.since, vec![(4, OpKind::Write), (5, OpKind::Write)]);
    assert_eq!(
        m.durable_point.what,
        What::Op(3, Op::new(OpKind::Fsync, 0, 0))
    );
    let text = m.render();
    assert!(
        text.starts_with("lost durable data in /t/f: 2 wrong byte(s) at offset 0xbb8 (3000), after durable point 3 fsync"),
        "{text}"
    );
    assert!(
        text.contains("operations started since, by the cut: 2\n  4 write\n  5 write\n"),
        "{text}"
    );
}

#[test]
fn a_value_no_version_held_is_foreign_data() {
    let r = basic();
    let v = versions(&r);
    let mut found = content(&v[4]);
    let b = 700usize;
    let held = [v[3].0[b], v[4].0[b]];
    let foreign = (0..=255u8).find(|x| !held.contains(x)).unwrap();
    found[b] = foreign;
    let m = fail(judge(&r, 42, Found::File(&found)).unwrap());
    assert_eq!(m.class, Class::ForeignData);
    match &m.problem {
        Problem::Data {
            offset, allowed, ..
        } => {
            assert_eq!(*offset, b as u64);
            let mut want = held.to_vec();
            want.dedup();
            assert_eq!(allowed, &want);
        }
        p => panic!("{p:?}"),
    }
    assert_eq!(m.versions, 2);
}

#[test]
fn a_truncated_durable_file_fails_on_its_size() {
    let r = basic();
    let v = versions(&r);
    let full = content(&v[3]);
    assert_eq!(full.len(), 6144);
    let m = fail(judge(&r, 37, Found::File(&full[..6000])).unwrap());
    assert_eq!(m.class, Class::LostDurableData);
    assert_eq!(
        m.problem,
        Problem::Size {
            found: 6000,
            allowed: vec![6144]
        }
    );
    // A truncate that had started allows its size.
    let r = record(&[
        w(0, 4096),
        Op::new(OpKind::Fsync, 0, 0),
        Op::new(OpKind::Truncate, 0, 100),
    ]);
    let v = versions(&r);
    assert!(matches!(
        judge(&r, 31, Found::File(&content(&v[3]))).unwrap(),
        Verdict::Pass { versions: 2, .. }
    ));
    let m = fail(judge(&r, 29, Found::File(&content(&v[3]))).unwrap());
    assert_eq!(
        m.problem,
        Problem::Size {
            found: 100,
            allowed: vec![4096]
        }
    );
}

#[test]
fn an_absent_file_fails_after_the_set_up_and_passes_before_it() {
    let r = basic();
    assert_eq!(
        judge(&r, 0, Found::Absent).unwrap(),
        Verdict::Pass {
            durable_point: None,
            versions: 0
        }
    );
    let m = fail(judge(&r, 1, Found::Absent).unwrap());
    assert_eq!(
        (m.class, &m.problem),
        (Class::LostDurableData, &Problem::Missing)
    );
    assert_eq!(m.durable_point.what, What::Setup);
    assert!(
        m.headline().contains("the file is missing"),
        "{}",
        m.headline()
    );
}

#[test]
fn a_record_with_operations_out_of_order_is_refused() {
    let mut r = basic();
    r.events.remove(2);
    let e = format!("{:#}", judge(&r, 100, Found::Absent).err().unwrap());
    assert!(e.contains("has operation 3 where 2 was due"), "{e}");
}

/// A found file mixing, byte by byte, versions `vd..=last`, with one of their sizes.
fn mix(v: &[(Vec<u8>, u64)], vd: usize, last: usize, rng: &mut ChaCha8Rng) -> Vec<u8> {
    let pick = |rng: &mut ChaCha8Rng| vd + (rng.next_u64() % (last - vd + 1) as u64) as usize;
    let size = v[pick(rng)].1 as usize;
    (0..size).map(|b| v[pick(rng)].0[b]).collect()
}

/// Generated runs of the exerciser's own op stream: byte-wise mixes of the allowed versions
/// always pass (no false alarm), and forgetting durability points never turns a pass into a
/// failure, also for files that were damaged.
#[test]
fn generated_runs_pass_their_mixes_and_forgetting_a_durable_point_never_fails_more() {
    let lim = Limits {
        max_len: MAX,
        max_op_len: OPLEN,
        align: 1,
        block: 512,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(32);
    let (mut fails, mut passes, mut rescued) = (0, 0, 0);
    for run in 0..6u64 {
        let mut gen = OpGen::new(run, &OpKind::ALL, lim);
        let mut m = Model::new(MAX, OPLEN, 7).expect("a small model");
        let mut ops = Vec::new();
        for n in 1..=300 {
            let op = gen.next(m.size());
            m.apply(n, op);
            ops.push(op);
        }
        let full = record(&ops);
        let v = versions(&full);
        for _ in 0..40 {
            let cut = 1 + rng.next_u64() % 3020;
            let d = full
                .events
                .iter()
                .rev()
                .find(|e| e.durable && e.end_ns <= cut)
                .unwrap();
            let vd = d.what.version() as usize;
            // Operation n starts at 10n.
            let last = ((cut / 10) as usize).min(300).max(vd);
            let mut found = mix(&v, vd, last, &mut rng);
            let ok = judge(&full, cut, Found::File(&found)).unwrap();
            assert!(
                ok.failure().is_none(),
                "false alarm, run {run} cut {cut}:\n{}",
                ok.failure().unwrap().render()
            );
            // Damage a byte, or the size, or bring back versions from before the durable
            // point (what a lost fsync leaves).
            match rng.next_u64() % 3 {
                0 if !found.is_empty() => {
                    let b = (rng.next_u64() % found.len() as u64) as usize;
                    found[b] = found[b].wrapping_add(1 + (rng.next_u64() % 255) as u8);
                }
                1 => found.truncate(found.len() / 2),
                _ => found = mix(&v, vd.saturating_sub(30), last, &mut rng),
            }
            let before = judge(&full, cut, Found::File(&found)).unwrap();
            let mut forgot = full.clone();
            for e in forgot.events.iter_mut().skip(1) {
                if e.durable && rng.next_u64() % 2 == 0 {
                    e.durable = false;
                }
            }
            let after = judge(&forgot, cut, Found::File(&found)).unwrap();
            match (before.failure(), after.failure()) {
                (None, Some(m)) => panic!("forgetting failed a pass:\n{}", m.render()),
                (Some(_), None) => rescued += 1,
                (Some(_), Some(_)) => fails += 1,
                (None, None) => passes += 1,
            }
        }
    }
    // The damage is found often, and forgetting does weaken the judge sometimes.
    assert!(fails > 50 && rescued > 0, "{fails} {passes} {rescued}");
}

fn cfg(seed: u64) -> Config {
    Config {
        max_len: 64 << 10,
        max_op_len: 16 << 10,
        direct: false,
        pollute_eof: false,
        kinds: OpKind::ALL.map(|k| (k, 1)).to_vec(),
        seed,
        record: Some(100),
    }
}

/// The engine's record re-runs to the engine's own model, has the set-up first and marks
/// exactly fsync, fdatasync and syncfs; the file after the run passes the judge.
#[test]
fn the_engine_records_every_operation_and_its_file_passes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let mut ex = Exerciser::create(&path, cfg(3), None).unwrap();
    for _ in 0..2000 {
        ex.step().unwrap();
    }
    let rec = ex.record().unwrap().clone();
    assert_eq!(rec.events.len(), 2001);
    assert_eq!(rec.events[0].what, What::Setup);
    assert!(rec.events[0].durable);
    let mut m = Model::new(rec.max_len, rec.max_op_len, rec.seed).expect("a small model");
    let mut kinds = std::collections::BTreeSet::new();
    for pair in rec.events.windows(2) {
        assert!(pair[0].start_ns <= pair[0].end_ns && pair[0].end_ns <= pair[1].start_ns);
    }
    for e in &rec.events[1..] {
        let What::Op(n, op) = e.what else {
            panic!("{:?}", e.what)
        };
        assert_eq!(
            e.durable,
            matches!(op.kind, OpKind::Fsync | OpKind::Fdatasync | OpKind::Syncfs)
        );
        kinds.insert(op.kind);
        m.apply(n, op);
    }
    assert!(kinds.contains(&OpKind::Syncfs), "syncfs is in the mix");
    assert_eq!(m.content(), ex.model().content());
    ex.apply(Op::new(OpKind::Fsync, 0, 0)).unwrap();
    let rec = ex.record().unwrap().clone();
    ex.close().unwrap();
    let found = std::fs::read(&path).unwrap();
    let end = rec.events.last().unwrap().end_ns;
    let v = judge(&rec, end, Found::File(&found)).unwrap();
    assert!(matches!(v, Verdict::Pass { versions: 1, .. }), "{v:?}");
    let mut bad = found.clone();
    bad[found.len() / 2] ^= 1;
    let m = fail(judge(&rec, end, Found::File(&bad)).unwrap());
    assert_eq!(m.class, Class::LostDurableData);
    assert!(matches!(m.problem, Problem::Data { offset, .. } if offset == found.len() as u64 / 2));
}

/// An fsync whose operation failed (here the size check after it, the file having been cut
/// behind the exerciser's back) is recorded but is no durability point.
#[test]
fn a_failed_fsync_is_no_durability_point() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let mut ex = Exerciser::create(&path, cfg(4), None).unwrap();
    ex.apply(w(0, 8192)).unwrap();
    ex.apply(Op::new(OpKind::Fsync, 0, 0)).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(100)
        .unwrap();
    ex.apply(Op::new(OpKind::Fsync, 0, 0)).unwrap_err();
    let durable: Vec<(What, bool)> = ex
        .record()
        .unwrap()
        .events
        .iter()
        .map(|e| (e.what, e.durable))
        .collect();
    let fsync = Op::new(OpKind::Fsync, 0, 0);
    assert_eq!(
        durable,
        vec![
            (What::Setup, true),
            (What::Op(1, w(0, 8192)), false),
            (What::Op(2, fsync), true),
            (What::Op(3, fsync), false),
        ]
    );
}

#[test]
fn a_size_written_back_part_way_is_allowed_only_at_a_block_boundary_between_the_versions() {
    use super::judge::size_allowed_for_tests as allowed;
    let sizes = [168_483, 174_319, 235_622, 262_144];
    assert!(allowed(&sizes, 174_319));
    assert!(
        allowed(&sizes, 176_128),
        "43 blocks: between, at a boundary"
    );
    assert!(
        !allowed(&sizes, 176_129),
        "between, but not at a block boundary"
    );
    assert!(!allowed(&sizes, 163_840), "a boundary below every version");
    assert!(!allowed(&sizes, 266_240), "a boundary above every version");
    assert!(!allowed(&[], 0));
}

#[test]
fn a_failure_says_which_operation_wrote_the_wrong_bytes_and_where() {
    let r = basic();
    let v = versions(&r);
    // Stale bytes: what write 1 left at 100..132, found at 3000 after the fsync.
    let mut found = content(&v[3]);
    found[3000..3032].copy_from_slice(&v[1].0[100..132]);
    let m = fail(judge(&r, 37, Found::File(&found)).unwrap());
    let Problem::Data { whence, .. } = &m.problem else {
        panic!("{m:?}")
    };
    assert_eq!(whence.searched, 32);
    let one = Seen {
        op: 1,
        kind: OpKind::Write,
        offset: 100,
    };
    assert!(whence.before_cut.contains(&one), "{whence:?}");
    assert!(
        m.render()
            .contains("by 1 write at 0x64 (2900 lower), before the durable point"),
        "{}",
        m.render()
    );
    // Bytes of write 5, which started after the cut, cannot be on the disk.
    let mut found = content(&v[3]);
    found[3000..3032].copy_from_slice(&v[5].0[5000..5032]);
    let m = fail(judge(&r, 37, Found::File(&found)).unwrap());
    let Problem::Data { whence, .. } = &m.problem else {
        panic!("{m:?}")
    };
    assert_eq!(
        whence.after_cut,
        Some(Seen {
            op: 5,
            kind: OpKind::Write,
            offset: 5000
        })
    );
    assert!(m.render().contains("after the cut (cannot be on the disk)"));
    // Bytes no operation wrote: the disk's own.
    let mut found = content(&v[3]);
    for (i, b) in found[3000..3032].iter_mut().enumerate() {
        *b = i as u8 ^ 0xa5;
    }
    let m = fail(judge(&r, 37, Found::File(&found)).unwrap());
    assert!(
        m.render().contains("by no operation of the run"),
        "{}",
        m.render()
    );
    // Too few wrong bytes, or all alike (zeros are everywhere), are not searched for.
    assert_eq!(whence::needle(&[0u8; 64], 0, 64), None);
    assert_eq!(whence::needle(&found, 3000, 7), None);
    // A wrong run cut short by a byte that matches by chance reaches on to the next 8 right
    // bytes in a row.
    let mut allowed = vec![false; 40];
    allowed[2] = true;
    allowed[20..].iter_mut().for_each(|a| *a = true);
    assert_eq!(whence::wrong_span(&allowed), 20);
    assert_eq!(whence::wrong_span(&[false; 5]), 5);
}

#[test]
fn a_write_after_an_unsynced_shift_may_be_found_where_its_block_was_before_the_shift() {
    // (the shift, the file before it, the write after it, where its bytes were before it)
    for (shift, first, at, pre) in [
        (
            Op::new(OpKind::Insert, 0, 4096),
            w(0, 4096),
            4196usize,
            100usize,
        ),
        (Op::new(OpKind::Collapse, 0, 4096), w(0, 8192), 100, 4196),
    ] {
        let r = record(&[first, Op::new(OpKind::Fsync, 0, 0), shift, w(at as u64, 50)]);
        let v = versions(&r);
        // The map from before the shift, with the block's newer data.
        let mut found = content(&v[2]);
        found[pre..pre + 50].copy_from_slice(&v[4].0[at..at + 50]);
        assert_ne!(found, content(&v[2]));
        let got = judge(&r, 1000, Found::File(&found)).unwrap();
        assert!(matches!(got, Verdict::Pass { .. }), "{shift:?}: {got:?}");
        // The same bytes anywhere else are still foreign.
        let mut elsewhere = content(&v[2]);
        elsewhere[1100..1150].copy_from_slice(&v[4].0[at..at + 50]);
        let m = fail(judge(&r, 1000, Found::File(&elsewhere)).unwrap());
        assert!(
            matches!(m.problem, Problem::Data { offset, .. } if (1100..1150).contains(&offset)),
            "{shift:?}: {}",
            m.render()
        );
        // Before the shift started, the write's bytes cannot be there at all.
        let m = fail(judge(&r, 27, Found::File(&found)).unwrap());
        assert_eq!(m.class, Class::LostDurableData, "{}", m.render());
    }
}

#[test]
fn stale_bytes_name_their_write_before_the_durable_point_even_when_copied_since() {
    let copy = |dst: u64| Op {
        dst,
        ..Op::new(OpKind::Copy, 100, 64)
    };
    let r = record(&[
        w(0, 4096),
        Op::new(OpKind::Fsync, 0, 0),
        copy(5000),
        copy(6000),
        copy(7000),
    ]);
    let v = versions(&r);
    let mut found = content(&v[2]);
    found[3000..3032].copy_from_slice(&v[1].0[100..132]);
    let m = fail(judge(&r, 1000, Found::File(&found)).unwrap());
    let Problem::Data { whence, .. } = &m.problem else {
        panic!("{m:?}")
    };
    let ops: Vec<u64> = whence.before_cut.iter().map(|s| s.op).collect();
    assert_eq!(
        ops,
        vec![3, 4, 5],
        "the latest three: the copies\n{}",
        m.render()
    );
    assert_eq!(
        whence.before_durable,
        Some(Seen {
            op: 1,
            kind: OpKind::Write,
            offset: 100
        })
    );
    assert!(
        m.render()
            .contains("by 1 write at 0x64 (2900 lower), before the durable point"),
        "{}",
        m.render()
    );
}
