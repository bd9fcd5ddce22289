//! The field interface between event data and the rules language.
//!
//! `vigil-rules` compiles conditions and output templates against a [`Catalog`] (which fields
//! exist, their types, which event types exist) and evaluates them through [`Extract`] (the value
//! of a field for the current event). `vigil-state` implements both over its process tables; tests
//! of the rules engine implement them with small fakes. This crate owns nothing else: no I/O, no
//! event model, no state.
//!
//! Falco semantics carried here:
//! - a field whose value cannot be known for an event extracts as "no value" (`false` from
//!   [`Extract::extract`]); comparisons against it are false and outputs print `<NA>`;
//! - values are typed ([`FieldType`]); strings are arbitrary bytes because monitored processes
//!   choose them.
#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::fmt;
use std::net::IpAddr;

/// The type of a field's values, as Falco declares it (`vigil fields` prints these names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// Arbitrary bytes, usually text (Falco `CHARBUF`, `FSPATH`, `FSRELPATH`).
    Str,
    /// Signed integer (Falco `INT64`, also `ERRNO`, `PID`, `FD`).
    I64,
    /// Unsigned integer (Falco `UINT64`, `UINT32`, `PORT`, `SYSCALLID` …).
    U64,
    /// Boolean (Falco `BOOL`); compares with `true`/`false`.
    Bool,
    /// An IPv4/IPv6 address (Falco `IPADDR`); compares against addresses and, with `in`, networks.
    IpAddr,
    /// An IP network (Falco `IPNET`): `fd.net` style fields, compared against CIDR literals.
    IpNet,
    /// Absolute time in nanoseconds since the epoch (Falco `ABSTIME`).
    AbsTime,
    /// A duration in nanoseconds (Falco `RELTIME`).
    RelTime,
    /// A raw byte buffer (Falco `BYTEBUF`), e.g. `evt.buffer`.
    Buffer,
    /// A floating-point number (Falco `DOUBLE`, e.g. `thread.cpu`). Conditions compare it
    /// with integers only, as libsinsp does ("floating point values still not supported");
    /// no field of this type has values in Vigil yet, and [`crate::Value`] has no float.
    Double,
}

impl FieldType {
    /// The Falco-style type name printed by `vigil fields`.
    pub fn name(self) -> &'static str {
        match self {
            FieldType::Str => "CHARBUF",
            FieldType::I64 => "INT64",
            FieldType::U64 => "UINT64",
            FieldType::Bool => "BOOL",
            FieldType::IpAddr => "IPADDR",
            FieldType::IpNet => "IPNET",
            FieldType::AbsTime => "ABSTIME",
            FieldType::RelTime => "RELTIME",
            FieldType::Buffer => "BYTEBUF",
            FieldType::Double => "DOUBLE",
        }
    }

    /// Whether values of this type order numerically (`<`, `>` …).
    pub fn is_numeric(self) -> bool {
        matches!(
            self,
            FieldType::I64
                | FieldType::U64
                | FieldType::AbsTime
                | FieldType::RelTime
                | FieldType::Double
        )
    }
}

/// What a field accepts in brackets: `proc.aname[2]`, `proc.env[HOME]`, `evt.arg.flags`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// No argument allowed.
    None,
    /// An integer argument is required (`proc.aname[2]` style when required).
    Index,
    /// An integer argument may be given (`proc.aname` = any ancestor, `proc.aname[1]`).
    OptionalIndex,
    /// A string key is required (`evt.arg[name]`, `container.mount.dest[/etc]`).
    Key,
    /// A string key may be given (`proc.env` = whole environment, `proc.env[HOME]` = one var).
    OptionalKey,
}

impl ArgKind {
    /// How `vigil fields` shows it after the name: `[N]`, `[N]?`, `[KEY]`, `[KEY]?` or nothing.
    pub fn suffix(self) -> &'static str {
        match self {
            ArgKind::None => "",
            ArgKind::Index => "[N]",
            ArgKind::OptionalIndex => "[N]?",
            ArgKind::Key => "[KEY]",
            ArgKind::OptionalKey => "[KEY]?",
        }
    }
}

/// The static description of one field.
#[derive(Clone, Copy, Debug)]
pub struct FieldDef {
    /// Falco name, e.g. `proc.aname`. Fields named with a dotted suffix family (`evt.arg.*`)
    /// are looked up by [`Catalog::lookup`], which may accept names not listed verbatim.
    pub name: &'static str,
    pub ty: FieldType,
    pub arg: ArgKind,
    /// Whether one extraction may yield several values (Falco list fields such as `proc.aname`
    /// without index, `fd.types`); operators such as `intersects` and `in` then apply per value.
    pub is_list: bool,
    /// One line for `vigil fields`.
    pub desc: &'static str,
}

/// Identifies a field within a [`Catalog`]. Opaque to the rules engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldId(pub u32);

/// The bracketed argument of a field reference after parsing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FieldArg {
    None,
    Index(i64),
    Key(String),
}

/// A field reference resolved against a catalog: which field, with which argument.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldRef {
    pub id: FieldId,
    pub arg: FieldArg,
}

/// Why a field reference could not be resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LookupError {
    /// No such field.
    Unknown,
    /// The field exists but the argument is missing, not allowed, or of the wrong kind.
    BadArg(String),
}

/// An IP network, `addr/prefix_len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpNet {
    pub addr: IpAddr,
    pub prefix_len: u8,
}

impl IpNet {
    /// Parses `10.0.0.0/8`, `fd00::/8`; a bare address is a host network (/32 or /128).
    pub fn parse(text: &str) -> Option<IpNet> {
        let (addr_text, len_text) = match text.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (text, None),
        };
        let addr: IpAddr = addr_text.trim().parse().ok()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix_len = match len_text {
            Some(l) => l.trim().parse::<u8>().ok().filter(|&l| l <= max)?,
            None => max,
        };
        Some(IpNet { addr, prefix_len })
    }

    /// Whether `ip` lies in this network (an IPv4 address never lies in an IPv6 network).
    pub fn contains(&self, ip: &IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix_len))
                    .unwrap_or(0);
                (u32::from(net) & mask) == (u32::from(*ip) & mask)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix_len))
                    .unwrap_or(0);
                (u128::from(net) & mask) == (u128::from(*ip) & mask)
            }
            _ => false,
        }
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

/// One extracted value. Strings borrow from the event or the state where they can.
#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    Str(Cow<'a, [u8]>),
    I64(i64),
    U64(u64),
    Bool(bool),
    Ip(IpAddr),
    Net(IpNet),
}

impl Value<'_> {
    /// Detaches the value from the data it borrows.
    pub fn into_owned(self) -> Value<'static> {
        match self {
            Value::Str(s) => Value::Str(Cow::Owned(s.into_owned())),
            Value::I64(v) => Value::I64(v),
            Value::U64(v) => Value::U64(v),
            Value::Bool(v) => Value::Bool(v),
            Value::Ip(v) => Value::Ip(v),
            Value::Net(v) => Value::Net(v),
        }
    }

    /// Appends the value as Falco prints it in outputs: strings as given (lossy UTF-8),
    /// booleans `true`/`false`, numbers in decimal, addresses in their usual form.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        match self {
            Value::Str(s) => out.push_str(&String::from_utf8_lossy(s)),
            Value::I64(v) => {
                let _ = write!(out, "{v}");
            }
            Value::U64(v) => {
                let _ = write!(out, "{v}");
            }
            Value::Bool(v) => out.push_str(if *v { "true" } else { "false" }),
            Value::Ip(v) => {
                let _ = write!(out, "{v}");
            }
            Value::Net(v) => {
                let _ = write!(out, "{v}");
            }
        }
    }
}

/// The fields and event types a rules engine may use. Implemented by `vigil-state`.
pub trait Catalog {
    /// Every field, for `vigil fields` and diagnostics.
    fn fields(&self) -> &[FieldDef];
    /// Resolves `name` with its optional bracket text (`proc.aname`, `Some("2")`).
    /// Names such as `evt.arg.flags` may resolve to a family field with a key argument.
    fn lookup(&self, name: &str, arg: Option<&str>) -> Result<FieldRef, LookupError>;
    /// The definition of a resolved field.
    fn def(&self, id: FieldId) -> &FieldDef;
    /// Number of event types; event type ids are `0..n_event_types()`.
    fn n_event_types(&self) -> usize;
    /// The event type id for a Falco `evt.type` name (`openat`, `execve`, `procexit` …).
    fn event_type_id(&self, name: &str) -> Option<u16>;
    /// The id of the field that holds the event type (`evt.type`), which the rules engine
    /// analyses to index rules by event type.
    fn evt_type_field(&self) -> FieldId;
    /// Whether `field` can only be known once a syscall has returned: its result, and what
    /// the result created (the new descriptor's number and kind), as opposed to what its
    /// arguments and the state before it say. A kernel-less driver evaluates rules at syscall
    /// entry with such fields treated as unknown, to decide whether it must wait for the
    /// result at all. `false` (the default) keeps a field as an entry-time fact.
    /// Whether `field` reads the call's result itself in events of `event_type` (libsinsp's
    /// `fd.num` of a call that returns a descriptor: a failed `openat`'s is its negative
    /// result), so that a test of it tells a failed call as a test of `evt.rawres` does. The
    /// rules engine uses it to decide which rules may match a failed call. `false` (the
    /// default) keeps the field undecided by a failure.
    fn is_result_in(&self, field: &FieldRef, event_type: u16) -> bool {
        let _ = (field, event_type);
        false
    }

    fn depends_on_result(&self, field: &FieldRef) -> bool {
        let _ = field;
        false
    }

    /// Whether `field` stands for several endpoints at once (libsinsp's `fd.ip`, `fd.port`,
    /// `fd.net`: the client or the server), so that a negative comparison (`!=`) holds only
    /// when **no** endpoint equals the value, while every other operator holds when any
    /// endpoint satisfies it. `false` (the default): `!=` holds when some value differs, as
    /// for the "any ancestor" fields.
    fn is_endpoint_pair(&self, field: &FieldRef) -> bool {
        let _ = field;
        false
    }

    /// Why `field` never has a value in this implementation (`None`: it can have one). A
    /// rule may name such a field (Falco has it), but comparisons on it are always false; the
    /// compiler warns (`W_FIELD_NO_VALUE`) with this reason.
    fn never_has_value(&self, field: &FieldRef) -> Option<&'static str> {
        let _ = field;
        None
    }
}

/// The values of fields for one event. Implemented by `vigil-state` over (event, state).
pub trait Extract {
    /// The event type id of the current event (see [`Catalog::n_event_types`]).
    fn event_type(&self) -> u16;
    /// Appends the values of `field` to `out`. Returns `false` when the field has no value for
    /// this event (Falco `<NA>`); `out` is then left as it was. List fields may append several
    /// values; an empty list is a value (returns `true`, appends nothing).
    fn extract<'a>(&'a self, field: &FieldRef, out: &mut Vec<Value<'a>>) -> bool;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipnet_parses_and_contains() {
        let net = IpNet::parse("10.0.0.0/8").unwrap();
        assert!(net.contains(&"10.1.2.3".parse().unwrap()));
        assert!(!net.contains(&"11.1.2.3".parse().unwrap()));
        assert!(!net.contains(&"::1".parse().unwrap()));
        let all = IpNet::parse("0.0.0.0/0").unwrap();
        assert!(all.contains(&"8.8.8.8".parse().unwrap()));
        let host = IpNet::parse("::1").unwrap();
        assert_eq!(host.prefix_len, 128);
        assert!(host.contains(&"::1".parse().unwrap()));
        assert!(IpNet::parse("10.0.0.0/33").is_none());
        assert!(IpNet::parse("nonsense").is_none());
    }

    #[test]
    fn values_render_like_falco() {
        let mut out = String::new();
        Value::Str(Cow::Borrowed(b"bash")).render(&mut out);
        out.push(' ');
        Value::Bool(true).render(&mut out);
        out.push(' ');
        Value::I64(-2).render(&mut out);
        assert_eq!(out, "bash true -2");
    }
}
