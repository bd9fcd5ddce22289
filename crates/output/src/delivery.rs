//! Delivery to one output: a worker thread, retries with capped exponential backoff, and
//! either a bounded in-memory queue or, with a spool, a write-ahead on-disk queue.
//!
//! **Without a spool** an alert waits in the bounded in-memory queue; it is dropped (counted)
//! when the queue is full, after `max_attempts` failed attempts, or, for an output with a
//! consecutive-timeout budget, after more timed-out attempts in a row than it allows.
//!
//! **With a spool** the queue is the spool ([`crate::spool`]): `enqueue` appends the alert to
//! it (one `write(2)`) before it returns, so from then on the alert survives a crash or
//! `kill -9` of the agent; the worker delivers from the spool in order and acknowledges each
//! alert after a successful send. Delivery is at-least-once across a crash: the alert being
//! sent when the agent dies is sent again at restart. Power loss is covered by
//! [`SpoolSync`]: by default a background thread `fdatasync`s the spool once a second (power
//! loss then loses at most about the last second of alerts). An alert is dropped (counted) when
//! the spool's byte budget is full; records the spool finds damaged or missing on read are
//! counted as `spool_corrupt` / `spool_gap` and never sent. When the spool cannot be written
//! (an I/O error), alerts wait in the in-memory queue, not crash-safe, until it can again;
//! nothing enters the spool while older alerts wait in memory, so the order holds.
//!
//! Order is kept end to end: the record being delivered (the head) is always the oldest, then
//! the spool, then the queue. Every drop is counted per reason.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::metrics::{names, Metrics};
use crate::sinks::{Record, Sink, SinkError};
use crate::spool::{Losses, Spool, SpoolSync};

/// Why an alert was dropped (the `reason` label).
pub mod reason {
    /// The in-memory queue was full and there is no spool.
    pub const QUEUE_FULL: &str = "queue_full";
    /// The spool's byte budget was exhausted.
    pub const SPOOL_FULL: &str = "spool_full";
    /// The spool could not be written and the in-memory queue was full too.
    pub const SPOOL_ERROR: &str = "spool_error";
    /// No spool, and every attempt failed.
    pub const DELIVERY_FAILED: &str = "delivery_failed";
    /// Still queued in memory when the shutdown deadline passed.
    pub const SHUTDOWN: &str = "shutdown";
    /// Spool records found damaged (checksum mismatch, torn by a crash): never sent.
    pub const SPOOL_CORRUPT: &str = "spool_corrupt";
    /// Spool records missing between two valid ones (a deleted segment).
    pub const SPOOL_GAP: &str = "spool_gap";
    /// The output is closed for good (standard output closed by the reader).
    pub const CLOSED: &str = "output_closed";
    /// Given up after more consecutive timed-out attempts than the output allows (Falco's
    /// `http_output.max_consecutive_timeouts`).
    pub const TIMEOUT: &str = "timeout";
    /// The receiver refused the alert for good (malformed or too large for it): retrying
    /// cannot help.
    pub const REJECTED: &str = "rejected";
}

/// How one output is delivered to.
#[derive(Clone, Debug)]
pub struct DeliveryOptions {
    /// The in-memory queue's bound (with a spool: only while the spool cannot be written).
    pub queue_capacity: usize,
    /// Spool directory and byte budget.
    pub spool: Option<(std::path::PathBuf, u64)>,
    /// When the spool is forced to disk (see [`SpoolSync`]).
    pub spool_sync: SpoolSync,
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
            spool_sync: SpoolSync::default(),
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

    /// Alerts the spool found damaged or missing (`spool_corrupt` + `spool_gap`).
    pub fn spool_lost(&self) -> u64 {
        [reason::SPOOL_CORRUPT, reason::SPOOL_GAP]
            .iter()
            .filter_map(|r| self.dropped.get(*r))
            .sum()
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Origin {
    /// Records taken from the in-memory queue (no spool, or the spool could not be written).
    Queue,
    /// Records moved past in the spool ([`Spool::advance`]), committed once delivered.
    Spool,
}

struct State {
    queue: VecDeque<Record>,
    spool: Option<Spool>,
    /// The records being delivered (the oldest ones), all of one origin: one attempt carries
    /// them all ([`Sink::send_batch`]) and a failed attempt tries the same again.
    head: Vec<Record>,
    origin: Origin,
    /// The worker is inside `send_batch` with the head (which `spill` must then leave alone).
    sending: bool,
    /// When the attempt under way started.
    attempt_started: Option<Instant>,
    report: SinkReport,
    reopen: bool,
    /// Set by `shutdown`: deliver what is pending until this instant, then stop.
    deadline: Option<Instant>,
    /// Set when a shutdown stopped waiting for a worker stuck in an attempt: whatever that
    /// attempt's outcome, it commits nothing (the next run sends the records again).
    abandoned: bool,
    /// The worker has returned.
    finished: bool,
    /// The last attempt failed: the worker is waiting out a backoff.
    failing: bool,
    /// Alerts enqueued so far: the worker sleeps only when none came since it last looked.
    enqueued: u64,
    /// The spool's losses already counted in the report.
    losses_counted: Losses,
    /// Spool I/O errors so far (logged under a rate limit).
    spool_errors: u64,
}

impl State {
    fn head_in_memory(&self) -> bool {
        !self.head.is_empty() && self.origin == Origin::Queue
    }
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the worker.
    wake: Condvar,
    /// Wakes the spool's sync thread (at shutdown).
    sync_wake: Condvar,
    /// Signalled when the worker returns.
    done: Condvar,
    capacity: usize,
    name: String,
    metrics: Metrics,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn drop_records(&self, state: &mut State, why: &str, n: u64) {
        if n == 0 {
            return;
        }
        let before = state.report.dropped_total();
        *state.report.dropped.entry(why.to_owned()).or_insert(0) += n;
        self.metrics.add(
            names::OUTPUT_DROPPED,
            &[("sink", &self.name), ("reason", why)],
            n as f64,
        );
        let total = before + n;
        // One log line for the first drop and then one per 1000, so a flood stays readable.
        if why != reason::CLOSED && (before == 0 || total / 1000 > before / 1000) {
            log::warn!(
                "output `{}`: dropped {total} alert(s) so far (latest reason: {why})",
                self.name
            );
        }
    }

    fn drop_record(&self, state: &mut State, why: &str) {
        self.drop_records(state, why, 1);
    }

    /// Counts what the spool found damaged or missing since the last look.
    fn count_spool_losses(&self, state: &mut State) {
        let Some(losses) = state.spool.as_ref().map(Spool::losses) else {
            return;
        };
        let counted = state.losses_counted;
        self.drop_records(
            state,
            reason::SPOOL_CORRUPT,
            losses.corrupt.saturating_sub(counted.corrupt),
        );
        self.drop_records(
            state,
            reason::SPOOL_GAP,
            losses.gap.saturating_sub(counted.gap),
        );
        state.losses_counted = losses;
    }

    /// A spool read or write failed: logged for the first and then every 1000th.
    fn spool_error(&self, state: &mut State, what: &str, e: &std::io::Error) {
        state.spool_errors += 1;
        let n = state.spool_errors;
        if n == 1 || n.is_multiple_of(1000) {
            log::warn!(
                "output `{}`: cannot {what} spool: {e} ({n} spool error(s) so far)",
                self.name
            );
        }
    }

    /// One failed attempt: counted in the report and the metrics (by cause); the output is
    /// failing until a delivery succeeds.
    fn count_failure(&self, state: &mut State, error: &SinkError) {
        state.report.failures += 1;
        state.failing = true;
        let labels = [("sink", self.name.as_str())];
        self.metrics.add(names::OUTPUT_FAILURES, &labels, 1.0);
        self.metrics.add(
            names::OUTPUT_ERRORS,
            &[("sink", self.name.as_str()), ("cause", error.cause())],
            1.0,
        );
        if matches!(error, SinkError::Timeout(_)) {
            state.report.timeouts += 1;
            self.metrics.add(names::OUTPUT_TIMEOUTS, &labels, 1.0);
        }
    }

    fn gauges(&self, state: &State) {
        let depth = state.queue.len()
            + if state.head_in_memory() {
                state.head.len()
            } else {
                0
            };
        self.metrics.set(
            names::OUTPUT_QUEUE_DEPTH,
            &[("sink", &self.name)],
            depth as f64,
        );
        if let Some(spool) = &state.spool {
            self.metrics.set(
                names::OUTPUT_SPOOL_BYTES,
                &[("sink", &self.name)],
                spool.bytes() as f64,
            );
        }
    }

    /// Write-ahead: the alert goes to the spool before `enqueue` returns. Alerts held in
    /// memory after a spool error are older and go first; while any remain, the alert joins
    /// them.
    fn enqueue_spooled(&self, state: &mut State, record: Record) {
        self.spill(state);
        if state.queue.is_empty() && !state.head_in_memory() {
            let Some(spool) = state.spool.as_mut() else {
                return;
            };
            match spool.append(&record) {
                Ok(true) => return,
                Ok(false) => {
                    self.drop_record(state, reason::SPOOL_FULL);
                    return;
                }
                Err(e) => self.spool_error(state, "write", &e),
            }
        }
        if state.queue.len() < self.capacity {
            state.queue.push_back(record);
        } else {
            self.drop_record(state, reason::SPOOL_ERROR);
        }
    }

    /// Moves alerts held in memory into the spool, oldest first: a head taken from the queue
    /// (unless an attempt is carrying it right now; it then goes first on the next call)
    /// and the queue. The head so moved leaves memory (the worker reads it back from the
    /// spool); what does not fit stays in the queue, in order.
    fn spill(&self, state: &mut State) {
        if state.spool.is_none() {
            return;
        }
        if state.head_in_memory() && !state.sending {
            let head = std::mem::take(&mut state.head);
            for record in head.into_iter().rev() {
                state.queue.push_front(record);
            }
        }
        if state.queue.is_empty() || state.head_in_memory() {
            return;
        }
        let State { queue, spool, .. } = state;
        let Some(spool) = spool.as_mut() else {
            return;
        };
        let mut failed = None;
        while let Some(record) = queue.front() {
            match spool.append(record) {
                Ok(true) => {
                    queue.pop_front();
                }
                Ok(false) => break,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failed {
            self.spool_error(state, "write", &e);
        }
    }

    /// Fills the head up to `max` records, oldest first: from the spool, else from the
    /// queue (one origin per head).
    fn fill(&self, state: &mut State, max: usize) {
        while state.head.len() < max {
            if state.spool.is_some() && (state.head.is_empty() || state.origin == Origin::Spool) {
                let spool = state.spool.as_mut().expect("checked above");
                match spool.peek() {
                    Ok(Some(record)) => {
                        if let Err(e) = spool.advance() {
                            self.spool_error(state, "update", &e);
                            break;
                        }
                        state.head.push(record);
                        state.origin = Origin::Spool;
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        self.spool_error(state, "read", &e);
                        break;
                    }
                }
            }
            if state.head.is_empty() || state.origin == Origin::Queue {
                if let Some(record) = state.queue.pop_front() {
                    state.head.push(record);
                    state.origin = Origin::Queue;
                    continue;
                }
            }
            break;
        }
        self.count_spool_losses(state);
    }

    /// The head is done with (delivered, rejected or given up): records taken from the
    /// spool are committed there.
    fn finish_head(&self, state: &mut State) {
        if state.origin == Origin::Spool {
            if let Some(Err(e)) = state.spool.as_mut().map(Spool::commit) {
                self.spool_error(state, "update", &e);
            }
        }
        state.head.clear();
    }
}

/// A running output: enqueue from the pipeline thread, delivered by a worker thread.
pub struct Delivery {
    shared: Arc<Shared>,
    worker: Option<JoinHandle<()>>,
    syncer: Option<JoinHandle<()>>,
}

/// How long a shutdown waits for an attempt already under way when every pending alert is
/// on disk: past it the attempt is abandoned (its records are sent again by the next run).
const ABANDON_AFTER: Duration = Duration::from_millis(500);

impl Delivery {
    /// Starts the worker for `sink`. Fails when the spool directory cannot be opened.
    pub fn start(
        sink: Box<dyn Sink>,
        options: DeliveryOptions,
        metrics: &Metrics,
    ) -> std::io::Result<Delivery> {
        let name = sink.name().to_owned();
        let spool = match &options.spool {
            Some((dir, max)) => Some(Spool::open(dir, *max, options.spool_sync)?),
            None => None,
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                spool,
                head: Vec::new(),
                origin: Origin::Queue,
                sending: false,
                attempt_started: None,
                report: SinkReport {
                    name: name.clone(),
                    ..SinkReport::default()
                },
                reopen: false,
                deadline: None,
                abandoned: false,
                finished: false,
                failing: false,
                enqueued: 0,
                losses_counted: Losses::default(),
                spool_errors: 0,
            }),
            wake: Condvar::new(),
            sync_wake: Condvar::new(),
            done: Condvar::new(),
            capacity: options.queue_capacity.max(1),
            name: name.clone(),
            metrics: metrics.clone(),
        });
        for family in [
            names::OUTPUT_DELIVERED,
            names::OUTPUT_FAILURES,
            names::OUTPUT_QUEUE_DEPTH,
            names::OUTPUT_TIMEOUTS,
            names::OUTPUT_RETRIED,
        ] {
            metrics.add(family, &[("sink", name.as_str())], 0.0);
        }
        for cause in crate::sinks::ERROR_CAUSES {
            metrics.add(
                names::OUTPUT_ERRORS,
                &[("sink", name.as_str()), ("cause", cause)],
                0.0,
            );
        }
        // Every way this output can lose an alert has a series from the first scrape.
        let reasons: &[&str] = if options.spool.is_some() {
            &[
                reason::SPOOL_FULL,
                reason::SPOOL_ERROR,
                reason::SPOOL_CORRUPT,
                reason::SPOOL_GAP,
                reason::SHUTDOWN,
                reason::CLOSED,
                reason::TIMEOUT,
                reason::REJECTED,
            ]
        } else {
            &[
                reason::QUEUE_FULL,
                reason::DELIVERY_FAILED,
                reason::SHUTDOWN,
                reason::CLOSED,
                reason::TIMEOUT,
                reason::REJECTED,
            ]
        };
        for why in reasons {
            metrics.add(
                names::OUTPUT_DROPPED,
                &[("sink", name.as_str()), ("reason", why)],
                0.0,
            );
        }
        {
            let mut state = shared.lock();
            // Segments of a future format are counted when the spool opens.
            shared.count_spool_losses(&mut state);
            shared.gauges(&state);
        }
        let syncer = match (&options.spool, options.spool_sync) {
            (Some(_), SpoolSync::Every(interval)) => {
                let sync_shared = Arc::clone(&shared);
                Some(
                    std::thread::Builder::new()
                        .name(format!("vigil-sync-{name}"))
                        .spawn(move || sync_spool(&sync_shared, interval))?,
                )
            }
            _ => None,
        };
        let worker_shared = Arc::clone(&shared);
        let worker = std::thread::Builder::new()
            .name(format!("vigil-out-{name}"))
            .spawn(move || {
                run(&worker_shared, sink, options);
                worker_shared.lock().finished = true;
                worker_shared.done.notify_all();
            });
        let worker = match worker {
            Ok(worker) => worker,
            Err(e) => {
                shared.lock().deadline = Some(Instant::now());
                shared.sync_wake.notify_all();
                if let Some(syncer) = syncer {
                    let _ = syncer.join();
                }
                return Err(e);
            }
        };
        Ok(Delivery {
            shared,
            worker: Some(worker),
            syncer,
        })
    }

    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Queues a record. Never blocks on the output. With a spool the record is on disk (one
    /// `write(2)`, no sync) when this returns; it is dropped and counted when the spool's
    /// budget is full. Without a spool it is dropped and counted when the queue is full.
    pub fn enqueue(&self, record: Record) {
        let mut state = self.shared.lock();
        state.report.accepted += 1;
        state.enqueued += 1;
        if state.spool.is_some() {
            self.shared.enqueue_spooled(&mut state, record);
        } else if state.queue.len() >= self.shared.capacity {
            self.shared.drop_record(&mut state, reason::QUEUE_FULL);
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

    /// Alerts waiting (memory and disk, the records of an attempt under way included).
    pub fn pending(&self) -> u64 {
        let state = self.shared.lock();
        state.queue.len() as u64
            + state.spool.as_ref().map_or(0, Spool::len)
            + state.head.len() as u64
    }

    /// Delivers what is pending until `deadline`, then stops the worker. Alerts still in
    /// memory then go to the spool when there is one (delivered by the next run), else are
    /// dropped with reason `shutdown`. With a spool, a shutdown does not wait for an output
    /// that is failing: every pending alert is on disk already, so it stops at once (and
    /// waits at most about half a second for an attempt under way).
    pub fn shutdown(mut self, deadline: Instant) -> SinkReport {
        self.stop(deadline)
    }

    /// Stops the threads at once, as a crash would: nothing in memory is saved or counted,
    /// and the spool is neither synced nor tidied.
    #[cfg(test)]
    fn crash(mut self) {
        {
            let mut state = self.shared.lock();
            state.abandoned = true;
            state.deadline = Some(Instant::now());
        }
        self.shared.wake.notify_all();
        self.shared.sync_wake.notify_all();
        for thread in [self.worker.take(), self.syncer.take()]
            .into_iter()
            .flatten()
        {
            let _ = thread.join();
        }
    }

    fn join_threads(&mut self, deadline: Instant) {
        let asked = Instant::now();
        self.shared.lock().deadline = Some(deadline);
        self.shared.wake.notify_all();
        self.shared.sync_wake.notify_all();
        // Wait for the worker, which stops by itself at the deadline. With every pending
        // alert on disk, stop waiting for an output that fails, or for one attempt that hangs
        // (a receiver that does not answer) longer than ABANDON_AFTER.
        let mut state = self.shared.lock();
        while !state.finished {
            self.shared.spill(&mut state);
            let durable =
                state.spool.is_some() && !state.head_in_memory() && state.queue.is_empty();
            let hanging = state
                .attempt_started
                .is_some_and(|t| t.elapsed() >= ABANDON_AFTER && asked.elapsed() >= ABANDON_AFTER);
            if durable && (hanging || (state.failing && asked.elapsed() >= ABANDON_AFTER)) {
                state.abandoned = true;
                break;
            }
            state = self
                .shared
                .done
                .wait_timeout(state, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let finished = state.finished;
        drop(state);
        let worker = self.worker.take();
        if let Some(worker) = worker {
            if finished {
                if worker.join().is_err() {
                    log::error!("output `{}`: delivery thread panicked", self.shared.name);
                }
            } else {
                log::warn!(
                    "output `{}`: not waiting for the attempt under way (its alerts stay in \
                     the spool)",
                    self.shared.name
                );
            }
        }
        if let Some(syncer) = self.syncer.take() {
            if syncer.join().is_err() {
                log::error!("output `{}`: spool sync thread panicked", self.shared.name);
            }
        }
    }

    fn stop(&mut self, deadline: Instant) -> SinkReport {
        self.join_threads(deadline);
        let mut state = self.shared.lock();
        self.shared.spill(&mut state);
        if state.head_in_memory() && !state.sending {
            let n = state.head.len() as u64;
            state.head.clear();
            self.shared.drop_records(&mut state, reason::SHUTDOWN, n);
        }
        let n = state.queue.len() as u64;
        state.queue.clear();
        self.shared.drop_records(&mut state, reason::SHUTDOWN, n);
        self.shared.count_spool_losses(&mut state);
        // Records of an uncommitted attempt are still in the spool (the next run reads them
        // again).
        let in_flight = if state.origin == Origin::Spool {
            state.head.len() as u64
        } else {
            0
        };
        state.report.spooled_at_exit = state.spool.as_ref().map_or(0, Spool::len) + in_flight;
        self.shared.gauges(&state);
        let job = state.spool.as_mut().map(Spool::sync_job);
        let report = state.report.clone();
        drop(state);
        // A clean stop leaves the spool on stable storage whatever the sync policy.
        if let Some(Err(e) | Ok(Err(e))) = job.map(|j| j.map(crate::spool::SyncJob::run)) {
            log::warn!("output `{}`: cannot sync spool: {e}", self.shared.name);
        }
        report
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        if self.worker.is_some() {
            self.stop(Instant::now());
        }
    }
}

/// The spool's sync thread: every `interval`, flushes what was written since the last pass
/// (outside the lock, so `enqueue` never waits for the disk).
fn sync_spool(shared: &Shared, interval: Duration) {
    let mut state = shared.lock();
    loop {
        state = shared
            .sync_wake
            .wait_timeout_while(state, interval, |s| s.deadline.is_none())
            .unwrap_or_else(|e| e.into_inner())
            .0;
        if state.deadline.is_some() {
            return;
        }
        let job = state.spool.as_mut().map(Spool::sync_job);
        match job {
            Some(Ok(job)) if !job.is_empty() => {
                drop(state);
                let result = job.run();
                state = shared.lock();
                if let Err(e) = result {
                    shared.spool_error(&mut state, "sync", &e);
                }
            }
            Some(Err(e)) => shared.spool_error(&mut state, "sync", &e),
            _ => {}
        }
    }
}

/// The worker: fill the head, deliver it, commit or back off.
fn run(shared: &Shared, mut sink: Box<dyn Sink>, options: DeliveryOptions) {
    let batching = sink.batching();
    let max = batching.max_records.max(1);
    let mut backoff = options.initial_backoff;
    let mut attempts = 0u32;
    // Timed-out attempts in a row for the head.
    let mut timeouts = 0u32;
    let mut failure_logged = false;
    // An attempt failed after the shutdown began.
    let mut last_chance = false;
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
        // Stopping while the output fails: one more attempt at once, and when that fails too,
        // nothing to wait for with a spool, where every pending alert is on disk (the next run
        // delivers them).
        if state.deadline.is_some() && state.failing && state.spool.is_some() && last_chance {
            break;
        }
        let seen = state.enqueued;
        if state.head.is_empty() {
            shared.fill(&mut state, max);
            // Let a batch fill for up to `delay` (what waits is on disk already).
            if !state.head.is_empty() && state.head.len() < max && !batching.delay.is_zero() {
                let until = Instant::now() + batching.delay;
                while state.head.len() < max && state.deadline.is_none() && !state.reopen {
                    let now = Instant::now();
                    if now >= until {
                        break;
                    }
                    let before = state.enqueued;
                    state = shared
                        .wake
                        .wait_timeout_while(state, until - now, |s| {
                            s.enqueued == before && s.deadline.is_none() && !s.reopen
                        })
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    shared.fill(&mut state, max);
                }
            }
            shared.gauges(&state);
        }
        if state.head.is_empty() {
            if state.deadline.is_some() {
                break;
            }
            drop(state);
            match sink.flush() {
                Ok(()) | Err(SinkError::Closed) => {}
                Err(e) => log::warn!("output `{}`: flush failed: {e}", shared.name),
            }
            let state = shared.lock();
            if state.enqueued == seen && !state.reopen && state.deadline.is_none() {
                let _unused = shared
                    .wake
                    .wait_timeout(state, Duration::from_secs(1))
                    .unwrap_or_else(|e| e.into_inner());
            }
            continue;
        }
        let batch = state.head.clone();
        let n = batch.len() as u64;
        if attempts > 0 || timeouts > 0 {
            shared
                .metrics
                .add(names::OUTPUT_RETRIED, &[("sink", &shared.name)], n as f64);
        }
        state.sending = true;
        state.attempt_started = Some(Instant::now());
        drop(state);
        let result = sink.send_batch(&batch);
        let mut state = shared.lock();
        state.sending = false;
        state.attempt_started = None;
        if state.abandoned {
            // A shutdown gave up on this attempt: commit nothing, whatever came of it.
            break;
        }
        match result {
            Ok(rejected) => {
                let rejected = rejected.min(n);
                shared.finish_head(&mut state);
                state.report.delivered += n - rejected;
                shared.metrics.add(
                    names::OUTPUT_DELIVERED,
                    &[("sink", &shared.name)],
                    (n - rejected) as f64,
                );
                shared.drop_records(&mut state, reason::REJECTED, rejected);
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
                shared.finish_head(&mut state);
                timeouts = 0;
                shared.drop_records(&mut state, reason::CLOSED, n);
                shared.gauges(&state);
            }
            Err(SinkError::Rejected(message)) => {
                log::warn!(
                    "output `{}`: {n} alert(s) rejected for good, dropped: {message}",
                    shared.name
                );
                shared.finish_head(&mut state);
                timeouts = 0;
                attempts = 0;
                shared.drop_records(&mut state, reason::REJECTED, n);
                shared.gauges(&state);
            }
            // Within the timeout budget, or past it without a spool (Falco gives the alert
            // up). Past it with a spool, the output counts as down: the generic failure
            // path below keeps everything in the spool and backs off.
            Err(e @ SinkError::Timeout(_))
                if options
                    .max_consecutive_timeouts
                    .is_some_and(|limit| timeouts < limit || state.spool.is_none()) =>
            {
                let limit = options.max_consecutive_timeouts.unwrap_or(0);
                shared.count_failure(&mut state, &e);
                timeouts = timeouts.saturating_add(1);
                if timeouts > limit {
                    if !failure_logged {
                        log::warn!(
                            "output `{}`: giving up {n} alert(s) after {timeouts} consecutive \
                             timeout(s) (max_consecutive_timeouts: {limit}): {e}",
                            shared.name
                        );
                        failure_logged = true;
                    }
                    shared.finish_head(&mut state);
                    timeouts = 0;
                    attempts = 0;
                    shared.drop_records(&mut state, reason::TIMEOUT, n);
                } else {
                    // Retried at once (the timeout was the wait); what waits behind the head
                    // moves to the spool meanwhile.
                    shared.spill(&mut state);
                }
                shared.gauges(&state);
            }
            Err(e) => {
                timeouts = 0;
                last_chance |= state.deadline.is_some();
                shared.count_failure(&mut state, &e);
                if !failure_logged {
                    match &e {
                        SinkError::Fatal(_) | SinkError::Refused { .. } => {
                            log::error!("output `{}`: {e}; retrying", shared.name)
                        }
                        _ => log::warn!("output `{}`: delivery failed, retrying: {e}", shared.name),
                    }
                    failure_logged = true;
                }
                attempts += 1;
                if state.spool.is_none() && attempts >= options.max_attempts.max(1) {
                    state.head.clear();
                    attempts = 0;
                    shared.drop_records(&mut state, reason::DELIVERY_FAILED, n);
                } else {
                    shared.spill(&mut state);
                }
                shared.gauges(&state);
                let wait = match state.deadline {
                    Some(d) => backoff.min(d.saturating_duration_since(Instant::now())),
                    None => backoff,
                };
                backoff = (backoff * 2).min(options.max_backoff.max(options.initial_backoff));
                let _unused = shared
                    .wake
                    .wait_timeout_while(state, wait, |s| {
                        // A shutdown ends the wait at once with a spool (see the loop's top),
                        // at the deadline without one.
                        !s.reopen
                            && s.deadline
                                .is_none_or(|d| s.spool.is_none() && Instant::now() < d)
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
    use crate::sinks::Batching;
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
            spool_sync: SpoolSync::Every(Duration::from_millis(10)),
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            max_attempts: 3,
            max_consecutive_timeouts: None,
        }
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    /// Polls `done` for up to a minute (a bound that only a broken worker reaches).
    fn wait_for(done: impl Fn() -> bool) {
        let until = Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(Instant::now() < until, "timed out waiting for delivery");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A sink that takes up to 16 records per attempt (waiting 20 ms for a batch to fill),
    /// fails while `down` is set, and records each attempt's records.
    #[derive(Clone)]
    struct Batcher {
        down: Arc<AtomicBool>,
        /// Each successful attempt's records.
        batches: Log<Vec<String>>,
        /// Blocks every attempt this long first (a receiver that does not answer).
        hang: Duration,
    }

    impl Sink for Batcher {
        fn name(&self) -> &str {
            "batcher"
        }
        fn send(&mut self, _: &Record) -> Result<(), SinkError> {
            unreachable!("the worker sends batches")
        }
        fn send_batch(&mut self, records: &[Record]) -> Result<u64, SinkError> {
            std::thread::sleep(self.hang);
            if self.down.load(Ordering::SeqCst) {
                return Err(SinkError::Refused {
                    cause: "auth",
                    message: "refused".into(),
                });
            }
            let bodies = records.iter().map(|r| r.body.to_string()).collect();
            self.batches.lock().unwrap().push(bodies);
            Ok(0)
        }
        fn batching(&self) -> Batching {
            Batching {
                max_records: 16,
                delay: Duration::from_millis(20),
            }
        }
    }

    fn batcher() -> Batcher {
        Batcher {
            down: Arc::new(AtomicBool::new(false)),
            batches: Arc::default(),
            hang: Duration::ZERO,
        }
    }

    #[test]
    fn batches_keep_order_through_failures_and_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let sink = batcher();
        let metrics = Metrics::new();
        let opts = fast(8, Some((dir.path().to_owned(), 1 << 20)));
        let d = Delivery::start(Box::new(sink.clone()), opts.clone(), &metrics).unwrap();
        for i in 0..100 {
            d.enqueue(rec(i));
        }
        wait_for(|| d.report().delivered == 100);
        sink.down.store(true, Ordering::SeqCst);
        for i in 100..300 {
            d.enqueue(rec(i));
        }
        wait_for(|| d.report().failures >= 3);
        d.crash();
        sink.down.store(false, Ordering::SeqCst);
        let metrics = Metrics::new();
        let d = Delivery::start(Box::new(sink.clone()), opts, &metrics).unwrap();
        for i in 300..400 {
            d.enqueue(rec(i));
        }
        let report = d.shutdown(far());
        let batches = sink.batches.lock().unwrap().clone();
        assert!(batches.iter().all(|b| !b.is_empty() && b.len() <= 16));
        assert!(
            batches.iter().any(|b| b.len() > 1),
            "no attempt carried more than one record"
        );
        let got: Vec<String> = batches.into_iter().flatten().collect();
        let want: Vec<String> = (0..400).map(|i| rec(i).body.to_string()).collect();
        assert!(got == want, "out of order, lost or sent twice: {report:?}");
        assert_eq!(report.dropped_total(), 0, "{report:?}");
        assert_eq!(
            metrics.get(
                names::OUTPUT_ERRORS,
                &[("sink", "batcher"), ("cause", "auth")]
            ),
            0.0
        );
    }

    #[test]
    fn refused_attempts_are_counted_by_cause_and_retried() {
        let dir = tempfile::tempdir().unwrap();
        let sink = batcher();
        sink.down.store(true, Ordering::SeqCst);
        let metrics = Metrics::new();
        let opts = fast(100, Some((dir.path().to_owned(), 1 << 20)));
        let d = Delivery::start(Box::new(sink.clone()), opts, &metrics).unwrap();
        d.enqueue(rec(0));
        d.enqueue(rec(1));
        wait_for(|| d.report().failures >= 2);
        sink.down.store(false, Ordering::SeqCst);
        wait_for(|| d.report().delivered == 2);
        let report = d.shutdown(far());
        assert_eq!(report.dropped_total(), 0, "{report:?}");
        let by_cause = metrics.get(
            names::OUTPUT_ERRORS,
            &[("sink", "batcher"), ("cause", "auth")],
        );
        assert!(by_cause >= 2.0, "{by_cause}");
        assert_eq!(
            metrics.get(names::OUTPUT_FAILURES, &[("sink", "batcher")]),
            by_cause
        );
        // Both alerts went in every attempt: each one after a failure sent them again.
        assert_eq!(
            metrics.get(names::OUTPUT_RETRIED, &[("sink", "batcher")]),
            2.0 * report.failures as f64,
            "{report:?}"
        );
    }

    #[test]
    fn with_a_spool_a_shutdown_does_not_wait_for_a_failing_output() {
        let dir = tempfile::tempdir().unwrap();
        let sink = flaky();
        sink.down.store(true, Ordering::SeqCst);
        let metrics = Metrics::new();
        let mut opts = fast(100, Some((dir.path().to_owned(), 1 << 20)));
        opts.initial_backoff = Duration::from_millis(50);
        let d = Delivery::start(Box::new(sink.clone()), opts.clone(), &metrics).unwrap();
        for i in 0..20 {
            d.enqueue(rec(i));
        }
        wait_for(|| d.report().failures >= 1);
        // The deadline is a minute away; returning well before it means it was not awaited.
        let asked = Instant::now();
        let report = d.shutdown(far());
        assert!(asked.elapsed() < Duration::from_secs(30), "{report:?}");
        assert_eq!(report.spooled_at_exit, 20, "{report:?}");
        assert_eq!(report.dropped_total(), 0, "{report:?}");
        // The next run delivers them.
        sink.down.store(false, Ordering::SeqCst);
        let d = Delivery::start(Box::new(sink.clone()), opts, &metrics).unwrap();
        let report = d.shutdown(far());
        assert_eq!(report.delivered, 20, "{report:?}");
    }

    #[test]
    fn a_shutdown_abandons_an_attempt_that_hangs_and_keeps_its_alerts() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = batcher();
        sink.hang = Duration::from_secs(5);
        let metrics = Metrics::new();
        let opts = fast(100, Some((dir.path().to_owned(), 1 << 20)));
        let d = Delivery::start(Box::new(sink.clone()), opts.clone(), &metrics).unwrap();
        for i in 0..10 {
            d.enqueue(rec(i));
        }
        wait_for(|| d.shared.lock().sending);
        let asked = Instant::now();
        let report = d.shutdown(far());
        assert!(asked.elapsed() < Duration::from_secs(4), "{report:?}");
        assert_eq!(report.spooled_at_exit, 10, "{report:?}");
        assert_eq!(report.delivered, 0, "{report:?}");
        // The hanging attempt ends meanwhile and commits nothing: the next run sends all ten
        // (the abandoned attempt may have reached the receiver too: at least once).
        std::thread::sleep(Duration::from_secs(5));
        let sink = batcher();
        let d = Delivery::start(Box::new(sink.clone()), opts, &metrics).unwrap();
        let report = d.shutdown(far());
        assert_eq!(report.delivered, 10, "{report:?}");
        let got: Vec<String> = sink.batches.lock().unwrap().concat();
        let want: Vec<String> = (0..10).map(|i| rec(i).body.to_string()).collect();
        assert_eq!(got, want);
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
            metrics.get(names::OUTPUT_DELIVERED, &[("sink", "flaky")]),
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
                names::OUTPUT_DROPPED,
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
                    names::OUTPUT_DROPPED,
                    &[("sink", "slow"), ("reason", "timeout")]
                ),
                4.0
            );
            assert_eq!(
                metrics.get(names::OUTPUT_TIMEOUTS, &[("sink", "slow")]),
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
        // A shutdown does not wait for a failing output: let the attempts run their course.
        wait_for(|| d.report().delivered == 4);
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
    fn a_crash_after_enqueue_loses_nothing() {
        // The output is down and the worker sleeps in a long backoff while alerts arrive; then
        // the process "dies": no shutdown, nothing saved from memory. A new run delivers every
        // alert, in order, exactly once.
        let dir = tempfile::tempdir().unwrap();
        let sink = flaky();
        sink.down.store(true, Ordering::SeqCst);
        let metrics = Metrics::new();
        let mut opts = fast(100_000, Some((dir.path().to_owned(), 64 << 20)));
        opts.initial_backoff = Duration::from_secs(3600);
        opts.max_backoff = Duration::from_secs(3600);
        let d = Delivery::start(Box::new(sink.clone()), opts.clone(), &metrics).unwrap();
        let n = 3000;
        for i in 0..n {
            d.enqueue(rec(i));
        }
        assert_eq!(d.report().delivered, 0);
        d.crash();
        sink.down.store(false, Ordering::SeqCst);
        let metrics = Metrics::new();
        let d = Delivery::start(Box::new(sink.clone()), fast(8, opts.spool), &metrics).unwrap();
        let report = d.shutdown(far());
        let got = sink.got.lock().unwrap().clone();
        let want: Vec<String> = (0..n).map(|i| rec(i).body.to_string()).collect();
        assert_eq!(got.len(), want.len(), "{report:?}");
        assert!(got == want, "alerts out of order or duplicated");
        assert_eq!(report.delivered, n);
        assert_eq!(report.dropped_total(), 0, "{report:?}");
        assert_eq!(report.spooled_at_exit, 0);
    }

    #[test]
    fn a_crash_while_delivering_resends_at_most_the_alert_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let sink = flaky();
        let metrics = Metrics::new();
        let opts = fast(8, Some((dir.path().to_owned(), 64 << 20)));
        let d = Delivery::start(Box::new(sink.clone()), opts.clone(), &metrics).unwrap();
        let n = 2000;
        for i in 0..n {
            d.enqueue(rec(i));
        }
        d.crash();
        let first = sink.got.lock().unwrap().len() as u64;
        let d = Delivery::start(Box::new(sink.clone()), opts, &metrics).unwrap();
        let report = d.shutdown(far());
        let got = sink.got.lock().unwrap().clone();
        // Every alert, in order; the one being sent at the crash may come twice.
        let mut deduped = got.clone();
        deduped.dedup();
        let want: Vec<String> = (0..n).map(|i| rec(i).body.to_string()).collect();
        assert!(deduped == want, "{first} then {report:?}");
        assert!(got.len() as u64 <= n + 1, "{} sent for {n}", got.len());
    }

    #[test]
    fn spool_write_errors_hold_alerts_in_memory_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let sink = flaky();
        sink.down.store(true, Ordering::SeqCst);
        let metrics = Metrics::new();
        let d = Delivery::start(
            Box::new(sink.clone()),
            fast(4, Some((dir.path().to_owned(), 1 << 20))),
            &metrics,
        )
        .unwrap();
        for i in 0..3 {
            d.enqueue(rec(i));
        }
        let set_failing = |on: bool| d.shared.lock().spool.as_mut().unwrap().fail_appends(on);
        set_failing(true);
        // Four fit in memory, the rest are dropped and counted.
        for i in 3..9 {
            d.enqueue(rec(i));
        }
        assert_eq!(d.shared.lock().queue.len(), 4);
        assert_eq!(d.report().dropped.get(reason::SPOOL_ERROR), Some(&2));
        set_failing(false);
        // The held alerts go to the spool ahead of the new one.
        d.enqueue(rec(9));
        assert!(d.shared.lock().queue.is_empty());
        sink.down.store(false, Ordering::SeqCst);
        // With a spool a shutdown does not wait for a sink (the alerts are durable): let the
        // worker's next attempt deliver them first.
        let deadline = Instant::now() + Duration::from_secs(30);
        while sink.got.lock().unwrap().len() < 8 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let report = d.shutdown(far());
        let want: Vec<String> = [0, 1, 2, 3, 4, 5, 6, 9]
            .iter()
            .map(|i| rec(*i).body.to_string())
            .collect();
        assert_eq!(*sink.got.lock().unwrap(), want, "{report:?}");
        assert_eq!(report.dropped_total(), 2);
    }

    #[test]
    fn damaged_spool_records_are_counted_and_never_sent() {
        let dir = tempfile::tempdir().unwrap();
        let sink = flaky();
        sink.down.store(true, Ordering::SeqCst);
        let metrics = Metrics::new();
        let opts = fast(100, Some((dir.path().to_owned(), 1 << 20)));
        let d = Delivery::start(Box::new(sink.clone()), opts.clone(), &metrics).unwrap();
        for i in 0..10 {
            d.enqueue(rec(i));
        }
        assert_eq!(d.shutdown(Instant::now()).spooled_at_exit, 10);
        let segment = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "spool"))
            .unwrap();
        let mut data = std::fs::read(&segment).unwrap();
        let at = data
            .windows(14)
            .position(|w| w == b"alert-00000004")
            .unwrap();
        data[at + 13] = b'7';
        std::fs::write(&segment, data).unwrap();
        sink.down.store(false, Ordering::SeqCst);
        let d = Delivery::start(Box::new(sink.clone()), opts, &metrics).unwrap();
        let report = d.shutdown(far());
        let want: Vec<String> = [0, 1, 2, 3, 5, 6, 7, 8, 9]
            .iter()
            .map(|i| rec(*i).body.to_string())
            .collect();
        assert_eq!(*sink.got.lock().unwrap(), want);
        assert_eq!(report.dropped.get(reason::SPOOL_CORRUPT), Some(&1));
        assert_eq!(report.spool_lost(), 1);
        assert_eq!(
            metrics.get(
                names::OUTPUT_DROPPED,
                &[("sink", "flaky"), ("reason", "spool_corrupt")]
            ),
            1.0
        );
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
