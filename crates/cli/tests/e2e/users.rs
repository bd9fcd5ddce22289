//! Users and groups followed live (root; eBPF for `vigil watch`, ptrace for `vigil run`, runc
//! for the container case; strict in CI): a system user created after the agent started is
//! named in the alerts of its first process, and a process in a container is named from the
//! container's own `/etc/passwd`, never the host's.
//!
//! Each test creates what it needs under a unique name and removes it afterwards, on failure
//! too (guards): the user with `userdel`, the files, the container with `runc delete`.

// Tests report skips on stderr.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use vigil_generator::runc::{self, ContainerSpec};
use vigil_generator::Context;

use crate::support::live::{skip_or_fail, Watch, LIVE};
use crate::support::{host, is_root, skip, text, VIGIL};

/// A name and paths no other run uses.
fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{:x}{:05x}", std::process::id() & 0xffff, nanos & 0xfffff)
}

/// Removes a file or directory when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
        let _ = fs::remove_file(&self.0);
    }
}

/// A system user created with `useradd` and removed (with its group) when dropped.
struct TempUser {
    name: String,
    uid: u32,
    gid: u32,
}

impl TempUser {
    /// Creates the user (its own group, no home); `None` when `useradd` is missing.
    fn add(name: &str) -> Option<TempUser> {
        let out = Command::new("useradd")
            .args(["--system", "--user-group", "--no-create-home"])
            .args(["--shell", "/usr/sbin/nologin", name])
            .output();
        let out = match out {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => panic!("useradd {name}: {e}"),
        };
        // From here on the user may exist: the guard removes it whatever happens next.
        let mut user = TempUser {
            name: name.to_owned(),
            uid: 0,
            gid: 0,
        };
        assert!(
            out.status.success(),
            "useradd {name}: {}",
            text(&out.stderr)
        );
        user.uid = id_of(name, "-u");
        user.gid = id_of(name, "-g");
        Some(user)
    }
}

impl Drop for TempUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).output();
        // `userdel` removes the user's own group; make sure of it.
        let _ = Command::new("groupdel").arg(&self.name).output();
    }
}

fn id_of(name: &str, flag: &str) -> u32 {
    let out = Command::new("id")
        .args([flag, name])
        .output()
        .expect("run id");
    assert!(
        out.status.success(),
        "id {flag} {name}: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("id {flag} {name}: {e}"))
}

/// Whether `name` is a user of this host's database.
fn host_has_user(name: &str) -> bool {
    fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(':').next() == Some(name))
}

/// The name the host's database gives `uid`, if any.
fn host_name_of(uid: u32) -> Option<String> {
    fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .find(|l| l.split(':').nth(2) == Some(&uid.to_string()))
        .and_then(|l| l.split(':').next().map(str::to_owned))
}

/// A rules file with one rule that fires when `path` is opened and names the user.
fn open_rule(dir: &Path, rule: &str, path: &str) -> PathBuf {
    let rules = dir.join("users_rules.yaml");
    fs::write(
        &rules,
        format!(
            "- rule: {rule}\n  desc: test rule\n  condition: evt.type in (open, openat, openat2) \
             and fd.name = {path}\n  output: \"opened by %user.name (uid %user.uid, group \
             %group.name, home %user.homedir, container %container.id)\"\n  priority: WARNING\n"
        ),
    )
    .expect("write the rules file");
    rules
}

/// A world-readable file with some content.
fn readable_file(path: &Path) {
    fs::write(path, "vigil\n").expect("write the marker file");
    fs::set_permissions(path, fs::Permissions::from_mode(0o644)).expect("chmod the marker file");
}

fn field<'a>(alert: &'a Value, name: &str) -> Option<&'a Value> {
    alert.get("output_fields").and_then(|f| f.get(name))
}

fn field_text(alert: &Value, name: &str) -> String {
    match field(alert, name) {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "<missing>".into(),
    }
}

/// `cat PATH` as the user (real, effective and saved ids, no supplementary groups).
fn cat_as(user: &TempUser, path: &Path) -> Vec<String> {
    vec![
        "setpriv".into(),
        format!("--reuid={}", user.uid),
        format!("--regid={}", user.gid),
        "--clear-groups".into(),
        "cat".into(),
        path.display().to_string(),
    ]
}

fn run(argv: &[String]) -> Output {
    Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {argv:?}: {e}"))
}

#[test]
fn watch_names_a_user_created_after_it_started() {
    let _host = host::alone(module_path!());
    let test = "watch_names_a_user_created_after_it_started";
    if skip_or_fail(test) {
        return;
    }
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let tag = unique();
    let dir = Scratch(std::env::temp_dir().join(format!("vigil-users-{tag}")));
    fs::create_dir_all(&dir.0).expect("create the scratch directory");
    fs::set_permissions(&dir.0, fs::Permissions::from_mode(0o755)).expect("chmod scratch");
    let marker = dir.0.join("marker");
    readable_file(&marker);
    let rule = format!("vigil users test {tag}");
    let rules = open_rule(&dir.0, &rule, &marker.display().to_string());

    let name = format!("vgu{tag}");
    assert!(!host_has_user(&name), "{name} exists already");
    let watch = Watch::start(&[rules]);
    let from = watch.cursor();
    // The agent is running: only now does the user come to exist.
    let Some(user) = TempUser::add(&name) else {
        return skip(test, "useradd is not installed");
    };
    let out = run(&cat_as(&user, &marker));
    assert!(out.status.success(), "cat as {name}: {}", text(&out.stderr));

    let uid = user.uid.to_string();
    let alert = watch
        .wait_for(from, |a| a["rule"] == rule.as_str())
        .unwrap_or_else(|| {
            panic!(
                "no alert for the open as {name}; stderr:\n{}",
                watch.stderr()
            )
        });
    assert_eq!(field_text(&alert, "user.uid"), uid, "{alert}");
    assert_eq!(
        field_text(&alert, "user.name"),
        name,
        "the user created after start is named: {alert}"
    );
    assert_eq!(field_text(&alert, "group.name"), name, "{alert}");
}

#[test]
fn run_names_a_user_created_after_it_started() {
    let _host = host::alone(module_path!());
    let test = "run_names_a_user_created_after_it_started";
    if !is_root() {
        return skip(test, "not root (useradd and setpriv need root)");
    }
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let tag = unique();
    let dir = Scratch(std::env::temp_dir().join(format!("vigil-users-{tag}")));
    fs::create_dir_all(&dir.0).expect("create the scratch directory");
    fs::set_permissions(&dir.0, fs::Permissions::from_mode(0o755)).expect("chmod scratch");
    let marker = dir.0.join("marker");
    readable_file(&marker);
    let rule = format!("vigil users run test {tag}");
    let rules = open_rule(&dir.0, &rule, &marker.display().to_string());
    let alerts = dir.0.join("alerts.json");

    let name = format!("vgr{tag}");
    assert!(!host_has_user(&name), "{name} exists already");
    // The guard exists before the workload creates the user, so it is removed even if the
    // run fails half-way.
    let guard = TempUser {
        name: name.clone(),
        uid: 0,
        gid: 0,
    };
    // The traced workload creates the user (after `vigil run` read the user database at
    // start), then reads the file as that user.
    let script = format!(
        "useradd --system --user-group --no-create-home --shell /usr/sbin/nologin {name} && \
         exec setpriv --reuid=\"$(id -u {name})\" --regid=\"$(id -g {name})\" --clear-groups \
         cat {}",
        marker.display()
    );
    let out = Command::new(VIGIL)
        .arg("run")
        .arg("-r")
        .arg(&rules)
        .arg("--json")
        .arg("--alerts")
        .arg(&alerts)
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .expect("run vigil run");
    if !out.status.success() && text(&out.stderr).contains("cannot trace") {
        return skip(
            test,
            &format!("vigil run cannot trace: {}", text(&out.stderr)),
        );
    }
    assert!(
        out.status.success(),
        "vigil run: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let uid = id_of(&name, "-u");
    let lines = fs::read_to_string(&alerts).unwrap_or_default();
    let alert: Value = lines
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|a| a["rule"] == rule.as_str())
        .unwrap_or_else(|| panic!("no alert for the open as {name}: {lines}"));
    assert_eq!(field_text(&alert, "user.uid"), uid.to_string(), "{alert}");
    assert_eq!(field_text(&alert, "user.name"), name, "{alert}");
    assert_eq!(field_text(&alert, "group.name"), name, "{alert}");
    drop(guard);
    assert!(!host_has_user(&name), "{name} was removed");
}

/// The container user: a name the host does not have, with a uid the host names otherwise.
const CONTAINER_UID: u32 = 2;

#[test]
fn watch_names_container_users_from_the_containers_passwd() {
    let _host = host::alone(module_path!());
    let test = "watch_names_container_users_from_the_containers_passwd";
    let ctx = {
        let mut ctx = Context::from_env();
        ctx.exe = PathBuf::from(VIGIL);
        ctx
    };
    if skip_or_fail(test) {
        return;
    }
    if let Some(why) = runc::unavailable(&ctx) {
        return skip(test, &why);
    }
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let tag = unique();
    let ctr_name = format!("vgc{tag}");
    assert!(!host_has_user(&ctr_name), "{ctr_name} exists on the host");
    let host_name = host_name_of(CONTAINER_UID);
    assert_ne!(host_name.as_deref(), Some(ctr_name.as_str()));

    let dir = Scratch(std::env::temp_dir().join(format!("vigil-users-{tag}")));
    fs::create_dir_all(&dir.0).expect("create the scratch directory");
    // The container's own user database: the image's, plus the new user (bind-mounted over
    // the read-only image's files inside the container only; the host's are untouched).
    let rootfs = ctx.rootfs_dir.join("rootfs");
    let passwd = fs::read_to_string(rootfs.join("etc/passwd")).expect("image passwd");
    let passwd: String = passwd
        .lines()
        .filter(|l| l.split(':').nth(2) != Some(&CONTAINER_UID.to_string()))
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        + &format!("{ctr_name}:x:{CONTAINER_UID}:{CONTAINER_UID}::/tmp:/bin/sh\n");
    let group: String = fs::read_to_string(rootfs.join("etc/group"))
        .expect("image group")
        .lines()
        .filter(|l| l.split(':').nth(2) != Some(&CONTAINER_UID.to_string()))
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        + &format!("{ctr_name}:x:{CONTAINER_UID}:\n");
    let passwd_file = dir.0.join("passwd");
    let group_file = dir.0.join("group");
    fs::write(&passwd_file, passwd).expect("write the container passwd");
    fs::write(&group_file, group).expect("write the container group");

    let inside = format!("/tmp/vigil-users-{tag}");
    let rule = format!("vigil users container test {tag}");
    let rules = open_rule(&dir.0, &rule, &inside);
    let watch = Watch::start(&[rules]);
    let from = watch.cursor();

    let id = runc::random_id().expect("random id");
    let spec = ContainerSpec {
        id: id.clone(),
        name: format!("vigil-users-{tag}"),
        args: vec![
            "/bin/sh".into(),
            "-c".into(),
            format!("echo vigil > {inside} && cat {inside}"),
        ],
        bind_exe: None,
        tty: false,
        linger: true,
    };
    let run = run_container(&ctx, &spec, &dir.0, &passwd_file, &group_file);
    assert!(
        run.status.success(),
        "container: {}{}",
        text(&run.stdout),
        text(&run.stderr)
    );
    assert_eq!(
        text(&run.stdout).trim(),
        "vigil",
        "the container ran as intended"
    );

    let alert = watch
        .wait_for(from, |a| {
            a["rule"] == rule.as_str() && field_text(a, "container.id") == id[..12]
        })
        .unwrap_or_else(|| {
            panic!(
                "no alert for the open in the container; stderr:\n{}",
                watch.stderr()
            )
        });
    assert_eq!(
        field_text(&alert, "user.uid"),
        CONTAINER_UID.to_string(),
        "{alert}"
    );
    assert_eq!(
        field_text(&alert, "user.name"),
        ctr_name,
        "named from the container's passwd (the host calls uid {CONTAINER_UID} {host_name:?}): {alert}"
    );
    assert_eq!(field_text(&alert, "group.name"), ctr_name, "{alert}");
    assert_eq!(field_text(&alert, "user.homedir"), "/tmp", "{alert}");
}

/// Removes a runc container when dropped.
struct Container<'a>(&'a Context, String);

impl Drop for Container<'_> {
    fn drop(&mut self) {
        let _ = Command::new(&self.0.runc)
            .args(["delete", "--force", &self.1])
            .output();
    }
}

/// Runs `spec` as [`CONTAINER_UID`] with `passwd` and `group` mounted over the image's.
fn run_container(
    ctx: &Context,
    spec: &ContainerSpec,
    dir: &Path,
    passwd: &Path,
    group: &Path,
) -> Output {
    let bundle = dir.join("bundle");
    fs::create_dir_all(&bundle).expect("create the bundle");
    let out = Command::new(&ctx.runc)
        .args(["spec", "--bundle"])
        .arg(&bundle)
        .output()
        .expect("run runc spec");
    assert!(out.status.success(), "runc spec: {}", text(&out.stderr));
    let config_path = bundle.join("config.json");
    let mut config: Value =
        serde_json::from_str(&fs::read_to_string(&config_path).expect("read config.json"))
            .expect("parse config.json");
    let rootfs = fs::canonicalize(ctx.rootfs_dir.join("rootfs")).expect("rootfs path");
    runc::patch_config(&mut config, spec, &rootfs).expect("patch config.json");
    config["process"]["user"] = serde_json::json!({ "uid": CONTAINER_UID, "gid": CONTAINER_UID });
    let mounts = config["mounts"].as_array_mut().expect("mounts");
    for (source, dest) in [(passwd, "/etc/passwd"), (group, "/etc/group")] {
        mounts.push(serde_json::json!({
            "destination": dest, "type": "bind", "source": source.to_string_lossy(),
            "options": ["bind", "ro"]
        }));
    }
    fs::write(&config_path, config.to_string()).expect("write config.json");
    let _container = Container(ctx, spec.id.clone());
    Command::new(&ctx.runc)
        .args(["run", "--bundle"])
        .arg(&bundle)
        .arg(&spec.id)
        .stdin(Stdio::null())
        .output()
        .expect("run runc run")
}
