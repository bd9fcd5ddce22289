//! `--busy CPUS`: keeps CPUs from going idle during every configuration of a run.
//!
//! On a VM, waking an idle vCPU costs tens of microseconds, so a workload whose threads ping-pong
//! between CPUs (UnixBench's context1 and pipe) scores *higher* when something else keeps the
//! other vCPU awake, as an agent does. A spinner at `SCHED_IDLE` on those CPUs, in the agent-off
//! runs as in the others, makes every configuration see awake CPUs; it yields to any other
//! runnable task, so it takes no time from the workload or the agent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::{sys, BenchError};

/// Parses a CPU list: `1`, `0,1`, `0-3`, `0-1,3`.
pub fn parse_cpus(text: &str) -> Result<Vec<usize>, BenchError> {
    let bad = || BenchError::Agent(format!("invalid CPU list `{text}`"));
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().map_err(|_| bad())?;
                let b: usize = b.trim().parse().map_err(|_| bad())?;
                if a > b || b >= 4096 {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => {
                let c: usize = part.parse().map_err(|_| bad())?;
                if c >= 4096 {
                    return Err(bad());
                }
                cpus.push(c);
            }
        }
    }
    if cpus.is_empty() {
        return Err(bad());
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Spinners on some CPUs, stopped on drop.
pub struct Busy {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Busy {
    /// Starts one `SCHED_IDLE` spinner pinned to each of `cpus`.
    pub fn start(cpus: &[usize]) -> Result<Busy, BenchError> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut busy = Busy {
            stop: Arc::clone(&stop),
            threads: Vec::new(),
        };
        for &cpu in cpus {
            let (tx, rx) = std::sync::mpsc::channel();
            let stop = Arc::clone(&stop);
            let handle = std::thread::Builder::new()
                .name(format!("busy-{cpu}"))
                .spawn(move || {
                    let pinned = sys::pin_idle_thread(cpu);
                    let ok = pinned.is_ok();
                    let _ = tx.send(pinned);
                    if !ok {
                        return;
                    }
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
                .map_err(|e| BenchError::Agent(format!("cannot start a spinner: {e}")))?;
            busy.threads.push(handle);
            match rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    return Err(BenchError::Agent(format!(
                        "cannot keep CPU {cpu} busy (affinity or SCHED_IDLE): {e}"
                    )))
                }
                Err(_) => return Err(BenchError::Agent("a spinner died".into())),
            }
        }
        Ok(busy)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_cpus("1").unwrap(), [1]);
        assert_eq!(parse_cpus("0-2, 5,1").unwrap(), [0, 1, 2, 5]);
        for bad in ["", "x", "3-1", "1-", "99999"] {
            assert!(parse_cpus(bad).is_err(), "`{bad}` refused");
        }
    }

    #[test]
    fn spinners_run_at_idle_priority_on_their_cpu_and_stop() {
        let busy = Busy::start(&[0]).expect("a spinner on CPU 0");
        let tids: Vec<String> = std::fs::read_dir("/proc/self/task")
            .expect("task dir")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        let spinner = tids
            .iter()
            .find(|tid| {
                std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
                    .is_ok_and(|c| c.trim() == "busy-0")
            })
            .expect("the spinner thread exists");
        let stat =
            std::fs::read_to_string(format!("/proc/self/task/{spinner}/stat")).expect("its stat");
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        // Fields after the comm: state is 3rd overall (index 0 here); policy is field 41
        // (index 38), processor field 39 (index 36).
        assert_eq!(fields[38], "5", "SCHED_IDLE policy: {stat}");
        let status = std::fs::read_to_string(format!("/proc/self/task/{spinner}/status"))
            .expect("its status");
        assert!(
            status
                .lines()
                .any(|l| l.starts_with("Cpus_allowed_list:") && l.trim_end().ends_with("\t0")),
            "pinned to CPU 0: {status}"
        );
        drop(busy);
        assert!(
            !std::fs::read_dir("/proc/self/task")
                .unwrap()
                .filter_map(|e| e.ok())
                .any(|e| std::fs::read_to_string(e.path().join("comm"))
                    .is_ok_and(|c| c.trim() == "busy-0")),
            "the spinner stopped"
        );
    }
}
