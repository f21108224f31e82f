//! Enums whose values are written as names: a filesystem kind (`ext4`), a workload's mode
//! (`randwrite`), an output format (`md`). Each name, and each alias, is written once, beside
//! its variant, in a [`choice!`](crate::choice!) declaration; from there come the command
//! line's parsing (`FromStr`, which clap uses), the plan's and the result file's (serde),
//! `Display`, `name()` and `ALL`. A name the command line accepts is therefore always one a
//! plan accepts and a result file holds, and every refusal lists the valid names.
//!
//! Matching ignores ASCII case and surrounding spaces (`--fs EXT4`, `mode = " randread"`);
//! `name()` and serialization give the first name written.

/// An enum whose values are names, declared with [`choice!`](crate::choice!).
pub trait Choice: Sized + Copy + 'static {
    /// What a value is called in messages: `filesystem`, `aging mode`.
    const WHAT: &'static str;
    /// Every value, in the order declared.
    fn all() -> &'static [Self];
    /// The value's names: the first is the one written, the others are aliases.
    fn names(self) -> &'static [&'static str];
}

/// Parses `s` as one of `T`'s names or aliases (ASCII case and surrounding spaces ignored), or
/// says which names there are: `unknown order "random"; use interleaved or grouped`.
pub fn parse<T: Choice>(s: &str) -> Result<T, String> {
    let t = s.trim();
    T::all()
        .iter()
        .copied()
        .find(|v| v.names().iter().any(|n| n.eq_ignore_ascii_case(t)))
        .ok_or_else(|| unknown::<T>(s))
}

/// The refusal of a name `T` does not have, listing the names it has.
pub fn unknown<T: Choice>(s: &str) -> String {
    format!("unknown {} {s:?}; use {}", T::WHAT, names::<T>())
}

/// `T`'s names (without aliases), as a sentence: `a, b or c`.
pub fn names<T: Choice>() -> String {
    let names: Vec<&str> = T::all().iter().map(|v| v.names()[0]).collect();
    sentence(&names)
}

/// Names as a sentence: `a, b or c`.
pub fn sentence(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// Declares an enum whose values are names (see [the module](crate::base::choice)).
///
/// ```
/// fsgauge::choice! {
///     /// Where the image lives.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
///     pub enum Place("place") {
///         /// On disk.
///         Disk = "disk",
///         /// In memory.
///         Ram = "ram" | "memory",
///     }
/// }
/// assert_eq!("Memory".parse::<Place>(), Ok(Place::Ram));
/// assert_eq!(Place::Ram.name(), "ram");
/// assert_eq!("tape".parse::<Place>().unwrap_err(), "unknown place \"tape\"; use disk or ram");
/// ```
///
/// The enum must derive `Clone` and `Copy`.
#[macro_export]
macro_rules! choice {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident($what:literal) {
            $(
                $(#[$vmeta:meta])*
                $variant:ident = $first:literal $(| $alias:literal)*
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every value, in the order declared.
            pub const ALL: [$name; [$($name::$variant),+].len()] = [$($name::$variant),+];

            /// The value's name, as written on the command line, in plans and in results.
            pub const fn name(self) -> &'static str {
                match self {
                    $( Self::$variant => $first, )+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> ::std::result::Result<Self, Self::Err> {
                $crate::base::choice::parse(s)
            }
        }

        impl $crate::base::choice::Choice for $name {
            const WHAT: &'static str = $what;
            fn all() -> &'static [Self] {
                &Self::ALL
            }
            fn names(self) -> &'static [&'static str] {
                match self {
                    $( Self::$variant => &[$first $(, $alias)*], )+
                }
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> ::std::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> ::std::result::Result<Self, D::Error> {
                let s = <::std::string::String as ::serde::Deserialize>::deserialize(d)?;
                s.parse().map_err(<D::Error as ::serde::de::Error>::custom)
            }
        }
    };
}

/// Checks for the enums declared with [`choice!`], called from each declaring module's tests.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub mod testing {
    use super::{names, Choice};

    /// Every name and alias of `T` parses back to its value from text, from JSON and from
    /// TOML, and `T` writes its first name everywhere.
    pub fn one_set_of_names<T>()
    where
        T: Choice
            + std::str::FromStr<Err = String>
            + std::fmt::Display
            + serde::Serialize
            + serde::de::DeserializeOwned
            + PartialEq
            + std::fmt::Debug,
    {
        for v in T::all() {
            let first = v.names()[0];
            assert_eq!(v.to_string(), first);
            assert_eq!(serde_json::to_value(v).unwrap(), serde_json::json!(first));
            for name in v.names() {
                assert_eq!(&name.parse::<T>().unwrap(), v, "{name}");
                assert_eq!(&name.to_uppercase().parse::<T>().unwrap(), v, "{name}");
                let json: T = serde_json::from_value(serde_json::json!(name)).unwrap();
                assert_eq!(&json, v, "{name}");
                let toml: std::collections::BTreeMap<String, T> =
                    toml::from_str(&format!("k = {name:?}")).unwrap();
                assert_eq!(&toml["k"], v, "{name}");
            }
        }
        // No name belongs to two values.
        let mut seen = std::collections::HashSet::new();
        for n in T::all().iter().flat_map(|v| v.names()) {
            assert!(seen.insert(n.to_ascii_lowercase()), "{n} names two values");
        }
        let e = "no-such-name".parse::<T>().unwrap_err();
        assert!(e.ends_with(&names::<T>()), "{e}");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    crate::choice! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Kind("kind") {
            One = "one",
            TwoWords = "two-words" | "two_words" | "2",
        }
    }

    #[test]
    fn names_aliases_and_case_parse_and_the_first_name_is_written() {
        assert_eq!("one".parse::<Kind>(), Ok(Kind::One));
        assert_eq!(" ONE ".parse::<Kind>(), Ok(Kind::One));
        for s in ["two-words", "Two_Words", "2"] {
            assert_eq!(s.parse::<Kind>(), Ok(Kind::TwoWords), "{s}");
        }
        assert_eq!(Kind::TwoWords.to_string(), "two-words");
        assert_eq!(Kind::ALL, [Kind::One, Kind::TwoWords]);
        assert_eq!(
            serde_json::to_value(Kind::TwoWords).unwrap(),
            serde_json::json!("two-words")
        );
        assert_eq!(
            serde_json::from_value::<Kind>(serde_json::json!("two_words")).unwrap(),
            Kind::TwoWords
        );
    }

    #[test]
    fn a_refusal_lists_the_names_in_every_form() {
        let msg = "unknown kind \"three\"; use one or two-words";
        assert_eq!("three".parse::<Kind>().unwrap_err(), msg);
        let e = serde_json::from_value::<Kind>(serde_json::json!("three")).unwrap_err();
        assert_eq!(e.to_string(), msg);
        let e = toml::from_str::<std::collections::BTreeMap<String, Kind>>("k = \"three\"")
            .unwrap_err();
        assert!(e.to_string().contains(msg), "{e}");
    }

    #[test]
    fn every_named_enum_has_one_set_of_names() {
        testing::one_set_of_names::<crate::workload::ColdMode>();
        testing::one_set_of_names::<crate::workload::readtest::ReadPhase>();
        testing::one_set_of_names::<crate::workload::age::engine::AgeMode>();
        testing::one_set_of_names::<crate::workload::age::engine::DeleteOrder>();
        testing::one_set_of_names::<crate::dist::DirMode>();
        testing::one_set_of_names::<crate::workload::exercise::ops::OpKind>();
        testing::one_set_of_names::<crate::testbed::FsKind>();
        testing::one_set_of_names::<crate::testbed::Backing>();
        testing::one_set_of_names::<crate::analysis::report::output::OutputFormat>();
        testing::one_set_of_names::<crate::layout::ScanMethod>();
        testing::one_set_of_names::<crate::layout::MapMethod>();
        testing::one_set_of_names::<crate::lab::plan::Fresh>();
    }

    #[test]
    fn refusals_keep_their_words() {
        assert_eq!(
            "zfs".parse::<crate::testbed::FsKind>().unwrap_err(),
            "unknown filesystem \"zfs\"; use ext2, ext3, ext4, xfs or btrfs"
        );
        assert_eq!(
            "reboot".parse::<crate::workload::ColdMode>().unwrap_err(),
            "unknown cold-cache mode \"reboot\"; use none, drop or remount"
        );
    }
}
