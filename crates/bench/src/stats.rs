//! Pure arithmetic and scheduling shared by the benches: medians, the UnixBench index and its
//! geometric mean, percentage change, the interleaved run order, rate pacing, the capacity ramp
//! and the halving sleep of the generator bench. No I/O here.

use std::time::Duration;

/// The median of `values` (mean of the middle two for an even count); `None` when empty or
/// when any value is not finite.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// UnixBench's index value: the score relative to the baseline system, times 10.
pub fn unixbench_index(score: f64, baseline: f64) -> f64 {
    score / baseline * 10.0
}

/// Geometric mean of strictly positive values; `None` when empty or when any value is not
/// strictly positive (UnixBench's overall index is the geometric mean of the test indices).
pub fn geometric_mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return None;
    }
    let log_sum: f64 = values.iter().map(|v| v.ln()).sum();
    Some((log_sum / values.len() as f64).exp())
}

/// Percentage change from `base` to `value`; `None` when the base is zero or not finite.
pub fn percent_change(base: f64, value: f64) -> Option<f64> {
    if base == 0.0 || !base.is_finite() || !value.is_finite() {
        return None;
    }
    Some((value - base) / base * 100.0)
}

/// One slot of an interleaved run: which iteration and which configuration (0 = agent off).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub iteration: usize,
    pub config: usize,
}

/// The interleaved order: for each iteration, every configuration in turn
/// (off, on₁, on₂, …, off, on₁, …), so slow drift of the machine hits every configuration alike.
pub fn interleaved_schedule(iterations: usize, configs: usize) -> Vec<Slot> {
    (0..iterations)
        .flat_map(|iteration| (0..configs).map(move |config| Slot { iteration, config }))
        .collect()
}

/// Paces operations at a fixed rate: operation `k` (from 0) is due at `k / rate` seconds.
#[derive(Clone, Copy, Debug)]
pub struct Pacer {
    rate: f64,
}

impl Pacer {
    /// A pacer for `rate` operations per second (at least one per hour).
    pub fn new(rate: f64) -> Pacer {
        Pacer {
            rate: if rate.is_finite() && rate > 1.0 / 3600.0 {
                rate
            } else {
                1.0 / 3600.0
            },
        }
    }

    /// How many operations are due by `elapsed` (the first is due at once).
    pub fn due(&self, elapsed: Duration) -> u64 {
        (self.rate * elapsed.as_secs_f64()).floor() as u64 + 1
    }

    /// How long to wait, after `done` operations at `elapsed`, until the next is due.
    pub fn wait(&self, done: u64, elapsed: Duration) -> Duration {
        let next_at = done as f64 / self.rate;
        let now = elapsed.as_secs_f64();
        if next_at > now {
            Duration::from_secs_f64(next_at - now)
        } else {
            Duration::ZERO
        }
    }
}

/// How the capacity ramp grows: multiply by a factor (`x1.5`) or add a constant (`50000`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    Factor(f64),
    Add(f64),
}

impl Step {
    /// Parses `x2`/`*2` (factor > 1) or a positive number (increment).
    pub fn parse(text: &str) -> Option<Step> {
        let text = text.trim();
        if let Some(factor) = text.strip_prefix(['x', '*']) {
            let factor: f64 = factor.parse().ok()?;
            return (factor.is_finite() && factor > 1.0).then_some(Step::Factor(factor));
        }
        let add: f64 = text.parse().ok()?;
        (add.is_finite() && add > 0.0).then_some(Step::Add(add))
    }

    /// The rates of a ramp from `start` up to `max` inclusive (at most `limit` steps).
    pub fn ramp(self, start: f64, max: f64, limit: usize) -> Vec<f64> {
        let mut rates = Vec::new();
        let mut rate = start;
        while rate <= max * (1.0 + 1e-9) && rates.len() < limit && rate > 0.0 {
            rates.push(rate);
            rate = match self {
                Step::Factor(f) => rate * f,
                Step::Add(a) => rate + a,
            };
        }
        rates
    }
}

/// The generator bench's sleep for the next round (Falco event-generator's rule): halved after
/// a clean round when looping, unchanged after a round that received unexpected alerts.
pub fn next_sleep(sleep: Duration, looping: bool, dirty: bool) -> Duration {
    if looping && !dirty && !sleep.is_zero() {
        sleep / 2
    } else {
        sleep
    }
}

/// Lost percentage of expected alerts (0 when nothing was expected; never negative).
pub fn lost_percent(expected: u64, actual: u64) -> f64 {
    if expected == 0 || actual >= expected {
        0.0
    } else {
        (expected - actual) as f64 / expected as f64 * 100.0
    }
}

/// `YYYYmmdd-HHMMSS` (UTC) for seconds since the epoch.
pub fn timestamp(epoch_secs: u64) -> String {
    let (y, mo, d, h, mi, s) = civil(epoch_secs);
    format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
}

/// `YYYY-mm-dd HH:MM:SS UTC` for seconds since the epoch.
pub fn human_time(epoch_secs: u64) -> String {
    let (y, mo, d, h, mi, s) = civil(epoch_secs);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC")
}

/// Calendar date and time (UTC) from seconds since the epoch (days-from-civil inverse).
fn civil(epoch_secs: u64) -> (i64, u32, u32, u64, u64, u64) {
    let days = (epoch_secs / 86_400) as i64;
    let secs = epoch_secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, secs / 3600, secs / 60 % 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_and_invalid() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0), "odd count");
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5), "even count");
        assert_eq!(median(&[]), None, "empty");
        assert_eq!(median(&[1.0, f64::NAN]), None, "NaN");
    }

    #[test]
    fn index_is_score_over_baseline_times_ten() {
        assert!(
            (unixbench_index(15_000.0, 15_000.0) - 10.0).abs() < 1e-12,
            "baseline → 10"
        );
        assert!(
            (unixbench_index(236_058.2, 4_000.0) - 590.1455).abs() < 1e-3,
            "context1"
        );
    }

    #[test]
    fn geometric_mean_values() {
        let g = geometric_mean(&[10.0, 1000.0]).expect("defined");
        assert!((g - 100.0).abs() < 1e-9, "sqrt(10*1000) = 100, got {g}");
        let g = geometric_mean(&[2.0, 8.0, 4.0]).expect("defined");
        assert!((g - 4.0).abs() < 1e-9, "cbrt(64) = 4, got {g}");
        assert_eq!(geometric_mean(&[]), None, "empty");
        assert_eq!(geometric_mean(&[1.0, 0.0]), None, "zero");
        assert_eq!(geometric_mean(&[1.0, -1.0]), None, "negative");
    }

    #[test]
    fn percent_change_values() {
        assert_eq!(percent_change(200.0, 150.0), Some(-25.0), "loss");
        assert_eq!(percent_change(100.0, 110.0), Some(10.0), "gain");
        assert_eq!(percent_change(0.0, 1.0), None, "zero base");
    }

    #[test]
    fn schedule_interleaves_configs() {
        let order: Vec<(usize, usize)> = interleaved_schedule(3, 2)
            .into_iter()
            .map(|s| (s.iteration, s.config))
            .collect();
        assert_eq!(
            order,
            vec![(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)],
            "off, on, off, on, off, on"
        );
        assert_eq!(interleaved_schedule(2, 3).len(), 6, "three configs");
    }

    #[test]
    fn pacer_due_and_wait() {
        let p = Pacer::new(100.0);
        assert_eq!(p.due(Duration::ZERO), 1, "first op due at once");
        assert_eq!(
            p.due(Duration::from_millis(105)),
            11,
            "10.5 periods → 11 ops"
        );
        assert_eq!(
            p.wait(1, Duration::ZERO),
            Duration::from_millis(10),
            "next at 10 ms"
        );
        assert_eq!(
            p.wait(5, Duration::from_millis(100)),
            Duration::ZERO,
            "behind schedule → no wait"
        );
        let p = Pacer::new(0.0);
        assert_eq!(p.due(Duration::from_secs(1)), 1, "degenerate rate clamps");
    }

    #[test]
    fn step_parse_and_ramp() {
        assert_eq!(Step::parse("x2"), Some(Step::Factor(2.0)), "factor");
        assert_eq!(Step::parse("50000"), Some(Step::Add(50_000.0)), "add");
        assert_eq!(Step::parse("x1"), None, "factor must grow");
        assert_eq!(Step::parse("-5"), None, "negative");
        assert_eq!(Step::parse("abc"), None, "garbage");
        assert_eq!(
            Step::Factor(2.0).ramp(100.0, 800.0, 10),
            vec![100.0, 200.0, 400.0, 800.0],
            "doubling"
        );
        assert_eq!(
            Step::Add(50.0).ramp(100.0, 220.0, 10),
            vec![100.0, 150.0, 200.0],
            "add"
        );
        assert_eq!(Step::Factor(2.0).ramp(1.0, 1e9, 3).len(), 3, "limit");
    }

    #[test]
    fn sleep_halves_only_after_clean_loop_rounds() {
        let s = Duration::from_millis(100);
        assert_eq!(
            next_sleep(s, true, false),
            Duration::from_millis(50),
            "clean → halve"
        );
        assert_eq!(next_sleep(s, true, true), s, "dirty → keep");
        assert_eq!(next_sleep(s, false, false), s, "no loop → keep");
        assert_eq!(
            next_sleep(Duration::ZERO, true, false),
            Duration::ZERO,
            "zero stays"
        );
    }

    #[test]
    fn lost_percent_values() {
        assert_eq!(lost_percent(10, 10), 0.0, "none lost");
        assert_eq!(lost_percent(10, 7), 30.0, "30% lost");
        assert_eq!(lost_percent(0, 3), 0.0, "nothing expected");
        assert_eq!(lost_percent(4, 9), 0.0, "surplus is not loss");
    }

    #[test]
    fn timestamps() {
        assert_eq!(timestamp(0), "19700101-000000", "epoch");
        assert_eq!(
            timestamp(1_795_299_787),
            "20261121-222307",
            "a known instant"
        );
        assert_eq!(
            human_time(951_782_400),
            "2000-02-29 00:00:00 UTC",
            "leap day"
        );
    }
}
