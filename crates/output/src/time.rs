//! UTC time formatting for alerts, without a calendar dependency.
//!
//! Alerts print UTC on every host so that outputs are reproducible (golden tests, replays on
//! another machine); Falco prints local time, which equals UTC on the usual container host.

const NANOS_PER_SEC: u64 = 1_000_000_000;
const SECS_PER_DAY: u64 = 86_400;

/// `HH:MM:SS.nnnnnnnnn` of `ns` nanoseconds since the epoch.
pub fn clock(ns: u64) -> String {
    let secs = ns / NANOS_PER_SEC;
    let day_secs = secs % SECS_PER_DAY;
    format!(
        "{:02}:{:02}:{:02}.{:09}",
        day_secs / 3600,
        day_secs / 60 % 60,
        day_secs % 60,
        ns % NANOS_PER_SEC
    )
}

/// `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ` of `ns` nanoseconds since the epoch.
pub fn rfc3339(ns: u64) -> String {
    let secs = ns / NANOS_PER_SEC;
    let (year, month, day) = civil_from_days(secs / SECS_PER_DAY);
    format!("{year:04}-{month:02}-{day:02}T{}Z", clock(ns))
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's days-to-civil algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            rfc3339(1_700_000_000_123_456_789),
            "2023-11-14T22:13:20.123456789Z"
        );
        // Leap day and the turn of a century that is a leap year.
        assert_eq!(
            rfc3339(951_782_400 * NANOS_PER_SEC),
            "2000-02-29T00:00:00.000000000Z"
        );
        assert_eq!(
            rfc3339(4_107_542_399 * NANOS_PER_SEC),
            "2100-02-28T23:59:59.000000000Z"
        );
        assert_eq!(clock(86_399 * NANOS_PER_SEC + 1), "23:59:59.000000001");
    }
}
