//! Device profiles: a drive's parameters as TOML data, each with the source it comes from, and the
//! ablations a study applies to one (`PROFILE:seek=off,rotation=off,cache=off,constant=12ms`).
//!
//! A profile file:
//! ```toml
//! name = "mydisk"
//! kind = "hdd"            # hdd, ssd or ram
//! description = "one line"
//! [parameters]
//! rpm = { value = 7200, source = "datasheet, section 2.1" }
//! ```
//! The parameters a kind takes are declared once, in [`HDD_PARAMS`] and [`SSD_PARAMS`]: name,
//! unit, allowed range, meaning. `devices show` prints them from the same table. Every error names
//! the file, line and column.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use super::ablation::{self, Part};
pub use super::ablation::{parse_ablations, Ablations};
pub use super::model::params::{HddParams, QueuePolicy};
use crate::base::error::bad_input;

/// The built-in profiles, embedded in the binary: (name, TOML text).
pub const BUILTIN: &[(&str, &str)] = &[
    ("st3500641as", include_str!("profiles/st3500641as.toml")),
    (
        "deskstar-7k250",
        include_str!("profiles/deskstar-7k250.toml"),
    ),
    ("sata-ssd", include_str!("profiles/sata-ssd.toml")),
    ("nvme-ssd", include_str!("profiles/nvme-ssd.toml")),
    ("ram", include_str!("profiles/ram.toml")),
];

/// What sort of device a profile models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A rotating disk: zones, seek, rotation, the drive's cache and queue.
    Hdd,
    /// A flash drive: per-request latency, channel parallelism, bandwidth, write cache.
    Ssd,
    /// No delay at all: measures the emulator's own cost.
    Ram,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Hdd => "hdd",
            Kind::Ssd => "ssd",
            Kind::Ram => "ram",
        })
    }
}

/// The type and range of a declared parameter.
#[derive(Debug, Clone, Copy)]
pub enum ParamType {
    /// A number in `[min, max]`.
    Number { min: f64, max: f64 },
    /// true or false.
    Bool,
    /// One of the listed words.
    Choice(&'static [&'static str]),
}

/// One parameter a kind of profile takes, declared once for parsing, checking and printing.
#[derive(Debug, Clone, Copy)]
pub struct ParamDecl {
    /// Its key in `[parameters]`.
    pub name: &'static str,
    /// Its unit as printed (`ms`, `MB/s` = 10^6 bytes per second).
    pub unit: &'static str,
    pub ty: ParamType,
    /// What it means, for `devices show` and errors.
    pub about: &'static str,
}

const fn num(
    name: &'static str,
    unit: &'static str,
    min: f64,
    max: f64,
    about: &'static str,
) -> ParamDecl {
    ParamDecl {
        name,
        unit,
        ty: ParamType::Number { min, max },
        about,
    }
}

/// The parameters of a rotating disk (`kind = "hdd"`), all required.
pub const HDD_PARAMS: &[ParamDecl] = &[
    num("capacity_bytes", "B", 1e6, 1e15, "modelled capacity (may exceed any image)"),
    num("rpm", "rpm", 1000.0, 20000.0, "spindle speed"),
    num("heads", "", 1.0, 64.0, "recording surfaces (heads)"),
    num("zones", "", 1.0, 1000.0, "recording zones, sectors per track falling outer to inner"),
    num("outer_mb_s", "MB/s", 1.0, 10000.0, "sustained media rate in the outermost zone (head and cylinder switches included)"),
    num("inner_mb_s", "MB/s", 1.0, 10000.0, "sustained media rate in the innermost zone"),
    num("track_to_track_ms", "ms", 0.01, 20.0, "read seek over one cylinder, settle included"),
    num("average_seek_ms", "ms", 0.01, 50.0, "read seek averaged over all cylinder pairs (the datasheets' weighted average)"),
    num("full_stroke_ms", "ms", 0.01, 100.0, "read seek over the whole stroke"),
    num("write_settle_ms", "ms", 0.0, 10.0, "extra settle a write seek needs over a read seek"),
    num("head_switch_ms", "ms", 0.0, 10.0, "switch to the next surface in a cylinder"),
    num("cylinder_switch_ms", "ms", 0.0, 10.0, "switch to the next cylinder during a transfer"),
    num("overhead_ms", "ms", 0.0, 10.0, "command processing per request"),
    num("link_mb_s", "MB/s", 1.0, 100000.0, "host interface rate"),
    // At most 4 GiB (drives ship with up to 512 MiB): a flush destages the whole cache, and
    // at the slowest declared rate 4 GiB takes about 5000 s, within what the server's
    // histograms hold (10^12 bytes took 10^15 ns).
    num("cache_bytes", "B", 0.0, 4294967296.0, "drive cache (read-ahead segments and write-back buffer)"),
    num("cache_segments", "", 1.0, 1024.0, "read-ahead segments the cache is divided into"),
    ParamDecl { name: "read_ahead", unit: "", ty: ParamType::Bool, about: "prefetch after a read into its segment" },
    ParamDecl { name: "write_cache", unit: "", ty: ParamType::Bool, about: "write-back cache (writes complete on arrival in the cache; FLUSH waits for the destage, FUA writes through)" },
    ParamDecl { name: "queue", unit: "", ty: ParamType::Choice(&["fifo", "clook", "sptf"]), about: "the drive's order among outstanding requests" },
    num("sptf_window", "", 1.0, 256.0, "requests SPTF looks at (the oldest ones)"),
];

/// The parameters of a flash drive (`kind = "ssd"`), all required.
pub const SSD_PARAMS: &[ParamDecl] = &[
    num("capacity_bytes", "B", 1e6, 1e15, "modelled capacity"),
    num(
        "read_latency_us",
        "us",
        0.0,
        100000.0,
        "4K read at queue depth 1, command to completion",
    ),
    num(
        "write_latency_us",
        "us",
        0.0,
        100000.0,
        "4K write at queue depth 1 (into the write cache when it is on)",
    ),
    num(
        "read_mb_s",
        "MB/s",
        1.0,
        100000.0,
        "sequential read bandwidth",
    ),
    num(
        "write_mb_s",
        "MB/s",
        1.0,
        100000.0,
        "sustained write (program) bandwidth",
    ),
    num("channels", "", 1.0, 1024.0, "requests served in parallel"),
    ParamDecl {
        name: "write_cache",
        unit: "",
        ty: ParamType::Bool,
        about: "volatile write cache (FLUSH drains it)",
    },
    num(
        "flush_ms",
        "ms",
        0.0,
        1000.0,
        "fixed cost of a FLUSH besides draining dirty data",
    ),
];

/// Parameters of a flash drive.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SsdParams {
    pub read_latency_us: f64,
    pub write_latency_us: f64,
    pub read_mb_s: f64,
    pub write_mb_s: f64,
    pub channels: u32,
    pub write_cache: bool,
    pub flush_ms: f64,
}

impl SsdParams {
    /// The parameters from their figures, `num` giving each by its name in [`SSD_PARAMS`].
    pub fn from_figures(mut num: impl FnMut(&str) -> f64, write_cache: bool) -> Self {
        SsdParams {
            read_latency_us: num("read_latency_us"),
            write_latency_us: num("write_latency_us"),
            read_mb_s: num("read_mb_s"),
            write_mb_s: num("write_mb_s"),
            channels: num("channels") as u32,
            write_cache,
            flush_ms: num("flush_ms"),
        }
    }
}

/// The model parameters of a profile, by kind.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Params {
    Hdd(HddParams),
    Ssd(SsdParams),
    Ram,
}

/// One parameter as written, with its source, for `devices show`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SourcedValue {
    pub name: String,
    /// The value as written in the file.
    pub value: String,
    pub unit: String,
    pub about: String,
    /// Where the figure comes from (a datasheet, a review, or "assumption: why").
    pub source: String,
}

/// A validated profile.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Profile {
    pub name: String,
    pub kind: Kind,
    pub description: String,
    /// Where it was read from: `built-in` or the file's path.
    pub origin: String,
    pub capacity_bytes: u64,
    pub params: Params,
    /// Every parameter with its source, in declaration order.
    pub sourced: Vec<SourcedValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    name: Spanned<String>,
    kind: Spanned<String>,
    description: Spanned<String>,
    #[serde(default)]
    parameters: BTreeMap<Spanned<String>, Spanned<RawParam>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParam {
    value: Spanned<toml::Value>,
    source: Spanned<String>,
}

/// The profile text and its name, for errors at `name:line:column`.
struct Src<'a> {
    name: &'a str,
    text: &'a str,
}

impl Src<'_> {
    fn err(&self, span: Range<usize>, msg: impl fmt::Display) -> anyhow::Error {
        let offset = span.start.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        bad_input(format!("{}:{line}:{column}: {msg}", self.name))
    }
}

/// A typed parameter value.
#[derive(Debug, Clone)]
enum Value {
    Num(f64),
    Bool(bool),
    Word(String),
}

/// Parses and validates a profile. `source` names it in errors (a path, or `built-in NAME`).
pub fn parse(text: &str, source: &str) -> Result<Profile> {
    let src = Src { name: source, text };
    let raw: RawProfile = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        src.err(span, e.message().trim().replace('\n', " "))
    })?;
    let kind = match raw.kind.get_ref().as_str() {
        "hdd" => Kind::Hdd,
        "ssd" => Kind::Ssd,
        "ram" => Kind::Ram,
        other => {
            return Err(src.err(
                raw.kind.span(),
                format!("kind: {other:?} is not a kind of device; use hdd, ssd or ram"),
            ))
        }
    };
    let name = raw.name.get_ref().trim().to_string();
    if name.is_empty() || name.contains(':') || name.contains('/') {
        return Err(src.err(
            raw.name.span(),
            "name: give the profile a name without ':' or '/' (e.g. \"mydisk\")",
        ));
    }
    let decls: &[ParamDecl] = match kind {
        Kind::Hdd => HDD_PARAMS,
        Kind::Ssd => SSD_PARAMS,
        Kind::Ram => &[],
    };
    let (values, sourced) = read_values(&src, &raw, kind, decls)?;
    let n = |k: &str| match values.get(k) {
        Some((Value::Num(x), _)) => *x,
        _ => 0.0,
    };
    let b = |k: &str| matches!(values.get(k), Some((Value::Bool(true), _)));
    let params = match kind {
        Kind::Ram => Params::Ram,
        Kind::Ssd => Params::Ssd(SsdParams::from_figures(n, b("write_cache"))),
        Kind::Hdd => Params::Hdd(hdd_params(&src, &values)?),
    };
    let capacity_bytes = match kind {
        Kind::Ram => 0,
        _ => n("capacity_bytes") as u64,
    };
    Ok(Profile {
        name,
        kind,
        description: raw.description.get_ref().trim().to_string(),
        origin: source.to_string(),
        capacity_bytes,
        params,
        sourced,
    })
}

/// A profile's parameters by name, typed, with where each value stands.
type Values = BTreeMap<&'static str, (Value, Range<usize>)>;

/// Reads `[parameters]` against the kind's declarations: every one present, known, typed and
/// sourced. Also the sourced values in declaration order, for `devices show`.
fn read_values(
    src: &Src,
    raw: &RawProfile,
    kind: Kind,
    decls: &[ParamDecl],
) -> Result<(Values, Vec<SourcedValue>)> {
    let mut values: Values = BTreeMap::new();
    let mut sourced = Vec::new();
    for (key, p) in &raw.parameters {
        let Some(decl) = decls.iter().find(|d| d.name == key.get_ref().as_str()) else {
            let allowed: Vec<&str> = decls.iter().map(|d| d.name).collect();
            return Err(src.err(
                key.span(),
                format!(
                    "{}: not a parameter of a kind = \"{kind}\" profile; {}",
                    key.get_ref(),
                    if allowed.is_empty() {
                        "a ram profile takes none".to_string()
                    } else {
                        format!("allowed: {}", allowed.join(", "))
                    }
                ),
            ));
        };
        let p = p.get_ref();
        if p.source.get_ref().trim().is_empty() {
            return Err(src.err(
                p.source.span(),
                format!(
                    "{}: source is empty; say where the figure comes from (datasheet, review, or \"assumption: why\")",
                    decl.name
                ),
            ));
        }
        let vspan = p.value.span();
        let v = typed(decl, p.value.get_ref()).map_err(|m| src.err(vspan.clone(), m))?;
        sourced.push((
            decls.iter().position(|d| d.name == decl.name).unwrap_or(0),
            SourcedValue {
                name: decl.name.to_string(),
                value: p.value.get_ref().to_string().trim_matches('"').to_string(),
                unit: decl.unit.to_string(),
                about: decl.about.to_string(),
                source: p.source.get_ref().trim().to_string(),
            },
        ));
        values.insert(decl.name, (v, vspan));
    }
    if let Some(missing) = decls.iter().find(|d| !values.contains_key(d.name)) {
        return Err(src.err(
            0..0,
            format!(
                "[parameters] lacks {} ({}, {}); add {} = {{ value = ..., source = \"...\" }}",
                missing.name, missing.about, missing.unit, missing.name
            ),
        ));
    }
    sourced.sort_by_key(|(i, _)| *i);
    Ok((values, sourced.into_iter().map(|(_, s)| s).collect()))
}

/// A rotating disk's parameters, checked against each other (and the geometry and seek curve
/// they give built), an error pointing at the figure to change.
fn hdd_params(src: &Src, values: &Values) -> Result<HddParams> {
    let n = |k: &str| match values.get(k) {
        Some((Value::Num(x), _)) => *x,
        _ => 0.0,
    };
    let b = |k: &str| matches!(values.get(k), Some((Value::Bool(true), _)));
    let span = |k: &str| values.get(k).map_or(0..0, |(_, s)| s.clone());
    let queue = match values.get("queue") {
        Some((Value::Word(w), _)) if w == "clook" => QueuePolicy::Clook,
        Some((Value::Word(w), _)) if w == "sptf" => QueuePolicy::Sptf,
        _ => QueuePolicy::Fifo,
    };
    let h = HddParams::from_figures(n, b("read_ahead"), b("write_cache"), queue);
    if h.inner_mb_s > h.outer_mb_s {
        return Err(src.err(
            span("inner_mb_s"),
            format!(
                "inner_mb_s: {} MB/s is above outer_mb_s {} MB/s; the outer zone holds more sectors per track",
                h.inner_mb_s, h.outer_mb_s
            ),
        ));
    }
    if !(h.track_to_track_ms < h.average_seek_ms && h.average_seek_ms < h.full_stroke_ms) {
        return Err(src.err(
            span("average_seek_ms"),
            "average_seek_ms must lie between track_to_track_ms and full_stroke_ms",
        ));
    }
    let capacity = n("capacity_bytes") as u64;
    // The geometry and the seek curve must be constructible: check them here, where
    // the error can point at the figures.
    super::model::hdd::Geometry::new(&h, capacity).map_err(|m| src.err(span("outer_mb_s"), m))?;
    let cyl = super::model::hdd::Geometry::new(&h, capacity)
        .map(|g| g.cylinders())
        .unwrap_or(1);
    super::model::hdd::SeekCurve::fit(&h, cyl).map_err(|m| src.err(span("average_seek_ms"), m))?;
    Ok(h)
}

fn typed(decl: &ParamDecl, v: &toml::Value) -> Result<Value, String> {
    match (decl.ty, v) {
        (ParamType::Number { min, max }, toml::Value::Integer(_) | toml::Value::Float(_)) => {
            let x = match v {
                toml::Value::Integer(i) => *i as f64,
                toml::Value::Float(f) => *f,
                _ => 0.0,
            };
            if !(x.is_finite() && x >= min && x <= max) {
                return Err(format!(
                    "{}: {x} is out of range; use {min} to {max} {} ({})",
                    decl.name, decl.unit, decl.about
                ));
            }
            Ok(Value::Num(x))
        }
        (ParamType::Bool, toml::Value::Boolean(b)) => Ok(Value::Bool(*b)),
        (ParamType::Choice(words), toml::Value::String(s)) if words.contains(&s.as_str()) => {
            Ok(Value::Word(s.clone()))
        }
        (ParamType::Number { .. }, _) => Err(format!(
            "{}: expected a number in {} ({}), found {v}",
            decl.name, decl.unit, decl.about
        )),
        (ParamType::Bool, _) => Err(format!("{}: expected true or false, found {v}", decl.name)),
        (ParamType::Choice(words), _) => Err(format!(
            "{}: expected one of {}, found {v}",
            decl.name,
            words.join(", ")
        )),
    }
}

impl Profile {
    /// The parts of the model this profile has, which ablations may switch off: a disk's seek
    /// and rotation, a cache where there is one (a disk's `cache_bytes`, an SSD's
    /// `write_cache`), and for every profile the model as a whole (`constant=`).
    pub fn parts(&self) -> Vec<Part> {
        let cache = match &self.params {
            Params::Hdd(h) => h.cache_bytes > 0,
            Params::Ssd(s) => s.write_cache,
            Params::Ram => false,
        };
        let mut parts = Vec::new();
        if self.kind == Kind::Hdd {
            parts.extend([Part::Seek, Part::Rotation]);
        }
        if cache {
            parts.push(Part::Cache);
        }
        parts.push(Part::Constant);
        parts
    }

    /// SHA-256 (hex) of what the model uses — kind, capacity and parameters, not the prose —
    /// so a result can say exactly which device it was emulated on.
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let doc = serde_json::json!({
            "kind": self.kind,
            "capacity_bytes": self.capacity_bytes,
            "params": self.params,
        });
        let digest = Sha256::digest(doc.to_string().as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The built-in profiles, parsed.
pub fn builtins() -> Result<Vec<Profile>> {
    BUILTIN
        .iter()
        .map(|(name, text)| parse(text, &format!("built-in profile {name}")))
        .collect()
}

/// A built-in profile by name, or a profile file by path.
pub fn load(name_or_path: &str) -> Result<Profile> {
    if let Some((name, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
        let mut p = parse(text, &format!("built-in profile {name}"))?;
        p.origin = "built-in".into();
        return Ok(p);
    }
    let path = Path::new(name_or_path);
    if name_or_path.contains('/') || name_or_path.ends_with(".toml") || path.exists() {
        let text = crate::base::bounded::read_text(
            path,
            crate::base::bounded::PROFILE_LIMIT,
            "device profiles",
            "device profile",
        )?;
        return parse(&text, &path.display().to_string());
    }
    let hint = if name_or_path.contains(':') {
        "; ablations after ':' are KEY=VALUE: seek=off, rotation=off, cache=off, constant=12ms"
    } else {
        ""
    };
    Err(bad_input(format!(
        "no device profile {name_or_path:?}: built-in profiles are {}; or give a profile file's path (`fsgauge devices show st3500641as --toml` prints one to start from){hint}",
        BUILTIN.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    )))
}

/// A profile reference: `NAME`, `PATH` or either followed by `:ablations`, each ablation of a
/// part the profile has.
pub fn load_ref(reference: &str) -> Result<(Profile, Ablations)> {
    #[cfg(test)]
    LOADS.with(|n| n.set(n.get() + 1));
    if let Some((head, tail)) = reference.rsplit_once(':') {
        if tail.contains('=') {
            let (a, named) = ablation::parse_named(tail)?;
            let p = load(head)?;
            ablation::check_applies(&named, &p.name, &p.kind.to_string(), &p.parts())?;
            return Ok((p, a));
        }
    }
    Ok((load(reference)?, Ablations::default()))
}

#[cfg(test)]
thread_local! {
    /// Profiles [`load_ref`] loaded on this thread, for the tests that a run loads its once.
    pub(crate) static LOADS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// A device profile as flags and plans name it: a built-in profile or a profile file, with
/// ablations after a colon (`deskstar-7k250:seek=off`). Loaded when parsed, so a bad name is
/// refused before anything is built, and never again: its copies share the loaded profile.
#[derive(Clone)]
pub struct ProfileRef(Arc<Loaded>);

/// A reference as written, and what it names.
struct Loaded {
    text: String,
    profile: Profile,
    ablations: Ablations,
}

impl ProfileRef {
    /// The profile `reference` names (see [`load_ref`]), loaded.
    pub fn new(reference: &str) -> Result<ProfileRef> {
        let text = reference.trim();
        let (profile, ablations) = load_ref(text)?;
        Ok(Self(Arc::new(Loaded {
            text: text.to_string(),
            profile,
            ablations,
        })))
    }

    /// The profile.
    pub fn profile(&self) -> &Profile {
        &self.0.profile
    }

    /// Its ablations.
    pub fn ablations(&self) -> Ablations {
        self.0.ablations
    }

    /// As written.
    pub fn as_str(&self) -> &str {
        &self.0.text
    }
}

/// As written: two references to one file are the same reference.
impl PartialEq for ProfileRef {
    fn eq(&self, other: &Self) -> bool {
        self.0.text == other.0.text
    }
}

impl Eq for ProfileRef {}

impl std::hash::Hash for ProfileRef {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.text.hash(h);
    }
}

impl fmt::Debug for ProfileRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ProfileRef").field(&self.0.text).finish()
    }
}

impl std::str::FromStr for ProfileRef {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::new(s).map_err(|e| format!("{e:#}"))
    }
}

impl fmt::Display for ProfileRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.text)
    }
}

impl serde::Serialize for ProfileRef {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.text)
    }
}

impl<'de> Deserialize<'de> for ProfileRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

crate::choice! {
    /// When an emulated disk's model applies.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum ModelDuring("device model span") {
        /// The measured run only: mkfs, aging, the fresh copy and other set-up at native speed.
        #[default]
        Phases = "phases",
        /// Everything, set-up included, as on the real disk.
        Always = "always",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse() {
        let all = builtins().expect("built-in profiles are valid");
        assert_eq!(all.len(), BUILTIN.len());
        for p in &all {
            let decls = match p.kind {
                Kind::Hdd => HDD_PARAMS.len(),
                Kind::Ssd => SSD_PARAMS.len(),
                Kind::Ram => 0,
            };
            assert_eq!(p.sourced.len(), decls, "{}", p.name);
            assert!(p.sourced.iter().all(|s| !s.source.is_empty()));
        }
    }

    #[test]
    fn errors_name_line_and_column() {
        let text = "name = \"x\"\nkind = \"ssd\"\ndescription = \"d\"\n[parameters]\nbogus = { value = 1, source = \"s\" }\n";
        let e = parse(text, "my.toml").expect_err("unknown parameter");
        let m = format!("{e:#}");
        assert!(m.starts_with("my.toml:5:1: bogus: not a parameter"), "{m}");
        assert!(m.contains("read_latency_us"), "{m}");

        let text = BUILTIN[0].1.replace("value = 7200,", "value = 0,");
        let e = parse(&text, "f.toml").expect_err("rpm 0");
        let m = format!("{e:#}");
        let line = text
            .lines()
            .position(|l| l.starts_with("rpm"))
            .expect("rpm line")
            + 1;
        assert!(m.starts_with(&format!("f.toml:{line}:")), "{m}");
        assert!(m.contains("rpm: 0 is out of range"), "{m}");

        let text = "name = \"x\"\nkind = \"tape\"\ndescription = \"d\"\n";
        let m = format!("{:#}", parse(text, "t.toml").expect_err("kind"));
        assert!(m.starts_with("t.toml:2:8: kind:"), "{m}");
    }

    #[test]
    fn references_load_the_profile_and_its_ablations() {
        let (p, a) = load_ref("st3500641as:rotation=off,cache=off").expect("ref");
        assert_eq!(p.name, "st3500641as");
        assert!(a.no_rotation && a.no_cache && !a.no_seek);
        assert!(load_ref("nosuchdisk").is_err());
        let (p, a) = load_ref("ram:constant=2ms").expect("a constant-time ram disk");
        assert_eq!((p.kind, a.constant_ns), (Kind::Ram, Some(2_000_000)));
    }

    #[test]
    fn an_ablation_of_a_part_the_profile_lacks_is_refused() {
        let m = format!(
            "{:#}",
            load_ref("ram:seek=off").expect_err("ram has no seek")
        );
        assert_eq!(
            m,
            "ablation seek=off does not apply to ram: this ram profile has no heads to seek; the ablations of ram are constant=DURATION"
        );
        let m = format!(
            "{:#}",
            load_ref("nvme-ssd:rotation=off").expect_err("no rotation")
        );
        assert!(
            m.contains("this ssd profile has no rotating platters; the ablations of nvme-ssd are cache=off, constant=DURATION"),
            "{m}"
        );
        let m = format!(
            "{:#}",
            load_ref("ram:cache=off").expect_err("ram has no cache")
        );
        assert!(m.contains("no cache to switch off"), "{m}");
        // A disk without a cache has none to switch off either.
        let text = BUILTIN[0].1.replace("value = 16777216,", "value = 0,");
        let p = parse(&text, "nocache").expect("a disk without a cache");
        assert_eq!(p.parts(), [Part::Seek, Part::Rotation, Part::Constant]);
        let (p, _) = load_ref("deskstar-7k250:seek=off,rotation=off,cache=off").expect("a disk");
        assert_eq!(p.parts(), Part::ALL);
    }

    /// A cache whose flush the histograms cannot hold is refused at its value (the model's
    /// tests, `model::limits`, show that 4 GiB at the slowest rate fits).
    #[test]
    fn a_cache_over_4_gib_is_refused_at_its_value() {
        let text = BUILTIN[0]
            .1
            .replace("value = 16777216,", "value = 1000000000000,");
        let line = text
            .lines()
            .position(|l| l.starts_with("cache_bytes"))
            .expect("cache_bytes line")
            + 1;
        let m = format!("{:#}", parse(&text, "big.toml").expect_err("1 TB of cache"));
        assert!(
            m.starts_with(&format!("big.toml:{line}:"))
                && m.contains("cache_bytes: 1000000000000 is out of range; use 0 to 4294967296 B"),
            "{m}"
        );
        let text = BUILTIN[0]
            .1
            .replace("value = 16777216,", "value = 4294967296,");
        parse(&text, "4g.toml").expect("4 GiB of cache");
    }

    #[test]
    fn the_fingerprint_follows_the_parameters_not_the_prose() {
        let a = parse(BUILTIN[0].1, "a").expect("valid");
        let b = parse(
            &BUILTIN[0].1.replace("study 5's disk", "the seed's disk"),
            "b",
        )
        .expect("valid");
        assert_eq!(a.fingerprint(), b.fingerprint());
        let c = parse(&BUILTIN[0].1.replace("value = 7200,", "value = 5400,"), "c").expect("valid");
        assert_ne!(a.fingerprint(), c.fingerprint());
        assert_eq!(a.fingerprint().len(), 64);
    }
}
