//! Real container runtimes started by the test (root, eBPF, Debian's `docker.io`; strict in
//! CI): `vigil watch` runs with a rule that reports every exec and open in a container with
//! its metadata, while the test starts `dockerd` itself, imports an image made from
//! busybox-static (no registry needed) and runs named, labelled containers with a bind mount.
//! Each alert's `container.*` fields must equal what `docker inspect` reports, from the
//! container's first exec on (no alert of the container without its name).
//!
//! Phases, one agent throughout: dockerd with its default data and exec roots
//! (`/var/lib/docker`, `/var/run/docker`), then stopped and started again with a non-default
//! `--data-root`/`--exec-root` (the agent finds them on the daemon's command line), then
//! restarted with the defaults (containers started after a runtime restart get full
//! metadata without restarting the agent).
//!
//! Not covered here: `container.privileged = true` (runc cannot start a `--privileged`
//! container on VMs whose bounding set lacks CAP_SYS_RESOURCE; docker's `hostconfig.json`
//! flag is unit-tested in vigil-state) and image digests (an imported image has no
//! `RepoDigests`, so the field must be `<NA>`, as `docker inspect` has none).

// Tests report skips and progress on stderr.
#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[path = "support/live.rs"]
mod live;
use live::{missing_requirement, strict, Watch, LIVE};

const RULE: &str = "vigil test container activity";
const IMAGE: &str = "vigiltest/bb:1.0";
/// How long dockerd may take to answer after it started.
const DAEMON_WAIT: Duration = Duration::from_secs(60);

/// The rule: every exec and open in a container, with the container's fields.
const RULES: &str = r#"
- rule: vigil test container activity
  desc: every exec and open in a container, with the container's metadata
  condition: >
    evt.type in (execve, execveat, open, openat, openat2) and container.id != host
  output: >
    container activity (%container.id %container.name %container.type %container.image
    %container.image.repository %container.image.tag %container.image.digest
    %container.privileged %container.mounts %container.start_ts %container.label[team]
    %container.label[tier] %proc.cmdline %evt.type %fd.name)
  priority: NOTICE
"#;

fn scratch(tag: &str) -> PathBuf {
    let dir = PathBuf::from(format!("/var/tmp/vigil-rt-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// Why the docker test cannot run here, if it cannot.
fn docker_requirement() -> Option<String> {
    if let Some(why) = missing_requirement() {
        return Some(why);
    }
    for tool in ["dockerd", "docker", "busybox", "tar"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!(
                "`{tool}` is not installed (`make runtime-deps` installs docker.io and busybox-static)"
            ));
        }
    }
    // A daemon this test did not start owns the default locations: it must not be touched.
    if Path::new("/var/run/docker.sock").exists()
        && Command::new("docker")
            .args(["-H", "unix:///var/run/docker.sock", "version"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    {
        return Some("a docker daemon this test did not start is running".into());
    }
    None
}

/// A `dockerd` the test started (networking off), stopped when dropped.
struct Dockerd {
    child: Option<Child>,
    host: String,
    /// Non-default roots: the scratch directory holding them (removed after the stop).
    scratch: Option<PathBuf>,
    log: PathBuf,
}

impl Dockerd {
    /// Starts dockerd with the default roots (`scratch: None`) or with its data root, exec
    /// root, socket and pid file in `scratch`.
    fn start(scratch: Option<PathBuf>, log: PathBuf) -> Dockerd {
        let mut cmd = Command::new("dockerd");
        cmd.args(["--bridge=none", "--iptables=false", "--ip-masq=false"]);
        let host = match &scratch {
            Some(dir) => {
                let sock = format!("unix://{}/docker.sock", dir.display());
                cmd.arg("--data-root")
                    .arg(dir.join("data"))
                    .arg("--exec-root")
                    .arg(dir.join("exec"))
                    .arg("--pidfile")
                    .arg(dir.join("docker.pid"))
                    .args(["-H", &sock]);
                sock
            }
            None => "unix:///var/run/docker.sock".to_string(),
        };
        let out = std::fs::File::create(&log).expect("dockerd log");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log fd"))
            .stderr(out)
            .spawn()
            .expect("dockerd starts");
        let daemon = Dockerd {
            child: Some(child),
            host,
            scratch,
            log,
        };
        let deadline = Instant::now() + DAEMON_WAIT;
        while daemon.docker(&["version"]).is_err() {
            if Instant::now() > deadline {
                panic!(
                    "dockerd did not answer within {DAEMON_WAIT:?}; its log:\n{}",
                    std::fs::read_to_string(&daemon.log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        daemon
    }

    /// Runs `docker -H <this daemon> ARGS`; its stdout, or why it failed.
    fn docker(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new("docker")
            .args(["-H", &self.host])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run docker: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(format!(
                "docker {args:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Imports the test image from `rootfs` (a directory).
    fn import(&self, rootfs: &Path) {
        let mut tar = Command::new("tar")
            .arg("-C")
            .arg(rootfs)
            .args(["-c", "."])
            .stdout(Stdio::piped())
            .spawn()
            .expect("tar starts");
        let out = Command::new("docker")
            .args([
                "-H",
                &self.host,
                "import",
                "-c",
                "LABEL tier=web",
                "-",
                IMAGE,
            ])
            .stdin(tar.stdout.take().expect("piped"))
            .output()
            .expect("docker import runs");
        assert!(tar.wait().expect("tar").success(), "tar of {rootfs:?}");
        assert!(
            out.status.success(),
            "docker import: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Removes every container, stops the daemon (SIGTERM; it stops its containerd), then
    /// unmounts and removes the non-default roots.
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(ids) = self.docker(&["ps", "-aq"]) {
            let ids: Vec<&str> = ids.split_whitespace().collect();
            if !ids.is_empty() {
                let mut args = vec!["rm", "-f"];
                args.extend(ids);
                let _ = self.docker(&args);
            }
        }
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
            }
        }
        if let Some(dir) = self.scratch.take() {
            unmount_below(&dir);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Unmounts whatever a stopped daemon left mounted below `dir` (deepest first).
fn unmount_below(dir: &Path) {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let prefix = dir.to_string_lossy().into_owned();
    let mut points: Vec<&str> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| p.starts_with(&prefix))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in points {
        let _ = Command::new("umount").arg("-l").arg(p).status();
    }
}

/// A root filesystem of busybox-static: `/bin/busybox`, applet links, `/etc/passwd` and
/// `/etc/shadow`.
fn busybox_rootfs(dir: &Path) -> PathBuf {
    let root = dir.join("bb");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::create_dir_all(root.join("etc")).unwrap();
    let busybox = Command::new("sh")
        .args(["-c", "command -v busybox"])
        .output()
        .expect("sh");
    let busybox = String::from_utf8_lossy(&busybox.stdout).trim().to_string();
    std::fs::copy(&busybox, root.join("bin/busybox")).expect("copy busybox");
    for applet in ["sh", "cat", "ls", "true", "sleep"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
    }
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    std::fs::write(root.join("etc/shadow"), "root:*:1::::::\n").unwrap();
    root
}

/// `docker inspect`'s `Created` (RFC 3339 with nanoseconds) in ns since the epoch.
fn epoch_ns(rfc3339: &str) -> String {
    let out = Command::new("date")
        .args(["-u", "-d", rfc3339, "+%s%N"])
        .output()
        .expect("date runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// What `vigil watch` must report for a container, from `docker inspect`.
fn expected_from_inspect(daemon: &Dockerd, id: &str) -> Vec<(&'static str, Value)> {
    let inspect: Value = serde_json::from_str(&daemon.docker(&["inspect", id]).unwrap()).unwrap();
    let c = &inspect[0];
    let image = c["Config"]["Image"].as_str().unwrap().to_string();
    let (repo, tag) = image.rsplit_once(':').unwrap();
    let image_inspect: Value = serde_json::from_str(
        &daemon
            .docker(&["image", "inspect", c["Image"].as_str().unwrap()])
            .unwrap(),
    )
    .unwrap();
    // Falco's digest: the image's repository digest, none for an image never pulled/pushed.
    let digest = image_inspect[0]["RepoDigests"]
        .as_array()
        .and_then(|d| d.first())
        .and_then(Value::as_str)
        .and_then(|d| d.split_once('@'))
        .map_or(Value::Null, |(_, d)| Value::from(d));
    let mut mounts: Vec<String> = c["Mounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}:{}:{}:{}:{}",
                m["Source"].as_str().unwrap(),
                m["Destination"].as_str().unwrap(),
                m["Mode"].as_str().unwrap(),
                m["RW"].as_bool().unwrap(),
                m["Propagation"].as_str().unwrap()
            )
        })
        .collect();
    mounts.sort();
    let labels = &c["Config"]["Labels"];
    vec![
        (
            "container.id",
            Value::from(&c["Id"].as_str().unwrap()[..12]),
        ),
        (
            "container.name",
            Value::from(c["Name"].as_str().unwrap().trim_start_matches('/')),
        ),
        ("container.type", Value::from("docker")),
        ("container.image", Value::from(image.as_str())),
        ("container.image.repository", Value::from(repo)),
        ("container.image.tag", Value::from(tag)),
        ("container.image.digest", digest),
        (
            "container.privileged",
            c["HostConfig"]["Privileged"].clone(),
        ),
        ("container.mounts", Value::from(mounts.join(" "))),
        (
            "container.start_ts",
            Value::from(
                epoch_ns(c["Created"].as_str().unwrap())
                    .parse::<u64>()
                    .unwrap(),
            ),
        ),
        ("container.label[team]", labels["team"].clone()),
        ("container.label[tier]", labels["tier"].clone()),
    ]
}

/// Runs one named container and checks every alert it caused; failures are pushed.
fn check_container(
    watch: &Watch,
    daemon: &Dockerd,
    name: &str,
    share: &Path,
    failures: &mut Vec<String>,
) {
    let from = watch.cursor();
    let bind = format!("{}:/data:ro", share.display());
    let id = match daemon.docker(&[
        "run",
        "-d",
        "--name",
        name,
        "--network",
        "none",
        "-l",
        "team=blue",
        "-v",
        &bind,
        IMAGE,
        "sh",
        "-c",
        "cat /etc/shadow; cat /data/marker",
    ]) {
        Ok(id) => id,
        Err(e) => {
            failures.push(format!("{name}: {e}"));
            return;
        }
    };
    let _ = daemon.docker(&["wait", &id]);
    let short = &id[..12.min(id.len())];
    // The container's last action: once its alert is in, the others are too.
    let last = watch.wait_for(from, |a| {
        a["output_fields"]["container.id"] == short
            && a["output_fields"]["fd.name"] == "/data/marker"
    });
    let alerts: Vec<Value> = watch
        .since(from)
        .into_iter()
        .filter(|a| a["rule"] == RULE && a["output_fields"]["container.id"] == short)
        .collect();
    if last.is_none() {
        failures.push(format!(
            "{name} ({short}): no alert for its open of /data/marker; its alerts: {:?}",
            alerts
                .iter()
                .map(|a| &a["output_fields"])
                .collect::<Vec<_>>()
        ));
        return;
    }
    let expected = expected_from_inspect(daemon, &id);
    let _ = daemon.docker(&["rm", "-f", &id]);
    // The entrypoint's exec is the container's first event: every alert, from that one on,
    // carries the whole metadata.
    if alerts.first().map(|a| &a["output_fields"]["evt.type"]) != Some(&Value::from("execve")) {
        failures.push(format!(
            "{name}: the first alert is not the entrypoint's exec: {:?}",
            alerts.first()
        ));
    }
    let mut unnamed = 0;
    for alert in &alerts {
        let fields = &alert["output_fields"];
        if fields["container.name"] != name {
            unnamed += 1;
        }
        for (field, want) in &expected {
            if &fields[*field] != want {
                failures.push(format!(
                    "{name}: {field} = {} but docker inspect says {want} ({} of `{}`)",
                    fields[*field], fields["evt.type"], fields["proc.cmdline"]
                ));
            }
        }
    }
    eprintln!(
        "{name} ({short}): {} alerts, {unnamed} without the container's name",
        alerts.len()
    );
}

#[test]
fn docker_fields_match_docker_inspect_across_daemon_restarts_and_roots() {
    if let Some(reason) = docker_requirement() {
        if strict() {
            panic!("docker test: VIGIL_TEST_STRICT=1 but {reason}");
        }
        eprintln!("skipping docker_fields_match_docker_inspect_across_daemon_restarts_and_roots: {reason}");
        return;
    }
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("docker");
    let rootfs = busybox_rootfs(&dir);
    let share = dir.join("share");
    std::fs::create_dir_all(&share).unwrap();
    std::fs::write(share.join("marker"), "here\n").unwrap();
    let rules = dir.join("rules.yaml");
    std::fs::write(&rules, RULES).unwrap();
    let watch = Watch::start_with_args(&["-r".into(), rules.clone().into_os_string()]);
    let mut failures = Vec::new();
    let phases: [(&str, Option<PathBuf>); 3] = [
        ("default", None),
        (
            "dataroot",
            Some(PathBuf::from(format!("/var/tmp/vdk{}", std::process::id()))),
        ),
        ("restarted", None),
    ];
    for (phase, roots) in phases {
        if let Some(r) = &roots {
            let _ = std::fs::remove_dir_all(r);
            std::fs::create_dir_all(r).unwrap();
        }
        let mut daemon = Dockerd::start(roots, dir.join(format!("dockerd-{phase}.log")));
        daemon.import(&rootfs);
        for n in 0..2 {
            check_container(
                &watch,
                &daemon,
                &format!("vt-{phase}-{n}"),
                &share,
                &mut failures,
            );
        }
        daemon.stop();
    }
    let stderr = watch.stderr();
    watch.stop();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        failures.is_empty(),
        "{}\nvigil watch stderr:\n{stderr}",
        failures.join("\n")
    );
}
