//! The flags several commands share, each defined once (flattened where it is used): what the
//! live commands (`watch`, `run`, `replay`) take ([`LiveArgs`]), the statistics file Falco's
//! command line takes too ([`StatsFileArgs`]), the capture `watch` and `run` write
//! ([`WriteArgs`]), the run time `watch` and Falco's `-M` take ([`DurationArgs`]), and the
//! one grammar of durations on the command line ([`duration`]: the configuration's,
//! `vigil_config::parse_duration`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use vigil_config::{parse_duration, DURATION_SYNTAX};

use crate::selection::Matching;

/// What the live commands share: alert format, rule matching, counters at exit, the
/// statistics file.
#[derive(Args)]
pub struct LiveArgs {
    /// Print alerts as Falco JSON objects, one per line (or set `json_output`).
    #[arg(long)]
    pub json: bool,
    /// Report every matching rule per event, or only the first (default: the configuration's
    /// `rule_matching`).
    #[arg(long, value_enum)]
    pub rule_matching: Option<Matching>,
    /// At exit, print the run's counters to stderr (`watch`: one JSON line with the drops by
    /// reason and `filtered_failed`, failed calls filtered out in the kernel, not drops, and
    /// `wakeups`, who woke the reader; `run`: the tracer's counters too).
    #[arg(long)]
    pub stats: bool,
    #[command(flatten)]
    pub stats_file: StatsFileArgs,
}

impl LiveArgs {
    /// No alert format, rule matching or counters asked for: the statistics file only (a
    /// command Falco's command line stands for).
    pub fn stats_file_only(stats_file: StatsFileArgs) -> LiveArgs {
        LiveArgs {
            json: false,
            rule_matching: None,
            stats: false,
            stats_file,
        }
    }
}

/// Falco's `-s FILE` and `--stats-interval`.
#[derive(Args)]
pub struct StatsFileArgs {
    /// Write Falco-style statistics lines (`sample`, `cur`, `delta`, `drop_pct`) to FILE every
    /// `--stats-interval`, and one at the end (Falco `-s`).
    #[arg(short = 's', long = "stats-file", value_name = "FILE")]
    pub stats_file: Option<PathBuf>,
    /// Interval of the statistics lines, a duration (`5s`, `500ms`, `1m`). A number without a
    /// unit is read as milliseconds, as Falco's `--stats-interval` and earlier Vigil read it,
    /// with a warning.
    #[arg(
        long = "stats-interval",
        value_name = "DURATION",
        default_value = "5s",
        value_parser = stats_interval
    )]
    pub stats_interval: Duration,
}

impl StatsFileArgs {
    /// The file and its interval as the agent takes them (an interval of zero is 1 ms).
    pub fn for_agent(&self) -> Option<(&Path, Duration)> {
        let every = self.stats_interval.max(Duration::from_millis(1));
        self.stats_file.as_deref().map(|path| (path, every))
    }
}

/// `-w FILE`: the capture a live command writes; reads as the `Option<PathBuf>` it holds.
#[derive(Args)]
pub struct WriteArgs {
    /// Also record the start snapshot and every captured event into FILE (JSON lines if the
    /// name ends in `.jsonl` or `.json`, else the binary form); `vigil replay FILE` gives the
    /// same alerts.
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub write: Option<PathBuf>,
}

impl std::ops::Deref for WriteArgs {
    type Target = Option<PathBuf>;

    fn deref(&self) -> &Option<PathBuf> {
        &self.write
    }
}

/// `-M DURATION`: how long to run.
#[derive(Args)]
pub struct DurationArgs {
    /// Stop after DURATION (`60`, `90s`, `5m`; a bare number is seconds; default: run until
    /// SIGINT or SIGTERM; Falco `-M`).
    #[arg(short = 'M', long = "duration", value_name = "DURATION", value_parser = run_time)]
    pub duration: Option<Duration>,
}

/// A duration flag: the configuration's grammar (`5`, `2.5s`, `100ms`, `1m`; a bare number is
/// seconds).
pub fn duration(text: &str) -> Result<Duration, String> {
    parse_duration(text)
        .ok_or_else(|| format!("invalid duration `{text}` (expected {DURATION_SYNTAX})"))
}

/// A duration and, for a form kept for scripts written before the grammar was one, the
/// warning to print.
type Legacy = (Duration, Option<String>);

/// `-M`: [`duration`]; a number the grammar does not take but the flag's earlier floating-point
/// parser did (`1e3`) is still seconds, with a warning.
fn run_time(text: &str) -> Result<Duration, String> {
    warned(run_time_legacy(text))
}

fn run_time_legacy(text: &str) -> Result<Legacy, String> {
    match duration(text) {
        Ok(d) => Ok((d, None)),
        Err(e) => match text.trim().parse::<f64>() {
            Ok(secs) if secs.is_finite() && secs >= 0.0 => {
                let d = Duration::try_from_secs_f64(secs).map_err(|_| e)?;
                let warning = format!(
                    "-M `{text}`: a floating-point number of seconds is deprecated; write `{}s`",
                    d.as_secs_f64()
                );
                Ok((d, Some(warning)))
            }
            _ => Err(e),
        },
    }
}

/// `--stats-interval`: [`duration`]; a number without a unit is milliseconds (Falco's and the
/// flag's earlier form), with a warning.
fn stats_interval(text: &str) -> Result<Duration, String> {
    warned(stats_interval_legacy(text))
}

fn stats_interval_legacy(text: &str) -> Result<Legacy, String> {
    let trimmed = text.trim();
    if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let d = duration(&format!("{trimmed}ms"))?;
        let warning = format!(
            "--stats-interval `{text}`: a number without a unit is read as milliseconds (the \
             earlier form); write `{trimmed}ms`"
        );
        return Ok((d, Some(warning)));
    }
    duration(text).map(|d| (d, None))
}

/// Prints the warning of a legacy form (once: clap parses each value once).
fn warned(parsed: Result<Legacy, String>) -> Result<Duration, String> {
    parsed.map(|(d, warning)| {
        if let Some(warning) = warning {
            eprintln!("vigil: warning: {warning}");
        }
        d
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        crate::Cli::command().debug_assert();
    }

    /// The live commands' shared flags come from one definition: the same help, the same
    /// names, in `replay`, `run`, `watch` and (the statistics file, the run time) Falco's
    /// command line.
    #[test]
    fn shared_flags_are_one_definition_everywhere() {
        let root = crate::Cli::command();
        let command = |name: &str| {
            root.find_subcommand(name)
                .unwrap_or_else(|| panic!("no subcommand {name}"))
                .clone()
        };
        let describe = |cmd: &clap::Command, id: &str| {
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_id() == id)
                .unwrap_or_else(|| panic!("`{}` has no `{id}`", cmd.get_name()));
            format!(
                "{:?} {:?} {:?} {:?}",
                arg.get_short(),
                arg.get_long(),
                arg.get_help().map(ToString::to_string),
                arg.get_default_values()
            )
        };
        let cases: [(&str, &[&str]); 7] = [
            ("json", &["replay", "run", "watch"]),
            ("rule_matching", &["replay", "run", "watch"]),
            ("stats", &["replay", "run", "watch"]),
            ("stats_file", &["replay", "run", "watch", ""]),
            ("stats_interval", &["replay", "run", "watch", ""]),
            ("write", &["run", "watch"]),
            ("duration", &["watch", ""]),
        ];
        for (id, commands) in cases {
            let defs: Vec<String> = commands
                .iter()
                .map(|name| match *name {
                    "" => describe(&root, id),
                    name => describe(&command(name), id),
                })
                .collect();
            assert!(
                defs.windows(2).all(|w| w[0] == w[1]),
                "`{id}` differs between {commands:?}: {defs:#?}"
            );
        }
    }

    #[test]
    fn durations_take_the_configuration_grammar() {
        assert_eq!(duration("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(duration("0.1"), Ok(Duration::from_millis(100)));
        let e = duration("abc").unwrap_err();
        assert!(
            e.contains("invalid duration `abc`") && e.contains("ms"),
            "{e}"
        );
        assert!(duration("-1").is_err());
    }

    #[test]
    fn the_run_time_takes_bare_seconds_and_the_old_floating_point_forms() {
        // What the grammar takes: no warning (a bare number was seconds before too).
        assert_eq!(run_time_legacy("60"), Ok((Duration::from_secs(60), None)));
        assert_eq!(
            run_time_legacy("0.5"),
            Ok((Duration::from_millis(500), None))
        );
        assert_eq!(run_time_legacy("5m"), Ok((Duration::from_secs(300), None)));
        let (d, warning) = run_time_legacy("1e1").expect("the old float form");
        assert_eq!(d, Duration::from_secs(10));
        assert!(warning.is_some_and(|w| w.contains("write `10s`")));
        for bad in ["-1", "inf", "NaN", "5 parsecs", ""] {
            assert!(run_time(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_stats_interval_without_a_unit_is_milliseconds() {
        let (d, warning) = stats_interval_legacy("5000").expect("the old form");
        assert_eq!(d, Duration::from_secs(5));
        assert!(warning.is_some_and(|w| w.contains("milliseconds") && w.contains("`5000ms`")));
        assert_eq!(stats_interval("250"), Ok(Duration::from_millis(250)));
        assert_eq!(
            stats_interval_legacy("5s"),
            Ok((Duration::from_secs(5), None))
        );
        assert_eq!(
            stats_interval_legacy("1m"),
            Ok((Duration::from_secs(60), None))
        );
        assert!(stats_interval("5 s").is_err());
        assert!(stats_interval("-5").is_err());
        let zero = StatsFileArgs {
            stats_file: Some(PathBuf::from("s.json")),
            stats_interval: Duration::ZERO,
        };
        assert_eq!(
            zero.for_agent(),
            Some((Path::new("s.json"), Duration::from_millis(1)))
        );
    }
}
