/// Appends `raw` resolved against `base` (an absolute directory) to `out`, normalised: `.` and
/// empty components dropped, `..` pops (never above `/`). An absolute `raw` ignores `base`.
/// The result is absolute, without a trailing slash except for `/` itself.
pub fn resolve_into(base: &[u8], raw: &[u8], out: &mut Vec<u8>) {
    out.clear();
    // Fast paths: the parts are already normal (the usual case), so the result is a copy.
    if raw.first() == Some(&b'/') {
        if is_normal_absolute(raw) {
            out.extend_from_slice(raw);
            return;
        }
    } else if base.first() == Some(&b'/') && is_normal_relative(raw) {
        let base = match base {
            [rest @ .., b'/'] if !rest.is_empty() => rest,
            _ => base,
        };
        if is_normal_absolute(base) {
            out.extend_from_slice(base);
            if !raw.is_empty() {
                if base.len() > 1 {
                    out.push(b'/');
                }
                out.extend_from_slice(raw);
            }
            return;
        }
    }
    out.push(b'/');
    if raw.first() != Some(&b'/') {
        push_components(base, out);
    }
    push_components(raw, out);
}

/// Whether `path` (starting with `/`) is `/` or `/`-separated components none of which is
/// empty, `.` or `..`: what [`resolve_into`] would make of it is the path itself.
fn is_normal_absolute(path: &[u8]) -> bool {
    path == b"/" || is_normal_relative(path.get(1..).unwrap_or_default()) && path.len() > 1
}

/// Whether `path` is empty or `/`-separated components none of which is empty, `.` or `..`.
fn is_normal_relative(path: &[u8]) -> bool {
    if path.is_empty() {
        return true;
    }
    let mut start = 0;
    for end in memchr::memchr_iter(b'/', path).chain([path.len()]) {
        if !is_normal_component(&path[start..end]) {
            return false;
        }
        start = end + 1;
    }
    true
}

fn is_normal_component(comp: &[u8]) -> bool {
    !matches!(comp, b"" | b"." | b"..")
}

/// [`resolve_into`] into a new vector.
pub fn resolve(base: &[u8], raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(base.len() + raw.len() + 1);
    resolve_into(base, raw, &mut out);
    out
}

/// Normalises an absolute path (or makes a relative one absolute from `/`).
pub fn normalize(path: &[u8]) -> Vec<u8> {
    resolve(b"/", path)
}

fn push_components(path: &[u8], out: &mut Vec<u8>) {
    for comp in path.split(|&b| b == b'/') {
        match comp {
            b"" | b"." => {}
            b".." => {
                if out.len() > 1 {
                    let cut = memchr::memrchr(b'/', &out[..out.len()]).unwrap_or(0);
                    out.truncate(cut.max(1));
                }
            }
            _ => {
                if out.len() > 1 {
                    out.push(b'/');
                }
                out.extend_from_slice(comp);
            }
        }
    }
}

/// The directory part of an absolute path (`/etc/passwd` → `/etc`, `/x` → `/`).
pub fn dirname(path: &[u8]) -> &[u8] {
    match memchr::memrchr(b'/', path) {
        Some(0) => b"/",
        Some(i) => &path[..i],
        None => b"",
    }
}

/// The last component (`/etc/passwd` → `passwd`).
pub fn basename(path: &[u8]) -> &[u8] {
    match memchr::memrchr(b'/', path) {
        Some(i) => &path[i + 1..],
        None => path,
    }
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

    fn r(base: &str, raw: &str) -> String {
        String::from_utf8(resolve(base.as_bytes(), raw.as_bytes())).unwrap()
    }

    #[test]
    fn resolves_and_normalises() {
        assert_eq!(r("/home/u", "f.txt"), "/home/u/f.txt");
        assert_eq!(r("/home/u", "./a/../b//c/"), "/home/u/b/c");
        assert_eq!(r("/home/u", "../../../../etc/shadow"), "/etc/shadow");
        assert_eq!(r("/home/u", "/etc//passwd"), "/etc/passwd");
        assert_eq!(r("/", ".."), "/");
        assert_eq!(r("/a", ""), "/a");
        assert_eq!(r("/", "/"), "/");
        assert_eq!(r("/a/b", "../.."), "/");
        assert_eq!(normalize(b"etc/x"), b"/etc/x");
    }

    #[test]
    fn fast_paths_agree_with_component_walk() {
        // Everything the fast paths accept or reject, checked against the plain walk.
        let parts = ["", "/", "a", ".", "..", "ab", ".x", "x.", "...", "//"];
        let mut inputs = vec![String::new()];
        for _ in 0..3 {
            let mut next = Vec::new();
            for s in &inputs {
                for p in parts {
                    next.push(format!("{s}{p}"));
                    next.push(format!("{s}{p}/"));
                }
            }
            inputs = next;
        }
        inputs.sort();
        inputs.dedup();
        let slow = |base: &[u8], raw: &[u8]| {
            let mut out = vec![b'/'];
            if raw.first() != Some(&b'/') {
                push_components(base, &mut out);
            }
            push_components(raw, &mut out);
            out
        };
        let bases = ["/", "/home/u", "/home/u/", "/a/./b", "rel", "", "//x"];
        let mut out = Vec::new();
        for raw in &inputs {
            for base in bases {
                resolve_into(base.as_bytes(), raw.as_bytes(), &mut out);
                assert_eq!(
                    out,
                    slow(base.as_bytes(), raw.as_bytes()),
                    "base {base:?} raw {raw:?}"
                );
            }
        }
    }

    #[test]
    fn dirname_and_basename() {
        assert_eq!(dirname(b"/etc/passwd"), b"/etc");
        assert_eq!(dirname(b"/passwd"), b"/");
        assert_eq!(basename(b"/etc/passwd"), b"passwd");
        assert_eq!(basename(b"/"), b"");
        assert_eq!(dirname(b"memfd:x"), b"");
    }

    #[test]
    fn non_utf8_and_long_paths_do_not_panic() {
        let raw: Vec<u8> = b"\xff/../\x00x/"
            .iter()
            .copied()
            .cycle()
            .take(100_000)
            .collect();
        let out = resolve(b"/\xfe", &raw);
        assert_eq!(out[0], b'/');
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
