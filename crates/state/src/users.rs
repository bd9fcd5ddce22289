//! User and group databases (`user.*`, `group.*` fields, uid rendering in `evt.arg.uid`).
//!
//! [`UserDb`] is the role; [`FileUserDb`] reads `/etc/passwd` + `/etc/group` (or any files of
//! that shape) once, and [`MemUserDb`] holds a list handed to it (a capture's snapshot, tests).
//! Parsing is forgiving: a malformed line is skipped and counted, never an error.

use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;
use vigil_event::{GroupInfo, UserInfo};

/// Looks up users and groups by id.
pub trait UserDb: Send + Sync {
    fn user(&self, uid: u32) -> Option<&UserInfo>;
    fn group(&self, gid: u32) -> Option<&GroupInfo>;
}

/// Why a user database could not be read.
#[derive(Debug, thiserror::Error)]
pub enum UserDbError {
    #[error("failed to read user database `{path}`")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// An in-memory database (first entry wins on duplicate ids, as `getpwuid` does).
#[derive(Clone, Debug, Default)]
pub struct MemUserDb {
    users: FxHashMap<u32, UserInfo>,
    groups: FxHashMap<u32, GroupInfo>,
}

impl MemUserDb {
    pub fn new(
        users: impl IntoIterator<Item = UserInfo>,
        groups: impl IntoIterator<Item = GroupInfo>,
    ) -> Self {
        let mut db = MemUserDb::default();
        for u in users {
            db.users.entry(u.uid).or_insert(u);
        }
        for g in groups {
            db.groups.entry(g.gid).or_insert(g);
        }
        db
    }

    pub fn n_users(&self) -> usize {
        self.users.len()
    }

    pub fn n_groups(&self) -> usize {
        self.groups.len()
    }
}

impl UserDb for MemUserDb {
    fn user(&self, uid: u32) -> Option<&UserInfo> {
        self.users.get(&uid)
    }

    fn group(&self, gid: u32) -> Option<&GroupInfo> {
        self.groups.get(&gid)
    }
}

/// A database read from passwd/group files.
#[derive(Clone, Debug, Default)]
pub struct FileUserDb {
    db: MemUserDb,
    /// Lines that were neither blank, comments, nor well-formed entries.
    pub malformed_lines: usize,
}

impl FileUserDb {
    /// Reads the system's `/etc/passwd` and `/etc/group`.
    pub fn system() -> Result<Self, UserDbError> {
        Self::load(Path::new("/etc/passwd"), Path::new("/etc/group"))
    }

    /// Reads the two files. A missing or unreadable file is an error; malformed lines are not.
    pub fn load(passwd: &Path, group: &Path) -> Result<Self, UserDbError> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|source| UserDbError::Read {
                path: path.to_path_buf(),
                source,
            })
        };
        Ok(Self::parse(&read(passwd)?, &read(group)?))
    }

    /// Parses passwd (`name:pw:uid:gid:gecos:home:shell`) and group (`name:pw:gid:members`)
    /// contents.
    pub fn parse(passwd: &[u8], group: &[u8]) -> Self {
        let mut malformed = 0;
        let mut users = Vec::new();
        for line in passwd.split(|&b| b == b'\n') {
            let line = trim_cr(line);
            if line.is_empty() || line[0] == b'#' {
                continue;
            }
            let f: Vec<&[u8]> = line.split(|&b| b == b':').collect();
            let parsed = (f.len() == 7)
                .then(|| Some((parse_id(f[2])?, parse_id(f[3])?)))
                .flatten()
                .filter(|_| !f[0].is_empty());
            match parsed {
                Some((uid, gid)) => users.push(UserInfo {
                    uid,
                    gid,
                    name: f[0].to_vec(),
                    home: f[5].to_vec(),
                    shell: f[6].to_vec(),
                }),
                None => malformed += 1,
            }
        }
        let mut groups = Vec::new();
        for line in group.split(|&b| b == b'\n') {
            let line = trim_cr(line);
            if line.is_empty() || line[0] == b'#' {
                continue;
            }
            let f: Vec<&[u8]> = line.split(|&b| b == b':').collect();
            match (f.len() == 4 && !f[0].is_empty())
                .then(|| parse_id(f[2]))
                .flatten()
            {
                Some(gid) => groups.push(GroupInfo {
                    gid,
                    name: f[0].to_vec(),
                }),
                None => malformed += 1,
            }
        }
        FileUserDb {
            db: MemUserDb::new(users, groups),
            malformed_lines: malformed,
        }
    }

    pub fn n_users(&self) -> usize {
        self.db.n_users()
    }

    pub fn n_groups(&self) -> usize {
        self.db.n_groups()
    }
}

impl UserDb for FileUserDb {
    fn user(&self, uid: u32) -> Option<&UserInfo> {
        self.db.user(uid)
    }

    fn group(&self, gid: u32) -> Option<&GroupInfo> {
        self.db.group(gid)
    }
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn parse_id(text: &[u8]) -> Option<u32> {
    if text.is_empty() || text.len() > 10 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_passwd_and_group_skipping_malformed_lines() {
        let passwd = b"root:x:0:0:root:/root:/bin/bash\r\n\
            # comment\n\
            \n\
            daemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n\
            broken line without colons\n\
            bad:x:notanumber:1::/:/bin/sh\n\
            toolong:x:1:1:::/:/bin/sh:extra\n\
            dup:x:0:0::/dup:/bin/sh\n\
            \xff\xfe:x:7:7::/:/bin/sh\n";
        let group = b"root:x:0:\nwheel:x:10:alice,bob\nnogid:x::\n";
        let db = FileUserDb::parse(passwd, group);
        assert_eq!(db.malformed_lines, 4, "broken, bad uid, toolong, nogid");
        assert_eq!(
            db.user(0).unwrap().name,
            b"root",
            "first entry wins over dup"
        );
        assert_eq!(db.user(0).unwrap().shell, b"/bin/bash", "CRLF trimmed");
        assert_eq!(db.user(1).unwrap().home, b"/usr/sbin");
        assert_eq!(
            db.user(7).unwrap().name,
            b"\xff\xfe",
            "non-UTF-8 names are kept as bytes"
        );
        assert_eq!(db.group(10).unwrap().name, b"wheel");
        assert!(db.user(4242).is_none());
        assert_eq!(db.n_users(), 3);
        assert_eq!(db.n_groups(), 2);
    }

    #[test]
    fn load_reports_missing_file_by_path() {
        let err = FileUserDb::load(
            Path::new("/nonexistent/passwd"),
            Path::new("/nonexistent/group"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/passwd"), "{err}");
    }

    #[test]
    fn huge_ids_are_rejected_not_wrapped() {
        let db = FileUserDb::parse(b"big:x:99999999999:0::/:/bin/sh\n", b"");
        assert_eq!(db.malformed_lines, 1);
    }
}
