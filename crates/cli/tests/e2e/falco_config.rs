//! The falco.yaml files Falco ships (0.41.0 and 0.44.1, read from `../shared/falco-config/`,
//! never copied) drive `vigil run` and `vigil watch` unchanged: only the web server's port is
//! moved off 8765 so tests running side by side do not contend for it. `vigil run` needs no
//! root (the alert needs it, to read `/etc/shadow`); `vigil watch` needs root and eBPF. Each
//! skips with a printed reason, and fails under `VIGIL_TEST_STRICT=1`.
// Tests print why they skip.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::support::{free_port, host, is_root, skip, VIGIL};

fn shared(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared")
        .join(path)
}

const VERSIONS: [&str; 2] = ["0.41.0", "0.44.1"];

#[test]
fn vigil_run_takes_falco_shipped_configuration() {
    let _host = host::alone(module_path!());
    const TEST: &str = "vigil_run_takes_falco_shipped_configuration";
    if !is_root() {
        return skip(TEST, "not root (the alert reads /etc/shadow)");
    }
    let rules = shared("falco-rules/falco_rules.yaml");
    for version in VERSIONS {
        let config = shared(&format!("falco-config/falco-{version}.yaml"));
        let out = Command::new(VIGIL)
            .args(["run", "-c"])
            .arg(&config)
            .arg("-r")
            .arg(&rules)
            .args(["-o", &format!("webserver.listen_port={}", free_port())])
            .args(["--", "cat", "/etc/shadow"])
            .stdin(Stdio::null())
            .output()
            .expect("vigil run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "falco {version}: {stderr}");
        // Falco's file: stdout_output on (stderr under `vigil run`), text alerts.
        assert!(
            stderr.lines().any(|l| l
                .contains(": Warning Sensitive file opened for reading by non-trusted program")),
            "falco {version}: {stderr}"
        );
        assert!(
            !stderr.lines().any(|l| l.starts_with("vigil: error")),
            "falco {version}: {stderr}"
        );
        assert!(
            stderr.contains("webserver listening on http://"),
            "falco {version}: the file enables the web server: {stderr}"
        );
    }
}

#[test]
fn vigil_watch_takes_falco_shipped_configuration() {
    let _host = host::alone(module_path!());
    const TEST: &str = "vigil_watch_takes_falco_shipped_configuration";
    if !is_root() {
        return skip(TEST, "not root (eBPF)");
    }
    let rules = shared("falco-rules/falco_rules.yaml");
    for version in VERSIONS {
        let config = shared(&format!("falco-config/falco-{version}.yaml"));
        let out = Command::new(VIGIL)
            .args(["watch", "--duration", "1", "-c"])
            .arg(&config)
            .arg("-r")
            .arg(&rules)
            .args(["-o", &format!("webserver.listen_port={}", free_port())])
            .stdin(Stdio::null())
            .output()
            .expect("vigil watch");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "falco {version}: {stderr}");
        assert!(
            stderr.contains("vigil: watching "),
            "falco {version}: {stderr}"
        );
        assert!(
            stderr.contains("webserver listening on http://"),
            "falco {version}: {stderr}"
        );
    }
}
