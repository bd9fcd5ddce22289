//! From the compiled rules to what a kernel-side filter decides: which syscalls stop a
//! kernel-less tracer (and on which argument values), which are judged at entry for
//! enforcement, and which rules enforce. The ptrace driver turns a [`KernelFilter`] into its
//! seccomp program; this module knows rules, event types and fields, not seccomp.

use vigil_capture::ArgIn;
use vigil_fields::{Catalog, FieldArg, FieldRef};
use vigil_rules::ruleset::wildcard_match;
use vigil_rules::Ruleset;

/// The rule tag that marks a rule for enforcement when no rule or tag is named explicitly
/// (Falco ignores unknown tags, so such rules files still load in Falco).
pub const ENFORCE_TAG: &str = "vigil.enforce";

/// Which enabled rules enforce (block their syscall before it runs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnforceSelection {
    /// Rule name patterns (`*` wildcards).
    pub rules: Vec<String>,
    /// Tag patterns (`*` wildcards). With neither rules nor tags: [`ENFORCE_TAG`].
    pub tags: Vec<String>,
}

/// What the kernel side of a kernel-less capture is told.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelFilter {
    /// Syscall numbers whose events the rules need (sorted, unique).
    pub report: Vec<u16>,
    /// Syscalls of `report` that stop only when an argument has one of some values.
    pub report_when: Vec<(u16, ArgIn)>,
    /// Syscall numbers judged at entry because an enforced rule watches them.
    pub judged: Vec<u16>,
    /// Per rule (indexed like [`Ruleset::rules`]): whether it enforces.
    pub enforced: Vec<bool>,
    /// Some enabled rule does not restrict `evt.type`: every syscall is reported.
    pub watches_all: bool,
}

/// Why a filter cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    #[error("rule `{rule}` cannot be enforced: its condition does not restrict evt.type")]
    EnforcedWithoutEventType { rule: String },
}

impl KernelFilter {
    /// The filter for `ruleset`. `enforce`: the enforcing selection, if enforcement is on.
    /// `everything`: every event of the interest set is wanted (a capture is written), so no
    /// stop is optimised away.
    pub fn derive(
        ruleset: &Ruleset,
        enforce: Option<&EnforceSelection>,
        everything: bool,
    ) -> Result<KernelFilter, FilterError> {
        let (report, watches_all) = report_syscalls(ruleset);
        let (report, report_when) = if everything {
            (report, Vec::new())
        } else {
            (
                without_exec_entry(ruleset, report),
                [
                    result_arg_conditions(ruleset),
                    open_write_conditions(ruleset),
                ]
                .concat(),
            )
        };
        let (enforced, judged) = match enforce {
            Some(selection) => enforced_rules(ruleset, selection)?,
            None => (vec![false; ruleset.rules().len()], Vec::new()),
        };
        Ok(KernelFilter {
            report,
            report_when,
            judged,
            enforced,
            watches_all,
        })
    }

    /// Whether any rule enforces.
    pub fn enforces(&self) -> bool {
        self.enforced.iter().any(|&e| e)
    }
}

/// Whether `field` is the same for every event of a traced workload: its container's
/// identity and metadata (the workload runs in Vigil's own container, or on the host), the
/// Kubernetes fields that come from it, and the host name. `container.duration` moves with
/// time and is not.
pub fn is_workload_constant(field: &FieldRef) -> bool {
    let name = vigil_state::catalog().def(field.id).name;
    (name.starts_with("container.") && name != "container.duration")
        || name.starts_with("k8s.")
        || name == "evt.hostname"
}

/// Disables the enabled rules of `ruleset` that cannot match a workload whose constant
/// fields ([`is_workload_constant`]) are those `workload` extracts (the view of the tracer's
/// own process: the workload starts in its container). Every `container`-guarded rule on a
/// host workload, or a host-only rule in a container, then costs no stop. Returns the
/// indices of the rules disabled.
///
/// Limit: a process of the workload that later moves to another cgroup (it needs write
/// access to the cgroup filesystem) is still judged by these rules as of the start.
pub fn fold_workload_constants(
    ruleset: &mut Ruleset,
    workload: &dyn vigil_fields::Extract,
) -> Vec<usize> {
    ruleset.fold_constants(&is_workload_constant, workload)
}

fn syscall_nr(id: u16) -> Option<u16> {
    vigil_event::table::events()
        .get(usize::from(id))
        .and_then(|s| s.nr)
}

/// The syscall numbers of the event types `ruleset`'s enabled rules watch, and whether some
/// rule watches every type.
fn report_syscalls(ruleset: &Ruleset) -> (Vec<u16>, bool) {
    let types = ruleset.event_types();
    let mut nrs: Vec<u16> = types.ids().filter_map(syscall_nr).collect();
    nrs.sort_unstable();
    nrs.dedup();
    (nrs, types.is_all())
}

/// Whether `field` of an exec event is known only at the syscall's entry: the file name as
/// passed (the exec event alone gives the resolved executable), `execveat`'s directory
/// descriptor, path and flags, and the renderings of every argument.
fn exec_entry_field(field: &FieldRef) -> bool {
    let name = vigil_state::catalog().def(field.id).name;
    match name {
        "evt.arg" => match &field.arg {
            FieldArg::Key(k) => matches!(k.as_str(), "filename" | "pathname" | "dirfd" | "flags"),
            _ => true,
        },
        "evt.args" | "evt.info" => true,
        _ => name.starts_with("evt.abspath") || name.starts_with("fs.path"),
    }
}

/// `report` without `execve` when no enabled rule needs its entry (a rule that may match a
/// failed exec, or reads [`exec_entry_field`]s): a successful exec is reported by the
/// tracer's exec event whatever the filter says, so each exec then costs one stop instead
/// of two. `execveat` keeps its entry stop when watched: at the exec event the registers no
/// longer tell it from `execve` (the kernel reports a successful `execveat` as syscall 59
/// there), and an exec event without entry arguments is an `execve`.
fn without_exec_entry(ruleset: &Ruleset, report: Vec<u16>) -> Vec<u16> {
    let Some(execve) = vigil_event::table::by_name("execve") else {
        return report;
    };
    if ruleset.needs_entry(execve.0, &exec_entry_field) {
        return report;
    }
    report
        .into_iter()
        .filter(|&nr| Some(nr) != execve.spec().nr)
        .collect()
}

/// Seccomp conditions for syscalls whose successful result is one of their arguments
/// (`dup2`/`dup3` return `newfd`, the second argument): when every enabled rule watching
/// one requires `evt.rawres` to be one of some non-negative numbers, only calls with that
/// argument stop (`dup2(sock, 0..=2)` for a redirection rule; `close(dup2(0, 9))` loops run
/// free). A negative value (an errno) would make failures of any call match: no condition.
fn result_arg_conditions(ruleset: &Ruleset) -> Vec<(u16, ArgIn)> {
    let Ok(rawres) = vigil_state::catalog().lookup("evt.rawres", None) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, arg) in [("dup2", 1u8), ("dup3", 1)] {
        let Some(etype) = vigil_event::table::by_name(name) else {
            continue;
        };
        let (Some(nr), Some(values)) = (etype.spec().nr, ruleset.required_values(etype.0, &rawres))
        else {
            continue;
        };
        let values: Option<Vec<u32>> = values.iter().map(|&v| u32::try_from(v).ok()).collect();
        if let Some(values) = values.filter(|v| !v.is_empty()) {
            out.push((nr, ArgIn::equal(arg, values)));
        }
    }
    out
}

/// The results a successful call of `event_type` (one that returns a new descriptor: `dup`,
/// `dup2`, `dup3`) must return for some enabled rule to match: every candidate rule requires
/// `evt.rawres` (or every one `fd.num`, the descriptor such a call returns) to be one of at
/// most 16 numbers, returned as compiled (sorted; a negative one is an errno). `None` when
/// some rule does not constrain its result so.
pub fn required_results(ruleset: &Ruleset, event_type: u16) -> Option<Vec<i128>> {
    const MAX_VALUES: usize = 16;
    let catalog = vigil_state::catalog();
    ["evt.rawres", "fd.num"].iter().find_map(|name| {
        let field = catalog.lookup(name, None).ok()?;
        ruleset
            .required_values(event_type, &field)
            .filter(|values| values.len() <= MAX_VALUES)
    })
}

/// For the kernel driver's result filter: per descriptor-duplicating syscall (`dup`, `dup2`,
/// `dup3`) that enabled rules watch, the results 0..=63 a successful call must return for
/// some rule to match ([`required_results`]), bit `n` for result `n`. Left out (no filter)
/// when some rule watching it does not require such a result, or requires a negative one (a
/// failure) or one above 63 (beyond the mask). Whether the failures are used too is the
/// caller's to add (the driver filters only a type whose failures nothing uses).
pub fn descriptor_result_masks(ruleset: &Ruleset) -> Vec<(vigil_event::EventType, u64)> {
    ["dup", "dup2", "dup3"]
        .iter()
        .filter_map(|name| vigil_event::table::by_name(name))
        .filter(|etype| !ruleset.candidates(etype.0).is_empty())
        .filter_map(|etype| {
            let values = required_results(ruleset, etype.0)?;
            let mut mask = 0u64;
            for v in values {
                mask |= 1u64.checked_shl(u32::try_from(v).ok().filter(|&v| v < 64)?)?;
            }
            Some((etype, mask))
        })
        .collect()
}

/// The opens whose failed calls no rule can match unless the path as passed contains some
/// bytes: per open type (`open`, `openat`, `openat2`, `creat`) whose failures some enabled
/// rule may match, the string `fd.nameraw` must contain for any of them to
/// ([`Ruleset::failure_substring`]: Falco's `directory_traversal` requires `'../'`). For a
/// failed open, `fd.nameraw` is the path argument as passed, so the kernel driver can search
/// the path it copied and leave out the other failures. Types whose failures no rule may
/// match are left out here (they are filtered whole).
pub fn failure_path_needles(ruleset: &Ruleset) -> Vec<(vigil_event::EventType, Vec<u8>)> {
    let Ok(nameraw) = vigil_state::catalog().lookup("fd.nameraw", None) else {
        return Vec::new();
    };
    ["open", "openat", "openat2", "creat"]
        .iter()
        .filter_map(|name| vigil_event::table::by_name(name))
        .filter_map(|etype| Some((etype, ruleset.failure_substring(etype.0, &nameraw)?)))
        .collect()
}

/// Seccomp conditions for opens whose every watching rule requires a write
/// (`evt.is_open_write = true` as a top-level conjunct, as in Falco's `open_write` macro): the
/// access mode in the flags register (`flags & O_ACCMODE`) is `O_WRONLY` or `O_RDWR`, exactly
/// the test `evt.is_open_write` makes on the flags, so a read-only open never stops.
/// `open` and `openat` carry the flags in a register; `openat2`'s are in memory (no
/// condition) and `creat` always writes.
fn open_write_conditions(ruleset: &Ruleset) -> Vec<(u16, ArgIn)> {
    use vigil_fields::Catalog;
    const O_ACCMODE: u32 = 3;
    const O_WRONLY: u32 = 1;
    const O_RDWR: u32 = 2;
    let Ok(is_write) = vigil_state::catalog().lookup("evt.is_open_write", None) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, arg) in [("open", 1u8), ("openat", 2)] {
        let Some(etype) = vigil_event::table::by_name(name) else {
            continue;
        };
        let (Some(nr), Some(values)) =
            (etype.spec().nr, ruleset.required_values(etype.0, &is_write))
        else {
            continue;
        };
        // `true` compiles to 1; a rule requiring `false` (a read) keeps every open.
        if values == [1] && !ruleset.candidates(etype.0).is_empty() {
            out.push((
                nr,
                ArgIn {
                    arg,
                    mask: O_ACCMODE,
                    values: vec![O_WRONLY, O_RDWR],
                },
            ));
        }
    }
    out
}

/// Which enabled rules enforce, and the syscalls they judge at entry.
fn enforced_rules(
    ruleset: &Ruleset,
    selection: &EnforceSelection,
) -> Result<(Vec<bool>, Vec<u16>), FilterError> {
    let mut enforced = vec![false; ruleset.rules().len()];
    let default_tag = [ENFORCE_TAG.to_string()];
    let tags: &[String] = if selection.rules.is_empty() && selection.tags.is_empty() {
        &default_tag
    } else {
        &selection.tags
    };
    let mut judged = Vec::new();
    for (i, rule) in ruleset.rules().iter().enumerate() {
        if !ruleset.is_enabled(i) {
            continue;
        }
        let by_name = selection
            .rules
            .iter()
            .any(|p| wildcard_match(p, &rule.name));
        let by_tag = tags
            .iter()
            .any(|p| rule.tags.iter().any(|t| wildcard_match(p, t)));
        if !(by_name || by_tag) {
            continue;
        }
        let Some(types) = rule.event_types() else {
            return Err(FilterError::EnforcedWithoutEventType {
                rule: rule.name.clone(),
            });
        };
        enforced[i] = true;
        judged.extend(types.iter().filter_map(|&id| syscall_nr(id)));
    }
    judged.sort_unstable();
    judged.dedup();
    Ok((enforced, judged))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{load_rules, RulesText};
    use vigil_rules::LoadOptions;

    fn ruleset(text: &str) -> Ruleset {
        let result = load_rules(
            &[RulesText {
                name: "rules.yaml".into(),
                text: text.into(),
            }],
            &LoadOptions::default(),
        );
        result.ruleset.expect("rules load")
    }

    fn nr(name: &str) -> u16 {
        vigil_event::table::by_name(name)
            .and_then(|e| e.spec().nr)
            .expect("a syscall")
    }

    fn rule(name: &str, condition: &str, tags: &str) -> String {
        format!(
            "- rule: {name}\n  desc: d\n  condition: {condition}\n  output: o\n  priority: WARNING\n  tags: [{tags}]\n"
        )
    }

    #[test]
    fn reports_the_rules_syscalls_and_drops_the_exec_entry_when_unneeded() {
        let rules = ruleset(&format!(
            "{}{}",
            rule("Open", "evt.type = openat and fd.name = /etc/shadow", "a"),
            rule(
                "Exec",
                "evt.type = execve and evt.res = SUCCESS and proc.name = nc",
                "b"
            )
        ));
        let f = KernelFilter::derive(&rules, None, false).unwrap();
        assert!(f.report.contains(&nr("openat")), "{f:?}");
        assert!(
            !f.report.contains(&nr("execve")),
            "a successful exec arrives as the exec event: {f:?}"
        );
        assert!(!f.watches_all);
        assert!(f.judged.is_empty() && !f.enforces());
        // A capture wants every event: the exec entry stays.
        let f = KernelFilter::derive(&rules, None, true).unwrap();
        assert!(f.report.contains(&nr("execve")));
        // A rule that can match a failed exec needs the entry.
        let rules = ruleset(&rule(
            "Exec fail",
            "evt.type = execve and evt.res != 0",
            "b",
        ));
        let f = KernelFilter::derive(&rules, None, false).unwrap();
        assert!(f.report.contains(&nr("execve")), "{f:?}");
    }

    #[test]
    fn dup_targets_become_argument_conditions() {
        let rules = ruleset(&rule(
            "Redirect",
            "evt.type in (dup2, dup3) and evt.rawres in (0, 1, 2)",
            "a",
        ));
        let f = KernelFilter::derive(&rules, None, false).unwrap();
        let dup2 = f.report_when.iter().find(|(n, _)| *n == nr("dup2"));
        assert_eq!(
            dup2.map(|(_, c)| c.clone()),
            Some(ArgIn::equal(1, vec![0, 1, 2])),
            "{f:?}"
        );
        // A rule that can match any result: no condition.
        let rules = ruleset(&rule("Any dup", "evt.type = dup2", "a"));
        let f = KernelFilter::derive(&rules, None, false).unwrap();
        assert!(f.report_when.is_empty(), "{f:?}");
    }

    #[test]
    fn failed_opens_need_the_string_every_failure_matching_rule_requires() {
        let needles = |text: &str| -> Vec<(&'static str, Vec<u8>)> {
            failure_path_needles(&ruleset(text))
                .into_iter()
                .map(|(t, n)| (t.name(), n))
                .collect()
        };
        let dots = || b"../".to_vec();
        let traversal = rule(
            "Traversal",
            "evt.type in (open, openat) and fd.nameraw contains '../' \
             and fd.nameraw glob '*../*'",
            "a",
        );
        assert_eq!(needles(&traversal), [("open", dots()), ("openat", dots())]);
        // Another rule that may match a failed openat and requires no such string: every
        // failed openat may match.
        let any = rule("Any", "evt.type = openat and proc.name = x", "a");
        assert_eq!(needles(&format!("{traversal}{any}")), [("open", dots())]);
        // One that excludes failures changes nothing.
        let ok = rule("Ok", "evt.type = openat and fd.num >= 0", "a");
        assert_eq!(needles(&format!("{traversal}{ok}")).len(), 2);
        // Rules requiring different strings share none: no filter.
        let other = rule(
            "Other",
            "evt.type = openat and fd.nameraw contains '/x/'",
            "a",
        );
        assert_eq!(needles(&format!("{traversal}{other}")), [("open", dots())]);
        // Two strings required, one shared: the shared one.
        let both = rule(
            "Both",
            "evt.type = openat and fd.nameraw contains '/x/' and fd.nameraw contains '../'",
            "a",
        );
        assert_eq!(
            needles(&format!("{other}{both}")),
            [("openat", b"/x/".to_vec())]
        );
        // No rule may match a failure: nothing here (the failures are filtered whole).
        assert!(needles(&ok).is_empty());
    }

    #[test]
    fn dup_result_requirements_become_result_masks() {
        let masks = |text: &str| -> Vec<(&'static str, u64)> {
            descriptor_result_masks(&ruleset(text))
                .into_iter()
                .map(|(t, m)| (t.spec().name, m))
                .collect()
        };
        // Falco's redirect rule: every dup type, results 0, 1, 2.
        let redirect = rule(
            "Redirect",
            "evt.type in (dup, dup2, dup3) and evt.rawres in (0, 1, 2) and fd.type = ipv4",
            "a",
        );
        assert_eq!(
            masks(&redirect),
            [("dup", 0b111), ("dup2", 0b111), ("dup3", 0b111)]
        );
        // `fd.num` (the descriptor a dup returns) counts as well; two rules: the union.
        let nine = |values| {
            rule(
                "Nine",
                &format!("evt.type = dup and fd.num in {values}"),
                "a",
            )
        };
        let two = format!("{}{}", nine("(9, 63)"), nine("(0)").replace("Nine", "Zero"));
        assert_eq!(masks(&two), [("dup", 1 | 1 << 9 | 1 << 63)]);
        // One rule on `evt.rawres`, another on `fd.num`: neither field is required by all.
        let mixed = format!("{redirect}{}", nine("(9)"));
        assert_eq!(masks(&mixed), [("dup2", 0b111), ("dup3", 0b111)]);
        // A rule watching dup2 without a result requirement: no mask for dup2 only.
        let any = format!("{redirect}{}", rule("Any dup2", "evt.type = dup2", "a"));
        assert_eq!(masks(&any), [("dup", 0b111), ("dup3", 0b111)]);
        // A required value beyond the mask, or negative (a failure): no mask.
        for values in ["(1, 64)", "(-9, 1)"] {
            let text = rule(
                "Far",
                &format!("evt.type = dup and evt.rawres in {values}"),
                "a",
            );
            assert!(masks(&text).is_empty(), "{values}: {:?}", masks(&text));
        }
        // No rule watches them: nothing to filter (the state-only path applies).
        assert!(masks(&rule("Open", "evt.type = openat", "a")).is_empty());
    }

    #[test]
    fn write_only_open_rules_become_access_mode_conditions() {
        let write = "evt.type in (open, openat, openat2) and evt.is_open_write = true and \
                     fd.name startswith /etc/";
        let rules = ruleset(&rule("Write etc", write, "a"));
        let f = KernelFilter::derive(&rules, None, false).unwrap();
        let cond = |name: &str| {
            f.report_when
                .iter()
                .find(|(n, _)| *n == nr(name))
                .map(|(_, c)| c.clone())
        };
        let access = |arg| {
            Some(ArgIn {
                arg,
                mask: 3,
                values: vec![1, 2],
            })
        };
        assert_eq!(cond("open"), access(1), "{f:?}");
        assert_eq!(cond("openat"), access(2), "{f:?}");
        assert_eq!(cond("openat2"), None, "its flags are in memory");
        assert!(f.report.contains(&nr("openat2")));
        assert_eq!(access(2).unwrap().to_string(), "arg2&0x3=1|2");
        // Falco's macro, nested in the rule's top-level `and`.
        let falco = "(evt.type in (open,openat,openat2) and evt.is_open_write=true and \
                     fd.typechar='f' and fd.num>=0) and fd.name = /var/log/x";
        let f =
            KernelFilter::derive(&ruleset(&rule("Falco write", falco, "a")), None, false).unwrap();
        assert!(
            f.report_when.iter().any(|(n, _)| *n == nr("openat")),
            "{f:?}"
        );
        // One rule that may match a read (or does not say) keeps every open.
        for other in [
            "evt.type = openat and evt.is_open_read = true and fd.name = /etc/shadow",
            "evt.type = openat and fd.name = /etc/shadow",
            "evt.type = openat and evt.is_open_write = false",
            "evt.type = openat and (evt.is_open_write = true or proc.name = cat)",
        ] {
            let rules = ruleset(&format!(
                "{}{}",
                rule("Write etc", write, "a"),
                rule("Other", other, "b")
            ));
            let f = KernelFilter::derive(&rules, None, false).unwrap();
            assert!(
                !f.report_when.iter().any(|(n, _)| *n == nr("openat")),
                "{other}: {f:?}"
            );
        }
        // A capture wants every open.
        let f = KernelFilter::derive(&rules, None, true).unwrap();
        assert!(f.report_when.is_empty());
    }

    #[test]
    fn enforcement_by_default_tag_name_or_tag_pattern() {
        let rules = ruleset(&format!(
            "{}{}{}",
            rule(
                "Shadow",
                "evt.type = openat and fd.name = /etc/shadow",
                "vigil.enforce"
            ),
            rule("Ptrace", "evt.type = ptrace", "mitre_x"),
            rule("Connect", "evt.type = connect", "net")
        ));
        let default = EnforceSelection::default();
        let f = KernelFilter::derive(&rules, Some(&default), false).unwrap();
        assert_eq!(f.enforced, [true, false, false]);
        assert_eq!(f.judged, [nr("openat")]);
        let by_name = EnforceSelection {
            rules: vec!["Ptr*".into()],
            tags: Vec::new(),
        };
        let f = KernelFilter::derive(&rules, Some(&by_name), false).unwrap();
        assert_eq!(
            f.enforced,
            [false, true, false],
            "a name replaces the default tag"
        );
        let by_tag = EnforceSelection {
            rules: Vec::new(),
            tags: vec!["ne*".into()],
        };
        let f = KernelFilter::derive(&rules, Some(&by_tag), false).unwrap();
        assert_eq!(f.enforced, [false, false, true]);
        assert_eq!(f.judged, [nr("connect")]);
    }

    /// The workload's constant fields, as a view of its process would give them.
    struct Workload {
        container_id: &'static str,
    }

    impl vigil_fields::Extract for Workload {
        fn event_type(&self) -> u16 {
            0
        }
        fn extract<'a>(&'a self, field: &FieldRef, out: &mut Vec<vigil_fields::Value<'a>>) -> bool {
            let name = vigil_state::catalog().def(field.id).name;
            let value = match name {
                "container.id" => self.container_id,
                "container.name" if self.container_id == "host" => "host",
                _ => return false,
            };
            out.push(vigil_fields::Value::Str(value.as_bytes().into()));
            true
        }
    }

    #[test]
    fn constant_fields_fold_rules_that_cannot_match_the_workload() {
        let text = format!(
            "{}{}{}",
            rule(
                "In container",
                "evt.type = dup and container.id != host and evt.rawres in (0, 1, 2)",
                "a"
            ),
            rule("On host", "evt.type = connect and container.id = host", "b"),
            rule(
                "Anywhere",
                "evt.type = openat and fd.name = /etc/shadow",
                "c"
            )
        );
        let mut host = ruleset(&text);
        let folded = fold_workload_constants(
            &mut host,
            &Workload {
                container_id: "host",
            },
        );
        assert_eq!(folded, [0], "only the container-guarded rule");
        let f = KernelFilter::derive(&host, None, false).unwrap();
        assert!(!f.report.contains(&nr("dup")), "no stop for dup: {f:?}");
        assert!(f.report.contains(&nr("connect")) && f.report.contains(&nr("openat")));
        let mut inside = ruleset(&text);
        let folded = fold_workload_constants(
            &mut inside,
            &Workload {
                container_id: "0123456789ab",
            },
        );
        assert_eq!(folded, [1], "only the host-guarded rule");
        let f = KernelFilter::derive(&inside, None, false).unwrap();
        assert!(f.report.contains(&nr("dup")) && !f.report.contains(&nr("connect")));
        // Which fields count as constant.
        assert!(is_workload_constant(
            &vigil_state::catalog().lookup("k8s.ns.name", None).unwrap()
        ));
        assert!(!is_workload_constant(
            &vigil_state::catalog()
                .lookup("container.duration", None)
                .unwrap()
        ));
        assert!(!is_workload_constant(
            &vigil_state::catalog().lookup("proc.name", None).unwrap()
        ));
    }

    #[test]
    fn a_rule_without_event_type_cannot_enforce_and_watches_everything() {
        let rules = ruleset(&rule("Any", "proc.name = nc", "vigil.enforce"));
        let e =
            KernelFilter::derive(&rules, Some(&EnforceSelection::default()), false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "rule `Any` cannot be enforced: its condition does not restrict evt.type"
        );
        let f = KernelFilter::derive(&rules, None, false).unwrap();
        assert!(f.watches_all);
    }
}
