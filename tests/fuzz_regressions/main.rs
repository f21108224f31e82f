//! The fuzzers' found cases as regression tests, on stable Rust: every file under
//! `tests/fuzz_regressions/<target>/` (the cases `scripts/fuzz` found, and a small minimized
//! corpus of each parser's inputs) goes through its target's checks (`checks.rs`, the very
//! code the cargo-fuzz targets in `fuzz/` run), which must return without a panic, and
//! without allocating more at once than a small multiple of the input: the bound libFuzzer's
//! `-malloc_limit_mb` holds the fuzzers to.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

mod checks;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};

/// Counts the bytes this thread has allocated and not freed, and the most at once since the
/// last reset, so that a check's peak can be read while other tests run on other threads.
struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grew(n: usize) {
    let _ = LIVE.try_with(|l| {
        let now = l.get().saturating_add(n);
        l.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

fn shrank(n: usize) {
    let _ = LIVE.try_with(|l| l.set(l.get().saturating_sub(n)));
}

// SAFETY: every call is passed on to the system allocator unchanged; the counting beside it
// touches only const-initialized thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        // SAFETY: the caller's contract for `alloc` is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrank(layout.size());
        // SAFETY: `ptr` was allocated by `System` with `layout` (every allocation goes there).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size);
        shrank(layout.size());
        // SAFETY: as for `dealloc`; the caller's contract for `realloc` is the system's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The most a check may hold at once for an input of `len` bytes: the fuzzers' limit
/// (`scripts/fuzz` passes `-malloc_limit_mb=64`, a single allocation) is kept here for the
/// whole of a check, with room for the parsed copies an input of any size makes.
fn bound(len: usize) -> usize {
    (64 << 20) + 64 * len
}

/// Runs `check` on `data`, returning the most it held at once.
fn peak_of(check: checks::Check, data: &[u8]) -> usize {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    check(data);
    PEAK.with(Cell::get) - base
}

fn cases(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz_regressions")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn run_target(target: &str) {
    let (_, check) = checks::TARGETS.iter().find(|(n, _)| *n == target).unwrap();
    let files = cases(target);
    assert!(!files.is_empty(), "no cases for {target}");
    for f in files {
        let data = std::fs::read(&f).unwrap();
        let peak = peak_of(*check, &data);
        assert!(
            peak <= bound(data.len()),
            "{}: the check held {peak} bytes at once for {} bytes of input",
            f.display(),
            data.len()
        );
    }
}

#[test]
fn units_cases() {
    run_target("units");
}

#[test]
fn plan_cases() {
    run_target("plan");
}

#[test]
fn profile_cases() {
    run_target("profile");
}

#[test]
fn ablations_cases() {
    run_target("ablations");
}

#[test]
fn loadfile_cases() {
    run_target("loadfile");
}

#[test]
fn replay_cases() {
    run_target("replay");
}

#[test]
fn result_cases() {
    run_target("result");
}

#[test]
fn dist_cases() {
    run_target("dist");
}

/// Every target has its directory of cases, and every directory is a target's.
#[test]
fn every_target_has_cases_and_every_case_a_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    for entry in std::fs::read_dir(&root).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                checks::TARGETS.iter().any(|(n, _)| *n == name),
                "{} is no fuzz target's",
                p.display()
            );
        }
    }
    for (name, _) in checks::TARGETS {
        assert!(!cases(name).is_empty(), "no cases for {name}");
    }
}

/// Found by the `result` fuzz target: serde_json's default float parsing is off by one ulp
/// for some literals, so a result read and written again changed its figures.
#[test]
fn result_floats_read_back_exactly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions/result");
    let text = std::fs::read_to_string(dir.join("seed-exercise.json")).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["phases"][0]["latency"]["mean_ns"] = serde_json::json!(100441.73333333313_f64);
    let written = doc.to_string();
    assert!(
        written.contains("100441.73333333313"),
        "the float is written as it is"
    );
    let r = fsgauge::results::parse_result(written.as_bytes(), Path::new("r.json")).unwrap();
    assert_eq!(r.phases[0].latency.mean_ns, 100441.73333333313_f64);
}

/// Issue 41, item 7: the readers keep the memory bound they state per byte of input
/// (`fsgauge::base::bounded::PLAN_MEMORY_PER_BYTE`, `RESULT_MEMORY_PER_BYTE`), on inputs large
/// enough that the bound, not a fixed allowance, is what holds: a plan of 4,000 testbeds, and
/// a result whose time series is about 8 MB. Before, a result was read as a JSON tree, then
/// converted (about 8× the file).
#[test]
fn readers_hold_their_stated_memory_per_input_byte() {
    use fsgauge::base::bounded::{PLAN_MEMORY_PER_BYTE, RESULT_MEMORY_PER_BYTE};
    let mut plan = String::new();
    for i in 0..4000 {
        plan.push_str(&format!(
            "[[testbed]]\nlabel = \"t{i}\"\nfs = \"ext4\"\nfs_size = \"256M\"\n\n"
        ));
    }
    plan.push_str("[[workload]]\nkind = \"tree\"\ndirs = 1\nfiles = 1\nfile_size = \"4K\"\n");
    let opts = fsgauge::lab::plan::ParseOptions {
        workdir: Some(std::env::temp_dir()),
        ..Default::default()
    };
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let parsed = fsgauge::lab::plan::parse(&plan, "big.toml", &opts).unwrap();
    let peak = PEAK.with(Cell::get) - base;
    assert_eq!(parsed.testbeds.len(), 4000);
    let per = peak / plan.len();
    println!(
        "plan: {peak} bytes at once for {} bytes ({per}/byte)",
        plan.len()
    );
    assert!(
        peak <= PLAN_MEMORY_PER_BYTE * plan.len(),
        "plan: {peak} bytes for {}",
        plan.len()
    );

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions/result");
    let text = std::fs::read_to_string(dir.join("seed-tree.json")).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let one = doc["phases"][0]["series"][0].clone();
    let series: Vec<serde_json::Value> = (0..10_000)
        .map(|i| {
            let mut e = one.clone();
            e["t"] = serde_json::json!(i as f64);
            e
        })
        .collect();
    doc["phases"][0]["series"] = serde_json::Value::Array(series);
    let bytes = doc.to_string().into_bytes();
    drop(doc);
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let r = fsgauge::results::parse_result(&bytes, Path::new("big.json")).unwrap();
    let peak = PEAK.with(Cell::get) - base;
    assert_eq!(r.phases[0].series.len(), 10_000);
    let per = peak / bytes.len();
    println!(
        "result: {peak} bytes at once for {} bytes ({per}/byte)",
        bytes.len()
    );
    assert!(
        peak <= RESULT_MEMORY_PER_BYTE * bytes.len(),
        "result: {peak} bytes for {}",
        bytes.len()
    );
}
