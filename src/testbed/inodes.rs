//! How many inodes a filesystem will have, predicted from its kind, size and mkfs options
//! before anything is made, so that a plan whose workload makes more files than the
//! filesystem can hold is fixed or refused up front instead of failing on its first run.
//!
//! ext2/3/4 fix their inode count at mkfs time: `-N COUNT`, or one inode per `-i BYTES`, or
//! the `inode_ratio` of the usage type mke2fs picks from the size (floppy < 3M, small < 512M,
//! default, big ≥ 4T, huge ≥ 16T), read from /etc/mke2fs.conf as mke2fs does (its built-in
//! values when the file is absent). mke2fs rounds the count up to fill whole inode-table
//! blocks, so the prediction is a lower bound. xfs and btrfs allocate inodes as they go.

use super::FsKind;

/// Inodes mke2fs reserves (bad blocks, root, journal, resize, lost+found, ...): the first
/// 11 plus lost+found's; a workload gets the rest.
pub const RESERVED: u64 = 12;

/// What the mkfs options say about the inode count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inodes {
    /// The filesystem allocates inodes as it needs them (xfs, btrfs).
    Dynamic,
    /// `-N COUNT`: at least this many.
    Count(u64),
    /// `-i BYTES`: at least this many (size / ratio).
    Ratio { ratio: u64, count: u64 },
    /// Nothing given: at least this many from the usage type's ratio.
    Default { ratio: u64, count: u64 },
    /// `-T TYPE` or another option that decides the count in a way not predicted here.
    Unknown,
}

impl Inodes {
    /// The predicted count, when there is one.
    pub fn count(self) -> Option<u64> {
        match self {
            Inodes::Count(n) => Some(n),
            Inodes::Ratio { count, .. } | Inodes::Default { count, .. } => Some(count),
            Inodes::Dynamic | Inodes::Unknown => None,
        }
    }
}

/// The `-N` that gives a workload of `needed` inodes room: a tenth more plus a margin, as the
/// workloads' own check suggests.
pub fn count_for(needed: u64) -> u64 {
    needed
        .saturating_add(needed / 10)
        .saturating_add(1024)
        .saturating_add(RESERVED)
}

/// Predicts the inode count of a `fs` filesystem of `size` bytes made with `mkfs_opts`.
pub fn predict(fs: FsKind, size: u64, mkfs_opts: &[String]) -> Inodes {
    if !matches!(fs, FsKind::Ext2 | FsKind::Ext3 | FsKind::Ext4) {
        return Inodes::Dynamic;
    }
    let conf = std::fs::read_to_string("/etc/mke2fs.conf").unwrap_or_default();
    predict_with(size, mkfs_opts, &conf)
}

/// [`predict`] for an ext filesystem, with the text of mke2fs.conf (empty: built-in values).
pub fn predict_with(size: u64, mkfs_opts: &[String], conf: &str) -> Inodes {
    let mut words = mkfs_opts.iter().map(String::as_str);
    let mut count = None;
    let mut ratio = None;
    while let Some(w) = words.next() {
        let mut value = |flag: &str| -> Option<u64> {
            let v = if w.len() > flag.len() {
                w[flag.len()..].to_string()
            } else {
                words.next()?.to_string()
            };
            v.parse().ok()
        };
        if w.starts_with("-T") {
            return Inodes::Unknown;
        } else if w.starts_with("-N") {
            match value("-N") {
                Some(n) => count = Some(n),
                None => return Inodes::Unknown,
            }
        } else if w.starts_with("-i") {
            match value("-i") {
                Some(r) if r > 0 => ratio = Some(r),
                _ => return Inodes::Unknown,
            }
        }
    }
    if let Some(n) = count {
        return Inodes::Count(n);
    }
    if let Some(r) = ratio {
        return Inodes::Ratio {
            ratio: r,
            count: size / r,
        };
    }
    let ratio = type_ratio(size, conf);
    Inodes::Default {
        ratio,
        count: size / ratio,
    }
}

/// The usage type mke2fs picks for a filesystem of `size` bytes.
fn usage_type(size: u64) -> &'static str {
    const MIB: u64 = 1 << 20;
    const TIB: u64 = 1 << 40;
    if size < 3 * MIB {
        "floppy"
    } else if size < 512 * MIB {
        "small"
    } else if size < 4 * TIB {
        "default"
    } else if size < 16 * TIB {
        "big"
    } else {
        "huge"
    }
}

/// The inode ratio of the usage type: its stanza in mke2fs.conf, else `[defaults]`, else
/// mke2fs's built-in value.
fn type_ratio(size: u64, conf: &str) -> u64 {
    let ty = usage_type(size);
    let built_in = match ty {
        "floppy" => 8192,
        "small" => 4096,
        "big" => 32768,
        "huge" => 65536,
        _ => 16384,
    };
    if conf.trim().is_empty() {
        return built_in;
    }
    let mut section = "";
    let mut stanza: Option<&str> = None;
    let mut default_ratio = None;
    let mut type_ratio = None;
    for line in conf.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line;
            stanza = None;
        } else if let Some((key, value)) = line.split_once('=') {
            let (key, value) = (key.trim(), value.trim());
            if value == "{" {
                stanza = Some(key);
            } else if key == "inode_ratio" {
                let v = value.parse::<u64>().ok().filter(|&v| v > 0);
                match (section, stanza) {
                    ("[defaults]", None) => default_ratio = v.or(default_ratio),
                    ("[fs_types]", Some(s)) if s == ty => type_ratio = v.or(type_ratio),
                    _ => {}
                }
            }
        } else if line == "}" {
            stanza = None;
        }
    }
    type_ratio.or(default_ratio).unwrap_or(built_in)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN: &str = "[defaults]\n\tblocksize = 4096\n\tinode_ratio = 16384\n\n[fs_types]\n\text4 = {\n\t\tfeatures = has_journal\n\t}\n\tsmall = {\n\t\tblocksize = 1024\n\t\tinode_ratio = 4096\n\t}\n\tbig = {\n\t\tinode_ratio = 32768\n\t}\n";

    fn opts(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_default_follows_the_usage_type_of_the_size() {
        // A 1G ext4 gets 65536 inodes (the "65524 free" is that minus the reserved).
        assert_eq!(
            predict_with(1 << 30, &[], DEBIAN),
            Inodes::Default {
                ratio: 16384,
                count: 65536
            }
        );
        assert_eq!(predict_with(256 << 20, &[], DEBIAN).count(), Some(65536));
        assert_eq!(
            predict_with(5 << 40, &[], DEBIAN).count(),
            Some((5 << 40) / 32768)
        );
        // Without a conf file, mke2fs's built-in values.
        assert_eq!(predict_with(256 << 20, &[], "").count(), Some(65536));
    }

    #[test]
    fn explicit_options_decide() {
        assert_eq!(
            predict_with(1 << 30, &opts("-N 200000"), DEBIAN),
            Inodes::Count(200000)
        );
        assert_eq!(
            predict_with(1 << 30, &opts("-O ^extent -N200000"), DEBIAN),
            Inodes::Count(200000)
        );
        assert_eq!(
            predict_with(1 << 30, &opts("-i 4096"), DEBIAN),
            Inodes::Ratio {
                ratio: 4096,
                count: 262144
            }
        );
        assert_eq!(
            predict_with(1 << 30, &opts("-T news"), DEBIAN),
            Inodes::Unknown
        );
        assert_eq!(
            predict_with(1 << 30, &opts("-N lots"), DEBIAN),
            Inodes::Unknown
        );
        assert_eq!(predict(FsKind::Xfs, 1 << 30, &[]), Inodes::Dynamic);
    }

    #[test]
    fn the_suggested_count_leaves_room() {
        assert_eq!(count_for(148350), 148350 + 14835 + 1024 + RESERVED);
    }
}
