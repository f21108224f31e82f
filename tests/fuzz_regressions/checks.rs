//! What every fuzz target checks of its parser, beyond "no panic": shared by the cargo-fuzz
//! targets in `fuzz/` (which include this file) and by the regression tests of this directory,
//! which feed every case the fuzzers found back through the same checks on stable Rust.
//!
//! Each check takes the raw input bytes and panics when the parser breaks a promise: an error
//! that does not say where, a value that does not print back to itself, a parsed document
//! whose parts lie outside what it declares.

use std::path::Path;

/// A target's check of one input: panics when the parser breaks a promise.
pub type Check = fn(&[u8]);

/// The targets, each with its check: the names of `fuzz/fuzz_targets/*.rs` and of the
/// directories of found cases.
pub const TARGETS: &[(&str, Check)] = &[
    ("units", units),
    ("plan", plan),
    ("profile", profile),
    ("ablations", ablations),
    ("loadfile", loadfile),
    ("replay", replay),
    ("result", result),
    ("dist", dist),
];

/// `line:column` after `prefix` at the start of `msg`, both from 1 and inside `text`.
fn assert_located(msg: &str, prefix: &str, text: &str) {
    let rest = msg
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("error does not start with {prefix:?}: {msg}"));
    let mut it = rest.splitn(3, ':');
    let line: usize = it
        .next()
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("error has no line after {prefix:?}: {msg}"));
    let column: usize = it
        .next()
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("error has no column after {prefix:?}: {msg}"));
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(
        line >= 1 && line <= lines.len(),
        "line {line} of {} lines: {msg}",
        lines.len()
    );
    let width = lines[line - 1].chars().count();
    assert!(
        column >= 1 && column <= width + 1,
        "column {column} of a line of {width} characters: {msg}"
    );
}

/// Sizes, durations, byte rates and comma lists: a size prints back to itself, a list has one
/// item per comma-separated field, and an error quotes the text.
pub fn units(data: &[u8]) {
    use fsgauge::base::units::{format_size, parse_duration, parse_size, Size};
    use fsgauge::workload::params::CommaList;
    use fsgauge::workload::rate::ByteRate;
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    match parse_size(s) {
        Ok(n) => {
            let printed = format_size(n);
            assert_eq!(parse_size(&printed), Ok(n), "{s:?} -> {n} -> {printed:?}");
            assert_eq!(Size(n).to_string(), printed);
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains(&format!("{s:?}")), "{msg}");
        }
    }
    match s.parse::<ByteRate>() {
        Ok(r) => assert_eq!(r.to_string().parse::<ByteRate>(), Ok(r), "{s:?}"),
        Err(e) => assert!(e.contains(&format!("{s:?}")), "{e}"),
    }
    match parse_duration(s) {
        Ok(d) => {
            let printed = humantime::format_duration(d).to_string();
            assert_eq!(parse_duration(&printed), Ok(d), "{s:?} -> {printed:?}");
        }
        Err(e) => assert!(e.to_string().contains(&format!("{s:?}")), "{e}"),
    }
    if let Ok(v) = s.parse::<CommaList<Size>>() {
        assert_eq!(v.len(), s.split(',').count(), "{s:?}");
    }
}

/// Plans: an error names the file, line and column (inside the text); a plan has testbeds and
/// workloads.
pub fn plan(data: &[u8]) {
    use fsgauge::lab::plan::{parse, ParseOptions};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let opts = ParseOptions {
        workdir: Some(std::env::temp_dir()),
        ..Default::default()
    };
    match parse(text, "fuzz.toml", &opts) {
        Ok(p) => {
            assert!(!p.testbeds.is_empty() && !p.workloads.is_empty());
            expansion(&p);
        }
        Err(e) => {
            let msg = format!("{e:#}");
            // A plan that extends a preset may be refused at a line of the preset (a value the
            // plan kept from it): located inside that preset's own text.
            let preset = msg
                .strip_prefix("preset ")
                .and_then(|rest| rest.split_once(':'))
                .and_then(|(name, _)| fsgauge::lab::plan::presets::find(name));
            match preset {
                Some(p) => assert_located(&msg, &format!("preset {}:", p.name), p.toml),
                None => assert_located(&msg, "fuzz.toml:", text),
            }
        }
    }
}

/// A plan that parses (its sweeps split, its `extends` merged) stays within the caps, and its
/// matrix is exactly testbeds × workload cells × first-round repetitions, each sweep cell
/// within the cap and holding one value on each of its axes.
fn expansion(p: &fsgauge::lab::plan::Plan) {
    use fsgauge::lab::plan::{first_round, matrix, Reps, MAX_RUNS};
    use fsgauge::workload::registry::sweep;
    let reps = match p.reps {
        Reps::Fixed(n) => u64::from(n),
        Reps::Auto { max, .. } => u64::from(max),
    };
    let cells = p.workloads.len() as u64;
    assert!(
        (p.testbeds.len() as u64) * cells * reps <= MAX_RUNS,
        "{} testbeds × {cells} cells × {reps} reps passed the cap",
        p.testbeds.len()
    );
    for w in &p.workloads {
        let (n, product) = sweep::count(&*w.workload);
        assert!(n.is_some_and(|n| n <= sweep::MAX_CELLS), "{product}");
    }
    // A matrix of many thousands of runs is built linearly (`scripts/bench-plan` measures it:
    // 76,000 runs in about a second in a release build), but past the fuzzer's 10 s in its
    // checked build: there the count above is the check.
    if (p.testbeds.len() as u64) * cells * u64::from(first_round(p)) > 5_000 {
        return;
    }
    let m = matrix(p);
    let usable = p.testbeds.len() - m.skipped.len();
    assert_eq!(
        m.runs.len() as u64,
        usable as u64 * cells * u64::from(first_round(p)),
        "the matrix is not testbeds × cells × repetitions"
    );
}

/// Device profiles: an error names the file, line and column; a profile that parses builds
/// its disk model, and its name can stand before `:ablations`.
pub fn profile(data: &[u8]) {
    use fsgauge::device::profile::{parse, Ablations};
    use fsgauge::device::DeviceModel;
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse(text, "fuzz.toml") {
        Ok(p) => {
            assert!(
                !p.name.is_empty() && !p.name.contains([':', '/']),
                "{}",
                p.name
            );
            assert_eq!(p.fingerprint().len(), 64);
            if let Err(e) = DeviceModel::new(&p, &Ablations::default()) {
                panic!("profile {} parses but builds no model: {e}", p.name);
            }
        }
        Err(e) => assert_located(&format!("{e:#}"), "fuzz.toml:", text),
    }
}

/// Ablation lists (`seek=off,constant=12ms`): what parses prints back to the same ablations.
pub fn ablations(data: &[u8]) {
    use fsgauge::device::profile::parse_ablations;
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(a) = parse_ablations(text) {
        let printed = a.to_string();
        match parse_ablations(&printed) {
            Ok(b) => assert_eq!(a, b, "{text:?} -> {printed:?}"),
            Err(e) => panic!("{text:?} prints as {printed:?}, which does not parse: {e:#}"),
        }
    }
}

/// dbench loadfiles: an error names the file and a line that exists; every operation parsed
/// comes from a line of the text and stays inside the run directory.
pub fn loadfile(data: &[u8]) {
    use fsgauge::workload::clients::loadfile::parse;
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.lines().count();
    match parse(text, "fuzz.txt") {
        Ok(ops) => {
            assert!(ops.len() <= lines);
            for op in &ops {
                assert!(
                    op.line >= 1 && op.line as usize <= lines,
                    "line {}",
                    op.line
                );
                for p in [&op.path, &op.path2].into_iter().flatten() {
                    assert!(
                        p.starts_with('/') && !p.split('/').any(|c| c == ".."),
                        "{p}"
                    );
                }
            }
        }
        Err(e) => {
            let msg = format!("{e:#}");
            if let Some(rest) = msg.strip_prefix("loadfile fuzz.txt line ") {
                let n: usize = rest
                    .split(':')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("no line number: {msg}"));
                assert!(n >= 1 && n <= lines, "line {n} of {lines}: {msg}");
            } else {
                assert_eq!(msg, "loadfile fuzz.txt has no operations");
            }
        }
    }
}

/// Exerciser replay logs: an error names the log; every operation of a log that loads lies
/// inside the `--max-len` its header declares, and operations count up from 1.
pub fn replay(data: &[u8]) {
    use fsgauge::workload::exercise::engine::Step;
    use fsgauge::workload::exercise::ops::OpKind;
    use fsgauge::workload::exercise::ReplayLog;
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ReplayLog::parse(text, Path::new("fuzz.log")) {
        Ok(log) => {
            assert!(log.steps.len() <= text.lines().count());
            // The header obeys the flags' own limits (one definition): a loaded log's lengths
            // are ones the command line would take, its estimates fit 64 bits, and it names
            // no log to read or write.
            let p = &log.params;
            p.check_settings()
                .unwrap_or_else(|e| panic!("a loaded header breaks a limit: {e:#}"));
            assert!(p.max_len >= 1 && p.max_len <= fsgauge::workload::exercise::run::MAX_FILE_LEN);
            assert!(p.max_op_len >= 1 && p.max_op_len <= p.max_len);
            assert!(p.replay.is_none() && p.log.is_none());
            {
                use fsgauge::workload::Workload;
                assert!(p.memory_needed().is_ok() && p.space_needed().is_ok());
            }
            let mut size = 0;
            for step in &log.steps {
                let Step::Op(_, op) = step else { continue };
                let why = fsgauge::workload::exercise::model::misfit_at(*op, size, p.max_len);
                assert!(
                    why.is_none(),
                    "a loaded log has an impossible step: {why:?}"
                );
                size = fsgauge::workload::exercise::model::size_after(*op, size);
                assert!(size <= p.max_len, "{op} leaves the file past --max-len");
            }
            let mut n = 0;
            for step in &log.steps {
                let Step::Op(i, op) = step else { continue };
                n += 1;
                assert_eq!(*i, n, "operation numbers count up by one");
                let end = if op.kind.has_dst() {
                    op.dst.checked_add(op.len)
                } else if op.kind == OpKind::Truncate {
                    Some(op.len)
                } else {
                    op.off.checked_add(op.len)
                };
                assert!(
                    end.is_some_and(|e| e <= log.params.max_len),
                    "{op} lies past --max-len {:#x}",
                    log.params.max_len
                );
            }
        }
        Err(e) => {
            let msg = format!("{e:#}");
            assert!(msg.starts_with("--replay fuzz.log"), "{msg}");
        }
    }
}

/// Result files: an error names the file; a result that loads writes back to the same JSON,
/// its latency histograms decode (or are refused) without a large allocation, and a report
/// can be built from it.
pub fn result(data: &[u8]) {
    use fsgauge::results::{parse_result, LatencySummary};
    let r = match parse_result(data, Path::new("fuzz.json")) {
        Ok(r) => r,
        Err(e) => {
            let msg = format!("{e:#}");
            assert!(msg.starts_with("fuzz.json "), "{msg}");
            return;
        }
    };
    let v = serde_json::to_value(&r).expect("a result serializes");
    let again = parse_result(v.to_string().as_bytes(), Path::new("again.json"))
        .unwrap_or_else(|e| panic!("a loaded result does not load again: {e:#}"));
    let v2 = serde_json::to_value(&again).expect("serializes");
    if let Some(at) = first_difference(&v, &v2, String::new()) {
        panic!("a loaded result writes back differently at {at}");
    }
    let mut hdrs = Vec::new();
    collect_hdr(&v, &mut hdrs);
    for hdr in hdrs {
        let s = LatencySummary {
            hdr,
            ..Default::default()
        };
        let _ = fsgauge::measure::decode(&s);
    }
    let _ = fsgauge::analysis::report::model::build(
        vec![r],
        None,
        &fsgauge::workload::registry::kind_tables(),
    );
}

/// Where two JSON documents first differ (a path of keys and indexes, with both values).
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, at: String) -> Option<String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let none = Value::Null;
                let (p, q) = (x.get(k).unwrap_or(&none), y.get(k).unwrap_or(&none));
                first_difference(p, q, format!("{at}.{k}"))
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, format!("{at}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{at}: {a} then {b}")),
    }
}

/// Every `"hdr"` string of a JSON document.
fn collect_hdr(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match x {
                    serde_json::Value::String(s) if k == "hdr" => out.push(s.clone()),
                    _ => collect_hdr(x, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_hdr(x, out)),
        _ => {}
    }
}

/// Aging's size distributions: a CSV file's error names the file, and every size a table draws
/// lies in one of its rows; a `--dist` spec that is not a path parses or is refused.
pub fn dist(data: &[u8]) {
    use fsgauge::workload::age::dist::SizeDist;
    use rand::SeedableRng;
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match SizeDist::from_csv(text, "fuzz.csv") {
        Ok(d) => {
            let SizeDist::Table { rows, .. } = &d else {
                panic!("a CSV file is a table: {d:?}");
            };
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(data.len() as u64);
            for _ in 0..16 {
                let n = d.sample(&mut rng);
                assert!(
                    rows.iter()
                        .any(|r| r.weight > 0.0 && r.lo <= n && n <= r.hi),
                    "{n} is in no row of positive weight: {rows:?}"
                );
                assert!(d.min() <= n && d.max().is_none_or(|m| n <= m), "{n}");
            }
        }
        Err(e) => {
            let msg = format!("{e:#}");
            assert!(msg.starts_with("fuzz.csv"), "{msg}");
        }
    }
    // A spec that names an existing file reads it: not what a fuzzer should do.
    if !text.contains(['/', '\n', '\0']) && !text.is_empty() && !Path::new(text).exists() {
        if let Ok(d) = SizeDist::parse(text) {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
            let n = d.sample(&mut rng);
            assert!(
                d.min() <= n && d.max().is_none_or(|m| n <= m),
                "{n} from {d:?}"
            );
        }
    }
}
