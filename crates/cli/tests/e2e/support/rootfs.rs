//! The root filesystem of the runc tests: Debian minbase from `scripts/mk-rootfs.sh`, cached in
//! `$VIGIL_ROOTFS` or `/var/tmp/vigil-rootfs` and built once when missing.

use std::process::Command;
use std::sync::Mutex;

use vigil_generator::runc;
use vigil_generator::Context;

use super::{is_root, workspace};

/// Builds the root filesystem if it is missing (downloads from the Debian mirror once). One
/// build at a time: tests of several modules may ask at once.
pub fn ensure_rootfs(ctx: &Context) -> Result<(), String> {
    static BUILDING: Mutex<()> = Mutex::new(());
    let _one = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    if ctx.rootfs_dir.join("rootfs/etc/debian_version").is_file() {
        return Ok(());
    }
    let script = workspace().join("scripts/mk-rootfs.sh");
    let status = Command::new("sh")
        .arg(&script)
        .arg(&ctx.rootfs_dir)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} failed ({status})", script.display()))
    }
}

/// Why runc containers cannot run here (root, the root filesystem, runc), if they cannot.
pub fn runc_missing(ctx: &Context) -> Option<String> {
    if !is_root() {
        return Some("not root (runc containers need root)".into());
    }
    ensure_rootfs(ctx).err().or_else(|| runc::unavailable(ctx))
}
