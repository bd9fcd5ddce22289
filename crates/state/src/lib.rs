//! The state engine: what Vigil knows about the machine while it reads events, and the field
//! values rules are evaluated against.
//!
//! This crate owns the thread/process table (threads share process-level data through their
//! thread-group leader; a parent chain by `ppid` for `proc.aname[N]` and friends), the fd table
//! of each process (files, directories, sockets with their tuples, pipes, memfds…), the user and
//! group databases ([`UserDb`]), container identity (from cgroup paths) and metadata (from a
//! capture snapshot, or from the runtimes' state files through `vigil-container`), and the
//! field catalog ([`catalog`]) with its extractor ([`EventView`]).
//!
//! The engine calls, per event: [`State::apply`] (state the rules must already see: a new fd,
//! the new image after `execve`, the child after `clone`), then evaluates rules through
//! [`State::view`], then [`State::finish`] (removals, so the fields of a `close` or `procexit`
//! still resolve). Malformed or surprising events are counted ([`StateStats`]), never a panic.
//!
//! It must not know about rules, outputs or drivers: it sees events ([`vigil_event`]) and
//! serves fields ([`vigil_fields`]). No I/O except reading user databases ([`LiveUsers`]:
//! the host's and containers' passwd/group files, through the [`ProcSource`] trait, when their
//! stamps change), container runtimes' state files (`vigil_container::RuntimeReader`, when
//! [`StateConfig::container_runtime`] is set) and reading `/proc` into a
//! bootstrap [`vigil_event::Snapshot`] ([`procfs`]: the `vigil-procfs` crate, re-exported,
//! through [`ProcSource`] so tests use an in-memory fake).
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
