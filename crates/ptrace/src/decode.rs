//! Turning a stopped tracee's registers and memory into event parameters.
//!
//! Arguments are read at the seccomp stop (before the syscall runs, so the kernel and the
//! event see the same bytes); values only the exit knows (descriptors written to memory, the
//! inode of an opened file) are added at the exit stop by [`finish`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::fs::MetadataExt;

use vigil_event::{Event, EventType, Param, ParamKind, SockAddr, SockTuple};

use crate::sys::{self, Regs};

/// Longest path or string read from a tracee (then the parameter is flagged truncated).
pub const MAX_STR: usize = 4096;
/// Bytes of a read/write data buffer kept (Falco's default snaplen).
pub const MAX_DATA: usize = 80;

/// Syscall argument `i` (0-based) of a stop's registers.
pub fn arg(regs: &Regs, i: usize) -> u64 {
    match i {
        0 => regs.rdi,
        1 => regs.rsi,
        2 => regs.rdx,
        3 => regs.r10,
        4 => regs.r8,
        _ => regs.r9,
    }
}

/// Reads a NUL-terminated string of at most [`MAX_STR`] bytes; `None` if unreadable.
pub fn read_cstr(pid: i32, addr: u64) -> Option<(Vec<u8>, bool)> {
    if addr == 0 {
        return None;
    }
    let mut out = Vec::new();
    let mut chunk = [0u8; 256];
    let mut at = addr;
    while out.len() < MAX_STR {
        // Never cross a page boundary in one read: the next page may be unmapped.
        let to_page_end = 4096 - (at % 4096) as usize;
        let want = chunk.len().min(to_page_end).min(MAX_STR - out.len());
        let n = match sys::read_mem(pid, at, &mut chunk[..want]) {
            Ok(0) | Err(_) => {
                return if out.is_empty() {
                    None
                } else {
                    Some((out, true))
                }
            }
            Ok(n) => n,
        };
        if let Some(end) = chunk[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return Some((out, false));
        }
        out.extend_from_slice(&chunk[..n]);
        at += n as u64;
    }
    Some((out, true))
}

fn read_exact(pid: i32, addr: u64, buf: &mut [u8]) -> bool {
    addr != 0 && matches!(sys::read_mem(pid, addr, buf), Ok(n) if n == buf.len())
}

fn read_u64(pid: i32, addr: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    read_exact(pid, addr, &mut b).then(|| u64::from_ne_bytes(b))
}

/// Parses a `struct sockaddr` of `len` bytes.
pub fn parse_sockaddr(b: &[u8]) -> Option<SockAddr> {
    let family = u16::from_ne_bytes([*b.first()?, *b.get(1)?]);
    match family {
        2 if b.len() >= 8 => Some(SockAddr::Inet {
            ip: IpAddr::V4(Ipv4Addr::new(b[4], b[5], b[6], b[7])),
            port: u16::from_be_bytes([b[2], b[3]]),
        }),
        10 if b.len() >= 24 => {
            let mut ip = [0u8; 16];
            ip.copy_from_slice(&b[8..24]);
            Some(SockAddr::Inet {
                ip: IpAddr::V6(Ipv6Addr::from(ip)),
                port: u16::from_be_bytes([b[2], b[3]]),
            })
        }
        1 => {
            let path = &b[2.min(b.len())..];
            let end = if path.first() == Some(&0) {
                // Abstract socket: the name is every byte; shown with a leading `@`.
                path.len()
            } else {
                path.iter().position(|&c| c == 0).unwrap_or(path.len())
            };
            let mut p = path[..end].to_vec();
            if p.first() == Some(&0) {
                p[0] = b'@';
            }
            Some(SockAddr::Unix { path: p })
        }
        other => Some(SockAddr::Other { family: other }),
    }
}

fn read_sockaddr(pid: i32, addr: u64, len: u64) -> Param {
    let len = usize::try_from(len).unwrap_or(0).min(128);
    if addr == 0 || len < 2 {
        return Param::None;
    }
    let mut b = vec![0u8; len];
    match sys::read_mem(pid, addr, &mut b) {
        Ok(n) if n >= 2 => parse_sockaddr(&b[..n]).map_or(Param::None, Param::Addr),
        _ => Param::None,
    }
}

/// A parameter decoded from one register by its schema kind.
fn from_reg(pid: i32, kind: ParamKind, value: u64, truncated: &mut u64, index: usize) -> Param {
    match kind {
        // int-typed arguments: the low 32 bits, sign-extended.
        ParamKind::Fd | ParamKind::Int | ParamKind::Pid => {
            Param::Int(i64::from(value as u32 as i32))
        }
        ParamKind::Uid | ParamKind::Gid => Param::Uint(u64::from(value as u32)),
        ParamKind::Flags(_) | ParamKind::Uint | ParamKind::AbsTime => Param::Uint(value),
        ParamKind::Path | ParamKind::Str => match read_cstr(pid, value) {
            Some((s, cut)) => {
                if cut && index < 64 {
                    *truncated |= 1 << index;
                }
                Param::Bytes(s)
            }
            None => Param::None,
        },
        _ => Param::None,
    }
}

/// Parameters after which the schema holds values the syscall does not take as arguments.
fn is_result_param(name: &str) -> bool {
    matches!(
        name,
        "dev" | "ino" | "vtid" | "vpid" | "tuple" | "queuepct" | "fd1" | "fd2" | "exe"
    )
}

/// The entry event of syscall `etype` for a tracee stopped at its seccomp stop. `res` is 0
/// (the judge's "as if it succeeded" value is set by the caller).
pub fn entry_event(pid: i32, tid: i32, tgid: i32, etype: EventType, regs: &Regs) -> Event {
    let spec = etype.spec();
    let mut params = Vec::with_capacity(spec.params.len());
    let mut truncated = 0u64;
    let a = |i| arg(regs, i);
    match spec.name {
        "read" | "recvfrom" | "recvmsg" => {
            params.push(Param::Int(i64::from(a(0) as u32 as i32)));
            params.push(Param::Uint(a(2)));
        }
        "write" | "sendto" | "sendmsg" => {
            params.push(Param::Int(i64::from(a(0) as u32 as i32)));
            let size = if spec.name == "sendmsg" { 0 } else { a(2) };
            params.push(Param::Uint(size));
            let mut data = Param::None;
            if spec.name != "sendmsg" {
                let n = usize::try_from(size).unwrap_or(usize::MAX).min(MAX_DATA);
                let mut buf = vec![0u8; n];
                if let Ok(got) = sys::read_mem(pid, a(1), &mut buf) {
                    buf.truncate(got);
                    if size > got as u64 {
                        truncated |= 1 << 3;
                    }
                    data = Param::Bytes(buf);
                }
            }
            if spec.name == "write" {
                params.push(data);
            } else {
                params.push(Param::None);
                params.push(data);
            }
        }
        "openat2" => {
            params.push(from_reg(pid, ParamKind::Fd, a(0), &mut truncated, 0));
            params.push(from_reg(pid, ParamKind::Path, a(1), &mut truncated, 1));
            // struct open_how { u64 flags; u64 mode; u64 resolve; }
            let how = a(2);
            params.push(read_u64(pid, how).map_or(Param::None, Param::Uint));
            params.push(read_u64(pid, how + 8).map_or(Param::None, Param::Uint));
            params.push(read_u64(pid, how + 16).map_or(Param::None, Param::Uint));
        }
        "connect" | "bind" => {
            params.push(Param::Int(i64::from(a(0) as u32 as i32)));
            params.push(read_sockaddr(pid, a(1), a(2)));
        }
        "accept" => {}
        "accept4" => {
            params.push(Param::None);
            params.push(Param::None);
            params.push(Param::Uint(a(3)));
        }
        "pipe" => {}
        "pipe2" => {
            params.extend([Param::None, Param::None, Param::None, Param::Uint(a(1))]);
        }
        "init_module" => {
            params.push(Param::Uint(a(1)));
            params.push(from_reg(pid, ParamKind::Str, a(2), &mut truncated, 1));
        }
        "capset" => {
            // struct __user_cap_data_struct { u32 effective, permitted, inheritable; } × 2
            let mut b = [0u8; 24];
            if read_exact(pid, a(1), &mut b) {
                let word =
                    |i: usize| u64::from(u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]));
                let eff = word(0) | word(12) << 32;
                let perm = word(4) | word(16) << 32;
                let inh = word(8) | word(20) << 32;
                params.extend([Param::Uint(inh), Param::Uint(perm), Param::Uint(eff)]);
            }
        }
        _ => {
            for (i, p) in spec.params.iter().enumerate().take(6) {
                if is_result_param(p.name) {
                    break;
                }
                params.push(from_reg(pid, p.kind, a(i), &mut truncated, i));
            }
        }
    }
    Event {
        num: 0,
        ts: now_ns(),
        tid: i64::from(tid),
        pid: i64::from(tgid),
        etype,
        res: 0,
        params,
        truncated,
    }
}

/// Completes an entry event at the syscall's exit with result `res`: descriptors written to
/// memory, the opened file's device and inode, the data a read returned.
pub fn finish(event: &mut Event, pid: i32, regs_at_entry: &Regs, res: i64) {
    event.res = res;
    event.ts = now_ns();
    let spec = event.etype.spec();
    let set = |event: &mut Event, name: &str, value: Param| {
        if let Some(i) = spec.param_index(name) {
            if event.params.len() <= i {
                event.params.resize(i + 1, Param::None);
            }
            event.params[i] = value;
        }
    };
    match spec.name {
        "open" | "openat" | "openat2" | "creat" if res >= 0 => {
            if let Ok(meta) = std::fs::metadata(format!("/proc/{pid}/fd/{res}")) {
                set(event, "dev", Param::Uint(meta.dev()));
                set(event, "ino", Param::Uint(meta.ino()));
            }
        }
        "pipe" | "pipe2" | "socketpair" if res >= 0 => {
            let at = if spec.name == "socketpair" {
                arg(regs_at_entry, 3)
            } else {
                arg(regs_at_entry, 0)
            };
            let mut b = [0u8; 8];
            if read_exact(pid, at, &mut b) {
                let fd1 = i32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
                let fd2 = i32::from_ne_bytes([b[4], b[5], b[6], b[7]]);
                set(event, "fd1", Param::Int(fd1.into()));
                set(event, "fd2", Param::Int(fd2.into()));
                if spec.name != "socketpair" {
                    if let Ok(meta) = std::fs::metadata(format!("/proc/{pid}/fd/{fd1}")) {
                        set(event, "ino", Param::Uint(meta.ino()));
                    }
                }
            }
        }
        "connect" if res == 0 || res == -115 => {
            // The local end, from the socket's inode in the process's /proc/net tables.
            let fd = arg(regs_at_entry, 0) as u32 as i32;
            let remote = match event.param_by_name("addr") {
                Param::Addr(SockAddr::Inet { ip, port }) => Some((*ip, *port)),
                _ => None,
            };
            if let (Some((dst_ip, dst_port)), Ok(meta)) =
                (remote, std::fs::metadata(format!("/proc/{pid}/fd/{fd}")))
            {
                if let Some((l4proto, src_ip, src_port)) = local_endpoint(pid, meta.ino(), dst_ip) {
                    set(
                        event,
                        "tuple",
                        Param::Tuple(SockTuple::Inet {
                            l4proto,
                            src_ip,
                            src_port,
                            dst_ip,
                            dst_port,
                        }),
                    );
                }
            }
        }
        "read" | "recvfrom" if res > 0 => {
            let n = usize::try_from(res).unwrap_or(0).min(MAX_DATA);
            let mut buf = vec![0u8; n];
            if let Ok(got) = sys::read_mem(pid, arg(regs_at_entry, 1), &mut buf) {
                buf.truncate(got);
                if res as u64 > got as u64 {
                    let i = spec.param_index("data").unwrap_or(63);
                    event.truncated |= 1 << i;
                }
                set(event, "data", Param::Bytes(buf));
            }
        }
        _ => {}
    }
}

/// Reads a NULL-terminated array of string pointers (argv, envp), at most [`MAX_STR`] bytes
/// in all; the flag says whether it was cut.
pub fn read_str_array(pid: i32, addr: u64) -> (Vec<Vec<u8>>, bool) {
    let mut out = Vec::new();
    let mut total = 0usize;
    let mut at = addr;
    while addr != 0 && out.len() < 1024 {
        let Some(ptr) = read_u64(pid, at) else {
            return (out, true);
        };
        if ptr == 0 {
            return (out, false);
        }
        let Some((s, cut)) = read_cstr(pid, ptr) else {
            return (out, true);
        };
        total += s.len() + 1;
        out.push(s);
        if cut || total > MAX_STR {
            return (out, true);
        }
        at += 8;
    }
    (out, addr != 0)
}

/// The local address of socket inode `ino` of process `pid`: `(l4proto, ip, port)`, looked
/// up in `/proc/PID/net/{tcp,udp}{,6}` (the process's network namespace).
fn local_endpoint(pid: i32, ino: u64, remote: IpAddr) -> Option<(u8, IpAddr, u16)> {
    let v6 = remote.is_ipv6();
    for (table, proto) in [("tcp", 6u8), ("udp", 17u8)] {
        let name = if v6 {
            format!("/proc/{pid}/net/{table}6")
        } else {
            format!("/proc/{pid}/net/{table}")
        };
        let Ok(text) = std::fs::read_to_string(name) else {
            continue;
        };
        if let Some((ip, port)) = find_socket(&text, ino) {
            return Some((proto, ip, port));
        }
    }
    None
}

/// Finds inode `ino` in a `/proc/net/tcp`-style table; returns its local address.
fn find_socket(table: &str, ino: u64) -> Option<(IpAddr, u16)> {
    for line in table.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.get(9).and_then(|c| c.parse::<u64>().ok()) != Some(ino) {
            continue;
        }
        let (addr, port) = cols.get(1)?.split_once(':')?;
        let port = u16::from_str_radix(port, 16).ok()?;
        // Each 32-bit word is printed as a host-order (little-endian here) number.
        let mut bytes = Vec::with_capacity(16);
        for i in (0..addr.len()).step_by(8) {
            let word = u32::from_str_radix(addr.get(i..i + 8)?, 16).ok()?;
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        let ip = match bytes.len() {
            4 => IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])),
            16 => {
                let mut b = [0u8; 16];
                b.copy_from_slice(&bytes);
                IpAddr::V6(Ipv6Addr::from(b))
            }
            _ => return None,
        };
        return Some((ip, port));
    }
    None
}

/// The current time, nanoseconds since the Unix epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockaddrs_of_every_family() {
        let mut v4 = vec![2, 0, 0x01, 0xbb, 10, 0, 0, 1];
        v4.extend([0; 8]);
        assert_eq!(
            parse_sockaddr(&v4),
            Some(SockAddr::Inet {
                ip: "10.0.0.1".parse().unwrap(),
                port: 443
            })
        );
        let mut v6 = vec![10, 0, 0, 80, 0, 0, 0, 0];
        v6.extend(Ipv6Addr::LOCALHOST.octets());
        assert_eq!(
            parse_sockaddr(&v6),
            Some(SockAddr::Inet {
                ip: IpAddr::V6(Ipv6Addr::LOCALHOST),
                port: 80
            })
        );
        assert_eq!(
            parse_sockaddr(b"\x01\x00/run/x.sock\x00junk"),
            Some(SockAddr::Unix {
                path: b"/run/x.sock".to_vec()
            })
        );
        assert_eq!(
            parse_sockaddr(b"\x01\x00\x00abs"),
            Some(SockAddr::Unix {
                path: b"@abs".to_vec()
            })
        );
        assert_eq!(
            parse_sockaddr(&[16, 0, 0, 0]),
            Some(SockAddr::Other { family: 16 })
        );
        assert_eq!(parse_sockaddr(&[2]), None);
        assert_eq!(
            parse_sockaddr(&[2, 0, 1]),
            Some(SockAddr::Other { family: 2 })
        );
    }

    #[test]
    fn proc_net_tables() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:E118 0100007F:BD9F 01 00000000:00000000 00:00000000 00000000     0        0 4242 1 0 20 4 30 10 -1\n";
        assert_eq!(
            find_socket(tcp, 4242),
            Some(("127.0.0.1".parse().unwrap(), 0xE118))
        );
        assert_eq!(find_socket(tcp, 1), None);
        let tcp6 = "header\n   0: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 0 0 0 0 0 77\n";
        assert_eq!(
            find_socket(tcp6, 77),
            Some((IpAddr::V6(Ipv6Addr::LOCALHOST), 80))
        );
        assert_eq!(find_socket("header\n 0: zz:zz a b c d e f g 5\n", 5), None);
    }

    #[test]
    fn reads_own_memory_strings() {
        // process_vm_readv on ourselves exercises the page-chunked reader.
        let text = b"/etc/shadow\0".to_vec();
        let me = std::process::id() as i32;
        let (s, cut) = read_cstr(me, text.as_ptr() as u64).unwrap();
        assert_eq!(s, b"/etc/shadow");
        assert!(!cut);
        let long = vec![b'a'; MAX_STR + 10];
        let (s, cut) = read_cstr(me, long.as_ptr() as u64).unwrap();
        assert_eq!(s.len(), MAX_STR);
        assert!(cut, "unterminated long string is flagged truncated");
        assert_eq!(read_cstr(me, 0), None);
    }
}
