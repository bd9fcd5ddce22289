//! Container identity from cgroup paths, and the container metadata table.
//!
//! The id comes from the cgroup path alone (as Falco's drivers do in the kernel); everything
//! else (`container.name`, `container.image`, mounts, Kubernetes pod) comes from what a runtime
//! told the capture ([`vigil_event::ContainerInfo`]).

use rustc_hash::FxHashMap;
use vigil_event::ContainerInfo;

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
    if let Some(name) = comp.strip_prefix(b"lxc.payload.") {
        return (!name.is_empty()).then_some(name);
    }
    if previous == b"lxc" || previous == b"runc" {
        return Some(comp);
    }
    None
}

/// Container metadata by short id.
#[derive(Debug, Default)]
pub(crate) struct ContainerTable {
    by_id: FxHashMap<Box<[u8]>, ContainerInfo>,
}

impl ContainerTable {
    pub(crate) fn insert(&mut self, info: ContainerInfo) {
        let id = info.id.as_bytes();
        let short: Box<[u8]> = id[..id.len().min(SHORT_ID_LEN)].into();
        self.by_id.insert(short, info);
    }

    pub(crate) fn get(&self, short_id: &[u8]) -> Option<&ContainerInfo> {
        if short_id.is_empty() {
            return None;
        }
        self.by_id.get(short_id)
    }

    pub(crate) fn len(&self) -> usize {
        self.by_id.len()
    }
}

/// The value of a runtime label.
pub(crate) fn label<'c>(info: &'c ContainerInfo, key: &str) -> Option<&'c str> {
    info.labels
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Shell-style glob over bytes: `*` any run (including `/`, as `fnmatch` without
/// `FNM_PATHNAME`), `?` one byte, everything else literal. Iterative with one backtrack point,
/// so adversarial patterns stay linear-ish.
pub(crate) fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
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

    #[test]
    fn glob_matches_like_fnmatch_without_pathname() {
        assert!(glob_match(b"/proc*", b"/proc"));
        assert!(glob_match(b"/proc*", b"/proc/sys/kernel"));
        assert!(!glob_match(b"/proc*", b"/pro"));
        assert!(glob_match(b"/etc", b"/etc"));
        assert!(!glob_match(b"/etc", b"/etc/x"));
        assert!(glob_match(b"/r?ot*", b"/root/.ssh"));
        assert!(glob_match(b"*a*b*c", b"xxaxxbxxc"));
        assert!(!glob_match(b"*a*b*c", b"xxaxxbxx"));
        let long = vec![b'a'; 5000];
        assert!(!glob_match(b"*a*a*a*a*b", &long));
    }
}
