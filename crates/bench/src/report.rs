//! Report files: `report.md`, `report.json` and SVG plots in one directory per run.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use plotters::prelude::*;

use crate::stats::{human_time, timestamp};
use crate::system::SystemInfo;
use crate::BenchError;

/// Seconds since the epoch, now.
pub fn now_epoch() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `target/bench/<name>-<timestamp>` (relative to the working directory).
pub fn default_out_dir(name: &str) -> PathBuf {
    PathBuf::from("target/bench").join(format!("{name}-{}", timestamp(now_epoch())))
}

/// The common Markdown header: title, date, machine, kernel, audit, and the run's settings.
pub fn header(title: &str, info: &SystemInfo, started: u64, settings: &[(&str, String)]) -> String {
    let mut md = format!("# {title}\n\n- date: {}\n", human_time(started));
    md.push_str(&info.markdown());
    for (k, v) in settings {
        md.push_str(&format!("- {k}: {v}\n"));
    }
    md.push('\n');
    md
}

/// Writes `report.md` and `report.json` into `dir` (created if needed).
pub fn write_report(
    dir: &Path,
    markdown: &str,
    json: &serde_json::Value,
) -> Result<(), BenchError> {
    let io = |what: String| move |source| BenchError::Io { what, source };
    fs::create_dir_all(dir).map_err(io(format!("create `{}`", dir.display())))?;
    fs::write(dir.join("report.md"), markdown).map_err(io("write report.md".into()))?;
    let text = serde_json::to_string_pretty(json).map_err(|e| BenchError::Invalid {
        what: "report".into(),
        detail: e.to_string(),
    })?;
    fs::write(dir.join("report.json"), text + "\n").map_err(io("write report.json".into()))?;
    Ok(())
}

fn plot_err(path: &Path) -> impl Fn(String) -> BenchError + '_ {
    move |detail| BenchError::Plot {
        path: path.display().to_string(),
        detail,
    }
}

/// A grouped bar chart: one group per category, one bar per series (missing values skipped).
pub fn bar_chart(
    path: &Path,
    title: &str,
    y_label: &str,
    categories: &[String],
    series: &[(String, Vec<Option<f64>>)],
) -> Result<(), BenchError> {
    let err = plot_err(path);
    let n = categories.len().max(1);
    let values = series.iter().flat_map(|(_, v)| v.iter().flatten().copied());
    let (lo, hi) = values.fold((0.0f64, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let span = (hi - lo).max(1e-9);
    let (lo, hi) = (lo - span * 0.05 * f64::from(lo < 0.0), hi + span * 0.1);
    let root = SVGBackend::new(path, (1000, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), lo..hi)
        .map_err(|e| err(e.to_string()))?;
    let label = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 0.01 && i >= 0.0 {
            categories.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&label)
        .y_desc(y_label)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    let width = 0.8 / series.len().max(1) as f64;
    for (si, (name, vals)) in series.iter().enumerate() {
        let color = Palette99::pick(si).to_rgba();
        let bars = vals.iter().enumerate().filter_map(move |(ci, v)| {
            let v = (*v)?;
            let x0 = ci as f64 - 0.4 + si as f64 * width;
            Some(Rectangle::new([(x0, 0.0), (x0 + width, v)], color.filled()))
        });
        chart
            .draw_series(bars)
            .map_err(|e| err(e.to_string()))?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

/// A line chart of (x, y) series.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<(), BenchError> {
    let err = plot_err(path);
    let points = || series.iter().flat_map(|(_, p)| p.iter().copied());
    let x_max = points().map(|p| p.0).fold(0.0f64, f64::max).max(1e-9);
    let y_max = points().map(|p| p.1).fold(0.0f64, f64::max).max(1e-9);
    let root = SVGBackend::new(path, (1000, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..x_max * 1.05, 0f64..y_max * 1.1)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    for (si, (name, pts)) in series.iter().enumerate() {
        let color = Palette99::pick(si).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], color));
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(|e| err(e.to_string()))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

/// A number for a table cell: `-` for missing, else with a sensible precision.
pub fn cell(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v.abs() >= 100.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    }
}

/// A signed percentage cell.
pub fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:+.2}%"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_and_report_files_are_written() {
        let dir = std::env::temp_dir().join(format!("vigil-bench-report-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        bar_chart(
            &dir.join("bars.svg"),
            "t",
            "index",
            &["a".into(), "b".into()],
            &[
                ("off".into(), vec![Some(1.0), Some(2.0)]),
                ("on".into(), vec![None, Some(-1.0)]),
            ],
        )
        .unwrap();
        line_chart(
            &dir.join("lines.svg"),
            "t",
            "x",
            "y",
            &[("s".into(), vec![(1.0, 2.0), (2.0, 3.0)])],
        )
        .unwrap();
        write_report(&dir, "# r\n", &serde_json::json!({"a": 1})).unwrap();
        let svg = fs::read_to_string(dir.join("bars.svg")).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("<rect"), "svg bars");
        let json: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
        assert_eq!(json["a"], 1, "json written");
        assert!(
            default_out_dir("x").starts_with("target/bench"),
            "default dir"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn cells() {
        assert_eq!(cell(None), "-", "missing");
        assert_eq!(cell(Some(1234.56)), "1234.6", "large");
        assert_eq!(cell(Some(1.234)), "1.23", "small");
        assert_eq!(pct(Some(-2.5)), "-2.50%", "negative pct");
    }
}
