//! `vigil watch` (root, eBPF): the executable flags of exec events, read in the kernel.
//! `proc.is_exe_upper_layer` is true for a program written into an overlayfs upper layer and
//! false for one of its lower layers (what Falco's "Drop and execute new binary in container"
//! tests); `proc.is_exe_writable` follows the mode bits for the executing user (root: always).
//! The overlay is mounted on the host for the test (no container needed). Not root → prints
//! `skipping …` and passes, unless `VIGIL_TEST_STRICT=1`, where it fails.
// Tests print why they skip.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::live::*;
use crate::support::{host, strict};

/// An overlay mount (lower, upper, work, merged) removed on drop.
struct Overlay {
    root: PathBuf,
    merged: PathBuf,
}

impl Overlay {
    fn mount(root: PathBuf) -> Result<Overlay, String> {
        let merged = root.join("merged");
        for d in ["lower", "upper", "work", "merged"] {
            fs::create_dir_all(root.join(d)).map_err(|e| format!("mkdir {d}: {e}"))?;
        }
        // A program in the lower layer (the "image").
        fs::copy("/bin/true", root.join("lower/probe-lower")).map_err(|e| e.to_string())?;
        fs::set_permissions(
            root.join("lower/probe-lower"),
            fs::Permissions::from_mode(0o755),
        )
        .map_err(|e| e.to_string())?;
        let opts = format!(
            "lowerdir={},upperdir={},workdir={}",
            root.join("lower").display(),
            root.join("upper").display(),
            root.join("work").display()
        );
        let out = Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o", &opts])
            .arg(&merged)
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t overlay: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(Overlay { root, merged })
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.merged).status();
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn run_as(user: Option<&str>, program: &Path) {
    let status = match user {
        None => Command::new(program).status(),
        Some(u) => Command::new("setpriv")
            .args([
                &format!("--reuid={u}"),
                &format!("--regid={u}"),
                "--clear-groups",
            ])
            .arg(program)
            .status(),
    }
    .unwrap_or_else(|e| panic!("run {}: {e}", program.display()));
    assert!(status.success(), "{} failed", program.display());
}

#[test]
fn exec_events_carry_upper_layer_and_writable_flags() {
    let _host = host::alone(module_path!());
    if skip_or_fail("exec_events_carry_upper_layer_and_writable_flags") {
        return;
    }
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let root = std::env::temp_dir().join(format!("vigil-exe-flags-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    let overlay = match Overlay::mount(root.clone()) {
        Ok(o) => o,
        Err(e) => {
            assert!(!strict(), "overlayfs is needed here: {e}");
            eprintln!("skipping exec_events_carry_upper_layer_and_writable_flags: {e}");
            return;
        }
    };
    let rules = root.join("flags.yaml");
    fs::write(
        &rules,
        format!(
            "- rule: Exe flags probe\n  desc: t\n  condition: evt.type in (execve, execveat) \
             and proc.exepath startswith {}/\n  output: \"probe exe=%proc.exepath \
             upper=%proc.is_exe_upper_layer writable=%proc.is_exe_writable user=%user.uid\"\n  \
             priority: NOTICE\n",
            overlay.merged.display()
        ),
    )
    .unwrap();
    let watch = Watch::start(&[rules]);
    let lower = overlay.merged.join("probe-lower");
    // Written through the mount: it lands in the upper layer.
    let upper = overlay.merged.join("probe-upper");
    fs::copy("/bin/true", &upper).unwrap();
    fs::set_permissions(&upper, fs::Permissions::from_mode(0o755)).unwrap();

    let from = watch.cursor();
    run_as(None, &lower);
    run_as(None, &upper);
    run_as(Some("65534"), &lower);
    let expect = |path: &Path, uid: &str, upper: &str, writable: &str| {
        let path = path.display().to_string();
        let hit = watch.wait_for(from, |a| {
            output_field(a, "proc.exepath").as_deref() == Some(path.as_str())
                && output_field(a, "user.uid").as_deref() == Some(uid)
        });
        let alert = hit.unwrap_or_else(|| {
            panic!(
                "no alert for {path} as uid {uid}: {:?}\nstderr: {}",
                watch.alerts_of(from, "Exe flags probe"),
                watch.stderr()
            )
        });
        assert_eq!(
            output_field(&alert, "proc.is_exe_upper_layer").as_deref(),
            Some(upper),
            "{path}: {alert}"
        );
        assert_eq!(
            output_field(&alert, "proc.is_exe_writable").as_deref(),
            Some(writable),
            "{path} as uid {uid}: {alert}"
        );
    };
    expect(&lower, "0", "false", "true");
    expect(&upper, "0", "true", "true");
    // Owned by root, mode 0755: not writable by nobody.
    expect(&lower, "65534", "false", "false");
    drop(watch);
}
