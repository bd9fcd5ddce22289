//! Falco's `watch_config_files`: notices that the configuration file or a loaded rules file
//! or directory changed, and says when to reload — the same reload SIGHUP asks for, which
//! `vigil run` cannot use (SIGHUP belongs to its workload).
//!
//! Every watched path is watched through its parent directory (inotify), by name: an editor
//! that writes a new file and renames it over the old one, `mv`, and a file deleted and
//! created again are all seen, which a watch on the file itself (its inode) would miss after
//! the first replacement. A rules directory is also watched itself, for its `*.yaml`/`*.yml`
//! entries (the ones the loader reads). A symbolic link is followed too (a Kubernetes
//! ConfigMap swaps the directory its links point into).
//!
//! Editors write in several steps (truncate, write, rename, chmod): a reload is due only once
//! the watched files have been quiet for a while ([`Debounce`]). The event loop asks
//! [`ConfigWatcher::poll`] between events; it reads the inotify descriptor (non-blocking) at
//! most every [`READ_EVERY`], so a busy loop pays a clock read, not a system call.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

/// How long the watched files must stay unchanged before the reload (editors write in
/// several steps; a reload in between would read half a file).
pub const QUIET: Duration = Duration::from_millis(200);

/// How often [`ConfigWatcher::poll`] reads the inotify descriptor.
pub const READ_EVERY: Duration = Duration::from_millis(100);

/// Why watching could not start.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("cannot create an inotify instance")]
    Init(#[source] Errno),
}

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

/// Directory events that may change what a watched name refers to.
fn dir_flags() -> AddWatchFlags {
    AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_ONLYDIR
}

/// Watches a [`WatchSet`] and says when a reload is due.
pub struct ConfigWatcher {
    inotify: Inotify,
    set: WatchSet,
    /// Watch descriptor → the directories it watches (one inode may be reached by two paths).
    watches: HashMap<WatchDescriptor, Vec<PathBuf>>,
    /// Directories that could not be watched at the last (re)arm.
    missing: Vec<PathBuf>,
    debounce: Debounce,
    next_read: Option<Instant>,
}

impl ConfigWatcher {
    /// Starts watching `set`; a reload is due `quiet` after the last change.
    pub fn new(set: WatchSet, quiet: Duration) -> Result<ConfigWatcher, WatchError> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(WatchError::Init)?;
        let mut watcher = ConfigWatcher {
            inotify,
            set,
            watches: HashMap::new(),
            missing: Vec::new(),
            debounce: Debounce::new(quiet),
            next_read: None,
        };
        watcher.arm();
        Ok(watcher)
    }

    /// The set watched now.
    pub fn set(&self) -> &WatchSet {
        &self.set
    }

    /// Directories that could not be watched (they do not exist, or are not readable).
    pub fn missing(&self) -> &[PathBuf] {
        &self.missing
    }

    /// Watches `set` instead (after a reload: the configuration may name other rules).
    pub fn replace(&mut self, set: WatchSet) {
        self.set = set;
        self.arm();
    }

    /// (Re)adds a watch for every directory of the set, and removes the others: a directory
    /// created again since (a rules directory replaced as a whole) gets a new watch.
    fn arm(&mut self) {
        let mut watches: HashMap<WatchDescriptor, Vec<PathBuf>> = HashMap::new();
        self.missing.clear();
        for dir in self.set.dirs() {
            match self.inotify.add_watch(dir, dir_flags()) {
                Ok(wd) => watches.entry(wd).or_default().push(dir.to_path_buf()),
                Err(e) => {
                    log::debug!("cannot watch `{}`: {e}", dir.display());
                    self.missing.push(dir.to_path_buf());
                }
            }
        }
        for wd in self.watches.keys() {
            if !watches.contains_key(wd) {
                // Already gone when its directory was deleted: nothing to report.
                let _ = self.inotify.rm_watch(*wd);
            }
        }
        self.watches = watches;
    }

    /// Reads what changed (at most every [`READ_EVERY`]) and returns true when a reload is
    /// due: something watched changed and has been quiet since for the quiet period.
    pub fn poll(&mut self, now: Instant) -> bool {
        if self.next_read.is_some_and(|next| now < next) {
            return false;
        }
        self.next_read = Some(now + READ_EVERY);
        let mut rearm = false;
        loop {
            match self.inotify.read_events() {
                Ok(events) if events.is_empty() => break,
                Ok(events) => {
                    for event in events {
                        let (matters, gone) = self.relevance(event.wd, event.mask, event.name);
                        rearm |= gone;
                        if matters {
                            self.debounce.changed(now);
                        }
                    }
                }
                Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    log::warn!("watch_config_files: cannot read file change events: {e}");
                    break;
                }
            }
        }
        if rearm {
            self.arm();
        }
        if self.debounce.due(now) {
            // Directories replaced or created since get their watches before the reload
            // reads them, so a change right after the reload is not missed.
            self.arm();
            return true;
        }
        false
    }

    /// Whether an event calls for a reload, and whether a watched directory went away.
    fn relevance(
        &self,
        wd: WatchDescriptor,
        mask: AddWatchFlags,
        name: Option<OsString>,
    ) -> (bool, bool) {
        if mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
            // Events were lost: whatever they were, reload.
            return (true, true);
        }
        let gone = mask.intersects(
            AddWatchFlags::IN_DELETE_SELF | AddWatchFlags::IN_MOVE_SELF | AddWatchFlags::IN_IGNORED,
        );
        let Some(dirs) = self.watches.get(&wd) else {
            return (false, false);
        };
        if gone {
            // A watched directory itself went away (a rules directory, or a link target's
            // directory swapped out): what it held is gone too.
            return (true, true);
        }
        let matters = name.is_some_and(|name| dirs.iter().any(|d| self.set.matters(d, &name)));
        (matters, false)
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
        let mut w = ConfigWatcher::new(set, Duration::from_millis(50)).unwrap();
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
        let mut w =
            ConfigWatcher::new(WatchSet::new(&[], &paths), Duration::from_millis(50)).unwrap();
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
    fn a_missing_directory_is_reported_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("no/such/dir/rules.yaml");
        let w = ConfigWatcher::new(WatchSet::new(&[], &[gone]), QUIET).unwrap();
        assert_eq!(w.missing().len(), 1, "{:?}", w.missing());
        assert!(w.set().dirs().count() == 1);
    }
}
