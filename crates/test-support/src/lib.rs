//! What the `vigil` binary's end-to-end tests (`crates/cli/tests/e2e`) and its benches
//! (`crates/cli/benches`) share: real alert receivers ([`receivers`]) and scratch
//! directories ([`scratch`]). Test code: a dev-dependency only, it panics with a message on a
//! failed set-up and knows the binary only by the path it is given.
#![forbid(unsafe_code)]

pub mod receivers;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// A new, empty directory for `name`, unique to this process and to the running test's module
/// (the test harness names each test's thread `module::test`), mode 0755 so that a workload
/// that changes to another user can read it.
pub fn scratch(name: &str) -> PathBuf {
    let thread = std::thread::current();
    let module = thread
        .name()
        .and_then(|t| t.split("::").next())
        .unwrap_or("main");
    let dir = std::env::temp_dir().join(format!("vigil-{module}-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", dir.display()));
    dir
}
