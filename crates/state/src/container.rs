//! The container metadata table.
//!
//! The id comes from the cgroup path alone (`vigil_procfs::container_id_from_cgroup`, as
//! Falco's drivers do in the kernel); everything else (`container.name`, `container.image`,
//! mounts, Kubernetes pod) comes from what a runtime told the capture
//! ([`vigil_event::ContainerInfo`]).

use rustc_hash::FxHashMap;
use vigil_event::ContainerInfo;
use vigil_procfs::SHORT_ID_LEN;

/// Container metadata by short id.
#[derive(Debug, Default)]
pub(crate) struct ContainerTable {
    /// The metadata and whether it is complete (a runtime's own record, not a fallback).
    by_id: FxHashMap<Box<[u8]>, (ContainerInfo, bool)>,
}

impl ContainerTable {
    pub(crate) fn insert(&mut self, info: ContainerInfo) {
        self.put(info, true);
    }

    /// Metadata known to lack part of what the runtime records (asked for again later).
    pub(crate) fn insert_partial(&mut self, info: ContainerInfo) {
        self.put(info, false);
    }

    fn put(&mut self, info: ContainerInfo, complete: bool) {
        let id = info.id.as_bytes();
        let short: Box<[u8]> = id[..id.len().min(SHORT_ID_LEN)].into();
        self.by_id.insert(short, (info, complete));
    }

    pub(crate) fn get(&self, short_id: &[u8]) -> Option<&ContainerInfo> {
        if short_id.is_empty() {
            return None;
        }
        self.by_id.get(short_id).map(|(info, _)| info)
    }

    /// Whether complete metadata of `short_id` is known.
    pub(crate) fn is_complete(&self, short_id: &[u8]) -> bool {
        self.by_id
            .get(short_id)
            .is_some_and(|(_, complete)| *complete)
    }

    /// Keeps only the containers `keep` answers true for.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        self.by_id.retain(|id, _| keep(id));
    }

    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }
}

/// The value of a runtime label.
pub(crate) fn label<'c>(info: &'c ContainerInfo, key: &str) -> Option<&'c str> {
    info.labels
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Shell-style glob over bytes: `*` any run (including `/`, as `fnmatch` without
/// `FNM_PATHNAME`), `?` one byte, everything else literal. Iterative with one backtrack point,
/// so adversarial patterns stay linear-ish.
pub(crate) fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_like_fnmatch_without_pathname() {
        assert!(glob_match(b"/proc*", b"/proc"));
        assert!(glob_match(b"/proc*", b"/proc/sys/kernel"));
        assert!(!glob_match(b"/proc*", b"/pro"));
        assert!(glob_match(b"/etc", b"/etc"));
        assert!(!glob_match(b"/etc", b"/etc/x"));
        assert!(glob_match(b"/r?ot*", b"/root/.ssh"));
        assert!(glob_match(b"*a*b*c", b"xxaxxbxxc"));
        assert!(!glob_match(b"*a*b*c", b"xxaxxbxx"));
        let long = vec![b'a'; 5000];
        assert!(!glob_match(b"*a*a*a*a*b", &long));
    }
}
