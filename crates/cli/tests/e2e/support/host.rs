//! Who may share the host. The end-to-end tests are one binary, so tests of different modules
//! run at the same time on the harness's threads; before they were one binary per module, run
//! one after another. Most tests only see the processes they start (`vigil run` traces its own
//! child, `vigil replay` reads a file) and share the host freely. Some see the whole host:
//! `vigil watch` captures every process (a routine-activity test asserts that nothing alerts,
//! the reload tests that no event is dropped, the bench compares alert counts), and others
//! start daemons at their default locations, boot qemu guests, add users, run benches or
//! perform the generator's actions (files written below `/etc`, `/bin`, …, the same paths in
//! every module that runs them).
//! Each test of such a module takes [`alone`] with its module's name: it runs beside tests of
//! its own module, as before, and never beside any other test. Every other test takes
//! [`shared`]. A test waiting for the lock holds nothing, so no order of tests can deadlock.
//! One resource is shared across modules by tests that otherwise share the host: the web
//! server's default port, which [`default_port`] hands to one test at a time.

use std::sync::{Condvar, Mutex, MutexGuard};

/// Who holds the host: the group (`""` for [`shared`]) and how many of its tests run.
static HOLDERS: Mutex<(Option<&'static str>, usize)> = Mutex::new((None, 0));
static RELEASED: Condvar = Condvar::new();

/// The host taken by a group of tests until dropped.
pub struct Host(());

fn holders() -> MutexGuard<'static, (Option<&'static str>, usize)> {
    // A test that panics holds no guard of this mutex (only `enter`/`drop` do, briefly).
    HOLDERS.lock().unwrap_or_else(|e| e.into_inner())
}

fn enter(group: &'static str) -> Host {
    let mut held = holders();
    while held.0.is_some_and(|g| g != group) {
        held = RELEASED.wait(held).unwrap_or_else(|e| e.into_inner());
    }
    *held = (Some(group), held.1 + 1);
    Host(())
}

impl Drop for Host {
    fn drop(&mut self) {
        let mut held = holders();
        held.1 -= 1;
        if held.1 == 0 {
            held.0 = None;
            RELEASED.notify_all();
        }
    }
}

/// For a test that sees only what it starts: runs beside every other such test.
pub fn shared() -> Host {
    enter("")
}

/// For a test of `module` (its `module_path!()`) that sees or changes the whole host: runs
/// beside tests of `module` only.
pub fn alone(module: &'static str) -> Host {
    assert!(!module.is_empty(), "a module path is never empty");
    enter(module)
}

/// Held by a test whose agent serves the web server on its default address, 127.0.0.1:8765
/// (`vigil run` with a configuration file and no `webserver.listen_port`): two such agents at
/// once would fail to start, whichever modules they belong to.
pub fn default_port() -> MutexGuard<'static, ()> {
    static DEFAULT_PORT: Mutex<()> = Mutex::new(());
    DEFAULT_PORT.lock().unwrap_or_else(|e| e.into_inner())
}
