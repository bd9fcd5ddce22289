//! Wires the pipeline: [`Source`] → [`State`] → [`Ruleset`] → [`Alert`]s.
//!
//! Owns the per-event loop, drop accounting (`events_in == processed + dropped` at all times),
//! rules-file discovery (files and directories, plus the embedded default ruleset), and the
//! mixed benchmark [`corpus`]. Knows nothing about flags, exit codes or how alerts are delivered:
//! alerts go to a caller-supplied closure.
//!
//! # What the crate holds
//!
//! `Engine` (the per-event loop and counters), rules-file discovery and the embedded default
//! ruleset (`rules/vigil_rules.yaml`: silent on routine admin activity, `crates/cli/tests/
//! routine_host.rs`; ten rules tagged `vigil.enforce` form `vigil run --enforce`'s default set,
//! `crates/cli/tests/e2e/enforce_default.rs`), the benchmark `corpus`, the golden-capture test harness
//! (`tests/golden.rs`) and the criterion benchmarks (`benches/pipeline.rs`). For kernel-less
//! drivers: `kernel_filter` derives from the compiled rules what the kernel side decides
//! (`KernelFilter`: the reported syscalls, argument conditions — `dup2`/`dup3` onto the required
//! results, `open`/`openat` with a write access mode for write-only rules — the syscalls judged at
//! entry and the enforcing rules, by `vigil.enforce` tag, name or tag patterns), and
//! `Engine::judge` / `Engine::may_need_result` / `Engine::learn_fd` are the entry-time decisions on
//! the same state and rules the completed events meet (`may_need_result`: `dup2`/`dup3` as their
//! success onto `newfd`; plain `dup` as a success with each result the rules require, `evt.rawres
//! in (0, 1, 2)`, the state's descriptor slot put back after each trial with
//! `State::save_fd`/`restore_fd`; an exec as its failure, the caller's image; the rest as a failed
//! call by the rules' entry filters).
#![forbid(unsafe_code)]

use std::fs;
use std::path::{Path, PathBuf};

use thiserror::Error;
use vigil_capture::{Source, SourceError};
use vigil_event::{Event, Param, ParamKind, Snapshot};
use vigil_output::Alert;
use vigil_rules::eval::EvalCtx;
use vigil_rules::ruleset::RuleCosts;
use vigil_rules::{LoadOptions, LoadResult, RulesLoader, Ruleset};
use vigil_state::{State, StateConfig};

/// Benchmark and soak-test input: for this crate's tests, benches and examples through the
/// `test-support` feature (never in the agent's build).
#[cfg(any(test, feature = "test-support"))]
pub mod corpus;
pub mod kernel_filter;
pub mod profile;

pub use kernel_filter::{
    descriptor_result_masks, failure_path_needles, fold_workload_constants, is_workload_constant,
    EnforceSelection, FilterError, KernelFilter, ENFORCE_TAG,
};

/// The name diagnostics use for the embedded default ruleset.
pub const DEFAULT_RULES_NAME: &str = "vigil_rules.yaml";

/// Vigil's own default ruleset (Falco syntax), embedded in the binary.
pub const DEFAULT_RULES: &str = include_str!("../../../rules/vigil_rules.yaml");

/// One rules file's text and the name diagnostics give it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RulesText {
    pub name: String,
    pub text: String,
}

impl RulesText {
    /// The embedded default ruleset.
    pub fn embedded_default() -> RulesText {
        RulesText {
            name: DEFAULT_RULES_NAME.to_string(),
            text: DEFAULT_RULES.to_string(),
        }
    }
}

/// Why rules files could not be read (their content is judged later, by the loader).
#[derive(Debug, Error)]
pub enum RulesReadError {
    #[error("failed to read rules file `{path}`")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to list rules directory `{path}`")]
    ListDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("rules file `{path}` is not valid UTF-8")]
    NotUtf8 { path: PathBuf },
}

/// Reads rules files in the order given; a directory contributes its `*.yaml`/`*.yml` files in
/// lexical order (as Falco's `rules_files` does).
pub fn read_rules_paths(paths: &[PathBuf]) -> Result<Vec<RulesText>, RulesReadError> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            let entries = fs::read_dir(path).map_err(|source| RulesReadError::ListDir {
                path: path.clone(),
                source,
            })?;
            let mut files: Vec<PathBuf> = entries
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| {
                    p.is_file()
                        && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
                })
                .collect();
            files.sort();
            for file in files {
                out.push(read_rules_file(&file)?);
            }
        } else {
            out.push(read_rules_file(path)?);
        }
    }
    Ok(out)
}

fn read_rules_file(path: &Path) -> Result<RulesText, RulesReadError> {
    let bytes = fs::read(path).map_err(|source| RulesReadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8(bytes).map_err(|_| RulesReadError::NotUtf8 {
        path: path.to_path_buf(),
    })?;
    Ok(RulesText {
        name: path.display().to_string(),
        text,
    })
}

/// Loads and compiles rules files against the state engine's field catalog.
pub fn load_rules(files: &[RulesText], options: &LoadOptions) -> LoadResult {
    let mut loader = RulesLoader::new();
    for file in files {
        loader.add_source(&file.name, &file.text);
    }
    loader.load(vigil_state::catalog(), options)
}

/// Counters of one pipeline run. `events_in == processed + dropped_total()` always holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Events the source produced, processed or not.
    pub events_in: u64,
    /// Events that went through state and rules.
    pub processed: u64,
    /// Events lost before processing, by reason (reported by the source).
    pub dropped: Vec<(String, u64)>,
    /// Alerts emitted.
    pub alerts: u64,
    /// Alerts per rule, indexed like [`Ruleset::rules`].
    pub alerts_by_rule: Vec<u64>,
}

impl EngineStats {
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().map(|(_, n)| n).sum()
    }
}

/// Adds to alerts after rendering, with the event's fields at hand (Falco's `append_output`).
pub trait AlertDecorator: Send {
    /// `rule` is the matching rule; `view` extracts the current event's fields.
    fn decorate(
        &mut self,
        rule: &vigil_rules::Rule,
        view: &dyn vigil_fields::Extract,
        alert: &mut Alert,
    );
}

/// Whether some enabled rule watching exec event type `event_type` reads, in its condition, a
/// parameter of the exec event that the syscall's entry does not give (the new image's and
/// the process's: `exe`, `args`, `env`, … and `exe_flags`, which `evt.arg.flags` names for
/// `execve`), or an argument by position.
fn reads_exec_image_args(ruleset: &Ruleset, event_type: u16) -> bool {
    use vigil_fields::Catalog;
    let Some(spec) = vigil_event::table::events().get(usize::from(event_type)) else {
        return true;
    };
    // The image's parameters follow the entry's (`crates/event/src/table.rs`).
    const IMAGE_PARAMS: usize = 23;
    let n_entry = spec.params.len().saturating_sub(IMAGE_PARAMS);
    let catalog = vigil_state::catalog();
    ruleset.candidates(event_type).iter().any(|&i| {
        ruleset.rules()[i as usize]
            .filter()
            .fields()
            .iter()
            .filter(|f| catalog.def(f.id).name == "evt.arg")
            .any(|f| match &f.arg {
                vigil_fields::FieldArg::Key(k) => {
                    k != spec.res_name && spec.param_index(k).is_none_or(|i| i >= n_entry)
                }
                _ => true,
            })
    })
}

/// The per-event pipeline: state update, rule evaluation, alert rendering.
pub struct Engine {
    decorator: Option<Box<dyn AlertDecorator>>,
    state: State,
    ruleset: Ruleset,
    ctx: EvalCtx,
    matches: Vec<usize>,
    hostname: String,
    stats: EngineStats,
    /// Per-rule evaluation accounting (`/metrics`, `vigil rules profile`), when on.
    costs: Option<RuleCosts>,
}

impl Engine {
    /// An engine over `ruleset` with a fresh state. `hostname` labels alerts.
    pub fn new(ruleset: Ruleset, config: StateConfig, hostname: String) -> Engine {
        let ctx = ruleset.new_ctx();
        let alerts_by_rule = vec![0; ruleset.rules().len()];
        Engine {
            decorator: None,
            state: State::new(config),
            ruleset,
            ctx,
            matches: Vec::new(),
            hostname,
            stats: EngineStats {
                alerts_by_rule,
                ..EngineStats::default()
            },
            costs: None,
        }
    }

    /// Turns per-rule cost accounting on, timing one event in `stride` on average
    /// ([`RuleCosts`]: every evaluation counted, a sample timed), or off (`None`). A reload
    /// ([`Engine::set_ruleset`]) restarts it for the new rules with the same stride.
    pub fn set_rule_costs(&mut self, stride: Option<u32>) {
        self.costs = stride.map(|s| self.ruleset.new_costs(s));
    }

    /// Installs accounting made by the current ruleset (`Ruleset::new_costs`, e.g. with
    /// conditions for a profile).
    pub fn set_rule_costs_to(&mut self, costs: RuleCosts) {
        self.costs = Some(costs);
    }

    /// The per-rule accounting, when on (read it with `Ruleset::rule_evaluations` and
    /// `RuleCosts::nanos` of [`Engine::ruleset`]).
    pub fn rule_costs(&self) -> Option<&RuleCosts> {
        self.costs.as_ref()
    }

    /// Seeds the process table (capture start, or a `/proc` bootstrap). A non-empty snapshot
    /// hostname replaces the engine's (a replay reports the host it was recorded on).
    pub fn load_snapshot(&mut self, snapshot: &Snapshot) {
        if !snapshot.hostname.is_empty() {
            self.hostname = String::from_utf8_lossy(&snapshot.hostname).into_owned();
        }
        self.state.load_snapshot(snapshot);
    }

    /// Replaces the rules (a reload) and keeps the state: processes, fds and counters survive.
    /// Per-rule alert counts restart for the new rules.
    pub fn set_ruleset(&mut self, ruleset: Ruleset) {
        self.ctx = ruleset.new_ctx();
        self.stats.alerts_by_rule = vec![0; ruleset.rules().len()];
        self.costs = self.costs.as_ref().map(|c| ruleset.new_costs(c.stride()));
        self.ruleset = ruleset;
    }

    /// Installs (or removes) the alert decorator.
    pub fn set_decorator(&mut self, decorator: Option<Box<dyn AlertDecorator>>) {
        self.decorator = decorator;
    }

    pub fn ruleset(&self) -> &Ruleset {
        &self.ruleset
    }

    /// The rules, taken back (the state and counters are dropped).
    pub fn into_ruleset(self) -> Ruleset {
        self.ruleset
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }

    /// Runs one event through state and rules, calling `on_alert` for every match.
    pub fn process(&mut self, event: &Event, on_alert: &mut dyn FnMut(Alert)) {
        self.stats.events_in += 1;
        self.stats.processed += 1;
        self.state.apply(event);
        self.evaluate_and_emit(event, None, on_alert);
        self.state.finish(event);
    }

    /// Evaluates the rules on `event` (state applied) and renders an alert for every match,
    /// and for rule `also` if it is not among them.
    fn evaluate_and_emit(
        &mut self,
        event: &Event,
        also: Option<usize>,
        on_alert: &mut dyn FnMut(Alert),
    ) {
        self.matches.clear();
        let view = self.state.view(event);
        // One evaluation event: the templates below reuse the values the rules extracted.
        let mut ctx = self.ctx.event();
        match self.costs.as_mut() {
            Some(costs) => {
                self.ruleset
                    .evaluate_event_costed(&view, &mut ctx, &mut self.matches, costs)
            }
            None => self
                .ruleset
                .evaluate_event(&view, &mut ctx, &mut self.matches),
        }
        if let Some(index) = also.filter(|i| !self.matches.contains(i)) {
            self.matches.push(index);
        }
        for &index in &self.matches {
            let rule = &self.ruleset.rules()[index];
            let rendered = rule.output.render(&view, &mut ctx);
            self.stats.alerts += 1;
            if let Some(n) = self.stats.alerts_by_rule.get_mut(index) {
                *n += 1;
            }
            let mut alert = Alert {
                time: event.ts,
                rule: rule.name.clone(),
                priority: rule.priority.as_str().into(),
                source: rule.source.clone().into(),
                tags: rule.tags.clone(),
                hostname: self.hostname.clone(),
                output: rendered.text,
                output_fields: rendered.fields,
            };
            if let Some(decorator) = self.decorator.as_mut() {
                decorator.decorate(rule, &view, &mut alert);
            }
            on_alert(alert);
        }
    }

    /// A kernel-less driver's entry decision: `event` is a syscall at entry, built as if it
    /// succeeded. When a rule marked in `enforced` matches it, the syscall will not run:
    /// this entry is then its only event, so it is processed like a completed one (every
    /// matching rule alerts, the enforcing one included) and the enforcing rule's index is
    /// returned. Otherwise the state is left as it was (the completed event, if reported,
    /// comes later) and `None` is returned.
    pub fn judge(
        &mut self,
        event: &Event,
        enforced: &[bool],
        on_alert: &mut dyn FnMut(Alert),
    ) -> Option<usize> {
        self.state.apply(event);
        let hit = {
            let view = self.state.view(event);
            let mut ctx = self.ctx.event();
            self.ruleset
                .candidates(event.etype.0)
                .iter()
                .map(|&i| i as usize)
                .find(|&i| {
                    enforced.get(i).copied().unwrap_or(false)
                        && self.ruleset.rules()[i].filter().eval(&view, &mut ctx)
                })
        };
        let Some(rule) = hit else {
            self.forget_predicted_fd(event);
            return None;
        };
        self.stats.events_in += 1;
        self.stats.processed += 1;
        self.evaluate_and_emit(event, Some(rule), on_alert);
        self.state.finish(event);
        self.forget_predicted_fd(event);
        Some(rule)
    }

    /// Undoes the descriptor a judged, not (yet) executed open-like call added to the state.
    fn forget_predicted_fd(&mut self, event: &Event) {
        if event.etype.spec().res_kind != ParamKind::Fd || event.res < 0 {
            return;
        }
        let Some(close) = vigil_event::table::by_name("close") else {
            return;
        };
        let undo = Event {
            num: event.num,
            ts: event.ts,
            tid: event.tid,
            pid: event.pid,
            etype: close,
            res: 0,
            params: vec![Param::Int(event.res)],
            truncated: 0,
            cpu: None,
        };
        self.state.apply(&undo);
        self.state.finish(&undo);
    }

    /// A kernel-less driver's question at a reported syscall's entry (`entry`: its
    /// arguments; `res` meaningless): could its result make any rule match? `false` lets it
    /// run without the exit stop.
    ///
    /// - `dup2`/`dup3` succeed with `newfd`, a result known now: judged exactly as that
    ///   success (which the state keeps, as the call will most likely have it) unless some
    ///   rule could match a failure.
    /// - `dup` succeeds with the lowest free descriptor, unknown here: when no rule could
    ///   match a failure and every rule watching it requires the result to be one of a few
    ///   numbers (`evt.rawres in (0, 1, 2)`, or `fd.num in (…)`), it is judged exactly as a
    ///   success with each of them in turn (the state put back after each trial); any other
    ///   result matches no rule by that requirement.
    /// - `execve`/`execveat` (`entry`: the entry arguments, the rest of the exec event's
    ///   parameters empty) need their exit only to report a failure, which is the caller's
    ///   unchanged image (the state's) with the name as passed: judged by the entry filters as
    ///   below, unless some rule's condition reads an exec parameter the entry does not carry
    ///   (`evt.arg.exe`, `evt.arg[3]`, …; a success is reported by the driver's exec event).
    /// - Other calls are judged as a failed call, whose view names the path from the
    ///   arguments, by the rules' entry filters.
    pub fn may_need_result(&mut self, entry: &Event) -> bool {
        match entry.etype.spec().name {
            "execve" | "execveat" if !self.ruleset.may_match_failure(entry.etype.0) => false,
            "execve" | "execveat" if reads_exec_image_args(&self.ruleset, entry.etype.0) => true,
            "dup2" | "dup3" => {
                let newfd = match entry.param_by_name("newfd") {
                    Param::Int(v) => *v,
                    Param::Uint(v) => i64::try_from(*v).unwrap_or(-1),
                    _ => -1,
                };
                if newfd < 0 || self.ruleset.may_match_failure(entry.etype.0) {
                    return true;
                }
                // Kept: the call will most likely succeed so.
                self.matches_as_success(entry, newfd)
            }
            "dup" => {
                if self.ruleset.may_match_failure(entry.etype.0) {
                    return true;
                }
                let Some(results) = self.required_results(entry.etype.0) else {
                    return true;
                };
                for fd in results {
                    let saved = self.state.save_fd(entry.pid, fd);
                    let matches = self.matches_as_success(entry, fd);
                    self.state.restore_fd(entry.pid, fd, saved);
                    if matches {
                        return true;
                    }
                }
                false
            }
            _ => {
                const ENOENT: i64 = 2;
                let mut probe = entry.clone();
                probe.res = -ENOENT;
                self.state.apply(&probe);
                let may = {
                    let view = self.state.view(&probe);
                    self.ruleset.may_match_before_result(&view, &mut self.ctx)
                };
                self.state.finish(&probe);
                may
            }
        }
    }

    /// Whether some rule matches `entry` completed with result `res` (applied to the state,
    /// as the completed event would be).
    fn matches_as_success(&mut self, entry: &Event, res: i64) -> bool {
        let mut success = entry.clone();
        success.res = res;
        self.state.apply(&success);
        self.matches.clear();
        {
            let view = self.state.view(&success);
            self.ruleset
                .evaluate(&view, &mut self.ctx, &mut self.matches);
        }
        self.state.finish(&success);
        !self.matches.is_empty()
    }

    /// The descriptor numbers a successful call of `event_type` (which returns a new
    /// descriptor) must return for some enabled rule to match
    /// ([`kernel_filter::required_results`], without the negative ones: an error, which no
    /// rule matches here). `None` when some rule does not constrain its result so.
    fn required_results(&self, event_type: u16) -> Option<Vec<i64>> {
        let values = kernel_filter::required_results(&self.ruleset, event_type)?;
        Some(
            values
                .into_iter()
                .filter_map(|v| i64::try_from(v).ok().filter(|&v| v >= 0))
                .collect(),
        )
    }

    /// Process `pid` has descriptor `info` (read from `/proc`) whose creating call was not
    /// seen: the state describes it so.
    pub fn learn_fd(&mut self, pid: i64, info: &vigil_event::FdInfo) {
        self.state.learn_fd(pid, info);
    }

    /// Drains `source`: snapshot first, then every event. Returns the final counters, with the
    /// source's drops folded in.
    pub fn run(
        &mut self,
        source: &mut dyn Source,
        on_alert: &mut dyn FnMut(Alert),
    ) -> Result<EngineStats, SourceError> {
        let snapshot = source.snapshot()?;
        self.load_snapshot(&snapshot);
        let mut batch = Vec::with_capacity(1024);
        loop {
            batch.clear();
            let more = source.next_batch(&mut batch, 1024)?;
            for event in &batch {
                self.process(event, on_alert);
            }
            if !more {
                break;
            }
        }
        let source_stats = source.stats();
        self.stats.dropped = source_stats
            .dropped
            .iter()
            .map(|(reason, n)| (reason.to_string(), *n))
            .collect();
        self.stats.events_in = self.stats.processed + self.stats.dropped_total();
        Ok(self.stats.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_event::{FdInfo, FdType, ThreadInfo};

    const PID: i64 = 100;

    fn with_rule(condition: &str) -> Engine {
        let text = format!(
            "- rule: Redirect\n  desc: d\n  condition: {condition}\n  output: \"fd=%fd.num \
             type=%fd.type\"\n  priority: NOTICE\n"
        );
        let loaded = load_rules(
            &[RulesText {
                name: "rules.yaml".into(),
                text,
            }],
            &LoadOptions::default(),
        );
        let ruleset = loaded.ruleset.expect("rules load");
        let mut engine = Engine::new(ruleset, StateConfig::default(), "h".into());
        let fd = |fd: i64, kind: FdType, name: &str| FdInfo {
            fd,
            kind,
            tuple: None,
            name: name.as_bytes().to_vec(),
            flags: 0,
        };
        engine.load_snapshot(&Snapshot {
            threads: vec![ThreadInfo {
                tid: PID,
                pid: PID,
                ppid: 1,
                comm: b"sh".to_vec(),
                fds: vec![
                    fd(0, FdType::File, "/dev/null"),
                    fd(1, FdType::File, "/tmp/out"),
                    fd(5, FdType::Ipv4, ""),
                    fd(6, FdType::Pipe, ""),
                ],
                ..ThreadInfo::default()
            }],
            ..Snapshot::default()
        });
        engine
    }

    fn dup(oldfd: i64) -> Event {
        Event {
            num: 1,
            ts: 1,
            tid: PID,
            pid: PID,
            etype: vigil_event::table::by_name("dup").expect("dup"),
            res: 0,
            params: vec![Param::Int(oldfd)],
            truncated: 0,
            cpu: None,
        }
    }

    /// The type the state gives descriptor `fd` of the test process, as a rule sees it.
    fn fd_type(engine: &Engine, fd: i64) -> String {
        let mut probe = dup(fd);
        probe.res = fd;
        let view = engine.state().view(&probe);
        let field = vigil_state::catalog().lookup("fd.type", None).unwrap();
        let mut out = Vec::new();
        vigil_fields::Extract::extract(&view, &field, &mut out);
        out.first().map(|v| format!("{v:?}")).unwrap_or_default()
    }

    use vigil_fields::Catalog;

    #[test]
    fn dup_of_what_no_rule_watches_needs_no_result_and_leaves_the_state() {
        let mut engine =
            with_rule("evt.type = dup and evt.rawres in (0, 1, 2) and fd.type in (ipv4, ipv6)");
        let before = (
            fd_type(&engine, 0),
            fd_type(&engine, 1),
            fd_type(&engine, 2),
        );
        assert!(
            !engine.may_need_result(&dup(0)),
            "a file dup'ed anywhere matches nothing"
        );
        assert!(!engine.may_need_result(&dup(6)), "nor a pipe");
        assert_eq!(
            (
                fd_type(&engine, 0),
                fd_type(&engine, 1),
                fd_type(&engine, 2)
            ),
            before,
            "the trials are undone"
        );
        // A socket may land on 0, 1 or 2 (when one of them is closed): the result matters.
        assert!(engine.may_need_result(&dup(5)));
        assert_eq!(
            (
                fd_type(&engine, 0),
                fd_type(&engine, 1),
                fd_type(&engine, 2)
            ),
            before
        );
        // An unknown descriptor (the state cannot say it is no socket): no rule matches an
        // unknown type either, exactly as the completed event would show it.
        assert!(!engine.may_need_result(&dup(9)));
        // The same with the requirement on `fd.num`.
        let mut engine =
            with_rule("evt.type = dup and evt.rawres >= 0 and fd.num = 1 and fd.type = ipv4");
        assert!(!engine.may_need_result(&dup(0)));
        assert!(engine.may_need_result(&dup(5)));
    }

    #[test]
    fn dup_keeps_its_exit_when_the_result_is_not_constrained_or_a_failure_may_match() {
        // Any result, so any descriptor number: cannot be tried one by one.
        let mut engine = with_rule("evt.type = dup and evt.rawres >= 0 and fd.type = file");
        assert!(engine.may_need_result(&dup(0)));
        assert!(engine.may_need_result(&dup(6)));
        // `fd.num` is dup's result: `fd.num = 1` alone rules a failure out (a failed dup's
        // `fd.num` is its negative result), and is tried as `evt.rawres >= 0 and fd.num = 1`.
        let mut engine = with_rule("evt.type = dup and fd.num = 1 and fd.type = ipv4");
        assert!(!engine.may_need_result(&dup(0)));
        assert!(engine.may_need_result(&dup(5)));
        // No test of the result at all: a failure may match too.
        let mut engine = with_rule("evt.type = dup and proc.name != x and fd.type = ipv4");
        assert!(engine.may_need_result(&dup(6)));
        let mut engine = with_rule("evt.type = dup and evt.rawres >= 3 and fd.type = ipv4");
        assert!(engine.may_need_result(&dup(5)));
        // A failure (negative rawres) could match: kept whatever the descriptor.
        let mut engine = with_rule("evt.type = dup and evt.rawres in (-9, 1) and fd.type = pipe");
        assert!(engine.may_need_result(&dup(0)));
        // Too many numbers to try.
        let many: Vec<String> = (0..40).map(|i| i.to_string()).collect();
        let mut engine = with_rule(&format!(
            "evt.type = dup and evt.rawres in ({}) and fd.type = ipv4",
            many.join(", ")
        ));
        assert!(engine.may_need_result(&dup(0)));
    }
}

#[cfg(test)]
mod exec_tests {
    use super::*;
    use vigil_event::ThreadInfo;

    const PID: i64 = 200;

    fn with_rule(condition: &str) -> Engine {
        let text = format!(
            "- rule: Exec\n  desc: d\n  condition: {condition}\n  output: \"x\"\n  priority: \
             NOTICE\n"
        );
        let loaded = load_rules(
            &[RulesText {
                name: "rules.yaml".into(),
                text,
            }],
            &LoadOptions::default(),
        );
        let mut engine = Engine::new(
            loaded.ruleset.expect("rules load"),
            StateConfig::default(),
            "h".into(),
        );
        engine.load_snapshot(&Snapshot {
            threads: vec![ThreadInfo {
                tid: PID,
                pid: PID,
                ppid: 1,
                comm: b"sh".to_vec(),
                exe: b"sh".to_vec(),
                exepath: b"/bin/sh".to_vec(),
                ..ThreadInfo::default()
            }],
            ..Snapshot::default()
        });
        engine
    }

    /// An exec at entry as the tracer asks about it: the file name, nothing of the image.
    fn execve(filename: &str) -> Event {
        let etype = vigil_event::table::by_name("execve").expect("execve");
        let mut params = vec![Param::Bytes(filename.as_bytes().to_vec())];
        params.resize(etype.spec().params.len(), Param::None);
        Event {
            num: 1,
            ts: 1,
            tid: PID,
            pid: PID,
            etype,
            res: 0,
            params,
            truncated: 0,
            cpu: None,
        }
    }

    #[test]
    fn a_failed_exec_is_judged_on_the_callers_image_and_the_name_passed() {
        let mut engine = with_rule(
            "evt.type = execve and evt.res = ENOENT and proc.name = sh and \
             evt.arg.filename endswith /probe",
        );
        assert!(!engine.may_need_result(&execve("/usr/bin/sort")));
        assert!(engine.may_need_result(&execve("/nowhere/probe")));
        // Another caller: no failure of it matches.
        let mut engine = with_rule("evt.type = execve and proc.name = bash");
        assert!(!engine.may_need_result(&execve("/nowhere/probe")));
        // Only the success can match: the failure never matters.
        let mut engine = with_rule("evt.type = execve and evt.res = SUCCESS");
        assert!(!engine.may_need_result(&execve("/bin/true")));
    }

    #[test]
    fn an_exec_rule_reading_the_image_arguments_keeps_the_exit() {
        // `evt.arg.exe`, `evt.arg.flags` (the exe flags for execve) and positional
        // arguments are not in the entry's arguments: the failed event must be built.
        for condition in [
            "evt.type = execve and evt.arg.exe = nope",
            "evt.type = execve and evt.arg.flags contains EXE_WRITABLE",
            "evt.type = execve and evt.arg[1] = nope",
        ] {
            let mut engine = with_rule(condition);
            assert!(engine.may_need_result(&execve("/bin/true")), "{condition}");
        }
        // The name as passed and the result are known.
        let mut engine =
            with_rule("evt.type = execve and evt.arg.filename = /x and evt.arg.res = 0");
        assert!(!engine.may_need_result(&execve("/bin/true")));
    }
}
