//! Rule priorities (Falco's syslog-style severities).

use std::fmt;

/// A rule's priority, most severe first: `Emergency < Alert < … < Debug` in declaration order,
/// so "at least as severe as `p`" is `self <= p`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    Emergency,
    Alert,
    Critical,
    Error,
    Warning,
    Notice,
    Informational,
    Debug,
}

impl Priority {
    /// Every priority, most severe first.
    pub const ALL: [Priority; 8] = [
        Priority::Emergency,
        Priority::Alert,
        Priority::Critical,
        Priority::Error,
        Priority::Warning,
        Priority::Notice,
        Priority::Informational,
        Priority::Debug,
    ];

    /// Parses a priority as Falco does: case-insensitive, `info` is `informational`.
    pub fn parse(text: &str) -> Option<Priority> {
        let lower = text.trim().to_ascii_lowercase();
        Some(match lower.as_str() {
            "emergency" => Priority::Emergency,
            "alert" => Priority::Alert,
            "critical" => Priority::Critical,
            "error" => Priority::Error,
            "warning" => Priority::Warning,
            "notice" => Priority::Notice,
            "informational" | "info" => Priority::Informational,
            "debug" => Priority::Debug,
            _ => return None,
        })
    }

    /// The name Falco prints in alerts (`Warning`, `Informational` …).
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Emergency => "Emergency",
            Priority::Alert => "Alert",
            Priority::Critical => "Critical",
            Priority::Error => "Error",
            Priority::Warning => "Warning",
            Priority::Notice => "Notice",
            Priority::Informational => "Informational",
            Priority::Debug => "Debug",
        }
    }

    /// Whether a rule of this priority passes a minimum-priority threshold `min`.
    pub fn at_least(self, min: Priority) -> bool {
        self <= min
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_case_insensitively_with_info_alias() {
        assert_eq!(Priority::parse("WARNING"), Some(Priority::Warning));
        assert_eq!(Priority::parse("info"), Some(Priority::Informational));
        assert_eq!(
            Priority::parse("Informational"),
            Some(Priority::Informational)
        );
        assert_eq!(Priority::parse("Emergency"), Some(Priority::Emergency));
        assert_eq!(Priority::parse("loud"), None);
        for p in Priority::ALL {
            assert_eq!(Priority::parse(p.as_str()), Some(p), "round trip of {p}");
        }
    }

    #[test]
    fn threshold_orders_by_severity() {
        assert!(Priority::Critical.at_least(Priority::Warning));
        assert!(Priority::Warning.at_least(Priority::Warning));
        assert!(!Priority::Notice.at_least(Priority::Warning));
    }
}
