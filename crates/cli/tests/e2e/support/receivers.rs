//! The alert receivers (`vigil_test_support::receivers`, shared with the `receivers` bench)
//! and a replay of their capture through this build's `vigil`.

use std::path::Path;

pub use vigil_test_support::receivers::*;

use super::VIGIL;

/// `vigil replay CAPTURE -r RULES` with every output off except those `args` enable
/// ([`replay_command`]), run to its end; it must succeed.
pub fn replay(dir: &Path, args: &[&str]) -> std::process::Output {
    let out = replay_command(Path::new(VIGIL), dir, args)
        .output()
        .expect("run vigil replay");
    assert!(
        out.status.success(),
        "vigil replay {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
