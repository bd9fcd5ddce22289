//! The binary encoding (`docs/capture-format.md`, "Binary"): `VIGILCAP`, a version, then
//! length-prefixed records. Integers are LEB128 varints (signed ones zigzag-encoded), event
//! timestamps and numbers are deltas from the previous event, and event types are introduced by
//! *event type records* that carry the type's name and parameter schema, so a file stays readable
//! when the table grows or reorders between builds.
//!
//! The reader holds one record in memory at a time; a record's declared length is bounded by
//! [`MAX_RECORD_LEN`] and its buffer only grows as bytes actually arrive, and every length inside
//! a record is bounded by the bytes left in it.

use std::io::{BufRead, Read as _, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{
    check_encodable, normalize_params, repr, CaptureError, Decode, Position, Repr, MAX_RECORD_LEN,
};
use crate::flags::ALL_TABLES;
use crate::table;
use crate::{
    ContainerInfo, DnsName, Event, EventType, FdInfo, FdType, GroupInfo, MountInfo, Param,
    ParamKind, Snapshot, SockAddr, SockTuple, ThreadInfo, UserInfo,
};

/// The first eight bytes of every binary capture.
pub const MAGIC: &[u8; 8] = b"VIGILCAP";
/// The format version this module reads and writes (a `u16`, little-endian, after the magic).
pub const VERSION: u16 = 1;

// A record length is read as at most five varint bytes.
const _: () = assert!(MAX_RECORD_LEN < 1 << 35);

const REC_HEADER: u8 = 1;
const REC_THREAD: u8 = 2;
const REC_EVENT_TYPE: u8 = 3;
const REC_EVENT: u8 = 4;
/// Record kinds from this value up are optional: readers that do not know them skip them.
const REC_OPTIONAL: u8 = 0x80;
/// The snapshot's DNS names (optional, so readers that predate it skip it).
const REC_DNS: u8 = 0x80;

fn record_name(kind: u8) -> &'static str {
    match kind {
        REC_HEADER => "header record",
        REC_THREAD => "thread record",
        REC_EVENT_TYPE => "event type record",
        REC_EVENT => "event record",
        REC_DNS => "dns record",
        _ => "record",
    }
}

// ---- Primitive encoding ----

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn put_zigzag(out: &mut Vec<u8>, v: i64) {
    put_varint(out, zigzag(v));
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_list(out: &mut Vec<u8>, items: &[Vec<u8>]) {
    put_varint(out, items.len() as u64);
    for item in items {
        put_bytes(out, item);
    }
}

fn put_ip(out: &mut Vec<u8>, ip: &IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            out.push(4);
            out.extend_from_slice(&v4.octets());
        }
        IpAddr::V6(v6) => {
            out.push(6);
            out.extend_from_slice(&v6.octets());
        }
    }
}

const ADDR_OTHER: u8 = 0;
const ADDR_UNIX: u8 = 1;
const ADDR_INET: u8 = 2;

fn put_sockaddr(out: &mut Vec<u8>, addr: &SockAddr) {
    match addr {
        SockAddr::Other { family } => {
            out.push(ADDR_OTHER);
            put_varint(out, u64::from(*family));
        }
        SockAddr::Unix { path } => {
            out.push(ADDR_UNIX);
            put_bytes(out, path);
        }
        SockAddr::Inet { ip, port } => {
            out.push(ADDR_INET);
            put_ip(out, ip);
            out.extend_from_slice(&port.to_le_bytes());
        }
    }
}

fn put_socktuple(out: &mut Vec<u8>, tuple: &SockTuple) {
    match tuple {
        SockTuple::Unix { path } => {
            out.push(ADDR_UNIX);
            put_bytes(out, path);
        }
        SockTuple::Inet {
            l4proto,
            src_ip,
            src_port,
            dst_ip,
            dst_port,
        } => {
            out.push(ADDR_INET);
            out.push(*l4proto);
            put_ip(out, src_ip);
            out.extend_from_slice(&src_port.to_le_bytes());
            put_ip(out, dst_ip);
            out.extend_from_slice(&dst_port.to_le_bytes());
        }
    }
}

fn put_param(out: &mut Vec<u8>, param: &Param) {
    match param {
        Param::None => {}
        Param::Int(v) => put_zigzag(out, *v),
        Param::Uint(v) => put_varint(out, *v),
        Param::Bytes(b) => put_bytes(out, b),
        Param::List(items) => put_list(out, items),
        Param::Addr(addr) => put_sockaddr(out, addr),
        Param::Tuple(tuple) => put_socktuple(out, tuple),
    }
}

/// Parameter kinds as stored in event type records: `(code, flag table index)`.
fn kind_code(kind: ParamKind) -> (u8, Option<u8>) {
    match kind {
        ParamKind::Fd => (1, None),
        ParamKind::Int => (2, None),
        ParamKind::Uint => (3, None),
        ParamKind::Pid => (4, None),
        ParamKind::Uid => (5, None),
        ParamKind::Gid => (6, None),
        ParamKind::Flags(table) => {
            let index = ALL_TABLES
                .iter()
                .position(|t| *t == table)
                .expect("ALL_TABLES lists every flag table");
            (7, Some(index as u8))
        }
        ParamKind::Path => (8, None),
        ParamKind::Str => (9, None),
        ParamKind::Buf => (10, None),
        ParamKind::StrList => (11, None),
        ParamKind::SockAddr => (12, None),
        ParamKind::SockTuple => (13, None),
        ParamKind::AbsTime => (14, None),
    }
}

fn kind_from_code(code: u8, table: Option<u8>) -> Option<ParamKind> {
    Some(match code {
        1 => ParamKind::Fd,
        2 => ParamKind::Int,
        3 => ParamKind::Uint,
        4 => ParamKind::Pid,
        5 => ParamKind::Uid,
        6 => ParamKind::Gid,
        7 => ParamKind::Flags(*ALL_TABLES.get(usize::from(table?))?),
        8 => ParamKind::Path,
        9 => ParamKind::Str,
        10 => ParamKind::Buf,
        11 => ParamKind::StrList,
        12 => ParamKind::SockAddr,
        13 => ParamKind::SockTuple,
        14 => ParamKind::AbsTime,
        _ => return None,
    })
}

const FD_FILE: u8 = 0;
const FD_IPV4: u8 = 2;
const FD_IPV6: u8 = 3;

fn fd_kind_code(kind: FdType) -> u8 {
    match kind {
        FdType::File => FD_FILE,
        FdType::Directory => 1,
        FdType::Ipv4 => FD_IPV4,
        FdType::Ipv6 => FD_IPV6,
        FdType::Unix => 4,
        FdType::Pipe => 5,
        FdType::Memfd => 6,
        FdType::Event => 7,
        FdType::Signalfd => 8,
        FdType::Eventpoll => 9,
        FdType::Inotify => 10,
        FdType::Timerfd => 11,
        FdType::Netlink => 12,
        FdType::Bpf => 13,
        FdType::Userfaultfd => 14,
        FdType::IoUring => 15,
        FdType::Other => 16,
    }
}

// ---- Primitive decoding ----

/// Reads the values of one record's payload, which is entirely in memory.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    /// The file offset of `data[0]`.
    base: u64,
    what: &'static str,
}

impl<'a> Cursor<'a> {
    fn corrupt(&self, message: impl Into<String>) -> CaptureError {
        CaptureError::Corrupt {
            what: self.what,
            at: Position::Offset(self.base + self.pos as u64),
            message: message.into(),
        }
    }

    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], CaptureError> {
        if n > self.left() {
            return Err(self.corrupt(format!(
                "{field} needs {n} bytes but the record has {} left",
                self.left()
            )));
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn u8(&mut self, field: &str) -> Result<u8, CaptureError> {
        Ok(self.take(1, field)?[0])
    }

    fn varint(&mut self, field: &str) -> Result<u64, CaptureError> {
        let start = self.pos;
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&byte) = self.data.get(self.pos) else {
                self.pos = start;
                return Err(self.corrupt(format!("{field} runs past the end of the record")));
            };
            self.pos += 1;
            if shift == 63 && byte > 1 {
                self.pos = start;
                return Err(self.corrupt(format!("{field} overflows 64 bits")));
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        self.pos = start;
        Err(self.corrupt(format!("{field} overflows 64 bits")))
    }

    fn zigzag(&mut self, field: &str) -> Result<i64, CaptureError> {
        self.varint(field).map(unzigzag)
    }

    fn u32(&mut self, field: &str) -> Result<u32, CaptureError> {
        let start = self.pos;
        let v = self.varint(field)?;
        u32::try_from(v).map_err(|_| {
            self.pos = start;
            self.corrupt(format!("{field} {v} does not fit in 32 bits"))
        })
    }

    fn u16(&mut self, field: &str) -> Result<u16, CaptureError> {
        let b = self.take(2, field)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn bool(&mut self, field: &str) -> Result<bool, CaptureError> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            other => {
                self.pos -= 1;
                Err(self.corrupt(format!("{field} is {other}, expected 0 or 1")))
            }
        }
    }

    /// A length or count whose items take at least `min_item` bytes each, checked against what
    /// is left in the record so that no corrupt count can cause a large allocation.
    fn count(&mut self, field: &str, min_item: usize) -> Result<usize, CaptureError> {
        let start = self.pos;
        let n = self.varint(field)?;
        let fits = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(min_item))
            .is_some_and(|bytes| bytes <= self.left());
        if !fits {
            let left = self.left();
            self.pos = start;
            return Err(self.corrupt(format!(
                "{field} {n} exceeds the {left} bytes left in the record"
            )));
        }
        Ok(n as usize)
    }

    fn bytes(&mut self, field: &str) -> Result<Vec<u8>, CaptureError> {
        let n = self.count(field, 1)?;
        Ok(self.take(n, field)?.to_vec())
    }

    fn string(&mut self, field: &str) -> Result<String, CaptureError> {
        let start = self.pos;
        let bytes = self.bytes(field)?;
        String::from_utf8(bytes).map_err(|_| {
            self.pos = start;
            self.corrupt(format!("{field} is not UTF-8"))
        })
    }

    fn list(&mut self, field: &str) -> Result<Vec<Vec<u8>>, CaptureError> {
        let n = self.count(field, 1)?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.bytes(field)?);
        }
        Ok(items)
    }

    fn ip(&mut self, field: &str) -> Result<IpAddr, CaptureError> {
        match self.u8(field)? {
            4 => {
                let b: [u8; 4] = self.take(4, field)?.try_into().expect("took 4 bytes");
                Ok(IpAddr::V4(Ipv4Addr::from(b)))
            }
            6 => {
                let b: [u8; 16] = self.take(16, field)?.try_into().expect("took 16 bytes");
                Ok(IpAddr::V6(Ipv6Addr::from(b)))
            }
            other => {
                self.pos -= 1;
                Err(self.corrupt(format!("{field} has address family tag {other}")))
            }
        }
    }

    fn sockaddr(&mut self, field: &str) -> Result<SockAddr, CaptureError> {
        match self.u8(field)? {
            ADDR_OTHER => {
                let start = self.pos;
                let family = self.varint(field)?;
                let family = u16::try_from(family).map_err(|_| {
                    self.pos = start;
                    self.corrupt(format!("{field} family {family} does not fit in 16 bits"))
                })?;
                Ok(SockAddr::Other { family })
            }
            ADDR_UNIX => Ok(SockAddr::Unix {
                path: self.bytes(field)?,
            }),
            ADDR_INET => Ok(SockAddr::Inet {
                ip: self.ip(field)?,
                port: self.u16(field)?,
            }),
            other => {
                self.pos -= 1;
                Err(self.corrupt(format!("{field} has socket address tag {other}")))
            }
        }
    }

    fn socktuple(&mut self, field: &str) -> Result<SockTuple, CaptureError> {
        match self.u8(field)? {
            ADDR_UNIX => Ok(SockTuple::Unix {
                path: self.bytes(field)?,
            }),
            ADDR_INET => Ok(SockTuple::Inet {
                l4proto: self.u8(field)?,
                src_ip: self.ip(field)?,
                src_port: self.u16(field)?,
                dst_ip: self.ip(field)?,
                dst_port: self.u16(field)?,
            }),
            other => {
                self.pos -= 1;
                Err(self.corrupt(format!("{field} has socket tuple tag {other}")))
            }
        }
    }

    fn param(&mut self, r: Repr, field: &str) -> Result<Param, CaptureError> {
        Ok(match r {
            Repr::Int => Param::Int(self.zigzag(field)?),
            Repr::Uint => Param::Uint(self.varint(field)?),
            Repr::Bytes => Param::Bytes(self.bytes(field)?),
            Repr::List => Param::List(self.list(field)?),
            Repr::Addr => Param::Addr(self.sockaddr(field)?),
            Repr::Tuple => Param::Tuple(self.socktuple(field)?),
        })
    }

    fn finish(&self) -> Result<(), CaptureError> {
        if self.left() == 0 {
            Ok(())
        } else {
            Err(self.corrupt(format!("{} unexpected bytes at the end", self.left())))
        }
    }
}

// ---- Snapshot records ----

fn put_header(out: &mut Vec<u8>, s: &Snapshot) {
    put_bytes(out, &s.hostname);
    put_varint(out, s.start_ts);
    put_varint(out, s.users.len() as u64);
    for u in &s.users {
        put_varint(out, u64::from(u.uid));
        put_varint(out, u64::from(u.gid));
        put_bytes(out, &u.name);
        put_bytes(out, &u.home);
        put_bytes(out, &u.shell);
    }
    put_varint(out, s.groups.len() as u64);
    for g in &s.groups {
        put_varint(out, u64::from(g.gid));
        put_bytes(out, &g.name);
    }
    put_varint(out, s.containers.len() as u64);
    for c in &s.containers {
        for field in [
            &c.id,
            &c.runtime,
            &c.name,
            &c.image,
            &c.image_repository,
            &c.image_tag,
            &c.image_digest,
        ] {
            put_bytes(out, field.as_bytes());
        }
        out.push(u8::from(c.privileged));
        put_varint(out, c.start_ts);
        put_varint(out, c.mounts.len() as u64);
        for m in &c.mounts {
            put_bytes(out, m.source.as_bytes());
            put_bytes(out, m.dest.as_bytes());
            put_bytes(out, m.mode.as_bytes());
            out.push(u8::from(m.rdwr));
            put_bytes(out, m.propagation.as_bytes());
        }
        put_varint(out, c.labels.len() as u64);
        for (name, value) in &c.labels {
            put_bytes(out, name.as_bytes());
            put_bytes(out, value.as_bytes());
        }
    }
}

fn get_header(c: &mut Cursor<'_>) -> Result<Snapshot, CaptureError> {
    let mut s = Snapshot {
        hostname: c.bytes("hostname")?,
        start_ts: c.varint("start_ts")?,
        ..Snapshot::default()
    };
    // Minimum encoded sizes bound the counts: a user is at least 5 bytes, a group 2 ….
    for _ in 0..c.count("user count", 5)? {
        s.users.push(UserInfo {
            uid: c.u32("user uid")?,
            gid: c.u32("user gid")?,
            name: c.bytes("user name")?,
            home: c.bytes("user home")?,
            shell: c.bytes("user shell")?,
        });
    }
    for _ in 0..c.count("group count", 2)? {
        s.groups.push(GroupInfo {
            gid: c.u32("group gid")?,
            name: c.bytes("group name")?,
        });
    }
    for _ in 0..c.count("container count", 11)? {
        let mut k = ContainerInfo {
            id: c.string("container id")?,
            runtime: c.string("container runtime")?,
            name: c.string("container name")?,
            image: c.string("container image")?,
            image_repository: c.string("container image_repository")?,
            image_tag: c.string("container image_tag")?,
            image_digest: c.string("container image_digest")?,
            privileged: c.bool("container privileged")?,
            start_ts: c.varint("container start_ts")?,
            ..ContainerInfo::default()
        };
        for _ in 0..c.count("mount count", 5)? {
            k.mounts.push(MountInfo {
                source: c.string("mount source")?,
                dest: c.string("mount dest")?,
                mode: c.string("mount mode")?,
                rdwr: c.bool("mount rdwr")?,
                propagation: c.string("mount propagation")?,
            });
        }
        for _ in 0..c.count("label count", 2)? {
            k.labels
                .push((c.string("label name")?, c.string("label value")?));
        }
        s.containers.push(k);
    }
    Ok(s)
}

fn put_dns(out: &mut Vec<u8>, dns: &[DnsName]) {
    put_varint(out, dns.len() as u64);
    for d in dns {
        put_bytes(out, d.name.as_bytes());
        put_varint(out, d.addrs.len() as u64);
        for addr in &d.addrs {
            put_ip(out, addr);
        }
    }
}

fn get_dns(c: &mut Cursor<'_>, into: &mut Vec<DnsName>) -> Result<(), CaptureError> {
    // A name is at least 2 bytes (empty name, no addresses), an address 5.
    for _ in 0..c.count("dns name count", 2)? {
        let name = c.string("dns name")?;
        let mut addrs = Vec::new();
        for _ in 0..c.count("dns address count", 5)? {
            addrs.push(c.ip("dns address")?);
        }
        into.push(DnsName { name, addrs });
    }
    Ok(())
}

const EXE_WRITABLE: u8 = 1;
const EXE_UPPER_LAYER: u8 = 2;
const EXE_FROM_MEMFD: u8 = 4;

fn put_thread(out: &mut Vec<u8>, t: &ThreadInfo) {
    for v in [t.tid, t.pid, t.ppid, t.vtid, t.vpid, t.sid, t.vpgid, t.pgid] {
        put_zigzag(out, v);
    }
    put_bytes(out, &t.comm);
    put_bytes(out, &t.exe);
    put_bytes(out, &t.exepath);
    put_list(out, &t.args);
    put_list(out, &t.env);
    put_bytes(out, &t.cwd);
    for v in [t.uid, t.gid, t.euid, t.egid, t.loginuid, t.tty] {
        put_varint(out, u64::from(v));
    }
    for v in [
        t.start_ts,
        t.cap_inheritable,
        t.cap_permitted,
        t.cap_effective,
    ] {
        put_varint(out, v);
    }
    put_bytes(out, &t.cgroup);
    let mut exe_flags = 0;
    for (set, bit) in [
        (t.exe_writable, EXE_WRITABLE),
        (t.exe_upper_layer, EXE_UPPER_LAYER),
        (t.exe_from_memfd, EXE_FROM_MEMFD),
    ] {
        if set {
            exe_flags |= bit;
        }
    }
    out.push(exe_flags);
    for v in [t.exe_ino, t.exe_ino_ctime, t.exe_ino_mtime] {
        put_varint(out, v);
    }
    put_varint(out, t.fds.len() as u64);
    for fd in &t.fds {
        put_zigzag(out, fd.fd);
        out.push(fd_kind_code(fd.kind));
        if fd.kind.is_inet() {
            match &fd.tuple {
                Some(tuple) => {
                    out.push(1);
                    put_socktuple(out, tuple);
                }
                None => out.push(0),
            }
        }
        put_bytes(out, &fd.name);
        put_varint(out, u64::from(fd.flags));
    }
}

/// An fd's type and, for an inet socket, its tuple when one was written.
fn get_fd_kind(c: &mut Cursor<'_>) -> Result<(FdType, Option<SockTuple>), CaptureError> {
    let kind = match c.u8("fd type")? {
        FD_FILE => FdType::File,
        1 => FdType::Directory,
        FD_IPV4 => FdType::Ipv4,
        FD_IPV6 => FdType::Ipv6,
        4 => FdType::Unix,
        5 => FdType::Pipe,
        6 => FdType::Memfd,
        7 => FdType::Event,
        8 => FdType::Signalfd,
        9 => FdType::Eventpoll,
        10 => FdType::Inotify,
        11 => FdType::Timerfd,
        12 => FdType::Netlink,
        13 => FdType::Bpf,
        14 => FdType::Userfaultfd,
        15 => FdType::IoUring,
        16 => FdType::Other,
        other => {
            c.pos -= 1;
            return Err(c.corrupt(format!("unknown fd type code {other}")));
        }
    };
    let tuple = if kind.is_inet() && c.bool("fd has tuple")? {
        Some(c.socktuple("fd tuple")?)
    } else {
        None
    };
    Ok((kind, tuple))
}

fn get_thread(c: &mut Cursor<'_>) -> Result<ThreadInfo, CaptureError> {
    let mut t = ThreadInfo {
        tid: c.zigzag("tid")?,
        pid: c.zigzag("pid")?,
        ppid: c.zigzag("ppid")?,
        vtid: c.zigzag("vtid")?,
        vpid: c.zigzag("vpid")?,
        sid: c.zigzag("sid")?,
        vpgid: c.zigzag("vpgid")?,
        pgid: c.zigzag("pgid")?,
        comm: c.bytes("comm")?,
        exe: c.bytes("exe")?,
        exepath: c.bytes("exepath")?,
        args: c.list("args")?,
        env: c.list("env")?,
        cwd: c.bytes("cwd")?,
        uid: c.u32("uid")?,
        gid: c.u32("gid")?,
        euid: c.u32("euid")?,
        egid: c.u32("egid")?,
        loginuid: c.u32("loginuid")?,
        tty: c.u32("tty")?,
        start_ts: c.varint("start_ts")?,
        cap_inheritable: c.varint("cap_inheritable")?,
        cap_permitted: c.varint("cap_permitted")?,
        cap_effective: c.varint("cap_effective")?,
        cgroup: c.bytes("cgroup")?,
        ..ThreadInfo::default()
    };
    let exe_flags = c.u8("exe flags")?;
    if exe_flags & !(EXE_WRITABLE | EXE_UPPER_LAYER | EXE_FROM_MEMFD) != 0 {
        c.pos -= 1;
        return Err(c.corrupt(format!("unknown exe flags {exe_flags:#x}")));
    }
    t.exe_writable = exe_flags & EXE_WRITABLE != 0;
    t.exe_upper_layer = exe_flags & EXE_UPPER_LAYER != 0;
    t.exe_from_memfd = exe_flags & EXE_FROM_MEMFD != 0;
    t.exe_ino = c.varint("exe_ino")?;
    t.exe_ino_ctime = c.varint("exe_ino_ctime")?;
    t.exe_ino_mtime = c.varint("exe_ino_mtime")?;
    for _ in 0..c.count("fd count", 4)? {
        let fd = c.zigzag("fd")?;
        let (kind, tuple) = get_fd_kind(c)?;
        t.fds.push(FdInfo {
            fd,
            kind,
            tuple,
            name: c.bytes("fd name")?,
            flags: c.u32("fd flags")?,
        });
    }
    Ok(t)
}

// ---- Reader ----

/// How the event records of one stored event type map onto this build's schema.
struct StoredType {
    etype: EventType,
    /// Per stored parameter position: the position in this build's schema and the encoding.
    params: Vec<(usize, Repr)>,
}

/// Reads a binary capture.
pub struct Reader<R: BufRead> {
    input: R,
    /// Bytes consumed so far.
    offset: u64,
    /// The payload of the current record.
    buf: Vec<u8>,
    snapshot: Snapshot,
    types: Vec<StoredType>,
    /// A record read while looking for the end of the thread records: `(kind, offset)`.
    pending: Option<(u8, u64)>,
    prev_ts: u64,
    prev_num: u64,
    done: bool,
}

impl<R: BufRead> Reader<R> {
    /// Reads the magic, the header record and the thread records.
    pub fn new(input: R) -> Result<Self, CaptureError> {
        let mut reader = Reader {
            input,
            offset: 0,
            buf: Vec::new(),
            snapshot: Snapshot::default(),
            types: Vec::new(),
            pending: None,
            prev_ts: 0,
            prev_num: 0,
            done: false,
        };
        let mut head = [0u8; 10];
        let found = reader.read_up_to(&mut head)?;
        let compared = found.min(MAGIC.len());
        if head[..compared] != MAGIC[..compared] {
            return Err(CaptureError::NotACapture {
                at: Position::Offset(0),
                reason: "the file does not start with the `VIGILCAP` magic".to_string(),
            });
        }
        if found < head.len() {
            return Err(CaptureError::Truncated {
                what: "file header",
                at: Position::Offset(0),
                expected: head.len() as u64,
                found: found as u64,
            });
        }
        let version = u16::from_le_bytes([head[8], head[9]]);
        if version != VERSION {
            return Err(CaptureError::UnsupportedVersion {
                at: Position::Offset(8),
                version: u64::from(version),
            });
        }
        match reader.read_record()? {
            Some((REC_HEADER, _)) => {
                let mut c = reader.cursor(REC_HEADER);
                let snapshot = get_header(&mut c)?;
                c.finish()?;
                reader.snapshot = snapshot;
            }
            Some((kind, at)) => {
                return Err(CaptureError::Corrupt {
                    what: record_name(kind),
                    at: Position::Offset(at),
                    message: format!("expected the header record, found record kind {kind}"),
                })
            }
            None => {
                return Err(CaptureError::Truncated {
                    what: "header record",
                    at: Position::Offset(reader.offset),
                    expected: 2,
                    found: 0,
                })
            }
        }
        reader.prev_ts = reader.snapshot.start_ts;
        while let Some((kind, at)) = reader.read_record()? {
            match kind {
                REC_THREAD => {
                    let mut c = reader.cursor(REC_THREAD);
                    let thread = get_thread(&mut c)?;
                    c.finish()?;
                    reader.snapshot.threads.push(thread);
                }
                REC_DNS => {
                    let mut dns = std::mem::take(&mut reader.snapshot.dns);
                    let mut c = reader.cursor(REC_DNS);
                    let result = get_dns(&mut c, &mut dns).and_then(|()| c.finish());
                    reader.snapshot.dns = dns;
                    result?;
                }
                _ => {
                    reader.pending = Some((kind, at));
                    break;
                }
            }
        }
        Ok(reader)
    }

    /// The snapshot from the header and thread records.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    fn read_event(&mut self) -> Result<Option<Event>, CaptureError> {
        loop {
            let (kind, at) = match self.pending.take() {
                Some(record) => record,
                None => match self.read_record()? {
                    Some(record) => record,
                    None => return Ok(None),
                },
            };
            match kind {
                REC_EVENT => return self.decode_event(at).map(Some),
                REC_EVENT_TYPE => self.decode_event_type(at)?,
                REC_HEADER | REC_THREAD | REC_DNS => {
                    return Err(CaptureError::Corrupt {
                        what: record_name(kind),
                        at: Position::Offset(at),
                        message: "only allowed before the first event".to_string(),
                    })
                }
                _ => {} // An optional record (unknown kinds were rejected by read_record).
            }
        }
    }

    /// A cursor over the payload of the record just read.
    fn cursor(&self, kind: u8) -> Cursor<'_> {
        Cursor {
            data: &self.buf,
            pos: 0,
            base: self.offset - self.buf.len() as u64,
            what: record_name(kind),
        }
    }

    fn decode_event_type(&mut self, at: u64) -> Result<(), CaptureError> {
        let mut c = self.cursor(REC_EVENT_TYPE);
        let name = c.bytes("event type name")?;
        let name = String::from_utf8_lossy(&name).into_owned();
        let etype = table::by_name(&name).ok_or_else(|| CaptureError::UnknownEventType {
            at: Position::Offset(at),
            name: name.clone(),
        })?;
        let spec = etype.spec();
        let n = c.count("parameter count", 2)?;
        if n > 64 {
            return Err(c.corrupt(format!("{n} parameters, at most 64 are allowed")));
        }
        let mut params = Vec::with_capacity(n);
        for _ in 0..n {
            let param = String::from_utf8_lossy(&c.bytes("parameter name")?).into_owned();
            let code = c.u8("parameter kind")?;
            let table = if code == 7 {
                Some(c.u8("flag table")?)
            } else {
                None
            };
            let stored = kind_from_code(code, table)
                .ok_or_else(|| c.corrupt(format!("unknown parameter kind {code}")))?;
            let index = spec
                .param_index(&param)
                .ok_or_else(|| CaptureError::UnknownParam {
                    at: Position::Offset(at),
                    event_type: name.clone(),
                    param: param.clone(),
                })?;
            let current = spec.params[index].kind;
            if repr(stored) != repr(current) {
                return Err(c.corrupt(format!(
                    "parameter `{param}` of `{name}` was stored as {stored:?}, which this build \
                     cannot read as {current:?}"
                )));
            }
            params.push((index, repr(stored)));
        }
        c.finish()?;
        self.types.push(StoredType { etype, params });
        Ok(())
    }

    fn decode_event(&mut self, at: u64) -> Result<Event, CaptureError> {
        let mut c = self.cursor(REC_EVENT);
        let type_index = c.varint("event type index")?;
        let stored = usize::try_from(type_index)
            .ok()
            .and_then(|i| self.types.get(i))
            .ok_or_else(|| CaptureError::Corrupt {
                what: "event record",
                at: Position::Offset(at),
                message: format!(
                    "event type index {type_index} was not defined (only {} were)",
                    self.types.len()
                ),
            })?;
        let num = self.prev_num.wrapping_add(c.zigzag("num")? as u64);
        let ts = self.prev_ts.wrapping_add(c.zigzag("ts")? as u64);
        let tid = c.zigzag("tid")?;
        let pid = tid.wrapping_add(c.zigzag("pid")?);
        let res = c.zigzag("res")?;
        let n = stored.params.len();
        let limit = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        let present = c.varint("present parameters")?;
        let truncated_stored = c.varint("truncated parameters")?;
        if present & !limit != 0 || truncated_stored & !limit != 0 {
            return Err(c.corrupt(format!(
                "parameter bits {present:#x}/{truncated_stored:#x} beyond the {n} stored parameters"
            )));
        }
        let mut params = Vec::new();
        let mut truncated = 0u64;
        for (i, &(index, r)) in stored.params.iter().enumerate() {
            if truncated_stored & (1 << i) != 0 && index < 64 {
                truncated |= 1 << index;
            }
            if present & (1 << i) == 0 {
                continue;
            }
            let value = c.param(r, stored.etype.spec().params[index].name)?;
            if params.len() <= index {
                params.resize(index + 1, Param::None);
            }
            params[index] = value;
        }
        // Optional trailing `cpu:varint`: absent in captures written without it.
        let cpu = if c.left() == 0 {
            None
        } else {
            let v = c.varint("cpu")?;
            Some(u32::try_from(v).map_err(|_| c.corrupt(format!("cpu {v} out of range")))?)
        };
        c.finish()?;
        normalize_params(&mut params);
        self.prev_num = num;
        self.prev_ts = ts;
        Ok(Event {
            num,
            ts,
            tid,
            pid,
            etype: stored.etype,
            res,
            params,
            truncated,
            cpu,
        })
    }

    /// Reads into `buf` until it is full or the input ends; returns the bytes read.
    fn read_up_to(&mut self, buf: &mut [u8]) -> Result<usize, CaptureError> {
        let mut n = 0;
        while n < buf.len() {
            match self.input.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(CaptureError::Io {
                        action: "read",
                        at: Position::Offset(self.offset + n as u64),
                        source,
                    })
                }
            }
        }
        self.offset += n as u64;
        Ok(n)
    }

    /// Reads the next record into `buf`: `None` at a clean end of input (between records),
    /// else the record's kind and offset. Skips optional records this build does not know.
    fn read_record(&mut self) -> Result<Option<(u8, u64)>, CaptureError> {
        loop {
            let at = self.offset;
            let mut kind = [0u8; 1];
            if self.read_up_to(&mut kind)? == 0 {
                return Ok(None);
            }
            let kind = kind[0];
            // Any length longer than five varint bytes exceeds MAX_RECORD_LEN anyway.
            let mut len = u64::MAX;
            let mut value = 0u64;
            for i in 0..5u64 {
                let mut byte = [0u8; 1];
                if self.read_up_to(&mut byte)? == 0 {
                    return Err(CaptureError::Truncated {
                        what: record_name(kind),
                        at: Position::Offset(at),
                        expected: i + 2,
                        found: i + 1,
                    });
                }
                value |= u64::from(byte[0] & 0x7f) << (7 * i);
                if byte[0] & 0x80 == 0 {
                    len = value;
                    break;
                }
            }
            if len > MAX_RECORD_LEN {
                return Err(CaptureError::Corrupt {
                    what: record_name(kind),
                    at: Position::Offset(at),
                    message: format!("record length {len} exceeds the limit of {MAX_RECORD_LEN}"),
                });
            }
            if !matches!(kind, REC_HEADER | REC_THREAD | REC_EVENT_TYPE | REC_EVENT)
                && kind < REC_OPTIONAL
            {
                return Err(CaptureError::Corrupt {
                    what: "record",
                    at: Position::Offset(at),
                    message: format!("unknown record kind {kind:#04x}"),
                });
            }
            self.buf.clear();
            let found = (&mut self.input)
                .take(len)
                .read_to_end(&mut self.buf)
                .map_err(|source| CaptureError::Io {
                    action: "read",
                    at: Position::Offset(self.offset),
                    source,
                })?;
            self.offset += found as u64;
            if (found as u64) < len {
                return Err(CaptureError::Truncated {
                    what: record_name(kind),
                    at: Position::Offset(at),
                    expected: len,
                    found: found as u64,
                });
            }
            if kind >= REC_OPTIONAL && kind != REC_DNS {
                continue;
            }
            return Ok(Some((kind, at)));
        }
    }
}

impl<R: BufRead> Decode for Reader<R> {
    fn snapshot(&self) -> &Snapshot {
        Reader::snapshot(self)
    }

    fn decode_event(&mut self) -> Result<Option<Event>, CaptureError> {
        self.read_event()
    }

    fn ended(&mut self) -> &mut bool {
        &mut self.done
    }
}

// ---- Writer ----

/// Writes a binary capture: [`Writer::write_snapshot`] once, then events.
pub struct Writer<W: Write> {
    out: W,
    /// Bytes written so far.
    offset: u64,
    started: bool,
    /// Stored index per [`EventType`] id (`u32::MAX`: not yet defined).
    type_index: Vec<u32>,
    n_types: u32,
    prev_ts: u64,
    prev_num: u64,
    payload: Vec<u8>,
}

impl<W: Write> Writer<W> {
    pub fn new(out: W) -> Self {
        Writer {
            out,
            offset: 0,
            started: false,
            type_index: Vec::new(),
            n_types: 0,
            prev_ts: 0,
            prev_num: 0,
            payload: Vec::new(),
        }
    }

    fn write_raw(&mut self, bytes: &[u8]) -> Result<(), CaptureError> {
        self.out
            .write_all(bytes)
            .map_err(|source| CaptureError::Io {
                action: "write",
                at: Position::Offset(self.offset),
                source,
            })?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Writes `self.payload` as a record of `kind`.
    fn write_record(&mut self, kind: u8) -> Result<(), CaptureError> {
        if self.payload.len() as u64 > MAX_RECORD_LEN {
            return Err(CaptureError::Unencodable {
                what: record_name(kind),
                at: Position::Offset(self.offset),
                message: format!(
                    "{} bytes exceed the record limit of {MAX_RECORD_LEN}",
                    self.payload.len()
                ),
            });
        }
        let mut head = Vec::with_capacity(11);
        head.push(kind);
        put_varint(&mut head, self.payload.len() as u64);
        self.write_raw(&head)?;
        let payload = std::mem::take(&mut self.payload);
        let result = self.write_raw(&payload);
        self.payload = payload;
        self.payload.clear();
        result
    }

    /// Writes the magic, the header record and one record per thread. Must be called once,
    /// first.
    pub fn write_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), CaptureError> {
        if self.started {
            return Err(CaptureError::Unencodable {
                what: "snapshot",
                at: Position::Offset(self.offset),
                message: "the snapshot was already written".to_string(),
            });
        }
        self.started = true;
        let mut head = MAGIC.to_vec();
        head.extend_from_slice(&VERSION.to_le_bytes());
        self.write_raw(&head)?;
        self.payload.clear();
        put_header(&mut self.payload, snapshot);
        self.write_record(REC_HEADER)?;
        for thread in &snapshot.threads {
            put_thread(&mut self.payload, thread);
            self.write_record(REC_THREAD)?;
        }
        // After the threads: a reader that predates DNS records skips it without losing them.
        if !snapshot.dns.is_empty() {
            put_dns(&mut self.payload, &snapshot.dns);
            self.write_record(REC_DNS)?;
        }
        self.prev_ts = snapshot.start_ts;
        Ok(())
    }

    /// Writes one event (preceded, the first time its type appears, by an event type record).
    pub fn write_event(&mut self, event: &Event) -> Result<(), CaptureError> {
        if !self.started {
            return Err(CaptureError::Unencodable {
                what: "event",
                at: Position::Offset(self.offset),
                message: "an event was written before the snapshot".to_string(),
            });
        }
        check_encodable(event).map_err(|message| CaptureError::Unencodable {
            what: "event",
            at: Position::Offset(self.offset),
            message,
        })?;
        let spec = event.etype.spec();
        let id = usize::from(event.etype.0);
        if self.type_index.len() <= id {
            self.type_index.resize(id + 1, u32::MAX);
        }
        if self.type_index[id] == u32::MAX {
            self.payload.clear();
            put_bytes(&mut self.payload, spec.name.as_bytes());
            put_varint(&mut self.payload, spec.params.len() as u64);
            for p in spec.params {
                put_bytes(&mut self.payload, p.name.as_bytes());
                let (code, table) = kind_code(p.kind);
                self.payload.push(code);
                if let Some(table) = table {
                    self.payload.push(table);
                }
            }
            self.write_record(REC_EVENT_TYPE)?;
            self.type_index[id] = self.n_types;
            self.n_types += 1;
        }
        let out = &mut self.payload;
        out.clear();
        put_varint(out, u64::from(self.type_index[id]));
        put_zigzag(out, event.num.wrapping_sub(self.prev_num) as i64);
        put_zigzag(out, event.ts.wrapping_sub(self.prev_ts) as i64);
        put_zigzag(out, event.tid);
        put_zigzag(out, event.pid.wrapping_sub(event.tid));
        put_zigzag(out, event.res);
        let mut present = 0u64;
        for (i, param) in event.params.iter().enumerate() {
            if *param != Param::None {
                present |= 1 << i;
            }
        }
        put_varint(out, present);
        put_varint(out, event.truncated);
        for param in &event.params {
            put_param(out, param);
        }
        if let Some(cpu) = event.cpu {
            put_varint(out, u64::from(cpu));
        }
        self.write_record(REC_EVENT)?;
        self.prev_num = event.num;
        self.prev_ts = event.ts;
        Ok(())
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(mut self) -> Result<W, CaptureError> {
        self.out.flush().map_err(|source| CaptureError::Io {
            action: "write",
            at: Position::Offset(self.offset),
            source,
        })?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Gen;
    use super::super::{normalized, Capture, EventReader};
    use super::*;

    fn read_all(bytes: &[u8]) -> Result<(Snapshot, Vec<Event>), CaptureError> {
        let mut reader = Reader::new(bytes)?;
        let mut events = Vec::new();
        while let Some(e) = reader.next_event()? {
            events.push(e);
        }
        Ok((reader.snapshot().clone(), events))
    }

    fn small_capture() -> Capture {
        let mut gen = Gen::new(99);
        let mut capture = gen.capture(6);
        capture.snapshot.threads.truncate(2);
        capture
    }

    #[test]
    fn varints_and_zigzag_round_trip() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut c = Cursor {
                data: &out,
                pos: 0,
                base: 0,
                what: "test",
            };
            assert_eq!(c.varint("v").unwrap(), v);
            c.finish().unwrap();
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -100] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        let overlong = [0xffu8; 11];
        let mut c = Cursor {
            data: &overlong,
            pos: 0,
            base: 5,
            what: "test",
        };
        assert_eq!(
            c.varint("v").err().unwrap().to_string(),
            "corrupt test at offset 5: v overflows 64 bits"
        );
    }

    #[test]
    fn round_trips_generated_captures() {
        for seed in 0..40 {
            let mut gen = Gen::new(seed);
            let capture = gen.capture(80);
            let bytes = capture.write_binary(Vec::new()).unwrap();
            let (snapshot, events) =
                read_all(&bytes).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            assert_eq!(snapshot, capture.snapshot, "seed {seed}");
            assert_eq!(events.len(), capture.events.len(), "seed {seed}");
            for (got, want) in events.iter().zip(&capture.events) {
                assert_eq!(got, &normalized(want), "seed {seed}");
            }
        }
    }

    #[test]
    fn is_compact() {
        let mut gen = Gen::new(3);
        let capture = gen.capture(500);
        let bin = capture.write_binary(Vec::new()).unwrap().len();
        let text = capture.write_jsonl(Vec::new()).unwrap().len();
        assert!(
            bin * 2 < text,
            "binary {bin} bytes vs JSON lines {text} bytes"
        );
    }

    /// Record boundaries of a binary capture: offsets where a shorter file is a valid capture.
    fn record_ends(bytes: &[u8]) -> Vec<usize> {
        let mut ends = Vec::new();
        let mut pos = 10;
        while pos < bytes.len() {
            let mut c = Cursor {
                data: &bytes[pos + 1..],
                pos: 0,
                base: 0,
                what: "test",
            };
            let len = c.varint("len").unwrap() as usize;
            pos += 1 + c.pos + len;
            ends.push(pos);
        }
        ends
    }

    #[test]
    fn truncation_at_every_offset_is_an_error_or_a_clean_prefix() {
        let capture = small_capture();
        let bytes = capture.write_binary(Vec::new()).unwrap();
        let full = read_all(&bytes).unwrap();
        let ends = record_ends(&bytes);
        assert_eq!(ends.last(), Some(&bytes.len()));
        for cut in 0..bytes.len() {
            let result = read_all(&bytes[..cut]);
            if ends.contains(&cut) && cut >= ends[0] {
                let (snapshot, events) = result.unwrap_or_else(|e| panic!("cut {cut}: {e}"));
                assert_eq!(snapshot.hostname, full.0.hostname);
                assert!(events.len() <= full.1.len());
                assert_eq!(events[..], full.1[..events.len()], "cut {cut}");
            } else {
                let err = result
                    .err()
                    .unwrap_or_else(|| panic!("cut {cut} read cleanly"));
                let text = err.to_string();
                assert!(
                    text.contains("truncated") || text.contains("magic"),
                    "cut {cut}: {text}"
                );
            }
        }
    }

    #[test]
    fn truncated_record_error_names_offset_and_sizes() {
        let capture = small_capture();
        let bytes = capture.write_binary(Vec::new()).unwrap();
        let ends = record_ends(&bytes);
        let last_start = ends[ends.len() - 2];
        let payload_len = bytes.len() - last_start - 2;
        let err = read_all(&bytes[..bytes.len() - 3]).err().unwrap();
        assert_eq!(
            err.to_string(),
            format!(
                "truncated event record at offset {last_start}: expected {payload_len} bytes, found {}",
                payload_len - 3
            )
        );
        assert_eq!(err.position(), Position::Offset(last_start as u64));
    }

    #[test]
    fn bit_flips_never_panic() {
        let capture = small_capture();
        let bytes = capture.write_binary(Vec::new()).unwrap();
        let mut errors = 0;
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut corrupt = bytes.clone();
                corrupt[i] ^= 1 << bit;
                if read_all(&corrupt).is_err() {
                    errors += 1;
                }
            }
        }
        assert!(errors > bytes.len(), "most flips are detected ({errors})");
    }

    #[test]
    fn huge_lengths_are_rejected_without_allocating() {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        bytes.push(REC_HEADER);
        put_varint(&mut bytes, u64::MAX);
        let err = read_all(&bytes).err().unwrap();
        assert!(err.to_string().contains("exceeds the limit"), "{err}");

        // A header claiming 2^40 users in a tiny record.
        let mut payload = Vec::new();
        put_bytes(&mut payload, b"h");
        put_varint(&mut payload, 0);
        put_varint(&mut payload, 1 << 40);
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        bytes.push(REC_HEADER);
        put_varint(&mut bytes, payload.len() as u64);
        bytes.extend_from_slice(&payload);
        let err = read_all(&bytes).err().unwrap();
        assert_eq!(
            err.to_string(),
            "corrupt header record at offset 15: user count 1099511627776 exceeds the 0 bytes left in the record"
        );
    }

    fn with_records(records: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        let mut header = Vec::new();
        put_header(&mut header, &Snapshot::default());
        for (kind, payload) in std::iter::once(&(REC_HEADER, header)).chain(records) {
            bytes.push(*kind);
            put_varint(&mut bytes, payload.len() as u64);
            bytes.extend_from_slice(payload);
        }
        bytes
    }

    fn type_record(name: &str, params: &[(&str, u8)]) -> Vec<u8> {
        let mut p = Vec::new();
        put_bytes(&mut p, name.as_bytes());
        put_varint(&mut p, params.len() as u64);
        for (pname, code) in params {
            put_bytes(&mut p, pname.as_bytes());
            p.push(*code);
        }
        p
    }

    #[test]
    fn unknown_types_params_and_records_are_errors() {
        let bytes = with_records(&[(REC_EVENT_TYPE, type_record("nosuchcall", &[]))]);
        let err = read_all(&bytes).err().unwrap();
        assert_eq!(
            err.to_string(),
            "unknown event type `nosuchcall` at offset 17"
        );

        let bytes = with_records(&[(REC_EVENT_TYPE, type_record("close", &[("fdd", 1)]))]);
        let err = read_all(&bytes).err().unwrap();
        assert_eq!(
            err.to_string(),
            "unknown parameter `fdd` of event type `close` at offset 17"
        );

        let bytes = with_records(&[(REC_EVENT_TYPE, type_record("close", &[("fd", 8)]))]);
        let err = read_all(&bytes).err().unwrap();
        assert!(err.to_string().contains("stored as Path"), "{err}");

        let bytes = with_records(&[(REC_EVENT, vec![0, 0, 0, 0, 0, 0, 0, 0])]);
        let err = read_all(&bytes).err().unwrap();
        assert!(err.to_string().contains("index 0 was not defined"), "{err}");

        let bytes = with_records(&[(0x42, vec![])]);
        let err = read_all(&bytes).err().unwrap();
        assert_eq!(
            err.to_string(),
            "corrupt record at offset 17: unknown record kind 0x42"
        );

        let bytes = with_records(&[(REC_THREAD, vec![1, 2, 3])]);
        assert!(read_all(&bytes).is_err());
    }

    #[test]
    fn optional_records_are_skipped_and_old_schemas_remap() {
        // `close` stored with only its `fd`, then an event with it, plus an optional record.
        let mut event = Vec::new();
        for v in [0u64, 2, 2000, 20, 0, 0, 1, 1] {
            put_varint(&mut event, v);
        }
        put_zigzag(&mut event, 7);
        let bytes = with_records(&[
            (0x90, b"future".to_vec()),
            (REC_EVENT_TYPE, type_record("close", &[("fd", 1)])),
            (REC_EVENT, event),
        ]);
        let (_, events) = read_all(&bytes).unwrap();
        assert_eq!(events.len(), 1);
        let e = &events[0];
        assert_eq!((e.num, e.ts, e.tid, e.pid), (1, 1000, 10, 10));
        assert_eq!(e.params, vec![Param::Int(7)]);
        assert!(e.is_truncated(0));
    }

    #[test]
    fn the_cpu_is_an_optional_trailing_field() {
        let event = |tail: &[u8]| {
            let mut event = Vec::new();
            for v in [0u64, 2, 2000, 20, 0, 0, 1, 0] {
                put_varint(&mut event, v);
            }
            put_zigzag(&mut event, 7);
            event.extend_from_slice(tail);
            with_records(&[
                (REC_EVENT_TYPE, type_record("close", &[("fd", 1)])),
                (REC_EVENT, event),
            ])
        };
        let cpu_of = |bytes: &[u8]| read_all(bytes).map(|(_, events)| events[0].cpu);
        assert_eq!(cpu_of(&event(&[])).unwrap(), None, "written without a cpu");
        assert_eq!(cpu_of(&event(&[1])).unwrap(), Some(1));
        let mut big = Vec::new();
        put_varint(&mut big, u64::from(u32::MAX));
        assert_eq!(cpu_of(&event(&big)).unwrap(), Some(u32::MAX));
        let mut too_big = Vec::new();
        put_varint(&mut too_big, 1 << 32);
        let err = cpu_of(&event(&too_big)).unwrap_err().to_string();
        assert!(err.contains("cpu 4294967296 out of range"), "{err}");
        let err = cpu_of(&event(&[0x80])).unwrap_err().to_string();
        assert!(err.contains("cpu runs past the end"), "{err}");
        let err = cpu_of(&event(&[1, 2])).unwrap_err().to_string();
        assert!(err.contains("1 unexpected bytes at the end"), "{err}");

        // The writer stores it only when known; both read back as written.
        let mut capture = small_capture();
        for (i, e) in capture.events.iter_mut().enumerate() {
            e.cpu = (i % 2 == 0).then_some(i as u32);
        }
        let bytes = capture.write_binary(Vec::new()).unwrap();
        let (_, events) = read_all(&bytes).unwrap();
        let cpus: Vec<Option<u32>> = events.iter().map(|e| e.cpu).collect();
        let want: Vec<Option<u32>> = capture.events.iter().map(|e| e.cpu).collect();
        assert_eq!(cpus, want);
    }

    fn dns_capture() -> Capture {
        let mut capture = small_capture();
        capture.snapshot.dns = vec![
            DnsName {
                name: "kubernetes.default.svc.cluster.local".to_string(),
                addrs: vec!["10.96.0.1".parse().unwrap()],
            },
            DnsName {
                name: "dual.example".to_string(),
                addrs: vec!["192.0.2.1".parse().unwrap(), "2001:db8::1".parse().unwrap()],
            },
        ];
        capture
    }

    #[test]
    fn dns_is_an_optional_record_after_the_threads() {
        let capture = dns_capture();
        let bytes = capture.write_binary(Vec::new()).unwrap();
        let (snapshot, events) = read_all(&bytes).unwrap();
        assert_eq!(snapshot, capture.snapshot);
        assert_eq!(events.len(), capture.events.len());
        // The record follows the threads and is of an optional kind, so a reader that predates
        // it skips it and still reads every thread and event.
        const _: () = assert!(REC_DNS >= REC_OPTIONAL);
        let kinds_of = |bytes: &[u8]| -> Vec<u8> {
            let ends = record_ends(bytes);
            std::iter::once(10)
                .chain(ends.iter().copied())
                .take(ends.len())
                .map(|start| bytes[start])
                .collect()
        };
        let kinds = kinds_of(&bytes);
        let n_threads = capture.snapshot.threads.len();
        assert_eq!(kinds[0], REC_HEADER);
        assert!(kinds[1..=n_threads].iter().all(|&k| k == REC_THREAD));
        assert_eq!(kinds[n_threads + 1], REC_DNS);
        assert_eq!(kinds.iter().filter(|&&k| k == REC_DNS).count(), 1);
        // Without names, no record: such files are what they were before DNS records existed.
        let mut plain = capture.clone();
        plain.snapshot.dns.clear();
        let plain_bytes = plain.write_binary(Vec::new()).unwrap();
        assert!(!kinds_of(&plain_bytes).contains(&REC_DNS));
    }

    #[test]
    fn dns_records_are_checked() {
        let mut payload = Vec::new();
        put_dns(&mut payload, &dns_capture().snapshot.dns);
        // Two records add up.
        let bytes = with_records(&[(REC_DNS, payload.clone()), (REC_DNS, payload.clone())]);
        let (snapshot, _) = read_all(&bytes).unwrap();
        assert_eq!(snapshot.dns.len(), 4);
        // After the first event type they are misplaced.
        let bytes = with_records(&[
            (REC_EVENT_TYPE, type_record("close", &[("fd", 1)])),
            (REC_DNS, payload.clone()),
        ]);
        let err = read_all(&bytes).err().unwrap();
        assert!(
            err.to_string().starts_with("corrupt dns record at offset")
                && err
                    .to_string()
                    .ends_with("only allowed before the first event"),
            "{err}"
        );
        // A count beyond the payload, a bad address tag, trailing bytes.
        let err = read_all(&with_records(&[(REC_DNS, vec![9])]))
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("dns name count 9 exceeds"),
            "{err}"
        );
        let err = read_all(&with_records(&[(
            REC_DNS,
            vec![1, 1, b'a', 1, 5, 0, 0, 0, 0],
        )]))
        .err()
        .unwrap();
        assert!(
            err.to_string()
                .contains("dns address has address family tag 5"),
            "{err}"
        );
        let mut trailing = payload;
        trailing.push(0);
        let err = read_all(&with_records(&[(REC_DNS, trailing)]))
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("1 unexpected bytes at the end"),
            "{err}"
        );
    }

    #[test]
    fn wrong_magic_or_version() {
        let err = read_all(b"VIGILCAPX").err().unwrap();
        assert_eq!(
            err.to_string(),
            "truncated file header at offset 0: expected 10 bytes, found 9"
        );
        let err = read_all(b"VIGILCAP\x02\x00").err().unwrap();
        assert_eq!(
            err.to_string(),
            "unsupported capture version 2 at offset 8 (this build reads version 1)"
        );
        let err = read_all(b"VIGILCAP\x01\x00").err().unwrap();
        assert!(
            err.to_string()
                .starts_with("truncated header record at offset 10"),
            "{err}"
        );
        let err = read_all(b"VIGXX").err().unwrap();
        assert!(err.to_string().contains("magic"), "{err}");
    }
}
