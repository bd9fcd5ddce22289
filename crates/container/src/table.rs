//! The container metadata table, by short id.
//!
//! The id comes from the cgroup path alone (`vigil_procfs::container_id_from_cgroup`, as
//! Falco's drivers do in the kernel); everything else (`container.name`, `container.image`,
//! mounts, Kubernetes pod) comes from a runtime's files ([`crate::RuntimeReader`]) or from
//! what a runtime told the capture ([`vigil_event::ContainerInfo`] in a snapshot).

use rustc_hash::FxHashMap;
use vigil_event::ContainerInfo;
use vigil_procfs::SHORT_ID_LEN;

/// Container metadata by short id.
#[derive(Debug, Default)]
pub struct ContainerTable {
    /// The metadata and whether it is complete (a runtime's own record, not a fallback).
    by_id: FxHashMap<Box<[u8]>, (ContainerInfo, bool)>,
}

impl ContainerTable {
    pub fn insert(&mut self, info: ContainerInfo) {
        self.put(info, true);
    }

    /// Metadata known to lack part of what the runtime records (asked for again later).
    pub fn insert_partial(&mut self, info: ContainerInfo) {
        self.put(info, false);
    }

    fn put(&mut self, info: ContainerInfo, complete: bool) {
        let id = info.id.as_bytes();
        let short: Box<[u8]> = id[..id.len().min(SHORT_ID_LEN)].into();
        self.by_id.insert(short, (info, complete));
    }

    pub fn get(&self, short_id: &[u8]) -> Option<&ContainerInfo> {
        if short_id.is_empty() {
            return None;
        }
        self.by_id.get(short_id).map(|(info, _)| info)
    }

    /// Whether complete metadata of `short_id` is known.
    pub fn is_complete(&self, short_id: &[u8]) -> bool {
        self.by_id
            .get(short_id)
            .is_some_and(|(_, complete)| *complete)
    }

    /// Keeps only the containers `keep` answers true for.
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        self.by_id.retain(|id, _| keep(id));
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// The value of a runtime label.
pub fn label<'c>(info: &'c ContainerInfo, key: &str) -> Option<&'c str> {
    info.labels
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}
