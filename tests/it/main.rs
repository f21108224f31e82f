//! The integration tests: one test binary (one link, one process to start) whose modules are
//! the command-line and filesystem tests, sharing one `support` module.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

mod report_fixtures;
mod support;

mod age_append;
mod age_errors;
mod age_modes;
mod age_read;
mod age_study;
mod attacks;
mod clients_dir;
mod clients_testbeds;
mod code_rules;
mod device_failures;
mod device_server;
mod device_testbed;
mod device_timing;
mod devices_cli;
mod devices_fit;
mod exercise_cli;
mod exercise_fs;
mod faults;
mod flag_conflicts;
mod foundation_errors;
mod foundation_memory;
mod foundation_run;
mod foundation_signals;
mod foundation_testbed;
mod foundation_tree;
mod input_limits;
mod layout_filefrag;
mod layout_free;
mod layout_run;
mod layout_walk;
mod ledger_safety;
mod meta_create;
mod meta_fdtree;
mod meta_interleave;
mod mpi_runs;
mod output_flags;
mod output_formats;
mod output_trust;
mod plan_cli;
mod plan_questions;
mod plan_resume;
mod presets_run;
mod rate;
mod report_chromium;
mod report_output;
mod runctl;
mod rundir_trust;
mod testbed_trust;
mod tio_dir;
mod tio_testbeds;
