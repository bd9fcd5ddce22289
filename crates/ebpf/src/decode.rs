//! Kernel records → [`Event`]s. Pure code over byte slices (records are untrusted input:
//! every length is checked, nothing panics).
//!
//! A record is `struct rec_hdr` (80 bytes) then blobs (`struct blob_hdr` + data, 8-aligned);
//! see `bpf/vigil.bpf.c`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vigil_event::FlagTable;
use vigil_event::{arch, table, Event, EventType, Param, ParamKind, SockAddr, SockTuple};

use crate::spec::{def_for, Src};

pub const REC_SYSCALL: u16 = 0;
pub const REC_EXEC: u16 = 1;
pub const REC_FORK: u16 = 2;
pub const REC_EXIT: u16 = 3;
/// A header only, written by the `FLOOR_RING` programs of `vigil bench`: counted, not an event.
pub const REC_FLOOR: u16 = 4;

pub const TAG_TUPLE: u8 = 16;
pub const TAG_FILENAME: u8 = 17;
pub const TAG_ARGV: u8 = 18;
pub const TAG_ENV: u8 = 19;
pub const TAG_COMM: u8 = 20;
pub const TAG_EXEC_INFO: u8 = 21;
pub const TAG_FORK_INFO: u8 = 22;
pub const TAG_EXIT_INFO: u8 = 23;
pub const TAG_CWD: u8 = 24;
pub const TAG_EXEPATH: u8 = 25;
pub const TAG_CGROUP: u8 = 26;
pub const TAG_MSG: u8 = 27;
pub const TAG_MSG_NAME: u8 = 28;
const N_TAGS: usize = 29;

pub const BLOB_TRUNCATED: u8 = 1;
pub const BLOB_FAULT: u8 = 2;

pub const HDR_LEN: usize = 80;
const BLOB_HDR_LEN: usize = 8;

/// A record's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub ts: u64,
    pub tid: u32,
    pub pid: u32,
    pub kind: u16,
    pub nr: u16,
    /// The CPU the record was written on (the upper 16 bits of the header's `len` word).
    pub cpu: u16,
    pub res: i64,
    pub args: [u64; 6],
}

#[derive(Clone, Copy, Debug, Default)]
struct Blob<'a> {
    flags: u8,
    data: &'a [u8],
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// A parsed record: header and blobs by tag.
struct Record<'a> {
    hdr: Header,
    blobs: [Option<Blob<'a>>; N_TAGS],
}

fn parse(rec: &[u8]) -> Option<Record<'_>> {
    let mut args = [0u64; 6];
    for (i, a) in args.iter_mut().enumerate() {
        *a = u64_at(rec, 32 + i * 8)?;
    }
    let hdr = Header {
        ts: u64_at(rec, 0)?,
        tid: u32_at(rec, 8)?,
        pid: u32_at(rec, 12)?,
        kind: u16_at(rec, 16)?,
        nr: u16_at(rec, 18)?,
        cpu: u16_at(rec, 22)?,
        res: u64_at(rec, 24)? as i64,
        args,
    };
    // `len` is a u32 whose lower 16 bits are the length and upper 16 bits the CPU
    // (`hdr_set_len` in bpf/vigil.bpf.c); records are shorter than 64 KiB.
    let len = usize::from(u16_at(rec, 20)?).min(rec.len());
    let mut blobs = [None; N_TAGS];
    let mut off = HDR_LEN;
    while off + BLOB_HDR_LEN <= len {
        let tag = *rec.get(off)?;
        let flags = *rec.get(off + 1)?;
        let blen = u32_at(rec, off + 4)? as usize;
        let start = off + BLOB_HDR_LEN;
        let Some(data) = start.checked_add(blen).and_then(|end| rec.get(start..end)) else {
            break;
        };
        if let Some(slot) = blobs.get_mut(usize::from(tag)) {
            *slot = Some(Blob { flags, data });
        }
        off = (start + blen + 7) & !7;
    }
    Some(Record { hdr, blobs })
}

/// Builds events from records; counts what it could not decode.
#[derive(Debug)]
pub struct Decoder {
    /// Added to kernel boot-clock timestamps to get wall-clock nanoseconds.
    pub boot_offset: u64,
    next_num: u64,
    pub malformed: u64,
    /// Header-only floor records seen (`vigil bench` floor runs).
    pub floor: u64,
}

impl Decoder {
    pub fn new(boot_offset: u64) -> Decoder {
        Decoder {
            boot_offset,
            next_num: 1,
            malformed: 0,
            floor: 0,
        }
    }

    /// Decodes every `[u32 length][record]` entry of `raw` into `out`.
    pub fn decode_all(&mut self, raw: &[u8], out: &mut Vec<Event>) {
        let mut off = 0;
        while let Some(len) = u32_at(raw, off) {
            let start = off + 4;
            let Some(rec) = raw.get(start..start + len as usize) else {
                self.malformed += 1;
                return;
            };
            if u16_at(rec, 16) == Some(REC_FLOOR) {
                self.floor += 1;
            } else {
                match self.decode(rec) {
                    Some(evt) => out.push(evt),
                    None => self.malformed += 1,
                }
            }
            off = start + len as usize;
        }
    }

    /// One record; `None` when malformed.
    pub fn decode(&mut self, rec: &[u8]) -> Option<Event> {
        let r = parse(rec)?;
        let h = r.hdr;
        let mut evt = match h.kind {
            REC_SYSCALL => syscall_event(&r)?,
            REC_FORK => fork_event(&r)?,
            REC_EXEC => exec_event(&r)?,
            REC_EXIT => exit_event(&r)?,
            _ => return None,
        };
        evt.num = self.next_num;
        self.next_num += 1;
        evt.ts = h.ts.saturating_add(self.boot_offset);
        evt.tid = i64::from(h.tid);
        evt.pid = i64::from(h.pid);
        evt.cpu = Some(u32::from(h.cpu));
        Some(evt)
    }
}

fn new_event(etype: EventType, res: i64) -> Event {
    Event {
        num: 0,
        ts: 0,
        tid: 0,
        pid: 0,
        etype,
        res,
        params: vec![Param::None; etype.spec().params.len()],
        truncated: 0,
        cpu: None,
    }
}

fn set(evt: &mut Event, name: &str, value: Param) {
    if let Some(i) = evt.etype.spec().param_index(name) {
        evt.params[i] = value;
    }
}

/// A raw register as a parameter of `kind`.
fn arg_param(kind: ParamKind, raw: u64) -> Param {
    match kind {
        ParamKind::Fd | ParamKind::Int | ParamKind::Pid => Param::Int(i64::from(raw as u32 as i32)),
        ParamKind::Uid | ParamKind::Gid => Param::Uint(u64::from(raw as u32)),
        ParamKind::Flags(FlagTable::Clone) | ParamKind::Uint | ParamKind::AbsTime => {
            Param::Uint(raw)
        }
        ParamKind::Flags(_) => Param::Uint(u64::from(raw as u32)),
        _ => Param::None,
    }
}

fn blob_bytes(blob: Option<Blob<'_>>) -> (Param, bool) {
    match blob {
        Some(b) if b.flags & BLOB_FAULT == 0 => {
            (Param::Bytes(b.data.to_vec()), b.flags & BLOB_TRUNCATED != 0)
        }
        _ => (Param::None, false),
    }
}

/// A `struct sockaddr` as the kernel copied it.
pub fn parse_sockaddr(b: &[u8]) -> Option<SockAddr> {
    let family = u16_at(b, 0)?;
    match family {
        2 => {
            let port = u16::from_be_bytes(b.get(2..4)?.try_into().ok()?);
            let ip: [u8; 4] = b.get(4..8)?.try_into().ok()?;
            Some(SockAddr::Inet {
                ip: IpAddr::V4(Ipv4Addr::from(ip)),
                port,
            })
        }
        10 => {
            let port = u16::from_be_bytes(b.get(2..4)?.try_into().ok()?);
            let ip: [u8; 16] = b.get(8..24)?.try_into().ok()?;
            Some(SockAddr::Inet {
                ip: IpAddr::V6(Ipv6Addr::from(ip)),
                port,
            })
        }
        1 => {
            let path = b.get(2..).unwrap_or(&[]);
            // Abstract sockets start with NUL (Falco shows them with a leading `@`).
            let path = match path.split_first() {
                Some((0, rest)) => {
                    let mut p = b"@".to_vec();
                    p.extend(rest.iter().take_while(|&&c| c != 0));
                    p
                }
                _ => path.iter().take_while(|&&c| c != 0).copied().collect(),
            };
            Some(SockAddr::Unix { path })
        }
        other => Some(SockAddr::Other { family: other }),
    }
}

/// The kernel's `struct tuple` (local address first) → (l4proto, local, remote).
fn parse_tuple(b: &[u8]) -> Option<(u8, IpAddr, u16, IpAddr, u16)> {
    let family = u16_at(b, 0)?;
    let l4 = *b.get(2)?;
    let sport = u16_at(b, 4)?;
    let dport = u16::from_be(u16_at(b, 6)?);
    let (sip, dip) = if family == 2 {
        let s: [u8; 4] = b.get(8..12)?.try_into().ok()?;
        let d: [u8; 4] = b.get(24..28)?.try_into().ok()?;
        (IpAddr::V4(s.into()), IpAddr::V4(d.into()))
    } else {
        let s: [u8; 16] = b.get(8..24)?.try_into().ok()?;
        let d: [u8; 16] = b.get(24..40)?.try_into().ok()?;
        (IpAddr::V6(s.into()), IpAddr::V6(d.into()))
    };
    Some((l4, sip, sport, dip, dport))
}

fn tuple_param(r: &Record<'_>, accept: bool, addr: Option<SockAddr>) -> Param {
    let Some((l4, lip, lport, rip, rport)) =
        r.blobs[usize::from(TAG_TUPLE)].and_then(|b| parse_tuple(b.data))
    else {
        return match addr {
            Some(SockAddr::Unix { path }) => Param::Tuple(SockTuple::Unix { path }),
            _ => Param::None,
        };
    };
    // An unconnected datagram socket: the destination is the call's address.
    let (rip, rport) = match addr {
        Some(SockAddr::Inet { ip, port }) if rip.is_unspecified() && rport == 0 => (ip, port),
        _ => (rip, rport),
    };
    let tuple = if accept {
        SockTuple::Inet {
            l4proto: l4,
            src_ip: rip,
            src_port: rport,
            dst_ip: lip,
            dst_port: lport,
        }
    } else {
        SockTuple::Inet {
            l4proto: l4,
            src_ip: lip,
            src_port: lport,
            dst_ip: rip,
            dst_port: rport,
        }
    };
    Param::Tuple(tuple)
}

fn syscall_event(r: &Record<'_>) -> Option<Event> {
    let h = &r.hdr;
    let etype = table::by_syscall_nr(arch::event_nr(h.nr)?)?;
    let mut evt = new_event(etype, h.res);
    let Some(def) = def_for(etype) else {
        return Some(evt);
    };
    let spec = etype.spec();
    let blob = |n: u8| r.blobs.get(usize::from(n)).copied().flatten();
    // The destination address of `sendto` / `sendmsg` completes an unconnected socket's tuple.
    let dest = match spec.name {
        "sendto" => blob(4),
        "sendmsg" => blob(TAG_MSG_NAME),
        _ => None,
    }
    .filter(|b| b.flags & BLOB_FAULT == 0)
    .and_then(|b| parse_sockaddr(b.data));
    for (i, (src, ps)) in def.params.iter().zip(spec.params).enumerate() {
        let (value, cut) = match *src {
            Src::Arg(n) => (
                arg_param(ps.kind, h.args.get(usize::from(n)).copied().unwrap_or(0)),
                false,
            ),
            Src::Str(n) | Src::Short(n) => blob_bytes(blob(n)),
            Src::Addr(n) => (
                blob(n)
                    .filter(|b| b.flags & BLOB_FAULT == 0)
                    .and_then(|b| parse_sockaddr(b.data))
                    .map_or(Param::None, Param::Addr),
                false,
            ),
            Src::Pair(n, k) => (
                blob(n)
                    .and_then(|b| u32_at(b.data, usize::from(k) * 4))
                    .map_or(Param::None, |v| Param::Int(i64::from(v as i32))),
                false,
            ),
            Src::How(k) => (
                blob(2)
                    .and_then(|b| u64_at(b.data, usize::from(k) * 8))
                    .map_or(Param::None, Param::Uint),
                false,
            ),
            Src::Tuple => {
                let addr = dest.clone().or_else(|| {
                    // connect: the address the call named (Unix sockets have no inet tuple).
                    blob(1)
                        .filter(|_| spec.name == "connect")
                        .and_then(|b| parse_sockaddr(b.data))
                });
                (tuple_param(r, false, addr), false)
            }
            Src::TupleRes => (tuple_param(r, true, None), false),
            Src::MsgSize => match blob(TAG_MSG) {
                Some(b) if b.flags & BLOB_FAULT == 0 => (
                    u64_at(b.data, 0).map_or(Param::None, Param::Uint),
                    b.flags & BLOB_TRUNCATED != 0,
                ),
                _ => (Param::None, false),
            },
            Src::Absent => (Param::None, false),
        };
        evt.params[i] = value;
        if cut && i < 64 {
            evt.truncated |= 1 << i;
        }
    }
    Some(evt)
}

fn fork_event(r: &Record<'_>) -> Option<Event> {
    let h = &r.hdr;
    let etype = table::by_syscall_nr(arch::event_nr(h.nr)?)?;
    let info = r.blobs[usize::from(TAG_FORK_INFO)]?.data;
    let flags = u64_at(info, 0)?;
    let vtid = u32_at(info, 16)?;
    let vpid = u32_at(info, 20)?;
    let mut evt = new_event(etype, h.res);
    set(&mut evt, "flags", Param::Uint(flags));
    set(&mut evt, "vtid", Param::Int(i64::from(vtid)));
    set(&mut evt, "vpid", Param::Int(i64::from(vpid)));
    Some(evt)
}

/// Splits a NUL-separated area (argv, environ); a trailing NUL ends the last entry.
fn split_area(area: &[u8]) -> Vec<Vec<u8>> {
    if area.is_empty() {
        return Vec::new();
    }
    let area = area.strip_suffix(b"\0").unwrap_or(area);
    area.split(|&b| b == 0).map(<[u8]>::to_vec).collect()
}

fn exec_event(r: &Record<'_>) -> Option<Event> {
    let h = &r.hdr;
    let etype = table::by_syscall_nr(arch::event_nr(h.nr)?)?;
    let info = r.blobs[usize::from(TAG_EXEC_INFO)]?.data;
    let mut evt = new_event(etype, 0);
    let spec = etype.spec();
    let mark = |evt: &mut Event, name: &str, cut: bool| {
        if let Some(i) = spec.param_index(name) {
            if cut && i < 64 {
                evt.truncated |= 1 << i;
            }
        }
    };
    let (mut filename, mut cut) = blob_bytes(r.blobs[usize::from(TAG_FILENAME)]);
    let path_name = if spec.name == "execveat" {
        // The pathname argument as passed, copied at entry (the kernel's filename is
        // `/dev/fd/N/...` for a dirfd-relative call); the kernel's name if it is missing.
        if let Some(b) = r.blobs[1] {
            (filename, cut) = blob_bytes(Some(b));
        }
        set(
            &mut evt,
            "dirfd",
            Param::Int(i64::from(h.args[0] as u32 as i32)),
        );
        set(&mut evt, "flags", Param::Uint(u64::from(h.args[4] as u32)));
        "pathname"
    } else {
        "filename"
    };
    set(&mut evt, path_name, filename);
    mark(&mut evt, path_name, cut);

    let area = |tag: u8| match r.blobs[usize::from(tag)] {
        Some(b) if b.flags & BLOB_FAULT == 0 => {
            (Some(split_area(b.data)), b.flags & BLOB_TRUNCATED != 0)
        }
        _ => (None, false),
    };
    let (argv, argv_cut) = area(TAG_ARGV);
    if let Some(mut argv) = argv {
        let exe = if argv.is_empty() {
            Vec::new()
        } else {
            argv.remove(0)
        };
        set(&mut evt, "exe", Param::Bytes(exe));
        set(&mut evt, "args", Param::List(argv));
        mark(&mut evt, "args", argv_cut);
    }
    let (env, env_cut) = area(TAG_ENV);
    if let Some(env) = env {
        set(&mut evt, "env", Param::List(env));
        mark(&mut evt, "env", env_cut);
    }
    if let Some(comm) = r.blobs[usize::from(TAG_COMM)] {
        let c = comm.data;
        let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
        set(&mut evt, "comm", Param::Bytes(c[..end].to_vec()));
    }
    for (tag, name) in [
        (TAG_CWD, "cwd"),
        (TAG_EXEPATH, "trusted_exepath"),
        (TAG_CGROUP, "cgroups"),
    ] {
        let (value, cut) = blob_bytes(r.blobs[usize::from(tag)]);
        set(&mut evt, name, value);
        mark(&mut evt, name, cut);
    }
    let u = |i: usize| u32_at(info, i * 4).map(u64::from);
    let int = |name: &str, i: usize, evt: &mut Event| {
        if let Some(v) = u(i) {
            set(evt, name, Param::Int(v as u32 as i32 as i64));
        }
    };
    int("tid", 0, &mut evt);
    int("pid", 1, &mut evt);
    int("ptid", 2, &mut evt);
    for (name, i) in [
        ("uid", 3),
        ("gid", 4),
        ("euid", 5),
        ("egid", 6),
        ("loginuid", 7),
        ("tty", 8),
    ] {
        if let Some(v) = u(i) {
            set(&mut evt, name, Param::Uint(v));
        }
    }
    for (name, off) in [
        ("cap_inheritable", 40),
        ("cap_permitted", 48),
        ("cap_effective", 56),
        ("exe_ino", 64),
        ("exe_ino_ctime", 72),
        ("exe_ino_mtime", 80),
    ] {
        if let Some(v) = u64_at(info, off) {
            set(&mut evt, name, Param::Uint(v));
        }
    }
    // `EXE_*` bits (`table::exe_flags`): the kernel side sets `FROM_MEMFD`.
    if let Some(v) = u32_at(info, 96) {
        set(&mut evt, "exe_flags", Param::Uint(u64::from(v)));
    }
    Some(evt)
}

fn exit_event(r: &Record<'_>) -> Option<Event> {
    let etype = table::by_name("procexit")?;
    let info = r.blobs[usize::from(TAG_EXIT_INFO)]?.data;
    let code = u32_at(info, 0)? as i32;
    let mut evt = new_event(etype, 0);
    set(&mut evt, "status", Param::Int(i64::from(code)));
    set(&mut evt, "ret", Param::Int(i64::from((code >> 8) & 0xff)));
    set(
        &mut evt,
        "sig",
        Param::Uint(u64::from((code & 0x7f) as u32)),
    );
    set(
        &mut evt,
        "core",
        Param::Uint(u64::from(((code >> 7) & 1) as u32)),
    );
    Some(evt)
}

/// Test helpers: builds records as the kernel side writes them.
#[cfg(test)]
pub(crate) mod build {

    pub struct Rec(pub Vec<u8>);

    impl Rec {
        /// `nr` is the event (x86-64) number; the record holds the kernel's, as the BPF side
        /// writes it on the architecture the tests run on.
        pub fn new(kind: u16, nr: u16, tid: u32, pid: u32, res: i64, args: [u64; 6]) -> Rec {
            let nr = vigil_event::arch::native_nr(nr).unwrap_or(u16::MAX);
            let mut b = Vec::new();
            b.extend_from_slice(&1000u64.to_le_bytes());
            b.extend_from_slice(&tid.to_le_bytes());
            b.extend_from_slice(&pid.to_le_bytes());
            b.extend_from_slice(&kind.to_le_bytes());
            b.extend_from_slice(&nr.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
            b.extend_from_slice(&res.to_le_bytes());
            for a in args {
                b.extend_from_slice(&a.to_le_bytes());
            }
            Rec(b)
        }

        pub fn blob(mut self, tag: u8, flags: u8, data: &[u8]) -> Rec {
            self.0.push(tag);
            self.0.push(flags);
            self.0.extend_from_slice(&[0, 0]);
            self.0.extend_from_slice(&(data.len() as u32).to_le_bytes());
            self.0.extend_from_slice(data);
            while self.0.len() % 8 != 0 {
                self.0.push(0);
            }
            self
        }

        pub fn done(self) -> Vec<u8> {
            self.on_cpu(0)
        }

        /// The record as written on `cpu` (the upper half of the `len` word).
        pub fn on_cpu(mut self, cpu: u16) -> Vec<u8> {
            let len = u16::try_from(self.0.len()).expect("test records are shorter than 64 KiB");
            self.0[20..22].copy_from_slice(&len.to_le_bytes());
            self.0[22..24].copy_from_slice(&cpu.to_le_bytes());
            self.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::build::Rec;
    use super::*;

    fn t(name: &str) -> EventType {
        table::by_name(name).unwrap()
    }

    #[test]
    fn openat_with_path_flags_and_result() {
        let rec = Rec::new(
            REC_SYSCALL,
            257,
            10,
            9,
            3,
            [(-100i64) as u64, 0xdead, 0o2101, 0o644, 0, 0],
        )
        .blob(1, 0, b"/etc/shadow")
        .done();
        let mut d = Decoder::new(5);
        let e = d.decode(&rec).unwrap();
        assert_eq!(e.etype, t("openat"));
        assert_eq!((e.tid, e.pid, e.res, e.ts, e.num), (10, 9, 3, 1005, 1));
        assert_eq!(e.param_by_name("dirfd"), &Param::Int(-100));
        assert_eq!(
            e.param_by_name("name"),
            &Param::Bytes(b"/etc/shadow".to_vec())
        );
        assert_eq!(e.param_by_name("flags"), &Param::Uint(0o2101));
        assert_eq!(e.param_by_name("mode"), &Param::Uint(0o644));
        assert_eq!(e.truncated, 0);
    }

    #[test]
    fn truncation_and_faults_are_flagged_not_silent() {
        let rec = Rec::new(REC_SYSCALL, 82, 1, 1, 0, [1, 2, 0, 0, 0, 0])
            .blob(0, BLOB_TRUNCATED, b"/very/long")
            .blob(1, BLOB_FAULT, b"")
            .done();
        let e = Decoder::new(0).decode(&rec).unwrap();
        assert!(e.is_truncated(0));
        assert_eq!(
            e.param(1),
            &Param::None,
            "a fault leaves the parameter <NA>"
        );
    }

    #[test]
    fn connect_tuple_and_address() {
        let mut sa = vec![2, 0];
        sa.extend_from_slice(&8080u16.to_be_bytes());
        sa.extend_from_slice(&[127, 0, 0, 1]);
        sa.extend_from_slice(&[0; 8]);
        let mut tuple = vec![0u8; 40];
        tuple[0..2].copy_from_slice(&2u16.to_le_bytes());
        tuple[2] = 6;
        tuple[4..6].copy_from_slice(&40000u16.to_le_bytes());
        tuple[6..8].copy_from_slice(&8080u16.to_be_bytes());
        tuple[8..12].copy_from_slice(&[127, 0, 0, 1]);
        tuple[24..28].copy_from_slice(&[127, 0, 0, 1]);
        let rec = Rec::new(REC_SYSCALL, 42, 5, 5, 0, [4, 1, 16, 0, 0, 0])
            .blob(1, 0, &sa)
            .blob(TAG_TUPLE, 0, &tuple)
            .done();
        let e = Decoder::new(0).decode(&rec).unwrap();
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        assert_eq!(e.param_by_name("fd"), &Param::Int(4));
        assert_eq!(
            e.param_by_name("addr"),
            &Param::Addr(SockAddr::Inet { ip: lo, port: 8080 })
        );
        assert_eq!(
            e.param_by_name("tuple"),
            &Param::Tuple(SockTuple::Inet {
                l4proto: 6,
                src_ip: lo,
                src_port: 40000,
                dst_ip: lo,
                dst_port: 8080
            })
        );
        // accept reverses the roles: remote first.
        let rec = Rec::new(REC_SYSCALL, 43, 5, 5, 7, [3, 0, 0, 0, 0, 0])
            .blob(TAG_TUPLE, 0, &tuple)
            .done();
        let e = Decoder::new(0).decode(&rec).unwrap();
        match e.param_by_name("tuple") {
            Param::Tuple(SockTuple::Inet {
                src_port, dst_port, ..
            }) => {
                assert_eq!((*src_port, *dst_port), (8080, 40000))
            }
            other => panic!("no tuple: {other:?}"),
        }
    }

    #[test]
    fn exec_carries_the_new_image() {
        let mut info = vec![0u8; 96];
        for (i, v) in [42u32, 42, 7, 1000, 1001, 1002, 1003, 1000, 34816, 42]
            .iter()
            .enumerate()
        {
            info[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        info[56..64].copy_from_slice(&0x1ffu64.to_le_bytes());
        let rec = Rec::new(REC_EXEC, 59, 42, 42, 0, [0; 6])
            .blob(TAG_FILENAME, 0, b"/usr/bin/cat")
            .blob(TAG_ARGV, BLOB_TRUNCATED, b"cat\0/etc/shadow\0")
            .blob(TAG_ENV, 0, b"A=1\0B=2\0")
            .blob(TAG_COMM, 0, b"cat\0\0\0\0\0\0\0\0\0\0\0\0\0")
            .blob(TAG_CWD, 0, b"/root")
            .blob(TAG_EXEPATH, 0, b"/usr/bin/cat")
            .blob(TAG_CGROUP, BLOB_TRUNCATED, b"/system.slice/x.scope")
            .blob(TAG_EXEC_INFO, 0, &info)
            .done();
        let e = Decoder::new(0).decode(&rec).unwrap();
        assert_eq!(e.etype, t("execve"));
        assert_eq!(
            e.param_by_name("filename"),
            &Param::Bytes(b"/usr/bin/cat".to_vec())
        );
        assert_eq!(e.param_by_name("exe"), &Param::Bytes(b"cat".to_vec()));
        assert_eq!(
            e.param_by_name("args"),
            &Param::List(vec![b"/etc/shadow".to_vec()])
        );
        assert_eq!(
            e.param_by_name("env"),
            &Param::List(vec![b"A=1".to_vec(), b"B=2".to_vec()])
        );
        assert_eq!(e.param_by_name("comm"), &Param::Bytes(b"cat".to_vec()));
        assert_eq!(e.param_by_name("ptid"), &Param::Int(7));
        assert_eq!(e.param_by_name("uid"), &Param::Uint(1000));
        assert_eq!(e.param_by_name("egid"), &Param::Uint(1003));
        assert_eq!(e.param_by_name("tty"), &Param::Uint(34816));
        assert_eq!(e.param_by_name("cap_effective"), &Param::Uint(0x1ff));
        assert!(e.is_truncated(e.etype.spec().param_index("args").unwrap()));
        assert_eq!(e.param_by_name("cwd"), &Param::Bytes(b"/root".to_vec()));
        assert_eq!(
            e.param_by_name("trusted_exepath"),
            &Param::Bytes(b"/usr/bin/cat".to_vec())
        );
        assert!(e.is_truncated(e.etype.spec().param_index("cgroups").unwrap()));
    }

    #[test]
    fn exec_of_a_memfd_carries_its_flag_and_name() {
        let mut info = vec![0u8; 104];
        info[96..100].copy_from_slice(&4u32.to_le_bytes());
        let rec = Rec::new(REC_EXEC, 322, 9, 9, 0, [3, 0, 0, 0, 0x1000, 0])
            .blob(TAG_FILENAME, 0, b"/dev/fd/3")
            .blob(1, 0, b"")
            .blob(TAG_EXEPATH, 0, b"memfd:payload")
            .blob(TAG_EXEC_INFO, 0, &info)
            .done();
        let e = Decoder::new(0).decode(&rec).unwrap();
        assert_eq!(
            e.param_by_name("exe_flags"),
            &Param::Uint(table::exe_flags::FROM_MEMFD)
        );
        assert_eq!(
            e.param_by_name("trusted_exepath"),
            &Param::Bytes(b"memfd:payload".to_vec())
        );
        // A record without the flags word (a shorter exec_info) leaves the parameter absent.
        let rec = Rec::new(REC_EXEC, 59, 9, 9, 0, [0; 6])
            .blob(TAG_FILENAME, 0, b"/bin/true")
            .blob(TAG_EXEC_INFO, 0, &[0u8; 96])
            .done();
        let e = Decoder::new(0).decode(&rec).unwrap();
        assert_eq!(e.param_by_name("exe_flags"), &Param::None);
    }

    #[test]
    fn execveat_pathname_is_the_argument_as_passed() {
        let info = vec![0u8; 96];
        let rec = Rec::new(REC_EXEC, 322, 9, 9, 0, [3, 0, 0, 0, 0, 0])
            .blob(TAG_FILENAME, 0, b"/dev/fd/3/true")
            .blob(1, 0, b"true")
            .blob(TAG_EXEC_INFO, 0, &info)
            .done();
        let e = Decoder::new(0).decode(&rec).unwrap();
        assert_eq!(e.etype, t("execveat"));
        assert_eq!(e.param_by_name("pathname"), &Param::Bytes(b"true".to_vec()));
        assert_eq!(e.param_by_name("dirfd"), &Param::Int(3));
        // Without the copied argument (the entry copy failed or was dropped): the kernel's name.
        let rec = Rec::new(REC_EXEC, 322, 9, 9, 0, [3, 0, 0, 0, 0, 0])
            .blob(TAG_FILENAME, 0, b"/dev/fd/3/true")
            .blob(TAG_EXEC_INFO, 0, &info)
            .done();
        let e = Decoder::new(0).decode(&rec).unwrap();
        assert_eq!(
            e.param_by_name("pathname"),
            &Param::Bytes(b"/dev/fd/3/true".to_vec())
        );
    }

    #[test]
    fn sendmsg_size_and_destination() {
        let mut tuple = vec![0u8; 40];
        tuple[0..2].copy_from_slice(&2u16.to_le_bytes());
        tuple[2] = 17;
        tuple[4..6].copy_from_slice(&5000u16.to_le_bytes());
        tuple[8..12].copy_from_slice(&[127, 0, 0, 1]);
        let mut name = vec![2, 0];
        name.extend_from_slice(&53u16.to_be_bytes());
        name.extend_from_slice(&[10, 0, 0, 1]);
        name.extend_from_slice(&[0; 8]);
        let rec = Rec::new(REC_SYSCALL, 46, 5, 5, 11, [4, 0x1000, 0, 0, 0, 0])
            .blob(TAG_TUPLE, 0, &tuple)
            .blob(TAG_MSG, 0, &11u64.to_le_bytes())
            .blob(TAG_MSG_NAME, 0, &name)
            .done();
        let e = Decoder::new(0).decode(&rec).unwrap();
        assert_eq!(e.etype, t("sendmsg"));
        assert_eq!(e.param_by_name("size"), &Param::Uint(11));
        assert_eq!(
            e.param_by_name("tuple"),
            &Param::Tuple(SockTuple::Inet {
                l4proto: 17,
                src_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
                src_port: 5000,
                dst_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
                dst_port: 53
            })
        );
        // More iovecs than the kernel sums: the size is flagged truncated, never silent.
        let rec = Rec::new(REC_SYSCALL, 46, 5, 5, 11, [4, 0x1000, 0, 0, 0, 0])
            .blob(TAG_MSG, BLOB_TRUNCATED, &64u64.to_le_bytes())
            .done();
        let e = Decoder::new(0).decode(&rec).unwrap();
        assert_eq!(e.param_by_name("size"), &Param::Uint(64));
        assert!(e.is_truncated(1));
        assert_eq!(e.param_by_name("tuple"), &Param::None);
    }

    #[test]
    fn fork_and_exit() {
        let mut info = vec![0u8; 24];
        info[0..8].copy_from_slice(&0x11u64.to_le_bytes());
        info[16..20].copy_from_slice(&3u32.to_le_bytes());
        info[20..24].copy_from_slice(&3u32.to_le_bytes());
        let rec = Rec::new(REC_FORK, 56, 1, 1, 77, [0x11, 0, 0, 0, 0, 0])
            .blob(TAG_FORK_INFO, 0, &info)
            .done();
        let e = Decoder::new(0).decode(&rec).unwrap();
        assert_eq!((e.etype, e.res), (t("clone"), 77));
        assert_eq!(e.param_by_name("flags"), &Param::Uint(0x11));
        assert_eq!(e.param_by_name("vpid"), &Param::Int(3));
        let rec = Rec::new(REC_EXIT, 0, 77, 77, 0, [0; 6])
            .blob(TAG_EXIT_INFO, 0, &[0x00, 0x02, 0, 0, 0, 0, 0, 0])
            .done();
        let e = Decoder::new(0).decode(&rec).unwrap();
        assert_eq!(e.etype, t("procexit"));
        assert_eq!(e.param_by_name("ret"), &Param::Int(2));
    }

    #[test]
    fn the_cpu_rides_in_the_upper_half_of_len() {
        let name = b"/etc/passwd";
        for cpu in [0u16, 1, 7, 4095, u16::MAX] {
            let rec = Rec::new(REC_SYSCALL, 257, 1, 1, 3, [0; 6])
                .blob(1, 0, name)
                .on_cpu(cpu);
            let e = Decoder::new(0).decode(&rec).unwrap();
            assert_eq!(e.cpu, Some(u32::from(cpu)), "cpu {cpu}");
            // The length is the lower half alone: the path blob is still found.
            assert_eq!(
                e.param_by_name("name"),
                &Param::Bytes(b"/etc/passwd".to_vec()),
                "cpu {cpu}"
            );
        }
        let rec = Rec::new(REC_EXIT, 0, 77, 77, 0, [0; 6])
            .blob(TAG_EXIT_INFO, 0, &[0; 8])
            .on_cpu(1);
        assert_eq!(Decoder::new(0).decode(&rec).unwrap().cpu, Some(1));
        // A length word whose lower half exceeds the record reads only the bytes there are.
        let mut rec = Rec::new(REC_SYSCALL, 257, 1, 1, 3, [0; 6])
            .blob(1, 0, name)
            .on_cpu(1);
        rec[20..22].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(Decoder::new(0).decode(&rec).unwrap().cpu, Some(1));
    }

    #[test]
    fn garbage_never_panics() {
        let mut d = Decoder::new(0);
        let mut out = Vec::new();
        for len in 0..200usize {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
            let _ = d.decode(&junk);
            d.decode_all(&junk, &mut out);
        }
        let mut huge = Rec::new(REC_SYSCALL, 257, 1, 1, 0, [0; 6])
            .blob(1, 0, b"x")
            .done();
        huge[HDR_LEN + 4..HDR_LEN + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(
            d.decode(&huge).is_some(),
            "a bad blob length ends the blob list"
        );
        assert!(d.malformed > 0);
    }
}
