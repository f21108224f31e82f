//! The three ways a command can fail, and the exit codes they map to (ARCHITECTURE.md, command-line
//! conventions): 1 when the measured system failed (a verification mismatch, ENOSPC during a
//! measured phase), 2 for bad input or a set-up failure, 128 + the signal's number after SIGINT (130) or
//! SIGTERM (143), as a shell reports a process the signal killed.
//!
//! Library code returns `anyhow::Error`s whose chain contains one of these markers; `main` walks
//! the chain to pick the exit code. Errors without a marker are set-up failures (exit 2).

/// Bad input: a flag, plan field or size that cannot be used. Nothing was created.
#[derive(Debug, thiserror::Error)]
#[error("{msg}")]
pub struct BadInput {
    /// What is wrong and what to do, naming the flag (`--threads 0: use 1 to 4096 threads`).
    pub msg: String,
    /// The parameter at fault, under its plan-file name (`threads`), when one is: a plan
    /// points at where it is written.
    pub field: Option<&'static str>,
    /// Further parameters that share the fault with `field` (`levels` with `dirs_per_level`
    /// when only their combination is too large).
    pub also: &'static [&'static str],
}

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
    anyhow::Error::new(BadInput {
        msg: msg.into(),
        field: None,
        also: &[],
    })
}

/// An `anyhow::Error` carrying [`BadInput`] about one parameter (its plan-file name).
pub fn bad_param(field: &'static str, msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput {
        msg: msg.into(),
        field: Some(field),
        also: &[],
    })
}

/// An `anyhow::Error` carrying [`BadInput`] about parameters that are at fault only together
/// (the first is where a plan points).
pub fn bad_params(fields: &'static [&'static str], msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput {
        msg: msg.into(),
        field: fields.first().copied(),
        also: fields.get(1..).unwrap_or(&[]),
    })
}

/// Every parameter an error is about: [`bad_field`]'s, then those that share the fault.
pub fn bad_fields(err: &anyhow::Error) -> Vec<&'static str> {
    err.chain()
        .find_map(|c| c.downcast_ref::<BadInput>())
        .map(|b| {
            b.field
                .iter()
                .copied()
                .chain(b.also.iter().copied())
                .collect()
        })
        .unwrap_or_default()
}

/// The parameter an error is about, when it is a [`BadInput`] that names one.
pub fn bad_field(err: &anyhow::Error) -> Option<&'static str> {
    err.chain()
        .find_map(|c| c.downcast_ref::<BadInput>())
        .and_then(|b| b.field)
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
