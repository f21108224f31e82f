//! Replay logs: every step of one exerciser as a line of text (`17 write 0x1000 0x200`,
//! `remount after 5000`), after a header with the seed (which fixes the data every write puts
//! down) and the parameters. `fsgauge exercise --replay LOG` runs exactly those steps again,
//! with the same data, remounts where the run remounted, and the same checks, so a failure
//! can be reproduced, shrunk by hand (delete lines) and shown to a filesystem developer.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};

use super::engine::{Config, Exerciser, Step};
use super::model::{misfit_at, size_after};
use super::ops::OpKind;
use super::spec::Exercise;
use crate::base::error::bad_input;
use crate::results::TestbedInfo;
use crate::workload::{ColdMode, RunContext, Target};

/// First line of every replay log.
pub const MAGIC: &str = "# fsgauge exercise replay log v1";

/// A loaded replay log.
#[derive(Debug, Clone)]
pub struct ReplayLog {
    pub path: PathBuf,
    /// The exerciser's seed (data of every write).
    pub seed: u64,
    /// Parameters of the recorded run.
    pub params: Exercise,
    /// Where it ran (filesystem, size, mount options), for replaying on the same kind.
    pub testbed: TestbedInfo,
    /// The line of the `# testbed` header (0: none), for messages about what it says.
    pub testbed_line: usize,
    pub steps: Vec<Step>,
    /// The log's `#` lines as they were, each with its newline (what a minimized log keeps).
    pub header_lines: String,
}

impl ReplayLog {
    /// The header for exerciser `w` of a run.
    pub fn header(
        wl: &Exercise,
        cfg: &Config,
        w: u32,
        file: &Path,
        testbed: &TestbedInfo,
    ) -> String {
        let mut params = wl.clone();
        params.log = None;
        params.replay = None;
        params.inject.clear();
        format!(
            "{MAGIC}\n# seed {}\n# worker {w}\n# file {}\n# params {}\n# testbed {}\n",
            cfg.seed,
            file.display(),
            serde_json::to_string(&params).expect("plain struct serializes"),
            serde_json::to_string(testbed).expect("plain struct serializes"),
        )
    }

    /// Reads and checks a log; errors name the line.
    pub fn load(path: &Path) -> Result<Self> {
        let text = crate::base::bounded::read_text(
            path,
            crate::base::bounded::REPLAY_LIMIT,
            "replay logs",
            "--replay",
        )?;
        Self::parse(&text, path)
    }

    /// Checks the text of a log read from `path` (which names it in errors); errors name the
    /// line.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let bad = |line: usize, why: String| {
            bad_input(format!("--replay {} line {line}: {why}", path.display()))
        };
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, l)) if l.trim() == MAGIC => {}
            _ => {
                return Err(bad_input(format!(
                    "--replay {} is not an fsgauge exercise replay log (it must start with {MAGIC:?}); logs are written by fsgauge exercise --log DIR",
                    path.display()
                )))
            }
        }
        let (mut seed, mut params, mut testbed) = (None, None, TestbedInfo::default());
        let mut testbed_line = 0;
        let mut steps = Vec::new();
        let mut header_lines = format!("{MAGIC}\n");
        let mut expect_n = 0u64;
        // The file's size as the steps so far leave it (remounts keep it).
        let mut size = 0u64;
        for (i, line) in lines {
            let ln = i + 1;
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if line.starts_with('#') {
                header_lines.push_str(line);
                header_lines.push('\n');
            }
            if let Some(h) = line.strip_prefix("# ") {
                let (key, val) = h.split_once(' ').unwrap_or((h, ""));
                match key {
                    "seed" => {
                        seed = Some(
                            val.parse::<u64>()
                                .map_err(|e| bad(ln, format!("seed: {e}")))?,
                        )
                    }
                    "params" => params = Some(header_params(val).map_err(|e| bad(ln, e))?),
                    "testbed" => {
                        testbed = serde_json::from_str(val)
                            .map_err(|e| bad(ln, format!("testbed: {e}")))?;
                        testbed_line = ln;
                    }
                    _ => {}
                }
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let step: Step = line.parse().map_err(|e: String| bad(ln, e))?;
            if let Step::Op(n, op) = step {
                if n != expect_n + 1 {
                    return Err(bad(
                        ln,
                        format!("operation number {n} follows {expect_n}; numbers must count up by one (renumber after deleting lines)"),
                    ));
                }
                expect_n = n;
                let p = params
                    .as_ref()
                    .ok_or_else(|| bad(ln, "operations before the params header".into()))?;
                size = step_fits(op, p.max_len, size).map_err(|why| bad(ln, why))?;
            }
            steps.push(step);
        }
        let seed = seed.ok_or_else(|| bad(1, "no `# seed` header".into()))?;
        let params = params.ok_or_else(|| bad(1, "no `# params` header".into()))?;
        Ok(Self {
            path: path.to_path_buf(),
            seed,
            params,
            testbed,
            testbed_line,
            steps,
            header_lines,
        })
    }
}

/// Checks one operation of a log against the header's `--max-len` and the file the steps
/// before it leave (`size` bytes); the size after it, or why it cannot be.
fn step_fits(op: super::ops::Op, max_len: u64, size: u64) -> Result<u64, String> {
    // An end past 2^64 is past any --max-len (and must not wrap below it).
    let end = if op.kind.has_dst() {
        op.dst.checked_add(op.len)
    } else if op.kind == OpKind::Truncate {
        Some(op.len)
    } else {
        op.off.checked_add(op.len)
    };
    if end.is_none_or(|e| e > max_len) || op.len > max_len {
        return Err(format!("{op} reaches past --max-len {max_len:#x}"));
    }
    // An operation that does not fit the file (a read past EOF, a copy onto itself) is the
    // log's fault.
    if let Some(why) = misfit_at(op, size, max_len) {
        return Err(format!(
            "{why}; the log asks for what no file can do (was it cut or edited by hand?)"
        ));
    }
    Ok(size_after(op, size))
}

/// The `# params` header: the parameters of the recorded run, under the limits the flags
/// and a plan's fields have ([`Exercise::check_settings`], one definition of each); a header
/// names no log to read or write. The error names the field.
fn header_params(val: &str) -> Result<Exercise, String> {
    let p = serde_json::from_str::<Exercise>(val).map_err(|e| format!("params: {e}"))?;
    let named = |field: &str| format!("params field {field:?}");
    if p.replay.is_some() || p.log.is_some() {
        let field = if p.replay.is_some() { "replay" } else { "log" };
        return Err(format!(
            "{}: a log's header names no log to read or write; remove it",
            named(field)
        ));
    }
    p.check_settings().map_err(|e| {
        let what = crate::base::error::bad_fields(&e)
            .first()
            .map_or_else(|| "params".to_string(), |f| named(f));
        format!("{what}: {e:#}")
    })?;
    Ok(p)
}

/// Runs a log's steps on a fresh file at the workload's place.
pub fn run_replay(wl: &Exercise, log: &ReplayLog, ctx: &mut RunContext) -> Result<()> {
    let path = wl.file_path(ctx.root(), 0);
    let cfg = Config {
        max_len: log.params.max_len,
        max_op_len: log.params.max_op_len,
        direct: log.params.direct,
        pollute_eof: log.params.pollute_eof,
        kinds: OpKind::ALL.map(|k| (k, 1)).to_vec(),
        seed: log.seed,
        record: wl.durable.as_ref().map(|_| log.steps.len()),
    };
    let out_log = match &wl.log {
        Some(dir) => {
            let mut f = crate::base::atomic::OutDir::make(dir)
                .with_context(|| format!("--log {}", dir.display()))?
                .create_stream("exercise-0.log")?;
            std::io::Write::write_all(
                &mut f,
                ReplayLog::header(&log.params, &cfg, 0, &path, &ctx.target().info()).as_bytes(),
            )?;
            Some(f)
        }
        None => None,
    };
    let mut ex = Exerciser::create(&path, cfg, out_log)?;
    ctx.progress().note(&format!(
        "replaying {} steps from {}",
        log.steps.len(),
        log.path.display()
    ));
    let meter = super::spec::start_meter(ctx);
    let mut rec = meter.recorder(0);
    let is_testbed = matches!(ctx.target(), Target::Testbed(_));
    let mut t = Instant::now();
    for step in &log.steps {
        crate::base::signals::check()?;
        let outcome = match *step {
            Step::Op(_, op) => {
                let r = ex.apply(op);
                if r.is_ok() {
                    t = rec.record(rec.op(op.kind.name()), t, op.len);
                }
                r
            }
            Step::Remount(_) | Step::Reopen(_) => {
                ex.close()?;
                let t0 = Instant::now();
                let again = if is_testbed {
                    ctx.make_cold_with(ColdMode::Remount)?;
                    rec.record(rec.op("remount"), t0, 0);
                    Step::Remount(ex.ops_done())
                } else {
                    // Nothing to remount in a directory: drop caches where allowed.
                    let _ = crate::testbed::drop_caches();
                    Step::Reopen(ex.ops_done())
                };
                ex.reopen(again)?;
                let tv = Instant::now();
                let r = ex.verify_all();
                rec.record(rec.op("verify"), tv, ex.model().size());
                t = Instant::now();
                r
            }
            Step::Corrupt(_, off) => {
                ex.corrupt(off)?;
                Ok(())
            }
        };
        if let Err(f) = outcome {
            ex.flush_log()?;
            if let (Some(sink), Some(r)) = (&wl.durable, ex.take_record()) {
                sink.put(0, r);
            }
            return Err(super::spec::report_failure(
                &f,
                0,
                &ex,
                wl.log.as_deref(),
                1,
            ));
        }
    }
    ex.close()?;
    if let (Some(sink), Some(r)) = (&wl.durable, ex.take_record()) {
        sink.put(0, r);
    }
    rec.finish();
    let mut phase = meter.finish(vec![rec]);
    phase
        .extra
        .insert("replayed_steps".into(), log.steps.len() as f64);
    ctx.push_checked(phase)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "# fsgauge exercise replay log v1\n# seed 7\n# params {\"max_len\":65536}\n";

    fn parse(steps: &str) -> Result<ReplayLog> {
        ReplayLog::parse(&format!("{HEAD}{steps}"), Path::new("x.log"))
    }

    #[test]
    fn a_log_loads_with_its_steps() {
        let log = parse("1 write 0x0 0x1000\n2 copy 0x0 0x1000 0x2000\nremount after 2\n")
            .expect("loads");
        assert_eq!(log.seed, 7);
        assert_eq!(log.params.max_len, 65536);
        assert_eq!(log.steps.len(), 3);
        assert_eq!(log.steps[2], Step::Remount(2));
    }

    fn with_params(params: &str, steps: &str) -> String {
        let log = format!("# fsgauge exercise replay log v1\n# seed 7\n# params {params}\n{steps}");
        format!(
            "{:#}",
            ReplayLog::parse(&log, Path::new("x.log")).expect_err("refused")
        )
    }

    #[test]
    fn a_header_obeys_the_flags_limits_and_names_its_line_and_field() {
        // Before: loaded as written, then overflowed the heap (u64::MAX), panicked in the
        // model, or aborted after building the testbed (2^62).
        let max = u64::MAX;
        for (params, field, needle) in [
            (
                format!(r#"{{"max_len":{max},"max_op_len":{max}}}"#),
                "max_len",
                "is over 16",
            ),
            (
                r#"{"max_len":4611686018427387904}"#.to_string(),
                "max_len",
                "is over 16",
            ),
            (r#"{"max_len":0}"#.to_string(), "max_len", "at least 1 byte"),
            (
                r#"{"max_op_len":1048576}"#.to_string(),
                "max_op_len",
                "is larger than --max-len",
            ),
            (r#"{"procs":0}"#.to_string(), "procs", "1 or more"),
            (r#"{"ops":0}"#.to_string(), "ops", "1 or more"),
            (r#"{"file":""}"#.to_string(), "file", "not a file name"),
            (
                r#"{"replay":"/etc/shadow"}"#.to_string(),
                "replay",
                "names no log",
            ),
            (r#"{"log":"/proc/self"}"#.to_string(), "log", "names no log"),
        ] {
            let e = with_params(&params, "1 write 0x0 0x10\n");
            assert!(
                e.starts_with(&format!(
                    "--replay x.log line 3: params field \"{field}\": "
                )),
                "{params}: {e}"
            );
            assert!(e.contains(needle), "{params}: {e}");
        }
        for params in [
            r#"{"max_len":-1}"#,
            r#"{"max_len":18446744073709551616}"#,
            r#"{"procs":4294967296}"#,
        ] {
            let e = with_params(params, "1 write 0x0 0x10\n");
            assert!(
                e.starts_with("--replay x.log line 3: params: "),
                "{params}: {e}"
            );
        }
    }

    #[test]
    fn an_operation_the_file_cannot_take_is_refused_on_its_line() {
        // An overlapping self-copy, and a read past what the steps before it wrote.
        for (steps, needle) in [
            (
                "1 write 0x0 0x2000\n2 copy 0x0 0x1000 0x800\n",
                "source and destination overlap",
            ),
            (
                "1 write 0x0 0x100\nremount after 1\n2 read 0x0 0x200\n",
                "reads past the end",
            ),
        ] {
            let e = format!("{:#}", parse(steps).expect_err("refused"));
            let line = 3 + steps.lines().count();
            assert!(
                e.starts_with(&format!("--replay x.log line {line}: ")),
                "{e}"
            );
            assert!(e.contains(needle), "{e}");
        }
        parse("1 write 0x0 0x2000\n2 copy 0x0 0x1000 0x1000\n").expect("ranges apart fit");
    }

    #[test]
    fn an_operation_ending_past_two_to_the_64_is_past_max_len() {
        // off + len overflowed: a panic with overflow checks; without them the end wrapped
        // below --max-len and the log loaded (the `replay` fuzz target's check says so).
        for (step, op) in [
            (
                "1 write 0xffffffffffffffff 0x2",
                "write 0xffffffffffffffff 0x2",
            ),
            (
                "1 copy 0x0 0x2 0xffffffffffffffff",
                "copy 0x0 0x2 0xffffffffffffffff",
            ),
        ] {
            let e = format!("{:#}", parse(step).expect_err("refused"));
            assert_eq!(
                e,
                format!("--replay x.log line 4: {op} reaches past --max-len 0x10000"),
                "{step}"
            );
        }
    }
}
