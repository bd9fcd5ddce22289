//! libbpf's messages during a load: kept, not printed; a refused load becomes one line and a
//! 0600 file with the whole log.

use std::path::PathBuf;

use super::time::boot_now;

/// libbpf's messages while the object loads (the verifier's log among them): kept, not
/// printed, so that a refused load is one line on the terminal and the log goes to a file.
static LOAD_LOG: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());
/// Most of libbpf's messages kept per load.
const LOAD_LOG_LIMIT: usize = 8 << 20;

fn keep_libbpf_message(_level: libbpf_rs::PrintLevel, message: String) {
    let mut log = LOAD_LOG.lock().unwrap_or_else(|e| e.into_inner());
    if log.len() + message.len() <= LOAD_LOG_LIMIT {
        log.push_str(&message);
    }
}

/// Runs `load` with libbpf's messages kept in [`LOAD_LOG`]; returns them with the result.
pub(super) fn with_load_log<T>(load: impl FnOnce() -> T) -> (T, String) {
    LOAD_LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let prev = libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, keep_libbpf_message)));
    let result = load();
    libbpf_rs::set_print(prev);
    let log = std::mem::take(&mut *LOAD_LOG.lock().unwrap_or_else(|e| e.into_inner()));
    (result, log)
}

/// Why libbpf's log says a load failed, in one line: the refused program and the verifier's
/// last words (the line before its summary).
pub(super) fn load_failure_reason(log: &str) -> Option<String> {
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let begin = lines
        .iter()
        .position(|l| l.contains("-- BEGIN PROG LOAD LOG --"))?;
    let program = lines[begin].split('\'').nth(1).unwrap_or("?").to_owned();
    let end = lines[begin..]
        .iter()
        .position(|l| l.contains("-- END PROG LOAD LOG --"))
        .map_or(lines.len(), |p| begin + p);
    let last = lines[begin + 1..end].iter().rev().find(|l| {
        !l.starts_with("processed ")
            && !l.starts_with("verification time")
            && !l.starts_with("stack depth")
    })?;
    Some(format!(
        "the kernel refused program `{program}`: {}",
        last.trim_start_matches("libbpf: ")
    ))
}

/// Writes libbpf's log of a failed load (`vigil watch` names the file in its error) to a new file only this user can read; its path.
pub(super) fn save_load_log(log: &str) -> Option<PathBuf> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = std::env::temp_dir().join(format!(
        "vigil-bpf-load-{}-{}.log",
        std::process::id(),
        boot_now()
    ));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .ok()?;
    file.write_all(log.as_bytes()).ok()?;
    Some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_failure_reason_is_the_verifiers_last_words() {
        let log = "libbpf: prog 'vigil_exec': BPF program load failed: Invalid argument\n\
                   libbpf: prog 'vigil_exec': -- BEGIN PROG LOAD LOG --\n\
                   0: R1=ctx() R10=fp0\n\
                   412: <invalid CO-RE relocation>\n\
                   failed to resolve CO-RE relocation <byte_off> [12] struct kernfs_node.__parent (0:6 @ offset 16)\n\
                   processed 1022 insns (limit 1000000) max_states_per_insn 4\n\
                   -- END PROG LOAD LOG --\n\
                   libbpf: prog 'vigil_exec': failed to load: -22\n";
        assert_eq!(
            load_failure_reason(log).as_deref(),
            Some(
                "the kernel refused program `vigil_exec`: failed to resolve CO-RE relocation \
                 <byte_off> [12] struct kernfs_node.__parent (0:6 @ offset 16)"
            )
        );
        assert_eq!(
            load_failure_reason("libbpf: map 'stashes': failed to create\n"),
            None
        );
    }
}
