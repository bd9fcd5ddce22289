//! [`Timers`]: the agent's periodic jobs, each at the rate it needs, on one clock.
//!
//! The event loop asks [`Timers::next_due`] how long its source may block, and
//! [`Timers::take_due`] which jobs to run when it wakes (or between batches: a check is a clock
//! read). The jobs run on their own schedule, not on the loop's: a busy loop does not run them
//! more often, an idle one wakes only for them. Every job's due times lie on one grid, `origin +
//! k × period`, so jobs whose periods divide each other (the 250 ms file check, the 1 s metrics,
//! a 5 s stats file) fall due at the same instants and cost one wakeup between them. A job that
//! was late (a long batch) runs once and goes back to its grid; missed periods are not made up.

use std::time::{Duration, Instant};

/// A periodic job of the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Job {
    /// The engine's and source's counters into the metrics registry, the process's CPU and
    /// memory, and the drop alert ([`METRICS_EVERY`]).
    Metrics,
    /// Falco's stats file line (`-s FILE`, every `--stats-interval`).
    StatsFile,
    /// Falco's metrics snapshot (`metrics.enabled`, every `metrics.interval`).
    Snapshot,
    /// `watch_config_files`: a look at the watched files ([`crate::filewatch::READ_EVERY`]).
    ConfigFiles,
}

impl Job {
    const ALL: [Job; 4] = [
        Job::Metrics,
        Job::StatsFile,
        Job::Snapshot,
        Job::ConfigFiles,
    ];

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// How often the counters reach `/metrics` and the drop alert is checked.
pub const METRICS_EVERY: Duration = Duration::from_secs(1);

/// The jobs [`Timers::take_due`] found due.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Due(u8);

impl Due {
    /// Every job.
    pub fn all() -> Due {
        Due(Job::ALL.iter().fold(0, |bits, j| bits | j.bit()))
    }

    pub fn contains(self, job: Job) -> bool {
        self.0 & job.bit() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// These jobs and `job`.
    pub fn with(self, job: Job) -> Due {
        Due(self.0 | job.bit())
    }
}

#[derive(Clone, Copy, Debug)]
struct Timer {
    period: Duration,
    next: Instant,
}

/// The periodic jobs and when each is due next.
#[derive(Clone, Debug)]
pub struct Timers {
    origin: Instant,
    timers: [Option<Timer>; 4],
}

impl Timers {
    /// No job yet; due times are counted from `origin`.
    pub fn new(origin: Instant) -> Timers {
        Timers {
            origin,
            timers: [None; 4],
        }
    }

    /// Runs `job` every `period` (at least a millisecond), first at the first grid point after
    /// `now` (or at `now` itself with `at_once`); `None` stops it.
    pub fn set(&mut self, job: Job, period: Option<Duration>, now: Instant, at_once: bool) {
        self.timers[job as usize] = period.map(|period| {
            let period = period.max(Duration::from_millis(1));
            Timer {
                period,
                next: if at_once {
                    now
                } else {
                    self.after(now, period)
                },
            }
        });
    }

    /// The period of `job`, if it runs.
    pub fn period(&self, job: Job) -> Option<Duration> {
        self.timers[job as usize].map(|t| t.period)
    }

    /// When the next job is due (`None`: no job at all).
    pub fn next_due(&self) -> Option<Instant> {
        self.timers.iter().flatten().map(|t| t.next).min()
    }

    /// The jobs due at `now`; each is due next at its first grid point after `now`.
    pub fn take_due(&mut self, now: Instant) -> Due {
        let mut due = Due::default();
        for job in Job::ALL {
            let Some(timer) = self.timers[job as usize] else {
                continue;
            };
            if timer.next <= now {
                due = due.with(job);
                let next = self.after(now, timer.period);
                if let Some(t) = self.timers[job as usize].as_mut() {
                    t.next = next;
                }
            }
        }
        due
    }

    /// The first point `origin + k × period` strictly after `now`.
    fn after(&self, now: Instant, period: Duration) -> Instant {
        let since = now.saturating_duration_since(self.origin).as_nanos();
        let period_ns = period.as_nanos().max(1);
        let k = since / period_ns + 1;
        let offset = u64::try_from(period_ns.saturating_mul(k)).unwrap_or(u64::MAX);
        self.origin + Duration::from_nanos(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The instants (ms after `origin`) at which `take_due` finds something due when it is
    /// asked only at `next_due` (a loop that blocks until then), up to `until` ms, with what
    /// was due each time.
    fn wakeups(timers: &mut Timers, origin: Instant, until: u64) -> Vec<(u64, Vec<Job>)> {
        let mut out = Vec::new();
        while let Some(next) = timers.next_due() {
            let at = (next - origin).as_millis() as u64;
            if at > until {
                break;
            }
            let due = timers.take_due(next);
            assert!(!due.is_empty(), "woken at {at} ms for nothing");
            out.push((
                at,
                Job::ALL.into_iter().filter(|j| due.contains(*j)).collect(),
            ));
        }
        out
    }

    #[test]
    fn jobs_on_one_grid_share_their_wakeups() {
        let origin = Instant::now();
        let mut timers = Timers::new(origin);
        timers.set(Job::Metrics, Some(ms(1000)), origin, true);
        timers.set(Job::ConfigFiles, Some(ms(250)), origin, false);
        timers.set(Job::StatsFile, Some(ms(2000)), origin, false);
        let got = wakeups(&mut timers, origin, 2000);
        use Job::*;
        assert_eq!(
            got,
            [
                (0, vec![Metrics]),
                (250, vec![ConfigFiles]),
                (500, vec![ConfigFiles]),
                (750, vec![ConfigFiles]),
                (1000, vec![Metrics, ConfigFiles]),
                (1250, vec![ConfigFiles]),
                (1500, vec![ConfigFiles]),
                (1750, vec![ConfigFiles]),
                (2000, vec![Metrics, StatsFile, ConfigFiles]),
            ]
        );
    }

    #[test]
    fn an_idle_agent_wakes_once_a_second_without_the_file_check() {
        let origin = Instant::now();
        let mut timers = Timers::new(origin);
        timers.set(Job::Metrics, Some(METRICS_EVERY), origin, true);
        timers.set(Job::StatsFile, Some(ms(5000)), origin, false);
        timers.set(
            Job::Snapshot,
            Some(Duration::from_secs(3600)),
            origin,
            false,
        );
        let got = wakeups(&mut timers, origin, 60_000);
        assert_eq!(got.len(), 61, "at 0 and every second: {got:?}");
        assert!(got.iter().all(|(at, _)| at % 1000 == 0), "{got:?}");
        let stats = got
            .iter()
            .filter(|(_, jobs)| jobs.contains(&Job::StatsFile))
            .count();
        assert_eq!(stats, 12, "every 5 s");
    }

    #[test]
    fn a_busy_loop_does_not_run_a_job_more_often_and_a_late_one_keeps_its_grid() {
        let origin = Instant::now();
        let mut timers = Timers::new(origin);
        timers.set(Job::Metrics, Some(ms(1000)), origin, false);
        // Asked every millisecond for 3 s: due three times, on the grid.
        let mut runs = Vec::new();
        for t in 0..=3000 {
            if timers.take_due(origin + ms(t)).contains(Job::Metrics) {
                runs.push(t);
            }
        }
        assert_eq!(runs, [1000, 2000, 3000]);
        // Late by 2.5 s (a long batch): it runs once, then at 6 s, not at 4.5 s (nor three
        // times to catch up).
        assert!(timers.take_due(origin + ms(5500)).contains(Job::Metrics));
        assert!(timers.take_due(origin + ms(5999)).is_empty());
        assert_eq!(timers.next_due(), Some(origin + ms(6000)));
    }

    #[test]
    fn a_stopped_or_unset_job_is_never_due() {
        let origin = Instant::now();
        let mut timers = Timers::new(origin);
        assert_eq!(timers.next_due(), None);
        timers.set(Job::Snapshot, Some(ms(10)), origin, false);
        assert_eq!(timers.period(Job::Snapshot), Some(ms(10)));
        timers.set(Job::Snapshot, None, origin, false);
        assert_eq!(timers.next_due(), None);
        assert!(timers.take_due(origin + ms(100)).is_empty());
        // A zero period is a millisecond: never a loop that does not block.
        timers.set(Job::StatsFile, Some(Duration::ZERO), origin, false);
        assert_eq!(timers.next_due(), Some(origin + ms(1)));
    }
}
