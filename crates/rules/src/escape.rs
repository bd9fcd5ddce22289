//! Escaping of field values in text outputs, so that one alert is always one line.
//!
//! Field values come from the monitored processes (paths, arguments, environment, names) and are
//! arbitrary bytes. Printed raw, a newline in an argument would start a second line that reads
//! like an alert, a carriage return or an ANSI escape sequence would overwrite or hide the real
//! one. [`push_escaped`] writes a value as text with these escaped:
//!
//! | input                                                            | written          |
//! |------------------------------------------------------------------|------------------|
//! | newline, carriage return, tab                                    | `\n` `\r` `\t`   |
//! | any other C0 control byte (0x00–0x1F), DEL (0x7F)                | `\x1b`, `\x7f`   |
//! | C1 controls U+0080–U+009F (as UTF-8)                             | `\u{85}`         |
//! | U+2028, U+2029 (line and paragraph separators)                   | `\u{2028}`       |
//! | bidirectional overrides and isolates U+202A–U+202E, U+2066–U+2069 | `\u{202e}`       |
//! | a byte that is not part of valid UTF-8 (a lone 0x85, 0xFF …)     | `\x85`, `\xff`   |
//! | a backslash that would otherwise read as the start of an escape  | `\\`             |
//!
//! Hex digits are lower case. A backslash is doubled only when it is followed by `\`, `n`, `r`,
//! `t`, `x`, `u`, by a character that is itself escaped, or by nothing (end of the value), so
//! ordinary values with backslashes (`grep 'a\.b'`) print as Falco prints them, and yet the
//! text is unambiguous: a value holding the two characters `\n` prints as `\\n`, never as the
//! `\n` of an escaped newline. To read a value back: `\\` is a backslash, `\n` `\r` `\t` `\xHH`
//! `\u{H…}` are the escapes above, and a backslash followed by anything else is itself.
//!
//! Everything else, including all other valid UTF-8, is copied unchanged. A value with nothing to
//! escape costs one UTF-8 validation and one scan of its bytes (eight at a time), and [`escape`]
//! then borrows it.

use std::borrow::Cow;

/// Bytes that send a value down the slow path: C0, DEL, backslash, and the UTF-8 lead bytes of
/// the escaped code points (0xC2: U+0080–U+00BF; 0xE2: U+2000–U+2FFF). In valid UTF-8 no other
/// byte can start anything that is escaped.
static ATTENTION: [bool; 256] = attention_table();

const fn attention_table() -> [bool; 256] {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = b < 0x20 || b == 0x7f || b == b'\\' as usize || b == 0xc2 || b == 0xe2;
        b += 1;
    }
    table
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Whether some byte of `w` is zero.
fn has_zero_byte(w: u64) -> bool {
    w.wrapping_sub(ONES) & !w & HIGH != 0
}

/// Whether the eight bytes in `w` may hold an attention byte: a control byte, DEL, a backslash
/// or any non-ASCII byte (word at a time; the table then decides).
fn word_may_need_attention(w: u64) -> bool {
    let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH != 0;
    below_space
        || w & HIGH != 0
        || has_zero_byte(w ^ (ONES * 0x7f))
        || has_zero_byte(w ^ (ONES * u64::from(b'\\')))
}

/// The offset of the first attention byte in `bytes`.
fn find_attention(bytes: &[u8]) -> Option<usize> {
    let attention = |b: &u8| ATTENTION[usize::from(*b)];
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in words.by_ref() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        if word_may_need_attention(u64::from_le_bytes(word)) {
            if let Some(i) = chunk.iter().position(attention) {
                return Some(at + i);
            }
        }
        at += 8;
    }
    words.remainder().iter().position(attention).map(|i| at + i)
}

/// The byte offset of the first thing to escape in valid UTF-8 `s`: a fast scan for the bytes
/// that may start one, each then looked at closely.
fn first_escape(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut from = 0;
    while let Some(rel) = find_attention(&bytes[from..]) {
        let at = from + rel;
        // `at` is a character boundary: every attention byte is ASCII or a UTF-8 lead byte.
        let c = s[at..].chars().next()?;
        let escaped = match classify(c) {
            Class::Plain => false,
            Class::Backslash => !lone_backslash_ok(bytes.get(at + 1).copied()),
            _ => true,
        };
        if escaped {
            return Some(at);
        }
        from = at + c.len_utf8();
    }
    None
}

/// Appends `bytes` to `out` as text, escaped as the module documentation describes. Allocates
/// nothing beyond `out`'s own growth.
pub fn push_escaped(out: &mut String, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(s) => match first_escape(s) {
            None => out.push_str(s),
            Some(at) => {
                out.push_str(&s[..at]);
                escape_slow(out, &bytes[at..]);
            }
        },
        Err(_) => escape_slow(out, bytes),
    }
}

/// `bytes` as escaped text: borrowed when there is nothing to escape.
pub fn escape(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) if first_escape(s).is_none() => Cow::Borrowed(s),
        _ => {
            let mut out = String::with_capacity(bytes.len() + 8);
            push_escaped(&mut out, bytes);
            Cow::Owned(out)
        }
    }
}

/// What a code point becomes: itself, or an escape.
enum Class {
    Plain,
    Backslash,
    Short(&'static str),
    Byte(u8),
    CodePoint(u32),
}

fn classify(c: char) -> Class {
    match c {
        '\\' => Class::Backslash,
        '\n' => Class::Short("\\n"),
        '\r' => Class::Short("\\r"),
        '\t' => Class::Short("\\t"),
        // C0 and DEL: a single byte each.
        '\0'..='\x1f' | '\x7f' => Class::Byte(c as u8),
        '\u{80}'..='\u{9f}'
        | '\u{2028}'..='\u{2029}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}' => Class::CodePoint(u32::from(c)),
        _ => Class::Plain,
    }
}

/// Whether a backslash followed by `next` (`None`: the end of the value) can stay single: only
/// before a printable ASCII character that starts no escape.
fn lone_backslash_ok(next: Option<u8>) -> bool {
    matches!(next, Some(b' '..=b'~'))
        && !matches!(next, Some(b'\\' | b'n' | b'r' | b't' | b'x' | b'u'))
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_hex_byte(out: &mut String, b: u8) {
    out.push_str("\\x");
    out.push(char::from(HEX[usize::from(b >> 4)]));
    out.push(char::from(HEX[usize::from(b & 0xf)]));
}

fn push_code_point(out: &mut String, cp: u32) {
    out.push_str("\\u{");
    let digits = (32 - cp.leading_zeros()).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        out.push(char::from(HEX[((cp >> (4 * i)) & 0xf) as usize]));
    }
    out.push('}');
}

fn escape_slow(out: &mut String, bytes: &[u8]) {
    for chunk in bytes.utf8_chunks() {
        let valid = chunk.valid();
        let invalid = chunk.invalid();
        // Start of the run of plain text not yet copied.
        let mut run = 0;
        for (i, c) in valid.char_indices() {
            let class = classify(c);
            if matches!(class, Class::Plain) {
                continue;
            }
            out.push_str(&valid[run..i]);
            run = i + c.len_utf8();
            match class {
                Class::Plain => {}
                Class::Backslash => {
                    // The byte after it: in this chunk, else the first invalid byte (escaped),
                    // else the end of the value (a chunk with no invalid bytes is the last).
                    let next = valid.as_bytes().get(run).or(invalid.first()).copied();
                    out.push_str(if lone_backslash_ok(next) {
                        "\\"
                    } else {
                        "\\\\"
                    });
                }
                Class::Short(s) => out.push_str(s),
                Class::Byte(b) => push_hex_byte(out, b),
                Class::CodePoint(cp) => push_code_point(out, cp),
            }
        }
        out.push_str(&valid[run..]);
        for &b in invalid {
            push_hex_byte(out, b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn esc(bytes: &[u8]) -> String {
        let mut out = String::new();
        push_escaped(&mut out, bytes);
        assert_eq!(
            escape(bytes),
            out.as_str(),
            "escape and push_escaped agree on {bytes:?}"
        );
        out
    }

    /// Reverses the escaping, to show it is unambiguous.
    fn unescape(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let b = text.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] != b'\\' {
                out.push(b[i]);
                i += 1;
                continue;
            }
            match b.get(i + 1) {
                Some(b'\\') => {
                    out.push(b'\\');
                    i += 2;
                }
                Some(b'n') => {
                    out.push(b'\n');
                    i += 2;
                }
                Some(b'r') => {
                    out.push(b'\r');
                    i += 2;
                }
                Some(b't') => {
                    out.push(b'\t');
                    i += 2;
                }
                Some(b'x') => {
                    let hex = text.get(i + 2..i + 4).expect("two hex digits after \\x");
                    out.push(u8::from_str_radix(hex, 16).expect("hex after \\x"));
                    i += 4;
                }
                Some(b'u') => {
                    let end = text[i..].find('}').expect("closing brace") + i;
                    let cp = u32::from_str_radix(&text[i + 3..end], 16).expect("hex in \\u{}");
                    let c = char::from_u32(cp).expect("a code point");
                    out.extend_from_slice(c.to_string().as_bytes());
                    i = end + 1;
                }
                _ => {
                    out.push(b'\\');
                    i += 1;
                }
            }
        }
        out
    }

    /// No byte or code point in `text` that a terminal or a line splitter acts on.
    fn assert_inert(text: &str) {
        for c in text.chars() {
            assert!(
                !c.is_control() && !matches!(c, '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}'),
                "{c:?} left raw in {text:?}"
            );
        }
    }

    #[test]
    fn every_c0_byte_and_del_is_escaped() {
        for b in (0u8..0x20).chain([0x7f]) {
            let got = esc(&[b'a', b, b'z']);
            let want = match b {
                b'\n' => "a\\nz".to_string(),
                b'\r' => "a\\rz".to_string(),
                b'\t' => "a\\tz".to_string(),
                _ => format!("a\\x{b:02x}z"),
            };
            assert_eq!(got, want, "byte {b:#04x}");
            assert_inert(&got);
            assert_eq!(unescape(&got), [b'a', b, b'z']);
        }
        assert_eq!(esc(b"\x1b[2J\x07"), "\\x1b[2J\\x07");
    }

    #[test]
    fn c1_controls_separators_and_bidi_controls_are_escaped() {
        for cp in (0x80..=0x9f).chain(0x2028..=0x202e).chain(0x2066..=0x2069) {
            let c = char::from_u32(cp).unwrap();
            let value = format!("a{c}z");
            let got = esc(value.as_bytes());
            assert_eq!(got, format!("a\\u{{{cp:x}}}z"), "U+{cp:04X}");
            assert_inert(&got);
            assert_eq!(unescape(&got), value.as_bytes());
        }
        // Their neighbours with the same UTF-8 lead bytes are not.
        for s in ["\u{a0}©\u{bf}", "—…‘’\u{2027}\u{202f}\u{2065}\u{206a}✓"] {
            assert_eq!(esc(s.as_bytes()), s);
        }
    }

    #[test]
    fn invalid_utf8_bytes_are_escaped_as_hex() {
        // Lone continuation bytes (the raw C1 range among them), a truncated sequence, 0xFF.
        let value = b"a\x85b\x9f\xe2\x80c\xff";
        let got = esc(value);
        assert_eq!(got, "a\\x85b\\x9f\\xe2\\x80c\\xff");
        assert_eq!(unescape(&got), value);
        // A raw C1 byte and the UTF-8 C1 code point stay distinguishable.
        assert_ne!(esc(b"\x85"), esc("\u{85}".as_bytes()));
        // Valid text around invalid bytes is kept, including multi-byte characters.
        assert_eq!(esc("é\u{fffd}".as_bytes()), "é\u{fffd}");
        assert_eq!(esc(b"\xc3\xa9\xc3"), "é\\xc3");
    }

    #[test]
    fn backslash_is_doubled_only_where_it_would_read_as_an_escape() {
        let cases: &[(&[u8], &str)] = &[
            (b"grep a\\.b", "grep a\\.b"),
            (b"C:\\Windows", "C:\\Windows"),
            (b"x\\y \\ z", "x\\y \\ z"),
            // Followed by an escape letter or a backslash.
            (b"\\n", "\\\\n"),
            (b"\\r\\t\\x1b\\u{85}", "\\\\r\\\\t\\\\x1b\\\\u{85}"),
            (b"a\\\\b", "a\\\\\\b"),
            // Followed by something escaped, or by nothing.
            (b"\\\n", "\\\\\\n"),
            (b"\\\xff", "\\\\\\xff"),
            ("\\\u{2028}".as_bytes(), "\\\\\\u{2028}"),
            ("\\é".as_bytes(), "\\\\é"),
            (b"end\\", "end\\\\"),
            (b"\\", "\\\\"),
        ];
        for (value, want) in cases {
            let got = esc(value);
            assert_eq!(got, *want, "{:?}", String::from_utf8_lossy(value));
            assert_eq!(unescape(&got), *value, "{got} reads back");
        }
        // A forged escape never looks like a real one.
        assert_ne!(esc(b"a\\nb"), esc(b"a\nb"));
        assert_ne!(esc(b"\\x0a"), esc(b"\x0a"));
    }

    #[test]
    fn word_scan_finds_every_attention_byte_at_every_offset() {
        for b in 0..=255u8 {
            for at in 0..17 {
                let mut value = vec![b'a'; 17];
                value[at] = b;
                let want = ATTENTION[usize::from(b)].then_some(at);
                assert_eq!(find_attention(&value), want, "byte {b:#04x} at {at}");
            }
        }
    }

    #[test]
    fn every_byte_pair_round_trips() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                let value = [b'\\', a, b, b'\\'];
                let got = esc(&value);
                assert_inert(&got);
                assert_eq!(unescape(&got), value, "{value:?} -> {got}");
            }
        }
    }

    #[test]
    fn nothing_to_escape_is_borrowed() {
        let values = [
            &b""[..],
            b"/etc/shadow",
            "héllo — ✓ 日本 \u{a0}".as_bytes(),
            b"grep a\\.b",
        ];
        for value in values {
            let Cow::Borrowed(s) = escape(value) else {
                panic!("{value:?} was copied");
            };
            assert_eq!(s.as_ptr(), value.as_ptr(), "the value's own bytes");
        }
        assert!(matches!(escape(b"a\nb"), Cow::Owned(_)));
        assert!(matches!(escape(b"a\\nb"), Cow::Owned(_)));
    }

    #[test]
    fn long_values_escape_throughout() {
        let mut value = Vec::new();
        for i in 0..10_000u32 {
            value.extend_from_slice(b"arg");
            value.push((i % 256) as u8);
        }
        let got = esc(&value);
        assert_inert(&got);
        assert!(!got.contains('\n'));
        assert_eq!(unescape(&got), value);
        let plain = "x".repeat(1 << 20);
        assert!(matches!(escape(plain.as_bytes()), Cow::Borrowed(_)));
    }
}
