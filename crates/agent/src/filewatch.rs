//! Falco's `watch_config_files`: notices that the configuration file or a loaded rules file
//! or directory changed, and says when to reload — the same reload SIGHUP asks for, which
//! `vigil run` cannot use (SIGHUP belongs to its workload).
//!
//! Every watched path is checked by name, from its parent directory: an editor that writes a
//! new file and renames it over the old one, `mv`, and a file deleted and created again are
//! all seen. A rules directory's `*.yaml`/`*.yml` entries (the ones the loader reads) are
//! listed and checked too. A symbolic link is followed (a Kubernetes ConfigMap swaps the
//! directory its links point into), and the link itself is checked.
//!
//! The files are *polled*: their identity, size and change times (`stat`), at most every
//! [`READ_EVERY`], compared with the last look. No inotify: a mark anywhere on a filesystem
//! makes every read and write on that filesystem take the kernel's fsnotify checks — the
//! monitored host's file I/O would pay for Vigil watching two files (`BENCHMARKS.md`:
//! UnixBench's file copy lost about 3 points more with an inotify watch on the same
//! filesystem). A poll costs the agent a few `stat` calls and nothing to anyone else.
//!
//! Editors write in several steps (truncate, write, rename, chmod): a reload is due only once
//! the watched files have been quiet for a while ([`Debounce`]). The agent's timer calls
//! [`ConfigWatcher::check`] every [`READ_EVERY`] (an idle agent wakes for it; a busy one pays a
//! clock read between batches, not a system call); [`ConfigWatcher::poll`] is the same with
//! its own limit, for a caller that asks between events.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the watched files must stay unchanged before the reload (editors write in
/// several steps; a reload in between would read half a file).
pub const QUIET: Duration = Duration::from_millis(200);

/// How often [`ConfigWatcher::poll`] looks at the files.
pub const READ_EVERY: Duration = Duration::from_millis(250);

/// Where the watched paths come from: the configuration file given on the command line, and
/// the rules paths given there (`-r`), which replace the configuration's `rules_files`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchSources {
    pub config_file: Option<PathBuf>,
    pub rules_override: Vec<PathBuf>,
}

impl WatchSources {
    /// The watch set for a configuration whose `rules_files` are `rules_files` (used when no
    /// rules path was given on the command line).
    pub fn set(&self, rules_files: &[PathBuf]) -> WatchSet {
        let rules = if self.rules_override.is_empty() {
            rules_files
        } else {
            &self.rules_override
        };
        WatchSet::new(self.config_file.as_slice(), rules)
    }
}

/// Which entries of a watched directory matter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Interest {
    /// Every `*.yaml`/`*.yml` entry (a rules directory).
    rules: bool,
    /// These entries (a watched file, or a rules directory replaced as a whole).
    names: BTreeSet<OsString>,
}

/// The directories to watch and the entries of each that matter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchSet {
    dirs: BTreeMap<PathBuf, Interest>,
}

impl WatchSet {
    /// The set for configuration files `files` and rules files or directories `rules`. A
    /// path that does not exist (yet) is watched as a file.
    pub fn new(files: &[PathBuf], rules: &[PathBuf]) -> WatchSet {
        let mut set = WatchSet::default();
        for path in files.iter().chain(rules) {
            set.add_path(path);
            // A link: the target's directory too (a ConfigMap's `..data` swap replaces it).
            if let Ok(target) = std::fs::canonicalize(path) {
                if std::path::absolute(path).ok().as_ref() != Some(&target) {
                    set.add_path(&target);
                }
            }
        }
        set
    }

    fn add_path(&mut self, path: &Path) {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        if path.is_dir() {
            self.dirs.entry(path.clone()).or_default().rules = true;
        }
        if let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
            self.dirs
                .entry(parent.to_path_buf())
                .or_default()
                .names
                .insert(name.to_os_string());
        }
    }

    /// Nothing to watch (the embedded configuration and ruleset).
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    /// The directories watched.
    pub fn dirs(&self) -> impl Iterator<Item = &Path> {
        self.dirs.keys().map(PathBuf::as_path)
    }

    /// Whether a change of entry `name` of directory `dir` calls for a reload.
    pub fn matters(&self, dir: &Path, name: &OsStr) -> bool {
        let Some(interest) = self.dirs.get(dir) else {
            return false;
        };
        interest.names.contains(name) || (interest.rules && is_rules_file_name(name))
    }
}

/// The entries of a rules directory that the loader reads
/// ([`vigil_engine::read_rules_paths`]): an editor's swap and backup files are not.
fn is_rules_file_name(name: &OsStr) -> bool {
    matches!(
        Path::new(name).extension().and_then(OsStr::to_str),
        Some("yaml" | "yml")
    )
}

/// A reload once changes have stopped for the quiet period.
#[derive(Clone, Debug)]
pub struct Debounce {
    quiet: Duration,
    last_change: Option<Instant>,
}

impl Debounce {
    pub fn new(quiet: Duration) -> Debounce {
        Debounce {
            quiet,
            last_change: None,
        }
    }

    /// A change was seen at `now`: the quiet period starts again.
    pub fn changed(&mut self, now: Instant) {
        self.last_change = Some(now);
    }

    /// Whether changes are waiting for the quiet period to end.
    pub fn pending(&self) -> bool {
        self.last_change.is_some()
    }

    /// True once per burst of changes, when `now` is a quiet period past the last one.
    pub fn due(&mut self, now: Instant) -> bool {
        match self.last_change {
            Some(last) if now.saturating_duration_since(last) >= self.quiet => {
                self.last_change = None;
                true
            }
            _ => false,
        }
    }
}

/// What a path is now, as far as a reload is concerned: the file it names (links followed)
/// and the link itself, or nothing where it does not exist.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    mode: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: std::io::Result<std::fs::Metadata>) -> Option<Stamp> {
        let m = meta.ok()?;
        Some(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            mode: m.mode(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }
}

/// Every watched path (and every rules file of a watched rules directory) with its stamps.
type Look = BTreeMap<PathBuf, (Option<Stamp>, Option<Stamp>)>;

/// Watches a [`WatchSet`] and says when a reload is due.
pub struct ConfigWatcher {
    set: WatchSet,
    /// What the files were at the last look.
    last: Look,
    /// Directories that could not be read at the last look (other than not existing: a
    /// directory that does not exist yet is seen when it appears).
    missing: Vec<PathBuf>,
    debounce: Debounce,
    next_read: Option<Instant>,
}

impl ConfigWatcher {
    /// Starts watching `set`; a reload is due `quiet` after the last change.
    pub fn new(set: WatchSet, quiet: Duration) -> ConfigWatcher {
        let mut watcher = ConfigWatcher {
            set,
            last: Look::new(),
            missing: Vec::new(),
            debounce: Debounce::new(quiet),
            next_read: None,
        };
        watcher.last = watcher.look();
        watcher
    }

    /// The set watched now.
    pub fn set(&self) -> &WatchSet {
        &self.set
    }

    /// Directories that could not be read (permissions): changes there are not seen.
    pub fn missing(&self) -> &[PathBuf] {
        &self.missing
    }

    /// Watches `set` instead (after a reload: the configuration may name other rules). What
    /// the new set's files are now is the reference: the replacement itself is no change.
    pub fn replace(&mut self, set: WatchSet) {
        self.set = set;
        self.last = self.look();
    }

    /// The stamps of every watched path now.
    fn look(&mut self) -> Look {
        let mut look = Look::new();
        self.missing.clear();
        for (dir, interest) in &self.set.dirs {
            let mut names: BTreeSet<OsString> = interest.names.clone();
            if interest.rules {
                match std::fs::read_dir(dir) {
                    Ok(entries) => names.extend(
                        entries
                            .filter_map(Result::ok)
                            .map(|e| e.file_name())
                            .filter(|n| is_rules_file_name(n)),
                    ),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        log::debug!("cannot list `{}`: {e}", dir.display());
                        self.missing.push(dir.clone());
                    }
                }
                // The directory itself: replaced as a whole, it is another inode (its times
                // change with any entry, rules or not: only its identity counts).
                let identity = Stamp::of(std::fs::metadata(dir)).map(|d| Stamp {
                    mode: 0,
                    size: 0,
                    mtime: (0, 0),
                    ctime: (0, 0),
                    ..d
                });
                look.insert(dir.clone(), (identity, None));
            }
            for name in names {
                let path = dir.join(&name);
                if self.set.dirs.get(&path).is_some_and(|i| i.rules) {
                    // A watched rules directory: its identity and its rules files count, not
                    // its times (which any entry changes).
                    continue;
                }
                let stamps = (
                    Stamp::of(std::fs::metadata(&path)),
                    Stamp::of(std::fs::symlink_metadata(&path)),
                );
                look.insert(path, stamps);
            }
        }
        look
    }

    /// Looks at the files (at most every [`READ_EVERY`]) and returns true when a reload is
    /// due: something watched changed and has been quiet since for the quiet period.
    pub fn poll(&mut self, now: Instant) -> bool {
        if self.next_read.is_some_and(|next| now < next) {
            return false;
        }
        self.next_read = Some(now + READ_EVERY);
        self.check(now)
    }

    /// [`ConfigWatcher::poll`] for a caller that keeps the schedule itself (the agent's
    /// timers call it every [`READ_EVERY`]): looks at the files now.
    pub fn check(&mut self, now: Instant) -> bool {
        let look = self.look();
        if look != self.last {
            self.last = look;
            self.debounce.changed(now);
        }
        self.debounce.due(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn debounce_fires_once_after_the_quiet_period() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut d = Debounce::new(ms(200));
        assert!(!d.due(t0) && !d.pending(), "nothing changed");
        d.changed(t0);
        assert!(!d.due(t0 + ms(150)));
        // Another write restarts the quiet period.
        d.changed(t0 + ms(150));
        assert!(!d.due(t0 + ms(300)), "only 150 ms since the last change");
        assert!(d.pending());
        assert!(d.due(t0 + ms(350)));
        assert!(!d.due(t0 + ms(900)), "once per burst");
    }

    #[test]
    fn watch_set_names_files_by_their_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let rules_d = root.join("rules.d");
        fs::create_dir(&rules_d).unwrap();
        let config = root.join("etc/vigil.yaml");
        let rules = root.join("rules.yaml");
        let set = WatchSet::new(
            std::slice::from_ref(&config),
            &[rules.clone(), rules_d.clone()],
        );
        let dirs: Vec<&Path> = set.dirs().collect();
        assert_eq!(dirs, [root.as_path(), &root.join("etc"), &rules_d]);
        assert!(set.matters(&root.join("etc"), OsStr::new("vigil.yaml")));
        assert!(!set.matters(&root.join("etc"), OsStr::new("other.yaml")));
        assert!(set.matters(&root, OsStr::new("rules.yaml")));
        assert!(
            set.matters(&root, OsStr::new("rules.d")),
            "directory replaced"
        );
        assert!(!set.matters(&root, OsStr::new("notes.yaml")), "not loaded");
        assert!(set.matters(&rules_d, OsStr::new("local.yaml")));
        assert!(set.matters(&rules_d, OsStr::new("x.yml")));
        assert!(!set.matters(&rules_d, OsStr::new(".local.yaml.swp")));
        assert!(!set.matters(&rules_d, OsStr::new("local.yaml~")));
        assert!(!set.matters(Path::new("/elsewhere"), OsStr::new("rules.yaml")));
        // Rules named on the command line replace the configuration's.
        let sources = WatchSources {
            config_file: Some(config.clone()),
            rules_override: vec![rules.clone()],
        };
        let from_config = [root.join("ignored.yaml")];
        assert!(!sources
            .set(&from_config)
            .matters(&root, OsStr::new("ignored.yaml")));
        let sources = WatchSources {
            rules_override: Vec::new(),
            ..sources
        };
        assert!(sources
            .set(&from_config)
            .matters(&root, OsStr::new("ignored.yaml")));
        assert!(
            WatchSources::default().set(&[]).is_empty(),
            "embedded defaults"
        );
    }

    #[test]
    fn a_link_is_watched_at_its_target_too() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::create_dir(root.join("data-1")).unwrap();
        fs::write(root.join("data-1/rules.yaml"), "[]").unwrap();
        std::os::unix::fs::symlink(root.join("data-1/rules.yaml"), root.join("rules.yaml"))
            .unwrap();
        let set = WatchSet::new(&[], &[root.join("rules.yaml")]);
        assert!(set.matters(&root, OsStr::new("rules.yaml")));
        assert!(set.matters(&root.join("data-1"), OsStr::new("rules.yaml")));
    }

    /// Polls until a reload is due, or `limit` passes.
    fn reload_due(w: &mut ConfigWatcher, limit: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if w.poll(Instant::now()) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn writes_renames_deletions_and_recreations_are_seen() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let rules = root.join("rules.yaml");
        let rules_d = root.join("rules.d");
        fs::write(&rules, "a").unwrap();
        fs::create_dir(&rules_d).unwrap();
        let set = WatchSet::new(&[], &[rules.clone(), rules_d.clone()]);
        let mut w = ConfigWatcher::new(set, Duration::from_millis(50));
        assert!(w.missing().is_empty(), "{:?}", w.missing());
        let long = Duration::from_secs(10);
        let short = Duration::from_millis(400);
        assert!(!reload_due(&mut w, short), "nothing changed yet");

        // Unrelated files in the watched directories do not count.
        fs::write(root.join("other.txt"), "x").unwrap();
        fs::write(rules_d.join(".swap.swp"), "x").unwrap();
        assert!(!reload_due(&mut w, short), "unrelated files changed");

        // Written in place, in several steps: one reload.
        fs::write(&rules, "b").unwrap();
        fs::write(&rules, "bc").unwrap();
        assert!(reload_due(&mut w, long), "write in place");
        assert!(!reload_due(&mut w, short), "one reload per burst");

        // Replaced by a rename, like an editor; then again (the name, not the inode).
        for round in 0..2 {
            let tmp = root.join(".rules.yaml.tmp");
            fs::write(&tmp, format!("r{round}")).unwrap();
            fs::rename(&tmp, &rules).unwrap();
            assert!(reload_due(&mut w, long), "rename {round}");
        }

        // Deleted, then created again.
        fs::remove_file(&rules).unwrap();
        assert!(reload_due(&mut w, long), "deleted");
        fs::write(&rules, "again").unwrap();
        assert!(reload_due(&mut w, long), "recreated");

        // A rules directory's entries, and the directory replaced as a whole.
        fs::write(rules_d.join("local.yaml"), "x").unwrap();
        assert!(
            reload_due(&mut w, long),
            "file added to the rules directory"
        );
        fs::remove_dir_all(&rules_d).unwrap();
        assert!(reload_due(&mut w, long), "rules directory removed");
        fs::create_dir(&rules_d).unwrap();
        assert!(reload_due(&mut w, long), "rules directory created again");
        fs::write(rules_d.join("new.yaml"), "x").unwrap();
        assert!(
            reload_due(&mut w, long),
            "the recreated directory is watched again"
        );

        // Another set: the old names no longer count.
        let other = root.join("other.yaml");
        w.replace(WatchSet::new(&[], std::slice::from_ref(&other)));
        fs::write(&rules, "old").unwrap();
        assert!(!reload_due(&mut w, short), "no longer watched");
        fs::write(&other, "new").unwrap();
        assert!(reload_due(&mut w, long), "the new set is watched");
    }

    #[test]
    fn a_configmap_style_swap_is_seen() {
        // Kubernetes mounts a ConfigMap as `name -> ..data/name`, `..data -> ..<version>`,
        // and updates it by renaming a new `..data` link over the old one, then deleting the
        // old version's directory.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let version = |n: u32| {
            let d = root.join(format!("..v{n}"));
            fs::create_dir(&d).unwrap();
            fs::write(d.join("rules.yaml"), format!("v{n}")).unwrap();
            std::os::unix::fs::symlink(&d, root.join("..data_tmp")).unwrap();
            fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
            d
        };
        let mut old = version(1);
        std::os::unix::fs::symlink("..data/rules.yaml", root.join("rules.yaml")).unwrap();
        let paths = [root.join("rules.yaml")];
        let mut w = ConfigWatcher::new(WatchSet::new(&[], &paths), Duration::from_millis(50));
        for n in 2..4 {
            let new = version(n);
            fs::remove_dir_all(&old).unwrap();
            old = new;
            assert!(reload_due(&mut w, Duration::from_secs(10)), "update {n}");
            // As after the reload: the set follows the link to the new version.
            w.replace(WatchSet::new(&[], &paths));
            assert!(
                w.set().matters(&old, OsStr::new("rules.yaml")),
                "{:?}",
                w.set()
            );
        }
    }

    #[test]
    fn a_directory_that_does_not_exist_yet_is_seen_when_it_appears() {
        let dir = tempfile::tempdir().unwrap();
        let later = dir.path().join("no/such/dir");
        let rules = later.join("rules.yaml");
        let mut w = ConfigWatcher::new(
            WatchSet::new(&[], std::slice::from_ref(&rules)),
            Duration::from_millis(50),
        );
        assert!(w.missing().is_empty(), "not existing is not an error");
        assert!(
            !reload_due(&mut w, Duration::from_millis(400)),
            "nothing yet"
        );
        fs::create_dir_all(&later).unwrap();
        fs::write(&rules, "x").unwrap();
        assert!(reload_due(&mut w, Duration::from_secs(10)), "created");
    }

    #[test]
    fn a_change_is_seen_only_at_the_next_look() {
        let dir = tempfile::tempdir().unwrap();
        let rules = dir.path().join("rules.yaml");
        fs::write(&rules, "a").unwrap();
        let mut w = ConfigWatcher::new(
            WatchSet::new(&[], std::slice::from_ref(&rules)),
            Duration::ZERO,
        );
        let t0 = Instant::now();
        assert!(!w.poll(t0), "unchanged");
        fs::write(&rules, "ab").unwrap();
        assert!(
            !w.poll(t0 + READ_EVERY / 2),
            "within READ_EVERY of the last look nothing is read"
        );
        assert!(w.poll(t0 + READ_EVERY), "the next look sees it");
    }
}
