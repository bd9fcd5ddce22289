//! A read-only reader of bbolt databases (the embedded key/value store of containerd's
//! `meta.db` and podman 4's `bolt_state.db`), enough to read a value in nested buckets.
//!
//! The file format: fixed-size pages; pages 0 and 1 are meta pages (the valid one with the
//! higher transaction id is current) naming the root bucket's page; a bucket is a B+tree of
//! branch pages (keys and child page ids) and leaf pages (keys and values, a value flagged as
//! a sub-bucket holding that bucket's root page id, or the whole bucket inline when small).
//!
//! The owning daemon keeps the file open and writes to it: bbolt writes a transaction's pages
//! before the meta page that makes them current, but pages freed earlier may be reused under
//! a reader that took no lock (this one takes none, so it never blocks the daemon). So every
//! page is read with its bounds checked and a mismatch reads as "not found" (the caller asks
//! again later); nothing here trusts a length or an offset of the file. Pages are read on
//! demand (`pread`), so memory stays bounded by a few pages whatever the database's size.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

const MAGIC: u32 = 0xED0C_DAED;
const VERSION: u32 = 2;
const PAGE_HEADER: usize = 16;
const ELEMENT: usize = 16;
const BRANCH: u16 = 0x01;
const LEAF: u16 = 0x02;
const BUCKET_FLAG: u32 = 0x01;
/// The header of a bucket value: its root page id and sequence.
const BUCKET_HEADER: usize = 16;
/// Page sizes accepted (bbolt uses the OS page size: 4 KiB to 64 KiB).
const PAGE_SIZES: std::ops::RangeInclusive<u32> = 512..=(1 << 16);
/// A page with its overflow pages larger than this is not read.
const MAX_PAGE_BYTES: u64 = 16 << 20;
/// B+tree depth at most (a corrupt tree could loop).
const MAX_DEPTH: usize = 32;

/// An open database (its current meta page read).
#[derive(Debug)]
pub(crate) struct Db {
    file: File,
    page_size: u64,
    /// Pages in use (the meta's high-water mark): a page id at or past it is corrupt.
    pages: u64,
    root: Bucket,
}

/// A bucket: the root page of its tree, or its inline page (a small bucket kept in its
/// parent's leaf).
#[derive(Clone, Debug)]
pub(crate) enum Bucket {
    Page(u64),
    Inline(Vec<u8>),
}

/// One entry of a leaf page.
struct Entry<'p> {
    key: &'p [u8],
    value: &'p [u8],
    bucket: bool,
}

impl Db {
    /// Opens `path` and reads its current meta page; `None` when it is not a bbolt database
    /// (or neither meta page is valid).
    pub(crate) fn open(path: &Path) -> Option<Db> {
        let file = File::open(path).ok()?;
        let mut first = vec![0u8; 4096];
        let n = read_full(&file, &mut first, 0)?;
        let meta0 = parse_meta(&first[..n]);
        // Meta page 1 is one page size further: take the size from page 0, or when page 0
        // is torn, try the usual sizes.
        let sizes: Vec<u32> = match meta0 {
            Some(m) => vec![m.page_size],
            None => vec![4096, 8192, 16384, 65536],
        };
        let mut best = meta0;
        for size in sizes {
            let mut page = vec![0u8; 4096.min(size as usize)];
            let Some(n) = read_full(&file, &mut page, u64::from(size)) else {
                continue;
            };
            if let Some(m) = parse_meta(&page[..n]).filter(|m| m.page_size == size) {
                if best.as_ref().is_none_or(|b| m.txid > b.txid) {
                    best = Some(m);
                }
            }
        }
        let meta = best?;
        Some(Db {
            file,
            page_size: u64::from(meta.page_size),
            pages: meta.pages,
            root: Bucket::Page(meta.root),
        })
    }

    /// The sub-bucket `name` of `parent`.
    pub(crate) fn bucket(&self, parent: &Bucket, name: &[u8]) -> Option<Bucket> {
        let (value, bucket) = self.find(parent, name)?;
        if !bucket || value.len() < BUCKET_HEADER {
            return None;
        }
        let root = u64::from_le_bytes(value[..8].try_into().ok()?);
        if root == 0 {
            Some(Bucket::Inline(value[BUCKET_HEADER..].to_vec()))
        } else {
            Some(Bucket::Page(root))
        }
    }

    /// The sub-bucket at `path` below the root.
    pub(crate) fn bucket_at(&self, path: &[&[u8]]) -> Option<Bucket> {
        let mut bucket = self.root.clone();
        for name in path {
            bucket = self.bucket(&bucket, name)?;
        }
        Some(bucket)
    }

    /// The value of `key` in `bucket` (not a sub-bucket).
    pub(crate) fn get(&self, bucket: &Bucket, key: &[u8]) -> Option<Vec<u8>> {
        self.find(bucket, key)
            .filter(|(_, bucket)| !bucket)
            .map(|(value, _)| value)
    }

    /// The value of `key` in `bucket` and whether it is a sub-bucket.
    fn find(&self, bucket: &Bucket, key: &[u8]) -> Option<(Vec<u8>, bool)> {
        let mut id = match bucket {
            Bucket::Inline(page) => return leaf_find(page, key),
            Bucket::Page(root) => *root,
        };
        for _ in 0..MAX_DEPTH {
            let page = self.page(id)?;
            match flags(&page)? {
                LEAF => return leaf_find(&page, key),
                BRANCH => {
                    // The last child whose first key is <= key.
                    let mut next = None;
                    for i in 0..count(&page) {
                        let (first, child) = branch_element(&page, i)?;
                        if first > key && next.is_some() {
                            break;
                        }
                        next = Some(child);
                    }
                    id = next?;
                }
                _ => return None,
            }
        }
        None
    }

    /// Page `id` with its overflow pages.
    fn page(&self, id: u64) -> Option<Vec<u8>> {
        if id < 2 || id >= self.pages {
            return None;
        }
        let offset = id.checked_mul(self.page_size)?;
        let mut page = vec![0u8; self.page_size as usize];
        if read_full(&self.file, &mut page, offset)? < page.len() {
            return None;
        }
        if u64::from_le_bytes(page[..8].try_into().ok()?) != id {
            return None;
        }
        let overflow = u64::from(u32::from_le_bytes(page[12..16].try_into().ok()?));
        if overflow > 0 {
            let total = (overflow + 1).checked_mul(self.page_size)?;
            if total > MAX_PAGE_BYTES || id + overflow >= self.pages {
                return None;
            }
            let first = page.len();
            page.resize(total as usize, 0);
            if read_full(&self.file, &mut page[first..], offset + first as u64)?
                < total as usize - first
            {
                return None;
            }
        }
        Some(page)
    }
}

/// The fields of a meta page used here.
#[derive(Clone, Copy, Debug)]
struct Meta {
    page_size: u32,
    root: u64,
    pages: u64,
    txid: u64,
}

/// A meta page (header included) when its magic, version and checksum hold.
fn parse_meta(page: &[u8]) -> Option<Meta> {
    let m = page.get(PAGE_HEADER..PAGE_HEADER + 64)?;
    let u32_at = |o: usize| u32::from_le_bytes(m[o..o + 4].try_into().expect("4 bytes"));
    let u64_at = |o: usize| u64::from_le_bytes(m[o..o + 8].try_into().expect("8 bytes"));
    if u32_at(0) != MAGIC || u32_at(4) != VERSION || u64_at(56) != fnv1a64(&m[..56]) {
        return None;
    }
    let page_size = u32_at(8);
    if !PAGE_SIZES.contains(&page_size) {
        return None;
    }
    Some(Meta {
        page_size,
        root: u64_at(16),
        pages: u64_at(40),
        txid: u64_at(48),
    })
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Reads as much of `buf` as the file holds at `offset`; `None` on an I/O error.
fn read_full(file: &File, buf: &mut [u8], offset: u64) -> Option<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(done)
}

fn flags(page: &[u8]) -> Option<u16> {
    Some(u16::from_le_bytes(page.get(8..10)?.try_into().ok()?))
}

fn count(page: &[u8]) -> usize {
    page.get(10..12)
        .map_or(0, |b| usize::from(u16::from_le_bytes([b[0], b[1]])))
}

fn u32_at(page: &[u8], o: usize) -> Option<usize> {
    Some(u32::from_le_bytes(page.get(o..o + 4)?.try_into().ok()?) as usize)
}

/// Element `i` of a branch page: its first key and child page id.
fn branch_element(page: &[u8], i: usize) -> Option<(&[u8], u64)> {
    let at = PAGE_HEADER + i * ELEMENT;
    let pos = u32_at(page, at)?;
    let ksize = u32_at(page, at + 4)?;
    let child = u64::from_le_bytes(page.get(at + 8..at + 16)?.try_into().ok()?);
    let start = at.checked_add(pos)?;
    Some((page.get(start..start.checked_add(ksize)?)?, child))
}

/// Element `i` of a leaf page.
fn leaf_element(page: &[u8], i: usize) -> Option<Entry<'_>> {
    let at = PAGE_HEADER + i * ELEMENT;
    let flags = u32_at(page, at)?;
    let pos = u32_at(page, at + 4)?;
    let ksize = u32_at(page, at + 8)?;
    let vsize = u32_at(page, at + 12)?;
    let start = at.checked_add(pos)?;
    let mid = start.checked_add(ksize)?;
    Some(Entry {
        key: page.get(start..mid)?,
        value: page.get(mid..mid.checked_add(vsize)?)?,
        bucket: flags & BUCKET_FLAG as usize != 0,
    })
}

fn leaf_find(page: &[u8], key: &[u8]) -> Option<(Vec<u8>, bool)> {
    if flags(page)? != LEAF {
        return None;
    }
    (0..count(page))
        .map_while(|i| leaf_element(page, i))
        .find(|e| e.key == key)
        .map(|e| (e.value.to_vec(), e.bucket))
}

/// Test support: writes bbolt files (inline buckets, or one leaf page per bucket, or a
/// branch page over leaves) for the reader's tests and the runtime readers' tests.
#[cfg(any(test, feature = "test-support"))]
pub(crate) mod write {
    use super::*;

    /// A value or a sub-bucket.
    pub(crate) enum Node {
        Value(Vec<u8>),
        Bucket(Vec<(Vec<u8>, Node)>),
    }

    pub(crate) fn bucket(entries: Vec<(&str, Node)>) -> Node {
        Node::Bucket(
            entries
                .into_iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v))
                .collect(),
        )
    }

    pub(crate) fn value(v: impl AsRef<[u8]>) -> Node {
        Node::Value(v.as_ref().to_vec())
    }

    const PAGE: usize = 4096;

    struct Writer {
        pages: Vec<Vec<u8>>,
        /// Buckets with this many entries or more get their own page(s), the rest inline.
        own_page_at: usize,
    }

    /// A leaf element: key, flags, value.
    type Elem = (Vec<u8>, u32, Vec<u8>);

    fn leaf(entries: &[Elem]) -> Vec<u8> {
        let mut page = vec![0u8; PAGE_HEADER];
        page[8..10].copy_from_slice(&LEAF.to_le_bytes());
        page[10..12].copy_from_slice(&(entries.len() as u16).to_le_bytes());
        let mut data = Vec::new();
        let elems = PAGE_HEADER + entries.len() * ELEMENT;
        page.resize(elems, 0);
        for (i, (k, flags, v)) in entries.iter().enumerate() {
            let at = PAGE_HEADER + i * ELEMENT;
            let pos = elems + data.len() - at;
            page[at..at + 4].copy_from_slice(&flags.to_le_bytes());
            page[at + 4..at + 8].copy_from_slice(&(pos as u32).to_le_bytes());
            page[at + 8..at + 12].copy_from_slice(&(k.len() as u32).to_le_bytes());
            page[at + 12..at + 16].copy_from_slice(&(v.len() as u32).to_le_bytes());
            data.extend_from_slice(k);
            data.extend_from_slice(v);
        }
        page.extend_from_slice(&data);
        page
    }

    impl Writer {
        /// Adds a full page (with overflow pages when needed); returns its id.
        fn add(&mut self, mut content: Vec<u8>) -> u64 {
            let id = self.pages.len() as u64;
            let n = content.len().div_ceil(PAGE).max(1);
            content[..8].copy_from_slice(&id.to_le_bytes());
            content[12..16].copy_from_slice(&((n - 1) as u32).to_le_bytes());
            content.resize(n * PAGE, 0);
            for chunk in content.chunks(PAGE) {
                self.pages.push(chunk.to_vec());
            }
            id
        }

        /// The bucket value (header and inline page, or header naming its root page).
        fn bucket_value(&mut self, entries: &[(Vec<u8>, Node)], paged: bool) -> Vec<u8> {
            let mut sorted: Vec<&(Vec<u8>, Node)> = entries.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            let mut elems = Vec::new();
            for (k, node) in sorted {
                match node {
                    Node::Value(v) => elems.push((k.clone(), 0, v.clone())),
                    Node::Bucket(sub) => {
                        let v = self.bucket_value(sub, false);
                        elems.push((k.clone(), BUCKET_FLAG, v));
                    }
                }
            }
            let mut value = vec![0u8; BUCKET_HEADER];
            if !paged && elems.len() < self.own_page_at {
                value.extend_from_slice(&leaf(&elems));
            } else {
                // Two leaves under a branch page when there are two or more entries.
                let half = elems.len().div_ceil(2);
                let parts: Vec<&[Elem]> = if elems.len() >= 2 {
                    vec![&elems[..half], &elems[half..]]
                } else {
                    vec![&elems[..]]
                };
                let mut children = Vec::new();
                for part in parts {
                    let id = self.add(leaf(part));
                    children.push((part.first().map(|e| e.0.clone()).unwrap_or_default(), id));
                }
                let root = if children.len() == 1 {
                    children[0].1
                } else {
                    let mut page = vec![0u8; PAGE_HEADER];
                    page[8..10].copy_from_slice(&BRANCH.to_le_bytes());
                    page[10..12].copy_from_slice(&(children.len() as u16).to_le_bytes());
                    let elems_end = PAGE_HEADER + children.len() * ELEMENT;
                    page.resize(elems_end, 0);
                    let mut data = Vec::new();
                    for (i, (k, id)) in children.iter().enumerate() {
                        let at = PAGE_HEADER + i * ELEMENT;
                        let pos = elems_end + data.len() - at;
                        page[at..at + 4].copy_from_slice(&(pos as u32).to_le_bytes());
                        page[at + 4..at + 8].copy_from_slice(&(k.len() as u32).to_le_bytes());
                        page[at + 8..at + 16].copy_from_slice(&id.to_le_bytes());
                        data.extend_from_slice(k);
                    }
                    page.extend_from_slice(&data);
                    self.add(page)
                };
                value[..8].copy_from_slice(&root.to_le_bytes());
            }
            value
        }
    }

    fn meta(root: u64, pages: u64, txid: u64, id: u64) -> Vec<u8> {
        let mut page = vec![0u8; PAGE];
        page[..8].copy_from_slice(&id.to_le_bytes());
        page[8..10].copy_from_slice(&0x04u16.to_le_bytes());
        let m = &mut page[PAGE_HEADER..PAGE_HEADER + 64];
        m[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        m[4..8].copy_from_slice(&VERSION.to_le_bytes());
        m[8..12].copy_from_slice(&(PAGE as u32).to_le_bytes());
        m[16..24].copy_from_slice(&root.to_le_bytes());
        m[40..48].copy_from_slice(&pages.to_le_bytes());
        m[48..56].copy_from_slice(&txid.to_le_bytes());
        let sum = fnv1a64(&m[..56]);
        m[56..64].copy_from_slice(&sum.to_le_bytes());
        page
    }

    /// The bytes of a database whose root bucket is `root`; buckets of `own_page_at` entries
    /// or more get their own pages.
    pub(crate) fn db(root: &Node, own_page_at: usize) -> Vec<u8> {
        let Node::Bucket(entries) = root else {
            panic!("the root is a bucket");
        };
        let mut w = Writer {
            pages: vec![vec![0u8; PAGE], vec![0u8; PAGE]],
            own_page_at,
        };
        // The root bucket always has its own page(s).
        let header = w.bucket_value(entries, true);
        let root_id = u64::from_le_bytes(header[..8].try_into().unwrap());
        let pages = w.pages.len() as u64;
        w.pages[0] = meta(root_id, pages, 1, 0);
        w.pages[1] = meta(root_id, pages, 2, 1);
        w.pages.concat()
    }
}

#[cfg(test)]
mod tests {
    use super::write::{bucket, db, value};
    use super::*;

    fn sample() -> write::Node {
        bucket(vec![
            (
                "v1",
                bucket(vec![(
                    "k8s.io",
                    bucket(vec![(
                        "containers",
                        bucket(vec![
                            (
                                "abc",
                                bucket(vec![
                                    ("image", value("img:1")),
                                    (
                                        "labels",
                                        bucket(vec![("app", value("web")), ("tier", value(""))]),
                                    ),
                                ]),
                            ),
                            ("def", bucket(vec![("image", value("img:2"))])),
                        ]),
                    )]),
                )]),
            ),
            ("big", value(vec![b'x'; 9000])),
        ])
    }

    fn open(bytes: &[u8]) -> (Db, tempdir::Dir) {
        let dir = tempdir::Dir::new();
        let path = dir.0.join("meta.db");
        std::fs::write(&path, bytes).unwrap();
        (Db::open(&path).expect("a bolt database"), dir)
    }

    /// A scratch directory removed on drop (no dev-dependency for it).
    mod tempdir {
        pub(crate) struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub(crate) fn new() -> Dir {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let p = std::env::temp_dir().join(format!(
                    "vigil-bolt-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn reads_values_and_buckets_inline_paged_and_branched() {
        // 100: everything inline but the root; 1: every bucket on pages (with branches).
        for own_page_at in [100, 1] {
            let (db, _dir) = open(&db(&sample(), own_page_at));
            let c = db
                .bucket_at(&[b"v1", b"k8s.io", b"containers", b"abc"])
                .expect("container bucket");
            assert_eq!(db.get(&c, b"image").as_deref(), Some(&b"img:1"[..]));
            assert_eq!(db.get(&c, b"labels"), None, "a bucket is not a value");
            let labels = db.bucket(&c, b"labels").expect("labels");
            assert_eq!(db.get(&labels, b"app").as_deref(), Some(&b"web"[..]));
            assert_eq!(db.get(&labels, b"tier").as_deref(), Some(&b""[..]));
            assert_eq!(db.get(&labels, b"zzz"), None);
            let d = db
                .bucket_at(&[b"v1", b"k8s.io", b"containers", b"def"])
                .expect("second container");
            assert_eq!(db.get(&d, b"image").as_deref(), Some(&b"img:2"[..]));
            assert!(db.bucket_at(&[b"v1", b"default"]).is_none());
            // A value spanning overflow pages.
            let root = db.bucket_at(&[]).expect("the root");
            assert_eq!(db.get(&root, b"big").map(|v| v.len()), Some(9000));
        }
    }

    #[test]
    fn garbage_and_torn_files_read_as_nothing() {
        let dir = tempdir::Dir::new();
        let path = dir.0.join("x.db");
        std::fs::write(&path, b"not a database").unwrap();
        assert!(Db::open(&path).is_none());
        assert!(Db::open(&dir.0.join("missing.db")).is_none());
        // One meta page corrupt: the other one is used.
        let mut bytes = db(&sample(), 1);
        bytes[4096 + 40] ^= 0xff;
        let (d, _dir) = open(&bytes);
        assert!(d.bucket_at(&[b"v1", b"k8s.io"]).is_some());
        // Every data page overwritten with noise: lookups miss, nothing panics.
        let mut bytes = db(&sample(), 1);
        let mut x: u32 = 0x1234_5678;
        for b in bytes[8192..].iter_mut() {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *b = x as u8;
        }
        let (d, _dir) = open(&bytes);
        assert!(d
            .bucket_at(&[b"v1", b"k8s.io", b"containers", b"abc"])
            .is_none());
        let root = d.bucket_at(&[]).expect("the root");
        assert_eq!(d.get(&root, b"big"), None);
        // Truncated after the meta pages.
        let (d, _dir) = open(&db(&sample(), 1)[..8192]);
        assert!(d.bucket_at(&[b"v1"]).is_none());
    }
}
