//! Ablations: parts of the model a study switches off to see which part of the disk carries an
//! effect (`PROFILE:seek=off,rotation=off,cache=off` or `PROFILE:constant=12ms`).
//!
//! Each is given at most once, `constant=` replaces the whole model (so nothing else goes with
//! it) and is bounded by [`MAX_CONSTANT`], and an ablation must name a part the profile has
//! ([`check_applies`]): `ram` has no seek to switch off. What the user wrote is refused with
//! the item, what is allowed and an example, never reinterpreted.

use std::fmt;
use std::time::Duration;

use anyhow::Result;

use crate::base::error::bad_input;

/// The longest `constant=` a request may take: every request of the emulated disk waits this
/// long, one at a time, and the model's clock (nanoseconds in 64 bits) must never come near
/// its end. Ten seconds is far slower than any disk (a 2005 drive's worst case is ~30 ms).
pub const MAX_CONSTANT: Duration = Duration::from_secs(10);

/// The ablations as the user writes them, for messages.
const SYNTAX: &str = "seek=off, rotation=off, cache=off, constant=DURATION (e.g. constant=12ms)";

/// A part of the model an ablation names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The heads' movement (seek and head switch): `seek=off`.
    Seek,
    /// The platters' rotation: `rotation=off`.
    Rotation,
    /// The drive's cache (read-ahead, write-back): `cache=off`.
    Cache,
    /// The whole model, replaced by one fixed time per request: `constant=DURATION`.
    Constant,
}

impl Part {
    /// Every part, in the order they are printed.
    pub const ALL: [Part; 4] = [Part::Seek, Part::Rotation, Part::Cache, Part::Constant];

    /// The key written before `=`.
    pub fn key(self) -> &'static str {
        match self {
            Part::Seek => "seek",
            Part::Rotation => "rotation",
            Part::Cache => "cache",
            Part::Constant => "constant",
        }
    }

    /// How it is written to switch the part off (or replace it).
    pub fn example(self) -> &'static str {
        match self {
            Part::Seek => "seek=off",
            Part::Rotation => "rotation=off",
            Part::Cache => "cache=off",
            Part::Constant => "constant=DURATION",
        }
    }

    /// What a profile lacks when the ablation does not apply to it.
    fn what(self) -> &'static str {
        match self {
            Part::Seek => "heads to seek",
            Part::Rotation => "rotating platters",
            Part::Cache => "cache to switch off",
            Part::Constant => "model to replace",
        }
    }

    fn from_key(key: &str) -> Option<Part> {
        Part::ALL.into_iter().find(|p| p.key() == key)
    }
}

/// Parts of the model a study switches off to see which part of the disk carries an effect.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Ablations {
    /// `seek=off`: positioning costs no seek (nor head switch) time.
    pub no_seek: bool,
    /// `rotation=off`: no rotational latency; transfers still take media time.
    pub no_rotation: bool,
    /// `cache=off`: no read-ahead, writes go through to the media.
    pub no_cache: bool,
    /// `constant=12ms`: every request takes exactly this long, one at a time (nanoseconds,
    /// above 0 and at most [`MAX_CONSTANT`]).
    pub constant_ns: Option<u64>,
}

impl Ablations {
    /// Whether nothing is switched off.
    pub fn is_none(&self) -> bool {
        *self == Ablations::default()
    }
}

impl fmt::Display for Ablations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.no_seek {
            parts.push("seek=off".to_string());
        }
        if self.no_rotation {
            parts.push("rotation=off".to_string());
        }
        if self.no_cache {
            parts.push("cache=off".to_string());
        }
        if let Some(ns) = self.constant_ns {
            // Exact, in the syntax the parser reads (`12ms`, `12ms345us`): the ablations a
            // result records can be given again as they are written (the `ablations` fuzz
            // target found `constant=12345us` printed as `12.35ms`, another disk).
            let d = humantime::format_duration(std::time::Duration::from_nanos(ns));
            parts.push(format!("constant={}", d.to_string().replace(' ', "")));
        }
        f.write_str(&parts.join(","))
    }
}

/// Parses the ablation list after a profile's name: `seek=off,constant=12ms`.
pub fn parse_ablations(text: &str) -> Result<Ablations> {
    parse_named(text).map(|(a, _)| a)
}

/// [`parse_ablations`], with the parts the text names (each once) and how each is written,
/// for [`check_applies`].
pub fn parse_named(text: &str) -> Result<(Ablations, Vec<(Part, String)>)> {
    let mut a = Ablations::default();
    let mut named: Vec<(Part, &str)> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((key, val)) = item.split_once('=') else {
            return Err(bad_input(format!(
                "ablation {item:?} has no value; write KEY=VALUE: {SYNTAX}"
            )));
        };
        let (key, val) = (key.trim(), val.trim());
        let Some(part) = Part::from_key(key) else {
            return Err(bad_input(format!(
                "unknown ablation {key:?} in {text:?}; allowed: {SYNTAX}"
            )));
        };
        if let Some((_, first)) = named.iter().find(|(p, _)| *p == part) {
            return Err(bad_input(format!(
                "ablation {key} is given twice in {text:?} ({first} and {item}); give each ablation once, e.g. {}",
                part.example()
            )));
        }
        named.push((part, item));
        match part {
            Part::Seek => a.no_seek = off(key, val)?,
            Part::Rotation => a.no_rotation = off(key, val)?,
            Part::Cache => a.no_cache = off(key, val)?,
            Part::Constant => a.constant_ns = Some(constant(val)?),
        }
    }
    if let (Some(ns), Some((_, other))) = (
        a.constant_ns,
        named.iter().find(|(p, _)| *p != Part::Constant),
    ) {
        return Err(bad_input(format!(
            "ablation {other} changes nothing with constant={} in {text:?}: constant= replaces the whole model (every request takes exactly that long); give constant= alone, or leave it out",
            crate::base::text::format_ns(ns)
        )));
    }
    Ok((
        a,
        named
            .into_iter()
            .map(|(p, item)| (p, item.to_string()))
            .collect(),
    ))
}

/// `KEY=off` (true: switched off) or `KEY=on` (the default).
fn off(key: &str, val: &str) -> Result<bool> {
    match val {
        "off" => Ok(true),
        "on" => Ok(false),
        v => Err(bad_input(format!(
            "ablation {key}={v}: use {key}=off (or {key}=on, the default)"
        ))),
    }
}

/// `constant=DURATION`, above 0 and at most [`MAX_CONSTANT`], in nanoseconds.
fn constant(val: &str) -> Result<u64> {
    let d = crate::base::units::parse_duration(val).map_err(|e| {
        bad_input(format!(
            "ablation constant={val}: {e}; give a duration such as 12ms or 500us"
        ))
    })?;
    if d.is_zero() || d > MAX_CONSTANT {
        return Err(bad_input(format!(
            "ablation constant={val} is out of range: every request would take {}; give a duration above 0 and at most {}s, e.g. constant=12ms",
            humantime::format_duration(d),
            MAX_CONSTANT.as_secs()
        )));
    }
    Ok(u64::try_from(d.as_nanos()).expect("at most MAX_CONSTANT, far below 2^64 ns"))
}

/// Refuses an ablation (as [`parse_named`] gives them) that names a part `profile` (of `kind`)
/// does not have: `has` lists the parts it has.
pub fn check_applies(
    named: &[(Part, String)],
    profile: &str,
    kind: &str,
    has: &[Part],
) -> Result<()> {
    let Some((missing, item)) = named.iter().find(|(p, _)| !has.contains(p)) else {
        return Ok(());
    };
    Err(bad_input(format!(
        "ablation {item} does not apply to {profile}: this {kind} profile has no {}; the ablations of {profile} are {}",
        missing.what(),
        has.iter()
            .map(|p| p.example())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> String {
        format!(
            "{:#}",
            parse_ablations(text).expect_err(&format!("{text} refused"))
        )
    }

    #[test]
    fn ablations_print_as_they_parse() {
        for (text, printed) in [
            ("constant=12ms", "constant=12ms"),
            ("constant=12345us", "constant=12ms345us"),
            ("constant=1.5s", "constant=1s500ms"),
            ("constant=7ns", "constant=7ns"),
            ("cache=off, seek=off", "seek=off,cache=off"),
        ] {
            let a = parse_ablations(text).expect("valid");
            assert_eq!(a.to_string(), printed, "{text}");
            assert_eq!(parse_ablations(printed).expect("reads back"), a, "{text}");
        }
    }

    #[test]
    fn ablations_parse_and_refuse_unknown_keys() {
        let a = parse_ablations("seek=off,rotation=off").expect("valid");
        assert!(a.no_seek && a.no_rotation && !a.no_cache);
        assert_eq!(
            parse_ablations("constant=12ms").expect("valid").constant_ns,
            Some(12_000_000)
        );
        let m = refused("spin=off");
        assert!(m.contains("unknown ablation \"spin\""), "{m}");
        assert!(parse_ablations("seek=maybe").is_err());
    }

    #[test]
    fn constant_is_bounded_to_ten_seconds_naming_the_value() {
        assert_eq!(
            parse_ablations("constant=10s")
                .expect("the maximum")
                .constant_ns,
            Some(10_000_000_000)
        );
        for (text, needle) in [
            ("constant=99999999h", "constant=99999999h is out of range"),
            ("constant=10.001s", "every request would take 10s 1ms"),
            ("constant=0", "constant=0 is out of range"),
            (
                "constant=1e30",
                "constant=1e30: duration \"1e30\" is not valid",
            ),
        ] {
            let m = refused(text);
            assert!(m.contains(needle), "{text}: {m}");
            if !text.ends_with("1e30") {
                assert!(
                    m.contains("above 0 and at most 10s, e.g. constant=12ms"),
                    "{text}: {m}"
                );
            }
        }
    }

    #[test]
    fn an_ablation_given_twice_is_refused() {
        let m = refused("seek=off,seek=on");
        assert!(
            m.contains(
                "ablation seek is given twice in \"seek=off,seek=on\" (seek=off and seek=on)"
            ),
            "{m}"
        );
        let m = refused("cache=off, rotation=off, cache=off");
        assert!(m.contains("ablation cache is given twice"), "{m}");
        let m = refused("constant=12ms,constant=5ms");
        assert!(m.contains("ablation constant is given twice"), "{m}");
    }

    #[test]
    fn constant_goes_alone() {
        let m = refused("seek=off,constant=12ms");
        assert!(
            m.contains("ablation seek=off changes nothing with constant=12.00ms"),
            "{m}"
        );
        assert!(m.contains("give constant= alone"), "{m}");
    }

    #[test]
    fn an_ablation_of_a_part_the_profile_lacks_is_refused() {
        let (_, named) = parse_named("seek=off").expect("valid");
        let m = format!(
            "{:#}",
            check_applies(&named, "ram", "ram", &[Part::Constant]).expect_err("ram has no seek")
        );
        assert_eq!(
            m,
            "ablation seek=off does not apply to ram: this ram profile has no heads to seek; the ablations of ram are constant=DURATION"
        );
        let (_, named) = parse_named("cache=off,rotation=on").expect("valid");
        assert_eq!(
            named,
            [
                (Part::Cache, "cache=off".to_string()),
                (Part::Rotation, "rotation=on".to_string())
            ]
        );
        check_applies(&named, "x", "hdd", &Part::ALL).expect("an hdd has every part");
        // `on` names the part too: it means nothing where there is no such part.
        let m = format!(
            "{:#}",
            check_applies(&named, "s", "ssd", &[Part::Constant]).expect_err("no cache")
        );
        assert!(
            m.starts_with("ablation cache=off does not apply to s"),
            "{m}"
        );
        let (_, named) = parse_named("rotation=on").expect("valid");
        let m = format!(
            "{:#}",
            check_applies(&named, "s", "ssd", &[Part::Cache, Part::Constant])
                .expect_err("no rotation")
        );
        assert!(
            m.starts_with("ablation rotation=on does not apply to s: this ssd profile has no rotating platters; the ablations of s are cache=off, constant=DURATION"),
            "{m}"
        );
    }
}
