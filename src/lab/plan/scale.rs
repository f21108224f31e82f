//! `--scale F`: how a plan grows from the minutes-long preset to the study's original sizes.
//!
//! Which parameters scale is declared once, as data: here for every kind (a count — `files`,
//! `files_per_dir` — is multiplied and rounded, at least 1; a size — `file_size` — is
//! multiplied and rounded to whole 4 KiB blocks, at least 1 block), and by a kind in its
//! registry line where it differs (a study's tree shape that must stay, a directory count that
//! is the study's amount of work). Everything else — tree shape, block sizes, thread and client
//! counts (they are sweep axes, not amounts), modes — keeps its value. Testbeds are then grown
//! to fit what the scaled workloads need.

use crate::base::units::parse_size;

pub use crate::workload::params::ScaleClass;
use crate::workload::registry;

/// How parameters of every kind scale, unless the kind declares otherwise (its registry
/// line's `scales`): (`*`, parameter, class).
pub const FIELD_SCALES: &[(&str, &str, ScaleClass)] = &[
    ("*", "files", ScaleClass::Count),
    ("*", "files_per_dir", ScaleClass::Count),
    ("*", "file_size", ScaleClass::Size),
];

/// The class of a parameter of a workload kind: the kind's own declaration, else the
/// common one, else fixed.
pub fn scale_class(kind: &str, field: &str) -> ScaleClass {
    registry::find(kind)
        .and_then(|k| k.scales.iter().find(|(f, _)| *f == field))
        .map(|(_, c)| *c)
        .or_else(|| {
            FIELD_SCALES
                .iter()
                .find(|(_, f, _)| *f == field)
                .map(|(_, _, c)| *c)
        })
        .unwrap_or(ScaleClass::Fixed)
}

/// The parameters with `f` applied to every field that scales. Values that do not parse are
/// left as written, so the workload's own parsing reports them.
pub fn apply(kind: &str, params: &serde_json::Value, f: f64) -> serde_json::Value {
    let mut out = params.clone();
    if f == 1.0 {
        return out;
    }
    let Some(map) = out.as_object_mut() else {
        return out;
    };
    for (field, v) in map.iter_mut() {
        match scale_class(kind, field) {
            ScaleClass::Fixed => {}
            // Set below, once the tree's other fields are known.
            ScaleClass::Levels => {}
            ScaleClass::Count => {
                // 0 stays 0 (e.g. a tree of directories only).
                if let Some(n) = v.as_u64().filter(|&n| n > 0) {
                    *v = serde_json::Value::from(((n as f64 * f).round() as u64).max(1));
                }
            }
            ScaleClass::Size => {
                let bytes = match &*v {
                    serde_json::Value::Number(n) => n.as_u64(),
                    serde_json::Value::String(s) => parse_size(s).ok(),
                    _ => None,
                };
                if let Some(b) = bytes {
                    // Past 16 EiB the float-to-integer cast and the product saturate at
                    // u64::MAX; the workload's checked estimates refuse such a value.
                    let blocks = (b as f64 * f / 4096.0).round().max(1.0) as u64;
                    let scaled = blocks.saturating_mul(4096);
                    *v = serde_json::Value::from(scaled);
                }
            }
        }
    }
    scale_levels(kind, map, f);
    out
}

/// [`ScaleClass::Levels`]: a tree of directories only gets log_D(F) more (or fewer) levels.
fn scale_levels(kind: &str, map: &mut serde_json::Map<String, serde_json::Value>, f: f64) {
    if scale_class(kind, "levels") != ScaleClass::Levels
        || map.get("files_per_dir").and_then(|v| v.as_u64()) != Some(0)
    {
        return;
    }
    let (Some(levels), Some(d)) = (
        map.get("levels").and_then(|v| v.as_u64()),
        map.get("dirs_per_level").and_then(|v| v.as_u64()),
    ) else {
        return;
    };
    if d < 2 {
        return;
    }
    let scaled = (levels as f64 + f.ln() / (d as f64).ln()).round().max(1.0) as u64;
    map.insert("levels".into(), serde_json::Value::from(scaled));
}
