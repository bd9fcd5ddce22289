//! The expectation checker: a case's expectations against the events a driver reported for
//! the trigger's process. Pure code (no I/O), so it is tested with hand-made events.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

use vigil_event::{Event, Param, SockAddr, SockTuple};

use crate::cases::{long_path, Case, Expect, V};

/// What the placeholders of a case's expectations resolve to in one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Context {
    /// The case directory (absolute, the trigger's working directory).
    pub dir: PathBuf,
    /// The base port (`P`; the trigger also uses `P + 1`).
    pub port: u16,
    /// The trigger's pid.
    pub pid: i64,
    pub uid: u32,
    pub gid: u32,
    pub root: bool,
    /// Whether the driver traces the trigger (its own `PTRACE_TRACEME` then fails).
    pub traced: bool,
}

/// One difference between what a case expects and what the driver reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub case: String,
    /// The event type, or `exit` for the trigger's exit status.
    pub event: String,
    /// The parameter (`res` for the return value; `-` when the event is missing).
    pub param: String,
    pub expected: String,
    pub actual: String,
}

/// Checks every expectation of `case` against `events` (the events of the trigger's process;
/// events of other pids are ignored). An expectation is met when one event of its type matches
/// all its values; otherwise the closest event's differences are reported.
pub fn check_case(case: &Case, ctx: &Context, events: &[Event]) -> Vec<Mismatch> {
    let mut out = Vec::new();
    for exp in case.expect {
        check_expect(case, exp, ctx, events, &mut out);
    }
    out
}

fn check_expect(
    case: &Case,
    exp: &Expect,
    ctx: &Context,
    events: &[Event],
    out: &mut Vec<Mismatch>,
) {
    let mut best: Option<Vec<Mismatch>> = None;
    for event in events
        .iter()
        .filter(|e| e.pid == ctx.pid && e.etype.name() == exp.event)
    {
        let diffs = compare(case, exp, ctx, event);
        if diffs.is_empty() {
            return;
        }
        if best.as_ref().map_or(true, |b| diffs.len() < b.len()) {
            best = Some(diffs);
        }
    }
    match best {
        Some(diffs) => out.extend(diffs),
        None => {
            let mut seen: Vec<&str> = events
                .iter()
                .filter(|e| e.pid == ctx.pid)
                .map(|e| e.etype.name())
                .collect();
            seen.sort_unstable();
            seen.dedup();
            out.push(Mismatch {
                case: case.name.to_string(),
                event: exp.event.to_string(),
                param: "-".to_string(),
                expected: format!("an event `{}` of pid {}", exp.event, ctx.pid),
                actual: if seen.is_empty() {
                    "no events of that pid".to_string()
                } else {
                    format!("only: {}", seen.join(" "))
                },
            });
        }
    }
}

fn compare(case: &Case, exp: &Expect, ctx: &Context, event: &Event) -> Vec<Mismatch> {
    let mut diffs = Vec::new();
    let mut diff = |param: &str, expected: String, actual: String| {
        diffs.push(Mismatch {
            case: case.name.to_string(),
            event: exp.event.to_string(),
            param: param.to_string(),
            expected,
            actual,
        });
    };
    if let Some(v) = &exp.res {
        let actual = Param::Int(event.res);
        if !matches(v, ctx, &actual, false) {
            diff("res", describe(v, ctx), render_res(event.res));
        }
    }
    let spec = event.etype.spec();
    for (name, v) in exp.params {
        let Some(index) = spec.param_index(name) else {
            diff(name, describe(v, ctx), "not in the schema".to_string());
            continue;
        };
        let actual = event.param(index);
        let truncated = event.is_truncated(index);
        if !matches(v, ctx, actual, truncated) {
            let mut shown = render(actual);
            if truncated {
                shown.push_str(" (truncated)");
            }
            diff(name, describe(v, ctx), shown);
        }
    }
    diffs
}

fn dir_bytes(ctx: &Context) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    ctx.dir.as_os_str().as_bytes().to_vec()
}

fn join(ctx: &Context, rel: &[u8]) -> Vec<u8> {
    let mut p = dir_bytes(ctx);
    if !rel.is_empty() {
        p.push(b'/');
        p.extend_from_slice(rel);
    }
    p
}

fn canonical(path: &str) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    std::fs::canonicalize(path)
        .map(|p| p.as_os_str().as_bytes().to_vec())
        .unwrap_or_else(|_| path.as_bytes().to_vec())
}

const LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const LO6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

fn port(ctx: &Context, n: u16) -> u16 {
    ctx.port.wrapping_add(n)
}

/// Whether `actual` (with its truncation bit) is what `v` expects.
fn matches(v: &V, ctx: &Context, actual: &Param, truncated: bool) -> bool {
    match *v {
        V::Int(n) => {
            matches!(actual, Param::Int(a) if *a == n)
                || matches!(actual, Param::Uint(a) if i64::try_from(*a) == Ok(n))
        }
        V::Uint(n) => {
            matches!(actual, Param::Uint(a) if *a == n)
                || matches!(actual, Param::Int(a) if u64::try_from(*a) == Ok(n))
        }
        V::Bits(bits) => matches!(actual, Param::Uint(a) if *a & bits == bits),
        V::Errno(list) => {
            matches!(actual, Param::Int(a) if list.iter().any(|e| *a == -i64::from(*e)))
        }
        V::Positive => matches!(actual, Param::Int(a) if *a > 0),
        V::Bytes(b) => matches!(actual, Param::Bytes(a) if a == b) && !truncated,
        V::Path(rel) => matches!(actual, Param::Bytes(a) if *a == join(ctx, rel)) && !truncated,
        V::Canonical(p) => matches!(actual, Param::Bytes(a) if *a == canonical(p)),
        V::List(items) => {
            matches!(actual, Param::List(a) if a.len() == items.len()
                && a.iter().zip(items).all(|(x, y)| x == y))
                && !truncated
        }
        V::ListHas(item) => matches!(actual, Param::List(a) if a.iter().any(|x| x == item)),
        V::SelfPid => matches!(actual, Param::Int(a) if *a == ctx.pid),
        V::Uid => matches!(actual, Param::Uint(a) if *a == u64::from(ctx.uid)),
        V::Gid => matches!(actual, Param::Uint(a) if *a == u64::from(ctx.gid)),
        V::Lo(n) => {
            *actual
                == Param::Addr(SockAddr::Inet {
                    ip: LO,
                    port: port(ctx, n),
                })
        }
        V::LoTuple { proto, src, dst } => {
            *actual
                == Param::Tuple(SockTuple::Inet {
                    l4proto: proto,
                    src_ip: LO,
                    src_port: port(ctx, src),
                    dst_ip: LO,
                    dst_port: port(ctx, dst),
                })
        }
        V::Lo6(n) => {
            *actual
                == Param::Addr(SockAddr::Inet {
                    ip: LO6,
                    port: port(ctx, n),
                })
        }
        V::Lo6Tuple { proto, src, dst } => {
            *actual
                == Param::Tuple(SockTuple::Inet {
                    l4proto: proto,
                    src_ip: LO6,
                    src_port: port(ctx, src),
                    dst_ip: LO6,
                    dst_port: port(ctx, dst),
                })
        }
        V::UnixAddr(rel) => {
            *actual
                == Param::Addr(SockAddr::Unix {
                    path: join(ctx, rel),
                })
        }
        V::LongPathPrefix => {
            let full = long_path(&dir_bytes(ctx));
            matches!(actual, Param::Bytes(a) if !a.is_empty() && full.starts_with(a) && a.len() < full.len())
                && truncated
        }
        V::IfRoot(yes, no) => matches(if ctx.root { yes } else { no }, ctx, actual, truncated),
        V::IfTraced(yes, no) => matches(if ctx.traced { yes } else { no }, ctx, actual, truncated),
    }
}

/// The expected value in words.
pub fn describe(v: &V, ctx: &Context) -> String {
    match *v {
        V::Int(n) => n.to_string(),
        V::Uint(n) => format!("{n} ({n:#o})"),
        V::Bits(b) => format!("bits {b:#x} set"),
        V::Errno(list) => list
            .iter()
            .map(|e| render_res(-i64::from(*e)))
            .collect::<Vec<_>>()
            .join(" or "),
        V::Positive => "> 0".to_string(),
        V::Bytes(b) => escape(b),
        V::Path(rel) => escape(&join(ctx, rel)),
        V::Canonical(p) => escape(&canonical(p)),
        V::List(items) => format!(
            "[{}]",
            items
                .iter()
                .map(|i| escape(i))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        V::ListHas(item) => format!("a list containing {}", escape(item)),
        V::SelfPid => format!("{} (the trigger)", ctx.pid),
        V::Uid => ctx.uid.to_string(),
        V::Gid => ctx.gid.to_string(),
        V::Lo(n) => format!("127.0.0.1:{}", port(ctx, n)),
        V::LoTuple { proto, src, dst } => format!(
            "{}:127.0.0.1:{}->127.0.0.1:{}",
            proto_name(proto),
            port(ctx, src),
            port(ctx, dst)
        ),
        V::Lo6(n) => format!("[::1]:{}", port(ctx, n)),
        V::Lo6Tuple { proto, src, dst } => format!(
            "{}:[::1]:{}->[::1]:{}",
            proto_name(proto),
            port(ctx, src),
            port(ctx, dst)
        ),
        V::UnixAddr(rel) => format!("unix:{}", escape(&join(ctx, rel))),
        V::LongPathPrefix => "a truncated prefix of the 5000+ byte path, flagged".to_string(),
        V::IfRoot(yes, no) => describe(if ctx.root { yes } else { no }, ctx),
        V::IfTraced(yes, no) => describe(if ctx.traced { yes } else { no }, ctx),
    }
}

fn proto_name(p: u8) -> String {
    match p {
        6 => "tcp".to_string(),
        17 => "udp".to_string(),
        other => other.to_string(),
    }
}

fn render_res(res: i64) -> String {
    if res < 0 {
        if let Some(name) = vigil_event::flags::errno_name(-res) {
            return format!("{res} ({name})");
        }
    }
    res.to_string()
}

/// Bytes as text: printable ASCII as is, the rest `\xNN`; long values shortened.
fn escape(b: &[u8]) -> String {
    let mut s = String::new();
    let shown = if b.len() > 80 { &b[..60] } else { b };
    for &c in shown {
        if (0x20..0x7f).contains(&c) && c != b'\\' {
            s.push(char::from(c));
        } else {
            let _ = write!(s, "\\x{c:02x}");
        }
    }
    if shown.len() < b.len() {
        let _ = write!(s, "…({} bytes)", b.len());
    }
    format!("\"{s}\"")
}

/// A reported value as text.
pub fn render(p: &Param) -> String {
    match p {
        Param::None => "<NA>".to_string(),
        Param::Int(n) => n.to_string(),
        Param::Uint(n) => format!("{n} ({n:#o})"),
        Param::Bytes(b) => escape(b),
        Param::List(items) => {
            let shown: Vec<String> = items.iter().take(8).map(|i| escape(i)).collect();
            let more = if items.len() > 8 {
                format!(", …{} more", items.len() - 8)
            } else {
                String::new()
            };
            format!("[{}{more}]", shown.join(", "))
        }
        Param::Addr(SockAddr::Inet { ip, port }) => SocketAddr::new(*ip, *port).to_string(),
        Param::Addr(SockAddr::Unix { path }) => format!("unix:{}", escape(path)),
        Param::Addr(SockAddr::Other { family }) => format!("family {family}"),
        Param::Tuple(SockTuple::Inet {
            l4proto,
            src_ip,
            src_port,
            dst_ip,
            dst_port,
        }) => format!(
            "{}:{}->{}",
            proto_name(*l4proto),
            SocketAddr::new(*src_ip, *src_port),
            SocketAddr::new(*dst_ip, *dst_port)
        ),
        Param::Tuple(SockTuple::Unix { path }) => format!("unix:{}", escape(path)),
    }
}

/// All mismatches as one table (one line per mismatch), for a test failure message.
pub fn table(driver: &str, mismatches: &[Mismatch]) -> String {
    let mut cases: Vec<&str> = mismatches.iter().map(|m| m.case.as_str()).collect();
    cases.dedup();
    let mut out = format!(
        "driver `{driver}`: {} mismatches in {} cases\n",
        mismatches.len(),
        cases.len()
    );
    let width = |f: fn(&Mismatch) -> &str, title: &str| {
        mismatches
            .iter()
            .map(|m| f(m).chars().count())
            .chain([title.len()])
            .max()
            .unwrap_or(0)
    };
    let wc = width(|m| &m.case, "case");
    let we = width(|m| &m.event, "event");
    let wp = width(|m| &m.param, "param");
    let wx = width(|m| &m.expected, "expected");
    let _ = writeln!(
        out,
        "{:wc$} | {:we$} | {:wp$} | {:wx$} | actual",
        "case", "event", "param", "expected"
    );
    for m in mismatches {
        let _ = writeln!(
            out,
            "{:wc$} | {:we$} | {:wp$} | {:wx$} | {}",
            m.case, m.event, m.param, m.expected, m.actual
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::case;
    use vigil_event::table::by_name;

    fn ctx() -> Context {
        Context {
            dir: PathBuf::from("/tmp/conf/open"),
            port: 30000,
            pid: 77,
            uid: 1000,
            gid: 1000,
            root: false,
            traced: false,
        }
    }

    fn ev(name: &str, pid: i64, res: i64, params: Vec<Param>) -> Event {
        Event {
            num: 1,
            ts: 1,
            tid: pid,
            pid,
            etype: by_name(name).unwrap(),
            res,
            params,
            truncated: 0,
            cpu: None,
        }
    }

    #[test]
    fn a_matching_event_passes_and_other_pids_are_ignored() {
        let c = case("open").unwrap();
        let good = ev(
            "open",
            77,
            3,
            vec![
                Param::Bytes(b"/tmp/conf/open/open.txt".to_vec()),
                Param::Uint(0o1101),
                Param::Uint(0o640),
            ],
        );
        assert_eq!(check_case(c, &ctx(), std::slice::from_ref(&good)), vec![]);
        let mut other = good;
        other.pid = 78;
        let m = check_case(c, &ctx(), &[other]);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].param, "-");
    }

    #[test]
    fn wrong_values_are_each_reported() {
        let c = case("open").unwrap();
        let bad = ev(
            "open",
            77,
            4,
            vec![
                Param::Bytes(b"/tmp/conf/open/open.txt".to_vec()),
                Param::Uint(0o1),
                Param::None,
            ],
        );
        let m = check_case(c, &ctx(), &[bad]);
        let params: Vec<&str> = m.iter().map(|m| m.param.as_str()).collect();
        assert_eq!(params, ["res", "flags", "mode"], "{m:?}");
        assert_eq!(m[2].actual, "<NA>");
        let text = table("test", &m);
        assert!(text.contains("3 mismatches in 1 cases"), "{text}");
        assert!(text.lines().count() == 5, "{text}");
    }

    #[test]
    fn placeholders_resolve_against_the_context() {
        let c = case("connect").unwrap();
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let e = ev(
            "connect",
            77,
            0,
            vec![
                Param::Int(4),
                Param::Addr(SockAddr::Inet {
                    ip: lo,
                    port: 30000,
                }),
                Param::Tuple(SockTuple::Inet {
                    l4proto: 6,
                    src_ip: lo,
                    src_port: 30001,
                    dst_ip: lo,
                    dst_port: 30000,
                }),
            ],
        );
        assert_eq!(check_case(c, &ctx(), &[e]), vec![]);
        let unshare = case("unshare").unwrap();
        let eperm = ev("unshare", 77, -1, vec![Param::Uint(0x0400_0000)]);
        assert_eq!(
            check_case(unshare, &ctx(), std::slice::from_ref(&eperm)),
            vec![]
        );
        let root = Context {
            root: true,
            ..ctx()
        };
        assert_eq!(check_case(unshare, &root, &[eperm]).len(), 1);
    }

    #[test]
    fn truncation_must_be_flagged_for_the_long_path() {
        let c = case("long-path").unwrap();
        let full = long_path(b"/tmp/conf/open");
        let mut e = ev(
            "openat",
            77,
            -36,
            vec![
                Param::Int(-100),
                Param::Bytes(full[..4095].to_vec()),
                Param::Uint(0),
            ],
        );
        let m = check_case(c, &ctx(), &[e.clone()]);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].actual.contains("bytes"), "{m:?}");
        e.truncated = 1 << 1;
        assert_eq!(check_case(c, &ctx(), &[e]), vec![]);
    }
}
