//! Text renderings Falco uses: times, capability sets, connection tuples, event arguments.

use std::fmt::Write;
use std::io::Write as _;

use vigil_event::{flags, FlagTable, Param, ParamKind, SockAddr, SockTuple};

use crate::table::Net;

/// `cip:cport->sip:sport` (IPv6 addresses unbracketed, as Falco prints them).
pub(crate) fn tuple_name(net: &Net, out: &mut String) {
    // By hand rather than `write!`: every `connect`/`accept` names its socket this way.
    push_ip(out, net.cip);
    out.push(':');
    push_decimal(out, u32::from(net.cport));
    out.push_str("->");
    push_ip(out, net.sip);
    out.push(':');
    push_decimal(out, u32::from(net.sport));
}

/// Appends an address as `Display` prints it (IPv4 by hand, IPv6 through `Display`).
fn push_ip(out: &mut String, ip: std::net::IpAddr) {
    match ip {
        std::net::IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push('.');
                }
                push_decimal(out, u32::from(octet));
            }
        }
        std::net::IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

/// Appends `n` in decimal.
fn push_decimal(out: &mut String, mut n: u32) {
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[at..] {
        out.push(char::from(d));
    }
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar
/// (the civil-from-days algorithm on 400-year eras).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// How to print a timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimeFormat {
    /// `HH:MM:SS.nnnnnnnnn` (`evt.time`).
    Time,
    /// `HH:MM:SS` (`evt.time.s`).
    TimeS,
    /// `YYYY-MM-DD HH:MM:SS.nnnnnnnnn` (`evt.datetime`).
    DateTime,
    /// `YYYY-MM-DD HH:MM:SS` (`evt.datetime.s`).
    DateTimeS,
    /// `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ` (`evt.time.iso8601`).
    Iso8601,
}

/// Appends `ts` (nanoseconds since the epoch) in UTC.
pub(crate) fn time(ts: u64, format: TimeFormat, out: &mut String) {
    let secs = (ts / 1_000_000_000) as i64;
    let nanos = ts % 1_000_000_000;
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    let (h, mi, s) = (sod / 3600, (sod / 60) % 60, sod % 60);
    match format {
        TimeFormat::Time => {
            let _ = write!(out, "{h:02}:{mi:02}:{s:02}.{nanos:09}");
        }
        TimeFormat::TimeS => {
            let _ = write!(out, "{h:02}:{mi:02}:{s:02}");
        }
        TimeFormat::DateTime => {
            let _ = write!(
                out,
                "{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{nanos:09}"
            );
        }
        TimeFormat::DateTimeS => {
            let _ = write!(out, "{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}");
        }
        TimeFormat::Iso8601 => {
            let _ = write!(
                out,
                "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{nanos:09}Z"
            );
        }
    }
}

/// Linux capability names by bit number (`include/uapi/linux/capability.h`).
const CAPS: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// Appends a capability set as Falco prints it: names separated by spaces (unknown bits as
/// `CAP_<n>`).
pub(crate) fn caps(set: u64, out: &mut String) {
    for bit in 0..64 {
        if set & (1 << bit) == 0 {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        match CAPS.get(bit) {
            Some(name) => out.push_str(name),
            None => {
                let _ = write!(out, "CAP_{bit}");
            }
        }
    }
}

/// Appends the `exe_flags` of an exec event symbolically (`EXE_WRITABLE|EXE_UPPER_LAYER`),
/// Falco's spelling for its execve `flags` parameter.
pub(crate) fn exe_flags(value: u64, out: &mut String) {
    use vigil_event::table::exe_flags as x;
    let names = [
        (x::WRITABLE, "EXE_WRITABLE"),
        (x::UPPER_LAYER, "EXE_UPPER_LAYER"),
        (x::FROM_MEMFD, "EXE_FROM_MEMFD"),
    ];
    let mut rest = value;
    let start = out.len();
    for (bit, name) in names {
        if value & bit != 0 {
            if out.len() > start {
                out.push('|');
            }
            out.push_str(name);
            rest &= !bit;
        }
    }
    if rest != 0 || out.len() == start {
        if out.len() > start {
            out.push('|');
        }
        let _ = write!(out, "{rest}");
    }
}

/// Appends a parameter value as `evt.arg.NAME` shows it. `user_name`/`group_name` give names
/// for uid/gid parameters. Returns `false` (nothing appended) for a missing parameter.
///
/// Bytes a process chose (paths, strings, argument lists, unix socket paths, user names) are
/// appended as they are, invalid UTF-8 included: since Falco 0.45 (libs 649ac27, "remove
/// sanitization enforcement at filterchecks level") conditions compare raw bytes, and outputs
/// escape what they print.
pub(crate) fn param<'n>(
    kind: ParamKind,
    value: &Param,
    user_name: impl Fn(u32) -> Option<&'n [u8]>,
    group_name: impl Fn(u32) -> Option<&'n [u8]>,
    out: &mut Vec<u8>,
) -> bool {
    match (kind, value) {
        (_, Param::None) => return false,
        (ParamKind::Flags(table), Param::Uint(v)) => flags_into(table, *v, out),
        (ParamKind::Flags(table), Param::Int(v)) => flags_into(table, *v as u64, out),
        (ParamKind::Uid, Param::Uint(v)) => id_name(*v, &user_name, out),
        (ParamKind::Gid, Param::Uint(v)) => id_name(*v, &group_name, out),
        (_, Param::Int(v)) => {
            let _ = write!(out, "{v}");
        }
        (_, Param::Uint(v)) => {
            let _ = write!(out, "{v}");
        }
        (_, Param::Bytes(b)) => out.extend_from_slice(b),
        (_, Param::List(items)) => {
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b' ');
                }
                out.extend_from_slice(item);
            }
        }
        (_, Param::Addr(addr)) => match addr {
            SockAddr::Inet { ip, port } => {
                let _ = write!(out, "{ip}:{port}");
            }
            SockAddr::Unix { path } => out.extend_from_slice(path),
            SockAddr::Other { family } => {
                flags_into(FlagTable::SocketFamily, u64::from(*family), out)
            }
        },
        (_, Param::Tuple(t)) => match t {
            SockTuple::Inet {
                src_ip,
                src_port,
                dst_ip,
                dst_port,
                ..
            } => {
                let _ = write!(out, "{src_ip}:{src_port}->{dst_ip}:{dst_port}");
            }
            SockTuple::Unix { path } => out.extend_from_slice(path),
        },
    }
    true
}

/// [`flags::render`] into a byte buffer.
pub(crate) fn flags_into(table: FlagTable, value: u64, out: &mut Vec<u8>) {
    let mut text = String::new();
    flags::render(table, value, &mut text);
    out.extend_from_slice(text.as_bytes());
}

fn id_name<'n>(id: u64, name: impl Fn(u32) -> Option<&'n [u8]>, out: &mut Vec<u8>) {
    match u32::try_from(id).ok().and_then(name) {
        Some(n) => out.extend_from_slice(n),
        None if id == u64::from(u32::MAX) => out.extend_from_slice(b"-1"),
        None => {
            let _ = write!(out, "{id}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ts: u64, f: TimeFormat) -> String {
        let mut s = String::new();
        time(ts, f, &mut s);
        s
    }

    #[test]
    fn tuple_names_print_like_display() {
        let cases = [
            ("10.0.0.1", 0u16, "255.255.255.255", 65535u16),
            ("0.0.0.0", 9, "192.168.100.7", 443),
            ("::1", 80, "fd00::1:2", 8080),
        ];
        for (c, cport, s, sport) in cases {
            let mut net = Net::unconnected(6, c.contains(':'));
            net.cip = c.parse().unwrap();
            net.cport = cport;
            net.sip = s.parse().unwrap();
            net.sport = sport;
            let mut out = String::from("x");
            tuple_name(&net, &mut out);
            assert_eq!(out, format!("x{c}:{cport}->{s}:{sport}"));
        }
    }

    #[test]
    fn times_are_utc() {
        // 2023-11-14T22:13:20Z
        let ts = 1_700_000_000_000_000_123;
        assert_eq!(t(ts, TimeFormat::Time), "22:13:20.000000123");
        assert_eq!(t(ts, TimeFormat::TimeS), "22:13:20");
        assert_eq!(t(ts, TimeFormat::DateTime), "2023-11-14 22:13:20.000000123");
        assert_eq!(t(ts, TimeFormat::Iso8601), "2023-11-14T22:13:20.000000123Z");
        assert_eq!(t(0, TimeFormat::DateTimeS), "1970-01-01 00:00:00");
        // Leap day.
        assert_eq!(
            t(951_782_400 * 1_000_000_000, TimeFormat::DateTimeS),
            "2000-02-29 00:00:00"
        );
        let _ = t(u64::MAX, TimeFormat::Iso8601);
    }

    #[test]
    fn caps_render_as_names() {
        let mut s = String::new();
        caps((1 << 21) | (1 << 13) | (1 << 63), &mut s);
        assert_eq!(s, "CAP_NET_RAW CAP_SYS_ADMIN CAP_63");
    }

    #[test]
    fn exe_flags_render_symbolically() {
        let mut s = String::new();
        exe_flags(1 | 4, &mut s);
        assert_eq!(s, "EXE_WRITABLE|EXE_FROM_MEMFD");
        s.clear();
        exe_flags(0, &mut s);
        assert_eq!(s, "0");
    }

    #[test]
    fn params_render() {
        let none = |_: u32| -> Option<&[u8]> { None };
        let root = |u: u32| -> Option<&[u8]> { (u == 0).then_some(&b"root"[..]) };
        let mut s = Vec::new();
        assert!(param(ParamKind::Uid, &Param::Uint(0), root, none, &mut s));
        assert_eq!(s, b"root");
        s.clear();
        param(ParamKind::Uid, &Param::Uint(1234), root, none, &mut s);
        assert_eq!(s, b"1234");
        s.clear();
        assert!(!param(ParamKind::Int, &Param::None, none, none, &mut s));
        let tuple = Param::Tuple(SockTuple::Inet {
            l4proto: 6,
            src_ip: "1.2.3.4".parse().unwrap(),
            src_port: 5,
            dst_ip: "6.7.8.9".parse().unwrap(),
            dst_port: 10,
        });
        param(ParamKind::SockTuple, &tuple, none, none, &mut s);
        assert_eq!(s, b"1.2.3.4:5->6.7.8.9:10");
        s.clear();
        param(
            ParamKind::Path,
            &Param::Bytes(b"/tmp/\xff".to_vec()),
            none,
            none,
            &mut s,
        );
        // Raw, as libsinsp gives it since Falco 0.45: conditions can match the byte.
        assert_eq!(s, b"/tmp/\xff");
        s.clear();
        let unix = Param::Addr(SockAddr::Unix {
            path: b"/run/s\xfe".to_vec(),
        });
        param(ParamKind::SockAddr, &unix, none, none, &mut s);
        assert_eq!(s, b"/run/s\xfe");
    }
}
