//! A fake [`Catalog`] and [`Extract`] for tests and fuzzing. **Not for production use**: the
//! real catalog is `vigil-state`'s.
//!
//! The catalog declares the fields Falco's upstream rules files use (names as Falco documents
//! them, with Falco's types), the `evt.arg.NAME` / `evt.arg[NAME]` family, and a fixed set of
//! event type names. Anything else is an unknown field, so tests of `E_UNKNOWN_FIELD` are
//! honest. [`TestEvent`] supplies values by field name.

use std::borrow::Cow;
use std::collections::HashMap;

use vigil_fields::{
    ArgKind, Catalog, Extract, FieldArg, FieldDef, FieldId, FieldRef, FieldType, LookupError, Value,
};

const fn f(name: &'static str, ty: FieldType, arg: ArgKind, is_list: bool) -> FieldDef {
    FieldDef {
        name,
        ty,
        arg,
        is_list,
        desc: "",
    }
}

use ArgKind::{Key, None as NoArg, OptionalIndex, OptionalKey};
use FieldType::{AbsTime, Bool, IpAddr, IpNet, RelTime, Str, I64, U64};

/// Fields known to the fake catalog. `evt.arg` is the key family behind `evt.arg.NAME`;
/// ancestor fields (`proc.aname`) yield several values without being lists, as in Falco.
pub const FIELDS: &[FieldDef] = &[
    f("evt.type", Str, NoArg, false),
    f("evt.num", U64, NoArg, false),
    f("evt.res", Str, NoArg, false),
    f("evt.rawres", I64, NoArg, false),
    f("evt.dir", Str, NoArg, false),
    f("evt.args", Str, NoArg, false),
    f("evt.arg", Str, Key, false),
    f("evt.buffer", FieldType::Buffer, NoArg, false),
    f("evt.is_open_read", Bool, NoArg, false),
    f("evt.is_open_write", Bool, NoArg, false),
    f("evt.is_open_exec", Bool, NoArg, false),
    f("evt.time", AbsTime, NoArg, false),
    f("thread.cpu", FieldType::Double, NoArg, false),
    f("proc.name", Str, NoArg, false),
    f("proc.pname", Str, NoArg, false),
    f("proc.aname", Str, OptionalIndex, false),
    f("proc.exe", Str, NoArg, false),
    f("proc.pexe", Str, NoArg, false),
    f("proc.aexe", Str, OptionalIndex, false),
    f("proc.exepath", Str, NoArg, false),
    f("proc.pexepath", Str, NoArg, false),
    f("proc.aexepath", Str, OptionalIndex, false),
    f("proc.cmdline", Str, NoArg, false),
    f("proc.pcmdline", Str, NoArg, false),
    f("proc.args", Str, NoArg, false),
    f("proc.env", Str, OptionalKey, false),
    f("proc.cwd", Str, NoArg, false),
    f("proc.tty", U64, NoArg, false),
    f("proc.pid", I64, NoArg, false),
    f("proc.ppid", I64, NoArg, false),
    f("proc.vpid", I64, NoArg, false),
    f("proc.sname", Str, NoArg, false),
    f("proc.vpgid.name", Str, NoArg, false),
    f("proc.vpgid.exe", Str, NoArg, false),
    f("proc.is_vpgid_leader", Bool, NoArg, false),
    f("proc.is_exe_upper_layer", Bool, NoArg, false),
    f("proc.is_exe_from_memfd", Bool, NoArg, false),
    f("proc.duration", RelTime, NoArg, false),
    f("proc.ppid.duration", RelTime, NoArg, false),
    f("proc.exe_ino.mtime", AbsTime, NoArg, false),
    f("proc.exe_ino.ctime", AbsTime, NoArg, false),
    f(
        "proc.exe_ino.ctime_duration_proc_start",
        RelTime,
        NoArg,
        false,
    ),
    f("thread.cap_permitted", Str, NoArg, false),
    f("thread.cap_effective", Str, NoArg, false),
    f("user.name", Str, NoArg, false),
    f("user.uid", U64, NoArg, false),
    f("user.loginuid", I64, NoArg, false),
    f("user.loginname", Str, NoArg, false),
    f("group.name", Str, NoArg, false),
    f("group.gid", U64, NoArg, false),
    f("fd.name", Str, NoArg, false),
    f("fd.nameraw", Str, NoArg, false),
    f("fd.filename", Str, NoArg, false),
    f("fd.directory", Str, NoArg, false),
    f("fd.num", I64, NoArg, false),
    f("fd.type", Str, NoArg, false),
    f("fd.typechar", Str, NoArg, false),
    f("fd.l4proto", Str, NoArg, false),
    f("fd.sockfamily", Str, NoArg, false),
    f("fd.name_changed", Bool, NoArg, false),
    f("fd.connected", Bool, NoArg, false),
    f("fd.ip", IpAddr, NoArg, false),
    f("fd.cip", IpAddr, NoArg, false),
    f("fd.sip", IpAddr, NoArg, false),
    f("fd.lip", IpAddr, NoArg, false),
    f("fd.rip", IpAddr, NoArg, false),
    f("fd.net", IpNet, NoArg, false),
    f("fd.cnet", IpNet, NoArg, false),
    f("fd.snet", IpNet, NoArg, false),
    f("fd.lnet", IpNet, NoArg, false),
    f("fd.rnet", IpNet, NoArg, false),
    f("fd.port", U64, NoArg, false),
    f("fd.cport", U64, NoArg, false),
    f("fd.sport", U64, NoArg, false),
    f("fd.lport", U64, NoArg, false),
    f("fd.rport", U64, NoArg, false),
    f("fd.sip.name", Str, NoArg, false),
    f("fd.cip.name", Str, NoArg, false),
    f("fd.lip.name", Str, NoArg, false),
    f("fd.rip.name", Str, NoArg, false),
    f("container.id", Str, NoArg, false),
    f("container.name", Str, NoArg, false),
    f("container.image.repository", Str, NoArg, false),
    f("container.image.tag", Str, NoArg, false),
    f("container.privileged", Bool, NoArg, false),
    f("container.start_ts", AbsTime, NoArg, false),
    f("container.mounts", Str, NoArg, false),
    f("container.mount.dest", Str, Key, false),
    f("k8s.ns.name", Str, NoArg, false),
    f("k8s.pod.name", Str, NoArg, false),
];

/// Event type names of the fake catalog (ids are positions).
pub const EVENT_TYPES: &[&str] = &[
    "open",
    "openat",
    "openat2",
    "creat",
    "close",
    "read",
    "write",
    "execve",
    "execveat",
    "clone",
    "clone3",
    "fork",
    "vfork",
    "procexit",
    "connect",
    "accept",
    "accept4",
    "bind",
    "listen",
    "socket",
    "sendto",
    "sendmsg",
    "recvfrom",
    "recvmsg",
    "dup",
    "dup2",
    "dup3",
    "chmod",
    "fchmod",
    "fchmodat",
    "chown",
    "fchown",
    "fchownat",
    "mkdir",
    "mkdirat",
    "rmdir",
    "rename",
    "renameat",
    "renameat2",
    "unlink",
    "unlinkat",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "mount",
    "umount",
    "umount2",
    "ptrace",
    "setuid",
    "setgid",
    "setresuid",
    "setresgid",
    "setns",
    "unshare",
    "bpf",
    "init_module",
    "finit_module",
    "userfaultfd",
    "memfd_create",
    "mmap",
    "mprotect",
    "prctl",
    "kill",
    "chroot",
    "pivot_root",
    "capset",
    "pipe",
    "pipe2",
    "socketpair",
    "fcntl",
    "ioctl",
    "chdir",
    "fchdir",
    "container",
];

/// The fake catalog.
#[derive(Clone, Debug, Default)]
pub struct TestCatalog;

impl TestCatalog {
    pub fn new() -> TestCatalog {
        TestCatalog
    }

    fn id_of(name: &str) -> Option<FieldId> {
        FIELDS
            .iter()
            .position(|d| d.name == name)
            .and_then(|i| u32::try_from(i).ok())
            .map(FieldId)
    }
}

impl Catalog for TestCatalog {
    fn fields(&self) -> &[FieldDef] {
        FIELDS
    }

    fn lookup(&self, name: &str, arg: Option<&str>) -> Result<FieldRef, LookupError> {
        // `evt.arg.flags` is `evt.arg[flags]`.
        if let Some(key) = name.strip_prefix("evt.arg.") {
            if arg.is_some() || key.is_empty() {
                return Err(LookupError::BadArg("evt.arg.NAME takes no brackets".into()));
            }
            let id = Self::id_of("evt.arg").ok_or(LookupError::Unknown)?;
            return Ok(FieldRef {
                id,
                arg: FieldArg::Key(key.to_string()),
            });
        }
        let id = Self::id_of(name).ok_or(LookupError::Unknown)?;
        let def = &FIELDS[id.0 as usize];
        let arg = match (def.arg, arg) {
            (NoArg, None) | (OptionalIndex | OptionalKey, None) => FieldArg::None,
            (NoArg, Some(_)) => {
                return Err(LookupError::BadArg(format!("`{name}` takes no argument")))
            }
            (ArgKind::Index | OptionalIndex, Some(a)) => FieldArg::Index(
                a.trim()
                    .parse()
                    .map_err(|_| LookupError::BadArg(format!("`{name}` takes an integer index")))?,
            ),
            (Key | OptionalKey, Some(a)) => FieldArg::Key(a.to_string()),
            (ArgKind::Index | Key, None) => {
                return Err(LookupError::BadArg(format!(
                    "`{name}` requires an argument"
                )))
            }
        };
        Ok(FieldRef { id, arg })
    }

    fn def(&self, id: FieldId) -> &FieldDef {
        FIELDS.get(id.0 as usize).unwrap_or(&FIELDS[0])
    }

    fn n_event_types(&self) -> usize {
        EVENT_TYPES.len()
    }

    fn event_type_id(&self, name: &str) -> Option<u16> {
        EVENT_TYPES
            .iter()
            .position(|&n| n == name)
            .and_then(|i| u16::try_from(i).ok())
    }

    fn evt_type_field(&self) -> FieldId {
        Self::id_of("evt.type").expect("evt.type is declared")
    }

    fn is_endpoint_pair(&self, field: &FieldRef) -> bool {
        matches!(self.def(field.id).name, "fd.ip" | "fd.port" | "fd.net")
    }
}

/// A fake event: an event type and string/integer values by field name (with the argument
/// written as in conditions: `proc.aname[2]`, `evt.arg.flags` is stored as `evt.arg[flags]`).
#[derive(Clone, Debug, Default)]
pub struct TestEvent {
    pub event_type: u16,
    values: HashMap<String, Vec<Value<'static>>>,
}

impl TestEvent {
    /// An event of type `name` (which must be in [`EVENT_TYPES`]; unknown names give id 0).
    pub fn new(name: &str) -> TestEvent {
        let id = TestCatalog.event_type_id(name).unwrap_or(0);
        let mut e = TestEvent {
            event_type: id,
            values: HashMap::new(),
        };
        e.set("evt.type", name);
        e
    }

    /// Sets a string field.
    pub fn set(&mut self, field: &str, value: &str) -> &mut Self {
        self.values.insert(
            field.to_string(),
            vec![Value::Str(Cow::Owned(value.as_bytes().to_vec()))],
        );
        self
    }

    /// Sets a field to any values (several for list fields).
    pub fn set_values(&mut self, field: &str, values: Vec<Value<'static>>) -> &mut Self {
        self.values.insert(field.to_string(), values);
        self
    }

    fn key(field: &FieldRef) -> String {
        let name = FIELDS.get(field.id.0 as usize).map_or("?", |d| d.name);
        match &field.arg {
            FieldArg::None => name.to_string(),
            FieldArg::Index(i) => format!("{name}[{i}]"),
            FieldArg::Key(k) => format!("{name}[{k}]"),
        }
    }
}

impl Extract for TestEvent {
    fn event_type(&self) -> u16 {
        self.event_type
    }

    fn extract<'a>(&'a self, field: &FieldRef, out: &mut Vec<Value<'a>>) -> bool {
        match self.values.get(&Self::key(field)) {
            Some(values) => {
                out.extend(values.iter().cloned());
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_up_declared_fields_and_arg_families() {
        let c = TestCatalog::new();
        assert!(c.lookup("proc.name", None).is_ok());
        assert_eq!(c.lookup("proc.nmae", None), Err(LookupError::Unknown));
        let r = c.lookup("evt.arg.flags", None).unwrap();
        assert_eq!(r.arg, FieldArg::Key("flags".into()));
        assert_eq!(
            c.lookup("proc.aname", Some("2")).unwrap().arg,
            FieldArg::Index(2)
        );
        assert!(matches!(
            c.lookup("proc.name", Some("1")),
            Err(LookupError::BadArg(_))
        ));
        assert_eq!(c.event_type_id("openat"), Some(1));
        assert_eq!(c.def(c.evt_type_field()).name, "evt.type");
    }
}
