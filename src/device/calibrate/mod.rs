//! Calibration: holding a device against its model, and a model against a device.
//!
//! `fsgauge devices check` runs micro-benchmarks on a device (an emulated disk of a profile, or
//! a real one, read only) and sets each beside the model's figure for the same requests;
//! `fsgauge devices fit` derives a rotating disk's profile from the same measurements. This
//! sits above the testbed: it builds its device through [`crate::device`] and times
//! its requests with [`crate::measure`]'s recorder, and hands what it found to the one exporter
//! as a [`crate::analysis::report::document::Page`].
//!
//! - [`target`]: the device measured (a real block device, or an emulated disk on a sparse
//!   image in a private directory) and its set-up and teardown;
//! - [`timed`]: the one timed request loop of every micro-benchmark;
//! - [`check`]: the micro-benchmarks and the model's figures for the same requests;
//! - [`pairs`]: the read pairs (seek curve, same-track reads);
//! - [`fit`]: the fit of a profile to the measurements;
//! - [`page`]: the check and the fit as pages (terminal text, tables, JSON).

pub mod check;
pub mod fit;
pub mod page;
pub mod pairs;
pub mod target;
pub mod timed;
