//! Identity changes under `vigil run` behave as without Vigil (root, `setpriv` and `sudo`;
//! strict in CI): started as root (with `CAP_SYS_ADMIN` and `CAP_SYS_PTRACE`), the workload
//! runs without `no_new_privs`, so setuid and setgid copies of `id` and Debian's `sudo` (a
//! rule the test writes in `/etc/sudoers.d`, removed after) print what they print natively;
//! a rule on `user.name` at the exec of a setuid program alerts with the new user; a start
//! as an unprivileged user prints the one-line warning and the workload keeps
//! `no_new_privs`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support::live::{missing_requirement, Watch, LIVE};
use crate::support::{host, is_root, skip, text, VIGIL};

const SETPRIV: &str = "/usr/bin/setpriv";
/// `setpriv` arguments that make the rest run as `nobody`.
const AS_NOBODY: &[&str] = &[SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups"];
/// The start-up warning of an unprivileged `vigil run`.
const WARNING: &str = "setuid and setgid programs and file capabilities will not gain privileges";

/// A directory (mode 0755, so `nobody` can reach its programs) removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("vigil-identity-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("scratch directory");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod scratch");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Root with the capabilities the privileged path needs, and `setpriv`; else why not.
fn requirement() -> Option<String> {
    if !is_root() {
        return Some("not root".into());
    }
    if !Path::new(SETPRIV).exists() {
        return Some(format!("{SETPRIV} is missing (util-linux)"));
    }
    None
}

/// A copy of `/usr/bin/id` named `name`, owned by `owner:group`, with `mode`.
fn id_copy(dir: &Path, name: &str, owner: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    // Copied by `cp`, not by this process: a file this process holds open for writing is
    // inherited by any child another test thread forks at that moment, and executing the copy
    // while such a child has not yet exec'd fails with ETXTBSY ("Text file busy").
    let st = Command::new("cp")
        .arg("/usr/bin/id")
        .arg(&path)
        .status()
        .expect("run cp");
    assert!(st.success(), "cp /usr/bin/id {}", path.display());
    let st = Command::new("chown")
        .arg(owner)
        .arg(&path)
        .status()
        .expect("run chown");
    assert!(st.success(), "chown {owner} {}", path.display());
    // After chown, which clears the set-id bits.
    fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod");
    path
}

fn native(argv: &[&str]) -> Output {
    Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {argv:?}: {e}"))
}

fn under_vigil(extra: &[&str], argv: &[&str]) -> Output {
    Command::new(VIGIL)
        .arg("run")
        .args(extra)
        .arg("--")
        .args(argv)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run vigil run {argv:?}: {e}"))
}

/// Runs `argv` natively and under `vigil run`: same status, same stdout.
fn assert_same(argv: &[&str]) -> String {
    let want = native(argv);
    let got = under_vigil(&[], argv);
    assert_eq!(
        got.status.code(),
        want.status.code(),
        "{argv:?}: status under vigil run; stderr: {}",
        text(&got.stderr)
    );
    assert_eq!(
        text(&got.stdout),
        text(&want.stdout),
        "{argv:?}: output under vigil run (stderr: {})",
        text(&got.stderr)
    );
    assert!(
        !text(&got.stderr).contains(WARNING),
        "a privileged start does not warn: {}",
        text(&got.stderr)
    );
    text(&want.stdout)
}

#[test]
fn setuid_and_setgid_programs_run_as_natively() {
    let _host = host::alone(module_path!());
    const TEST: &str = "setuid_and_setgid_programs_run_as_natively";
    if let Some(why) = requirement() {
        return skip(TEST, &why);
    }
    let dir = Scratch::new("setid");
    let suid = id_copy(&dir.0, "id-suid", "nobody", 0o4755);
    let sgid = id_copy(&dir.0, "id-sgid", "root:nogroup", 0o2755);
    let suid_root = id_copy(&dir.0, "id-suid-root", "root:root", 0o4755);
    let probe = native(&[suid.to_str().unwrap()]);
    if !text(&probe.stdout).contains("euid=65534") {
        return skip(
            TEST,
            &format!(
                "{} is on a nosuid filesystem (id printed {})",
                dir.0.display(),
                text(&probe.stdout)
            ),
        );
    }
    // Root becoming nobody (effective uid), root gaining group nogroup, and nobody becoming
    // root through a setuid-root program: the last needs the privilege gain no_new_privs
    // forbids.
    let out = assert_same(&[suid.to_str().unwrap()]);
    assert!(out.contains("euid=65534(nobody)"), "{out}");
    let out = assert_same(&[sgid.to_str().unwrap()]);
    assert!(out.contains("egid=65534(nogroup)"), "{out}");
    let mut argv = AS_NOBODY.to_vec();
    argv.push(suid_root.to_str().unwrap());
    let out = assert_same(&argv);
    assert!(out.contains("euid=0(root)"), "{out}");
}

/// `/etc/sudoers.d/NAME`, removed when dropped.
struct SudoersDropIn(PathBuf);

impl Drop for SudoersDropIn {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

#[test]
fn sudo_runs_as_natively() {
    let _host = host::alone(module_path!());
    const TEST: &str = "sudo_runs_as_natively";
    if let Some(why) = requirement() {
        return skip(TEST, &why);
    }
    if !Path::new("/usr/bin/sudo").exists() || !Path::new("/etc/sudoers.d").is_dir() {
        return skip(TEST, "Debian's sudo is not installed (make deps)");
    }
    // Root to nobody: no privilege to gain, but the identity switch must happen.
    let out = assert_same(&["/usr/bin/sudo", "-u", "nobody", "/usr/bin/id"]);
    assert!(out.starts_with("uid=65534(nobody)"), "{out}");
    // nobody to root: sudo refuses to run at all under no_new_privs.
    let drop_in = SudoersDropIn(PathBuf::from(format!(
        "/etc/sudoers.d/vigil-test-{}",
        std::process::id()
    )));
    fs::write(&drop_in.0, "nobody ALL=(root) NOPASSWD: /usr/bin/id\n").expect("write sudoers");
    fs::set_permissions(&drop_in.0, fs::Permissions::from_mode(0o440)).expect("chmod sudoers");
    let mut argv = AS_NOBODY.to_vec();
    argv.extend(["/usr/bin/sudo", "-n", "/usr/bin/id"]);
    let out = assert_same(&argv);
    assert!(out.starts_with("uid=0(root)"), "{out}");
}

/// A rule on the exec of `id-suid`, printing the user.
const SETUID_RULE: &str = "- rule: Setuid Program Ran\n  desc: test\n  \
     condition: evt.type in (execve, execveat) and proc.name = id-suid\n  \
     output: setuid exec user=%user.name uid=%user.uid\n  priority: WARNING\n";

#[test]
fn user_name_after_a_setuid_exec_is_the_new_user() {
    let _host = host::alone(module_path!());
    const TEST: &str = "user_name_after_a_setuid_exec_is_the_new_user";
    if let Some(why) = requirement() {
        return skip(TEST, &why);
    }
    let dir = Scratch::new("username");
    let suid = id_copy(&dir.0, "id-suid", "nobody", 0o4755);
    let rules = dir.0.join("rules.yaml");
    fs::write(&rules, SETUID_RULE).unwrap();
    if !text(&native(&[suid.to_str().unwrap()]).stdout).contains("euid=65534") {
        return skip(
            TEST,
            &format!("{} is on a nosuid filesystem", dir.0.display()),
        );
    }
    let out = under_vigil(
        &["--json", "-r", rules.to_str().unwrap()],
        &[suid.to_str().unwrap()],
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        text(&out.stdout).contains("euid=65534"),
        "the setuid bit works under vigil run: {}",
        text(&out.stdout)
    );
    let alert: serde_json::Value = err
        .lines()
        .find(|l| l.contains("Setuid Program Ran"))
        .map(|l| serde_json::from_str(l).expect("a JSON alert"))
        .unwrap_or_else(|| panic!("no alert in {err}"));
    assert_eq!(alert["output_fields"]["user.name"], "nobody", "{alert}");
    assert_eq!(alert["output_fields"]["user.uid"], 65534, "{alert}");
}

#[test]
fn unprivileged_start_warns_and_keeps_no_new_privs() {
    let _host = host::alone(module_path!());
    const TEST: &str = "unprivileged_start_warns_and_keeps_no_new_privs";
    if let Some(why) = requirement() {
        return skip(TEST, &why);
    }
    let dir = Scratch::new("unprivileged");
    let suid_root = id_copy(&dir.0, "id-suid-root", "root:root", 0o4755);
    let mut argv = AS_NOBODY.to_vec();
    argv.extend([VIGIL, "run", "--", suid_root.to_str().unwrap()]);
    let out = native(&argv);
    let err = text(&out.stderr);
    if err.contains("Permission denied") && !err.contains("vigil") {
        return skip(
            TEST,
            "the vigil binary is not executable by user 65534 here",
        );
    }
    assert!(out.status.success(), "{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains(WARNING)).collect();
    assert_eq!(warnings.len(), 1, "one warning line: {err}");
    // The documented consequence: the setuid bit has no effect.
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("uid=65534(nobody)") && !stdout.contains("euid="),
        "{stdout}"
    );
}

#[test]
fn user_name_after_a_setuid_exec_is_the_new_user_under_watch() {
    let _host = host::alone(module_path!());
    const TEST: &str = "user_name_after_a_setuid_exec_is_the_new_user_under_watch";
    if let Some(why) = requirement().or_else(missing_requirement) {
        return skip(TEST, &why);
    }
    let _live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Scratch::new("username-watch");
    let suid = id_copy(&dir.0, "id-suid", "nobody", 0o4755);
    let rules = dir.0.join("rules.yaml");
    fs::write(&rules, SETUID_RULE).unwrap();
    let watch = Watch::start(&[rules]);
    let from = watch.cursor();
    let out = native(&[suid.to_str().unwrap()]);
    if !text(&out.stdout).contains("euid=65534") {
        return skip(
            TEST,
            &format!("{} is on a nosuid filesystem", dir.0.display()),
        );
    }
    let alert = watch
        .wait_for(from, |a| a["rule"] == "Setuid Program Ran")
        .unwrap_or_else(|| panic!("no alert; vigil watch stderr:\n{}", watch.stderr()));
    assert_eq!(alert["output_fields"]["user.name"], "nobody", "{alert}");
    assert_eq!(alert["output_fields"]["user.uid"], 65534, "{alert}");
}
