//! Container identity from a cgroup path: the id comes from the path alone, as Falco's drivers
//! find it in the kernel.

/// Length of Falco's short container id.
pub const SHORT_ID_LEN: usize = 12;

/// Extracts the container id from a cgroup description, truncated to 12 characters.
///
/// `cgroup` may be one path (`/docker/<id>`), `/proc/PID/cgroup` content
/// (`0::/system.slice/docker-<id>.scope`), or Falco's `subsys=path` list separated by NULs or
/// newlines. Recognised, anywhere in a path:
/// - a component of 64 hex digits (`/docker/<id>`, `/kubepods/…/pod<uid>/<id>`, `/ecs/…/<id>`);
/// - systemd scopes `docker-<id>.scope`, `cri-containerd-<id>.scope`, `crio-<id>.scope`,
///   `libpod-<id>.scope` (the runtime's `*-conmon-*` helper scopes are not containers);
/// - the systemd-cgroup-driver form `…slice:cri-containerd:<id>` / `…:crio:<id>`;
/// - LXC names (`/lxc/<name>`, `/lxc.payload.<name>`) and runc's `/runc/<name>` (plain
///   names, kept whole up to 12 characters).
///
/// Returns `None` for host processes (no container pattern).
pub fn container_id_from_cgroup(cgroup: &[u8]) -> Option<&[u8]> {
    for line in cgroup.split(|&b| b == b'\n' || b == 0) {
        // `/proc/PID/cgroup` lines are `hier:controllers:path`; Falco's form is `subsys=path`.
        let path = match memchr::memchr(b'/', line) {
            Some(i) => &line[i..],
            None => continue,
        };
        let mut previous: &[u8] = b"";
        for comp in path.split(|&b| b == b'/') {
            if let Some(id) = id_from_component(comp, previous) {
                return Some(&id[..id.len().min(SHORT_ID_LEN)]);
            }
            previous = comp;
        }
    }
    None
}

fn is_hex64(s: &[u8]) -> bool {
    s.len() == 64 && s.iter().all(u8::is_ascii_hexdigit)
}

fn id_from_component<'c>(comp: &'c [u8], previous: &[u8]) -> Option<&'c [u8]> {
    if comp.is_empty() {
        return None;
    }
    if is_hex64(comp) {
        return Some(comp);
    }
    // `kubepods-besteffort-pod<uid>.slice:cri-containerd:<id>`
    if let Some(i) = memchr::memrchr(b':', comp) {
        let tail = &comp[i + 1..];
        if is_hex64(tail) {
            return Some(tail);
        }
    }
    if let Some(stem) = comp.strip_suffix(b".scope") {
        for prefix in [&b"docker-"[..], b"cri-containerd-", b"crio-", b"libpod-"] {
            if let Some(id) = stem.strip_prefix(prefix) {
                if is_hex64(id) {
                    return Some(id);
                }
            }
        }
    }
    // podman with the cgroupfs manager: `/libpod_parent/libpod-<id>` (its conmon runs in
    // `libpod-conmon-<id>`, which is not the container and does not match).
    if let Some(id) = comp.strip_prefix(b"libpod-") {
        if is_hex64(id) {
            return Some(id);
        }
    }
    if let Some(name) = comp.strip_prefix(b"lxc.payload.") {
        return (!name.is_empty()).then_some(name);
    }
    if previous == b"lxc" || previous == b"runc" {
        return Some(comp);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3ad7b26ded6d8e7b23da7d48fe889434573036c27ae5a74837233de441c3601e";

    #[test]
    fn container_ids_from_cgroup_paths() {
        let cases: Vec<(String, Option<&str>)> = vec![
            (format!("/docker/{ID}"), Some("3ad7b26ded6d")),
            (format!("0::/system.slice/docker-{ID}.scope"), Some("3ad7b26ded6d")),
            (format!("0::/system.slice/cri-containerd-{ID}.scope"), Some("3ad7b26ded6d")),
            (
                format!("/kubepods/besteffort/pod0c9b4a3e-1111-2222-3333-444455556666/{ID}"),
                Some("3ad7b26ded6d"),
            ),
            (
                format!("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/crio-{ID}.scope"),
                Some("3ad7b26ded6d"),
            ),
            (
                format!("/kubepods.slice/kubepods-pod1.slice:cri-containerd:{ID}"),
                Some("3ad7b26ded6d"),
            ),
            (format!("0::/machine.slice/libpod-{ID}.scope/container"), Some("3ad7b26ded6d")),
            (format!("0::/machine.slice/libpod-conmon-{ID}.scope"), None),
            (format!("8:pids:/libpod_parent/libpod-{ID}"), Some("3ad7b26ded6d")),
            ("8:pids:/libpod_parent/conmon".into(), None),
            (format!("cpuset=/\0cpu=/docker/{ID}\0"), Some("3ad7b26ded6d")),
            ("12:pids:/user.slice/user-1000.slice/session-3.scope\n0::/init.scope".into(), None),
            ("0::/lxc.payload.web1".into(), Some("web1")),
            ("/lxc/averyveryverylongname".into(), Some("averyveryver")),
            ("/runc/mybox".into(), Some("mybox")),
            ("0::/".into(), None),
            ("".into(), None),
            (format!("/docker/{}", &ID[..63]), None),
            ("/docker/zz7b26ded6d8e7b23da7d48fe889434573036c27ae5a74837233de441c3601e".into(), None),
        ];
        for (cgroup, want) in cases {
            let got = container_id_from_cgroup(cgroup.as_bytes());
            assert_eq!(got, want.map(str::as_bytes), "cgroup {cgroup:?}");
        }
        let garbage: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let _ = container_id_from_cgroup(&garbage);
    }
}
