//! The judge of one crash state against a tree workload's record (pure: what the state shows
//! of each file is given to it as [`Found`]).

use std::fmt::Write as _;

use super::{Expected, Naming, Record, Sync, ALL_WORKERS};
use crate::results::crash::CrashClass;

/// What made a file durable by the cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// Its own fsync, which ended at this time.
    Fsync(u64),
    /// A syncfs that started after the file was whole.
    Syncfs(Sync),
}

impl Point {
    /// When the promise held (the fsync's or the syncfs's end).
    pub fn at(self) -> u64 {
        match self {
            Point::Fsync(t) => t,
            Point::Syncfs(s) => s.end,
        }
    }

    fn words(self) -> String {
        match self {
            Point::Fsync(t) => format!("its fsync, ended at {t} ns"),
            Point::Syncfs(s) => format!("{}, ended at {} ns", sync_words(s), s.end),
        }
    }
}

fn sync_words(s: Sync) -> String {
    let by = if s.worker == ALL_WORKERS {
        "a syncfs phase".to_string()
    } else {
        format!("the syncfs of worker {}", s.worker)
    };
    format!("{by} started at {} ns", s.start)
}

/// What the state must show of one file at the cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// There, whole, as `point` made it.
    Present { slot: u64, point: Point },
    /// Gone: its removal started at `removed` and the syncfs `by` made it durable.
    Gone { slot: u64, removed: u64, by: Sync },
}

/// What the state shows of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// No such file; `dir_missing` names its directory when that is gone too.
    Absent { dir_missing: Option<String> },
    /// The file: its size, the first offset (below both sizes) where its bytes are not the
    /// expected ones, and the BLAKE3 of the bytes read (`read` of them: all, unless it is far
    /// longer than expected).
    File {
        size: u64,
        first_diff: Option<u64>,
        read: u64,
        digest: blake3::Hash,
    },
}

/// What the judge found in one state.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Judged {
    /// Each file found wrong: its class and words.
    pub failures: Vec<(CrashClass, String)>,
    /// Durable files and durable removals checked.
    pub files: u64,
    pub removals: u64,
}

/// The files and removals `rec` made durable by the cut at `cut_ns`, in slot order.
pub fn due(rec: &Record, cut_ns: u64) -> Vec<Due> {
    let mut done: Vec<Sync> = rec
        .syncs
        .iter()
        .copied()
        .filter(|s| s.end <= cut_ns)
        .collect();
    done.sort_by_key(|s| s.end);
    let mut out = Vec::new();
    for (slot, &made) in rec.made.iter().enumerate() {
        let slot = slot as u64;
        let gone = rec.gone.get(slot as usize).copied().unwrap_or(0);
        if gone != 0 && gone <= cut_ns {
            // Removed before the syncfs started (same worker, whose operations come one after
            // another, or a phase after everyone's): it must be gone.
            let worker = rec.worker(slot);
            let covered = done
                .iter()
                .find(|s| s.start >= gone && (s.worker == ALL_WORKERS || s.worker == worker));
            if let Some(&by) = covered {
                out.push(Due::Gone {
                    slot,
                    removed: gone,
                    by,
                });
            }
            continue;
        }
        if made == 0 {
            continue;
        }
        let fsync = (rec.fsynced && made <= cut_ns).then_some(Point::Fsync(made));
        let sync = done
            .iter()
            .find(|s| s.start >= made)
            .map(|&s| Point::Syncfs(s));
        let point = match (fsync, sync) {
            (Some(a), Some(b)) => Some(if a.at() <= b.at() { a } else { b }),
            (a, b) => a.or(b),
        };
        if let Some(point) = point {
            out.push(Due::Present { slot, point });
        }
    }
    out
}

/// Judges the state at the cut `cut_ns`: `look(due)` says what the state shows of the file of
/// one due entry. A file found wrong is `lost-durable` (its data or name made durable is not
/// there); a file whose durable removal is undone is `lost-durable` too (the syncfs promised
/// the directory without it, and the state is older than that promise: no byte is foreign).
/// At most `shown` files are named; one more line counts the rest.
pub fn judge(
    rec: &Record,
    cut_ns: u64,
    expected: &Expected,
    naming: &dyn Naming,
    shown: usize,
    mut look: impl FnMut(&Due) -> anyhow::Result<Found>,
) -> anyhow::Result<Judged> {
    let mut j = Judged::default();
    let mut wrong = 0u64;
    for d in due(rec, cut_ns) {
        let found = look(&d)?;
        let text = match d {
            Due::Present { slot, point } => {
                j.files += 1;
                present_wrong(expected, &found).map(|what| {
                    let since = since(rec, point.at(), cut_ns);
                    format!(
                        "{}: {what}; durable since {} ({} ns before the cut); {since}",
                        naming.path(slot),
                        point.words(),
                        cut_ns - point.at()
                    )
                })
            }
            Due::Gone { slot, removed, by } => {
                j.removals += 1;
                matches!(found, Found::File { .. }).then(|| {
                    format!(
                        "{}: present, but its removal (unlink started at {removed} ns) was made durable by {}, ended at {} ns, {} ns before the cut: a durable removal lost",
                        naming.path(slot),
                        sync_words(by),
                        by.end,
                        cut_ns - by.end
                    )
                })
            }
        };
        if let Some(t) = text {
            wrong += 1;
            if j.failures.len() < shown {
                j.failures.push((CrashClass::LostDurable, t));
            }
        }
    }
    if wrong > j.failures.len() as u64 {
        j.failures.push((
            CrashClass::LostDurable,
            format!(
                "{} more durable files or removals are wrong in this state (the first {} are named)",
                wrong - j.failures.len() as u64,
                j.failures.len()
            ),
        ));
    }
    Ok(j)
}

/// What is wrong with a durable file as found, if anything.
fn present_wrong(e: &Expected, f: &Found) -> Option<String> {
    let want = format!("expected {} bytes (BLAKE3 {})", e.size, short(&e.digest));
    match f {
        Found::Absent { dir_missing: None } => Some(format!("missing; {want}")),
        Found::Absent {
            dir_missing: Some(d),
        } => Some(format!("missing, and its directory {d} too; {want}")),
        Found::File {
            size,
            first_diff,
            read,
            digest,
        } => {
            if *size == e.size && first_diff.is_none() {
                return None;
            }
            let mut s = match size.cmp(&e.size) {
                std::cmp::Ordering::Less => format!("short: {size} bytes"),
                std::cmp::Ordering::Greater => format!("long: {size} bytes"),
                std::cmp::Ordering::Equal => "wrong bytes".to_string(),
            };
            if let Some(off) = first_diff {
                let _ = write!(s, ", the first wrong byte at offset {off:#x} ({off})");
            }
            let of = if read < size {
                format!(" of its first {read} bytes")
            } else {
                String::new()
            };
            Some(format!(
                "{s}; {want}, found {size} bytes (BLAKE3{of} {})",
                short(digest)
            ))
        }
    }
}

/// The operations after a durable point, before the cut: files made whole and removals
/// started (by any worker), and syncfs calls started.
fn since(rec: &Record, from: u64, cut_ns: u64) -> String {
    let within = |t: &&u64| **t > from && **t <= cut_ns;
    let made = rec.made.iter().filter(within).count();
    let gone = rec.gone.iter().filter(within).count();
    let syncs = rec
        .syncs
        .iter()
        .filter(|s| s.start > from && s.start <= cut_ns)
        .count();
    format!(
        "since then, before the cut: {made} files made, {gone} removals and {syncs} syncfs started"
    )
}

/// The first 16 hex digits of a digest (enough to tell two apart in a message).
fn short(h: &blake3::Hash) -> String {
    h.to_hex()[..16].to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
