//! [`EventView`]: field values of one event over the state tables.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::fmt::Write;
use std::io::Write as _;
use std::net::IpAddr;

use vigil_container::{label, SANDBOX_ID_LABEL};
use vigil_event::{flags, ContainerInfo, Event, EventSpec, FlagTable, MountInfo, Param, ParamKind};
use vigil_fields::{Extract, FieldArg, FieldRef, Value};

use crate::fields::F;
use crate::path::{basename, dirname, glob_match};
use crate::render::{self, TimeFormat};
use crate::schema::{self, param_i64, param_u64, FdRef, Op, PathRef, TypeInfo, NONE, RAW};
use crate::state::{State, AT_FDCWD, MAX_ANCESTORS};
use crate::table::{FdEntry, Image, Net, Process, Thread};
use vigil_event::FdType;

/// The thread, process and (lazily) fd, parent and container of one event.
pub struct EventView<'a> {
    state: &'a State,
    evt: &'a Event,
    info: &'static TypeInfo,
    thread: Option<&'a Thread>,
    proc: Option<&'a Process>,
    fd: OnceCell<Option<(i64, &'a FdEntry)>>,
    parent: OnceCell<Option<&'a Process>>,
    container: OnceCell<Option<&'a ContainerInfo>>,
}

type Out<'b> = Vec<Value<'b>>;

#[inline(always)] // called per extracted value
fn push_str<'b>(out: &mut Out<'b>, bytes: &'b [u8]) -> bool {
    out.push(Value::Str(Cow::Borrowed(bytes)));
    true
}

#[inline(always)] // called per extracted value
fn push_nonempty<'b>(out: &mut Out<'b>, bytes: &'b [u8]) -> bool {
    !bytes.is_empty() && push_str(out, bytes)
}

fn push_owned<'b>(out: &mut Out<'b>, text: String) -> bool {
    push_bytes(out, text.into_bytes())
}

fn push_bytes<'b>(out: &mut Out<'b>, bytes: Vec<u8>) -> bool {
    out.push(Value::Str(Cow::Owned(bytes)));
    true
}

/// `k8s.pod.labels` as Falco renders a pod sandbox's labels: `key:value` (`key` alone when
/// the value is empty) in key order, joined by `, `, without the runtime's `io.kubernetes.*`
/// and `annotation.*` entries; the first of repeated names.
fn pod_labels(sandbox: &ContainerInfo) -> String {
    let mut labels: Vec<&(String, String)> = sandbox
        .labels
        .iter()
        .filter(|(k, _)| !k.starts_with("io.kubernetes.") && !k.starts_with("annotation."))
        .collect();
    labels.sort_by(|a, b| a.0.cmp(&b.0));
    labels.dedup_by(|b, a| a.0 == b.0);
    let mut text = String::new();
    for (k, v) in labels {
        if !text.is_empty() {
            text.push_str(", ");
        }
        text.push_str(k);
        if !v.is_empty() {
            text.push(':');
            text.push_str(v);
        }
    }
    text
}

#[inline(always)] // called per extracted value
fn push_opt<'b>(out: &mut Out<'b>, value: Option<Value<'b>>) -> bool {
    match value {
        Some(v) => {
            out.push(v);
            true
        }
        None => false,
    }
}

fn known_id(id: i64) -> Option<Value<'static>> {
    (id >= 0).then_some(Value::I64(id))
}

/// The protocol letter Falco adds to an inet descriptor's type letter (`<4t>`).
fn l4proto_char(proto: u8) -> Option<char> {
    match proto {
        6 => Some('t'),
        17 => Some('u'),
        1 | 58 => Some('i'),
        255 => Some('r'),
        _ => None,
    }
}

fn l4proto_name(proto: u8) -> Option<&'static str> {
    match proto {
        6 => Some("tcp"),
        17 => Some("udp"),
        1 | 58 => Some("icmp"),
        255 => Some("raw"),
        _ => None,
    }
}

impl State {
    /// The field values of `evt` over the current tables (call after [`State::apply`]).
    pub fn view<'a>(&'a self, evt: &'a Event) -> EventView<'a> {
        EventView::new(self, evt)
    }
}

impl<'a> EventView<'a> {
    fn new(state: &'a State, evt: &'a Event) -> Self {
        let thread = state.threads.get(&evt.tid);
        let pid = thread.map_or(evt.pid, |t| t.pid);
        EventView {
            state,
            evt,
            info: schema::type_info(evt.etype),
            thread,
            proc: state.procs.get(&pid),
            fd: OnceCell::new(),
            parent: OnceCell::new(),
            container: OnceCell::new(),
        }
    }

    fn spec(&self) -> &'static EventSpec {
        static UNKNOWN: EventSpec = EventSpec {
            name: "unknown",
            nr: None,
            res_name: "res",
            res_kind: ParamKind::Int,
            params: &[],
        };
        vigil_event::table::events()
            .get(usize::from(self.evt.etype.0))
            .unwrap_or(&UNKNOWN)
    }

    fn pid(&self) -> i64 {
        self.proc.map_or(self.evt.pid, |p| p.pid)
    }

    fn image(&self) -> Option<&'a Image> {
        self.proc.map(|p| &*p.image).filter(|i| i.known)
    }

    fn creds(&self) -> Option<&'a Process> {
        self.proc.filter(|p| p.creds_known)
    }

    fn parent_of(&self, p: &Process) -> Option<&'a Process> {
        if p.ppid <= 0 || p.ppid == p.pid {
            return None;
        }
        self.state.procs.get(&p.ppid)
    }

    fn parent(&self) -> Option<&'a Process> {
        *self
            .parent
            .get_or_init(|| self.proc.and_then(|p| self.parent_of(p)))
    }

    /// Ancestor `n` (0 = the process itself).
    fn ancestor(&self, n: i64) -> Option<&'a Process> {
        if !(0..=MAX_ANCESTORS as i64 * 64).contains(&n) {
            return None;
        }
        let mut cur = self.proc?;
        if n >= 1 {
            cur = self.parent()?;
        }
        for _ in 1..n {
            cur = self.parent_of(cur)?;
        }
        Some(cur)
    }

    /// The ancestors from the parent up, bounded and stopping at a cycle.
    fn ancestors(&self) -> impl Iterator<Item = &'a Process> + '_ {
        let mut seen = [0i64; MAX_ANCESTORS];
        let mut n = 0;
        let mut cur = self.parent();
        std::iter::from_fn(move || {
            let p = cur?;
            if n >= MAX_ANCESTORS
                || seen[..n].contains(&p.pid)
                || Some(p.pid) == self.proc.map(|s| s.pid)
            {
                return None;
            }
            seen[n] = p.pid;
            n += 1;
            cur = self.parent_of(p);
            Some(p)
        })
    }

    /// The leader of the group of processes sharing `key` (session or process group): the
    /// ancestor whose vpid is the key, else the eldest ancestor with the same key.
    fn group_leader(&self, key: impl Fn(&Process) -> i64) -> Option<&'a Process> {
        let me = self.proc?;
        let id = key(me);
        if id < 0 {
            return None;
        }
        if me.vpid == id {
            return Some(me);
        }
        let mut leader = me;
        for p in self.ancestors() {
            if key(p) != id {
                break;
            }
            leader = p;
            if p.vpid == id {
                break;
            }
        }
        Some(leader)
    }

    /// The descriptor number the event names (its argument, or the result of a call that
    /// creates one), whether or not it is valid or tracked. A call that failed to create
    /// one names -1, whatever its error, as libsinsp's `fd.num` does (its last-event
    /// descriptor is only set by a descriptor added to the table): Falco's
    /// `open_file_failed` tests `fd.num=-1`.
    fn fd_number(&self) -> Option<i64> {
        match self.info.fd {
            FdRef::None => None,
            FdRef::Res => Some(self.evt.res.max(-1)),
            FdRef::Param(i) => param_i64(self.evt, i),
        }
    }

    fn fd(&self) -> Option<(i64, &'a FdEntry)> {
        *self.fd.get_or_init(|| {
            let fd = self.fd_number()?;
            if fd < 0 {
                return None;
            }
            let p = self.proc?;
            let table = self.state.fd_tables.get(&p.fd_table)?;
            table.fds.get(&fd).map(|e| (fd, e))
        })
    }

    fn fd_net(&self) -> Option<&'a Net> {
        self.fd().and_then(|(_, e)| e.obj.net.as_ref())
    }

    /// For an open that failed (or whose fd is untracked): the path from the arguments,
    /// resolved, and as passed.
    fn open_path(&self) -> Option<(Vec<u8>, &'a [u8])> {
        if !matches!(self.info.op, Op::Open { .. }) || self.fd().is_some() {
            return None;
        }
        let p = self.info.path?;
        let raw = match self.evt.param(usize::from(p.path)) {
            Param::Bytes(b) => b.as_slice(),
            _ => return None,
        };
        Some((self.resolve(p, raw), raw))
    }

    fn path_arg(&self, p: Option<PathRef>) -> Option<&'a [u8]> {
        match self.evt.param(usize::from(p?.path)) {
            Param::Bytes(b) => Some(b.as_slice()),
            _ => None,
        }
    }

    fn resolve(&self, p: PathRef, raw: &[u8]) -> Vec<u8> {
        if p.dirfd == RAW {
            return raw.to_vec();
        }
        let dirfd = if p.dirfd == NONE {
            Some(AT_FDCWD)
        } else {
            param_i64(self.evt, p.dirfd)
        };
        self.state.resolve_path(self.pid(), dirfd, raw)
    }

    fn resolved_path<'b>(&self, p: Option<PathRef>, out: &mut Out<'b>) -> bool {
        match (p, self.path_arg(p)) {
            (Some(p), Some(raw)) => {
                out.push(Value::Str(Cow::Owned(self.resolve(p, raw))));
                true
            }
            _ => false,
        }
    }

    fn container(&self) -> Option<&'a ContainerInfo> {
        *self.container.get_or_init(|| {
            let image = self.image()?;
            self.state.containers.get(&image.container_id)
        })
    }

    /// The pod sandbox of the event's container (Falco's: the container named by its
    /// `io.kubernetes.sandbox.id` label), when the table knows it.
    fn pod_sandbox(&self) -> Option<&'a ContainerInfo> {
        let id = label(self.container()?, SANDBOX_ID_LABEL)?;
        let short = &id.as_bytes()[..id.len().min(vigil_procfs::SHORT_ID_LEN)];
        self.state.containers.get(short)
    }

    /// `Some(true)` in a container, `Some(false)` on the host, `None` when unknown.
    fn in_container(&self) -> Option<bool> {
        self.image().map(|i| !i.container_id.is_empty())
    }

    fn container_str<'b>(
        &self,
        out: &mut Out<'b>,
        get: impl Fn(&'a ContainerInfo) -> &'a str,
    ) -> bool
    where
        'a: 'b,
    {
        match self.container() {
            Some(c) => push_nonempty(out, get(c).as_bytes()),
            None => false,
        }
    }

    fn mount(&self, arg: &FieldArg, by_dest: bool) -> Option<&'a MountInfo> {
        let c = self.container()?;
        match arg {
            FieldArg::Index(i) => usize::try_from(*i).ok().and_then(|i| c.mounts.get(i)),
            FieldArg::Key(k) => {
                if let Ok(i) = k.trim().parse::<usize>() {
                    return c.mounts.get(i);
                }
                c.mounts.iter().find(|m| {
                    let subject = if by_dest { &m.dest } else { &m.source };
                    glob_match(k.as_bytes(), subject.as_bytes())
                })
            }
            FieldArg::None => None,
        }
    }

    fn render_mount(m: &MountInfo, out: &mut String) {
        let _ = write!(
            out,
            "{}:{}:{}:{}:{}",
            m.source, m.dest, m.mode, m.rdwr, m.propagation
        );
    }

    fn result_string(&self) -> Option<String> {
        if self.spec().res_name.is_empty() {
            return None;
        }
        Some(self.evt.res.to_string())
    }

    /// The container whose user tables name this event's ids (empty: the host).
    fn users_container(&self) -> &'a [u8] {
        self.proc.map_or(&[], |p| p.image.container_id.as_slice())
    }

    fn user_name(&self, uid: u32) -> Option<&'a [u8]> {
        self.state
            .user_in(self.users_container(), uid)
            .map(|u| u.name.as_slice())
    }

    fn group_name(&self, gid: u32) -> Option<&'a [u8]> {
        self.state
            .group_in(self.users_container(), gid)
            .map(|g| g.name.as_slice())
    }

    /// `evt.arg.NAME` for a schema parameter.
    fn arg_value<'b>(&self, index: usize, out: &mut Out<'b>) -> bool
    where
        'a: 'b,
    {
        let spec = self.spec();
        let Some(ps) = spec.params.get(index) else {
            return false;
        };
        let value = self.evt.param(index);
        match (ps.kind, value) {
            (ParamKind::Path | ParamKind::Str | ParamKind::Buf, Param::Bytes(b)) => {
                push_str(out, b)
            }
            _ => {
                let mut text = Vec::new();
                let ok = render::param(
                    ps.kind,
                    value,
                    |u| self.user_name(u),
                    |g| self.group_name(g),
                    &mut text,
                );
                ok && push_bytes(out, text)
            }
        }
    }

    /// `evt.rawarg.NAME`: the argument (or the result) of that name as it was recorded, numbers
    /// as numbers, strings as bytes; `string` when the field is string-typed (numbers then
    /// print in decimal). Socket addresses and tuples have no raw value.
    fn raw_arg<'b>(&self, name: &str, string: bool, out: &mut Out<'b>) -> bool
    where
        'a: 'b,
    {
        let spec = self.spec();
        let number = |out: &mut Out<'b>, v: Value<'b>| {
            if string {
                let mut text = String::new();
                v.render(&mut text);
                push_owned(out, text)
            } else {
                push_opt(out, Some(v))
            }
        };
        if !spec.res_name.is_empty() && name == spec.res_name {
            return number(out, Value::I64(self.evt.res));
        }
        let Some(i) = spec.param_index(name) else {
            return false;
        };
        match self.evt.param(i) {
            Param::Int(v) => number(out, Value::I64(*v)),
            Param::Uint(v) => number(out, Value::U64(*v)),
            Param::Bytes(b) if string => push_str(out, b),
            Param::List(items) if string => {
                for item in items {
                    out.push(Value::Str(std::borrow::Cow::Borrowed(item)));
                }
                !items.is_empty()
            }
            _ => false,
        }
    }

    fn arg_by_name<'b>(&self, name: &str, out: &mut Out<'b>) -> bool
    where
        'a: 'b,
    {
        let spec = self.spec();
        if !spec.res_name.is_empty() && (name == spec.res_name || name == "res_or_fd") {
            return self.result_string().is_some_and(|s| push_owned(out, s));
        }
        if let Some(i) = spec.param_index(name) {
            return self.arg_value(i, out);
        }
        // Falco's execve exit calls the exe flags `flags`.
        if name == "flags" {
            if let Some(i) = spec.param_index("exe_flags") {
                if let Some(v) = param_u64(self.evt, u8::try_from(i).unwrap_or(NONE)) {
                    let mut text = String::new();
                    render::exe_flags(v, &mut text);
                    return push_owned(out, text);
                }
            }
        }
        false
    }

    /// `evt.args` as Falco writes it: `name=value` per parameter, and `name=value(resolved)`
    /// where Falco resolves the value: flags and enumerations to their symbols
    /// (`domain=17(AF_PACKET)`), descriptors to `<typechar>name` from the fd table
    /// (`fd=3(<f>/etc/passwd)`, `fd=5(<4t>10.0.0.1:40000->10.0.0.2:443)`, `-100(AT_FDCWD)`),
    /// relative paths to absolute ones (`name=../x(/home/alice/x)`),
    /// user and group ids to names (`uid=0(root)`, `-1(<NONE>)`), pids to their thread's name,
    /// negative results to errno names (`res=-2(ENOENT)`).
    fn evt_args(&self) -> Vec<u8> {
        let spec = self.spec();
        let mut text = Vec::new();
        if !spec.res_name.is_empty() {
            let _ = write!(text, "{}=", spec.res_name);
            let res = Param::Int(self.evt.res);
            if spec.res_kind == ParamKind::Fd {
                self.render_arg(ParamKind::Fd, &res, &mut text);
            } else {
                let _ = write!(text, "{}", self.evt.res);
                if let Some(name) = (self.evt.res < 0)
                    .then(|| flags::errno_name(-self.evt.res))
                    .flatten()
                {
                    let _ = write!(text, "({name})");
                }
            }
        }
        for (i, ps) in spec.params.iter().enumerate() {
            let value = self.evt.param(i);
            if matches!(value, Param::None) {
                continue;
            }
            if !text.is_empty() {
                text.push(b' ');
            }
            let _ = write!(text, "{}=", ps.name);
            self.render_arg(ps.kind, value, &mut text);
            // A relative path argument, resolved against its dirfd or the cwd.
            if let Param::Bytes(raw) = value {
                let path_ref = [self.info.path, self.info.source, self.info.target]
                    .into_iter()
                    .flatten()
                    .find(|p| usize::from(p.path) == i && p.dirfd != RAW);
                if let Some(p) = path_ref.filter(|_| !raw.is_empty() && raw[0] != b'/') {
                    let resolved = self.resolve(p, raw);
                    if resolved.first() == Some(&b'/') {
                        text.push(b'(');
                        text.extend_from_slice(&resolved);
                        text.push(b')');
                    }
                }
            }
        }
        text
    }

    /// One `evt.args` value (see [`EventView::evt_args`]).
    fn render_arg(&self, kind: ParamKind, value: &Param, out: &mut Vec<u8>) {
        let number = match value {
            Param::Int(v) => Some(*v),
            Param::Uint(v) => Some(*v as i64),
            _ => None,
        };
        let Some(n) = number else {
            render::param(
                kind,
                value,
                |u| self.user_name(u),
                |g| self.group_name(g),
                out,
            );
            return;
        };
        match kind {
            ParamKind::Fd => {
                let _ = write!(out, "{n}");
                if n == AT_FDCWD {
                    out.extend_from_slice(b"(AT_FDCWD)");
                } else if n < 0 {
                    if let Some(name) = flags::errno_name(-n) {
                        let _ = write!(out, "({name})");
                    }
                } else if let Some(e) = self
                    .proc
                    .and_then(|p| self.state.fd_tables.get(&p.fd_table))
                    .and_then(|t| t.fds.get(&n))
                {
                    let _ = write!(out, "(<{}", e.obj.ty.typechar());
                    if let Some(c) = e.obj.net.as_ref().and_then(|net| l4proto_char(net.l4proto)) {
                        let _ = write!(out, "{c}");
                    }
                    out.push(b'>');
                    out.extend_from_slice(&e.obj.name);
                    out.push(b')');
                }
            }
            ParamKind::Uid | ParamKind::Gid => {
                let id = n as u64;
                if id == u64::from(u32::MAX) {
                    out.extend_from_slice(b"-1(<NONE>)");
                    return;
                }
                let _ = write!(out, "{id}(");
                let name = u32::try_from(id).ok().and_then(|id| {
                    if kind == ParamKind::Uid {
                        self.user_name(id)
                    } else {
                        self.group_name(id)
                    }
                });
                match name {
                    Some(name) => out.extend_from_slice(name),
                    None => out.extend_from_slice(b"<NA>"),
                }
                out.push(b')');
            }
            ParamKind::Pid => {
                let _ = write!(out, "{n}");
                let comm = self
                    .state
                    .threads
                    .get(&n)
                    .and_then(|t| self.state.procs.get(&t.pid))
                    .map(|p| &p.image.comm)
                    .filter(|c| !c.is_empty());
                if let Some(comm) = comm {
                    out.push(b'(');
                    out.extend_from_slice(comm);
                    out.push(b')');
                }
            }
            // Falco has no symbols for socket types (`type` of socket/socketpair is a plain
            // number there), and the tables without symbols are numbers anyway.
            ParamKind::Flags(FlagTable::SocketType | FlagTable::None) => {
                let _ = write!(out, "{}", n as u64);
            }
            ParamKind::Flags(table) => {
                let v = n as u64;
                // Modes are octal in Falco (`%#o`).
                let mark = out.len();
                if table == FlagTable::Mode && v != 0 {
                    let _ = write!(out, "0{v:o}");
                } else {
                    let _ = write!(out, "{v}");
                }
                let digits = String::from_utf8_lossy(&out[mark..]).into_owned();
                let mut symbols = String::new();
                flags::render(table, v, &mut symbols);
                if symbols != digits && symbols != v.to_string() {
                    let _ = write!(out, "({symbols})");
                }
            }
            _ => {
                render::param(
                    kind,
                    value,
                    |u| self.user_name(u),
                    |g| self.group_name(g),
                    out,
                );
            }
        }
    }

    fn open_flags(&self) -> Option<(u64, u64, bool)> {
        let Op::Open { creat, .. } = self.info.op else {
            return None;
        };
        if creat {
            let mode = param_u64(self.evt, self.info.open_mode).unwrap_or(0);
            return Some((0o100 | 1 | 0o1000, mode, true));
        }
        let flags = param_u64(self.evt, self.info.open_flags).unwrap_or(0);
        let mode = param_u64(self.evt, self.info.open_mode).unwrap_or(0);
        Some((flags, mode, false))
    }

    fn cap_set<'b>(&self, out: &mut Out<'b>, get: impl Fn(&Process) -> u64) -> bool {
        let Some(p) = self.creds() else {
            return false;
        };
        let mut text = String::new();
        render::caps(get(p), &mut text);
        push_owned(out, text)
    }

    fn net_ip<'b>(&self, out: &mut Out<'b>, get: impl Fn(&Net) -> IpAddr) -> bool {
        push_opt(out, self.fd_net().map(|n| Value::Ip(get(n))))
    }

    /// Every name the snapshot's DNS table gives the address; no value without one.
    fn net_names<'b>(&'b self, out: &mut Out<'b>, get: impl Fn(&Net) -> IpAddr) -> bool {
        let Some(net) = self.fd_net() else {
            return false;
        };
        let names = self.state.dns_names(&get(net));
        for name in names {
            out.push(Value::Str(Cow::Borrowed(name.as_bytes())));
        }
        !names.is_empty()
    }

    fn net_port<'b>(&self, out: &mut Out<'b>, get: impl Fn(&Net) -> u16) -> bool {
        push_opt(out, self.fd_net().map(|n| Value::U64(u64::from(get(n)))))
    }

    fn container_start_ts(&self) -> Option<u64> {
        if let Some(c) = self.container().filter(|c| c.start_ts > 0) {
            return Some(c.start_ts);
        }
        // Without runtime metadata: the start of the container's pid-namespace init.
        let me = self.proc?;
        let id = &self.image()?.container_id;
        if id.is_empty() {
            return None;
        }
        std::iter::once(me)
            .chain(self.ancestors())
            .take_while(|p| p.image.container_id == *id)
            .find(|p| p.vpid == 1)
            .map(|p| p.start_ts)
            .filter(|&t| t > 0)
    }

    fn ancestor_field<'b>(
        &self,
        arg: &FieldArg,
        out: &mut Out<'b>,
        get: impl Fn(&'a Process) -> Option<Value<'a>>,
    ) -> bool
    where
        'a: 'b,
    {
        match arg {
            FieldArg::Index(n) => push_opt(out, self.ancestor(*n).and_then(&get)),
            _ => {
                if self.proc.is_none() {
                    return false;
                }
                for p in self.ancestors() {
                    if let Some(v) = get(p) {
                        out.push(v);
                    }
                }
                true
            }
        }
    }
}

fn image_str<'a>(p: &'a Process, get: impl Fn(&'a Image) -> &'a [u8]) -> Option<Value<'a>> {
    let image = &*p.image;
    if !image.known {
        return None;
    }
    let s = get(image);
    (!s.is_empty()).then_some(Value::Str(Cow::Borrowed(s)))
}

impl Extract for EventView<'_> {
    fn event_type(&self) -> u16 {
        self.evt.etype.0
    }

    fn extract<'b>(&'b self, field: &FieldRef, out: &mut Vec<Value<'b>>) -> bool {
        let Some(f) = F::from_id(field.id) else {
            return false;
        };
        let evt = self.evt;
        let state = self.state;
        let time = |out: &mut Out<'b>, format| {
            let mut text = String::new();
            render::time(evt.ts, format, &mut text);
            push_owned(out, text)
        };
        match f {
            // ----- evt -----
            F::EvtNum => push_opt(out, Some(Value::U64(evt.num))),
            F::EvtTime => time(out, TimeFormat::Time),
            F::EvtTimeS => time(out, TimeFormat::TimeS),
            F::EvtTimeIso => time(out, TimeFormat::Iso8601),
            F::EvtDatetime => time(out, TimeFormat::DateTime),
            F::EvtDatetimeS => time(out, TimeFormat::DateTimeS),
            F::EvtRawtime => push_opt(out, Some(Value::U64(evt.ts))),
            F::EvtRawtimeS => push_opt(out, Some(Value::U64(evt.ts / 1_000_000_000))),
            F::EvtRawtimeNs => push_opt(out, Some(Value::U64(evt.ts % 1_000_000_000))),
            F::EvtReltime => push_opt(out, Some(Value::U64(evt.ts.saturating_sub(state.start_ts)))),
            F::EvtHostname => push_nonempty(out, &state.hostname),
            F::EvtSource => push_str(out, b"syscall"),
            F::EvtIsAsync => push_opt(out, Some(Value::Bool(false))),
            F::EvtDir => push_str(out, b"<"),
            F::EvtType => push_str(out, self.spec().name.as_bytes()),
            F::SyscallType => {
                let spec = self.spec();
                spec.nr.is_some() && push_str(out, spec.name.as_bytes())
            }
            F::EvtCategory => push_str(out, self.info.category.as_bytes()),
            F::EvtArgs | F::EvtInfo => push_bytes(out, self.evt_args()),
            F::EvtArg => match &field.arg {
                FieldArg::Key(name) => self.arg_by_name(name, out),
                FieldArg::Index(0) if !self.spec().res_name.is_empty() => {
                    self.result_string().is_some_and(|s| push_owned(out, s))
                }
                FieldArg::Index(i) => {
                    let offset = i64::from(!self.spec().res_name.is_empty());
                    usize::try_from(i - offset).is_ok_and(|i| self.arg_value(i, out))
                }
                FieldArg::None => false,
            },
            F::EvtRawarg | F::EvtRawargI64 | F::EvtRawargU64 => match &field.arg {
                FieldArg::Key(name) => self.raw_arg(name, f == F::EvtRawarg, out),
                _ => false,
            },
            // Known from the eBPF driver (and captures it wrote); the ptrace driver has none.
            F::EvtCpu => push_opt(out, evt.cpu.map(|c| Value::I64(i64::from(c)))),
            // DOUBLE fields in Falco; no type or data for them here (`Catalog::never_has_value`).
            F::ThreadCpu | F::ThreadCpuUser | F::ThreadCpuSystem => false,
            F::EvtIsWait => push_opt(
                out,
                Some(Value::Bool(matches!(
                    self.spec().name,
                    "epoll_wait" | "poll" | "ppoll" | "select" | "nanosleep"
                ))),
            ),
            F::EvtBuffer => match evt.param(usize::from(self.info.data)) {
                Param::Bytes(b) => push_str(out, b),
                _ => false,
            },
            F::EvtBuflen => match evt.param(usize::from(self.info.data)) {
                Param::Bytes(b) => push_opt(out, Some(Value::U64(b.len() as u64))),
                _ => false,
            },
            F::EvtRes => {
                if self.spec().res_name.is_empty() {
                    false
                } else if evt.res >= 0 {
                    push_str(out, b"SUCCESS")
                } else {
                    match flags::errno_name(-evt.res) {
                        Some(name) => push_str(out, name.as_bytes()),
                        None => push_owned(out, evt.res.to_string()),
                    }
                }
            }
            F::EvtRawres => push_opt(out, Some(Value::I64(evt.res))),
            F::EvtFailed => push_opt(out, Some(Value::Bool(evt.res < 0))),
            F::EvtCount => push_opt(out, Some(Value::U64(1))),
            F::EvtIsIo => push_opt(out, Some(Value::Bool(self.info.io != 0))),
            F::EvtIsIoRead => push_opt(out, Some(Value::Bool(self.info.io == 1))),
            F::EvtIsIoWrite => push_opt(out, Some(Value::Bool(self.info.io == 2))),
            F::EvtIoDir => match self.info.io {
                1 => push_str(out, b"r"),
                2 => push_str(out, b"w"),
                _ => false,
            },
            F::EvtIsOpenRead | F::EvtIsOpenWrite | F::EvtIsOpenExec | F::EvtIsOpenCreate => {
                let v = self.open_flags().is_some_and(|(flags, mode, creat)| {
                    let acc = flags & 3;
                    let create = creat || flags & 0o100 != 0;
                    match f {
                        F::EvtIsOpenRead => acc == 0 || acc == 2,
                        F::EvtIsOpenWrite => acc == 1 || acc == 2,
                        F::EvtIsOpenExec => create && mode & 0o111 != 0,
                        _ => create,
                    }
                });
                push_opt(out, Some(Value::Bool(v)))
            }
            F::EvtAbspath | F::FsPathName => self.resolved_path(self.info.path, out),
            F::EvtAbspathSrc | F::FsPathSource => self.resolved_path(self.info.source, out),
            F::EvtAbspathDst | F::FsPathTarget => self.resolved_path(self.info.target, out),
            F::FsPathNameraw => self
                .path_arg(self.info.path)
                .is_some_and(|b| push_str(out, b)),
            F::FsPathSourceraw => self
                .path_arg(self.info.source)
                .is_some_and(|b| push_str(out, b)),
            F::FsPathTargetraw => self
                .path_arg(self.info.target)
                .is_some_and(|b| push_str(out, b)),
            // ----- proc -----
            F::ProcPid => push_opt(out, self.proc.map(|p| Value::I64(p.pid))),
            F::ProcPpid => push_opt(
                out,
                self.proc.filter(|p| p.ppid > 0).map(|p| Value::I64(p.ppid)),
            ),
            F::ProcApid => self.ancestor_field(&field.arg, out, |p| Some(Value::I64(p.pid))),
            F::ProcVpid => push_opt(out, self.proc.and_then(|p| known_id(p.vpid))),
            F::ProcPvpid => push_opt(out, self.parent().and_then(|p| known_id(p.vpid))),
            F::ProcSid => push_opt(out, self.proc.and_then(|p| known_id(p.sid))),
            F::ProcSname => push_opt(
                out,
                self.group_leader(|p| p.sid)
                    .and_then(|p| image_str(p, |i| &i.comm)),
            ),
            F::ProcSidExe => push_opt(
                out,
                self.group_leader(|p| p.sid)
                    .and_then(|p| image_str(p, |i| &i.exe)),
            ),
            F::ProcSidExepath => push_opt(
                out,
                self.group_leader(|p| p.sid)
                    .and_then(|p| image_str(p, |i| &i.exepath)),
            ),
            F::ProcVpgid => push_opt(out, self.proc.and_then(|p| known_id(p.vpgid))),
            F::ProcVpgidName => push_opt(
                out,
                self.group_leader(|p| p.vpgid)
                    .and_then(|p| image_str(p, |i| &i.comm)),
            ),
            F::ProcVpgidExe => push_opt(
                out,
                self.group_leader(|p| p.vpgid)
                    .and_then(|p| image_str(p, |i| &i.exe)),
            ),
            F::ProcVpgidExepath => push_opt(
                out,
                self.group_leader(|p| p.vpgid)
                    .and_then(|p| image_str(p, |i| &i.exepath)),
            ),
            F::ProcIsSidLeader => push_opt(
                out,
                self.proc
                    .filter(|p| p.sid >= 0 && p.vpid >= 0)
                    .map(|p| Value::Bool(p.sid == p.vpid)),
            ),
            F::ProcIsVpgidLeader => push_opt(
                out,
                self.proc
                    .filter(|p| p.vpgid >= 0 && p.vpid >= 0)
                    .map(|p| Value::Bool(p.vpgid == p.vpid)),
            ),
            F::ProcName => push_opt(out, self.proc.and_then(|p| image_str(p, |i| &i.comm))),
            F::ProcPname => push_opt(out, self.parent().and_then(|p| image_str(p, |i| &i.comm))),
            F::ProcAname => self.ancestor_field(&field.arg, out, |p| image_str(p, |i| &i.comm)),
            F::ProcExe => push_opt(out, self.proc.and_then(|p| image_str(p, |i| &i.exe))),
            F::ProcPexe => push_opt(out, self.parent().and_then(|p| image_str(p, |i| &i.exe))),
            F::ProcAexe => self.ancestor_field(&field.arg, out, |p| image_str(p, |i| &i.exe)),
            F::ProcExepath => push_opt(out, self.proc.and_then(|p| image_str(p, |i| &i.exepath))),
            F::ProcPexepath => push_opt(
                out,
                self.parent().and_then(|p| image_str(p, |i| &i.exepath)),
            ),
            F::ProcAexepath => {
                self.ancestor_field(&field.arg, out, |p| image_str(p, |i| &i.exepath))
            }
            F::ProcArgs => self.image().is_some_and(|i| push_str(out, i.args_joined())),
            F::ProcCmdline => push_opt(out, self.proc.and_then(|p| image_str(p, |i| &i.cmdline))),
            F::ProcPcmdline => push_opt(
                out,
                self.parent().and_then(|p| image_str(p, |i| &i.cmdline)),
            ),
            F::ProcAcmdline => {
                self.ancestor_field(&field.arg, out, |p| image_str(p, |i| &i.cmdline))
            }
            F::ProcCmdnargs => push_opt(out, self.image().map(|i| Value::U64(i.nargs as u64))),
            F::ProcCmdlenargs => {
                push_opt(out, self.image().map(|i| Value::U64(i.args_len() as u64)))
            }
            F::ProcExeline => self.image().is_some_and(|i| {
                let mut line = i.exe.clone();
                if i.nargs > 0 {
                    line.push(b' ');
                    line.extend_from_slice(i.args_joined());
                }
                out.push(Value::Str(Cow::Owned(line)));
                true
            }),
            F::ProcEnv => {
                let Some(image) = self.image() else {
                    return false;
                };
                match &field.arg {
                    FieldArg::Key(name) => {
                        let name = name.as_bytes();
                        image
                            .env_vars()
                            .find_map(|e| {
                                e.strip_prefix(name)
                                    .and_then(|rest| rest.strip_prefix(b"="))
                            })
                            .is_some_and(|v| push_str(out, v))
                    }
                    _ => push_str(out, &image.env),
                }
            }
            F::ProcCwd => self.proc.is_some_and(|p| push_nonempty(out, &p.cwd)),
            F::ProcTty => push_opt(out, self.creds().map(|p| Value::U64(u64::from(p.tty)))),
            F::ProcDuration => push_opt(
                out,
                self.proc
                    .filter(|p| p.start_ts > 0)
                    .map(|p| Value::U64(evt.ts.saturating_sub(p.start_ts))),
            ),
            F::ProcPpidDuration => push_opt(
                out,
                self.parent()
                    .filter(|p| p.start_ts > 0)
                    .map(|p| Value::U64(evt.ts.saturating_sub(p.start_ts))),
            ),
            F::ProcPidTs => push_opt(
                out,
                self.proc
                    .filter(|p| p.start_ts > 0)
                    .map(|p| Value::U64(p.start_ts)),
            ),
            F::ProcPpidTs => push_opt(
                out,
                self.parent()
                    .filter(|p| p.start_ts > 0)
                    .map(|p| Value::U64(p.start_ts)),
            ),
            F::ProcIsExeWritable => {
                push_opt(out, self.image().map(|i| Value::Bool(i.exe_writable)))
            }
            F::ProcIsExeUpperLayer => {
                push_opt(out, self.image().map(|i| Value::Bool(i.exe_upper_layer)))
            }
            F::ProcIsExeFromMemfd => {
                push_opt(out, self.image().map(|i| Value::Bool(i.exe_from_memfd)))
            }
            F::ProcExeIno => push_opt(
                out,
                self.image()
                    .filter(|i| i.exe_ino > 0)
                    .map(|i| Value::I64(i.exe_ino as i64)),
            ),
            F::ProcExeInoCtime => push_opt(
                out,
                self.image()
                    .filter(|i| i.exe_ino_ctime > 0)
                    .map(|i| Value::U64(i.exe_ino_ctime)),
            ),
            F::ProcExeInoMtime => push_opt(
                out,
                self.image()
                    .filter(|i| i.exe_ino_mtime > 0)
                    .map(|i| Value::U64(i.exe_ino_mtime)),
            ),
            F::ProcExeInoCtimeDurationProcStart => {
                let v = match (self.image(), self.proc) {
                    (Some(i), Some(p)) if i.exe_ino_ctime > 0 && p.start_ts >= i.exe_ino_ctime => {
                        Some(Value::U64(p.start_ts - i.exe_ino_ctime))
                    }
                    _ => None,
                };
                push_opt(out, v)
            }
            F::ProcNthreads => push_opt(out, self.proc.map(|p| Value::U64(u64::from(p.nthreads)))),
            F::ProcNchilds => push_opt(
                out,
                self.proc
                    .map(|p| Value::U64(u64::from(p.nthreads.saturating_sub(1)))),
            ),
            F::ProcFdopencount => push_opt(
                out,
                self.proc
                    .and_then(|p| state.fd_tables.get(&p.fd_table))
                    .map(|t| Value::U64(t.fds.len() as u64)),
            ),
            // ----- thread -----
            F::ThreadTid => push_opt(out, Some(Value::I64(evt.tid))),
            F::ThreadVtid => push_opt(out, self.thread.and_then(|t| known_id(t.vtid))),
            F::ThreadIsmain => push_opt(out, Some(Value::Bool(evt.tid == self.pid()))),
            F::ThreadCapPermitted => self.cap_set(out, |p| p.cap_permitted),
            F::ThreadCapInheritable => self.cap_set(out, |p| p.cap_inheritable),
            F::ThreadCapEffective => self.cap_set(out, |p| p.cap_effective),
            F::ThreadCgroups => self.image().is_some_and(|i| push_nonempty(out, &i.cgroup)),
            // ----- user / group -----
            F::UserUid => push_opt(out, self.creds().map(|p| Value::U64(u64::from(p.euid)))),
            F::UserName => self
                .creds()
                .and_then(|p| state.user_in(&p.image.container_id, p.euid))
                .is_some_and(|u| push_str(out, &u.name)),
            F::UserHomedir => self
                .creds()
                .and_then(|p| state.user_in(&p.image.container_id, p.euid))
                .is_some_and(|u| push_str(out, &u.home)),
            F::UserShell => self
                .creds()
                .and_then(|p| state.user_in(&p.image.container_id, p.euid))
                .is_some_and(|u| push_str(out, &u.shell)),
            F::UserLoginuid => push_opt(
                out,
                self.creds().map(|p| {
                    Value::I64(if p.loginuid == u32::MAX {
                        -1
                    } else {
                        i64::from(p.loginuid)
                    })
                }),
            ),
            F::UserLoginname => self
                .creds()
                .filter(|p| p.loginuid != u32::MAX)
                .and_then(|p| state.user_in(&p.image.container_id, p.loginuid))
                .is_some_and(|u| push_str(out, &u.name)),
            F::GroupGid => push_opt(out, self.creds().map(|p| Value::U64(u64::from(p.egid)))),
            F::GroupName => self
                .creds()
                .and_then(|p| state.group_in(&p.image.container_id, p.egid))
                .is_some_and(|g| push_str(out, &g.name)),
            // ----- container / k8s -----
            F::ContainerId => match self.image() {
                Some(i) if i.container_id.is_empty() => push_str(out, b"host"),
                Some(i) => push_str(out, &i.container_id),
                None => false,
            },
            F::ContainerFullId => self.container_str(out, |c| &c.id),
            F::ContainerName => match self.in_container() {
                Some(false) => push_str(out, b"host"),
                Some(true) => self.container_str(out, |c| &c.name),
                None => false,
            },
            F::ContainerImage => self.container_str(out, |c| &c.image),
            F::ContainerImageRepository => self.container_str(out, |c| &c.image_repository),
            F::ContainerImageTag => self.container_str(out, |c| &c.image_tag),
            F::ContainerImageDigest => self.container_str(out, |c| &c.image_digest),
            F::ContainerType => self.container_str(out, |c| &c.runtime),
            F::ContainerPrivileged => {
                push_opt(out, self.container().map(|c| Value::Bool(c.privileged)))
            }
            F::ContainerMounts => self.container().is_some_and(|c| {
                let mut text = String::new();
                for (i, m) in c.mounts.iter().enumerate() {
                    if i > 0 {
                        text.push(' ');
                    }
                    Self::render_mount(m, &mut text);
                }
                push_owned(out, text)
            }),
            F::ContainerMount => {
                if self.container().is_none() {
                    return false;
                }
                match self.mount(&field.arg, false) {
                    Some(m) => {
                        let mut text = String::new();
                        Self::render_mount(m, &mut text);
                        push_owned(out, text)
                    }
                    None => push_str(out, b"none"),
                }
            }
            F::ContainerMountSource => self
                .mount(&field.arg, true)
                .is_some_and(|m| push_str(out, m.source.as_bytes())),
            F::ContainerMountDest => self
                .mount(&field.arg, false)
                .is_some_and(|m| push_str(out, m.dest.as_bytes())),
            F::ContainerMountMode => self
                .mount(&field.arg, false)
                .is_some_and(|m| push_str(out, m.mode.as_bytes())),
            F::ContainerMountRdwr => self
                .mount(&field.arg, false)
                .is_some_and(|m| push_str(out, if m.rdwr { b"true" } else { b"false" })),
            F::ContainerMountPropagation => self
                .mount(&field.arg, false)
                .is_some_and(|m| push_str(out, m.propagation.as_bytes())),
            F::ContainerStartTs => push_opt(out, self.container_start_ts().map(Value::U64)),
            F::ContainerDuration => push_opt(
                out,
                self.container_start_ts()
                    .map(|t| Value::U64(evt.ts.saturating_sub(t))),
            ),
            F::ContainerLabel => match (&field.arg, self.container()) {
                (FieldArg::Key(k), Some(c)) => {
                    label(c, k).is_some_and(|v| push_nonempty(out, v.as_bytes()))
                }
                _ => false,
            },
            F::K8sPodLabel => match (&field.arg, self.pod_sandbox()) {
                (FieldArg::Key(k), Some(c)) => {
                    label(c, k).is_some_and(|v| push_nonempty(out, v.as_bytes()))
                }
                _ => false,
            },
            F::K8sPodSandboxId | F::K8sPodFullSandboxId => self
                .container()
                .and_then(|c| label(c, SANDBOX_ID_LABEL))
                .is_some_and(|id| {
                    let id = if f == F::K8sPodSandboxId {
                        &id[..id.len().min(vigil_procfs::SHORT_ID_LEN)]
                    } else {
                        id
                    };
                    push_nonempty(out, id.as_bytes())
                }),
            F::K8sPodLabels => self
                .pod_sandbox()
                .is_some_and(|c| push_owned(out, pod_labels(c))),
            F::K8sPodName => self
                .container()
                .and_then(|c| label(c, "io.kubernetes.pod.name"))
                .is_some_and(|v| push_nonempty(out, v.as_bytes())),
            F::K8sNsName => self
                .container()
                .and_then(|c| label(c, "io.kubernetes.pod.namespace"))
                .is_some_and(|v| push_nonempty(out, v.as_bytes())),
            F::K8sPodUid | F::K8sPodId => self
                .container()
                .and_then(|c| label(c, "io.kubernetes.pod.uid"))
                .is_some_and(|v| push_nonempty(out, v.as_bytes())),
            // ----- fd -----
            // The number as the event gives it, tracked or not (-1 after a failed open, as in
            // Falco).
            F::FdNum => push_opt(out, self.fd_number().map(Value::I64)),
            F::FdType => self
                .fd()
                .is_some_and(|(_, e)| push_str(out, e.obj.ty.name().as_bytes())),
            F::FdTypechar => match self.fd() {
                Some((_, e)) => push_str(out, e.obj.ty.typechar().as_bytes()),
                // libsinsp's type character of an open without a descriptor (a failed one)
                // comes from the event type: `f` for openat, openat2 and creat, `o` (other)
                // for open, which its table leaves out. Falco's `open_file_failed` tests
                // `fd.typechar='f'`.
                None if matches!(self.info.op, Op::Open { .. }) && self.evt.res < 0 => {
                    let c: &[u8] = if self.evt.etype.name() == "open" {
                        b"o"
                    } else {
                        b"f"
                    };
                    push_str(out, c)
                }
                None => false,
            },
            // Falco gives every tracked descriptor its name, empty for sockets without
            // endpoints (a packet socket: `fd.name` is "").
            F::FdName => match self.fd() {
                Some((_, e)) => push_str(out, &e.obj.name),
                None => self.open_path().is_some_and(|(resolved, _)| {
                    out.push(Value::Str(Cow::Owned(resolved)));
                    true
                }),
            },
            F::FdNameraw => match self.fd() {
                Some((_, e)) => push_nonempty(out, e.obj.nameraw()),
                None => self.open_path().is_some_and(|(_, raw)| push_str(out, raw)),
            },
            F::FdDirectory => match self.fd() {
                Some((_, e)) => match e.obj.ty {
                    FdType::Directory => push_nonempty(out, &e.obj.name),
                    FdType::File => push_nonempty(out, dirname(&e.obj.name)),
                    _ => false,
                },
                None => self.open_path().is_some_and(|(resolved, _)| {
                    out.push(Value::Str(Cow::Owned(dirname(&resolved).to_vec())));
                    true
                }),
            },
            F::FdFilename => match self.fd() {
                Some((_, e)) => {
                    e.obj.ty == FdType::File && push_nonempty(out, basename(&e.obj.name))
                }
                None => self.open_path().is_some_and(|(resolved, _)| {
                    out.push(Value::Str(Cow::Owned(basename(&resolved).to_vec())));
                    true
                }),
            },
            F::FdIp => self.fd_net().is_some_and(|n| {
                out.push(Value::Ip(n.cip));
                out.push(Value::Ip(n.sip));
                true
            }),
            F::FdCip => self.net_ip(out, |n| n.cip),
            F::FdSip => self.net_ip(out, |n| n.sip),
            F::FdLip => self.net_ip(out, |n| n.local().0),
            F::FdRip => self.net_ip(out, |n| n.remote().0),
            F::FdNet => self.fd_net().is_some_and(|n| {
                out.push(Value::Ip(n.cip));
                out.push(Value::Ip(n.sip));
                true
            }),
            F::FdCnet => self.net_ip(out, |n| n.cip),
            F::FdSnet => self.net_ip(out, |n| n.sip),
            F::FdLnet => self.net_ip(out, |n| n.local().0),
            F::FdRnet => self.net_ip(out, |n| n.remote().0),
            F::FdPort => self.fd_net().is_some_and(|n| {
                out.push(Value::U64(u64::from(n.cport)));
                out.push(Value::U64(u64::from(n.sport)));
                true
            }),
            F::FdCport => self.net_port(out, |n| n.cport),
            F::FdSport => self.net_port(out, |n| n.sport),
            F::FdLport => self.net_port(out, |n| n.local().1),
            F::FdRport => self.net_port(out, |n| n.remote().1),
            // Falco: any tracked descriptor has a protocol, `<NA>` unless an inet socket's is
            // known.
            F::FdL4proto => self.fd().is_some_and(|(_, e)| {
                let name = e
                    .obj
                    .net
                    .as_ref()
                    .and_then(|n| l4proto_name(n.l4proto))
                    .unwrap_or("<NA>");
                push_str(out, name.as_bytes())
            }),
            F::FdSockfamily => match self.fd().map(|(_, e)| e.obj.ty) {
                Some(FdType::Ipv4 | FdType::Ipv6) => push_str(out, b"ip"),
                Some(FdType::Unix) => push_str(out, b"unix"),
                _ => false,
            },
            F::FdIsServer => push_opt(out, self.fd_net().map(|n| Value::Bool(n.is_server))),
            F::FdConnected => push_opt(out, self.fd_net().map(|n| Value::Bool(n.connected))),
            F::FdNameChanged => push_opt(out, self.fd().map(|_| Value::Bool(state.name_changed))),
            F::FdCipName => self.net_names(out, |n| n.cip),
            F::FdSipName => self.net_names(out, |n| n.sip),
            F::FdLipName => self.net_names(out, |n| n.local().0),
            F::FdRipName => self.net_names(out, |n| n.remote().0),
            F::FdDev => push_opt(
                out,
                self.fd()
                    .filter(|(_, e)| e.obj.dev > 0)
                    .map(|(_, e)| Value::I64(e.obj.dev as i64)),
            ),
            F::FdIno => push_opt(
                out,
                self.fd()
                    .filter(|(_, e)| e.obj.ino > 0)
                    .map(|(_, e)| Value::I64(e.obj.ino as i64)),
            ),
            F::FdTypes => {
                let Some(table) = self.proc.and_then(|p| state.fd_tables.get(&p.fd_table)) else {
                    return false;
                };
                match &field.arg {
                    FieldArg::Index(n) => table
                        .fds
                        .get(n)
                        .is_some_and(|e| push_str(out, e.obj.ty.name().as_bytes())),
                    _ => {
                        let mut fds: Vec<(i64, FdType)> =
                            table.fds.iter().map(|(&n, e)| (n, e.obj.ty)).collect();
                        fds.sort_unstable_by_key(|&(n, _)| n);
                        let mut seen: Vec<FdType> = Vec::new();
                        for (_, ty) in fds {
                            if !seen.contains(&ty) {
                                seen.push(ty);
                                out.push(Value::Str(Cow::Borrowed(ty.name().as_bytes())));
                            }
                        }
                        true
                    }
                }
            }
        }
    }
}
