//! Running a command in a short-lived `runc` container built from a local root filesystem
//! (`scripts/mk-rootfs.sh`), with the calling binary bind-mounted at `/vigil`.
//!
//! The bundle is `runc spec`'s default configuration, patched: an absolute read-only root (runc
//! needs an absolute path), no terminal, a tmpfs on `/tmp`, the host network namespace (so
//! loopback works), `CAP_NET_RAW` added, and CRI-style annotations naming the container
//! (`io.kubernetes.cri.container-name` …) so that the agent's runtime metadata reader has
//! something to report. Container ids are 64 hex digits, like docker's and containerd's.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;

use serde_json::{json, Value};

use crate::util::TempDir;
use crate::{Context, Error};

/// Annotation keys the bundle carries (the CRI names containerd writes for Kubernetes pods).
pub const ANNOTATION_NAME: &str = "io.kubernetes.cri.container-name";
pub const ANNOTATION_IMAGE: &str = "io.kubernetes.cri.image-name";
pub const ANNOTATION_POD: &str = "io.kubernetes.cri.sandbox-name";
pub const ANNOTATION_NAMESPACE: &str = "io.kubernetes.cri.sandbox-namespace";

/// The image reference the bundles announce (the root filesystem is a debootstrap bookworm).
pub const IMAGE: &str = "docker.io/library/debian:bookworm";
/// The pod and namespace names the bundles announce.
pub const POD: &str = "vigil-generator";
pub const NAMESPACE: &str = "vigil-test";

/// What to run and how to name it.
#[derive(Clone, Debug)]
pub struct ContainerSpec {
    /// 64 hex digits.
    pub id: String,
    /// The container name announced in the annotations.
    pub name: String,
    pub args: Vec<String>,
    /// Bind-mount this file read-only at `/vigil`.
    pub bind_exe: Option<PathBuf>,
    /// Run the container process on a pseudo-terminal (`terminal: true`): it is a session
    /// leader with a controlling terminal, as with `docker run -t`.
    pub tty: bool,
    /// Run the command below a shell that waits a second after it ([`LINGER_SCRIPT`]), so
    /// that the container's state stays readable while an agent catches up.
    pub linger: bool,
}

/// Runs its arguments, waits a second, exits with their status (`sh -c SCRIPT sh CMD…`).
pub const LINGER_SCRIPT: &str = "\"$@\"; s=$?; sleep 1; exit $s";

/// The outcome of a container run.
#[derive(Clone, Debug)]
pub struct ContainerRun {
    pub id: String,
    pub name: String,
    pub success: bool,
    /// stdout and stderr of the container process (and of runc).
    pub output: String,
}

/// Why containers cannot run here, if so.
pub fn unavailable(ctx: &Context) -> Option<String> {
    let rootfs = ctx.rootfs_dir.join("rootfs");
    if !rootfs.join("etc/debian_version").is_file() {
        return Some(format!(
            "no root filesystem at {} (run scripts/mk-rootfs.sh {})",
            rootfs.display(),
            ctx.rootfs_dir.display()
        ));
    }
    match Command::new(&ctx.runc)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => None,
        _ => Some(format!("`{}` does not run", ctx.runc.display())),
    }
}

/// A fresh 64-hex-digit container id (from the kernel's random source).
pub fn random_id() -> Result<String, Error> {
    let mut bytes = [0u8; 32];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Error::Container(format!("reading /dev/urandom: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Runs `args` in a new container named after `action`, optionally with the calling binary
/// mounted at `/vigil`; waits for it and deletes it.
pub fn run(
    ctx: &Context,
    action: &str,
    args: &[&str],
    bind_exe: bool,
    tty: bool,
) -> Result<ContainerRun, Error> {
    let id = random_id()?;
    let name = format!(
        "vigil-{}",
        action
            .rsplit('.')
            .next()
            .unwrap_or(action)
            .to_ascii_lowercase()
    );
    let spec = ContainerSpec {
        id,
        name,
        args: args.iter().map(|s| s.to_string()).collect(),
        bind_exe: bind_exe.then(|| ctx.exe.clone()),
        tty,
        linger: !tty,
    };
    run_spec(ctx, &spec)
}

/// Runs a container as specified; waits for it and deletes it.
pub fn run_spec(ctx: &Context, spec: &ContainerSpec) -> Result<ContainerRun, Error> {
    run_spec_with(ctx, spec, |_| {})
}

/// [`run_spec`], with `edit` applied to the patched configuration last (extra mounts, a
/// `linux.seccomp` profile, `process.noNewPrivileges`, …).
pub fn run_spec_with(
    ctx: &Context,
    spec: &ContainerSpec,
    edit: impl FnOnce(&mut Value),
) -> Result<ContainerRun, Error> {
    if let Some(why) = unavailable(ctx) {
        return Err(Error::Container(why));
    }
    let bundle = TempDir::new("container")?;
    let status = Command::new(&ctx.runc)
        .args(["spec", "--bundle"])
        .arg(bundle.path())
        .output()
        .map_err(|e| Error::Container(format!("runc spec: {e}")))?;
    if !status.status.success() {
        return Err(Error::Container(format!(
            "runc spec failed: {}",
            String::from_utf8_lossy(&status.stderr)
        )));
    }
    let config_path = bundle.join("config.json");
    let text = fs::read_to_string(&config_path)
        .map_err(|e| Error::Container(format!("reading {}: {e}", config_path.display())))?;
    let mut config: Value = serde_json::from_str(&text)
        .map_err(|e| Error::Container(format!("parsing runc's default spec: {e}")))?;
    let rootfs = fs::canonicalize(ctx.rootfs_dir.join("rootfs"))
        .map_err(|e| Error::Container(format!("{}: {e}", ctx.rootfs_dir.display())))?;
    patch_config(&mut config, spec, &rootfs)?;
    edit(&mut config);
    fs::write(&config_path, config.to_string())
        .map_err(|e| Error::Container(format!("writing {}: {e}", config_path.display())))?;

    let out = if spec.tty {
        run_on_terminal(ctx, bundle.path(), &spec.id)
    } else {
        Command::new(&ctx.runc)
            .args(["run", "--bundle"])
            .arg(bundle.path())
            .arg(&spec.id)
            .stdin(Stdio::null())
            .output()
    };
    // Whatever happened, the container must not outlive the action.
    let _ = Command::new(&ctx.runc)
        .args(["delete", "--force", &spec.id])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let out = out.map_err(|e| Error::Container(format!("runc run: {e}")))?;
    let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
    output.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok(ContainerRun {
        id: spec.id.clone(),
        name: spec.name.clone(),
        success: out.status.success(),
        output,
    })
}

/// `runc run` in the foreground with `terminal: true` allocates the container's terminal and
/// relays it to its own controlling terminal: give it one (a new session on a fresh
/// pseudo-terminal, through `setsid --ctty --wait`) and collect what the container printed.
fn run_on_terminal(ctx: &Context, bundle: &Path, id: &str) -> std::io::Result<Output> {
    let pty = nix::pty::openpty(None, None).map_err(std::io::Error::from)?;
    let slave = || pty.slave.try_clone().map(Stdio::from);
    let mut child = Command::new("setsid")
        .args(["--ctty", "--wait"])
        .arg(&ctx.runc)
        .args(["run", "--bundle"])
        .arg(bundle)
        .arg(id)
        .stdin(slave()?)
        .stdout(slave()?)
        .stderr(slave()?)
        .spawn()?;
    drop(pty.slave);
    let mut master = fs::File::from(pty.master);
    // Reads until every holder of the slave side is gone (EIO), keeping the first 64 KiB.
    let reader = thread::spawn(move || {
        let mut text = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            if text.len() < 64 * 1024 {
                text.extend_from_slice(&buf[..n]);
            }
        }
        text
    });
    let status = child.wait()?;
    let stdout = reader.join().unwrap_or_default();
    Ok(Output {
        status,
        stdout,
        stderr: Vec::new(),
    })
}

/// Applies the changes described in the module documentation to runc's default spec.
pub fn patch_config(config: &mut Value, spec: &ContainerSpec, rootfs: &Path) -> Result<(), Error> {
    let bad = |what: &str| Error::Container(format!("runc's default spec has no {what}"));
    let obj = config.as_object_mut().ok_or_else(|| bad("object"))?;
    obj.insert(
        "root".into(),
        json!({ "path": rootfs.to_string_lossy(), "readonly": true }),
    );
    let process = obj
        .get_mut("process")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| bad("process"))?;
    process.insert("terminal".into(), Value::Bool(spec.tty));
    // The container outlives its command by a second: runc removes its state when the
    // container exits, and an agent reads that state (names, image) when it sees the first
    // exec, a few milliseconds later.
    let mut args: Vec<String> = vec![
        "/bin/sh".into(),
        "-c".into(),
        LINGER_SCRIPT.into(),
        "sh".into(),
    ];
    args.extend(spec.args.iter().cloned());
    process.insert(
        "args".into(),
        json!(if spec.linger { args } else { spec.args.clone() }),
    );
    if let Some(caps) = process
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
    {
        for set in caps.values_mut() {
            if let Some(list) = set.as_array_mut() {
                list.push(json!("CAP_NET_RAW"));
            }
        }
    }
    let mounts = obj
        .get_mut("mounts")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| bad("mounts"))?;
    mounts.push(json!({
        "destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
        "options": ["nosuid", "nodev", "mode=1777", "size=65536k"]
    }));
    if let Some(exe) = &spec.bind_exe {
        mounts.push(json!({
            "destination": "/vigil", "type": "bind", "source": exe.to_string_lossy(),
            "options": ["rbind", "ro"]
        }));
    }
    let linux = obj
        .get_mut("linux")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| bad("linux section"))?;
    if let Some(ns) = linux.get_mut("namespaces").and_then(Value::as_array_mut) {
        ns.retain(|n| n.get("type").and_then(Value::as_str) != Some("network"));
    }
    obj.insert(
        "annotations".into(),
        json!({
            ANNOTATION_NAME: spec.name,
            ANNOTATION_IMAGE: IMAGE,
            ANNOTATION_POD: POD,
            ANNOTATION_NAMESPACE: NAMESPACE,
        }),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_64_hex_digits_and_fresh() {
        let a = random_id().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(a, random_id().unwrap());
    }

    #[test]
    fn patched_spec_has_absolute_root_tmpfs_host_network_and_annotations() {
        let mut config = json!({
            "process": {"terminal": true, "args": ["sh"],
                        "capabilities": {"bounding": ["CAP_KILL"], "effective": ["CAP_KILL"]}},
            "root": {"path": "rootfs", "readonly": true},
            "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
            "linux": {"namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "mount"}]}
        });
        let spec = ContainerSpec {
            id: "ab".repeat(32),
            name: "box".into(),
            args: vec!["/bin/cat".into(), "/etc/shadow".into()],
            bind_exe: Some("/usr/bin/vigil".into()),
            tty: false,
            linger: false,
        };
        patch_config(&mut config, &spec, Path::new("/var/tmp/r/rootfs")).unwrap();
        assert_eq!(config["root"]["path"], "/var/tmp/r/rootfs");
        assert_eq!(config["process"]["terminal"], false);
        assert_eq!(config["process"]["args"][1], "/etc/shadow");
        let lingering = ContainerSpec {
            linger: true,
            ..spec.clone()
        };
        let mut config2 = json!({"process": {}, "mounts": [], "linux": {}});
        patch_config(&mut config2, &lingering, Path::new("/r")).unwrap();
        assert_eq!(
            config2["process"]["args"],
            json!([
                "/bin/sh",
                "-c",
                LINGER_SCRIPT,
                "sh",
                "/bin/cat",
                "/etc/shadow"
            ])
        );
        assert_eq!(
            config["process"]["capabilities"]["bounding"][1],
            "CAP_NET_RAW"
        );
        let mounts = config["mounts"].as_array().unwrap();
        assert!(mounts.iter().any(|m| m["destination"] == "/tmp"));
        assert!(mounts
            .iter()
            .any(|m| m["destination"] == "/vigil" && m["source"] == "/usr/bin/vigil"));
        let ns = config["linux"]["namespaces"].as_array().unwrap();
        assert_eq!(ns.len(), 2);
        assert_eq!(config["annotations"][ANNOTATION_NAME], "box");
        assert!(patch_config(&mut json!([]), &spec, Path::new("/r")).is_err());
    }
}
