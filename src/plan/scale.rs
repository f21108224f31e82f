//! `--scale F`: how a plan grows from the minutes-long preset to the study's original sizes.
//!
//! Which parameters scale is declared once, here, as data: a count (`files`, `files_per_dir`,
//! `dirs` of the interleave study) is multiplied and rounded (at least 1); a size
//! (`file_size`) is multiplied and rounded to whole 4 KiB blocks (at least 1 block); everything
//! else — tree shape, block sizes, thread and client counts (they are sweep axes, not amounts),
//! modes — keeps its value. Testbeds are then grown to fit what the scaled workloads need.

use crate::units::parse_size;

/// How one parameter reacts to `--scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleClass {
    /// Multiplied and rounded to a whole number, at least 1.
    Count,
    /// Multiplied and rounded to whole 4 KiB blocks, at least 4 KiB.
    Size,
    /// Kept as written.
    Fixed,
}

/// The declaration: (workload kind or `*` for every kind, parameter, class). The first match
/// wins, so kind-specific lines come before the `*` lines.
pub const FIELD_SCALES: &[(&str, &str, ScaleClass)] = &[
    // The inode-interleave study's 9890 directories are its amount of work.
    ("interleave", "dirs", ScaleClass::Count),
    ("interleave", "files", ScaleClass::Fixed),
    // The low-memory study's trees keep their shape (14 directories × 10 or 1000 files) and
    // grow by file size: 8M files at scale 12.5 are the study's 100M.
    ("tree", "files", ScaleClass::Fixed),
    ("*", "files", ScaleClass::Count),
    ("*", "files_per_dir", ScaleClass::Count),
    ("*", "file_size", ScaleClass::Size),
];

/// The class of a parameter of a workload kind.
pub fn scale_class(kind: &str, field: &str) -> ScaleClass {
    FIELD_SCALES
        .iter()
        .find(|(k, f, _)| (*k == kind || *k == "*") && *f == field)
        .map_or(ScaleClass::Fixed, |(_, _, c)| *c)
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
            ScaleClass::Count => {
                if let Some(n) = v.as_u64() {
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
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_fields_scale_and_others_stay() {
        let p = serde_json::json!({"dirs": 14, "files": 10, "file_size": "4M", "block": "1M"});
        let s = apply("fdtree", &p, 2.5);
        assert_eq!(s["files"], 25);
        assert_eq!(apply("tree", &p, 2.5)["files"], 10);
        assert_eq!(s["file_size"], 10 << 20);
        assert_eq!(s["dirs"], 14);
        assert_eq!(s["block"], "1M");
        let i = apply(
            "interleave",
            &serde_json::json!({"dirs": 100, "files": 14}),
            0.5,
        );
        assert_eq!(
            (i["dirs"].as_u64(), i["files"].as_u64()),
            (Some(50), Some(14))
        );
        let tiny = apply(
            "fdtree",
            &serde_json::json!({"files": 1, "file_size": 4096}),
            0.01,
        );
        assert_eq!(
            (tiny["files"].as_u64(), tiny["file_size"].as_u64()),
            (Some(1), Some(4096))
        );
    }
}
