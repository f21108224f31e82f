//! An aging kept at each of its checkpoints. A workload that ages in steps and measures between
//! them (the append test: age to P%, copy the aged tree onto a fresh twin, read both) keeps
//! the aged filesystem right after each step, before anything else touches it: one entry per
//! checkpoint, keyed as a whole aging is ([`super::key`]) plus the checkpoint.
//!
//! A run starts from kept images only when the cache holds every checkpoint of its aging (all
//! or nothing): a run never mixes kept and aged checkpoints, and a run that misses any one
//! ages all of them again and keeps each anew (replacing an entry of the same key).

use anyhow::Result;

use super::{check_overlay_store, check_room, find, key, Aging, Entry, ImageKey};
use crate::results::AgedStart;
use crate::testbed::TestbedSpec;

/// The image cache's part in one run of an aging kept per checkpoint.
#[derive(Debug, Clone)]
pub struct Series {
    /// The name entries are kept under (`--keep-image NAME`, the plan's name).
    pub name: String,
    /// The directory the aged tree lives in on the filesystem (part of every key).
    pub tree: String,
    /// Per checkpoint, in order: its key.
    pub keys: Vec<ImageKey>,
    /// Every checkpoint's entry, in order, when the cache holds them all; `None`: the run
    /// ages and keeps each checkpoint.
    pub hits: Option<Vec<Entry>>,
    /// How each checkpoint's aged state was made, filled in as the run goes.
    pub starts: Vec<AgedStart>,
}

/// The key of `aging` at each of `checkpoints` on a testbed of `spec`, in order.
pub fn keys(spec: &TestbedSpec, aging: &Aging<'_>, checkpoints: &[f64]) -> Result<Vec<ImageKey>> {
    checkpoints
        .iter()
        .map(|&pc| {
            key(
                spec,
                &Aging {
                    kind: aging.kind,
                    params: aging.params.clone(),
                    seed: aging.seed,
                    tree: aging.tree,
                    checkpoint: Some(pc),
                },
            )
        })
        .collect()
}

impl Series {
    /// The keys of `aging` (its `checkpoint` unset) at each of `checkpoints` on a testbed of
    /// `spec`, and the kept entries when the cache has all of them. Refused (bad input,
    /// before anything is made): a testbed the cache cannot keep ([`key`]), an overlay start
    /// whose writes would reach the kept image, and a miss whose images the cache has no
    /// room for (one of the filesystem's size per checkpoint at most).
    pub fn find(
        spec: &TestbedSpec,
        aging: &Aging<'_>,
        checkpoints: &[f64],
        name: &str,
    ) -> Result<Series> {
        let keys = keys(spec, aging, checkpoints)?;
        let found = keys
            .iter()
            .map(|k| find(&k.key))
            .collect::<Result<Vec<_>>>()?;
        let hits = if !found.is_empty() && found.iter().all(Option::is_some) {
            check_overlay_store(spec)?;
            Some(found.into_iter().flatten().collect())
        } else {
            check_room(spec.size.saturating_mul(keys.len() as u64))?;
            None
        };
        Ok(Series {
            name: name.to_string(),
            tree: aging.tree.to_string(),
            keys,
            hits,
            starts: Vec::new(),
        })
    }

    /// The kept entry of checkpoint `i` when the run starts from kept images.
    pub fn hit(&self, i: usize) -> Option<&Entry> {
        self.hits.as_ref().and_then(|h| h.get(i))
    }

    /// Whether the run starts every checkpoint from its kept image (ages nothing).
    pub fn is_warm(&self) -> bool {
        self.hits.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::spec;
    use super::*;

    fn aging(params: serde_json::Value) -> Aging<'static> {
        Aging {
            kind: "append",
            params,
            seed: 7,
            tree: "fsgauge-append",
            checkpoint: None,
        }
    }

    /// One key per checkpoint, each the whole aging's fields plus the checkpoint; a whole
    /// aging's key (no checkpoint) is none of them and has no `checkpoint` field.
    #[test]
    fn each_checkpoint_has_its_own_key() {
        let a = aging(serde_json::json!({"usage": [25.0, 75.0]}));
        let k = keys(&spec(), &a, &[25.0, 75.0]).expect("keys");
        assert_eq!(k.len(), 2);
        assert_ne!(k[0].key, k[1].key);
        assert_eq!(k[0].fields["aging"]["checkpoint"], 25.0);
        assert_eq!(k[1].fields["aging"]["checkpoint"], 75.0);
        assert_eq!(k[1].fields["aging"]["tree"], "fsgauge-append");
        assert_eq!(k, keys(&spec(), &a, &[25.0, 75.0]).expect("keys"));
        let whole = key(&spec(), &a).expect("key");
        assert!(whole.fields["aging"].get("checkpoint").is_none());
        assert!(k.iter().all(|x| x.key != whole.key));
        let other = aging(serde_json::json!({"usage": [25.0, 75.0], "append": 8192}));
        assert_ne!(
            k[0].key,
            keys(&spec(), &other, &[25.0]).expect("keys")[0].key
        );
    }
}
