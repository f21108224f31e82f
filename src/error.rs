//! The three ways a command can fail, and the exit codes they map to (DESIGN.md, command-line
//! conventions): 1 when the measured system failed (a verification mismatch, ENOSPC during a
//! measured phase), 2 for bad input or a set-up failure, 130 after SIGINT/SIGTERM.
//!
//! Library code returns `anyhow::Error`s whose chain contains one of these markers; `main` walks
//! the chain to pick the exit code. Errors without a marker are set-up failures (exit 2).

/// Bad input: a flag, plan field or size that cannot be used. Nothing was created.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// The filesystem under test misbehaved: data did not verify, or an operation failed mid-phase.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SystemFailure(pub String);

/// The run was stopped by SIGINT or SIGTERM; everything it made has been torn down.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by {0}; the testbed was torn down")]
pub struct Interrupted(pub &'static str);

/// Shorthand: an `anyhow::Error` carrying [`BadInput`].
pub fn bad_input(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput(msg.into()))
}

/// The documented exit code for an error chain.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if cause.is::<Interrupted>() {
            return 130;
        }
        if cause.is::<SystemFailure>() {
            return 1;
        }
        if cause.is::<BadInput>() {
            return 2;
        }
    }
    2
}
