//! Delivery to one output: a bounded in-memory queue, a worker thread, retries with capped
//! exponential backoff, and an optional bounded on-disk spool.
//!
//! Order is kept end to end: the record being delivered (the head) is always the oldest, then
//! the spool, then the queue. When a delivery fails, the head and the whole queue move to the
//! spool; when the queue is full, the producer moves the queue to the spool before adding. An
//! alert is dropped only when the queue is full and the spool is absent or over its byte
//! budget (or, without a spool, after `max_attempts` failed attempts or, for an output with a
//! consecutive-timeout budget, after more timed-out attempts in a row than it allows); every
//! drop is counted per reason.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::metrics::Metrics;
use crate::sinks::{Sink, SinkError};
use crate::spool::Spool;

/// One formatted alert on its way to an output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Syslog severity (0 emergency … 7 debug) of the alert's priority.
    pub severity: u8,
    /// The formatted alert, without a trailing newline.
    pub body: Arc<str>,
}

/// Why an alert was dropped (the `reason` label).
pub mod reason {
    /// The in-memory queue was full and there is no spool.
    pub const QUEUE_FULL: &str = "queue_full";
    /// The queue was full and the spool's byte budget was exhausted.
    pub const SPOOL_FULL: &str = "spool_full";
    /// The spool could not be written.
    pub const SPOOL_ERROR: &str = "spool_error";
    /// No spool, and every attempt failed.
    pub const DELIVERY_FAILED: &str = "delivery_failed";
    /// Still queued in memory when the shutdown deadline passed.
    pub const SHUTDOWN: &str = "shutdown";
    /// Unreadable spool records (torn by a crash).
    pub const SPOOL_CORRUPT: &str = "spool_corrupt";
    /// The output is closed for good (standard output closed by the reader).
    pub const CLOSED: &str = "output_closed";
    /// Given up after more consecutive timed-out attempts than the output allows (Falco's
    /// `http_output.max_consecutive_timeouts`).
    pub const TIMEOUT: &str = "timeout";
}

/// How one output is delivered to.
#[derive(Clone, Debug)]
pub struct DeliveryOptions {
    pub queue_capacity: usize,
    /// Spool directory and byte budget.
    pub spool: Option<(std::path::PathBuf, u64)>,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Attempts per alert when there is no spool (with a spool, attempts never stop).
    pub max_attempts: u32,
    /// Falco's `max_consecutive_timeouts`: when set, an attempt that times out
    /// ([`SinkError::Timeout`]) is retried at once, up to this many times in a row. Then,
    /// without a spool, the alert is given up (dropped with reason [`reason::TIMEOUT`],
    /// counted), as Falco does; with a spool, the output counts as down like after any other
    /// failure (backoff, the spool keeps the alerts). `None`: timeouts are failures like any
    /// other.
    pub max_consecutive_timeouts: Option<u32>,
}

impl Default for DeliveryOptions {
    fn default() -> Self {
        DeliveryOptions {
            queue_capacity: 100_000,
            spool: None,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(30),
            max_attempts: 5,
            max_consecutive_timeouts: None,
        }
    }
}

/// What one output did over its lifetime.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SinkReport {
    pub name: String,
    pub accepted: u64,
    pub delivered: u64,
    /// Failed attempts (timeouts included).
    pub failures: u64,
    /// Attempts that timed out.
    pub timeouts: u64,
    /// Dropped alerts by reason.
    pub dropped: BTreeMap<String, u64>,
    /// Alerts left in the spool at exit (delivered by the next run).
    pub spooled_at_exit: u64,
}

impl SinkReport {
    pub fn dropped_total(&self) -> u64 {
        self.dropped.values().sum()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    Queue,
    Spool,
}

struct State {
    queue: VecDeque<Record>,
    spool: Option<Spool>,
    head: Option<(Record, Origin)>,
    report: SinkReport,
    reopen: bool,
    /// Set by `shutdown`: deliver what is pending until this instant, then stop.
    deadline: Option<Instant>,
    /// The worker is waiting out a backoff after a failure.
    failing: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    capacity: usize,
    name: String,
    metrics: Metrics,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn drop_record(&self, state: &mut State, why: &str) {
        *state.report.dropped.entry(why.to_owned()).or_insert(0) += 1;
        self.metrics.add(
            "vigil_output_dropped_total",
            &[("sink", &self.name), ("reason", why)],
            1.0,
        );
        let total = state.report.dropped_total();
        // One log line for the first drop and then every 1000th, so a flood stays readable.
        if why != reason::CLOSED && (total == 1 || total.is_multiple_of(1000)) {
            log::warn!(
                "output `{}`: dropped {total} alert(s) so far (latest reason: {why})",
                self.name
            );
        }
    }

    /// One failed attempt (`timed_out`: a timeout): counted in the report and the metrics;
    /// the output is failing until a delivery succeeds.
    fn count_failure(&self, state: &mut State, timed_out: bool) {
        state.report.failures += 1;
        state.failing = true;
        let labels = [("sink", self.name.as_str())];
        self.metrics
            .add("vigil_output_delivery_failures_total", &labels, 1.0);
        if timed_out {
            state.report.timeouts += 1;
            self.metrics
                .add("vigil_output_timeouts_total", &labels, 1.0);
        }
    }

    fn gauges(&self, state: &State) {
        let depth = state.queue.len() + usize::from(state.head.is_some());
        self.metrics.set(
            "vigil_output_queue_depth",
            &[("sink", &self.name)],
            depth as f64,
        );
        if let Some(spool) = &state.spool {
            self.metrics.set(
                "vigil_output_spool_bytes",
                &[("sink", &self.name)],
                spool.bytes() as f64,
            );
        }
    }

    /// Moves the head (if it came from the queue) and the queue into the spool, oldest first;
    /// what does not fit stays in the queue.
    fn spill(&self, state: &mut State) {
        let State {
            queue, spool, head, ..
        } = state;
        let Some(spool) = spool.as_mut() else {
            return;
        };
        if let Some((record, origin)) = head.as_mut() {
            if *origin == Origin::Queue {
                match spool.push(record) {
                    Ok(true) => *origin = Origin::Spool,
                    // No room: the head stays in memory and the queue must wait behind it.
                    Ok(false) => return,
                    Err(e) => {
                        log::warn!("output `{}`: cannot write spool: {e}", self.name);
                        return;
                    }
                }
            }
        }
        while let Some(record) = queue.front() {
            match spool.push(record) {
                Ok(true) => {
                    queue.pop_front();
                }
                Ok(false) => break,
                Err(e) => {
                    log::warn!("output `{}`: cannot write spool: {e}", self.name);
                    break;
                }
            }
        }
    }
}

/// A running output: enqueue from the pipeline thread, delivered by a worker thread.
pub struct Delivery {
    shared: Arc<Shared>,
    worker: Option<JoinHandle<()>>,
}

impl Delivery {
    /// Starts the worker for `sink`. Fails when the spool directory cannot be opened.
    pub fn start(
        sink: Box<dyn Sink>,
        options: DeliveryOptions,
        metrics: &Metrics,
    ) -> std::io::Result<Delivery> {
        let name = sink.name().to_owned();
        let spool = match &options.spool {
            Some((dir, max)) => Some(Spool::open(dir, *max)?),
            None => None,
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                spool,
                head: None,
                report: SinkReport {
                    name: name.clone(),
                    ..SinkReport::default()
                },
                reopen: false,
                deadline: None,
                failing: false,
            }),
            wake: Condvar::new(),
            capacity: options.queue_capacity.max(1),
            name: name.clone(),
            metrics: metrics.clone(),
        });
        for (family, labels) in [
            (
                "vigil_output_delivered_total",
                vec![("sink", name.as_str())],
            ),
            (
                "vigil_output_delivery_failures_total",
                vec![("sink", name.as_str())],
            ),
            ("vigil_output_queue_depth", vec![("sink", name.as_str())]),
        ] {
            metrics.add(family, &labels, 0.0);
        }
        shared.gauges(&shared.lock());
        let worker_shared = Arc::clone(&shared);
        let worker = std::thread::Builder::new()
            .name(format!("vigil-out-{name}"))
            .spawn(move || run(worker_shared, sink, options))?;
        Ok(Delivery {
            shared,
            worker: Some(worker),
        })
    }

    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Queues a record. Never blocks on the output; when the queue is full the queue moves to
    /// the spool, and when that is impossible the record is dropped and counted.
    pub fn enqueue(&self, record: Record) {
        let mut state = self.shared.lock();
        state.report.accepted += 1;
        if state.queue.len() >= self.shared.capacity {
            self.shared.spill(&mut state);
        }
        if state.queue.len() >= self.shared.capacity {
            let why = match &state.spool {
                None => reason::QUEUE_FULL,
                Some(_) => reason::SPOOL_FULL,
            };
            self.shared.drop_record(&mut state, why);
        } else {
            state.queue.push_back(record);
        }
        self.shared.gauges(&state);
        drop(state);
        self.shared.wake.notify_one();
    }

    /// Asks the output to reopen its file or connection (log rotation, SIGUSR1).
    pub fn reopen(&self) {
        self.shared.lock().reopen = true;
        self.shared.wake.notify_one();
    }

    /// A copy of the counters so far.
    pub fn report(&self) -> SinkReport {
        self.shared.lock().report.clone()
    }

    /// Alerts waiting (memory and disk).
    pub fn pending(&self) -> u64 {
        let state = self.shared.lock();
        state.queue.len() as u64
            + state.spool.as_ref().map_or(0, Spool::len)
            + u64::from(matches!(state.head, Some((_, Origin::Queue))))
    }

    /// Delivers what is pending until `deadline`, then stops the worker. Alerts still in
    /// memory then go to the spool when there is one (delivered by the next run), else are
    /// dropped with reason `shutdown`.
    pub fn shutdown(mut self, deadline: Instant) -> SinkReport {
        self.stop(deadline)
    }

    fn stop(&mut self, deadline: Instant) -> SinkReport {
        self.shared.lock().deadline = Some(deadline);
        self.shared.wake.notify_all();
        if let Some(worker) = self.worker.take() {
            if worker.join().is_err() {
                log::error!("output `{}`: delivery worker panicked", self.shared.name);
            }
        }
        let mut state = self.shared.lock();
        self.shared.spill(&mut state);
        if let Some((_, Origin::Queue)) = state.head.take() {
            self.shared.drop_record(&mut state, reason::SHUTDOWN);
        }
        while state.queue.pop_front().is_some() {
            self.shared.drop_record(&mut state, reason::SHUTDOWN);
        }
        state.report.spooled_at_exit = state.spool.as_ref().map_or(0, Spool::len);
        self.shared.gauges(&state);
        state.report.clone()
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        if self.worker.is_some() {
            self.stop(Instant::now());
        }
    }
}

/// The worker: take the head, deliver it, acknowledge or back off.
fn run(shared: Arc<Shared>, mut sink: Box<dyn Sink>, options: DeliveryOptions) {
    let mut backoff = options.initial_backoff;
    let mut attempts = 0u32;
    // Timed-out attempts in a row for the head.
    let mut timeouts = 0u32;
    let mut failure_logged = false;
    loop {
        let mut state = shared.lock();
        if std::mem::take(&mut state.reopen) {
            drop(state);
            if let Err(e) = sink.reopen() {
                log::warn!("output `{}`: reopen failed: {e}", shared.name);
            }
            continue;
        }
        if state.deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        if state.head.is_none() {
            let from_spool = match state.spool.as_mut().map(Spool::peek) {
                Some(Ok(Some(record))) => Some(record),
                Some(Ok(None)) | None => None,
                Some(Err(e)) => {
                    log::warn!("output `{}`: cannot read spool: {e}", shared.name);
                    None
                }
            };
            state.head = match from_spool {
                Some(record) => Some((record, Origin::Spool)),
                None => state.queue.pop_front().map(|r| (r, Origin::Queue)),
            };
            let corrupt = state.spool.as_ref().map_or(0, Spool::corrupt);
            let counted = state.report.dropped.get(reason::SPOOL_CORRUPT).copied();
            for _ in counted.unwrap_or(0)..corrupt {
                shared.drop_record(&mut state, reason::SPOOL_CORRUPT);
            }
        }
        let Some((record, _)) = state.head.clone() else {
            if state.deadline.is_some() {
                break;
            }
            drop(state);
            match sink.flush() {
                Ok(()) | Err(SinkError::Closed) => {}
                Err(e) => log::warn!("output `{}`: flush failed: {e}", shared.name),
            }
            let state = shared.lock();
            if state.head.is_none()
                && state.queue.is_empty()
                && state.spool.as_ref().is_none_or(Spool::is_empty)
                && !state.reopen
                && state.deadline.is_none()
            {
                let _unused = shared
                    .wake
                    .wait_timeout(state, Duration::from_secs(1))
                    .unwrap_or_else(|e| e.into_inner());
            }
            continue;
        };
        drop(state);
        let result = sink.send(&record);
        let mut state = shared.lock();
        match result {
            Ok(()) => {
                if let Some((_, Origin::Spool)) = state.head {
                    if let Some(spool) = state.spool.as_mut() {
                        if let Err(e) = spool.ack() {
                            log::warn!("output `{}`: cannot update spool: {e}", shared.name);
                        }
                    }
                }
                state.head = None;
                state.report.delivered += 1;
                shared.metrics.add(
                    "vigil_output_delivered_total",
                    &[("sink", &shared.name)],
                    1.0,
                );
                if state.failing {
                    log::info!("output `{}`: delivering again", shared.name);
                }
                state.failing = false;
                failure_logged = false;
                backoff = options.initial_backoff;
                attempts = 0;
                timeouts = 0;
                shared.gauges(&state);
            }
            Err(SinkError::Closed) => {
                if let Some((_, Origin::Spool)) = state.head {
                    if let Some(spool) = state.spool.as_mut() {
                        let _ = spool.ack();
                    }
                }
                state.head = None;
                timeouts = 0;
                shared.drop_record(&mut state, reason::CLOSED);
                shared.gauges(&state);
            }
            // Within the timeout budget, or past it without a spool (Falco gives the alert
            // up). Past it with a spool, the output counts as down: the generic failure
            // path below keeps everything in the spool and backs off.
            Err(SinkError::Timeout(message))
                if options
                    .max_consecutive_timeouts
                    .is_some_and(|limit| timeouts < limit || state.spool.is_none()) =>
            {
                let limit = options.max_consecutive_timeouts.unwrap_or(0);
                shared.count_failure(&mut state, true);
                timeouts = timeouts.saturating_add(1);
                if timeouts > limit {
                    if !failure_logged {
                        log::warn!(
                            "output `{}`: giving up an alert after {timeouts} consecutive \
                             timeout(s) (max_consecutive_timeouts: {limit}): {message}",
                            shared.name
                        );
                        failure_logged = true;
                    }
                    if let Some((_, Origin::Spool)) = state.head {
                        if let Some(spool) = state.spool.as_mut() {
                            if let Err(e) = spool.ack() {
                                log::warn!("output `{}`: cannot update spool: {e}", shared.name);
                            }
                        }
                    }
                    state.head = None;
                    timeouts = 0;
                    attempts = 0;
                    shared.drop_record(&mut state, reason::TIMEOUT);
                } else {
                    // Retried at once (the timeout was the wait); what waits behind the head
                    // moves to the spool meanwhile.
                    shared.spill(&mut state);
                }
                shared.gauges(&state);
            }
            Err(e) => {
                timeouts = 0;
                shared.count_failure(&mut state, matches!(e, SinkError::Timeout(_)));
                if !failure_logged {
                    log::warn!("output `{}`: delivery failed, retrying: {e}", shared.name);
                    failure_logged = true;
                }
                attempts += 1;
                if state.spool.is_none() && attempts >= options.max_attempts.max(1) {
                    state.head = None;
                    attempts = 0;
                    shared.drop_record(&mut state, reason::DELIVERY_FAILED);
                } else {
                    shared.spill(&mut state);
                }
                shared.gauges(&state);
                let wait = match state.deadline {
                    Some(d) => backoff.min(d.saturating_duration_since(Instant::now())),
                    None => backoff,
                };
                backoff = (backoff * 2).min(options.max_backoff.max(options.initial_backoff));
                if matches!(e, SinkError::Fatal(_)) {
                    log::error!("output `{}`: {e}", shared.name);
                }
                let _unused = shared
                    .wake
                    .wait_timeout_while(state, wait, |s| {
                        !s.reopen && s.deadline.is_none_or(|d| Instant::now() < d)
                    })
                    .unwrap_or_else(|e| e.into_inner());
            }
        }
    }
    match sink.flush() {
        Ok(()) | Err(SinkError::Closed) => {}
        Err(e) => log::warn!("output `{}`: flush failed: {e}", shared.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A sink that fails while `down` is set and records what it delivered.
    #[derive(Clone)]
    struct Flaky {
        down: Arc<AtomicBool>,
        got: Arc<Mutex<Vec<String>>>,
    }

    impl Sink for Flaky {
        fn name(&self) -> &str {
            "flaky"
        }
        fn send(&mut self, record: &Record) -> Result<(), SinkError> {
            if self.down.load(Ordering::SeqCst) {
                return Err(SinkError::Unavailable("down".into()));
            }
            self.got.lock().unwrap().push(record.body.to_string());
            Ok(())
        }
    }

    fn rec(i: u64) -> Record {
        Record {
            severity: 4,
            body: format!("alert-{i:08}").into(),
        }
    }

    fn flaky() -> Flaky {
        Flaky {
            down: Arc::new(AtomicBool::new(false)),
            got: Arc::default(),
        }
    }

    fn fast(queue: usize, spool: Option<(std::path::PathBuf, u64)>) -> DeliveryOptions {
        DeliveryOptions {
            queue_capacity: queue,
            spool,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            max_attempts: 3,
            max_consecutive_timeouts: None,
        }
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    #[test]
    fn outage_with_spool_keeps_every_alert_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let sink = flaky();
        let metrics = Metrics::new();
        let d = Delivery::start(
            Box::new(sink.clone()),
            fast(8, Some((dir.path().to_owned(), 1 << 20))),
            &metrics,
        )
        .unwrap();
        for i in 0..50 {
            d.enqueue(rec(i));
        }
        sink.down.store(true, Ordering::SeqCst);
        for i in 50..2000 {
            d.enqueue(rec(i));
        }
        sink.down.store(false, Ordering::SeqCst);
        for i in 2000..2100 {
            d.enqueue(rec(i));
        }
        let report = d.shutdown(far());
        let got = sink.got.lock().unwrap().clone();
        let want: Vec<String> = (0..2100).map(|i| rec(i).body.to_string()).collect();
        assert_eq!(got.len(), want.len(), "report {report:?}");
        assert!(got == want, "alerts out of order or duplicated");
        assert_eq!(report.dropped_total(), 0);
        assert_eq!(report.delivered, 2100);
        assert_eq!(
            metrics.get("vigil_output_delivered_total", &[("sink", "flaky")]),
            2100.0
        );
    }

    #[test]
    fn long_outage_stays_within_budgets_and_counts_losses() {
        // A long outage simulated by count: a million alerts while the output is down. Memory
        // is bounded by the queue (16 records) and one spool segment; disk by the budget.
        let dir = tempfile::tempdir().unwrap();
        let sink = flaky();
        sink.down.store(true, Ordering::SeqCst);
        let metrics = Metrics::new();
        let budget = 256 * 1024;
        let d = Delivery::start(
            Box::new(sink.clone()),
            fast(16, Some((dir.path().to_owned(), budget))),
            &metrics,
        )
        .unwrap();
        let n = 1_000_000u64;
        let mut max_pending_memory = 0;
        for i in 0..n {
            d.enqueue(rec(i));
            if i % 10_000 == 0 {
                let state = d.shared.lock();
                max_pending_memory = max_pending_memory.max(state.queue.len());
                let bytes = state.spool.as_ref().unwrap().bytes();
                assert!(bytes <= budget, "spool over budget: {bytes}");
            }
        }
        assert!(max_pending_memory <= 16);
        let spooled = d.pending();
        let report = d.report();
        let dropped = report.dropped[reason::SPOOL_FULL];
        assert_eq!(
            spooled + dropped,
            n,
            "every alert is either kept or counted"
        );
        assert_eq!(
            metrics.get(
                "vigil_output_dropped_total",
                &[("sink", "flaky"), ("reason", "spool_full")]
            ),
            dropped as f64
        );
        sink.down.store(false, Ordering::SeqCst);
        let report = d.shutdown(far());
        let got = sink.got.lock().unwrap();
        assert_eq!(got.len() as u64, spooled);
        // The kept alerts are the oldest ones, in order.
        assert!(got
            .iter()
            .enumerate()
            .all(|(i, b)| *b == *rec(i as u64).body));
        assert_eq!(report.delivered, spooled);
    }

    #[test]
    fn without_spool_failures_drop_after_attempts() {
        let sink = flaky();
        sink.down.store(true, Ordering::SeqCst);
        let metrics = Metrics::new();
        let d = Delivery::start(Box::new(sink.clone()), fast(4, None), &metrics).unwrap();
        for i in 0..10 {
            d.enqueue(rec(i));
        }
        let report = d.shutdown(far());
        assert_eq!(report.delivered, 0);
        assert_eq!(report.dropped_total(), 10, "{report:?}");
        assert!(
            report
                .dropped
                .get(reason::DELIVERY_FAILED)
                .copied()
                .unwrap_or(0)
                > 0
        );
    }

    /// A sink whose first `timeouts_per_record` attempts at each record time out.
    struct Slow {
        timeouts_per_record: u32,
        attempts: Log<(String, u32)>,
        got: Log<String>,
    }

    impl Sink for Slow {
        fn name(&self) -> &str {
            "slow"
        }
        fn send(&mut self, record: &Record) -> Result<(), SinkError> {
            let mut attempts = self.attempts.lock().unwrap();
            let n = match attempts.last_mut() {
                Some((body, n)) if **body == *record.body => {
                    *n += 1;
                    *n
                }
                _ => {
                    attempts.push((record.body.to_string(), 1));
                    1
                }
            };
            if n <= self.timeouts_per_record {
                return Err(SinkError::Timeout("no answer".into()));
            }
            self.got.lock().unwrap().push(record.body.to_string());
            Ok(())
        }
    }

    /// A list shared between a test and its sink.
    type Log<T> = Arc<Mutex<Vec<T>>>;

    fn slow(timeouts_per_record: u32) -> (Slow, Log<(String, u32)>, Log<String>) {
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink = Slow {
            timeouts_per_record,
            attempts: attempts.clone(),
            got: got.clone(),
        };
        (sink, attempts, got)
    }

    #[test]
    fn consecutive_timeouts_give_up_each_alert_counted_without_a_spool() {
        // Every attempt times out; max_consecutive_timeouts 2: each alert is tried 3 times
        // (the first and two retries), then given up and counted.
        {
            let spool = false;
            let dir = tempfile::tempdir().unwrap();
            let (sink, attempts, got) = slow(u32::MAX);
            let metrics = Metrics::new();
            let mut opts = fast(100, spool.then(|| (dir.path().to_owned(), 1 << 20)));
            opts.max_consecutive_timeouts = Some(2);
            // The general attempt limit would stop sooner: timeouts follow their own budget.
            opts.max_attempts = 1;
            // Timeouts are retried at once, not after the (here very long) backoff.
            opts.initial_backoff = Duration::from_secs(3600);
            opts.max_backoff = Duration::from_secs(3600);
            let d = Delivery::start(Box::new(sink), opts, &metrics).unwrap();
            for i in 0..4 {
                d.enqueue(rec(i));
            }
            let report = d.shutdown(far());
            assert!(got.lock().unwrap().is_empty());
            let attempts = attempts.lock().unwrap().clone();
            let want: Vec<(String, u32)> = (0..4).map(|i| (rec(i).body.to_string(), 3)).collect();
            assert_eq!(attempts, want, "spool: {spool}");
            assert_eq!(report.dropped.get(reason::TIMEOUT), Some(&4), "{report:?}");
            assert_eq!(report.dropped_total(), 4, "{report:?}");
            assert_eq!(report.timeouts, 12);
            assert_eq!(report.failures, 12);
            assert_eq!(report.spooled_at_exit, 0);
            assert_eq!(
                metrics.get(
                    "vigil_output_dropped_total",
                    &[("sink", "slow"), ("reason", "timeout")]
                ),
                4.0
            );
            assert_eq!(
                metrics.get("vigil_output_timeouts_total", &[("sink", "slow")]),
                12.0
            );
        }
    }

    #[test]
    fn with_a_spool_timeouts_past_the_budget_back_off_and_lose_nothing() {
        // Each alert's first 7 attempts time out; the budget is 2 in a row: past it the
        // output counts as down (backoff, spool), never a drop, and everything arrives in
        // order once attempts succeed.
        let dir = tempfile::tempdir().unwrap();
        let (sink, attempts, got) = slow(7);
        let metrics = Metrics::new();
        let mut opts = fast(100, Some((dir.path().to_owned(), 1 << 20)));
        opts.max_consecutive_timeouts = Some(2);
        let d = Delivery::start(Box::new(sink), opts, &metrics).unwrap();
        for i in 0..4 {
            d.enqueue(rec(i));
        }
        let report = d.shutdown(far());
        let want: Vec<String> = (0..4).map(|i| rec(i).body.to_string()).collect();
        assert_eq!(*got.lock().unwrap(), want, "{report:?}");
        assert_eq!(report.dropped_total(), 0, "{report:?}");
        assert!(attempts.lock().unwrap().iter().all(|(_, n)| *n == 8));
        assert_eq!(report.timeouts, 4 * 7, "{report:?}");
    }

    #[test]
    fn timeouts_within_the_budget_are_retried_and_delivered_in_order() {
        let (sink, attempts, got) = slow(2);
        let metrics = Metrics::new();
        let mut opts = fast(100, None);
        opts.max_consecutive_timeouts = Some(2);
        let d = Delivery::start(Box::new(sink), opts, &metrics).unwrap();
        for i in 0..5 {
            d.enqueue(rec(i));
        }
        let report = d.shutdown(far());
        let want: Vec<String> = (0..5).map(|i| rec(i).body.to_string()).collect();
        assert_eq!(*got.lock().unwrap(), want);
        assert!(attempts.lock().unwrap().iter().all(|(_, n)| *n == 3));
        assert_eq!(report.delivered, 5);
        assert_eq!(report.dropped_total(), 0, "{report:?}");
        assert_eq!(report.timeouts, 10);
    }

    #[test]
    fn zero_consecutive_timeouts_gives_up_at_the_first_and_none_means_retry() {
        let (sink, attempts, _) = slow(1);
        let metrics = Metrics::new();
        let mut opts = fast(100, None);
        opts.max_consecutive_timeouts = Some(0);
        let d = Delivery::start(Box::new(sink), opts, &metrics).unwrap();
        d.enqueue(rec(0));
        let report = d.shutdown(far());
        assert_eq!(report.dropped.get(reason::TIMEOUT), Some(&1), "{report:?}");
        assert_eq!(attempts.lock().unwrap()[0].1, 1);
        // Without a budget a timeout is an ordinary failure: retried with backoff.
        let (sink, _, got) = slow(1);
        let d = Delivery::start(Box::new(sink), fast(100, None), &metrics).unwrap();
        d.enqueue(rec(1));
        let report = d.shutdown(far());
        assert_eq!(report.delivered, 1, "{report:?}");
        assert_eq!(got.lock().unwrap().len(), 1);
    }

    #[test]
    fn shutdown_deadline_spools_what_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let sink = flaky();
        sink.down.store(true, Ordering::SeqCst);
        let metrics = Metrics::new();
        let opts = fast(100, Some((dir.path().to_owned(), 1 << 20)));
        let d = Delivery::start(Box::new(sink.clone()), opts.clone(), &metrics).unwrap();
        for i in 0..20 {
            d.enqueue(rec(i));
        }
        let report = d.shutdown(Instant::now());
        assert_eq!(report.spooled_at_exit, 20);
        assert_eq!(report.dropped_total(), 0);
        // The next run delivers them.
        sink.down.store(false, Ordering::SeqCst);
        let d = Delivery::start(Box::new(sink.clone()), opts, &metrics).unwrap();
        let report = d.shutdown(far());
        assert_eq!(report.delivered, 20);
        let got = sink.got.lock().unwrap();
        assert!(got
            .iter()
            .enumerate()
            .all(|(i, b)| *b == *rec(i as u64).body));
    }
}
