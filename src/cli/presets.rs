//! `fsgauge presets`: the built-in studies, one line each; `presets show NAME` prints one's plan.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

use super::common::OutputArgs;
use crate::analysis::report::output::listing;
use crate::base::error::bad_input;
use crate::lab::plan::presets::{self, PRESETS};

/// How a plan extends a preset, after `fsgauge presets --help` and `fsgauge run --help`.
pub const EXTENDS_HELP: &str = "\
A plan may start from a preset and state only what it changes:

  extends = \"lowmem\"          # a built-in preset's name (not a file)
  drop_testbeds = [\"writeback-ext-dalloc\"]   # and drop_workloads, drop_questions: by label
  [[testbed]]
  label = \"ordered-ext-dalloc\"  # the preset's testbed of this label, merged key by key
  mount_opts = \"data=ordered,barrier=0\"

A top-level key replaces the preset's, but name is the plan's own (default: its file's
name), and reps also drops the preset's cv_target and max_reps. A
[[testbed]], [[workload]] or [[question]] with the label of one of the preset's (testbed:
label, else fs; workload: label, else kind; question: id) is merged into it key by key, the
plan's keys winning; others are added after the preset's; [age] is merged key by key. Errors
point at the line at fault, in the plan or in the preset (preset lowmem:52:8). The
*-as-published presets extend their seed presets; `presets show NAME` prints a preset whole,
resolved, to copy, run and edit.";

#[derive(Debug, Args)]
#[command(after_long_help = EXTENDS_HELP)]
pub struct PresetsCmd {
    #[command(subcommand)]
    pub command: Option<PresetsSub>,
    /// How the list is printed (json: name, about, runnable, needs; csv and md: one row each).
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Subcommand)]
pub enum PresetsSub {
    /// Print a preset's whole plan (TOML), resolved when it extends another preset, to copy,
    /// run and edit; run it with `fsgauge run NAME`.
    Show {
        /// The preset's name.
        name: String,
    },
}

pub fn run(c: PresetsCmd) -> Result<ExitCode> {
    match c.command {
        None => {
            let rows: Vec<Vec<String>> = PRESETS
                .iter()
                .map(|p| {
                    vec![
                        p.name.to_string(),
                        p.about.to_string(),
                        p.runnable().to_string(),
                        p.missing_kinds().join(" "),
                        p.minutes.to_string(),
                    ]
                })
                .collect();
            let data: Vec<serde_json::Value> = PRESETS
                .iter()
                .map(|p| {
                    serde_json::json!({
                        "name": p.name,
                        "about": p.about,
                        "runnable": p.runnable(),
                        "needs": p.missing_kinds(),
                        "minutes": p.minutes,
                    })
                })
                .collect();
            c.out.print(listing(
                "fsgauge presets",
                &data,
                list_text(),
                &["name", "about", "runnable", "needs", "minutes"],
                rows,
            )?)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(PresetsSub::Show { name }) => match presets::find(&name) {
            Some(p) => {
                print!("{}", p.plan_text()?);
                Ok(ExitCode::SUCCESS)
            }
            None => Err(bad_input(format!(
                "no preset {name:?}; presets: {}",
                PRESETS
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        },
    }
}

/// The presets for the terminal: the runnable ones with their minutes, then those this build
/// cannot run.
fn list_text() -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let width = PRESETS.iter().map(|p| p.name.len()).max().unwrap_or(0);
    for p in presets::runnable() {
        let _ = writeln!(
            out,
            "{:<width$}  ~{:>2.0} min  {}",
            p.name,
            p.minutes.max(1.0),
            p.about
        );
    }
    out.push('\n');
    out.push_str("(minutes: one run at the default scale on a 2-core VM, repeating until its questions are decided; --scale F changes the work about F-fold)\n");
    let waiting: Vec<_> = PRESETS.iter().filter(|p| !p.runnable()).collect();
    if !waiting.is_empty() {
        out.push('\n');
        out.push_str("not runnable in this build (their workload kinds are missing):\n");
        for p in waiting {
            let _ = writeln!(
                out,
                "{:<width$}  needs {}: {}",
                p.name,
                p.missing_kinds().join(", "),
                p.about
            );
        }
    }
    out
}
