//! The state engine: what Vigil knows about the machine while it reads events — threads and
//! processes (a parent chain for `proc.aname[N]`), each process's fd table, users and groups
//! ([`UserDb`], per container), container identity from cgroup paths with metadata from the
//! capture's snapshot or the runtimes' files (`vigil-container`) — and the field catalog
//! ([`catalog`]) with its extractor ([`EventView`]).
//!
//! Entry points: per event, [`State::apply`] (what rules must already see: a new fd, the image
//! after `execve`, the child after `clone`), then [`State::view`] for the rules, then
//! [`State::finish`] (removals, so the fields of a `close` or `procexit` still resolve);
//! [`State::load_snapshot`] at start.
//!
//! Invariants: malformed or surprising events are counted ([`StateStats`]), never a panic. It
//! sees events ([`vigil_event`]) and serves fields ([`vigil_fields`]); it knows nothing of
//! rules, outputs or drivers. Its only I/O: user databases ([`LiveUsers`], when their stamps
//! change), container runtimes' files ([`StateConfig::container_runtime`]) and `/proc` for a
//! start snapshot ([`procfs`], the `vigil-procfs` crate re-exported), all through [`ProcSource`]
//! or configured roots so tests use in-memory fakes and scratch trees.
#![forbid(unsafe_code)]

mod fields;
mod path;
mod render;
mod schema;
mod state;
mod table;
mod users;
mod view;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod testutil;

pub use fields::{catalog, FieldCatalog};
pub use path::{normalize as normalize_path, resolve as resolve_path};
pub use state::{SavedFd, State, StateConfig, StateStats, MAX_ANCESTORS};
pub use users::{
    FileUserDb, LiveUsers, LiveUsersConfig, LiveUsersStats, MemUserDb, UserDb, UserDbError,
    MAX_CONTAINER_DB_BYTES, MAX_DB_BYTES, MAX_ROOT_PIDS,
};
pub use view::EventView;
pub use vigil_container::{LookupStats, RuntimeDirs};
pub use vigil_procfs as procfs;
pub use vigil_procfs::{
    container_id_from_cgroup, read_fd, read_snapshot, FakeProc, FileStamp, ProcError, ProcSource,
    RealProc, SnapshotOptions, SnapshotStats,
};
