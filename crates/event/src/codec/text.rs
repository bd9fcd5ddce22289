//! Text forms shared by the JSON lines codec: JSON string escaping, byte strings (UTF-8 text or
//! `{"b64": …}`), socket addresses and tuples.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv6Addr};

use base64::prelude::{Engine as _, BASE64_STANDARD};
use serde_json::Value;

use crate::{SockAddr, SockTuple};

/// Appends `s` as a JSON string literal.
pub(super) fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f | 0x7f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Appends a byte string: a JSON string when it is UTF-8, else `{"b64":"…"}`.
pub(super) fn push_bytes(out: &mut String, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(s) => push_json_str(out, s),
        Err(_) => {
            out.push_str("{\"b64\":\"");
            BASE64_STANDARD.encode_string(bytes, out);
            out.push_str("\"}");
        }
    }
}

/// Reads a byte string written by [`push_bytes`].
pub(super) fn bytes_from_value(value: &Value) -> Result<Vec<u8>, String> {
    match value {
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        Value::Object(map) if map.len() == 1 => match map.get("b64") {
            Some(Value::String(b64)) => BASE64_STANDARD
                .decode(b64)
                .map_err(|e| format!("invalid base64: {e}")),
            _ => Err("expected a string or {\"b64\": \"...\"}".to_string()),
        },
        _ => Err("expected a string or {\"b64\": \"...\"}".to_string()),
    }
}

fn push_ip_port(out: &mut String, ip: IpAddr, port: u16) {
    let _ = match ip {
        IpAddr::V4(v4) => write!(out, "{v4}:{port}"),
        IpAddr::V6(v6) => write!(out, "[{v6}]:{port}"),
    };
}

fn parse_ip_port(text: &str) -> Result<(IpAddr, u16), String> {
    let bad = || format!("`{text}` is not an address:port");
    let (ip, port) = if let Some(rest) = text.strip_prefix('[') {
        let (ip, port) = rest.split_once("]:").ok_or_else(bad)?;
        (IpAddr::V6(ip.parse::<Ipv6Addr>().map_err(|_| bad())?), port)
    } else {
        let (ip, port) = text.rsplit_once(':').ok_or_else(bad)?;
        (IpAddr::V4(ip.parse().map_err(|_| bad())?), port)
    };
    Ok((ip, port.parse().map_err(|_| bad())?))
}

/// Appends a socket address: `"10.0.0.1:443"`, `"[::1]:22"`, `"unix:/path"` (UTF-8 paths), or
/// `{"family": 1, "path": …}` / `{"family": N}`.
pub(super) fn push_sockaddr(out: &mut String, addr: &SockAddr) {
    match addr {
        SockAddr::Inet { ip, port } => {
            out.push('"');
            push_ip_port(out, *ip, *port);
            out.push('"');
        }
        SockAddr::Unix { path } => match std::str::from_utf8(path) {
            Ok(p) => {
                let mut s = String::with_capacity(p.len() + 5);
                s.push_str("unix:");
                s.push_str(p);
                push_json_str(out, &s);
            }
            Err(_) => {
                out.push_str("{\"family\":1,\"path\":");
                push_bytes(out, path);
                out.push('}');
            }
        },
        SockAddr::Other { family } => {
            let _ = write!(out, "{{\"family\":{family}}}");
        }
    }
}

/// Reads a socket address written by [`push_sockaddr`].
pub(super) fn sockaddr_from_value(value: &Value) -> Result<SockAddr, String> {
    match value {
        Value::String(s) => match s.strip_prefix("unix:") {
            Some(path) => Ok(SockAddr::Unix {
                path: path.as_bytes().to_vec(),
            }),
            None => {
                let (ip, port) = parse_ip_port(s)?;
                Ok(SockAddr::Inet { ip, port })
            }
        },
        Value::Object(map) => {
            let family = map
                .get("family")
                .and_then(Value::as_u64)
                .and_then(|f| u16::try_from(f).ok())
                .ok_or("a socket address object needs a numeric `family`")?;
            if let Some(key) = map.keys().find(|k| *k != "family" && *k != "path") {
                return Err(format!("unknown socket address key `{key}`"));
            }
            match map.get("path") {
                Some(path) if family == 1 => Ok(SockAddr::Unix {
                    path: bytes_from_value(path)?,
                }),
                Some(_) => Err("only family 1 (AF_UNIX) has a `path`".to_string()),
                None => Ok(SockAddr::Other { family }),
            }
        }
        _ => Err("expected a socket address string or object".to_string()),
    }
}

fn l4proto_name(l4proto: u8) -> Option<&'static str> {
    match l4proto {
        6 => Some("tcp"),
        17 => Some("udp"),
        1 => Some("icmp"),
        255 => Some("raw"),
        _ => None,
    }
}

/// Appends a socket tuple: `"tcp:1.2.3.4:5->6.7.8.9:10"` (a protocol without a name as its
/// number), `"unix:/path"`, or `{"path": …}` for a non-UTF-8 Unix path.
pub(super) fn push_socktuple(out: &mut String, tuple: &SockTuple) {
    match tuple {
        SockTuple::Inet {
            l4proto,
            src_ip,
            src_port,
            dst_ip,
            dst_port,
        } => {
            out.push('"');
            match l4proto_name(*l4proto) {
                Some(name) => out.push_str(name),
                None => {
                    let _ = write!(out, "{l4proto}");
                }
            }
            out.push(':');
            push_ip_port(out, *src_ip, *src_port);
            out.push_str("->");
            push_ip_port(out, *dst_ip, *dst_port);
            out.push('"');
        }
        SockTuple::Unix { path } => match std::str::from_utf8(path) {
            Ok(p) => {
                let mut s = String::with_capacity(p.len() + 5);
                s.push_str("unix:");
                s.push_str(p);
                push_json_str(out, &s);
            }
            Err(_) => {
                out.push_str("{\"path\":");
                push_bytes(out, path);
                out.push('}');
            }
        },
    }
}

/// Parses the string form of a socket tuple.
pub(super) fn parse_socktuple(text: &str) -> Result<SockTuple, String> {
    if let Some(path) = text.strip_prefix("unix:") {
        return Ok(SockTuple::Unix {
            path: path.as_bytes().to_vec(),
        });
    }
    let bad =
        || format!("`{text}` is not a socket tuple such as `tcp:10.0.0.2:40000->10.0.0.1:443`");
    let (proto, rest) = text.split_once(':').ok_or_else(bad)?;
    let l4proto = match proto {
        "tcp" => 6,
        "udp" => 17,
        "icmp" => 1,
        "raw" => 255,
        number => number.parse::<u8>().map_err(|_| bad())?,
    };
    let (src, dst) = rest.split_once("->").ok_or_else(bad)?;
    let (src_ip, src_port) = parse_ip_port(src)?;
    let (dst_ip, dst_port) = parse_ip_port(dst)?;
    Ok(SockTuple::Inet {
        l4proto,
        src_ip,
        src_port,
        dst_ip,
        dst_port,
    })
}

/// Reads a socket tuple written by [`push_socktuple`].
pub(super) fn socktuple_from_value(value: &Value) -> Result<SockTuple, String> {
    match value {
        Value::String(s) => parse_socktuple(s),
        Value::Object(map) if map.len() == 1 => match map.get("path") {
            Some(path) => Ok(SockTuple::Unix {
                path: bytes_from_value(path)?,
            }),
            None => Err("expected a socket tuple string or {\"path\": ...}".to_string()),
        },
        _ => Err("expected a socket tuple string or {\"path\": ...}".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(f: impl FnOnce(&mut String)) -> String {
        let mut out = String::new();
        f(&mut out);
        out
    }

    #[test]
    fn json_strings_escape_what_json_requires() {
        let s = "a\"b\\c\nd\u{1}\u{7f}é";
        let text = json(|o| push_json_str(o, s));
        assert_eq!(text, "\"a\\\"b\\\\c\\nd\\u0001\\u007fé\"");
        let back: String = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn bytes_use_base64_only_when_not_utf8() {
        assert_eq!(json(|o| push_bytes(o, b"/etc/passwd")), "\"/etc/passwd\"");
        let raw = b"\xff\xfe/x";
        let text = json(|o| push_bytes(o, raw));
        assert_eq!(text, "{\"b64\":\"//4veA==\"}");
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(bytes_from_value(&value).unwrap(), raw.to_vec());
        assert!(bytes_from_value(&serde_json::json!({"b64": "!!"})).is_err());
        assert!(bytes_from_value(&serde_json::json!(3)).is_err());
    }

    #[test]
    fn addresses_and_tuples_round_trip() {
        let addrs = [
            SockAddr::Inet {
                ip: "10.0.0.1".parse().unwrap(),
                port: 443,
            },
            SockAddr::Inet {
                ip: "::1".parse().unwrap(),
                port: 22,
            },
            SockAddr::Unix {
                path: b"/run/x.sock".to_vec(),
            },
            SockAddr::Unix {
                path: b"\0abstract\xff".to_vec(),
            },
            SockAddr::Other { family: 16 },
            SockAddr::Other { family: 1 },
        ];
        for addr in addrs {
            let text = json(|o| push_sockaddr(o, &addr));
            let value: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(sockaddr_from_value(&value).unwrap(), addr, "{text}");
        }
        let tuples = [
            "tcp:10.0.0.2:40000->10.0.0.1:443",
            "udp:[::1]:53->[fe80::1]:5353",
            "icmp:1.1.1.1:0->2.2.2.2:0",
            "raw:1.1.1.1:0->[::ffff:1.2.3.4]:0",
            "58:[::1]:1->[::1]:2",
            "unix:/run/docker.sock",
        ];
        for t in tuples {
            let tuple = parse_socktuple(t).unwrap();
            assert_eq!(json(|o| push_socktuple(o, &tuple)), format!("\"{t}\""));
        }
        let odd = SockTuple::Unix {
            path: b"\xff".to_vec(),
        };
        let text = json(|o| push_socktuple(o, &odd));
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(socktuple_from_value(&value).unwrap(), odd);
        for bad in [
            "tcp:1.2.3.4:5",
            "tcp:1.2.3.4->5.6.7.8:9",
            "bogus:1.2.3.4:5->5.6.7.8:9",
            "tcp:[::1:5->[::1]:6",
            "tcp:1.2.3.4:70000->1.2.3.4:1",
        ] {
            assert!(parse_socktuple(bad).is_err(), "{bad}");
        }
    }
}
