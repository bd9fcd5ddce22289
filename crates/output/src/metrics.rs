//! A small metrics registry with Prometheus text exposition (format 0.0.4), under Falco's
//! names (`falcosecurity_<subsystem>_<name>` with Falco's unit suffixes; counters end in
//! `_total`) wherever Falco has an equivalent, and `vigil_*` names for what Falco has none
//! (per-output delivery, queue and spool counters, internal alerts, evaluation time, BPF
//! programs by id, `up`).
//!
//! Families belong to one of Falco's `metrics:` categories ([`Category`]); [`Metrics::set_flags`]
//! hides the categories the configuration turns off, as Falco's `*_enabled` flags do.
//! Counters and gauges are keyed by family name and label values. Writers are the delivery
//! workers (per alert, not per event) and the agent's main loop, which copies the engine's
//! counters in periodically, so a mutex is cheap enough here.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Whether a family is a counter or a gauge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

/// Which of Falco's `metrics:` flags gates a family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    /// Falco's wrapper metrics: always exported.
    Base,
    /// `rules_counters_enabled`.
    Rules,
    /// `resource_utilization_enabled`.
    Resource,
    /// `state_counters_enabled`.
    State,
    /// `kernel_event_counters_enabled`.
    Kernel,
    /// `libbpf_stats_enabled`.
    Libbpf,
}

/// Falco's `metrics:` category flags (all on by default, as in Falco).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flags {
    pub rules_counters: bool,
    pub resource_utilization: bool,
    pub state_counters: bool,
    pub kernel_event_counters: bool,
    pub libbpf_stats: bool,
}

impl Default for Flags {
    fn default() -> Flags {
        Flags {
            rules_counters: true,
            resource_utilization: true,
            state_counters: true,
            kernel_event_counters: true,
            libbpf_stats: true,
        }
    }
}

impl Flags {
    /// Whether families of `category` are exported.
    pub fn allows(&self, category: Category) -> bool {
        match category {
            Category::Base => true,
            Category::Rules => self.rules_counters,
            Category::Resource => self.resource_utilization,
            Category::State => self.state_counters,
            Category::Kernel => self.kernel_event_counters,
            Category::Libbpf => self.libbpf_stats,
        }
    }
}

/// Family names used outside this module.
pub mod names {
    pub const VERSION_INFO: &str = "falcosecurity_falco_version_info";
    pub const ENGINE_NAME_INFO: &str = "falcosecurity_scap_engine_name_info";
    pub const KERNEL_RELEASE_INFO: &str = "falcosecurity_falco_kernel_release_info";
    pub const HOSTNAME_INFO: &str = "falcosecurity_evt_hostname_info";
    pub const EVT_SOURCE_INFO: &str = "falcosecurity_falco_evt_source_info";
    pub const START_TS: &str = "falcosecurity_falco_start_timestamp_nanoseconds";
    pub const HOST_BOOT_TS: &str = "falcosecurity_falco_host_boot_timestamp_nanoseconds";
    pub const HOST_NUM_CPUS: &str = "falcosecurity_falco_host_num_cpus_total";
    pub const OUTPUTS_QUEUE_DROPS: &str = "falcosecurity_falco_outputs_queue_num_drops_total";
    pub const DURATION: &str = "falcosecurity_falco_duration_seconds_total";
    pub const RULES_MATCHES: &str = "falcosecurity_falco_rules_matches_total";
    pub const CPU_USAGE: &str = "falcosecurity_falco_cpu_usage_ratio";
    pub const MEMORY_RSS: &str = "falcosecurity_falco_memory_rss_bytes";
    pub const MEMORY_VSZ: &str = "falcosecurity_falco_memory_vsz_bytes";
    pub const MEMORY_PSS: &str = "falcosecurity_falco_memory_pss_bytes";
    pub const HOST_CPU_USAGE: &str = "falcosecurity_falco_host_cpu_usage_ratio";
    pub const HOST_MEMORY_USED: &str = "falcosecurity_falco_host_memory_used_bytes";
    pub const HOST_PROCS_RUNNING: &str = "falcosecurity_falco_host_procs_running_total";
    pub const HOST_OPEN_FDS: &str = "falcosecurity_falco_host_open_fds_total";
    pub const N_THREADS: &str = "falcosecurity_scap_n_threads_total";
    pub const N_FDS: &str = "falcosecurity_scap_n_fds_total";
    pub const N_CONTAINERS: &str = "falcosecurity_scap_n_containers_total";
    pub const N_DROPS_FULL_THREADTABLE: &str = "falcosecurity_scap_n_drops_full_threadtable_total";
    pub const N_EVTS: &str = "falcosecurity_scap_n_evts_total";
    pub const N_DROPS: &str = "falcosecurity_scap_n_drops_total";
    pub const N_DROPS_BUFFER: &str = "falcosecurity_scap_n_drops_buffer_total";
    pub const N_DROPS_SCRATCH_MAP: &str = "falcosecurity_scap_n_drops_scratch_map_total";
    pub const N_DROPS_PAGE_FAULTS: &str = "falcosecurity_scap_n_drops_page_faults_total";
    pub const N_DROPS_BUG: &str = "falcosecurity_scap_n_drops_bug_total";
    pub const EVENTS_PROCESSED: &str = "vigil_events_processed_total";
    pub const SOURCE_QUEUE_DROPS: &str = "vigil_source_queue_drops_total";
    pub const SOURCE_FILTERED_FAILED: &str = "vigil_source_filtered_failed_total";
    pub const SOURCE_FOLDED_STATE: &str = "vigil_source_folded_state_total";
    pub const BPF_RECORDS_SUBMITTED: &str = "vigil_bpf_records_submitted_total";
    pub const EVAL_SECONDS: &str = "vigil_rule_evaluation_seconds_total";
    pub const RULE_EVAL_SECONDS: &str = "vigil_rule_eval_seconds_total";
    pub const RULE_EVALUATIONS: &str = "vigil_rule_evaluations_total";
    pub const CONTAINER_LOOKUPS: &str = "vigil_container_lookups_total";
    pub const CONTAINER_LOOKUP_MISSES: &str = "vigil_container_lookup_misses_total";
    pub const CONTAINER_LOOKUP_SECONDS: &str = "vigil_container_lookup_seconds_total";
    pub const CONTAINER_LOOKUP_MAX_SECONDS: &str = "vigil_container_lookup_max_seconds";
    pub const OUTPUT_QUEUE_DEPTH: &str = "vigil_output_queue_depth";
    pub const OUTPUT_SPOOL_BYTES: &str = "vigil_output_spool_bytes";
    pub const OUTPUT_DELIVERED: &str = "vigil_output_delivered_total";
    pub const OUTPUT_FAILURES: &str = "vigil_output_delivery_failures_total";
    pub const OUTPUT_TIMEOUTS: &str = "vigil_output_timeouts_total";
    pub const OUTPUT_DROPPED: &str = "vigil_output_dropped_total";
    pub const OUTPUT_RETRIED: &str = "vigil_output_retried_total";
    pub const OUTPUT_ERRORS: &str = "vigil_output_errors_total";
    pub const INTERNAL_ALERTS: &str = "vigil_internal_alerts_total";
    pub const UP: &str = "vigil_up";
    pub const BPF_RUNS: &str = "vigil_bpf_program_runs_total";
    pub const BPF_RUN_SECONDS: &str = "vigil_bpf_program_run_seconds_total";
}

/// Falco's `n_drops_buffer` label pairs (`dir`, `drop`), every one exported from the first
/// scrape. Vigil's kernel side does not classify ring-buffer drops by system call, so all of
/// them are counted under `{dir="exit",drop="other_interest"}` ([`BUFFER_DROP_LABELS`]).
pub const BUFFER_DROP_KINDS: &[(&str, &str)] = &[
    ("enter", "clone_fork"),
    ("exit", "clone_fork"),
    ("enter", "execve"),
    ("exit", "execve"),
    ("enter", "connect"),
    ("exit", "connect"),
    ("enter", "open"),
    ("exit", "open"),
    ("enter", "dir_file"),
    ("exit", "dir_file"),
    ("enter", "other_interest"),
    ("exit", "other_interest"),
    ("exit", "close"),
    ("exit", "proc"),
];

/// Where Vigil's `buffer_full` drops are counted in `falcosecurity_scap_n_drops_buffer_total`.
pub const BUFFER_DROP_LABELS: [(&str, &str); 2] = [("dir", "exit"), ("drop", "other_interest")];

use Category::{Base, Kernel, Libbpf, Resource, Rules, State};
use Kind::{Counter, Gauge};

/// Every family Vigil exports: name, kind, category, help.
pub const FAMILIES: &[(&str, Kind, Category, &str)] = &[
    (names::ENGINE_NAME_INFO, Gauge, Base, "The capture engine (modern_bpf, savefile or ptrace)."),
    (names::VERSION_INFO, Gauge, Base, "Vigil's version (Falco's falco.version)."),
    (names::KERNEL_RELEASE_INFO, Gauge, Base, "Release of the running kernel."),
    (names::HOSTNAME_INFO, Gauge, Base, "Hostname in alerts."),
    (names::EVT_SOURCE_INFO, Gauge, Base, "Enabled event sources."),
    (names::START_TS, Gauge, Base, "When the agent started (ns since the epoch)."),
    (names::HOST_BOOT_TS, Gauge, Base, "When the host booted (ns since the epoch)."),
    (names::HOST_NUM_CPUS, Gauge, Base, "Online CPUs of the host."),
    (
        names::OUTPUTS_QUEUE_DROPS,
        Counter,
        Base,
        "Alerts the outputs lost, all outputs and reasons (per output: vigil_output_dropped_total).",
    ),
    (names::DURATION, Counter, Base, "Seconds since the agent started."),
    (
        names::RULES_MATCHES,
        Counter,
        Rules,
        "Matches per loaded rule (labels rule_name, priority as Falco's number 0-7, source, tag_<tag>).",
    ),
    (names::CPU_USAGE, Gauge, Resource, "CPU time of the agent over its lifetime, as a ratio of one CPU."),
    (names::MEMORY_RSS, Gauge, Resource, "Resident memory of the agent."),
    (names::MEMORY_VSZ, Gauge, Resource, "Virtual memory size of the agent."),
    (names::MEMORY_PSS, Gauge, Resource, "Proportional set size of the agent."),
    (names::HOST_CPU_USAGE, Gauge, Resource, "Busy CPU time of the host since boot, as a ratio of all CPUs."),
    (names::HOST_MEMORY_USED, Gauge, Resource, "Memory in use on the host (total less available)."),
    (names::HOST_PROCS_RUNNING, Gauge, Resource, "Runnable processes on the host."),
    (names::HOST_OPEN_FDS, Gauge, Resource, "Open file descriptors on the host."),
    (names::N_THREADS, Gauge, State, "Threads in the process table."),
    (names::N_FDS, Gauge, State, "File descriptors in the fd tables."),
    (names::N_CONTAINERS, Gauge, State, "Containers known."),
    (
        names::CONTAINER_LOOKUPS,
        Counter,
        State,
        "Container metadata lookups in the runtimes' state (one per new container, plus retries).",
    ),
    (
        names::CONTAINER_LOOKUP_MISSES,
        Counter,
        State,
        "Container metadata lookups that found nothing or only the runc state.",
    ),
    (
        names::CONTAINER_LOOKUP_SECONDS,
        Counter,
        State,
        "Time spent in container metadata lookups (the event that started one waited for it).",
    ),
    (
        names::CONTAINER_LOOKUP_MAX_SECONDS,
        Gauge,
        State,
        "The longest container metadata lookup.",
    ),
    (
        names::N_DROPS_FULL_THREADTABLE,
        Counter,
        State,
        "Threads not tracked because the process table was full.",
    ),
    (
        names::N_EVTS,
        Counter,
        Kernel,
        "Events the source delivered (drops excluded, as in Falco; events in = this + n_drops).",
    ),
    (names::N_DROPS, Counter, Kernel, "Events lost before processing, every reason."),
    (
        names::N_DROPS_BUFFER,
        Counter,
        Kernel,
        "Events lost because the kernel ring buffer was full (unclassified: dir=exit, drop=other_interest).",
    ),
    (names::N_DROPS_SCRATCH_MAP, Counter, Kernel, "Events lost for lack of kernel scratch space (always 0 in Vigil)."),
    (names::N_DROPS_PAGE_FAULTS, Counter, Kernel, "Events lost because an argument could not be read from process memory."),
    (names::N_DROPS_BUG, Counter, Kernel, "Events lost because a driver record could not be decoded."),
    (
        names::EVENTS_PROCESSED,
        Counter,
        Kernel,
        "Events that went through state and rules (Falco's falco.num_evts).",
    ),
    (
        names::SOURCE_QUEUE_DROPS,
        Counter,
        Kernel,
        "Events lost because the source's queue toward the engine overflowed (included in n_drops).",
    ),
    (
        names::SOURCE_FILTERED_FAILED,
        Counter,
        Kernel,
        "Failed system calls the eBPF driver filtered out because no rule and no state update can use them (filtering, not drops: in neither n_evts nor n_drops).",
    ),
    (
        names::SOURCE_FOLDED_STATE,
        Counter,
        Kernel,
        "Descriptor operations no rule watches (close, dup*, fcntl F_DUPFD*) the eBPF driver folded into a later record that leaves the state engine's tables the same (not drops: in neither n_evts nor n_drops).",
    ),
    (
        names::BPF_RECORDS_SUBMITTED,
        Counter,
        Kernel,
        "Records the eBPF programs committed to the ring buffers, counted in the kernel (vigil watch only): n_evts + n_drops_bug + records not yet read, so a record lost unseen on the way shows.",
    ),
    (names::EVAL_SECONDS, Counter, Base, "Time spent updating state and evaluating rules."),
    (
        names::RULE_EVALUATIONS,
        Counter,
        Rules,
        "Evaluations of each enabled rule's condition (label rule), exact; restarts at a reload.",
    ),
    (
        names::RULE_EVAL_SECONDS,
        Counter,
        Rules,
        "Time spent evaluating each enabled rule's condition (label rule), estimated from a sample of timed events; restarts at a reload.",
    ),
    (names::OUTPUT_QUEUE_DEPTH, Gauge, Base, "Alerts waiting in memory, per output."),
    (names::OUTPUT_SPOOL_BYTES, Gauge, Base, "Bytes of alerts waiting on disk, per output."),
    (names::OUTPUT_DELIVERED, Counter, Base, "Alerts delivered, per output."),
    (names::OUTPUT_FAILURES, Counter, Base, "Failed delivery attempts, per output."),
    (
        names::OUTPUT_TIMEOUTS,
        Counter,
        Base,
        "Delivery attempts that timed out, per output (included in the failures).",
    ),
    (
        names::OUTPUT_RETRIED,
        Counter,
        Base,
        "Alerts sent again after a failed attempt, per output.",
    ),
    (
        names::OUTPUT_ERRORS,
        Counter,
        Base,
        "Failed delivery attempts by cause (unavailable, timeout, auth, tls, unknown_topic, rejected, misconfigured, io), per output.",
    ),
    (
        names::OUTPUT_DROPPED,
        Counter,
        Base,
        "Alerts an output lost, by reason (queue or spool budget exhausted, given up after failed attempts or consecutive timeouts, spool records damaged or missing on disk).",
    ),
    (names::INTERNAL_ALERTS, Counter, Base, "Internal alerts raised by the agent, by rule."),
    (names::UP, Gauge, Base, "1 while the agent runs."),
    (
        names::BPF_RUNS,
        Counter,
        Libbpf,
        "Runs of each BPF program of the agent (counted while kernel.bpf_stats_enabled is set).",
    ),
    (
        names::BPF_RUN_SECONDS,
        Counter,
        Libbpf,
        "Time spent in each BPF program of the agent (counted while kernel.bpf_stats_enabled is set).",
    ),
];

/// Falco's number for a priority name (`Emergency` 0 … `Debug` 7; `Info` = `Informational`);
/// unknown names are kept as they are.
pub fn priority_number(priority: &str) -> String {
    let n = match priority.to_ascii_lowercase().as_str() {
        "emergency" => 0,
        "alert" => 1,
        "critical" => 2,
        "error" => 3,
        "warning" => 4,
        "notice" => 5,
        "informational" | "info" => 6,
        "debug" => 7,
        _ => return priority.to_owned(),
    };
    n.to_string()
}

/// A name as Falco writes it in metric keys (`falco.rules.<name>`): characters outside
/// `[A-Za-z0-9_]` become `_`, runs of `_` collapse to one.
pub fn sanitize_metric_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '_' {
            c
        } else {
            '_'
        };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    out
}

/// The labels of a rule's `falcosecurity_falco_rules_matches_total` series, as Falco writes
/// them: `rule_name`, `priority` (its number), `source`, and `tag_<tag>="true"` per tag (a
/// tag's characters outside `[A-Za-z0-9_]` become `_`), sorted by name.
pub fn rule_labels(rule: &str, priority: &str, source: &str, tags: &[String]) -> Labels {
    let mut labels: Labels = vec![
        ("priority".to_owned(), priority_number(priority)),
        ("rule_name".to_owned(), rule.to_owned()),
        ("source".to_owned(), source.to_owned()),
    ];
    for tag in tags {
        let name: String = tag
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        labels.push((format!("tag_{name}"), "true".to_owned()));
    }
    labels.sort();
    labels.dedup_by(|a, b| a.0 == b.0);
    labels
}

/// A series' labels: (name, value) pairs.
pub type Labels = Vec<(String, String)>;

struct Inner {
    samples: BTreeMap<String, BTreeMap<Labels, f64>>,
    flags: Flags,
    started: Instant,
    started_ns: u64,
}

impl Default for Inner {
    fn default() -> Inner {
        Inner {
            samples: BTreeMap::new(),
            flags: Flags::default(),
            started: Instant::now(),
            started_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        }
    }
}

/// A shared registry; clones are handles to the same samples.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Mutex<Inner>>,
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry with Falco's wrapper series set: version, kernel release, event source,
    /// start and boot time, CPUs, and `up`-style zeros for the outputs' drop total.
    pub fn new() -> Metrics {
        let m = Metrics {
            inner: Arc::new(Mutex::new(Inner::default())),
        };
        m.set(
            names::VERSION_INFO,
            &[("version", env!("CARGO_PKG_VERSION"))],
            1.0,
        );
        if let Some(release) = read_trimmed("/proc/sys/kernel/osrelease") {
            m.set(
                names::KERNEL_RELEASE_INFO,
                &[("kernel_release", &release)],
                1.0,
            );
        }
        m.set(names::EVT_SOURCE_INFO, &[("evt_source", "syscall")], 1.0);
        let started_ns = m.lock().started_ns;
        m.set(names::START_TS, &[], started_ns as f64);
        if let Some(boot) = host_boot_ns() {
            m.set(names::HOST_BOOT_TS, &[], boot as f64);
        }
        if let Some(cpus) = online_cpus() {
            m.set(names::HOST_NUM_CPUS, &[], cpus as f64);
        }
        m.add(names::OUTPUTS_QUEUE_DROPS, &[], 0.0);
        m.set(names::DURATION, &[], 0.0);
        m
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave samples half-written (plain numbers).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Falco's `metrics:` category flags: families of a disabled category are not rendered.
    pub fn set_flags(&self, flags: Flags) {
        self.lock().flags = flags;
    }

    pub fn flags(&self) -> Flags {
        self.lock().flags
    }

    /// Adds `by` to a counter (created at 0).
    pub fn add(&self, name: &str, label_pairs: &[(&str, &str)], by: f64) {
        self.add_labels(name, labels(label_pairs), by);
    }

    /// [`Metrics::add`] with owned labels (in the order they are to be rendered).
    pub fn add_labels(&self, name: &str, labels: Labels, by: f64) {
        let mut inner = self.lock();
        *inner
            .samples
            .entry(name.to_owned())
            .or_default()
            .entry(labels)
            .or_insert(0.0) += by;
    }

    /// Sets a gauge, or a counter copied from a source of truth (the engine's totals).
    pub fn set(&self, name: &str, label_pairs: &[(&str, &str)], value: f64) {
        self.lock()
            .samples
            .entry(name.to_owned())
            .or_default()
            .insert(labels(label_pairs), value);
    }

    /// Replaces every sample of a family (an info series whose label changed).
    pub fn set_only(&self, name: &str, label_pairs: &[(&str, &str)], value: f64) {
        let mut inner = self.lock();
        let family = inner.samples.entry(name.to_owned()).or_default();
        family.clear();
        family.insert(labels(label_pairs), value);
    }

    /// A sample's value (0 when absent).
    pub fn get(&self, name: &str, label_pairs: &[(&str, &str)]) -> f64 {
        self.lock()
            .samples
            .get(name)
            .and_then(|m| m.get(&labels(label_pairs)))
            .copied()
            .unwrap_or(0.0)
    }

    /// Whether a sample exists (zero-valued or not).
    pub fn has(&self, name: &str, label_pairs: &[(&str, &str)]) -> bool {
        self.lock()
            .samples
            .get(name)
            .is_some_and(|m| m.contains_key(&labels(label_pairs)))
    }

    /// The sum of a family over all label values.
    pub fn sum(&self, name: &str) -> f64 {
        self.lock()
            .samples
            .get(name)
            .map_or(0.0, |m| m.values().sum())
    }

    /// Every sample of a family: (labels, value), in label order.
    pub fn samples(&self, name: &str) -> Vec<(Labels, f64)> {
        self.lock()
            .samples
            .get(name)
            .map(|m| m.iter().map(|(l, v)| (l.clone(), *v)).collect())
            .unwrap_or_default()
    }

    /// Samples what changes without events: the agent's uptime, its CPU and memory, and the
    /// host's (Falco's resource utilization), from `/proc`.
    pub fn sample_process(&self) {
        let elapsed = self.lock().started.elapsed().as_secs_f64();
        self.set(names::DURATION, &[], elapsed.floor());
        if let Some(p) = process_usage_full() {
            self.set(names::CPU_USAGE, &[], p.cpu_seconds / elapsed.max(1e-3));
            self.set(names::MEMORY_RSS, &[], p.rss_bytes);
            self.set(names::MEMORY_VSZ, &[], p.vsz_bytes);
            if let Some(pss) = p.pss_bytes {
                self.set(names::MEMORY_PSS, &[], pss);
            }
        }
        let h = host_usage();
        if let Some(v) = h.cpu_ratio {
            self.set(names::HOST_CPU_USAGE, &[], v);
        }
        if let Some(v) = h.memory_used_bytes {
            self.set(names::HOST_MEMORY_USED, &[], v);
        }
        if let Some(v) = h.procs_running {
            self.set(names::HOST_PROCS_RUNNING, &[], v);
        }
        if let Some(v) = h.open_fds {
            self.set(names::HOST_OPEN_FDS, &[], v);
        }
    }

    /// The Prometheus text exposition of every family the flags allow (families without
    /// samples are listed with their HELP and TYPE only).
    pub fn render(&self) -> String {
        let inner = self.lock();
        let mut out = String::new();
        for (name, kind, category, help) in FAMILIES {
            if !inner.flags.allows(*category) {
                continue;
            }
            let _ = writeln!(out, "# HELP {name} {help}");
            let kind = match kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
            };
            let _ = writeln!(out, "# TYPE {name} {kind}");
            if let Some(samples) = inner.samples.get(*name) {
                for (labels, value) in samples {
                    out.push_str(name);
                    if !labels.is_empty() {
                        out.push('{');
                        for (i, (k, v)) in labels.iter().enumerate() {
                            if i > 0 {
                                out.push(',');
                            }
                            let _ = write!(out, "{k}=\"{}\"", escape_label(v));
                        }
                        out.push('}');
                    }
                    let _ = writeln!(out, " {}", number(*value));
                }
            }
        }
        out
    }
}

fn number(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// Boot time from `/proc/stat`'s `btime` (seconds), in ns since the epoch.
fn host_boot_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let secs: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    secs.checked_mul(1_000_000_000)
}

/// The number of CPUs in a kernel CPU list (`0-3,8,10-11`).
pub fn count_cpu_list(list: &str) -> Option<u32> {
    let mut n = 0u32;
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        n += match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                b.checked_sub(a)? + 1
            }
            None => {
                part.parse::<u32>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

fn online_cpus() -> Option<u32> {
    count_cpu_list(&std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?)
}

/// The agent's own CPU time and memory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessUsage {
    pub cpu_seconds: f64,
    pub rss_bytes: f64,
    pub vsz_bytes: f64,
    /// From `/proc/self/smaps_rollup` (absent on kernels before 4.14).
    pub pss_bytes: Option<f64>,
}

/// (CPU seconds, resident bytes) of this process, from `/proc/self/stat` and
/// `/proc/self/statm`.
pub fn process_usage() -> Option<(f64, f64)> {
    process_usage_full().map(|p| (p.cpu_seconds, p.rss_bytes))
}

/// This process's usage; clock ticks are taken as 100 per second and pages as 4 KiB (Linux's
/// values on the supported architectures).
pub fn process_usage_full() -> Option<ProcessUsage> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may contain spaces) start after the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after `)`, 0-based 11/12.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let mut statm = statm.split_whitespace();
    let vsz_pages: f64 = statm.next()?.parse().ok()?;
    let rss_pages: f64 = statm.next()?.parse().ok()?;
    let pss_bytes = std::fs::read_to_string("/proc/self/smaps_rollup")
        .ok()
        .and_then(|t| meminfo_kb(&t, "Pss:"))
        .map(|kb| kb * 1024.0);
    Some(ProcessUsage {
        cpu_seconds: (utime + stime) / 100.0,
        rss_bytes: rss_pages * 4096.0,
        vsz_bytes: vsz_pages * 4096.0,
        pss_bytes,
    })
}

/// The value in kB of `key` in a `/proc/meminfo`-style text.
fn meminfo_kb(text: &str, key: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The host's usage (each value absent when its `/proc` file cannot be read).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostUsage {
    pub cpu_ratio: Option<f64>,
    pub memory_used_bytes: Option<f64>,
    pub procs_running: Option<f64>,
    pub open_fds: Option<f64>,
}

/// Busy share of all CPU time since boot from `/proc/stat`'s `cpu` line (idle and iowait
/// are not busy), and `procs_running`.
pub fn parse_proc_stat(text: &str) -> (Option<f64>, Option<f64>) {
    let cpu = text
        .lines()
        .find_map(|l| l.strip_prefix("cpu "))
        .and_then(|l| {
            let v: Vec<f64> = l
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            // user nice system idle iowait irq softirq steal (guest time is inside user/nice).
            let total: f64 = v.iter().take(8).sum();
            let idle = v.get(3)? + v.get(4).unwrap_or(&0.0);
            (total > 0.0).then(|| (total - idle) / total)
        });
    let running = text
        .lines()
        .find_map(|l| l.strip_prefix("procs_running "))
        .and_then(|v| v.trim().parse().ok());
    (cpu, running)
}

pub fn host_usage() -> HostUsage {
    let (cpu_ratio, procs_running) = std::fs::read_to_string("/proc/stat")
        .map(|t| parse_proc_stat(&t))
        .unwrap_or((None, None));
    let memory_used_bytes = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        Some((meminfo_kb(&t, "MemTotal:")? - meminfo_kb(&t, "MemAvailable:")?) * 1024.0)
    });
    let open_fds = std::fs::read_to_string("/proc/sys/fs/file-nr")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok());
    HostUsage {
        cpu_ratio,
        memory_used_bytes,
        procs_running,
        open_fds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_gauges_and_text() {
        let m = Metrics::new();
        m.add(
            names::OUTPUT_DROPPED,
            &[("sink", "http"), ("reason", "spool_full")],
            2.0,
        );
        m.add(
            names::OUTPUT_DROPPED,
            &[("sink", "http"), ("reason", "spool_full")],
            1.0,
        );
        m.set(names::OUTPUT_QUEUE_DEPTH, &[("sink", "http")], 7.0);
        m.add_labels(
            names::RULES_MATCHES,
            rule_labels("a \"quoted\"\nrule", "Warning", "syscall", &[]),
            1.0,
        );
        assert_eq!(
            m.get(
                names::OUTPUT_DROPPED,
                &[("sink", "http"), ("reason", "spool_full")]
            ),
            3.0
        );
        assert_eq!(m.sum(names::OUTPUT_DROPPED), 3.0);
        let text = m.render();
        assert!(text.contains("# TYPE vigil_output_queue_depth gauge\nvigil_output_queue_depth{sink=\"http\"} 7\n"), "{text}");
        assert!(
            text.contains("vigil_output_dropped_total{sink=\"http\",reason=\"spool_full\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("rule_name=\"a \\\"quoted\\\"\\nrule\""),
            "{text}"
        );
    }

    #[test]
    fn falco_names_follow_the_unit_conventions() {
        for (name, kind, _, help) in FAMILIES {
            assert!(
                name.starts_with("falcosecurity_falco_")
                    || name.starts_with("falcosecurity_scap_")
                    || name.starts_with("falcosecurity_evt_")
                    || name.starts_with("vigil_"),
                "{name}: neither Falco's nor a vigil_ extra"
            );
            if *kind == Kind::Counter {
                assert!(name.ends_with("_total"), "{name}: a counter ends in _total");
            }
            if name.ends_with("_info") {
                assert_eq!(*kind, Kind::Gauge, "{name}");
            }
            assert!(!help.is_empty() && !help.contains('\n'), "{name}");
        }
        let mut seen: Vec<&str> = FAMILIES.iter().map(|f| f.0).collect();
        seen.sort_unstable();
        let n = seen.len();
        seen.dedup();
        assert_eq!(seen.len(), n, "a family is listed twice");
    }

    #[test]
    fn wrapper_series_exist_from_the_start_and_parse() {
        let m = Metrics::new();
        m.sample_process();
        let text = m.render();
        let lines: Vec<_> = text.lines().map(|l| Ok(l.to_owned())).collect();
        let scrape = prometheus_parse::Scrape::parse(lines.into_iter()).expect("valid exposition");
        let find = |name: &str| {
            scrape
                .samples
                .iter()
                .find(|s| s.metric == name)
                .unwrap_or_else(|| panic!("{name} missing:\n{text}"))
        };
        let v = find(names::VERSION_INFO);
        assert_eq!(v.labels.get("version"), Some(env!("CARGO_PKG_VERSION")));
        assert_eq!(
            find(names::EVT_SOURCE_INFO).labels.get("evt_source"),
            Some("syscall")
        );
        assert!(find(names::KERNEL_RELEASE_INFO)
            .labels
            .get("kernel_release")
            .is_some());
        for gauge in [
            names::START_TS,
            names::HOST_BOOT_TS,
            names::HOST_NUM_CPUS,
            names::MEMORY_RSS,
            names::MEMORY_VSZ,
            names::HOST_MEMORY_USED,
        ] {
            assert!(
                matches!(find(gauge).value, prometheus_parse::Value::Gauge(v) if v > 0.0),
                "{gauge} > 0"
            );
        }
        assert!(matches!(
            find(names::OUTPUTS_QUEUE_DROPS).value,
            prometheus_parse::Value::Counter(v) if v == 0.0
        ));
        assert!(m.get(names::START_TS, &[]) >= m.get(names::HOST_BOOT_TS, &[]));
    }

    #[test]
    fn flags_hide_their_categories_only() {
        let m = Metrics::new();
        m.add_labels(
            names::RULES_MATCHES,
            rule_labels("R", "Notice", "syscall", &[]),
            0.0,
        );
        m.set(names::N_EVTS, &[], 5.0);
        m.set(names::N_THREADS, &[], 3.0);
        m.set(names::BPF_RUNS, &[("prog_id", "1")], 2.0);
        m.sample_process();
        let all = m.render();
        for name in [
            names::RULES_MATCHES,
            names::N_EVTS,
            names::N_THREADS,
            names::BPF_RUNS,
            names::MEMORY_RSS,
        ] {
            assert!(all.contains(&format!("\n{name}")), "{name} on by default");
        }
        m.set_flags(Flags {
            rules_counters: false,
            resource_utilization: false,
            state_counters: false,
            kernel_event_counters: false,
            libbpf_stats: false,
        });
        let none = m.render();
        for name in [
            names::RULES_MATCHES,
            names::N_EVTS,
            names::N_DROPS,
            names::EVENTS_PROCESSED,
            names::N_THREADS,
            names::BPF_RUNS,
            names::MEMORY_RSS,
            names::CPU_USAGE,
        ] {
            assert!(!none.contains(name), "{name} hidden:\n{none}");
        }
        for name in [
            names::VERSION_INFO,
            names::OUTPUTS_QUEUE_DROPS,
            names::DURATION,
        ] {
            assert!(none.contains(name), "{name} always exported");
        }
        let f = Flags {
            state_counters: false,
            ..Flags::default()
        };
        assert!(
            !f.allows(Category::State) && f.allows(Category::Kernel) && f.allows(Category::Base)
        );
    }

    #[test]
    fn rule_labels_are_falcos() {
        let l = rule_labels(
            "Read sensitive file untrusted",
            "Warning",
            "syscall",
            &[
                "T1555".into(),
                "mitre_credential-access".into(),
                "host".into(),
            ],
        );
        let l: Vec<(&str, &str)> = l.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            l,
            [
                ("priority", "4"),
                ("rule_name", "Read sensitive file untrusted"),
                ("source", "syscall"),
                ("tag_T1555", "true"),
                ("tag_host", "true"),
                ("tag_mitre_credential_access", "true"),
            ]
        );
        assert_eq!(priority_number("Emergency"), "0");
        assert_eq!(priority_number("INFO"), "6");
        assert_eq!(priority_number("Debug"), "7");
        assert_eq!(priority_number("weird"), "weird");
        assert_eq!(
            sanitize_metric_name("Contact K8S API Server From Container"),
            "Contact_K8S_API_Server_From_Container"
        );
        assert_eq!(sanitize_metric_name("a - b.c"), "a_b_c");
    }

    #[test]
    fn proc_parsers() {
        assert_eq!(count_cpu_list("0-3,8,10-11\n"), Some(7));
        assert_eq!(count_cpu_list("0"), Some(1));
        for junk in ["", "x", "3-1", "1-", "-"] {
            assert_eq!(count_cpu_list(junk), None, "{junk:?}");
        }
        let (cpu, running) =
            parse_proc_stat("cpu  60 0 20 100 20 0 0 0 0 0\ncpu0 1 2 3 4\nprocs_running 3\n");
        assert_eq!(cpu, Some(0.4));
        assert_eq!(running, Some(3.0));
        assert_eq!(parse_proc_stat("garbage"), (None, None));
        let p = process_usage_full().expect("/proc/self is readable on Linux");
        assert!(p.rss_bytes > 0.0 && p.vsz_bytes >= p.rss_bytes);
        let (cpu, rss) = process_usage().unwrap();
        assert!(cpu >= 0.0 && rss > 0.0);
    }
}
