//! Reports: pure functions of result documents. This module holds the human tables that
//! commands print; every figure comes from [`crate::results::RunResult`]s.

pub mod table;
