//! The three ways a command can fail, and the exit codes they map to (DESIGN.md, command-line
//! conventions): 1 when the measured system failed (a verification mismatch, ENOSPC during a
//! measured phase), 2 for bad input or a set-up failure, 128 + the signal's number after SIGINT (130) or
//! SIGTERM (143), as a shell reports a process the signal killed.
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

/// The run was stopped by SIGINT or SIGTERM (the signal's number); everything it made has been
/// torn down.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by {}; the testbed was torn down", signal_name(*.0))]
pub struct Interrupted(pub i32);

/// A signal arrived after the command had finished parts of its work and left them in place
/// (result files, a kept testbed): the process still ends as interrupted (130/143), and what was
/// finished is named, so that the user knows it is complete.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by {} after {}", signal_name(self.sig), self.kept.join("; "))]
pub struct InterruptedAfter {
    /// The signal's number.
    pub sig: i32,
    /// What was complete before it, as sentences ("the result of rep 2 was written: … is
    /// complete").
    pub kept: Vec<String>,
}

fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".to_string(),
        libc::SIGTERM => "SIGTERM".to_string(),
        n => format!("signal {n}"),
    }
}

/// Shorthand: an `anyhow::Error` carrying [`BadInput`].
pub fn bad_input(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput(msg.into()))
}

/// The documented exit code for an error chain.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if let Some(Interrupted(sig)) = cause.downcast_ref::<Interrupted>() {
            return (128 + sig).clamp(0, 255) as u8;
        }
        if let Some(InterruptedAfter { sig, .. }) = cause.downcast_ref::<InterruptedAfter>() {
            return (128 + sig).clamp(0, 255) as u8;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interruption_after_kept_results_exits_as_the_signal_and_names_them() {
        let e = anyhow::Error::new(InterruptedAfter {
            sig: libc::SIGTERM,
            kept: vec!["the result of rep 0 was written: r.json is complete".into()],
        });
        assert_eq!(exit_code(&e), 143);
        assert_eq!(
            format!("{e:#}"),
            "interrupted by SIGTERM after the result of rep 0 was written: r.json is complete"
        );
    }
}
