//! The target a repetition runs on: a fresh testbed (built from a kept image when the image
//! cache has the run's aging), or the `--dir`; and whether the repetition owns it (and tears
//! it down) or shares one the caller keeps.

use anyhow::{Context, Result};

use super::request::{Place, RunOptions};
use crate::results::AgedStart;
use crate::testbed::images::Entry;
use crate::testbed::Testbed;
use crate::workload::Target;

/// Builds the target of a place: a fresh testbed, or the `--dir`.
pub fn build_target(place: &Place, opts: &RunOptions) -> Result<Target> {
    Ok(build(place, opts, None)?.0)
}

/// Builds the target of a place: a fresh testbed (from the kept image `kept`, timed with the
/// copy, when there is one: then with how its state was made), or the `--dir`.
pub(super) fn build(
    place: &Place,
    opts: &RunOptions,
    kept: Option<&Entry>,
) -> Result<(Target, Option<AgedStart>)> {
    Ok(match place {
        Place::Testbed(spec) => {
            let from = kept.map_or(String::new(), |e| {
                format!(" from kept image {}", e.manifest.key)
            });
            opts.progress.note(&format!(
                "building {} testbed{from} ({})",
                spec.label,
                spec.describe()
            ));
            let spec = crate::lab::crash::campaign::pin_transport(spec, &opts.crash);
            match kept {
                Some(entry) => {
                    let (t, (), start) = Testbed::start_from_kept(&spec, entry, |_| Ok(()))?;
                    opts.progress.note(&start.describe());
                    (Target::Testbed(t), Some(start))
                }
                None => (Target::Testbed(Testbed::create(&spec)?), None),
            }
        }
        // Reached as every user-named path is: another user's link leads only to what that
        // user owns.
        Place::Dir(p) => {
            let dir = crate::base::sys::trust::walk(p, None)
                .with_context(|| format!("--dir {}", p.display()))?;
            (Target::Dir(dir.path), None)
        }
    })
}

/// The target a repetition runs on: built for it (and torn down after it), or one the caller
/// built and keeps.
pub(super) enum OnTarget<'a> {
    Own(Box<Target>),
    Shared(&'a mut Target),
}

impl OnTarget<'_> {
    pub(super) fn get(&mut self) -> &mut Target {
        match self {
            OnTarget::Own(t) => t.as_mut(),
            OnTarget::Shared(t) => t,
        }
    }

    /// Tears down a testbed built for the repetition (on error it is dropped, which does too).
    pub(super) fn done(self) -> Result<()> {
        match self {
            OnTarget::Own(t) => match *t {
                Target::Testbed(t) => t.destroy(),
                Target::Dir(_) => Ok(()),
            },
            OnTarget::Shared(_) => Ok(()),
        }
    }
}
