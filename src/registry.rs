//! Every workload kind by name, for plan files and presets: a workload's parameters are its
//! serde struct (defaults filled in, unknown fields refused), so a plan's `[[workload]]` table
//! and the command-line flags name the same things.

use anyhow::Result;
use serde::de::DeserializeOwned;

use crate::workload::Workload;

/// A registered workload kind.
pub struct WorkloadKind {
    /// Name in `fsgauge bench NAME` and in plans (`kind = "NAME"`).
    pub name: &'static str,
    /// One line for listings.
    pub about: &'static str,
    /// Builds the workload from its parameters (without `kind`).
    pub build: fn(serde_json::Value) -> Result<Box<dyn Workload>, String>,
}

fn build<T: Workload + DeserializeOwned + 'static>(
    v: serde_json::Value,
) -> Result<Box<dyn Workload>, String> {
    serde_json::from_value::<T>(v)
        .map(|w| Box::new(w) as Box<dyn Workload>)
        .map_err(|e| e.to_string())
}

/// All kinds, one line each.
pub fn kinds() -> &'static [WorkloadKind] {
    &[
        WorkloadKind {
            name: "tree",
            about: "low-memory study: mkdir + one open/write/close per file, then rm -rf",
            build: build::<crate::workload::tree::Tree>,
        },
        WorkloadKind {
            name: "fdtree",
            about: "journal-size study: fdtree's dir create, file create, file remove, dir remove",
            build: build::<crate::workload::fdtree::Fdtree>,
        },
        WorkloadKind {
            name: "interleave",
            about: "inode-reservation study: files created round-robin across dirs, cold rm -rf",
            build: build::<crate::workload::interleave::Interleave>,
        },
        WorkloadKind {
            name: "create",
            about: "fs_mark-style small-file creation rate, latency per syscall",
            build: build::<crate::workload::create::Create>,
        },
        WorkloadKind {
            name: "tio",
            about: "block-reservation study: threaded I/O (tiobench), threads x mode x block",
            build: build::<crate::workload::tio::Tio>,
        },
        WorkloadKind {
            name: "clients",
            about: "block-reservation study: N clients replaying a dbench loadfile or a file-server mix",
            build: build::<crate::workload::clients::Clients>,
        },
        WorkloadKind {
            name: "age",
            about:
                "fragmentation study: age to usage checkpoints (fill, round-robin append, churn)",
            build: build::<crate::age::Age>,
        },
        WorkloadKind {
            name: "read",
            about: "fragmentation study: read the tree in walk, random and block order; stat rate",
            build: build::<crate::workload::readtest::ReadTest>,
        },
        WorkloadKind {
            name: "exercise",
            about: "integrity exerciser (fsx-like): random operations verified against a model",
            build: build::<crate::exercise::Exercise>,
        },
    ]
}

/// Looks a kind up by name.
pub fn find(name: &str) -> Option<&'static WorkloadKind> {
    kinds().iter().find(|k| k.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_from_parameters_with_defaults_and_refuses_unknown_fields() {
        let tree = find("tree").unwrap();
        let w = (tree.build)(serde_json::json!({"dirs": 2, "file_size": "4K"})).unwrap();
        assert_eq!(w.params()["dirs"], 2);
        assert_eq!(w.params()["file_size"], 4096);
        assert_eq!(w.params()["files"], 10);
        let e = (tree.build)(serde_json::json!({"dirz": 2})).err().unwrap();
        assert!(e.contains("dirz"), "{e}");
        assert!(find("nope").is_none());
    }
}
