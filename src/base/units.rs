//! Parsing and printing of the units every command shares: sizes (`4K`, `64M`, `1.5G`, binary
//! multiples, optional `B`/`iB`, any case), durations (`30s`, `5m`) and comma lists (`1,4,8`).
//!
//! One parser for every flag and plan field, so that `--fs-size 2G` and `size = "2G"` mean the
//! same thing and fail with the same message.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Why a size, duration or list did not parse. The message names the text and says what is
/// accepted, so it can be shown to the user as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("size {0:?} is empty; give a number with an optional K/M/G/T suffix, e.g. 64M")]
    EmptySize(String),
    #[error("size {0:?} is negative; sizes are byte counts of 0 or more, e.g. 1G")]
    NegativeSize(String),
    #[error("size {text:?} has an unknown unit {unit:?}; use B, K, M, G, T or P (binary multiples, e.g. 4K = 4096 bytes)")]
    BadSizeUnit { text: String, unit: String },
    #[error("size {0:?} is not a number with a unit; write it like 4K, 64M, 1.5G or 100M")]
    BadSizeNumber(String),
    #[error("size {0:?} is too large (over 16 EiB)")]
    SizeOverflow(String),
    #[error(
        "size {0:?} is not a whole number of bytes; e.g. 1.5K is fine, 1.1K (1126.4 bytes) is not"
    )]
    FractionalBytes(String),
    #[error("duration {0:?} is not valid; write it like 500ms, 30s, 5m, 2h or 1h30m")]
    BadDuration(String),
    #[error("duration {0:?} is too long; give at most {MAX_DURATION_TEXT} (e.g. 30s, 10m or 2h)")]
    DurationTooLong(String),
}

/// The longest duration a setting takes (`--time`, `--ramp`, `--interval`, `--stonewall`, a
/// plan's `time = ...`): a week. One bound for every flag and plan key, so that no deadline
/// computed from a setting can overflow (`18446744073709551615s` made `Instant + Duration`
/// panic) and no setting asks for a run that never ends (`999999999999h`).
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// [`MAX_DURATION`] as a user writes it.
pub const MAX_DURATION_TEXT: &str = "7d (168h)";

/// An estimate (space, memory, inodes, time) computed from user-given counts and sizes that
/// does not fit in 64 bits. Estimates use checked arithmetic and return this rather than a
/// wrapped or saturated figure, which could let a run that cannot fit start anyway.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {workload} workload's {what} overflows 64 bits with {given}; make {fix} smaller")]
pub struct Overflow {
    /// The workload (or plan part) whose estimate overflowed.
    pub workload: &'static str,
    /// Which estimate: "space estimate", "memory estimate", "file count", ….
    pub what: &'static str,
    /// The parameters as given, `name value` pairs.
    pub given: String,
    /// The parameters to reduce, as flags.
    pub fix: &'static str,
}

impl Overflow {
    /// A closure building the error, for `checked_*().ok_or_else(..)`.
    pub fn of(
        workload: &'static str,
        what: &'static str,
        given: String,
        fix: &'static str,
    ) -> impl Fn() -> Overflow {
        move || Overflow {
            workload,
            what,
            given: given.clone(),
            fix,
        }
    }
}

/// `size` rounded up to whole 4 KiB blocks, or `None` when that does not fit in 64 bits.
pub fn blocks_4k(size: u64) -> Option<u64> {
    size.div_ceil(4096).checked_mul(4096)
}

const UNITS: [(&str, u64); 7] = [
    ("", 1),
    ("k", 1 << 10),
    ("m", 1 << 20),
    ("g", 1 << 30),
    ("t", 1 << 40),
    ("p", 1 << 50),
    ("e", 1 << 60),
];

/// Parses a size in bytes: `4096`, `4K`, `64M`, `1.5G`, `100MiB`, `2gb`. Multiples are binary.
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(UnitError::EmptySize(text.to_string()));
    }
    if t.starts_with('-') {
        return Err(UnitError::NegativeSize(text.to_string()));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() || num.chars().filter(|&c| c == '.').count() > 1 || num.ends_with('.') {
        return Err(UnitError::BadSizeNumber(text.to_string()));
    }
    let unit_l = unit.trim().to_ascii_lowercase();
    let stem = unit_l
        .strip_suffix("ib")
        .or_else(|| unit_l.strip_suffix('b'))
        .unwrap_or(&unit_l);
    let mult = UNITS
        .iter()
        .find(|(u, _)| *u == stem)
        .map(|(_, m)| *m)
        .ok_or_else(|| UnitError::BadSizeUnit {
            text: text.to_string(),
            unit: unit.to_string(),
        })?;
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    let int: u64 = int_part
        .parse()
        .map_err(|_| UnitError::BadSizeNumber(text.to_string()))?;
    let whole = int
        .checked_mul(mult)
        .ok_or_else(|| UnitError::SizeOverflow(text.to_string()))?;
    if frac_part.is_empty() {
        return Ok(whole);
    }
    // Exact decimal fraction: frac / 10^digits * mult must be a whole number of bytes.
    let digits = frac_part.len() as u32;
    if digits > 18 {
        return Err(UnitError::BadSizeNumber(text.to_string()));
    }
    let frac: u128 = frac_part
        .parse()
        .map_err(|_| UnitError::BadSizeNumber(text.to_string()))?;
    let scaled = frac * mult as u128;
    let denom = 10u128.pow(digits);
    if scaled % denom != 0 {
        return Err(UnitError::FractionalBytes(text.to_string()));
    }
    let extra =
        u64::try_from(scaled / denom).map_err(|_| UnitError::SizeOverflow(text.to_string()))?;
    whole
        .checked_add(extra)
        .ok_or_else(|| UnitError::SizeOverflow(text.to_string()))
}

/// Prints a byte count the way a user would write it: the largest binary unit that divides it
/// exactly (`64M`, `1536K`), or bytes.
pub fn format_size(bytes: u64) -> String {
    for (unit, mult) in UNITS.iter().rev() {
        if *mult > 1 && bytes >= *mult && bytes % mult == 0 {
            return format!("{}{}", bytes / mult, unit.to_ascii_uppercase());
        }
    }
    format!("{bytes}")
}

/// Prints a byte count for humans, rounded: `1.50 GiB`.
pub fn format_bytes_human(bytes: f64) -> String {
    let names = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes;
    let mut i = 0;
    while v.abs() >= 1024.0 && i + 1 < names.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{v:.0} {}", names[i])
    } else {
        format!("{v:.2} {}", names[i])
    }
}

/// A byte count that parses from and prints to the size syntax, and serializes as a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Size(pub u64);

impl Size {
    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl FromStr for Size {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_size(s).map(Size)
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_size(self.0))
    }
}

impl serde::Serialize for Size {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct SizeVisitor;
        impl serde::de::Visitor<'_> for SizeVisitor {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size: a byte count or size text like \"64M\"")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Size, E> {
                Ok(Size(n))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Size, E> {
                u64::try_from(n)
                    .map(Size)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(n), &self))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Size, E> {
                parse_size(s).map(Size).map_err(E::custom)
            }
        }
        d.deserialize_any(SizeVisitor)
    }
}

/// serde `deserialize_with` for byte counts written as a number or as size text (`"64M"`),
/// so that plan files and JSON parameters take the same sizes as the flags.
pub fn de_size<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    <Size as serde::Deserialize>::deserialize(d).map(Size::bytes)
}

/// serde `deserialize_with` for an optional duration: seconds as a number, or duration text
/// (`"30s"`, `"5m"`).
pub fn de_opt_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Raw {
        N(f64),
        S(String),
    }
    match <Option<Raw> as serde::Deserialize>::deserialize(d)? {
        None => Ok(None),
        Some(Raw::N(n)) => bounded(n, &n.to_string())
            .map(Some)
            .map_err(serde::de::Error::custom),
        Some(Raw::S(s)) => parse_setting_duration(&s)
            .map(|d| Some(d.as_secs_f64()))
            .map_err(serde::de::Error::custom),
    }
}

/// `secs` (written as `text`) as a setting's duration: 0 to [`MAX_DURATION`] seconds.
fn bounded(secs: f64, text: &str) -> Result<f64, UnitError> {
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(UnitError::BadDuration(text.to_string()));
    }
    if secs > MAX_DURATION.as_secs_f64() {
        return Err(UnitError::DurationTooLong(text.to_string()));
    }
    Ok(secs)
}

/// Parses the duration of a setting (`--time 30s`, a plan's `time = "5m"`), within
/// [`MAX_DURATION`]: every flag and plan key of a run's durations reads through here.
pub fn parse_setting_duration(text: &str) -> Result<Duration, UnitError> {
    if let Ok(secs) = text.trim().parse::<f64>() {
        return bounded(secs, text).map(Duration::from_secs_f64);
    }
    if overflows(text) {
        // humantime refuses what overflows its own arithmetic: a duration too long.
        return Err(UnitError::DurationTooLong(text.to_string()));
    }
    let d = parse_duration(text)?;
    bounded(d.as_secs_f64(), text)?;
    Ok(d)
}

/// The instant `secs` seconds from now: a deadline computed from a setting. Checked, so that
/// a duration no setting should hold (see [`MAX_DURATION`]) is an error, never a panic of
/// `Instant + Duration` nor a deadline that never comes.
pub fn deadline_after(secs: f64) -> Result<std::time::Instant, UnitError> {
    let text = format!("{secs}s");
    match Duration::try_from_secs_f64(secs) {
        Ok(d) => deadline_in(d).ok_or(UnitError::DurationTooLong(text)),
        Err(_) if secs > 0.0 => Err(UnitError::DurationTooLong(text)),
        Err(_) => Err(UnitError::BadDuration(text)),
    }
}

/// `Instant::now() + d`, or `None` when that instant cannot be represented.
pub fn deadline_in(d: Duration) -> Option<std::time::Instant> {
    std::time::Instant::now().checked_add(d)
}

/// Whether humantime refused `text` because its number is too large.
fn overflows(text: &str) -> bool {
    matches!(
        humantime::parse_duration(text.trim()),
        Err(humantime::DurationError::NumberOverflow)
    )
}

/// serde `deserialize_with` for sweep parameters: one value (`threads = 4`) or a list
/// (`threads = [1, 4, 8]`), so that a plan can name one cell or a whole sweep.
pub fn de_one_or_many<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum OneOrMany<T> {
        Many(Vec<T>),
        One(T),
    }
    match <OneOrMany<T> as serde::Deserialize>::deserialize(d)? {
        OneOrMany::Many(v) => Ok(v),
        OneOrMany::One(x) => Ok(vec![x]),
    }
}

/// Parses a duration: `30s`, `5m`, `500ms`, `1h30m`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let t = text.trim();
    if let Ok(secs) = t.parse::<f64>() {
        // Negative, infinite, NaN and more seconds than a Duration holds (`1e30`) are refused.
        return Duration::try_from_secs_f64(secs)
            .map_err(|_| UnitError::BadDuration(text.to_string()));
    }
    humantime::parse_duration(t).map_err(|_| UnitError::BadDuration(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setting_durations_stop_at_a_week_and_deadlines_are_checked() {
        assert_eq!(
            parse_setting_duration("7d").unwrap(),
            Duration::from_secs(604_800)
        );
        assert_eq!(
            parse_setting_duration("90").unwrap(),
            Duration::from_secs(90)
        );
        for long in [
            "18446744073709551615s",
            "999999999999h",
            "8d",
            "1e30",
            "604801",
        ] {
            assert_eq!(
                parse_setting_duration(long),
                Err(UnitError::DurationTooLong(long.to_string())),
                "{long}"
            );
        }
        assert!(matches!(
            parse_setting_duration("-5"),
            Err(UnitError::BadDuration(_))
        ));
        assert!(deadline_after(30.0).is_ok());
        assert!(matches!(
            deadline_after(f64::MAX),
            Err(UnitError::DurationTooLong(_))
        ));
        assert!(matches!(
            deadline_after(f64::NAN),
            Err(UnitError::BadDuration(_))
        ));
        assert_eq!(deadline_in(Duration::MAX), None);
    }

    #[test]
    fn sizes_parse_as_binary_multiples() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("4KB").unwrap(), 4096);
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("64M").unwrap(), 64 << 20);
        assert_eq!(parse_size("100mb").unwrap(), 100 << 20);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_size("2T").unwrap(), 2 << 40);
        assert_eq!(parse_size("0").unwrap(), 0);
        assert_eq!(parse_size("12B").unwrap(), 12);
        assert_eq!(parse_size(" 1300K ").unwrap(), 1300 * 1024);
    }

    #[test]
    fn bad_sizes_say_what_is_wrong() {
        assert!(matches!(
            parse_size("10QB"),
            Err(UnitError::BadSizeUnit { .. })
        ));
        assert!(matches!(parse_size("-1G"), Err(UnitError::NegativeSize(_))));
        assert!(matches!(parse_size(""), Err(UnitError::EmptySize(_))));
        assert!(matches!(parse_size("G"), Err(UnitError::BadSizeNumber(_))));
        assert!(matches!(
            parse_size("1.2.3M"),
            Err(UnitError::BadSizeNumber(_))
        ));
        assert!(matches!(
            parse_size("1.1K"),
            Err(UnitError::FractionalBytes(_))
        ));
        assert!(matches!(
            parse_size("99999999E"),
            Err(UnitError::SizeOverflow(_))
        ));
        let msg = parse_size("10QB").unwrap_err().to_string();
        assert!(msg.contains("10QB") && msg.contains("K, M, G"), "{msg}");
    }

    #[test]
    fn sizes_print_in_the_largest_exact_unit() {
        assert_eq!(format_size(4096), "4K");
        assert_eq!(format_size(64 << 20), "64M");
        assert_eq!(format_size(1536 << 10), "1536K");
        assert_eq!(format_size(1000), "1000");
        assert_eq!(format_size(0), "0");
        for text in ["4K", "64M", "3G", "123"] {
            assert_eq!(format_size(parse_size(text).unwrap()), text);
        }
    }

    #[test]
    fn size_deserializes_from_number_or_text() {
        let s: Size = serde_json::from_str("\"64M\"").unwrap();
        assert_eq!(s, Size(64 << 20));
        let n: Size = serde_json::from_str("4096").unwrap();
        assert_eq!(n, Size(4096));
        assert!(serde_json::from_str::<Size>("\"10QB\"").is_err());
    }

    #[test]
    fn durations_and_lists() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("soon").is_err());
        assert_eq!(parse_duration("-0").unwrap(), Duration::ZERO);
        for bad in ["-1", "inf", "NaN", "1e30", "18446744073709551616"] {
            assert_eq!(
                parse_duration(bad),
                Err(UnitError::BadDuration(bad.to_string())),
                "{bad}"
            );
        }
    }
}
