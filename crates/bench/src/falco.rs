//! Falco as an agent of the benches (`--agent falco[:ARGS]`): where an install is, how it is
//! started, how it says it is ready, how its drops and alerts are read, and how it stops.
//!
//! The install is built by the user (docs/bench/README.md, "Falco"); the bench only runs it:
//! - **install**: a prefix holding `bin/falco` and `etc/falco/falco.yaml` (plugins and rules
//!   where that configuration names them), or the `falco` binary itself, its configuration then
//!   at `../etc/falco/falco.yaml`;
//! - **start**: `falco -c CONFIG [-r RULES]… -v` with `-o` overrides that change only where
//!   output goes: alerts as JSON lines on stdout (`json_output`, `stdout_output`; no file,
//!   HTTP or syslog output), logs on stderr, no web server (its port could be taken), and a
//!   snapshot of the kernel event counters every second into a file of the bench
//!   (`metrics.output_file`; the other metrics, which scan `/proc`, stay off). The engine
//!   kind is left to the configuration (Falco's default is `modern_ebpf`); `falco:ARGS` adds
//!   arguments, e.g. `falco:-o engine.kind=modern_ebpf`;
//! - **ready**: the first metrics snapshot is written from the event loop, so its appearance
//!   means the probe is attached and events flow (Falco prints nothing after it opens a source);
//! - **stop**: SIGTERM; with `-v` Falco prints `Driver Events:N` and `Driver Drops:N` to stderr
//!   as it exits (libscap's counters: events include the dropped ones). An exit without them
//!   falls back to the last metrics snapshot (`scap.n_evts`, `scap.n_drops`);
//! - **alerts**: JSON lines on stdout, one per alert.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::counters::WatchStats;
use crate::BenchError;

/// Where the bench looks for Falco when neither `--falco` nor `VIGIL_BENCH_FALCO` says.
pub const DEFAULT_INSTALL: &str = "target/peers/falco";

/// A Falco install: its binary and its configuration file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FalcoInstall {
    pub bin: PathBuf,
    pub config: PathBuf,
}

impl FalcoInstall {
    /// `path` is an install prefix (`bin/falco`, `etc/falco/falco.yaml`) or the binary itself
    /// (configuration at `../etc/falco/falco.yaml`, as in a prefix).
    pub fn locate(path: &Path) -> Result<FalcoInstall, BenchError> {
        let invalid = |detail: String| BenchError::Invalid {
            what: "Falco install".into(),
            detail,
        };
        let (bin, config) = if path.is_dir() {
            (path.join("bin/falco"), path.join("etc/falco/falco.yaml"))
        } else if path.is_file() {
            let prefix = path
                .parent()
                .and_then(Path::parent)
                .unwrap_or(Path::new("/"));
            (path.to_path_buf(), prefix.join("etc/falco/falco.yaml"))
        } else {
            return Err(invalid(format!(
                "`{}` does not exist: build Falco first (docs/bench/README.md, \"Falco\") or \
                 name an install with --falco PATH or VIGIL_BENCH_FALCO",
                path.display()
            )));
        };
        if !bin.is_file() {
            return Err(invalid(format!("no Falco binary at `{}`", bin.display())));
        }
        if !config.is_file() {
            return Err(invalid(format!(
                "no Falco configuration at `{}` (expected beside the binary, in ../etc/falco)",
                config.display()
            )));
        }
        Ok(FalcoInstall { bin, config })
    }

    /// The first line of `falco --version` (e.g. `Falco version: 0.44.1 (x86_64)`).
    pub fn version(&self) -> Option<String> {
        let out = Command::new(&self.bin)
            .arg("--version")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_string)
    }

    /// The command line of one run: `metrics` is the file whose first line means ready;
    /// `extra` comes last (the agent's arguments, among them `-r RULES`, which replace the
    /// configuration's `rules_files`).
    pub fn argv(&self, metrics: &Path, extra: &[String]) -> Vec<String> {
        let mut argv = vec![
            self.bin.display().to_string(),
            "-c".into(),
            self.config.display().to_string(),
            "-v".into(),
        ];
        let overrides = [
            "json_output=true".to_string(),
            "json_include_output_property=true".into(),
            "stdout_output.enabled=true".into(),
            "file_output.enabled=false".into(),
            "http_output.enabled=false".into(),
            "program_output.enabled=false".into(),
            "syslog_output.enabled=false".into(),
            "log_syslog=false".into(),
            "log_stderr=true".into(),
            "webserver.enabled=false".into(),
            "metrics.enabled=true".into(),
            "metrics.interval=1s".into(),
            "metrics.output_rule=false".into(),
            format!("metrics.output_file={}", metrics.display()),
            "metrics.kernel_event_counters_enabled=true".into(),
            // Only the kernel counters: the host-wide /proc scans of the resource metrics
            // would be charged to Falco's CPU every second.
            "metrics.resource_utilization_enabled=false".into(),
            "metrics.state_counters_enabled=false".into(),
            "metrics.rules_counters_enabled=false".into(),
            "metrics.libbpf_stats_enabled=false".into(),
            "metrics.plugins_metrics_enabled=false".into(),
        ];
        for o in overrides {
            argv.push("-o".into());
            argv.push(o);
        }
        argv.extend(extra.iter().cloned());
        argv
    }
}

/// The counters Falco prints with `-v` as it exits (`Driver Events:N`, `Driver Drops:N`).
pub fn exit_counters(stderr: &str) -> Option<(u64, u64)> {
    let value = |key: &str| {
        stderr.lines().rev().find_map(|l| {
            l.trim()
                .strip_prefix(key)
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
    };
    Some((value("Driver Events:")?, value("Driver Drops:")?))
}

/// `(events, drops)` of the last metrics snapshot in `text` (JSON lines of
/// `metrics.output_file`; the counters are under `output_fields` or at the top level).
pub fn metrics_counters(text: &str) -> Option<(u64, u64)> {
    text.lines().rev().find_map(|line| {
        let v: serde_json::Value = serde_json::from_str(line.trim()).ok()?;
        let fields = v.get("output_fields").unwrap_or(&v);
        let num = |k: &str| fields.get(k).and_then(serde_json::Value::as_u64);
        Some((num("scap.n_evts")?, num("scap.n_drops")?))
    })
}

/// The alerts among Falco's stdout lines (JSON objects with a `rule`).
pub fn count_alerts(stdout: &str) -> u64 {
    stdout
        .lines()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l.trim())
                .is_ok_and(|v| v.get("rule").is_some_and(serde_json::Value::is_string))
        })
        .count() as u64
}

/// The stats of one Falco run, in the shape `vigil watch --stats` gives them: from the exit
/// counters, else from the last metrics snapshot; `None` when neither is there.
pub fn stats(stderr: &str, metrics: &str, stdout: &str) -> Option<WatchStats> {
    let (events_in, dropped) = exit_counters(stderr).or_else(|| metrics_counters(metrics))?;
    Some(WatchStats {
        events_in,
        processed: events_in.saturating_sub(dropped),
        dropped,
        dropped_by_reason: if dropped > 0 {
            [("driver".to_string(), dropped)].into()
        } else {
            Default::default()
        },
        alerts: count_alerts(stdout),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn exit_counters_are_the_last_ones_printed() {
        let text = "Thu Nov 27 Falco version: 0.44.1\nDriver Events:12\nDriver Drops:0\n\
                    Driver Events:1500\nDriver Drops:  7\nElapsed time: 3.1, Captured Events: 1493\n";
        assert_eq!(exit_counters(text), Some((1500, 7)), "the last pair");
        assert_eq!(exit_counters("Driver Events:10\n"), None, "no drops line");
        assert_eq!(
            exit_counters("Driver Events:x\nDriver Drops:1\n"),
            None,
            "not a number"
        );
    }

    #[test]
    fn metrics_counters_read_the_last_snapshot() {
        let text = "{\"output_fields\":{\"scap.n_evts\":10,\"scap.n_drops\":0}}\n\
                    {\"output_fields\":{\"scap.n_evts\":250,\"scap.n_drops\":3,\"falco.host_num_cpus\":2}}\n\
                    partial {\n";
        assert_eq!(metrics_counters(text), Some((250, 3)), "last complete line");
        assert_eq!(
            metrics_counters("{\"scap.n_evts\":5,\"scap.n_drops\":1}"),
            Some((5, 1)),
            "top-level keys"
        );
        assert_eq!(metrics_counters("{\"x\":1}"), None, "no counters");
    }

    #[test]
    fn stats_prefer_exit_counters_and_count_alerts() {
        let stdout = "{\"rule\":\"Read sensitive file untrusted\",\"output\":\"x\"}\n\
                      Thu 00:00: Warning text line\n{\"rule\":\"Other\"}\n{\"no_rule\":1}\n";
        let s = stats(
            "Driver Events:100\nDriver Drops:4\n",
            "{\"scap.n_evts\":90,\"scap.n_drops\":9}",
            stdout,
        )
        .expect("stats");
        assert_eq!(
            (s.events_in, s.processed, s.dropped, s.alerts),
            (100, 96, 4, 2),
            "exit counters, two JSON alerts"
        );
        assert_eq!(s.dropped_by_reason.get("driver"), Some(&4), "by reason");
        let s = stats("killed", "{\"scap.n_evts\":90,\"scap.n_drops\":9}", "").expect("fallback");
        assert_eq!((s.events_in, s.dropped), (90, 9), "metrics fallback");
        assert_eq!(stats("", "", ""), None, "nothing to read");
    }

    #[test]
    fn argv_names_config_and_metrics_file_then_the_agents_arguments() {
        let install = FalcoInstall {
            bin: PathBuf::from("/p/bin/falco"),
            config: PathBuf::from("/p/etc/falco/falco.yaml"),
        };
        let argv = install.argv(
            Path::new("/log/m.jsonl"),
            &["-r", "/r/a.yaml", "-o", "engine.kind=modern_ebpf"].map(String::from),
        );
        assert_eq!(
            &argv[..4],
            ["/p/bin/falco", "-c", "/p/etc/falco/falco.yaml", "-v"],
            "binary, config, verbose (the exit counters)"
        );
        let joined = argv.join(" ");
        for o in [
            " -v ",
            "-o json_output=true",
            "-o stdout_output.enabled=true",
            "-o http_output.enabled=false",
            "-o metrics.output_file=/log/m.jsonl",
            "-o webserver.enabled=false",
        ] {
            assert!(joined.contains(o), "{o} in {joined}");
        }
        assert!(
            joined.ends_with("-r /r/a.yaml -o engine.kind=modern_ebpf"),
            "the agent's arguments last, so they win: {joined}"
        );
    }

    #[test]
    fn locate_accepts_a_prefix_or_the_binary_and_names_what_is_missing() {
        let dir = std::env::temp_dir().join(format!("vigil-falco-locate-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("bin")).unwrap();
        fs::create_dir_all(dir.join("etc/falco")).unwrap();
        let e = FalcoInstall::locate(&dir.join("nope")).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        let e = FalcoInstall::locate(&dir).unwrap_err();
        assert!(e.to_string().contains("no Falco binary"), "{e}");
        fs::write(dir.join("bin/falco"), "#!/bin/sh\n").unwrap();
        let e = FalcoInstall::locate(&dir).unwrap_err();
        assert!(e.to_string().contains("no Falco configuration"), "{e}");
        fs::write(dir.join("etc/falco/falco.yaml"), "{}\n").unwrap();
        let by_prefix = FalcoInstall::locate(&dir).expect("prefix");
        let by_bin = FalcoInstall::locate(&dir.join("bin/falco")).expect("binary");
        assert_eq!(by_prefix, by_bin, "the same install either way");
        assert_eq!(by_bin.config, dir.join("etc/falco/falco.yaml"), "config");
        let _ = fs::remove_dir_all(&dir);
    }
}
