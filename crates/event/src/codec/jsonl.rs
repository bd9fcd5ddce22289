//! The JSON lines encoding (`docs/capture-format.md`, "JSON lines"): a header line, thread
//! lines, then one event per line. Meant for golden tests and hand-written scenarios, so the
//! reader is lenient where a human benefits (defaults, symbolic flags, errno names, comments) and
//! strict where a typo would silently change meaning (unknown keys, types and parameter names are
//! errors).

use std::io::{BufRead, Read as _, Write};
use std::net::IpAddr;

use serde_json::{Map, Value};

use super::text::{
    bytes_from_value, push_bytes, push_json_str, push_sockaddr, push_socktuple,
    sockaddr_from_value, socktuple_from_value,
};
use super::{
    check_encodable, normalize_params, repr, CaptureError, Decode, Position, Repr, MAX_LINE_LEN,
};
use crate::flags;
use crate::table;
use crate::{
    ContainerInfo, DnsName, Event, FdInfo, FdType, FlagTable, GroupInfo, MountInfo, Param,
    ParamKind, Snapshot, ThreadInfo, UserInfo,
};

/// The format version this module reads and writes.
pub const VERSION: u64 = 1;

/// `AT_FDCWD`: the "current directory" dirfd, spelled symbolically in `Fd` parameters.
const AT_FDCWD: i64 = -100;

/// A problem inside one line, before it is given a position.
enum LineError {
    /// `key` names the JSON key at fault, to point the column at it.
    Invalid {
        key: String,
        message: String,
    },
    UnknownType(String),
    UnknownParam {
        event_type: &'static str,
        param: String,
    },
    Version(u64),
}

fn invalid(key: &str, message: impl Into<String>) -> LineError {
    LineError::Invalid {
        key: key.to_string(),
        message: message.into(),
    }
}

/// The 1-based column of `"key"` in `line`, or 1.
fn column_of(line: &[u8], key: &str) -> u64 {
    let needle = format!("\"{key}\"");
    line.windows(needle.len().max(1))
        .position(|w| w == needle.as_bytes())
        .map_or(1, |i| i as u64 + 1)
}

/// Reads a JSON lines capture.
pub struct Reader<R: BufRead> {
    input: R,
    /// The current line (without its newline) and its 1-based number.
    line: Vec<u8>,
    line_no: u64,
    snapshot: Snapshot,
    /// The first event line (or the error reading it), read while looking for the end of the
    /// thread lines.
    pending: Option<Result<Map<String, Value>, CaptureError>>,
    prev_ts: u64,
    n_events: u64,
    done: bool,
}

impl<R: BufRead> Reader<R> {
    /// Reads the header and the thread lines; events are read by [`Reader::next_event`].
    pub fn new(input: R) -> Result<Self, CaptureError> {
        let mut reader = Reader {
            input,
            line: Vec::new(),
            line_no: 0,
            snapshot: Snapshot::default(),
            pending: None,
            prev_ts: 0,
            n_events: 0,
            done: false,
        };
        let header = match reader.next_object()? {
            Some(header) => header,
            None => {
                return Err(CaptureError::NotACapture {
                    at: reader.position(1),
                    reason: "no header line".to_string(),
                })
            }
        };
        if !header.contains_key("vigil_capture") {
            return Err(CaptureError::NotACapture {
                at: reader.position(1),
                reason: "the first line is not a header: it has no `vigil_capture` key".to_string(),
            });
        }
        reader.snapshot = parse_header(&header).map_err(|e| reader.error("header", e))?;
        reader.prev_ts = reader.snapshot.start_ts;
        loop {
            let mut object = match reader.next_object() {
                Ok(Some(object)) => object,
                Ok(None) => break,
                Err(e) => {
                    reader.pending = Some(Err(e));
                    break;
                }
            };
            match object.remove("thread") {
                Some(thread) if object.is_empty() => {
                    let thread = parse_thread(&thread, reader.snapshot.start_ts)
                        .map_err(|e| reader.error("thread", e))?;
                    reader.snapshot.threads.push(thread);
                }
                Some(_) => {
                    return Err(reader.error(
                        "thread",
                        invalid("thread", "a thread line has only the key `thread`"),
                    ))
                }
                None => {
                    reader.pending = Some(Ok(object));
                    break;
                }
            }
        }
        Ok(reader)
    }

    /// The header's and thread lines' snapshot.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    fn read_event(&mut self) -> Result<Option<Event>, CaptureError> {
        let object = match self.pending.take() {
            Some(object) => object?,
            None => match self.next_object()? {
                Some(object) => object,
                None => return Ok(None),
            },
        };
        if object.contains_key("thread") {
            return Err(self.error(
                "event",
                invalid("thread", "thread lines must come before the first event"),
            ));
        }
        let ordinal = self.n_events + 1;
        let event =
            parse_event(&object, ordinal, self.prev_ts).map_err(|e| self.error("event", e))?;
        self.n_events = ordinal;
        self.prev_ts = event.ts;
        Ok(Some(event))
    }

    fn position(&self, column: u64) -> Position {
        Position::Line {
            line: self.line_no,
            column,
        }
    }

    fn error(&self, what: &'static str, error: LineError) -> CaptureError {
        match error {
            LineError::Invalid { key, message } => CaptureError::Invalid {
                what,
                at: self.position(column_of(&self.line, &key)),
                message,
            },
            LineError::UnknownType(name) => CaptureError::UnknownEventType {
                at: self.position(column_of(&self.line, "type")),
                name,
            },
            LineError::UnknownParam { event_type, param } => CaptureError::UnknownParam {
                at: self.position(column_of(&self.line, &param)),
                event_type: event_type.to_string(),
                param,
            },
            LineError::Version(version) => CaptureError::UnsupportedVersion {
                at: self.position(column_of(&self.line, "vigil_capture")),
                version,
            },
        }
    }

    /// The next line that is neither blank nor a comment, parsed as a JSON object.
    fn next_object(&mut self) -> Result<Option<Map<String, Value>>, CaptureError> {
        loop {
            self.line.clear();
            self.line_no += 1;
            let n = (&mut self.input)
                .take(MAX_LINE_LEN + 1)
                .read_until(b'\n', &mut self.line)
                .map_err(|source| CaptureError::Io {
                    action: "read",
                    at: self.position(1),
                    source,
                })?;
            if n == 0 {
                return Ok(None);
            }
            if self.line.last() == Some(&b'\n') {
                self.line.pop();
            } else if n as u64 > MAX_LINE_LEN {
                return Err(CaptureError::Invalid {
                    what: "line",
                    at: self.position(1),
                    message: format!("longer than {MAX_LINE_LEN} bytes"),
                });
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            let text = self.line.trim_ascii_start();
            if text.is_empty() || text[0] == b'#' {
                continue;
            }
            return match serde_json::from_slice::<Value>(&self.line) {
                Ok(Value::Object(map)) => Ok(Some(map)),
                Ok(_) => Err(CaptureError::Invalid {
                    what: "line",
                    at: self.position(1),
                    message: "expected a JSON object".to_string(),
                }),
                Err(e) => {
                    // serde_json appends its own position, relative to this one line.
                    let mut message = e.to_string();
                    if let Some(cut) = message.find(" at line ") {
                        message.truncate(cut);
                    }
                    Err(CaptureError::Json {
                        at: self.position(e.column() as u64),
                        message,
                    })
                }
            };
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

// ---- Reading values ----

fn check_keys(map: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<(), LineError> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(invalid(key, format!("unknown {what} key `{key}`"))),
        None => Ok(()),
    }
}

fn as_object<'v>(value: &'v Value, key: &str) -> Result<&'v Map<String, Value>, LineError> {
    value
        .as_object()
        .ok_or_else(|| invalid(key, format!("`{key}` must be an object")))
}

fn as_array<'v>(value: &'v Value, key: &str) -> Result<&'v Vec<Value>, LineError> {
    value
        .as_array()
        .ok_or_else(|| invalid(key, format!("`{key}` must be an array")))
}

fn to_u64(value: &Value, key: &str) -> Result<u64, LineError> {
    value
        .as_u64()
        .ok_or_else(|| invalid(key, format!("`{key}` must be a non-negative integer")))
}

fn to_u32(value: &Value, key: &str) -> Result<u32, LineError> {
    u32::try_from(to_u64(value, key)?)
        .map_err(|_| invalid(key, format!("`{key}` does not fit in 32 bits")))
}

fn to_i64(value: &Value, key: &str) -> Result<i64, LineError> {
    value
        .as_i64()
        .ok_or_else(|| invalid(key, format!("`{key}` must be an integer")))
}

fn to_bool(value: &Value, key: &str) -> Result<bool, LineError> {
    value
        .as_bool()
        .ok_or_else(|| invalid(key, format!("`{key}` must be true or false")))
}

fn to_bytes(value: &Value, key: &str) -> Result<Vec<u8>, LineError> {
    bytes_from_value(value).map_err(|m| invalid(key, format!("`{key}`: {m}")))
}

fn to_string(value: &Value, key: &str) -> Result<String, LineError> {
    value
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| invalid(key, format!("`{key}` must be a string")))
}

fn to_list(value: &Value, key: &str) -> Result<Vec<Vec<u8>>, LineError> {
    as_array(value, key)?
        .iter()
        .map(|item| to_bytes(item, key))
        .collect()
}

fn to_flags(value: &Value, key: &str, table: FlagTable) -> Result<u64, LineError> {
    match value {
        Value::String(s) => flags::parse(table, s)
            .ok_or_else(|| invalid(key, format!("`{key}`: `{s}` is not a {table:?} flag value"))),
        _ => to_u64(value, key),
    }
}

/// Applies `f` to each key of `map`, with the key's value.
fn each<'m>(
    map: &'m Map<String, Value>,
    mut f: impl FnMut(&'m str, &'m Value) -> Result<(), LineError>,
) -> Result<(), LineError> {
    for (key, value) in map {
        f(key, value)?;
    }
    Ok(())
}

fn parse_header(header: &Map<String, Value>) -> Result<Snapshot, LineError> {
    let version = to_u64(
        header.get("vigil_capture").unwrap_or(&Value::Null),
        "vigil_capture",
    )?;
    if version != VERSION {
        return Err(LineError::Version(version));
    }
    let mut snapshot = Snapshot::default();
    each(header, |key, value| {
        match key {
            "vigil_capture" => {}
            "hostname" => snapshot.hostname = to_bytes(value, key)?,
            "start_ts" => snapshot.start_ts = to_u64(value, key)?,
            "users" => {
                for user in as_array(value, key)? {
                    snapshot.users.push(parse_user(as_object(user, key)?)?);
                }
            }
            "groups" => {
                for group in as_array(value, key)? {
                    let group = as_object(group, key)?;
                    check_keys(group, &["gid", "name"], "group")?;
                    snapshot.groups.push(GroupInfo {
                        gid: group.get("gid").map_or(Ok(0), |v| to_u32(v, "gid"))?,
                        name: group
                            .get("name")
                            .map_or(Ok(Vec::new()), |v| to_bytes(v, "name"))?,
                    });
                }
            }
            "containers" => {
                for container in as_array(value, key)? {
                    snapshot
                        .containers
                        .push(parse_container(as_object(container, key)?)?);
                }
            }
            "dns" => snapshot.dns = parse_dns(value)?,
            _ => return Err(invalid(key, format!("unknown header key `{key}`"))),
        }
        Ok(())
    })?;
    Ok(snapshot)
}

/// The header's `dns`: `{"name": ["addr", ...], ...}`, or an array of `["name", ["addr", ...]]`
/// pairs where order or duplicate names matter.
fn parse_dns(value: &Value) -> Result<Vec<DnsName>, LineError> {
    const KEY: &str = "dns";
    let entry = |name: &str, addrs: &Value| -> Result<DnsName, LineError> {
        let addrs = as_array(addrs, KEY)?
            .iter()
            .map(|a| {
                let text = a.as_str().ok_or_else(|| {
                    invalid(KEY, format!("the addresses of `{name}` must be strings"))
                })?;
                text.parse::<IpAddr>().map_err(|_| {
                    invalid(
                        KEY,
                        format!("`{text}` (an address of `{name}`) is not an IP address"),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(DnsName {
            name: name.to_string(),
            addrs,
        })
    };
    match value {
        Value::Object(names) => names
            .iter()
            .map(|(name, addrs)| entry(name, addrs))
            .collect(),
        Value::Array(pairs) => pairs
            .iter()
            .map(|pair| match pair.as_array().map(Vec::as_slice) {
                Some([Value::String(name), addrs]) => entry(name, addrs),
                _ => Err(invalid(KEY, "a dns pair is `[name, [address, ...]]`")),
            })
            .collect(),
        _ => Err(invalid(
            KEY,
            "`dns` must be an object of name -> addresses or an array of pairs",
        )),
    }
}

fn parse_user(map: &Map<String, Value>) -> Result<UserInfo, LineError> {
    let mut user = UserInfo {
        uid: 0,
        gid: 0,
        name: Vec::new(),
        home: Vec::new(),
        shell: Vec::new(),
    };
    each(map, |key, value| {
        match key {
            "uid" => user.uid = to_u32(value, key)?,
            "gid" => user.gid = to_u32(value, key)?,
            "name" => user.name = to_bytes(value, key)?,
            "home" => user.home = to_bytes(value, key)?,
            "shell" => user.shell = to_bytes(value, key)?,
            _ => return Err(invalid(key, format!("unknown user key `{key}`"))),
        }
        Ok(())
    })?;
    Ok(user)
}

fn parse_container(map: &Map<String, Value>) -> Result<ContainerInfo, LineError> {
    let mut c = ContainerInfo::default();
    each(map, |key, value| {
        match key {
            "id" => c.id = to_string(value, key)?,
            "runtime" => c.runtime = to_string(value, key)?,
            "name" => c.name = to_string(value, key)?,
            "image" => c.image = to_string(value, key)?,
            "image_repository" => c.image_repository = to_string(value, key)?,
            "image_tag" => c.image_tag = to_string(value, key)?,
            "image_digest" => c.image_digest = to_string(value, key)?,
            "privileged" => c.privileged = to_bool(value, key)?,
            "start_ts" => c.start_ts = to_u64(value, key)?,
            "mounts" => {
                for mount in as_array(value, key)? {
                    let mount = as_object(mount, key)?;
                    let mut m = MountInfo::default();
                    each(mount, |key, value| {
                        match key {
                            "source" => m.source = to_string(value, key)?,
                            "dest" => m.dest = to_string(value, key)?,
                            "mode" => m.mode = to_string(value, key)?,
                            "rdwr" => m.rdwr = to_bool(value, key)?,
                            "propagation" => m.propagation = to_string(value, key)?,
                            _ => return Err(invalid(key, format!("unknown mount key `{key}`"))),
                        }
                        Ok(())
                    })?;
                    c.mounts.push(m);
                }
            }
            // An object, or an array of `[name, value]` pairs where order or duplicates matter.
            "labels" => match value {
                Value::Object(labels) => {
                    for (name, v) in labels {
                        c.labels.push((name.clone(), to_string(v, key)?));
                    }
                }
                Value::Array(pairs) => {
                    for pair in pairs {
                        match pair.as_array().map(Vec::as_slice) {
                            Some([name, v]) => {
                                c.labels.push((to_string(name, key)?, to_string(v, key)?))
                            }
                            _ => return Err(invalid(key, "a label pair is `[name, value]`")),
                        }
                    }
                }
                _ => {
                    return Err(invalid(
                        key,
                        "`labels` must be an object or an array of pairs",
                    ))
                }
            },
            _ => return Err(invalid(key, format!("unknown container key `{key}`"))),
        }
        Ok(())
    })?;
    Ok(c)
}

const FD_TYPES: [&str; 17] = [
    "file",
    "directory",
    "ipv4",
    "ipv6",
    "unix",
    "pipe",
    "memfd",
    "event",
    "signalfd",
    "eventpoll",
    "inotify",
    "timerfd",
    "netlink",
    "bpf",
    "userfaultfd",
    "io_uring",
    "other",
];

/// The capture format's name of an fd type: Falco's `fd.type`, except `other` for
/// [`FdType::Other`] (Falco prints `<NA>`).
fn fd_type_name(kind: FdType) -> &'static str {
    match kind {
        FdType::Other => "other",
        kind => kind.name(),
    }
}

fn parse_fd(map: &Map<String, Value>) -> Result<FdInfo, LineError> {
    check_keys(map, &["fd", "type", "name", "flags", "tuple"], "fd")?;
    let fd = to_i64(
        map.get("fd")
            .ok_or_else(|| invalid("fds", "an fd needs `fd`"))?,
        "fd",
    )?;
    let type_name = match map.get("type") {
        Some(v) => to_string(v, "type")?,
        None => "file".to_string(),
    };
    let tuple = match map.get("tuple") {
        Some(v) => Some(socktuple_from_value(v).map_err(|m| invalid("tuple", m))?),
        None => None,
    };
    let kind = match type_name.as_str() {
        "file" => FdType::File,
        "directory" => FdType::Directory,
        "ipv4" => FdType::Ipv4,
        "ipv6" => FdType::Ipv6,
        "unix" => FdType::Unix,
        "pipe" => FdType::Pipe,
        "memfd" => FdType::Memfd,
        "event" => FdType::Event,
        "signalfd" => FdType::Signalfd,
        "eventpoll" => FdType::Eventpoll,
        "inotify" => FdType::Inotify,
        "timerfd" => FdType::Timerfd,
        "netlink" => FdType::Netlink,
        "bpf" => FdType::Bpf,
        "userfaultfd" => FdType::Userfaultfd,
        "io_uring" => FdType::IoUring,
        "other" => FdType::Other,
        other => {
            return Err(invalid(
                "type",
                format!("unknown fd type `{other}` (one of {})", FD_TYPES.join(" ")),
            ))
        }
    };
    if map.contains_key("tuple") && !kind.is_inet() {
        return Err(invalid("tuple", "only ipv4 and ipv6 fds have a `tuple`"));
    }
    let flags = match map.get("flags") {
        Some(v) => u32::try_from(to_flags(v, "flags", FlagTable::Open)?)
            .map_err(|_| invalid("flags", "fd flags do not fit in 32 bits"))?,
        None => 0,
    };
    Ok(FdInfo {
        fd,
        kind,
        tuple,
        name: map
            .get("name")
            .map_or(Ok(Vec::new()), |v| to_bytes(v, "name"))?,
        flags,
    })
}

const LOGINUID_UNSET: u32 = u32::MAX;

/// A thread with every default applied, given its ids.
fn default_thread(tid: i64, pid: i64, start_ts: u64) -> ThreadInfo {
    ThreadInfo {
        tid,
        pid,
        vtid: tid,
        vpid: pid,
        loginuid: LOGINUID_UNSET,
        start_ts,
        ..ThreadInfo::default()
    }
}

fn parse_thread(value: &Value, start_ts: u64) -> Result<ThreadInfo, LineError> {
    let map = as_object(value, "thread")?;
    let tid = to_i64(
        map.get("tid")
            .ok_or_else(|| invalid("thread", "a thread needs `tid`"))?,
        "tid",
    )?;
    let pid = map.get("pid").map_or(Ok(tid), |v| to_i64(v, "pid"))?;
    let mut t = default_thread(tid, pid, start_ts);
    each(map, |key, value| {
        match key {
            "tid" | "pid" => {}
            "ppid" => t.ppid = to_i64(value, key)?,
            "vtid" => t.vtid = to_i64(value, key)?,
            "vpid" => t.vpid = to_i64(value, key)?,
            "sid" => t.sid = to_i64(value, key)?,
            "vpgid" => t.vpgid = to_i64(value, key)?,
            "pgid" => t.pgid = to_i64(value, key)?,
            "comm" => t.comm = to_bytes(value, key)?,
            "exe" => t.exe = to_bytes(value, key)?,
            "exepath" => t.exepath = to_bytes(value, key)?,
            "args" => t.args = to_list(value, key)?,
            "env" => t.env = to_list(value, key)?,
            "cwd" => t.cwd = to_bytes(value, key)?,
            "uid" => t.uid = to_u32(value, key)?,
            "gid" => t.gid = to_u32(value, key)?,
            "euid" => t.euid = to_u32(value, key)?,
            "egid" => t.egid = to_u32(value, key)?,
            "loginuid" => t.loginuid = to_u32(value, key)?,
            "tty" => t.tty = to_u32(value, key)?,
            "start_ts" => t.start_ts = to_u64(value, key)?,
            "cap_inheritable" => t.cap_inheritable = to_u64(value, key)?,
            "cap_permitted" => t.cap_permitted = to_u64(value, key)?,
            "cap_effective" => t.cap_effective = to_u64(value, key)?,
            "cgroup" => t.cgroup = to_bytes(value, key)?,
            "exe_writable" => t.exe_writable = to_bool(value, key)?,
            "exe_upper_layer" => t.exe_upper_layer = to_bool(value, key)?,
            "exe_from_memfd" => t.exe_from_memfd = to_bool(value, key)?,
            "exe_ino" => t.exe_ino = to_u64(value, key)?,
            "exe_ino_ctime" => t.exe_ino_ctime = to_u64(value, key)?,
            "exe_ino_mtime" => t.exe_ino_mtime = to_u64(value, key)?,
            "fds" => {
                for fd in as_array(value, key)? {
                    t.fds.push(parse_fd(as_object(fd, key)?)?);
                }
            }
            _ => return Err(invalid(key, format!("unknown thread key `{key}`"))),
        }
        Ok(())
    })?;
    Ok(t)
}

fn parse_param(value: &Value, name: &str, kind: ParamKind) -> Result<Param, LineError> {
    if value.is_null() {
        return Ok(Param::None);
    }
    let bad = |m: String| invalid(name, format!("parameter `{name}`: {m}"));
    Ok(match repr(kind) {
        Repr::Int => match value {
            Value::String(s) if kind == ParamKind::Fd && s == "AT_FDCWD" => Param::Int(AT_FDCWD),
            _ => Param::Int(
                value
                    .as_i64()
                    .ok_or_else(|| bad("expected an integer".into()))?,
            ),
        },
        Repr::Uint => match kind {
            ParamKind::Flags(table) => Param::Uint(to_flags(value, name, table)?),
            _ => Param::Uint(
                value
                    .as_u64()
                    .ok_or_else(|| bad("expected a non-negative integer".into()))?,
            ),
        },
        Repr::Bytes => Param::Bytes(bytes_from_value(value).map_err(bad)?),
        Repr::List => Param::List(
            value
                .as_array()
                .ok_or_else(|| bad("expected an array of strings".into()))?
                .iter()
                .map(|item| bytes_from_value(item).map_err(bad))
                .collect::<Result<_, _>>()?,
        ),
        Repr::Addr => Param::Addr(sockaddr_from_value(value).map_err(bad)?),
        Repr::Tuple => Param::Tuple(socktuple_from_value(value).map_err(bad)?),
    })
}

fn parse_event(map: &Map<String, Value>, ordinal: u64, prev_ts: u64) -> Result<Event, LineError> {
    check_keys(
        map,
        &[
            "num",
            "ts",
            "tid",
            "pid",
            "type",
            "res",
            "cpu",
            "args",
            "truncated",
        ],
        "event",
    )?;
    let type_name = match map.get("type") {
        Some(Value::String(name)) => name,
        Some(_) => return Err(invalid("type", "`type` must be a string")),
        None => return Err(invalid("tid", "an event needs `type`")),
    };
    let etype =
        table::by_name(type_name).ok_or_else(|| LineError::UnknownType(type_name.clone()))?;
    let spec = etype.spec();
    let tid = to_i64(
        map.get("tid")
            .ok_or_else(|| invalid("type", "an event needs `tid`"))?,
        "tid",
    )?;
    let mut event = Event {
        num: map.get("num").map_or(Ok(ordinal), |v| to_u64(v, "num"))?,
        ts: map
            .get("ts")
            .map_or(Ok(prev_ts.saturating_add(1000)), |v| to_u64(v, "ts"))?,
        tid,
        pid: map.get("pid").map_or(Ok(tid), |v| to_i64(v, "pid"))?,
        etype,
        res: match map.get("res") {
            None => 0,
            Some(Value::String(name)) => -flags::errno_from_name(name)
                .ok_or_else(|| invalid("res", format!("`{name}` is not an errno name")))?,
            Some(v) => to_i64(v, "res")?,
        },
        params: Vec::new(),
        truncated: 0,
        cpu: match map.get("cpu") {
            None | Some(Value::Null) => None,
            Some(v) => Some(to_u32(v, "cpu")?),
        },
    };
    if let Some(args) = map.get("args") {
        for (name, value) in as_object(args, "args")? {
            let index = spec
                .param_index(name)
                .ok_or_else(|| LineError::UnknownParam {
                    event_type: spec.name,
                    param: name.clone(),
                })?;
            if event.params.len() <= index {
                event.params.resize(index + 1, Param::None);
            }
            event.params[index] = parse_param(value, name, spec.params[index].kind)?;
        }
        normalize_params(&mut event.params);
    }
    if let Some(truncated) = map.get("truncated") {
        for name in as_array(truncated, "truncated")? {
            let name = name
                .as_str()
                .ok_or_else(|| invalid("truncated", "`truncated` lists parameter names"))?;
            let index = spec.param_index(name).filter(|i| *i < 64).ok_or_else(|| {
                LineError::UnknownParam {
                    event_type: spec.name,
                    param: name.to_string(),
                }
            })?;
            event.truncated |= 1 << index;
        }
    }
    Ok(event)
}

// ---- Writing ----

/// Writes a JSON lines capture: [`Writer::write_snapshot`] once, then events.
pub struct Writer<W: Write> {
    out: W,
    buf: String,
    /// Lines written so far.
    lines: u64,
    n_events: u64,
    start_ts: Option<u64>,
}

/// Appends `,"key":` (without the comma for the first key of an object).
fn key(out: &mut String, first: &mut bool, key: &str) {
    if !*first {
        out.push(',');
    }
    *first = false;
    push_json_str(out, key);
    out.push(':');
}

fn push_num(out: &mut String, n: impl std::fmt::Display) {
    use std::fmt::Write as _;
    let _ = write!(out, "{n}");
}

fn push_list(out: &mut String, items: &[Vec<u8>]) {
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_bytes(out, item);
    }
    out.push(']');
}

impl<W: Write> Writer<W> {
    pub fn new(out: W) -> Self {
        Writer {
            out,
            buf: String::new(),
            lines: 0,
            n_events: 0,
            start_ts: None,
        }
    }

    fn position(&self) -> Position {
        Position::Line {
            line: self.lines + 1,
            column: 1,
        }
    }

    fn emit(&mut self) -> Result<(), CaptureError> {
        self.buf.push('\n');
        let at = self.position();
        self.out
            .write_all(self.buf.as_bytes())
            .map_err(|source| CaptureError::Io {
                action: "write",
                at,
                source,
            })?;
        self.lines += 1;
        self.buf.clear();
        Ok(())
    }

    /// Writes the header line and one line per thread. Must be called once, first.
    pub fn write_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), CaptureError> {
        if self.start_ts.is_some() {
            return Err(CaptureError::Unencodable {
                what: "snapshot",
                at: self.position(),
                message: "the snapshot was already written".to_string(),
            });
        }
        self.start_ts = Some(snapshot.start_ts);
        let out = &mut self.buf;
        let first = &mut true;
        out.push('{');
        key(out, first, "vigil_capture");
        push_num(out, VERSION);
        if !snapshot.hostname.is_empty() {
            key(out, first, "hostname");
            push_bytes(out, &snapshot.hostname);
        }
        key(out, first, "start_ts");
        push_num(out, snapshot.start_ts);
        if !snapshot.users.is_empty() {
            key(out, first, "users");
            out.push('[');
            for (i, u) in snapshot.users.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let f = &mut true;
                out.push('{');
                key(out, f, "uid");
                push_num(out, u.uid);
                key(out, f, "gid");
                push_num(out, u.gid);
                key(out, f, "name");
                push_bytes(out, &u.name);
                key(out, f, "home");
                push_bytes(out, &u.home);
                key(out, f, "shell");
                push_bytes(out, &u.shell);
                out.push('}');
            }
            out.push(']');
        }
        if !snapshot.groups.is_empty() {
            key(out, first, "groups");
            out.push('[');
            for (i, g) in snapshot.groups.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let f = &mut true;
                out.push('{');
                key(out, f, "gid");
                push_num(out, g.gid);
                key(out, f, "name");
                push_bytes(out, &g.name);
                out.push('}');
            }
            out.push(']');
        }
        if !snapshot.containers.is_empty() {
            key(out, first, "containers");
            out.push('[');
            for (i, c) in snapshot.containers.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_container(out, c);
            }
            out.push(']');
        }
        if !snapshot.dns.is_empty() {
            key(out, first, "dns");
            push_dns(out, &snapshot.dns);
        }
        out.push('}');
        self.emit()?;
        for thread in &snapshot.threads {
            push_thread(&mut self.buf, thread, snapshot.start_ts);
            self.emit()?;
        }
        Ok(())
    }

    /// Writes one event line. Flags are written symbolically, `res` as an integer.
    pub fn write_event(&mut self, event: &Event) -> Result<(), CaptureError> {
        if self.start_ts.is_none() {
            return Err(CaptureError::Unencodable {
                what: "event",
                at: self.position(),
                message: "an event was written before the snapshot".to_string(),
            });
        }
        check_encodable(event).map_err(|message| CaptureError::Unencodable {
            what: "event",
            at: self.position(),
            message,
        })?;
        self.n_events += 1;
        let spec = event.etype.spec();
        let out = &mut self.buf;
        let first = &mut true;
        out.push('{');
        if event.num != self.n_events {
            key(out, first, "num");
            push_num(out, event.num);
        }
        key(out, first, "ts");
        push_num(out, event.ts);
        key(out, first, "tid");
        push_num(out, event.tid);
        key(out, first, "pid");
        push_num(out, event.pid);
        key(out, first, "type");
        push_json_str(out, spec.name);
        key(out, first, "res");
        push_num(out, event.res);
        if let Some(cpu) = event.cpu {
            key(out, first, "cpu");
            push_num(out, cpu);
        }
        if event.params.iter().any(|p| *p != Param::None) {
            key(out, first, "args");
            out.push('{');
            let f = &mut true;
            for (param, ps) in event.params.iter().zip(spec.params) {
                if *param == Param::None {
                    continue;
                }
                key(out, f, ps.name);
                push_param(out, param, ps.kind);
            }
            out.push('}');
        }
        if event.truncated != 0 {
            key(out, first, "truncated");
            out.push('[');
            let mut f = true;
            for (i, ps) in spec.params.iter().enumerate().take(64) {
                if event.truncated & (1 << i) != 0 {
                    if !f {
                        out.push(',');
                    }
                    f = false;
                    push_json_str(out, ps.name);
                }
            }
            out.push(']');
        }
        out.push('}');
        self.emit()
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(mut self) -> Result<W, CaptureError> {
        let at = self.position();
        self.out.flush().map_err(|source| CaptureError::Io {
            action: "write",
            at,
            source,
        })?;
        Ok(self.out)
    }
}

fn push_param(out: &mut String, param: &Param, kind: ParamKind) {
    match param {
        Param::None => out.push_str("null"),
        Param::Int(v) if kind == ParamKind::Fd && *v == AT_FDCWD => out.push_str("\"AT_FDCWD\""),
        Param::Int(v) => push_num(out, v),
        Param::Uint(v) => match kind {
            ParamKind::Flags(table) if table != FlagTable::None => {
                out.push('"');
                flags::render(table, *v, out);
                out.push('"');
            }
            _ => push_num(out, v),
        },
        Param::Bytes(b) => push_bytes(out, b),
        Param::List(items) => push_list(out, items),
        Param::Addr(addr) => push_sockaddr(out, addr),
        Param::Tuple(tuple) => push_socktuple(out, tuple),
    }
}

fn push_dns(out: &mut String, dns: &[DnsName]) {
    // An object reads back in key order, so keep the object form for sorted, unique names.
    let sorted = dns.windows(2).all(|w| w[0].name < w[1].name);
    out.push(if sorted { '{' } else { '[' });
    for (i, d) in dns.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if !sorted {
            out.push('[');
        }
        push_json_str(out, &d.name);
        out.push(if sorted { ':' } else { ',' });
        out.push('[');
        for (j, addr) in d.addrs.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            push_json_str(out, &addr.to_string());
        }
        out.push(']');
        if !sorted {
            out.push(']');
        }
    }
    out.push(if sorted { '}' } else { ']' });
}

fn push_container(out: &mut String, c: &ContainerInfo) {
    let f = &mut true;
    out.push('{');
    let strings = [
        ("id", &c.id),
        ("runtime", &c.runtime),
        ("name", &c.name),
        ("image", &c.image),
        ("image_repository", &c.image_repository),
        ("image_tag", &c.image_tag),
        ("image_digest", &c.image_digest),
    ];
    for (name, value) in strings {
        if !value.is_empty() {
            key(out, f, name);
            push_json_str(out, value);
        }
    }
    if c.privileged {
        key(out, f, "privileged");
        out.push_str("true");
    }
    if c.start_ts != 0 {
        key(out, f, "start_ts");
        push_num(out, c.start_ts);
    }
    if !c.mounts.is_empty() {
        key(out, f, "mounts");
        out.push('[');
        for (i, m) in c.mounts.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let mf = &mut true;
            out.push('{');
            key(out, mf, "source");
            push_json_str(out, &m.source);
            key(out, mf, "dest");
            push_json_str(out, &m.dest);
            key(out, mf, "mode");
            push_json_str(out, &m.mode);
            key(out, mf, "rdwr");
            out.push_str(if m.rdwr { "true" } else { "false" });
            key(out, mf, "propagation");
            push_json_str(out, &m.propagation);
            out.push('}');
        }
        out.push(']');
    }
    if !c.labels.is_empty() {
        key(out, f, "labels");
        // An object reads back in key order, so keep the object form for sorted, unique names.
        let sorted = c.labels.windows(2).all(|w| w[0].0 < w[1].0);
        out.push(if sorted { '{' } else { '[' });
        for (i, (name, value)) in c.labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if sorted {
                push_json_str(out, name);
                out.push(':');
                push_json_str(out, value);
            } else {
                out.push('[');
                push_json_str(out, name);
                out.push(',');
                push_json_str(out, value);
                out.push(']');
            }
        }
        out.push(if sorted { '}' } else { ']' });
    }
    out.push('}');
}

fn push_thread(out: &mut String, t: &ThreadInfo, start_ts: u64) {
    let d = default_thread(t.tid, t.pid, start_ts);
    out.push_str("{\"thread\":{");
    let f = &mut true;
    key(out, f, "tid");
    push_num(out, t.tid);
    if t.pid != t.tid {
        key(out, f, "pid");
        push_num(out, t.pid);
    }
    let ints = [
        ("ppid", t.ppid, d.ppid),
        ("vtid", t.vtid, d.vtid),
        ("vpid", t.vpid, d.vpid),
        ("sid", t.sid, d.sid),
        ("vpgid", t.vpgid, d.vpgid),
        ("pgid", t.pgid, d.pgid),
    ];
    for (name, value, default) in ints {
        if value != default {
            key(out, f, name);
            push_num(out, value);
        }
    }
    let bytes = [
        ("comm", &t.comm),
        ("exe", &t.exe),
        ("exepath", &t.exepath),
        ("cwd", &t.cwd),
        ("cgroup", &t.cgroup),
    ];
    for (name, value) in bytes {
        if !value.is_empty() {
            key(out, f, name);
            push_bytes(out, value);
        }
    }
    for (name, value) in [("args", &t.args), ("env", &t.env)] {
        if !value.is_empty() {
            key(out, f, name);
            push_list(out, value);
        }
    }
    let uints = [
        ("uid", u64::from(t.uid), u64::from(d.uid)),
        ("gid", u64::from(t.gid), u64::from(d.gid)),
        ("euid", u64::from(t.euid), u64::from(d.euid)),
        ("egid", u64::from(t.egid), u64::from(d.egid)),
        ("loginuid", u64::from(t.loginuid), u64::from(d.loginuid)),
        ("tty", u64::from(t.tty), u64::from(d.tty)),
        ("start_ts", t.start_ts, d.start_ts),
        ("cap_inheritable", t.cap_inheritable, 0),
        ("cap_permitted", t.cap_permitted, 0),
        ("cap_effective", t.cap_effective, 0),
        ("exe_ino", t.exe_ino, 0),
        ("exe_ino_ctime", t.exe_ino_ctime, 0),
        ("exe_ino_mtime", t.exe_ino_mtime, 0),
    ];
    for (name, value, default) in uints {
        if value != default {
            key(out, f, name);
            push_num(out, value);
        }
    }
    let bools = [
        ("exe_writable", t.exe_writable),
        ("exe_upper_layer", t.exe_upper_layer),
        ("exe_from_memfd", t.exe_from_memfd),
    ];
    for (name, value) in bools {
        if value {
            key(out, f, name);
            out.push_str("true");
        }
    }
    if !t.fds.is_empty() {
        key(out, f, "fds");
        out.push('[');
        for (i, fd) in t.fds.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let ff = &mut true;
            out.push('{');
            key(out, ff, "fd");
            push_num(out, fd.fd);
            key(out, ff, "type");
            push_json_str(out, fd_type_name(fd.kind));
            if !fd.name.is_empty() {
                key(out, ff, "name");
                push_bytes(out, &fd.name);
            }
            key(out, ff, "flags");
            out.push('"');
            flags::render(FlagTable::Open, u64::from(fd.flags), out);
            out.push('"');
            if let (true, Some(tuple)) = (fd.kind.is_inet(), &fd.tuple) {
                key(out, ff, "tuple");
                push_socktuple(out, tuple);
            }
            out.push('}');
        }
        out.push(']');
    }
    out.push_str("}}");
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Gen;
    use super::super::{normalized, Capture, EventReader};
    use super::*;

    fn read_all(text: &str) -> Result<(Snapshot, Vec<Event>), CaptureError> {
        let mut reader = Reader::new(text.as_bytes())?;
        let mut events = Vec::new();
        while let Some(e) = reader.next_event()? {
            events.push(e);
        }
        Ok((reader.snapshot().clone(), events))
    }

    fn err(text: &str) -> String {
        match read_all(text) {
            Ok(_) => panic!("expected an error reading {text:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn dns_header_reads_both_forms_and_round_trips() {
        let text = r#"{"vigil_capture": 1, "dns": {"kubernetes.default.svc.cluster.local": ["10.96.0.1"], "dual.example": ["192.0.2.1", "2001:db8::1"], "none.example": []}}"#;
        let (snapshot, _) = read_all(text).unwrap();
        let ip = |t: &str| -> IpAddr { t.parse().unwrap() };
        let dns = |name: &str, addrs: &[&str]| DnsName {
            name: name.to_string(),
            addrs: addrs.iter().map(|a| ip(a)).collect(),
        };
        assert_eq!(
            snapshot.dns,
            vec![
                dns("dual.example", &["192.0.2.1", "2001:db8::1"]),
                dns("kubernetes.default.svc.cluster.local", &["10.96.0.1"]),
                dns("none.example", &[]),
            ]
        );
        // Sorted, unique names are written as an object; anything else as pairs, in order.
        for (entries, object) in [
            (snapshot.dns.clone(), true),
            (
                vec![dns("b.example", &["192.0.2.2"]), dns("a.example", &["::1"])],
                false,
            ),
            (
                vec![dns("a.example", &["192.0.2.2"]), dns("a.example", &["::1"])],
                false,
            ),
        ] {
            let capture = Capture {
                snapshot: Snapshot {
                    dns: entries,
                    ..Snapshot::default()
                },
                events: Vec::new(),
            };
            let out = String::from_utf8(capture.write_jsonl(Vec::new()).unwrap()).unwrap();
            let written = if object { r#""dns":{"# } else { r#""dns":[["# };
            assert!(out.contains(written), "{out}");
            assert_eq!(Capture::read(out.as_bytes()).unwrap(), capture, "{out}");
        }
        assert!(
            err(r#"{"vigil_capture": 1, "dns": {"a.example": ["10.0.0.300"]}}"#)
                .contains("`10.0.0.300` (an address of `a.example`) is not an IP address"),
        );
        assert!(
            err(r#"{"vigil_capture": 1, "dns": {"a.example": "10.0.0.1"}}"#)
                .contains("`dns` must be an array")
        );
        assert!(
            err(r#"{"vigil_capture": 1, "dns": {"a.example": [1]}}"#).contains("must be strings")
        );
        assert!(err(r#"{"vigil_capture": 1, "dns": [["a.example"]]}"#).contains("a dns pair is"));
        assert!(err(r#"{"vigil_capture": 1, "dns": "a.example"}"#)
            .starts_with("invalid header at line 1:"));
    }

    #[test]
    fn reads_the_documented_example_with_defaults() {
        let text = r#"{"vigil_capture": 1, "hostname": "web-1", "start_ts": 1700000000000000000, "users": [{"uid": 0, "gid": 0, "name": "root", "home": "/root", "shell": "/bin/bash"}], "groups": [{"gid": 0, "name": "root"}], "containers": [{"id": "3ad7b26ded6d", "runtime": "docker", "name": "web", "image": "docker.io/library/nginx:1.25", "image_repository": "docker.io/library/nginx", "image_tag": "1.25", "privileged": false, "mounts": [{"source": "/var/run/docker.sock", "dest": "/var/run/docker.sock", "rdwr": true}], "labels": {"io.kubernetes.pod.name": "web-0", "io.kubernetes.pod.namespace": "default"}}]}
# threads
{"thread": {"tid": 100, "comm": "bash", "fds": [{"fd": 3, "type": "file", "name": "/etc/passwd", "flags": "O_RDONLY"}, {"fd": 4, "type": "ipv4", "tuple": "tcp:10.0.0.2:40000->10.0.0.1:443"}]}}

{"ts": 1700000000000001000, "tid": 100, "pid": 100, "type": "openat", "res": 3, "args": {"dirfd": "AT_FDCWD", "name": "/etc/shadow", "flags": "O_RDONLY|O_CLOEXEC", "mode": 0}}
{"tid": 101, "type": "openat", "res": "ENOENT", "args": {"name": "/nope", "flags": 577}, "truncated": ["name"]}
"#;
        let (snapshot, events) = read_all(text).unwrap();
        assert_eq!(snapshot.hostname, b"web-1");
        assert_eq!(snapshot.users[0].shell, b"/bin/bash");
        assert_eq!(snapshot.containers[0].labels[0].1, "web-0");
        assert!(snapshot.containers[0].mounts[0].rdwr);
        let t = &snapshot.threads[0];
        assert_eq!((t.tid, t.pid, t.vtid, t.vpid), (100, 100, 100, 100));
        assert_eq!(t.loginuid, u32::MAX);
        assert_eq!(t.start_ts, 1_700_000_000_000_000_000);
        assert_eq!(t.fds[0].flags, 0);
        assert_eq!(t.fds[1].kind, FdType::Ipv4);
        assert!(t.fds[1].tuple.is_some());
        let e = &events[0];
        assert_eq!((e.num, e.res, e.etype.name()), (1, 3, "openat"));
        assert_eq!(e.param_by_name("dirfd"), &Param::Int(-100));
        assert_eq!(e.param_by_name("flags"), &Param::Uint(0o2000000));
        assert_eq!(e.param_by_name("mode"), &Param::Uint(0));
        assert_eq!(e.params.len(), 4, "trailing absent parameters are dropped");
        let e = &events[1];
        assert_eq!(
            (e.num, e.ts, e.tid, e.pid, e.res),
            (2, 1_700_000_000_000_002_000, 101, 101, -2)
        );
        assert_eq!(e.param(0), &Param::None);
        assert_eq!(e.param_by_name("flags"), &Param::Uint(577));
        assert!(e.is_truncated(1));
    }

    #[test]
    fn writer_spells_flags_symbolically_and_res_as_integer() {
        let openat = table::by_name("openat").unwrap();
        let capture = Capture {
            snapshot: Snapshot::default(),
            events: vec![Event {
                num: 1,
                ts: 5,
                tid: 7,
                pid: 7,
                etype: openat,
                res: -13,
                params: vec![
                    Param::Int(-100),
                    Param::Bytes(b"/etc/shadow".to_vec()),
                    Param::Uint(0o1101),
                ],
                truncated: 0,
                cpu: None,
            }],
        };
        let text = String::from_utf8(capture.write_jsonl(Vec::new()).unwrap()).unwrap();
        assert_eq!(
            text,
            "{\"vigil_capture\":1,\"start_ts\":0}\n\
             {\"ts\":5,\"tid\":7,\"pid\":7,\"type\":\"openat\",\"res\":-13,\"args\":{\"dirfd\":\"AT_FDCWD\",\"name\":\"/etc/shadow\",\"flags\":\"O_WRONLY|O_CREAT|O_TRUNC\"}}\n"
        );
    }

    #[test]
    fn round_trips_generated_captures() {
        for seed in 0..40 {
            let mut gen = Gen::new(seed);
            let capture = gen.capture(60);
            let bytes = capture.write_jsonl(Vec::new()).unwrap();
            let text = String::from_utf8(bytes).expect("the writer writes UTF-8");
            let (snapshot, events) = read_all(&text).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            assert_eq!(snapshot, capture.snapshot, "seed {seed}");
            assert_eq!(events.len(), capture.events.len(), "seed {seed}");
            for (got, want) in events.iter().zip(&capture.events) {
                assert_eq!(got, &normalized(want), "seed {seed}");
            }
        }
    }

    #[test]
    fn the_cpu_is_optional() {
        let header = "{\"vigil_capture\":1}\n";
        let (_, events) = read_all(&format!(
            "{header}{{\"tid\":1,\"type\":\"close\"}}\n\
             {{\"tid\":1,\"type\":\"close\",\"cpu\":null}}\n\
             {{\"tid\":1,\"type\":\"close\",\"cpu\":3}}\n"
        ))
        .unwrap();
        let cpus: Vec<Option<u32>> = events.iter().map(|e| e.cpu).collect();
        assert_eq!(cpus, [None, None, Some(3)]);
        // Written after `res` when known, left out when not.
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out);
        w.write_snapshot(&Snapshot::default()).unwrap();
        for e in &events {
            w.write_event(e).unwrap();
        }
        w.finish().unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert!(!lines[0].contains("cpu"), "{text}");
        assert!(lines[2].contains("\"res\":0,\"cpu\":3"), "{text}");
        for bad in ["-1", "4294967296", "\"1\"", "1.5"] {
            let e = err(&format!(
                "{header}{{\"tid\":1,\"type\":\"close\",\"cpu\":{bad}}}\n"
            ));
            assert!(e.contains("`cpu`"), "{bad}: {e}");
        }
    }

    #[test]
    fn errors_name_the_line_and_column() {
        let header = "{\"vigil_capture\":1}\n";
        assert_eq!(
            err(&format!("{header}{{\"tid\":1,\"type\":\"nosuchcall\"}}\n")),
            "unknown event type `nosuchcall` at line 2:10"
        );
        assert_eq!(
            err(&format!(
                "{header}\n{{\"tid\":1,\"type\":\"openat\",\"args\":{{\"nme\":\"/x\"}}}}\n"
            )),
            "unknown parameter `nme` of event type `openat` at line 3:34"
        );
        assert_eq!(
            err(&format!(
                "{header}{{\"tid\":1,\"type\":\"openat\",\"truncated\":[\"bogus\"]}}\n"
            )),
            "unknown parameter `bogus` of event type `openat` at line 2:39"
        );
        let e = err(&format!(
            "{header}{{\"tid\":1,\"type\":\"openat\",\"args\":{{\"flags\":\"O_BOGUS\"}}}}\n"
        ));
        assert!(
            e.starts_with("invalid event at line 2:35: parameter") || e.contains("O_BOGUS"),
            "{e}"
        );
        assert!(e.contains("line 2:"), "{e}");
        let e = err(&format!("{header}{{\"tid\":1,\"type\":\"openat\",}}\n"));
        assert_eq!(e, "invalid JSON at line 2:26: trailing comma");
        let e = err(&format!("{header}{{\"tid\":\"x\",\"type\":\"close\"}}\n"));
        assert_eq!(e, "invalid event at line 2:2: `tid` must be an integer");
        let e = err(&format!(
            "{header}{{\"tid\":1,\"type\":\"close\",\"colour\":1}}\n"
        ));
        assert_eq!(e, "invalid event at line 2:25: unknown event key `colour`");
        let e = err(&format!("{header}{{\"type\":\"close\"}}\n"));
        assert!(e.contains("needs `tid`"), "{e}");
        let e = err(&format!(
            "{header}{{\"tid\":1,\"type\":\"close\",\"res\":\"EBOGUS\"}}\n"
        ));
        assert!(e.contains("errno"), "{e}");
        let e = err(&format!("{header}[1,2]\n"));
        assert_eq!(e, "invalid line at line 2:1: expected a JSON object");
        let e = err(&format!(
            "{header}{{\"tid\":1,\"type\":\"close\"}}\n{{\"thread\":{{\"tid\":2}}}}\n"
        ));
        assert!(
            e.contains("line 3") && e.contains("before the first event"),
            "{e}"
        );
        let e = err("{\"vigil_capture\":2}\n");
        assert_eq!(
            e,
            "unsupported capture version 2 at line 1:2 (this build reads version 1)"
        );
        let e = err("{\"tid\":1}\n");
        assert!(e.contains("no `vigil_capture`"), "{e}");
        let e = err("\n# only a comment\n");
        assert!(e.contains("no header"), "{e}");
        let e = err(&format!(
            "{header}{{\"thread\":{{\"tid\":1,\"fds\":[{{\"fd\":1,\"type\":\"sock\"}}]}}}}\n"
        ));
        assert!(e.contains("unknown fd type `sock`"), "{e}");
        let e = err("{\"vigil_capture\":1,\"users\":[{\"uid\":-1}]}\n");
        assert!(e.starts_with("invalid header at line 1:"), "{e}");
    }

    #[test]
    fn reader_stops_after_an_error() {
        let text = "{\"vigil_capture\":1}\n{\"tid\":1,\"type\":\"bogus\"}\n{\"tid\":1,\"type\":\"close\"}\n";
        let mut reader = Reader::new(text.as_bytes()).unwrap();
        assert!(reader.next_event().is_err());
        assert_eq!(reader.next_event().unwrap(), None);
    }

    #[test]
    fn accepts_crlf_and_explicit_nulls() {
        let text =
            "{\"vigil_capture\":1}\r\n{\"tid\":1,\"type\":\"close\",\"args\":{\"fd\":null}}\r\n";
        let (_, events) = read_all(text).unwrap();
        assert!(events[0].params.is_empty());
    }

    #[test]
    fn rejects_non_utf8_lines_with_a_position() {
        let mut bytes = b"{\"vigil_capture\":1}\n{\"tid\":1,\"type\":\"".to_vec();
        bytes.extend_from_slice(b"\xff\"}\n");
        let mut reader = Reader::new(&bytes[..]).unwrap();
        let e = reader.next_event().err().unwrap().to_string();
        assert!(e.starts_with("invalid JSON at line 2:"), "{e}");
    }
}
