//! SVG plots drawn from a run's `report.json`, the one source of every plot: each bench writes
//! its report, then its plots through [`from_report`]; `vigil bench report --svg DIR` draws them
//! again from a published report (`docs/bench/` keeps only `report.md` and `report.json`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::report;
use crate::stats::percent_change;
use crate::BenchError;

/// Draws the plots of the report `report` (any bench's `report.json`) into `dir`, which must
/// exist; returns the files written, in a fixed order.
pub fn from_report(report: &Value, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    match report.get("bench").and_then(Value::as_str) {
        Some("overhead") => overhead(report, dir),
        Some("capacity") => capacity(report, dir),
        Some("exec-rate") => exec_rate(report, dir),
        Some("generate-bench") => generate_bench(report, dir),
        Some("idle") => crate::idle::plots(report, dir),
        Some("latency") => crate::latency::plots(report, dir),
        Some(other) => Err(invalid(format!("unknown bench `{other}`"))),
        None => Err(invalid("no `bench` name".into())),
    }
}

/// One line of a line chart: its label and its points.
type Series = (String, Vec<(f64, f64)>);

fn invalid(detail: String) -> BenchError {
    BenchError::Invalid {
        what: "report".into(),
        detail,
    }
}

fn array<'a>(v: &'a Value, key: &str) -> Result<&'a Vec<Value>, BenchError> {
    v.get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| invalid(format!("`{key}` is not a list")))
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string()
}

fn overhead(r: &Value, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let configs = array(r, "configs")?;
    let tests = array(r, "tests")?;
    // The median of configuration `ci` for one test.
    let median = |t: &Value, ci: usize| -> Option<f64> {
        t.get("results")?
            .as_array()?
            .iter()
            .find(|x| x.get("config").and_then(Value::as_u64) == Some(ci as u64))
            .and_then(|x| num(x, "median"))
    };
    let index = |t: &Value, ci: usize| -> Option<f64> {
        t.get("results")?
            .as_array()?
            .iter()
            .find(|x| x.get("config").and_then(Value::as_u64) == Some(ci as u64))
            .and_then(|x| num(x, "index"))
    };
    let has_baseline = |t: &&Value| num(t, "baseline").is_some();
    let ub: Vec<&Value> = tests.iter().filter(has_baseline).collect();
    let ns: Vec<&Value> = tests.iter().filter(|t| !has_baseline(t)).collect();
    let names = |sel: &[&Value]| sel.iter().map(|t| text(t, "name")).collect::<Vec<_>>();
    let label = |c: &Value| text(c, "label");
    let index_series: Vec<(String, Vec<Option<f64>>)> = configs
        .iter()
        .enumerate()
        .map(|(ci, c)| (label(c), ub.iter().map(|t| index(t, ci)).collect()))
        .collect();
    let speed_change = |t: &Value, ci: usize| -> Option<f64> {
        let higher_is_better = t
            .get("higher_is_better")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        speed_change(higher_is_better, median(t, 0)?, median(t, ci)?)
    };
    let all: Vec<&Value> = tests.iter().collect();
    let change_series: Vec<(String, Vec<Option<f64>>)> = configs
        .iter()
        .enumerate()
        .skip(1)
        .map(|(ci, c)| (label(c), all.iter().map(|t| speed_change(t, ci)).collect()))
        .collect();
    let ns_series: Vec<(String, Vec<Option<f64>>)> = configs
        .iter()
        .enumerate()
        .map(|(ci, c)| (label(c), ns.iter().map(|t| median(t, ci)).collect()))
        .collect();
    let files = [
        dir.join("overhead-index.svg"),
        dir.join("overhead-change.svg"),
        dir.join("overhead-ns.svg"),
    ];
    report::bar_chart(
        &files[0],
        "UnixBench index per test (higher is better)",
        "index",
        &names(&ub),
        &index_series,
    )?;
    report::bar_chart(
        &files[1],
        "Speed change vs agent off, % (negative = slower)",
        "% speed change",
        &names(&all),
        &change_series,
    )?;
    report::bar_chart(
        &files[2],
        "ns per loop (lower is better)",
        "ns",
        &names(&ns),
        &ns_series,
    )?;
    Ok(files.to_vec())
}

/// Change in speed from `off` to `on`, percent (negative = slower), whatever the unit:
/// for ns-per-loop tests speed is the inverse of the score.
pub fn speed_change(higher_is_better: bool, off: f64, on: f64) -> Option<f64> {
    if higher_is_better {
        percent_change(off, on)
    } else if on > 0.0 && off > 0.0 {
        percent_change(1.0 / off, 1.0 / on)
    } else {
        None
    }
}

fn capacity(r: &Value, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let budgets = array(r, "budgets")?;
    let series = |key: &str| -> Result<Vec<Series>, BenchError> {
        budgets
            .iter()
            .map(|b| {
                let cpus = num(b, "cpus").ok_or_else(|| invalid("budget without `cpus`".into()))?;
                let points = array(b, "steps")?
                    .iter()
                    .filter_map(|s| Some((num(s, "achieved_per_s")?, num(s, key)?)))
                    .collect();
                // Several agents in one run: each budget's line names its agent.
                let label = match b.get("agent").and_then(Value::as_str) {
                    Some(agent) => format!("{agent} · {cpus} CPU"),
                    None => format!("{cpus} CPU"),
                };
                Ok((label, points))
            })
            .collect()
    };
    let files = [dir.join("capacity-drops.svg"), dir.join("capacity-cpu.svg")];
    report::line_chart(
        &files[0],
        "Dropped events vs offered rate",
        "watched syscalls/s achieved",
        "dropped %",
        &series("drop_pct")?,
    )?;
    report::line_chart(
        &files[1],
        "Agent CPU vs offered rate",
        "watched syscalls/s achieved",
        "% of one CPU",
        &series("agent_cpu_pct")?,
    )?;
    Ok(files.to_vec())
}

fn exec_rate(r: &Value, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let rates = array(r, "rates")?;
    let procs = array(r, "watch_procs")?;
    let mut series: Vec<Series> = procs
        .iter()
        .filter_map(Value::as_str)
        .map(|n| {
            let points = rates
                .iter()
                .filter_map(|row| {
                    let on = row.get("on")?;
                    Some((
                        num(on, "achieved_per_s")?,
                        on.get("procs_cpu_pct")?.get(n)?.as_f64()?,
                    ))
                })
                .collect();
            (format!("{n} CPU %"), points)
        })
        .collect();
    series.push((
        "workload extra CPU % (on − off)".into(),
        rates
            .iter()
            .filter_map(|row| {
                let (off, on) = (row.get("off")?, row.get("on")?);
                Some((
                    num(on, "achieved_per_s")?,
                    (num(on, "workload_cpu_pct")? - num(off, "workload_cpu_pct")?).max(0.0),
                ))
            })
            .collect(),
    ));
    let file = dir.join("exec-rate-cpu.svg");
    report::line_chart(
        &file,
        "CPU vs exec rate (agent on)",
        "execs/s achieved",
        "% of one CPU",
        &series,
    )?;
    Ok(vec![file])
}

fn generate_bench(r: &Value, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let rounds = array(r, "rounds")?;
    let points = |key: &str| -> Vec<(f64, f64)> {
        rounds
            .iter()
            .filter_map(|x| Some((num(x, "round")?, num(x, key)?)))
            .collect()
    };
    let file = dir.join("generate-bench.svg");
    report::line_chart(
        &file,
        "Actions per second and lost alerts per round",
        "round",
        "EPS / lost %",
        &[
            ("throughput (EPS)".into(), points("eps")),
            ("lost %".into(), points("lost_pct")),
        ],
    )?;
    Ok(vec![file])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// Every published report under `docs/bench` draws its plots, and each plot holds marks.
    #[test]
    fn every_published_report_draws_its_plots() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/bench");
        let mut reports = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.file_name().is_some_and(|n| n == "report.json") {
                    reports.push(path);
                }
            }
        }
        assert!(
            !reports.is_empty(),
            "no report.json under {}",
            root.display()
        );
        let out = std::env::temp_dir().join(format!("vigil-plots-{}", std::process::id()));
        for path in &reports {
            let _ = fs::remove_dir_all(&out);
            fs::create_dir_all(&out).unwrap();
            let report: Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
            let files =
                from_report(&report, &out).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(!files.is_empty(), "{}: no plot", path.display());
            for f in files {
                let svg = fs::read_to_string(&f).unwrap();
                assert!(
                    svg.starts_with("<svg") && (svg.contains("<rect") || svg.contains("<polyline")),
                    "{}: {} has no marks",
                    path.display(),
                    f.display()
                );
            }
        }
        let _ = fs::remove_dir_all(&out);
    }

    #[test]
    fn speed_change_is_negative_when_slower_in_any_unit() {
        let c = speed_change(true, 200.0, 150.0).unwrap();
        assert!((c + 25.0).abs() < 1e-9, "fewer loops/s = slower: {c}");
        let c = speed_change(false, 100.0, 125.0).unwrap();
        assert!((c + 20.0).abs() < 1e-9, "more ns/loop = slower: {c}");
        assert_eq!(speed_change(false, 0.0, 1.0), None, "zero ns");
    }

    #[test]
    fn an_overhead_report_plots_its_medians_and_speed_changes() {
        let report = serde_json::json!({
            "bench": "overhead",
            "configs": [{"label": "agent off"}, {"label": "agent on"}],
            "tests": [
                {"name": "pipe", "baseline": 12440.0, "higher_is_better": true, "results": [
                    {"config": 0, "median": 200.0, "index": 0.16},
                    {"config": 1, "median": 150.0, "index": 0.12}]},
                {"name": "getpid", "baseline": null, "higher_is_better": false, "results": [
                    {"config": 0, "median": 100.0, "index": null},
                    {"config": 1, "median": 125.0, "index": null}]},
            ],
        });
        let out = std::env::temp_dir().join(format!("vigil-plots-oh-{}", std::process::id()));
        fs::create_dir_all(&out).unwrap();
        let files = from_report(&report, &out).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "overhead-index.svg",
                "overhead-change.svg",
                "overhead-ns.svg"
            ]
        );
        let change = fs::read_to_string(&files[1]).unwrap();
        assert!(
            change.contains("pipe") && change.contains("getpid"),
            "{change}"
        );
        let _ = fs::remove_dir_all(&out);
    }

    #[test]
    fn an_unknown_report_is_refused_with_its_name() {
        let dir = std::env::temp_dir();
        let e = from_report(&serde_json::json!({"bench": "nope"}), &dir).unwrap_err();
        assert!(e.to_string().contains("unknown bench `nope`"), "{e}");
        let e = from_report(&serde_json::json!({}), &dir).unwrap_err();
        assert!(e.to_string().contains("no `bench` name"), "{e}");
        let e = from_report(&serde_json::json!({"bench": "capacity"}), &dir).unwrap_err();
        assert!(e.to_string().contains("`budgets` is not a list"), "{e}");
    }
}
