//! Which rules and which configuration a command runs with: `-c`/`-o` ([`ConfigArgs`]), the
//! rules files and the enable/disable flags ([`RulesSelection`]), `--rule-matching`, and the
//! state configuration of this host. Every command that loads rules goes through
//! [`load_selection`] and [`configure`].

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use vigil_config::{Config, RuleMatch, RuleSelector};
use vigil_engine::RulesText;
use vigil_rules::{
    Diagnostic, LoadOptions, LoadResult, Priority, RuleMatching, Ruleset, Selection, Severity,
};

use crate::error::InvalidInput;

/// The configuration file and its command-line overrides (Falco's `-c` and `-o`).
#[derive(Args)]
pub struct ConfigArgs {
    /// Configuration file (falco.yaml key names; default: the embedded configuration).
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override a configuration key (repeatable), e.g. `-o json_output=true`.
    #[arg(short = 'o', long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
}

impl ConfigArgs {
    /// The effective configuration: the file (or the embedded default), then each override.
    /// Ignored Falco-only settings are reported on stderr; errors are invalid input (exit 2).
    pub fn load(&self) -> Result<Config> {
        let loaded = match &self.config {
            Some(path) => Config::load(path).map_err(|e| InvalidInput(e.to_string()))?,
            None => Config::from_yaml_str(vigil_config::DEFAULT_CONFIG, "<embedded config>")
                .map_err(|e| InvalidInput(e.to_string()))?,
        };
        let mut config = loaded.config;
        let mut warnings = loaded.warnings;
        for option in &self.options {
            warnings.extend(
                config
                    .apply_override(option)
                    .map_err(|e| InvalidInput(e.to_string()))?,
            );
        }
        for warning in warnings {
            eprintln!("vigil: warning: {warning}");
        }
        Ok(config)
    }
}

#[derive(Args)]
pub struct RulesSelection {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Rules file or directory (repeatable; replaces the configuration's `rules_files`;
    /// default: the embedded Vigil ruleset).
    #[arg(short = 'r', long = "rules", value_name = "PATH")]
    pub rules: Vec<PathBuf>,
    /// Minimum priority of rules to load (default: the configuration's `priority`).
    #[arg(long, value_name = "PRIORITY")]
    pub min_priority: Option<String>,
    /// Run only rules carrying this tag (repeatable; Falco `-t`). `*` wildcards allowed.
    #[arg(short = 't', long, value_name = "TAG")]
    pub enable_tag: Vec<String>,
    /// Disable rules carrying this tag (repeatable; Falco `-T`). Applied after --enable-tag.
    #[arg(short = 'T', long, value_name = "TAG")]
    pub disable_tag: Vec<String>,
    /// Disable rules whose name matches (repeatable; `*` wildcards). Applied last.
    #[arg(long, value_name = "RULE")]
    pub disable: Vec<String>,
    /// Disable rules whose name contains SUBSTRING (repeatable; Falco `-D`). Applied last.
    #[arg(short = 'D', value_name = "SUBSTRING")]
    pub disable_substring: Vec<String>,
}

impl RulesSelection {
    /// Where the files a reload reads come from: `-c FILE`, and the `-r` paths (which
    /// replace the configuration's `rules_files`).
    pub fn watch_sources(&self) -> vigil_agent::WatchSources {
        vigil_agent::WatchSources {
            config_file: self.config.config.clone(),
            rules_override: self.rules.clone(),
        }
    }

    /// The enable/disable selection: the configuration's `rules:` entries in order, then these
    /// flags in Falco's order (`-t` narrows to tags, then `-T` and rule names disable).
    pub fn selection(&self, config: &Config) -> Selection {
        let mut selection = Selection::default();
        for selector in &config.rules {
            selection = match selector {
                RuleSelector::Enable(RuleMatch::Rule(r)) => selection.enable_rule(r),
                RuleSelector::Enable(RuleMatch::Tag(t)) => selection.enable_tag(t),
                RuleSelector::Disable(RuleMatch::Rule(r)) => selection.disable_rule(r),
                RuleSelector::Disable(RuleMatch::Tag(t)) => selection.disable_tag(t),
            };
        }
        if !self.enable_tag.is_empty() {
            selection = selection.disable_rule("*");
            for tag in &self.enable_tag {
                selection = selection.enable_tag(tag);
            }
        }
        for tag in &self.disable_tag {
            selection = selection.disable_tag(tag);
        }
        for rule in &self.disable {
            selection = selection.disable_rule(rule);
        }
        for part in &self.disable_substring {
            selection = selection.disable_rule(&format!("*{part}*"));
        }
        selection
    }
}

#[derive(Clone, Copy, ValueEnum)]
/// `--rule-matching`.
pub enum Matching {
    First,
    All,
}

/// The configuration and rules of a command that evaluates events: `--rule-matching` (else
/// the configuration's `rule_matching`) and `--json` (or `json_output`).
pub fn configure(
    selection: &RulesSelection,
    rule_matching: Option<Matching>,
    json: bool,
) -> Result<(Config, Ruleset)> {
    let mut config = selection.config.load()?;
    let mut ruleset = load_selection(selection, &config)?;
    ruleset.set_rule_matching(match rule_matching {
        Some(Matching::First) => RuleMatching::First,
        Some(Matching::All) => RuleMatching::All,
        None => config.rule_matching,
    });
    config.json_output |= json;
    Ok((config, ruleset))
}

pub fn print_diagnostics(diagnostics: &[Diagnostic]) {
    for diagnostic in diagnostics {
        eprintln!("{diagnostic}");
    }
}

pub fn error_count(result: &LoadResult) -> usize {
    result
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count()
}

/// Loads the selection's rules — `-r` paths, else the configuration's `rules_files`, else the
/// embedded default — failing with exit code 2 on errors.
pub fn load_selection(selection: &RulesSelection, config: &Config) -> Result<Ruleset> {
    load_selection_with(selection, config, &LoadOptions::default())
}

/// [`load_selection`] with loader options (`rules profile` keeps the conditions' texts).
pub fn load_selection_with(
    selection: &RulesSelection,
    config: &Config,
    options: &LoadOptions,
) -> Result<Ruleset> {
    let paths = if selection.rules.is_empty() {
        &config.rules_files
    } else {
        &selection.rules
    };
    let files = if paths.is_empty() {
        vec![RulesText::embedded_default()]
    } else {
        vigil_engine::read_rules_paths(paths).map_err(|e| InvalidInput(format!("{e:#}")))?
    };
    let min_priority = match &selection.min_priority {
        Some(text) => Priority::parse(text)
            .ok_or_else(|| InvalidInput(format!("unknown priority `{text}`")))?,
        None => config.priority,
    };
    let result = vigil_engine::load_rules(&files, options);
    print_diagnostics(&result.diagnostics);
    let errors = error_count(&result);
    match result.ruleset {
        Some(mut ruleset) if errors == 0 => {
            ruleset.select(&selection.selection(config));
            ruleset.set_min_priority(min_priority);
            Ok(ruleset)
        }
        _ => Err(InvalidInput(format!("rules failed to load: {errors} error(s)")).into()),
    }
}
