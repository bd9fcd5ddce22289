//! The Kafka wire format, as much of it as a producer needs: big-endian integers, strings and
//! byte arrays with `i16`/`i32` lengths (the protocol's non-flexible versions, which every
//! request here uses), zig-zag varints for records, and CRC-32C.

use std::fmt;

/// Encodes a request body.
#[derive(Default)]
pub struct Enc(pub Vec<u8>);

impl Enc {
    pub fn i8(&mut self, v: i8) -> &mut Self {
        self.0.push(v as u8);
        self
    }
    pub fn i16(&mut self, v: i16) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    /// A `STRING` (`i16` length); longer strings are cut at 32767 bytes.
    pub fn string(&mut self, s: &str) -> &mut Self {
        let bytes = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
        self.i16(bytes.len() as i16);
        self.0.extend_from_slice(bytes);
        self
    }
    /// A `NULLABLE_STRING`.
    pub fn nullable_string(&mut self, s: Option<&str>) -> &mut Self {
        match s {
            Some(s) => self.string(s),
            None => self.i16(-1),
        }
    }
    /// `BYTES` / `NULLABLE_BYTES` with a value (`i32` length).
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.i32(b.len() as i32);
        self.0.extend_from_slice(b);
        self
    }
    pub fn bool(&mut self, b: bool) -> &mut Self {
        self.i8(i8::from(b))
    }
    /// A zig-zag varint (records).
    pub fn varint(&mut self, v: i64) -> &mut Self {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            self.0.push((z as u8) | 0x80);
            z >>= 7;
        }
        self.0.push(z as u8);
        self
    }
}

/// A response that does not parse.
#[derive(Debug)]
pub struct Malformed(pub &'static str);

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed response ({})", self.0)
    }
}

/// Decodes a response body; every read is bounds-checked.
pub struct Dec<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Dec<'a> {
    pub fn new(data: &'a [u8]) -> Dec<'a> {
        Dec { data, at: 0 }
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Malformed> {
        let end = self.at.checked_add(n).ok_or(Malformed(what))?;
        let slice = self.data.get(self.at..end).ok_or(Malformed(what))?;
        self.at = end;
        Ok(slice)
    }

    pub fn i8(&mut self) -> Result<i8, Malformed> {
        Ok(self.take(1, "i8")?[0] as i8)
    }
    pub fn i16(&mut self) -> Result<i16, Malformed> {
        let b = self.take(2, "i16")?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    pub fn i32(&mut self) -> Result<i32, Malformed> {
        let b = self.take(4, "i32")?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn i64(&mut self) -> Result<i64, Malformed> {
        let b = self.take(8, "i64")?;
        let mut a = [0; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    pub fn nullable_string(&mut self) -> Result<Option<String>, Malformed> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let b = self.take(len as usize, "string")?;
        Ok(Some(String::from_utf8_lossy(b).into_owned()))
    }
    pub fn string(&mut self) -> Result<String, Malformed> {
        Ok(self.nullable_string()?.unwrap_or_default())
    }
    pub fn bytes(&mut self) -> Result<Vec<u8>, Malformed> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(Vec::new());
        }
        Ok(self.take(len as usize, "bytes")?.to_vec())
    }
    /// An array's length (`-1`, null, reads as 0); bounded by the bytes left, so a hostile
    /// length cannot make a caller allocate without limit.
    pub fn array_len(&mut self) -> Result<usize, Malformed> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(0);
        }
        let len = len as usize;
        if len > self.data.len() - self.at {
            return Err(Malformed("array length"));
        }
        Ok(len)
    }
    pub fn skip(&mut self, n: usize) -> Result<(), Malformed> {
        self.take(n, "skip").map(|_| ())
    }
}

/// CRC-32C (Castagnoli), which record batches carry.
pub fn crc32c(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut crc = i as u32;
            let mut bit = 0;
            while bit < 8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0x82f6_3b78
                } else {
                    crc >> 1
                };
                bit += 1;
            }
            table[i] = crc;
            i += 1;
        }
        table
    };
    let mut crc = !0u32;
    for &byte in data {
        crc = TABLE[((crc ^ u32::from(byte)) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

/// Kafka's default partitioner hash (murmur2 with its seed), so a key lands in the same
/// partition as with the Java client and librdkafka's `murmur2_random`.
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = 0x9747_b28c ^ (data.len() as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if !rest.is_empty() {
        h ^= u32::from(rest[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of `key` among `partitions` (the Java client's `toPositive(murmur2) % n`).
pub fn partition_for(key: &[u8], partitions: usize) -> usize {
    ((murmur2(key) & 0x7fff_ffff) as usize) % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_check_value() {
        // The standard check value of CRC-32C.
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn murmur2_matches_the_java_client() {
        // Values printed by the Java client's `Utils.murmur2` (kafka-clients 4.1.1).
        for (key, java) in [
            ("node-1", -1_972_720_102),
            ("21", -973_932_308),
            ("vigil-test-host", -1_709_982_633),
            ("", 275_646_681),
            ("abc", 479_470_107),
        ] {
            assert_eq!(murmur2(key.as_bytes()), java, "{key:?}");
        }
        assert_eq!(
            partition_for(b"21", 3),
            ((-973_932_308i32 & 0x7fff_ffff) % 3) as usize
        );
    }

    #[test]
    fn varints_are_zigzag() {
        let mut e = Enc::default();
        e.varint(0).varint(-1).varint(1).varint(-2).varint(300);
        assert_eq!(e.0, [0x00, 0x01, 0x02, 0x03, 0xd8, 0x04]);
    }

    #[test]
    fn decoding_garbage_is_an_error_not_a_panic() {
        let mut d = Dec::new(&[0, 0, 0, 9, 1]);
        assert!(d.array_len().is_err());
        let mut d = Dec::new(&[0x7f, 0xff]);
        assert!(d.string().is_err());
        let mut d = Dec::new(&[0xff, 0xff]);
        assert_eq!(d.nullable_string().unwrap(), None);
    }
}
