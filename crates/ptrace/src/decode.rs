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
    regs.arg(i)
}

/// Reads a NUL-terminated string of at most [`MAX_STR`] bytes; `None` if unreadable.
pub fn read_cstr(pid: i32, addr: u64) -> Option<(Vec<u8>, bool)> {
    if addr == 0 {
        return None;
    }
    let mut out = Vec::new();
    let mut chunk = [0u8; 256];
    let mut at = addr;
    // Through ptrace every 8-byte word is a syscall: read one word at a time and stop at the
    // first NUL, rather than a whole chunk past the string's end.
    let by_word = sys::reads_by_word(pid);
    while out.len() < MAX_STR {
        // Never cross a page boundary in one read: the next page may be unmapped.
        let to_page_end = 4096 - (at % 4096) as usize;
        let room = if by_word {
            8 - (at % 8) as usize
        } else {
            chunk.len()
        };
        let want = room.min(to_page_end).min(MAX_STR - out.len());
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
            // recvmsg's room is its iovecs' total length (its third argument is flags).
            let size = if spec.name == "recvmsg" {
                read_msghdr(pid, a(1)).map_or(0, |h| iov_total(pid, h.iov, h.iovlen))
            } else {
                a(2)
            };
            params.push(Param::Uint(size));
        }
        "write" | "sendto" | "sendmsg" => {
            params.push(Param::Int(i64::from(a(0) as u32 as i32)));
            let data_index = if spec.name == "write" { 2 } else { 3 };
            let (size, data, cut) = if spec.name == "sendmsg" {
                read_msg_data(pid, a(1))
            } else {
                let size = a(2);
                let n = usize::try_from(size).unwrap_or(usize::MAX).min(MAX_DATA);
                let mut buf = vec![0u8; n];
                match sys::read_mem(pid, a(1), &mut buf) {
                    Ok(got) => {
                        buf.truncate(got);
                        (size, Param::Bytes(buf), size > got as u64)
                    }
                    Err(_) => (size, Param::None, false),
                }
            };
            if cut {
                truncated |= 1 << data_index;
            }
            params.push(Param::Uint(size));
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
        "mount" => {
            params.push(from_reg(pid, ParamKind::Path, a(0), &mut truncated, 0));
            params.push(from_reg(pid, ParamKind::Path, a(1), &mut truncated, 1));
            params.push(from_reg(pid, ParamKind::Str, a(2), &mut truncated, 2));
            // The historical magic in the high 16 bits (`MS_MGC_VAL`) is not a flag.
            let mut flags = a(3);
            if flags & 0xffff_0000 == 0xc0ed_0000 {
                flags &= !0xffff_0000;
            }
            params.push(Param::Uint(flags));
        }
        "clone3" => {
            // struct clone_args { u64 flags; … }
            params.push(read_u64(pid, a(0)).map_or(Param::None, Param::Uint));
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
        cpu: None,
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
            let fd = arg(regs_at_entry, 0) as u32 as i32;
            let remote = match event.param_by_name("addr") {
                Param::Addr(a) => Some(a.clone()),
                _ => None,
            };
            let tuple = socket_tuple(event.pid, pid, fd, remote, false);
            set(event, "tuple", tuple);
        }
        "accept" | "accept4" if res >= 0 => {
            let fd = i32::try_from(res).unwrap_or(-1);
            let tuple = socket_tuple(event.pid, pid, fd, None, true);
            set(event, "tuple", tuple);
            // How full the listener's accept queue is, in percent (after this accept).
            let listener = arg(regs_at_entry, 0) as u32 as i32;
            if let Some(pct) = i32::try_from(event.pid)
                .ok()
                .and_then(|tgid| sys::listen_queue(tgid, listener).ok().flatten())
                .map(|(waiting, backlog)| queue_pct(waiting, backlog))
            {
                set(event, "queuepct", Param::Uint(pct));
            }
        }
        "sendto" | "sendmsg" if res >= 0 => {
            let fd = arg(regs_at_entry, 0) as u32 as i32;
            let remote = if spec.name == "sendto" {
                read_sockaddr(pid, arg(regs_at_entry, 4), arg(regs_at_entry, 5))
            } else {
                read_msghdr(pid, arg(regs_at_entry, 1))
                    .map_or(Param::None, |h| read_sockaddr(pid, h.name, h.namelen))
            };
            let remote = match remote {
                Param::Addr(a) => Some(a),
                _ => None,
            };
            let tuple = socket_tuple(event.pid, pid, fd, remote, false);
            set(event, "tuple", tuple);
        }
        "read" | "recvfrom" | "recvmsg" if res > 0 => {
            let fd = arg(regs_at_entry, 0) as u32 as i32;
            let (data, cut) = if spec.name == "recvmsg" {
                match read_msghdr(pid, arg(regs_at_entry, 1)) {
                    Some(h) => {
                        let (_, data, _) = read_iov_data(pid, h.iov, h.iovlen, res as u64);
                        (data, res as u64 > MAX_DATA as u64)
                    }
                    None => (Param::None, false),
                }
            } else {
                let n = usize::try_from(res).unwrap_or(0).min(MAX_DATA);
                let mut buf = vec![0u8; n];
                match sys::read_mem(pid, arg(regs_at_entry, 1), &mut buf) {
                    Ok(got) => {
                        buf.truncate(got);
                        (Param::Bytes(buf), res as u64 > got as u64)
                    }
                    Err(_) => (Param::None, false),
                }
            };
            if cut {
                let i = spec.param_index("data").unwrap_or(63);
                event.truncated |= 1 << i;
            }
            set(event, "data", data);
            if spec.name != "read" {
                // The sender's address, written by the kernel (absent for connected sockets).
                let remote = if spec.name == "recvfrom" {
                    let len_at = arg(regs_at_entry, 5);
                    let mut b = [0u8; 4];
                    if read_exact(pid, len_at, &mut b) {
                        read_sockaddr(pid, arg(regs_at_entry, 4), u64::from(u32::from_ne_bytes(b)))
                    } else {
                        Param::None
                    }
                } else {
                    read_msghdr(pid, arg(regs_at_entry, 1))
                        .map_or(Param::None, |h| read_sockaddr(pid, h.name, h.namelen))
                };
                let remote = match remote {
                    Param::Addr(a) => Some(a),
                    _ => None,
                };
                let tuple = socket_tuple(event.pid, pid, fd, remote, true);
                set(event, "tuple", tuple);
            }
        }
        _ => {}
    }
}

/// `waiting` connections of a `backlog` in percent (0 for a zero backlog).
fn queue_pct(waiting: u32, backlog: u32) -> u64 {
    if backlog == 0 {
        0
    } else {
        u64::from(waiting) * 100 / u64::from(backlog)
    }
}

/// The fields of a tracee's `struct msghdr` (x86-64 layout) the events use.
struct MsgHdr {
    name: u64,
    namelen: u64,
    iov: u64,
    iovlen: u64,
}

fn read_msghdr(pid: i32, addr: u64) -> Option<MsgHdr> {
    let mut b = [0u8; 32];
    if !read_exact(pid, addr, &mut b) {
        return None;
    }
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[i..i + 8]);
        u64::from_ne_bytes(w)
    };
    Some(MsgHdr {
        name: word(0),
        namelen: word(8) & 0xffff_ffff,
        iov: word(16),
        iovlen: word(24),
    })
}

/// Most iovecs of one message looked at.
const MAX_IOV: u64 = 1024;

/// The total length of an iovec array and the first bytes of its data (at most
/// [`MAX_DATA`], and at most `limit` in all): `(size, data, cut)`.
fn read_iov_data(pid: i32, iov: u64, iovlen: u64, limit: u64) -> (u64, Param, bool) {
    let mut size = 0u64;
    let mut data = Vec::new();
    let mut readable = true;
    for i in 0..iovlen.min(MAX_IOV) {
        let at = iov.wrapping_add(i * 16);
        let (Some(base), Some(len)) = (read_u64(pid, at), read_u64(pid, at.wrapping_add(8))) else {
            readable = false;
            break;
        };
        size = size.saturating_add(len);
        let room = (MAX_DATA - data.len()) as u64;
        let want = len.min(room).min(limit.saturating_sub(data.len() as u64));
        if want > 0 {
            let mut buf = vec![0u8; usize::try_from(want).unwrap_or(0)];
            let got = sys::read_mem(pid, base, &mut buf).unwrap_or(0);
            buf.truncate(got);
            data.extend_from_slice(&buf);
        }
    }
    if !readable && data.is_empty() {
        return (size, Param::None, false);
    }
    let cut = size.min(limit) > data.len() as u64;
    (size, Param::Bytes(data), cut)
}

/// The total length of an iovec array (without reading the data).
fn iov_total(pid: i32, iov: u64, iovlen: u64) -> u64 {
    (0..iovlen.min(MAX_IOV))
        .map_while(|i| read_u64(pid, iov.wrapping_add(i * 16).wrapping_add(8)))
        .fold(0u64, u64::saturating_add)
}

/// `sendmsg`'s size (the sum of its iovec lengths) and data.
fn read_msg_data(pid: i32, msg: u64) -> (u64, Param, bool) {
    match read_msghdr(pid, msg) {
        Some(h) => read_iov_data(pid, h.iov, h.iovlen, u64::MAX),
        None => (0, Param::None, false),
    }
}

/// The connection tuple of socket `fd` of process `tgid` (thread `tid`): its local end and
/// `remote` (or its peer when `remote` is `None`), oriented client → server: local → remote
/// for outgoing calls (`connect`, `send*`), remote → local for incoming ones (`accept`,
/// `recv*`). Read from a copy of the descriptor (`pidfd_getfd`), else from the process's
/// `/proc/PID/net` tables.
fn socket_tuple(tgid: i64, tid: i32, fd: i32, remote: Option<SockAddr>, incoming: bool) -> Param {
    let ends = i32::try_from(tgid)
        .ok()
        .and_then(|pid| sys::socket_ends(pid, fd).ok())
        .map(|ends| {
            (
                ends.local.and_then(|b| parse_sockaddr(&b)),
                ends.peer.and_then(|b| parse_sockaddr(&b)),
                ends.proto.and_then(|p| u8::try_from(p).ok()).unwrap_or(0),
            )
        })
        .or_else(|| {
            // No pidfd_getfd (kernel < 5.6): inet sockets from the /proc/net tables.
            let ino = std::fs::metadata(format!("/proc/{tid}/fd/{fd}"))
                .ok()?
                .ino();
            let (proto, local, peer) = proc_net_ends(tid, ino)?;
            Some((Some(local), peer, proto))
        });
    let Some((local, peer, proto)) = ends else {
        return Param::None;
    };
    let remote = remote.or(peer);
    match (local, remote) {
        (
            Some(SockAddr::Inet {
                ip: lip,
                port: lport,
            }),
            Some(SockAddr::Inet {
                ip: rip,
                port: rport,
            }),
        ) => {
            let ((src_ip, src_port), (dst_ip, dst_port)) = if incoming {
                ((rip, rport), (lip, lport))
            } else {
                ((lip, lport), (rip, rport))
            };
            Param::Tuple(SockTuple::Inet {
                l4proto: proto,
                src_ip,
                src_port,
                dst_ip,
                dst_port,
            })
        }
        (local, remote) => {
            // Unix sockets: the named end (the server's path).
            let path = |a: &Option<SockAddr>| match a {
                Some(SockAddr::Unix { path }) if !path.is_empty() => Some(path.clone()),
                _ => None,
            };
            match path(&remote).or_else(|| path(&local)) {
                Some(path) => Param::Tuple(SockTuple::Unix { path }),
                None => Param::None,
            }
        }
    }
}

/// Socket inode `ino` in `/proc/PID/net/{tcp,udp}{,6}`: `(l4proto, local, remote)`, the
/// remote end `None` when unconnected.
fn proc_net_ends(pid: i32, ino: u64) -> Option<(u8, SockAddr, Option<SockAddr>)> {
    for (table, proto) in [("tcp", 6u8), ("udp", 17), ("tcp6", 6), ("udp6", 17)] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        if let Some(((lip, lport), (rip, rport))) = find_socket(&text, ino) {
            let remote = (rport != 0).then_some(SockAddr::Inet {
                ip: rip,
                port: rport,
            });
            return Some((
                proto,
                SockAddr::Inet {
                    ip: lip,
                    port: lport,
                },
                remote,
            ));
        }
    }
    None
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

/// An IP address and port.
type Endpoint = (IpAddr, u16);

/// Socket `fd` of process `pid` described as a `/proc` snapshot describes one (type and, for
/// a connected inet socket, its tuple client → server; for a Unix socket its named end), for
/// a socket whose creating call was not traced (an `accept` when no rule watches it) when a
/// traced call uses it. Read through a copy of the descriptor (`pidfd_getfd`); a TCP socket
/// is the server side when the process's network namespace listens on its local port (the
/// snapshot's rule). `None` for other families or when the copy is refused.
pub(crate) fn describe_socket(
    pid: i64,
    fd: i64,
) -> Option<(vigil_event::FdType, Option<SockTuple>, Vec<u8>)> {
    use vigil_event::FdType;
    let (p, f) = (i32::try_from(pid).ok()?, i32::try_from(fd).ok()?);
    let ends = sys::socket_ends(p, f).ok()?;
    let local = ends.local.and_then(|b| parse_sockaddr(&b));
    let peer = ends.peer.and_then(|b| parse_sockaddr(&b));
    let proto = ends.proto.and_then(|p| u8::try_from(p).ok()).unwrap_or(0);
    match (local, peer) {
        (Some(SockAddr::Inet { ip, port }), peer) => {
            let ipv6 = ip.is_ipv6();
            let tuple = match peer {
                Some(SockAddr::Inet {
                    ip: rip,
                    port: rport,
                }) => {
                    let server = proto == 6 && listens_on(p, port, ipv6);
                    let ((src_ip, src_port), (dst_ip, dst_port)) = if server {
                        ((rip, rport), (ip, port))
                    } else {
                        ((ip, port), (rip, rport))
                    };
                    Some(SockTuple::Inet {
                        l4proto: proto,
                        src_ip,
                        src_port,
                        dst_ip,
                        dst_port,
                    })
                }
                _ => None,
            };
            let kind = if ipv6 { FdType::Ipv6 } else { FdType::Ipv4 };
            Some((kind, tuple, Vec::new()))
        }
        (local @ Some(SockAddr::Unix { .. }), peer) => {
            let path = |a: &Option<SockAddr>| match a {
                Some(SockAddr::Unix { path }) if !path.is_empty() => Some(path.clone()),
                _ => None,
            };
            Some((
                FdType::Unix,
                None,
                path(&peer).or_else(|| path(&local)).unwrap_or_default(),
            ))
        }
        _ => None,
    }
}

/// Whether a TCP socket listens on `port` in the network namespace of process `pid`.
fn listens_on(pid: i32, port: u16, ipv6: bool) -> bool {
    const TCP_LISTEN: &str = "0A";
    let table = if ipv6 { "tcp6" } else { "tcp" };
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
        return false;
    };
    text.lines().skip(1).any(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        cols.get(3) == Some(&TCP_LISTEN)
            && cols
                .get(1)
                .and_then(|c| parse_hex_addr(c))
                .is_some_and(|(_, p)| p == port)
    })
}

/// Finds inode `ino` in a `/proc/net/tcp`-style table; returns its local and remote
/// addresses.
fn find_socket(table: &str, ino: u64) -> Option<(Endpoint, Endpoint)> {
    for line in table.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.get(9).and_then(|c| c.parse::<u64>().ok()) != Some(ino) {
            continue;
        }
        return Some((parse_hex_addr(cols.get(1)?)?, parse_hex_addr(cols.get(2)?)?));
    }
    None
}

/// `0100007F:E118` (each 32-bit word printed as a host-order, little-endian here, number).
fn parse_hex_addr(col: &str) -> Option<Endpoint> {
    let (addr, port) = col.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
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
    Some((ip, port))
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
    use std::os::fd::AsRawFd;
    use vigil_event::table::by_name;

    fn me() -> i32 {
        std::process::id() as i32
    }

    fn addr_of<T>(v: &[T]) -> u64 {
        v.as_ptr() as u64
    }

    #[test]
    fn mount_arguments_are_decoded_without_the_magic() {
        let (dev, dir, fstype) = (b"vigil-conf\0", b"/mnt/x\0", b"tmpfs\0");
        let mut regs = Regs::zero();
        regs.set_arg(0, addr_of(dev));
        regs.set_arg(1, addr_of(dir));
        regs.set_arg(2, addr_of(fstype));
        regs.set_arg(3, 0xc0ed_0000 | 0x6);
        let e = entry_event(me(), me(), me(), by_name("mount").unwrap(), &regs);
        assert_eq!(
            e.param_by_name("dev"),
            &Param::Bytes(b"vigil-conf".to_vec())
        );
        assert_eq!(e.param_by_name("dir"), &Param::Bytes(b"/mnt/x".to_vec()));
        assert_eq!(e.param_by_name("type"), &Param::Bytes(b"tmpfs".to_vec()));
        assert_eq!(e.param_by_name("flags"), &Param::Uint(6));
        regs.set_arg(0, 0);
        let e = entry_event(me(), me(), me(), by_name("mount").unwrap(), &regs);
        assert_eq!(e.param_by_name("dev"), &Param::None, "a NULL source");
    }

    #[test]
    fn clone3_flags_come_from_clone_args() {
        let args: [u64; 2] = [0x400, 17];
        let mut regs = Regs::zero();
        regs.set_arg(0, addr_of(&args));
        let e = entry_event(me(), me(), me(), by_name("clone3").unwrap(), &regs);
        assert_eq!(e.param_by_name("flags"), &Param::Uint(0x400));
    }

    /// A `struct msghdr` with these iovecs (and an optional name) in this process's memory.
    fn msghdr(bufs: &[&[u8]], name: Option<&[u8]>) -> (Vec<u64>, Vec<u64>) {
        let iov: Vec<u64> = bufs
            .iter()
            .flat_map(|b| [addr_of(b), b.len() as u64])
            .collect();
        let (name_ptr, name_len) = name.map_or((0, 0), |n| (addr_of(n), n.len() as u64));
        let hdr = vec![
            name_ptr,
            name_len,
            addr_of(&iov),
            bufs.len() as u64,
            0,
            0,
            0,
        ];
        (hdr, iov)
    }

    #[test]
    fn sendmsg_size_and_data_span_the_iovecs() {
        let (a, b) = (b"hello ".as_slice(), b"world".as_slice());
        let (hdr, _iov) = msghdr(&[a, b], None);
        let mut regs = Regs::zero();
        regs.set_arg(0, 4);
        regs.set_arg(1, addr_of(&hdr));
        let e = entry_event(me(), me(), me(), by_name("sendmsg").unwrap(), &regs);
        assert_eq!(e.param_by_name("fd"), &Param::Int(4));
        assert_eq!(e.param_by_name("size"), &Param::Uint(11));
        assert_eq!(
            e.param_by_name("data"),
            &Param::Bytes(b"hello world".to_vec())
        );
        assert_eq!(e.truncated, 0);
        // More than the snap length: cut and flagged.
        let big = vec![b'z'; MAX_DATA + 20];
        let (hdr, _iov) = msghdr(&[&big], None);
        regs.set_arg(1, addr_of(&hdr));
        let e = entry_event(me(), me(), me(), by_name("sendmsg").unwrap(), &regs);
        assert_eq!(e.param_by_name("size"), &Param::Uint(big.len() as u64));
        assert!(matches!(e.param_by_name("data"), Param::Bytes(d) if d.len() == MAX_DATA));
        let data = by_name("sendmsg")
            .unwrap()
            .spec()
            .param_index("data")
            .unwrap();
        assert!(e.is_truncated(data));
        let (hdr, _iov) = msghdr(&[a], None);
        regs.set_arg(1, addr_of(&hdr));
        let e = entry_event(me(), me(), me(), by_name("recvmsg").unwrap(), &regs);
        assert_eq!(e.param_by_name("size"), &Param::Uint(6), "recvmsg's room");
    }

    fn lo(port: u16) -> (IpAddr, u16) {
        (IpAddr::V4(Ipv4Addr::LOCALHOST), port)
    }

    fn tuple(proto: u8, src: (IpAddr, u16), dst: (IpAddr, u16)) -> Param {
        Param::Tuple(SockTuple::Inet {
            l4proto: proto,
            src_ip: src.0,
            src_port: src.1,
            dst_ip: dst.0,
            dst_port: dst.1,
        })
    }

    #[test]
    fn tcp_tuples_are_oriented_client_to_server() {
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let sport = server.local_addr().unwrap().port();
        let client = std::net::TcpStream::connect(("127.0.0.1", sport)).unwrap();
        let cport = client.local_addr().unwrap().port();
        let (accepted, _) = server.accept().unwrap();
        let pid = i64::from(me());
        let want = tuple(6, lo(cport), lo(sport));
        // accept: the peer is the source.
        assert_eq!(
            socket_tuple(pid, me(), accepted.as_raw_fd(), None, true),
            want
        );
        // connect/send: the local end is the source.
        assert_eq!(
            socket_tuple(pid, me(), client.as_raw_fd(), None, false),
            want
        );
        // The /proc/net fallback agrees.
        let ino = std::fs::metadata(format!("/proc/self/fd/{}", client.as_raw_fd()))
            .unwrap()
            .ino();
        let (proto, local, remote) = proc_net_ends(me(), ino).unwrap();
        assert_eq!(proto, 6);
        assert_eq!(
            local,
            SockAddr::Inet {
                ip: lo(cport).0,
                port: cport
            }
        );
        assert_eq!(
            remote,
            Some(SockAddr::Inet {
                ip: lo(sport).0,
                port: sport
            })
        );
        assert_eq!(socket_tuple(pid, me(), -1, None, false), Param::None);
        // The listener's accept queue: one connection waiting after this accept.
        let _second = std::net::TcpStream::connect(("127.0.0.1", sport)).unwrap();
        let mut queue = None;
        for _ in 0..100 {
            queue = sys::listen_queue(me(), server.as_raw_fd()).unwrap();
            if queue.is_some_and(|(waiting, _)| waiting > 0) {
                break;
            }
            std::thread::yield_now();
        }
        let (waiting, backlog) = queue.expect("a listener has a queue");
        assert_eq!(waiting, 1);
        assert!(backlog > 0);
        assert_eq!(queue_pct(waiting, backlog), 100 / u64::from(backlog));
        assert_eq!(
            sys::listen_queue(me(), client.as_raw_fd()).unwrap(),
            None,
            "not a listener"
        );
        assert_eq!(queue_pct(3, 0), 0);
        assert_eq!(queue_pct(1, 4), 25);
    }

    #[test]
    fn unix_tuples_name_the_server_path() {
        use std::os::unix::ffi::OsStrExt;
        let dir = std::env::temp_dir().join(format!("vigil-ptrace-unix-{}", me()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let server = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let client = std::os::unix::net::UnixStream::connect(&path).unwrap();
        let (accepted, _) = server.accept().unwrap();
        let want = Param::Tuple(SockTuple::Unix {
            path: path.as_os_str().as_bytes().to_vec(),
        });
        let pid = i64::from(me());
        assert_eq!(
            socket_tuple(pid, me(), client.as_raw_fd(), None, false),
            want
        );
        assert_eq!(
            socket_tuple(pid, me(), accepted.as_raw_fd(), None, true),
            want
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn udp_tuples_use_the_destination_given() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let (pa, pb) = (
            a.local_addr().unwrap().port(),
            b.local_addr().unwrap().port(),
        );
        let dst = SockAddr::Inet {
            ip: lo(pa).0,
            port: pa,
        };
        let pid = i64::from(me());
        assert_eq!(
            socket_tuple(pid, me(), b.as_raw_fd(), Some(dst), false),
            tuple(17, lo(pb), lo(pa))
        );
        // Unconnected and no address given: no tuple.
        assert_eq!(
            socket_tuple(pid, me(), b.as_raw_fd(), None, false),
            Param::None
        );
        b.connect(("127.0.0.1", pa)).unwrap();
        assert_eq!(
            socket_tuple(pid, me(), b.as_raw_fd(), None, false),
            tuple(17, lo(pb), lo(pa))
        );
    }

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
            Some((
                ("127.0.0.1".parse().unwrap(), 0xE118),
                ("127.0.0.1".parse().unwrap(), 0xBD9F)
            ))
        );
        assert_eq!(find_socket(tcp, 1), None);
        let tcp6 = "header\n   0: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 0 0 0 0 0 77\n";
        assert_eq!(
            find_socket(tcp6, 77),
            Some((
                (IpAddr::V6(Ipv6Addr::LOCALHOST), 80),
                (IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0)
            ))
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
