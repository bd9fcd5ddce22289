//! Test fixtures: an event builder, a default process tree, and field access by Falco name.
//!
//! The default tree ([`tree`]), host unless noted, users from a fake passwd (`root` 0,
//! `alice` 1000, `www-data` 33):
//!
//! ```text
//! pid 1    systemd   /usr/lib/systemd/systemd            uid 0     cwd /
//! └─ 100   sshd      /usr/sbin/sshd -D                   uid 0
//!    └─ 200 sshd     /usr/sbin/sshd -D -R                uid 0
//!       └─ 300 bash  /bin/bash (-bash)                   uid 1000  loginuid 1000  tty 34816
//!          │                                              sid 300 vpgid 300 cwd /home/alice
//!          └─ 400 python3 /usr/bin/python3 script.py -v  uid 1000  loginuid 1000  tty 34816
//!                 threads 400, 401                        sid 300 vpgid 400 cwd /home/alice/work
//!                 fds 0-2 /dev/pts/0, 3 /home/alice/work/data.txt (O_CLOEXEC),
//!                 4 tcp 10.0.0.5:40000->93.184.216.34:443, 5 dir /etc
//! pid 1 ─ 600 containerd-shim                              uid 0
//!         └─ 700 nginx (vpid 1) cgroup /docker/<CONTAINER_ID>   uid 33 (www-data)
//!                container "web" image docker.io/library/nginx:1.25, pod web-0 in ns prod,
//!                mounts /var/run/docker.sock → /var/run/docker.sock, /etc → /host/etc
//! ```

use std::borrow::Cow;

use vigil_event::table;
use vigil_event::{
    ContainerInfo, Event, FdInfo, FdType, GroupInfo, MountInfo, Param, Snapshot, SockTuple,
    ThreadInfo, UserInfo,
};
use vigil_fields::{Catalog, Extract, Value};

use crate::{catalog, FileUserDb, State, StateConfig};

pub const T0: u64 = 1_700_000_000_000_000_000;
pub const CONTAINER_ID: &str = "3ad7b26ded6d8e7b23da7d48fe889434573036c27ae5a74837233de441c3601e";
pub const O_RDONLY: u64 = 0;
pub const O_WRONLY: u64 = 1;
pub const O_CREAT: u64 = 0o100;
pub const O_DIRECTORY: u64 = 0o200000;
pub const O_CLOEXEC: u64 = 0o2000000;

/// Builds one event; parameters by schema name.
#[derive(Clone)]
pub struct EventBuilder {
    evt: Event,
}

/// An event of type `name` from thread `tid` (pid = tid unless set).
pub fn ev(tid: i64, name: &str) -> EventBuilder {
    let etype = table::by_name(name).unwrap_or_else(|| panic!("no event type {name}"));
    EventBuilder {
        evt: Event {
            num: 1,
            ts: T0 + 1_000_000_000,
            tid,
            pid: tid,
            etype,
            res: 0,
            params: Vec::new(),
            truncated: 0,
            cpu: None,
        },
    }
}

impl EventBuilder {
    pub fn pid(mut self, pid: i64) -> Self {
        self.evt.pid = pid;
        self
    }

    pub fn res(mut self, res: i64) -> Self {
        self.evt.res = res;
        self
    }

    pub fn ts(mut self, ts: u64) -> Self {
        self.evt.ts = ts;
        self
    }

    pub fn cpu(mut self, cpu: u32) -> Self {
        self.evt.cpu = Some(cpu);
        self
    }

    pub fn num(mut self, num: u64) -> Self {
        self.evt.num = num;
        self
    }

    pub fn arg(mut self, name: &str, value: Param) -> Self {
        let spec = self.evt.etype.spec();
        let i = spec
            .param_index(name)
            .unwrap_or_else(|| panic!("{} has no parameter {name}", spec.name));
        if self.evt.params.len() <= i {
            self.evt.params.resize(i + 1, Param::None);
        }
        self.evt.params[i] = value;
        self
    }

    pub fn int(self, name: &str, v: i64) -> Self {
        self.arg(name, Param::Int(v))
    }

    pub fn uint(self, name: &str, v: u64) -> Self {
        self.arg(name, Param::Uint(v))
    }

    pub fn bytes(self, name: &str, v: impl AsRef<[u8]>) -> Self {
        self.arg(name, Param::Bytes(v.as_ref().to_vec()))
    }

    pub fn list(self, name: &str, v: &[&str]) -> Self {
        self.arg(
            name,
            Param::List(v.iter().map(|s| s.as_bytes().to_vec()).collect()),
        )
    }

    pub fn tuple(self, name: &str, l4proto: u8, src: &str, dst: &str) -> Self {
        let (src_ip, src_port) = split_addr(src);
        let (dst_ip, dst_port) = split_addr(dst);
        self.arg(
            name,
            Param::Tuple(SockTuple::Inet {
                l4proto,
                src_ip,
                src_port,
                dst_ip,
                dst_port,
            }),
        )
    }

    pub fn build(self) -> Event {
        self.evt
    }
}

fn split_addr(text: &str) -> (std::net::IpAddr, u16) {
    let sa: std::net::SocketAddr = text
        .parse()
        .unwrap_or_else(|e| panic!("bad address {text}: {e}"));
    (sa.ip(), sa.port())
}

pub fn user_db() -> FileUserDb {
    FileUserDb::parse(
        b"root:x:0:0:root:/root:/bin/bash\n\
          www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin\n\
          alice:x:1000:1000:Alice:/home/alice:/bin/zsh\n",
        b"root:x:0:\nwww-data:x:33:\nalice:x:1000:\n",
    )
}

fn thread(tid: i64, ppid: i64, comm: &str, exepath: &str, args: &[&str], uid: u32) -> ThreadInfo {
    ThreadInfo {
        tid,
        pid: tid,
        ppid,
        vtid: tid,
        vpid: tid,
        sid: 1,
        vpgid: tid,
        pgid: tid,
        comm: comm.into(),
        exe: exepath.into(),
        exepath: exepath.into(),
        args: args.iter().map(|a| a.as_bytes().to_vec()).collect(),
        env: vec![
            b"PATH=/usr/bin:/bin".to_vec(),
            format!("HOME=/home/{comm}").into_bytes(),
        ],
        cwd: b"/".to_vec(),
        uid,
        gid: uid,
        euid: uid,
        egid: uid,
        loginuid: u32::MAX,
        tty: 0,
        start_ts: T0 - 1_000_000_000 * (1000 - tid as u64),
        cap_inheritable: 0,
        cap_permitted: if uid == 0 { 0x1ff_ffff_ffff } else { 0 },
        cap_effective: if uid == 0 { 0x1ff_ffff_ffff } else { 0 },
        cgroup: b"0::/user.slice".to_vec(),
        ..ThreadInfo::default()
    }
}

fn file(fd: i64, name: &str, flags: u32) -> FdInfo {
    FdInfo {
        fd,
        kind: FdType::File,
        tuple: None,
        name: name.into(),
        flags,
    }
}

/// The snapshot of the default tree.
pub fn snapshot() -> Snapshot {
    let mut threads = Vec::new();
    threads.push(thread(1, 0, "systemd", "/usr/lib/systemd/systemd", &[], 0));
    threads.push(thread(100, 1, "sshd", "/usr/sbin/sshd", &["-D"], 0));
    threads.push(thread(200, 100, "sshd", "/usr/sbin/sshd", &["-D", "-R"], 0));
    let mut bash = thread(300, 200, "bash", "/bin/bash", &[], 1000);
    bash.exe = b"-bash".to_vec();
    bash.loginuid = 1000;
    bash.tty = 34816;
    bash.sid = 300;
    bash.cwd = b"/home/alice".to_vec();
    threads.push(bash);
    let mut py = thread(
        400,
        300,
        "python3",
        "/usr/bin/python3",
        &["script.py", "-v"],
        1000,
    );
    py.exe = b"python3".to_vec();
    py.loginuid = 1000;
    py.tty = 34816;
    py.sid = 300;
    py.cwd = b"/home/alice/work".to_vec();
    py.env.push(b"SECRET_TOKEN=abc=def".to_vec());
    py.fds = vec![
        file(0, "/dev/pts/0", 2),
        file(1, "/dev/pts/0", 2),
        file(2, "/dev/pts/0", 2),
        file(3, "/home/alice/work/data.txt", O_CLOEXEC as u32),
        FdInfo {
            fd: 4,
            kind: FdType::Ipv4,
            tuple: Some(SockTuple::Inet {
                l4proto: 6,
                src_ip: "10.0.0.5".parse().unwrap(),
                src_port: 40000,
                dst_ip: "93.184.216.34".parse().unwrap(),
                dst_port: 443,
            }),
            name: Vec::new(),
            flags: 2,
        },
        FdInfo {
            fd: 5,
            kind: FdType::Directory,
            tuple: None,
            name: b"/etc".to_vec(),
            flags: O_DIRECTORY as u32,
        },
    ];
    threads.push(py.clone());
    let mut py_thread = ThreadInfo {
        tid: 401,
        vtid: 401,
        fds: Vec::new(),
        ..py
    };
    py_thread.pid = 400;
    threads.push(py_thread);
    threads.push(thread(
        600,
        1,
        "containerd-shim",
        "/usr/bin/containerd-shim-runc-v2",
        &[],
        0,
    ));
    let mut nginx = thread(
        700,
        600,
        "nginx",
        "/usr/sbin/nginx",
        &["-g", "daemon off;"],
        33,
    );
    nginx.vpid = 1;
    nginx.vtid = 1;
    nginx.vpgid = 1;
    nginx.sid = 1;
    nginx.cgroup = format!("0::/system.slice/docker-{CONTAINER_ID}.scope").into_bytes();
    threads.push(nginx);
    Snapshot {
        hostname: b"testhost".to_vec(),
        start_ts: T0 - 1_000_000_000_000,
        users: Vec::new(),
        groups: Vec::new(),
        dns: Vec::new(),
        containers: vec![ContainerInfo {
            id: CONTAINER_ID[..12].to_string(),
            runtime: "docker".into(),
            name: "web".into(),
            image: "docker.io/library/nginx:1.25".into(),
            image_repository: "docker.io/library/nginx".into(),
            image_tag: "1.25".into(),
            image_digest: String::new(),
            privileged: true,
            start_ts: T0 - 500_000_000_000,
            mounts: vec![
                MountInfo {
                    source: "/var/run/docker.sock".into(),
                    dest: "/var/run/docker.sock".into(),
                    mode: String::new(),
                    rdwr: true,
                    propagation: "rprivate".into(),
                },
                MountInfo {
                    source: "/etc".into(),
                    dest: "/host/etc".into(),
                    mode: "ro".into(),
                    rdwr: false,
                    propagation: "rprivate".into(),
                },
            ],
            labels: vec![
                ("io.kubernetes.pod.name".into(), "web-0".into()),
                ("io.kubernetes.pod.namespace".into(), "prod".into()),
                ("app".into(), "web".into()),
            ],
        }],
        threads,
    }
}

/// A state loaded with the default tree and the fake user database.
pub fn tree() -> State {
    let mut state = State::new(StateConfig {
        hostname: b"configured".to_vec(),
        user_db: Box::new(user_db()),
        ..StateConfig::default()
    });
    state.load_snapshot(&snapshot());
    state
}

/// The values of field `name` (`proc.aname[2]` style) for `evt`, or `None` (no value).
pub fn values(state: &State, evt: &Event, name: &str) -> Option<Vec<Value<'static>>> {
    let (base, arg) = match name.find('[') {
        Some(i) if name.ends_with(']') => (&name[..i], Some(&name[i + 1..name.len() - 1])),
        _ => (name, None),
    };
    let field = catalog()
        .lookup(base, arg)
        .unwrap_or_else(|e| panic!("field {name} does not resolve: {e:?}"));
    let view = state.view(evt);
    let mut out = Vec::new();
    let before = out.len();
    let ok = view.extract(&field, &mut out);
    assert!(
        ok || out.len() == before,
        "{name}: no value but output appended"
    );
    ok.then(|| out.into_iter().map(Value::into_owned).collect())
}

/// The value of field `name` rendered as Falco prints it (list values joined by spaces), or
/// `None` for no value.
pub fn field(state: &State, evt: &Event, name: &str) -> Option<String> {
    values(state, evt, name).map(|vals| {
        let mut s = String::new();
        for (i, v) in vals.iter().enumerate() {
            if i > 0 {
                s.push(' ');
            }
            v.render(&mut s);
        }
        s
    })
}

/// `field` for a field that must have a value.
pub fn f(state: &State, evt: &Event, name: &str) -> String {
    field(state, evt, name).unwrap_or_else(|| panic!("{name} has no value for {evt:?}"))
}

/// Applies `evt` and returns it (so a test can read its fields, then `finish` it).
pub fn apply(state: &mut State, evt: Event) -> Event {
    state.apply(&evt);
    evt
}

/// A borrowed string value, for comparisons.
pub fn s(text: &str) -> Value<'static> {
    Value::Str(Cow::Owned(text.as_bytes().to_vec()))
}

#[allow(dead_code)]
pub fn users_snapshot() -> (Vec<UserInfo>, Vec<GroupInfo>) {
    (
        vec![UserInfo {
            uid: 1000,
            gid: 1000,
            name: b"bob".to_vec(),
            home: b"/home/bob".to_vec(),
            shell: b"/bin/sh".to_vec(),
        }],
        vec![GroupInfo {
            gid: 1000,
            name: b"bobs".to_vec(),
        }],
    )
}

/// A [`crate::FakeProc`] shared with the test that handed it to a [`crate::LiveUsers`] (so
/// the test can change files afterwards), counting stamps and reads of files.
#[derive(Clone, Default)]
pub struct SharedFake {
    pub fake: std::sync::Arc<std::sync::Mutex<crate::FakeProc>>,
    pub stamps: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub reads: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl SharedFake {
    pub fn with(files: &[(&str, &str)]) -> SharedFake {
        let shared = SharedFake::default();
        for (path, text) in files {
            shared.set(path, text);
        }
        shared
    }

    /// Writes (replaces) a file.
    pub fn set(&self, path: &str, text: &str) {
        self.fake.lock().unwrap().file(path, text);
    }

    pub fn remove(&self, path: &str) {
        self.fake.lock().unwrap().remove(path);
    }

    pub fn stamps(&self) -> u64 {
        self.stamps.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn reads(&self) -> u64 {
        self.reads.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl crate::ProcSource for SharedFake {
    fn list(&self, dir: &str) -> std::io::Result<Vec<i64>> {
        self.fake.lock().unwrap().list(dir)
    }
    fn read(&self, path: &str, max: usize) -> std::io::Result<Vec<u8>> {
        self.fake.lock().unwrap().read(path, max)
    }
    fn read_link(&self, path: &str) -> std::io::Result<Vec<u8>> {
        self.fake.lock().unwrap().read_link(path)
    }
    fn stamp(&self, path: &str) -> std::io::Result<crate::FileStamp> {
        self.stamps
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.fake.lock().unwrap().stamp(path)
    }
    fn read_stamped(&self, path: &str, max: usize) -> std::io::Result<(crate::FileStamp, Vec<u8>)> {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.fake.lock().unwrap().read_stamped(path, max)
    }
}
