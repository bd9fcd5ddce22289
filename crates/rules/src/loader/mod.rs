//! Rules files → [`Ruleset`] + [`Diagnostic`]s, in Falco's phases:
//!
//! 1. **read** ([`yaml`]): YAML → positioned nodes (`E_YAML_PARSE`);
//! 2. **collect** (`collect.rs`): items → lists, macros, rules with `append`/`override`,
//!    `enabled` toggles and redefinitions applied (`E_SCHEMA`, `E_UNDEFINED_APPEND`, …);
//! 3. **resolve + compile** (`resolve.rs`): parse conditions, expand macros and lists, add
//!    exceptions, compile with [`crate::compile::Compiler`] against a catalog.
//!
//! Loading never stops at the first problem: every phase runs on whatever the previous one
//! could read, and [`LoadResult::diagnostics`] holds every problem found. The ruleset is
//! returned only when there is no error.
//!
//! Positions: items and keys are exact. Inside conditions and outputs, a span is mapped to the
//! character it came from by aligning the scalar's value with its source text (see [`text`]):
//! exact for plain, quoted and block (`>`/`|`) scalars, best-effort for scalars using escapes.

mod collect;
mod invariant;
mod resolve;
pub mod text;
pub mod yaml;

use std::collections::HashSet;

use crate::compile::Compiler;
use crate::diag::CompileError;
use crate::diag::{Diagnostic, Severity};
use crate::ruleset::{Rule, Ruleset};
use collect::{Collected, Counts};
use resolve::{Loc, Problem, Resolver};
use text::{SourceFile, Texts};
use vigil_fields::Catalog;
use yaml::Pos;

pub use collect::{engine_compatible_with, parse_version, version_text};

/// The version of the Falco engine whose rules language Vigil implements (Falco's
/// `FALCO_ENGINE_VERSION`, `falco_engine_version.h`): the one place it is kept. A file whose
/// `required_engine_version` this does not satisfy ([`engine_compatible_with`]) is refused with
/// `E_ENGINE_VERSION`; `/versions`, `vigil --version` and `--support` report it.
///
/// Raise it only together with what that Falco engine added to the language:
/// `tests/loader/engine_version.rs` holds one probe per engine version Vigil claims and fails
/// when the newest probe is not this version or when a probe does not hold.
pub const ENGINE_VERSION: (u64, u64, u64) = (0, 63, 0);

/// The compiler's code for a field the catalog does not know (drives `skip-if-unknown-filter`).
const UNKNOWN_FIELD: &str = "E_UNKNOWN_FIELD";

/// Options of one load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadOptions {
    /// Report `W_UNUSED_MACRO` / `W_UNUSED_LIST` (default on, as Falco).
    pub warn_unused: bool,
    /// Keep the text of every comparison of the conditions ([`Ruleset::condition_text`]),
    /// so a profile can name the costliest ones (`vigil rules profile`); off for the agent,
    /// which never prints them.
    pub condition_texts: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            warn_unused: true,
            condition_texts: false,
        }
    }
}

/// What one source defined (definitions only; appends and overrides are not counted), counted
/// as Falco's rules README counts them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileStats {
    pub name: String,
    pub rules: usize,
    pub macros: usize,
    pub lists: usize,
    /// Rules of sources other than `syscall`, skipped.
    pub skipped_rules: usize,
}

/// The outcome of [`RulesLoader::load`].
#[derive(Debug)]
pub struct LoadResult {
    /// The compiled ruleset; `None` when any diagnostic is an error.
    pub ruleset: Option<Ruleset>,
    /// Every problem found, errors and warnings, in discovery order per phase.
    pub diagnostics: Vec<Diagnostic>,
    /// One entry per source, in the order added.
    pub stats: Vec<FileStats>,
}

impl LoadResult {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.is_error())
    }
    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| !d.is_error())
    }
}

/// Loads rules sources in order (later sources override earlier ones, as `-r a -r b` does in
/// Falco).
#[derive(Clone, Debug, Default)]
pub struct RulesLoader {
    files: Vec<SourceFile>,
}

impl RulesLoader {
    pub fn new() -> RulesLoader {
        RulesLoader::default()
    }

    /// Adds a source; `name` (usually the path) is what diagnostics print.
    pub fn add_source(&mut self, name: &str, text: &str) -> &mut Self {
        self.files.push(SourceFile::new(name, text));
        self
    }

    /// Reads, collects, resolves and compiles every source.
    pub fn load(&self, catalog: &dyn Catalog, opts: &LoadOptions) -> LoadResult {
        let mut rep = Reporter::new(&self.files);
        let mut collected = Collected::default();
        let mut stats = Vec::with_capacity(self.files.len());
        for (i, file) in self.files.iter().enumerate() {
            let mut counts = Counts::default();
            match yaml::parse(&file.text) {
                Ok(docs) => collected.add_file(i, &docs, &mut rep, &mut counts),
                Err(e) => rep.error("E_YAML_PARSE", i, e.pos, None, e.message),
            }
            stats.push(FileStats {
                name: file.name.clone(),
                rules: counts.rules,
                macros: counts.macros,
                lists: counts.lists,
                skipped_rules: 0,
            });
        }

        let mut texts = Texts::default();
        let mut resolver = Resolver::new(&collected, &mut texts);
        // Macro syntax errors and list problems, found before any rule.
        let problems = std::mem::take(&mut resolver.problems);
        rep.problems(&texts, problems, "");
        let mut compiler = Compiler::new(catalog);
        let mut rules = Vec::new();
        for def in &collected.rules.items {
            if def.source != "syscall" {
                stats[def.file].skipped_rules += 1;
                rep.warning(
                    "W_SOURCE_SKIPPED",
                    def.file,
                    def.pos,
                    Some(&def.name),
                    format!(
                        "rule `{}` is for source `{}`; only `syscall` rules are loaded",
                        def.name, def.source
                    ),
                );
                // Still mark what it references, so its macros and lists are not "unused".
                if let Some(expr) = resolver.parse(&mut texts, def.condition.clone(), &def.name) {
                    resolver.mark_refs(&expr);
                }
                resolver.problems.clear();
                continue;
            }
            let expanded = resolver.rule_condition(&mut texts, def);
            let problems = std::mem::take(&mut resolver.problems);
            rep.problems(&texts, problems, &def.name);
            // Compile even after expansion problems (they became `false` constants) so that
            // the rule's other errors are reported too; such a rule is never kept.
            let mut usable = matches!(expanded, Some((_, true)));
            let never_true = expanded
                .as_ref()
                .is_some_and(|(expr, _)| invariant::truth(expr) == invariant::Truth::False);
            let filter = match expanded.map(|(expr, _)| compiler.compile(&expr)) {
                Some(Ok(f)) => {
                    rep.compile_errors(&texts, 0, f.warnings(), &def.name);
                    Some(f)
                }
                Some(Err(errors)) => {
                    usable = false;
                    if def.skip_if_unknown_filter && errors.iter().any(|e| e.code == UNKNOWN_FIELD)
                    {
                        rep.warning(
                            "W_SKIPPED_UNKNOWN_FILTER",
                            def.file,
                            def.pos,
                            Some(&def.name),
                            format!(
                                "rule `{}` uses a field this engine does not know; skipped (skip-if-unknown-filter)",
                                def.name
                            ),
                        );
                        continue;
                    }
                    rep.compile_errors(&texts, 0, &errors, &def.name);
                    None
                }
                None => None,
            };
            let output_text = texts
                .add(def.output.clone(), &def.name)
                .map(|t| (t.base, t.text.to_string()));
            let Some((base, output_text)) = output_text else {
                continue;
            };
            let output = match compiler.compile_template_warn(&output_text) {
                Ok((t, warnings)) => {
                    rep.compile_errors(&texts, base, &warnings, &def.name);
                    Some(t)
                }
                Err(errors) => {
                    rep.compile_errors(&texts, base, &errors, &def.name);
                    None
                }
            };
            let (Some(filter), Some(output), true) = (filter, output, usable) else {
                continue;
            };
            let event_types = filter.event_types();
            // A condition that can never hold matches no event type: no warning (Falco).
            if event_types.is_none() && def.warn_evttypes && !never_true {
                rep.warning(
                    "W_NO_EVTTYPE",
                    def.file,
                    def.pos,
                    Some(&def.name),
                    format!(
                        "Rule matches too many evt.type values. This has a significant performance penalty. (rule `{}` is evaluated for every event)",
                        def.name
                    ),
                );
            }
            rules.push(Rule {
                name: def.name.clone(),
                desc: def.desc.clone(),
                priority: def.priority,
                tags: def.tags.clone(),
                source: def.source.clone(),
                enabled: def.enabled,
                output,
                capture: def.capture,
                capture_duration: def.capture_duration,
                file: self.files[def.file].name.clone(),
                line: def.pos.line,
                col: def.pos.col,
                filter,
                event_types,
            });
        }

        if opts.warn_unused {
            for (i, m) in collected.macros.items.iter().enumerate() {
                if !resolver.macro_used[i] {
                    rep.warning(
                        "W_UNUSED_MACRO",
                        m.file,
                        m.pos,
                        Some(&m.name),
                        format!("macro `{}` is not used", m.name),
                    );
                }
            }
            for (i, l) in collected.lists.items.iter().enumerate() {
                if !resolver.list_used[i] {
                    rep.warning(
                        "W_UNUSED_LIST",
                        l.file,
                        l.pos,
                        Some(&l.name),
                        format!("list `{}` is not used", l.name),
                    );
                }
            }
        }
        // Problems from lists resolved last (cycles found while expanding) are already in.
        let diagnostics = rep.diags;
        let ok = !diagnostics.iter().any(Diagnostic::is_error);
        let texts = if opts.condition_texts {
            compiler.leaf_texts()
        } else {
            Default::default()
        };
        let ruleset = ok.then(|| {
            let mut ruleset = Ruleset::new(rules, compiler.finish(), catalog.n_event_types());
            ruleset.set_condition_texts(texts);
            ruleset
        });
        LoadResult {
            ruleset,
            diagnostics,
            stats,
        }
    }
}

/// Collects diagnostics, de-duplicating identical ones (an error inside a macro is found once
/// per rule using it but reported once).
pub(crate) struct Reporter<'f> {
    files: &'f [SourceFile],
    pub diags: Vec<Diagnostic>,
    seen: HashSet<(&'static str, usize, u32, u32, String)>,
}

impl<'f> Reporter<'f> {
    fn new(files: &'f [SourceFile]) -> Reporter<'f> {
        Reporter {
            files,
            diags: Vec::new(),
            seen: HashSet::new(),
        }
    }

    fn push(
        &mut self,
        code: &'static str,
        severity: Severity,
        file: usize,
        pos: Pos,
        item: Option<&str>,
        message: String,
    ) {
        if !self
            .seen
            .insert((code, file, pos.line, pos.col, message.clone()))
        {
            return;
        }
        self.diags.push(Diagnostic {
            code,
            severity,
            message,
            file: self
                .files
                .get(file)
                .map(|f| f.name.clone())
                .unwrap_or_default(),
            line: pos.line,
            col: pos.col,
            item: item.map(str::to_string),
        });
    }

    pub fn error(
        &mut self,
        code: &'static str,
        file: usize,
        pos: Pos,
        item: Option<&str>,
        message: String,
    ) {
        self.push(code, Severity::Error, file, pos, item, message);
    }

    pub fn warning(
        &mut self,
        code: &'static str,
        file: usize,
        pos: Pos,
        item: Option<&str>,
        message: String,
    ) {
        self.push(code, Severity::Warning, file, pos, item, message);
    }

    fn at_virtual(
        &mut self,
        texts: &Texts,
        code: &'static str,
        at: u32,
        message: String,
        fallback_item: &str,
    ) {
        let severity = if code.starts_with("W_") {
            Severity::Warning
        } else {
            Severity::Error
        };
        match texts.locate(self.files, at) {
            Some((file, pos, owner)) => {
                let owner = owner.to_string();
                self.push(code, severity, file, pos, Some(&owner), message);
            }
            None => self.push(
                code,
                severity,
                0,
                Pos::default(),
                Some(fallback_item),
                message,
            ),
        }
    }

    fn problems(&mut self, texts: &Texts, problems: Vec<Problem>, item: &str) {
        for p in problems {
            match p.loc {
                Loc::Virtual(at) => self.at_virtual(texts, p.code, at, p.message, item),
                Loc::At(file, pos) => {
                    let owner = p.item.unwrap_or_else(|| item.to_string());
                    self.error(p.code, file, pos, Some(&owner), p.message);
                }
            }
        }
    }

    fn compile_errors(&mut self, texts: &Texts, base: u32, errors: &[CompileError], item: &str) {
        for e in errors {
            self.at_virtual(
                texts,
                e.code,
                base.saturating_add(e.span.start),
                e.message.clone(),
                item,
            );
        }
    }
}
