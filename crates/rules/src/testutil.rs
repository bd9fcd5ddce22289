//! Fixtures for the condition language tests: a small [`Catalog`] with a field of every
//! [`FieldType`], list fields, indexed and keyed fields and `evt.type`, and a [`FakeEvent`]
//! implementing [`Extract`] that counts extractions.
//!
//! The default event: an `openat` by `bash` (`bash -c ls`, exe path `/usr/bin/BASH`, parent
//! `sshd`, ancestors `sshd`, `init`, `systemd`) on fd 3 `/etc/passwd`, socket address
//! `10.1.2.3`; `container.id` and `fd.rip` have no value.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use vigil_fields::{
    ArgKind, Catalog, Extract, FieldArg, FieldDef, FieldId, FieldRef, FieldType, LookupError, Value,
};

pub(crate) const EVENT_TYPES: &[&str] = &["openat", "execve", "connect", "procexit"];

const fn def(name: &'static str, ty: FieldType, arg: ArgKind, is_list: bool) -> FieldDef {
    FieldDef {
        name,
        ty,
        arg,
        is_list,
        desc: "test field",
    }
}

static FIELDS: &[FieldDef] = &[
    def("evt.type", FieldType::Str, ArgKind::None, false),
    def("evt.count", FieldType::U64, ArgKind::None, false),
    def("evt.time", FieldType::AbsTime, ArgKind::None, false),
    def("evt.buffer", FieldType::Buffer, ArgKind::None, false),
    def("proc.name", FieldType::Str, ArgKind::None, false),
    def("proc.pname", FieldType::Str, ArgKind::None, false),
    def("proc.exepath", FieldType::Str, ArgKind::None, false),
    def("proc.exe", FieldType::Str, ArgKind::None, false),
    def("proc.cmdline", FieldType::Str, ArgKind::None, false),
    def("proc.pid", FieldType::I64, ArgKind::None, false),
    def("proc.duration", FieldType::RelTime, ArgKind::None, false),
    def("proc.is_interactive", FieldType::Bool, ArgKind::None, false),
    def("proc.args", FieldType::Str, ArgKind::None, true),
    // Falco's "any ancestor" field: several values, but not a list.
    def("proc.aname", FieldType::Str, ArgKind::OptionalIndex, false),
    def("proc.env", FieldType::Str, ArgKind::OptionalKey, false),
    def("fd.num", FieldType::I64, ArgKind::None, false),
    def("fd.name", FieldType::Str, ArgKind::None, false),
    def("fd.directory", FieldType::Str, ArgKind::None, false),
    def("fd.sip", FieldType::IpAddr, ArgKind::None, false),
    def("fd.rip", FieldType::IpAddr, ArgKind::None, false),
    def("fd.net", FieldType::IpNet, ArgKind::None, false),
    // Either endpoint of a connection (see `Catalog::is_endpoint_pair`).
    def("fd.ip", FieldType::IpAddr, ArgKind::None, false),
    def("fd.port", FieldType::U64, ArgKind::None, false),
    def("fd.types", FieldType::Str, ArgKind::OptionalIndex, true),
    def("container.id", FieldType::Str, ArgKind::None, false),
    def("container.mount.dest", FieldType::Str, ArgKind::Key, false),
    def("no.values", FieldType::Str, ArgKind::None, true),
    def("evt.res", FieldType::Str, ArgKind::None, false),
    def("evt.rawres", FieldType::I64, ArgKind::None, false),
    def("evt.failed", FieldType::Bool, ArgKind::None, false),
    def("evt.cpu", FieldType::I64, ArgKind::None, false),
    def("thread.cpu", FieldType::Double, ArgKind::None, false),
    def("fd.nameraw", FieldType::Str, ArgKind::None, false),
];

pub(crate) struct FakeCatalog;

impl FakeCatalog {
    pub(crate) fn new() -> Self {
        FakeCatalog
    }
}

fn id_of(name: &str) -> Option<FieldId> {
    FIELDS
        .iter()
        .position(|d| d.name == name)
        .map(|i| FieldId(i as u32))
}

impl Catalog for FakeCatalog {
    fn fields(&self) -> &[FieldDef] {
        FIELDS
    }

    fn lookup(&self, name: &str, arg: Option<&str>) -> Result<FieldRef, LookupError> {
        let id = id_of(name).ok_or(LookupError::Unknown)?;
        let kind = FIELDS[id.0 as usize].arg;
        let index = |a: &str| {
            a.parse::<i64>()
                .map(FieldArg::Index)
                .map_err(|_| LookupError::BadArg(format!("`{a}` is not an index")))
        };
        let key = |a: &str| {
            if a.is_empty() {
                Err(LookupError::BadArg("empty key".to_string()))
            } else {
                Ok(FieldArg::Key(a.to_string()))
            }
        };
        let arg = match (kind, arg) {
            (ArgKind::None, None) | (ArgKind::OptionalIndex | ArgKind::OptionalKey, None) => {
                FieldArg::None
            }
            (ArgKind::None, Some(_)) => {
                return Err(LookupError::BadArg("takes no argument".to_string()))
            }
            (ArgKind::Index, None) | (ArgKind::Key, None) => {
                return Err(LookupError::BadArg("argument required".to_string()))
            }
            (ArgKind::Index | ArgKind::OptionalIndex, Some(a)) => index(a)?,
            (ArgKind::Key | ArgKind::OptionalKey, Some(a)) => key(a)?,
        };
        Ok(FieldRef { id, arg })
    }

    fn def(&self, id: FieldId) -> &FieldDef {
        &FIELDS[id.0 as usize]
    }

    fn n_event_types(&self) -> usize {
        EVENT_TYPES.len()
    }

    fn event_type_id(&self, name: &str) -> Option<u16> {
        EVENT_TYPES
            .iter()
            .position(|t| *t == name)
            .map(|i| i as u16)
    }

    fn evt_type_field(&self) -> FieldId {
        id_of("evt.type").expect("evt.type is defined")
    }

    /// `fd.num` is the result of `openat` (it returns the descriptor), an argument elsewhere.
    fn is_result_in(&self, field: &FieldRef, event_type: u16) -> bool {
        Some(field.id) == id_of("fd.num") && event_type == 0
    }

    /// `fd.num` stands for the fields only a syscall's result tells.
    fn depends_on_result(&self, field: &FieldRef) -> bool {
        Some(field.id) == id_of("fd.num")
    }

    fn is_endpoint_pair(&self, field: &FieldRef) -> bool {
        [id_of("fd.ip"), id_of("fd.port"), id_of("fd.net")].contains(&Some(field.id))
    }

    fn never_has_value(&self, field: &FieldRef) -> Option<&'static str> {
        (Some(field.id) == id_of("thread.cpu")).then_some("not recorded")
    }
}

/// One event's field values, keyed by (field name, argument). Fields absent from the map have
/// no value.
pub(crate) struct FakeEvent {
    pub event_type: u16,
    values: HashMap<(String, FieldArg), Vec<Value<'static>>>,
    counts: RefCell<HashMap<String, usize>>,
}

fn s(text: &str) -> Value<'static> {
    Value::Str(Cow::Owned(text.as_bytes().to_vec()))
}

impl Default for FakeEvent {
    fn default() -> Self {
        let mut ev = FakeEvent {
            event_type: 0,
            values: HashMap::new(),
            counts: RefCell::new(HashMap::new()),
        };
        let ip = |t: &str| Value::Ip(t.parse().expect("test address"));
        ev.set("evt.count", vec![Value::U64(u64::MAX)]);
        ev.set("evt.time", vec![Value::U64(2000)]);
        ev.set(
            "evt.buffer",
            vec![Value::Str(Cow::Owned(vec![0, 0xca, 0xfe, 0xba, 0xbe, 1]))],
        );
        ev.set_str("proc.name", "bash");
        ev.set_str("proc.pname", "sshd");
        ev.set_str("proc.exepath", "/usr/bin/BASH");
        ev.set(
            "proc.exe",
            vec![Value::Str(Cow::Owned(b"/tmp/bad\xff".to_vec()))],
        );
        ev.set_str("proc.cmdline", "bash -c ls");
        ev.set("proc.pid", vec![Value::I64(100)]);
        ev.set("proc.duration", vec![Value::U64(1_000_000_000)]);
        ev.set("proc.is_interactive", vec![Value::Bool(true)]);
        ev.set("proc.args", vec![s("-c"), s("ls")]);
        ev.set("proc.aname", vec![s("sshd"), s("init"), s("systemd")]);
        for (i, name) in ["bash", "sshd", "init", "systemd"].iter().enumerate() {
            ev.values.insert(
                ("proc.aname".to_string(), FieldArg::Index(i as i64)),
                vec![s(name)],
            );
        }
        ev.set_str("proc.env", "SECRET=aGVsbG8=");
        ev.values.insert(
            ("proc.env".to_string(), FieldArg::Key("SECRET".to_string())),
            vec![s("aGVsbG8=")],
        );
        ev.set("fd.num", vec![Value::I64(3)]);
        ev.set_str("fd.name", "/etc/passwd");
        ev.set_str("fd.directory", "/etc/");
        ev.set("fd.sip", vec![ip("10.1.2.3")]);
        ev.set("fd.net", vec![ip("10.1.2.3")]);
        ev.set("fd.types", vec![s("ipv4"), s("file")]);
        ev.set("no.values", vec![]);
        ev
    }
}

impl FakeEvent {
    pub(crate) fn set(&mut self, name: &str, values: Vec<Value<'static>>) {
        self.values
            .insert((name.to_string(), FieldArg::None), values);
    }

    pub(crate) fn set_str(&mut self, name: &str, value: &str) {
        self.set(name, vec![s(value)]);
    }

    /// How many times `name` was extracted (any argument).
    pub(crate) fn extractions(&self, name: &str) -> usize {
        self.counts.borrow().get(name).copied().unwrap_or(0)
    }
}

impl Extract for FakeEvent {
    fn event_type(&self) -> u16 {
        self.event_type
    }

    fn extract<'a>(&'a self, field: &FieldRef, out: &mut Vec<Value<'a>>) -> bool {
        let name = FIELDS[field.id.0 as usize].name;
        *self
            .counts
            .borrow_mut()
            .entry(name.to_string())
            .or_default() += 1;
        if name == "evt.type" {
            let t = EVENT_TYPES
                .get(usize::from(self.event_type))
                .copied()
                .unwrap_or("unknown");
            out.push(Value::Str(Cow::Borrowed(t.as_bytes())));
            return true;
        }
        let Some(values) = self.values.get(&(name.to_string(), field.arg.clone())) else {
            return false;
        };
        out.extend(values.iter().map(|v| match v {
            Value::Str(bytes) => Value::Str(Cow::Borrowed(&bytes[..])),
            other => other.clone(),
        }));
        true
    }
}
