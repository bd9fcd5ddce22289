//! Exit codes and the error that selects exit code 2 (invalid input).

/// Exit code for invalid input: rules, captures, arguments.
pub const EXIT_INVALID: u8 = 2;
/// Exit code for a runtime failure.
pub const EXIT_FAILURE: u8 = 1;

/// An error that maps to exit code 2 (bad input) rather than 1.
#[derive(Debug)]
pub struct InvalidInput(pub String);

impl std::fmt::Display for InvalidInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidInput {}

/// Whether `err` is one the user can fix in what they gave (exit code 2): invalid input, a
/// capture that cannot be read, a configuration the agent refuses.
pub fn is_invalid_input(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<InvalidInput>().is_some()
            || e.downcast_ref::<vigil_capture::SourceError>().is_some()
            || e.downcast_ref::<vigil_agent::AgentError>()
                .is_some_and(|e| {
                    // A capture that cannot be read, as a `SourceError` of its own above.
                    e.is_invalid_input() || matches!(e, vigil_agent::AgentError::Source(_))
                })
    })
}
