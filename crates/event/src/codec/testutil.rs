//! A deterministic generator of snapshots and events for the codec tests: every event type,
//! every parameter kind, every flag table, non-UTF-8 bytes, absent and truncated parameters.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::Capture;
use crate::flags::symbols;
use crate::table;
use crate::{
    ContainerInfo, DnsName, Event, EventType, FdInfo, FdType, GroupInfo, MountInfo, Param,
    ParamKind, Snapshot, SockAddr, SockTuple, ThreadInfo, UserInfo,
};

/// xorshift64* — small, deterministic, good enough for test data.
pub(crate) struct Gen(u64);

impl Gen {
    pub(crate) fn new(seed: u64) -> Gen {
        Gen(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub(crate) fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// An integer from an interesting distribution: small, negative, extreme.
    fn int(&mut self) -> i64 {
        match self.below(6) {
            0 => 0,
            1 => -(self.below(200) as i64),
            2 => i64::MIN + self.below(3) as i64,
            3 => i64::MAX - self.below(3) as i64,
            4 => self.next() as i64,
            _ => self.below(70_000) as i64,
        }
    }

    fn uint(&mut self) -> u64 {
        match self.below(5) {
            0 => 0,
            1 => u64::MAX - self.below(3),
            2 => self.next(),
            _ => self.below(70_000),
        }
    }

    /// Bytes: text, text with control characters and quotes, or arbitrary (non-UTF-8) bytes.
    pub(crate) fn bytes(&mut self) -> Vec<u8> {
        let len = self.below(24) as usize;
        match self.below(4) {
            0 => (0..len).map(|_| b'a' + self.below(26) as u8).collect(),
            1 => {
                let mut s = b"/tmp/\"q\\\n\t\x01\x7f".to_vec();
                s.extend("é☃".as_bytes());
                s.truncate(len.max(1));
                String::from_utf8_lossy(&s).into_owned().into_bytes()
            }
            2 => (0..len).map(|_| self.next() as u8).collect(),
            _ => {
                let mut s = b"/bin/".to_vec();
                s.push(0xff);
                s.push(0xc3);
                s
            }
        }
    }

    fn string(&mut self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }

    fn list(&mut self) -> Vec<Vec<u8>> {
        (0..self.below(5)).map(|_| self.bytes()).collect()
    }

    fn ip(&mut self) -> IpAddr {
        if self.chance(2) {
            IpAddr::V4(Ipv4Addr::from(self.next() as u32))
        } else {
            IpAddr::V6(Ipv6Addr::from(
                u128::from(self.next()) << 64 | u128::from(self.next()),
            ))
        }
    }

    fn sockaddr(&mut self) -> SockAddr {
        match self.below(3) {
            0 => SockAddr::Inet {
                ip: self.ip(),
                port: self.next() as u16,
            },
            1 => SockAddr::Unix { path: self.bytes() },
            _ => SockAddr::Other {
                family: self.next() as u16,
            },
        }
    }

    fn socktuple(&mut self) -> SockTuple {
        if self.chance(4) {
            SockTuple::Unix { path: self.bytes() }
        } else {
            SockTuple::Inet {
                l4proto: *self.pick(&[6, 17, 1, 255, 58, 0]),
                src_ip: self.ip(),
                src_port: self.next() as u16,
                dst_ip: self.ip(),
                dst_port: self.next() as u16,
            }
        }
    }

    fn flags(&mut self, table: crate::table::FlagTable) -> u64 {
        let syms: Vec<(u64, &str)> = symbols(table).collect();
        match self.below(4) {
            0 => self.uint(),
            _ if syms.is_empty() => self.uint(),
            1 => self.pick(&syms).0,
            _ => {
                let mut v = 0;
                for _ in 0..self.below(4) + 1 {
                    v |= self.pick(&syms).0;
                }
                v
            }
        }
    }

    fn param(&mut self, kind: ParamKind) -> Param {
        match kind {
            ParamKind::Fd => Param::Int(if self.chance(3) { -100 } else { self.int() }),
            ParamKind::Int | ParamKind::Pid => Param::Int(self.int()),
            ParamKind::Uint | ParamKind::Uid | ParamKind::Gid | ParamKind::AbsTime => {
                Param::Uint(self.uint())
            }
            ParamKind::Flags(table) => Param::Uint(self.flags(table)),
            ParamKind::Path | ParamKind::Str | ParamKind::Buf => Param::Bytes(self.bytes()),
            ParamKind::StrList => Param::List(self.list()),
            ParamKind::SockAddr => Param::Addr(self.sockaddr()),
            ParamKind::SockTuple => Param::Tuple(self.socktuple()),
        }
    }

    pub(crate) fn event(&mut self, num: u64, ts: u64) -> Event {
        let n_types = table::events().len() as u64;
        // Mostly types with schemas; sometimes any type at all.
        let id = if self.chance(5) {
            self.below(n_types)
        } else {
            self.below(table::DETAILED.len() as u64)
        };
        let etype = EventType(id as u16);
        let spec = etype.spec();
        let n = if self.chance(4) {
            self.below(spec.params.len() as u64 + 1) as usize
        } else {
            spec.params.len()
        };
        let params: Vec<Param> = spec.params[..n]
            .iter()
            .map(|p| {
                if self.chance(6) {
                    Param::None
                } else {
                    self.param(p.kind)
                }
            })
            .collect();
        let truncated = if spec.params.is_empty() || !self.chance(3) {
            0
        } else {
            self.next() & ((1u64 << spec.params.len().min(63)) - 1)
        };
        let tid = if self.chance(8) {
            self.int()
        } else {
            self.below(5000) as i64 + 1
        };
        Event {
            num,
            ts,
            tid,
            pid: if self.chance(3) { self.int() } else { tid },
            etype,
            res: if self.chance(3) {
                -(self.below(134) as i64)
            } else {
                self.int()
            },
            params,
            truncated,
            cpu: if self.chance(2) {
                None
            } else {
                Some(self.next() as u32)
            },
        }
    }

    /// An fd's type and, for an inet socket, sometimes its tuple.
    fn fd_kind(&mut self) -> (FdType, Option<SockTuple>) {
        let kind = match self.below(17) {
            0 => FdType::File,
            1 => FdType::Directory,
            2 => FdType::Ipv4,
            3 => FdType::Ipv6,
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
            _ => FdType::Other,
        };
        let tuple = (kind.is_inet() && self.chance(2)).then(|| self.socktuple());
        (kind, tuple)
    }

    fn thread(&mut self, start_ts: u64) -> ThreadInfo {
        let tid = self.below(5000) as i64 + 1;
        let simple = self.chance(2);
        let pid = if simple { tid } else { self.int() };
        ThreadInfo {
            tid,
            pid,
            ppid: self.int(),
            vtid: if simple { tid } else { self.int() },
            vpid: if simple { pid } else { self.int() },
            sid: self.int(),
            vpgid: self.int(),
            pgid: self.int(),
            comm: self.bytes(),
            exe: self.bytes(),
            exepath: self.bytes(),
            args: self.list(),
            env: self.list(),
            cwd: self.bytes(),
            uid: self.next() as u32,
            gid: self.below(3) as u32,
            euid: self.next() as u32,
            egid: 0,
            loginuid: if simple { u32::MAX } else { self.next() as u32 },
            tty: self.below(2) as u32,
            start_ts: if simple { start_ts } else { self.uint() },
            cap_inheritable: self.uint(),
            cap_permitted: self.uint(),
            cap_effective: self.uint(),
            cgroup: self.bytes(),
            exe_writable: self.chance(2),
            exe_upper_layer: self.chance(2),
            exe_from_memfd: self.chance(2),
            exe_ino: self.uint(),
            exe_ino_ctime: self.uint(),
            exe_ino_mtime: self.uint(),
            fds: (0..self.below(6))
                .map(|_| {
                    let fd = self.int();
                    let (kind, tuple) = self.fd_kind();
                    FdInfo {
                        fd,
                        kind,
                        tuple,
                        name: self.bytes(),
                        flags: self.flags(crate::table::FlagTable::Open) as u32,
                    }
                })
                .collect(),
        }
    }

    fn container(&mut self) -> ContainerInfo {
        let mut labels: Vec<(String, String)> = (0..self.below(4))
            .map(|_| (self.string(), self.string()))
            .collect();
        if self.chance(2) {
            labels.sort();
            labels.dedup_by(|a, b| a.0 == b.0);
        }
        ContainerInfo {
            id: self.string(),
            runtime: self.string(),
            name: self.string(),
            image: self.string(),
            image_repository: self.string(),
            image_tag: self.string(),
            image_digest: self.string(),
            privileged: self.chance(2),
            start_ts: self.uint(),
            mounts: (0..self.below(3))
                .map(|_| MountInfo {
                    source: self.string(),
                    dest: self.string(),
                    mode: self.string(),
                    rdwr: self.chance(2),
                    propagation: self.string(),
                })
                .collect(),
            labels,
        }
    }

    pub(crate) fn snapshot(&mut self) -> Snapshot {
        let start_ts = self.uint();
        Snapshot {
            hostname: self.bytes(),
            start_ts,
            users: (0..self.below(3))
                .map(|_| UserInfo {
                    uid: self.next() as u32,
                    gid: self.next() as u32,
                    name: self.bytes(),
                    home: self.bytes(),
                    shell: self.bytes(),
                })
                .collect(),
            groups: (0..self.below(3))
                .map(|_| GroupInfo {
                    gid: self.next() as u32,
                    name: self.bytes(),
                })
                .collect(),
            containers: (0..self.below(3)).map(|_| self.container()).collect(),
            threads: (0..self.below(6)).map(|_| self.thread(start_ts)).collect(),
            dns: (0..self.below(4))
                .map(|_| DnsName {
                    // Sometimes a repeated name, so both JSON forms (object, pairs) occur.
                    name: if self.chance(4) {
                        "kubernetes.default.svc.cluster.local".to_string()
                    } else {
                        self.string()
                    },
                    addrs: (0..self.below(3)).map(|_| self.ip()).collect(),
                })
                .collect(),
        }
    }

    /// A capture with `n` events whose numbers and times are mostly, not always, sequential.
    pub(crate) fn capture(&mut self, n: usize) -> Capture {
        let snapshot = self.snapshot();
        let mut ts = snapshot.start_ts;
        let mut events = Vec::with_capacity(n);
        for i in 0..n {
            ts = if self.chance(10) {
                self.uint()
            } else {
                ts.wrapping_add(self.below(5000))
            };
            let num = if self.chance(10) {
                self.uint()
            } else {
                i as u64 + 1
            };
            events.push(self.event(num, ts));
        }
        Capture { snapshot, events }
    }
}
