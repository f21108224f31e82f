use super::*;
use crate::workload::durable_tree::state::compare;
use proptest::prelude::*;

/// Files `w<worker>/f<n>`, `per` to a worker.
struct Names(u64);

impl Naming for Names {
    fn path(&self, slot: u64) -> String {
        format!("w{}/f{}", slot / self.0, slot % self.0)
    }
}

fn expected() -> Expected {
    Expected::new(10, b"abcd")
}

/// The file as expected, found.
fn right(e: &Expected) -> Found {
    whole(e, &(0..e.size).map(|o| e.byte_at(o)).collect::<Vec<u8>>())
}

/// `bytes` found as a file (compared as the judge's reader compares them).
fn whole(e: &Expected, bytes: &[u8]) -> Found {
    let path = std::env::temp_dir().join(format!(
        "fsgauge-durable-tree-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&path, bytes).unwrap();
    let f = std::fs::File::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let mut buf = vec![0u8; 3];
    compare(std::os::fd::AsFd::as_fd(&f), e, &mut buf).unwrap()
}

/// Two workers of 2 files each; files 0 and 1 fsynced at 100 and 200, file 2 at 300.
fn fsynced() -> Record {
    Record {
        made: vec![100, 200, 300, 0],
        gone: vec![0; 4],
        syncs: vec![],
        per_worker: 2,
        fsynced: true,
    }
}

/// Judges `rec` at `cut` with `found(slot)` the state.
fn run(rec: &Record, cut: u64, found: impl Fn(u64) -> Found) -> Judged {
    judge(rec, cut, &expected(), &Names(2), 3, |d| {
        Ok(found(match *d {
            Due::Present { slot, .. } | Due::Gone { slot, .. } => slot,
        }))
    })
    .unwrap()
}

fn absent() -> Found {
    Found::Absent { dir_missing: None }
}

#[test]
fn the_expected_bytes_are_the_pattern_over_again_with_their_digest() {
    let e = expected();
    assert_eq!(e.digest, blake3::hash(b"abcdabcdab"));
    assert_eq!(
        (e.byte_at(0), e.byte_at(5), e.byte_at(9)),
        (b'a', b'b', b'b')
    );
    assert_eq!(right(&e), whole(&e, b"abcdabcdab"));
    match right(&e) {
        Found::File {
            size,
            first_diff,
            read,
            digest,
        } => assert_eq!((size, first_diff, read, digest), (10, None, 10, e.digest)),
        f => panic!("{f:?}"),
    }
}

#[test]
fn a_durable_file_there_and_right_passes_and_is_counted() {
    let e = expected();
    let j = run(&fsynced(), 250, |_| right(&e));
    assert_eq!(j.failures, vec![]);
    assert_eq!((j.files, j.removals), (2, 0));
}

#[test]
fn a_durable_file_missing_cut_or_with_one_byte_changed_fails_naming_it() {
    let e = expected();
    let one = |found: Found| {
        let j = run(&fsynced(), 250, |s| {
            if s == 1 {
                found.clone()
            } else {
                right(&e)
            }
        });
        assert_eq!(j.failures.len(), 1, "{:?}", j.failures);
        assert_eq!(j.failures[0].0, CrashClass::LostDurable);
        j.failures[0].1.clone()
    };
    let d = one(absent());
    assert!(
        d.starts_with("w0/f1: missing; expected 10 bytes (BLAKE3 "),
        "{d}"
    );
    assert!(
        d.contains("durable since its fsync, ended at 200 ns (50 ns before the cut)"),
        "{d}"
    );
    assert!(
        d.contains("since then, before the cut: 0 files made, 0 removals"),
        "{d}"
    );
    let d = one(Found::Absent {
        dir_missing: Some("w0".into()),
    });
    assert!(
        d.starts_with("w0/f1: missing, and its directory w0 too"),
        "{d}"
    );
    let d = one(whole(&e, b"abcdab"));
    assert!(
        d.starts_with("w0/f1: short: 6 bytes; expected 10 bytes"),
        "{d}"
    );
    assert!(
        d.contains(&format!(
            "found 6 bytes (BLAKE3 {}",
            &blake3::hash(b"abcdab").to_hex()[..16]
        )),
        "{d}"
    );
    let d = one(whole(&e, b"abcdabcdabXY"));
    assert!(d.starts_with("w0/f1: long: 12 bytes"), "{d}");
    let d = one(whole(&e, b"abcdaXcdab"));
    assert!(
        d.starts_with(
            "w0/f1: wrong bytes, the first wrong byte at offset 0x5 (5); expected 10 bytes"
        ),
        "{d}"
    );
}

#[test]
fn a_file_made_after_the_last_durable_point_may_be_missing() {
    // fsync of file 2 ends at 300: at 250 it may be missing; file 3 was never fsynced.
    let j = run(&fsynced(), 250, |s| {
        if s >= 2 {
            absent()
        } else {
            right(&expected())
        }
    });
    assert_eq!(j.failures, vec![]);
    let mut rec = fsynced();
    rec.fsynced = false;
    rec.syncs = vec![Sync {
        start: 150,
        end: 400,
        worker: 0,
    }];
    // Files 0 (whole at 100, before the syncfs started) is due from 400; 1 and 2 never.
    let j = run(&rec, 500, |s| {
        if s == 0 {
            right(&expected())
        } else {
            absent()
        }
    });
    assert_eq!((j.failures.len(), j.files), (0, 1));
    let j = run(&rec, 399, |_| absent());
    assert_eq!((j.failures.len(), j.files), (0, 0));
    let j = run(&rec, 500, |_| absent());
    assert!(
        j.failures[0]
            .1
            .contains("durable since the syncfs of worker 0 started at 150 ns, ended at 400 ns"),
        "{:?}",
        j.failures
    );
}

#[test]
fn a_removal_after_the_last_syncfs_may_be_undone_and_one_a_syncfs_covered_may_not() {
    let e = expected();
    let mut rec = fsynced();
    rec.gone = vec![500, 0, 0, 0];
    // Removal started at 500 with no syncfs after: file 0 there or not, all one.
    for f in [right(&e), absent()] {
        let j = run(&rec, 600, |s| if s == 0 { f.clone() } else { right(&e) });
        assert_eq!(j.failures, vec![]);
    }
    // A syncfs of another worker after it does not cover it; the same worker's, or a phase, does.
    rec.syncs = vec![Sync {
        start: 550,
        end: 580,
        worker: 1,
    }];
    assert_eq!(run(&rec, 600, |_| right(&e)).failures, vec![]);
    for worker in [0, ALL_WORKERS] {
        rec.syncs = vec![Sync {
            start: 550,
            end: 580,
            worker,
        }];
        let j = run(&rec, 600, |_| right(&e));
        assert_eq!(j.removals, 1);
        assert_eq!(j.failures.len(), 1, "{:?}", j.failures);
        assert!(
            j.failures[0].1.starts_with(
                "w0/f0: present, but its removal (unlink started at 500 ns) was made durable by"
            ),
            "{:?}",
            j.failures
        );
        assert!(
            j.failures[0]
                .1
                .ends_with("ended at 580 ns, 20 ns before the cut: a durable removal lost"),
            "{:?}",
            j.failures
        );
        assert_eq!(
            run(&rec, 600, |s| if s == 0 { absent() } else { right(&e) }).failures,
            vec![]
        );
        // Before the syncfs ended, the removal may still be undone.
        assert_eq!(run(&rec, 579, |_| right(&e)).failures, vec![]);
    }
}

#[test]
fn before_any_durable_point_nothing_fails() {
    let mut rec = fsynced();
    rec.syncs = vec![Sync {
        start: 50,
        end: 90,
        worker: 0,
    }];
    let j = run(&rec, 99, |_| absent());
    assert_eq!((j.failures.len(), j.files, j.removals), (0, 0, 0));
}

#[test]
fn more_wrong_files_than_shown_are_counted_on_one_line() {
    let rec = Record {
        made: vec![1; 10],
        gone: vec![0; 10],
        syncs: vec![],
        per_worker: 10,
        fsynced: true,
    };
    let j = judge(&rec, 5, &expected(), &Names(10), 3, |_| Ok(absent())).unwrap();
    assert_eq!(j.failures.len(), 4);
    assert_eq!(
        j.failures[3].1,
        "7 more durable files or removals are wrong in this state (the first 3 are named)"
    );
}

/// A record of 6 files over 2 workers from small times, and a state: each file right, absent or
/// short.
fn scenario() -> impl Strategy<Value = (Record, u64, Vec<u8>)> {
    let times = proptest::collection::vec(prop_oneof![Just(0u64), 1u64..40], 6);
    let syncs = proptest::collection::vec(
        (
            1u64..40,
            0u64..10,
            prop_oneof![Just(0u32), Just(1), Just(ALL_WORKERS)],
        ),
        0..4,
    );
    (
        times.clone(),
        times,
        syncs,
        any::<bool>(),
        1u64..50,
        proptest::collection::vec(0u8..3, 6),
    )
        .prop_map(|(made, gone, syncs, fsynced, cut, state)| {
            let syncs = syncs
                .into_iter()
                .map(|(start, len, worker)| Sync {
                    start,
                    end: start + len,
                    worker,
                })
                .collect();
            (
                Record {
                    made,
                    gone,
                    syncs,
                    per_worker: 3,
                    fsynced,
                },
                cut,
                state,
            )
        })
}

proptest! {
    #[test]
    fn forgetting_a_durable_point_never_turns_a_pass_into_a_failure((rec, cut, state) in scenario()) {
        let e = expected();
        let found = |s: u64| match state[s as usize] {
            0 => right(&e),
            1 => absent(),
            _ => whole(&e, b"abc"),
        };
        let all = judge(&rec, cut, &e, &Names(3), 100, |d| Ok(found(match *d {
            Due::Present { slot, .. } | Due::Gone { slot, .. } => slot,
        }))).unwrap();
        let forgot = judge(&rec.clone().forget_every_second(), cut, &e, &Names(3), 100, |d| Ok(found(match *d {
            Due::Present { slot, .. } | Due::Gone { slot, .. } => slot,
        }))).unwrap();
        // Every failure after forgetting was one before (a file named fails the same way or
        // by an earlier point, never newly).
        let named = |j: &Judged| j.failures.iter().map(|(_, t)| t.split(':').next().unwrap_or("").to_string()).collect::<Vec<_>>();
        for f in named(&forgot) {
            prop_assert!(named(&all).contains(&f), "{f} fails only after forgetting: {:?} vs {:?}", forgot.failures, all.failures);
        }
        prop_assert!(forgot.files <= all.files && forgot.removals <= all.removals);
    }
}
