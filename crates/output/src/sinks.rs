//! The outputs themselves: stdout, file, syslog, program and (in [`crate::http`]) HTTP.
//! Each delivers one formatted [`Record`] at a time; queueing and retries are
//! [`crate::delivery`]'s job.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;

/// One formatted alert on its way to an output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Syslog severity (0 emergency … 7 debug) of the alert's priority.
    pub severity: u8,
    /// The formatted alert, without a trailing newline.
    pub body: Arc<str>,
}

/// Why a delivery attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// Worth retrying (endpoint down, socket missing, program exited).
    #[error("output unavailable: {0}")]
    Unavailable(String),
    /// The attempt took longer than the output's timeout (the endpoint accepted the
    /// connection but did not answer in time, or did not accept it in time). Retried at once
    /// while the output's consecutive-timeout budget allows; see
    /// [`crate::DeliveryOptions::max_consecutive_timeouts`].
    #[error("output timed out: {0}")]
    Timeout(String),
    /// Retrying the same record will not help (configuration problem); still retried, since
    /// the fix may be applied while the agent runs.
    #[error("output misconfigured: {0}")]
    Fatal(String),
    /// The output is gone for good (standard output closed): drop without retrying.
    #[error("output closed")]
    Closed,
    /// The endpoint refused the request for a reason retrying alone will not fix
    /// (authentication or authorization, TLS, a missing topic). Retried with backoff all the
    /// same (the fix may come while the agent runs), logged once per outage; `cause` labels
    /// `vigil_output_errors_total` (`auth`, `tls`, `unknown_topic`, …).
    #[error("{message}")]
    Refused {
        cause: &'static str,
        message: String,
    },
    /// The receiver refused these records for good (malformed, too large): retrying cannot
    /// help, so they are dropped with reason `rejected` and counted.
    #[error("records rejected: {0}")]
    Rejected(String),
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
}

impl SinkError {
    /// The `cause` label of `vigil_output_errors_total`.
    pub fn cause(&self) -> &'static str {
        match self {
            SinkError::Unavailable(_) => "unavailable",
            SinkError::Timeout(_) => "timeout",
            SinkError::Fatal(_) => "misconfigured",
            SinkError::Closed => "closed",
            SinkError::Refused { cause, .. } => cause,
            SinkError::Rejected(_) => "rejected",
            SinkError::Io(_) => "io",
        }
    }
}

/// Every `cause` a sink error can carry (each has a series from the first scrape).
pub const ERROR_CAUSES: &[&str] = &[
    "unavailable",
    "timeout",
    "misconfigured",
    "auth",
    "tls",
    "unknown_topic",
    "rejected",
    "io",
];

/// How many records one delivery attempt may carry, and how long the worker waits for a
/// batch to fill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batching {
    /// At most this many records per attempt (1: one at a time).
    pub max_records: usize,
    /// After the first record of a batch is ready, wait up to this long for more (records
    /// are already in the spool meanwhile; zero: send what is there).
    pub delay: std::time::Duration,
}

impl Default for Batching {
    fn default() -> Self {
        Batching {
            max_records: 1,
            delay: std::time::Duration::ZERO,
        }
    }
}

/// One output.
pub trait Sink: Send {
    /// The `sink` label: `stdout`, `file`, `syslog`, `program`, `http`.
    fn name(&self) -> &str;
    /// Delivers one record; `Ok` means the output has it (written, sent, acknowledged).
    fn send(&mut self, record: &Record) -> Result<(), SinkError>;
    /// Delivers `records` in order as one unit: `Ok(n)` means the output has them all, of
    /// which the receiver refused `n` for good (counted as dropped, reason `rejected`); an
    /// error means none counts as delivered and the same records are tried again. The
    /// default sends them one by one (outputs that batch override it).
    fn send_batch(&mut self, records: &[Record]) -> Result<u64, SinkError> {
        for record in records {
            self.send(record)?;
        }
        Ok(0)
    }
    /// How many records one attempt may carry ([`Sink::send_batch`]).
    fn batching(&self) -> Batching {
        Batching::default()
    }
    /// Pushes out buffered data (called when the queue runs empty and at exit).
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    /// Reopens files and connections (log rotation, SIGUSR1).
    fn reopen(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

/// Writes records as lines to any writer (standard output in the agent).
pub struct WriterSink<W: Write + Send> {
    name: &'static str,
    out: W,
    buffered: bool,
}

impl<W: Write + Send> WriterSink<W> {
    /// `buffered` (Falco's `buffered_outputs`): flush only when the queue runs empty.
    pub fn new(name: &'static str, out: W, buffered: bool) -> Self {
        WriterSink {
            name,
            out,
            buffered,
        }
    }
}

/// Falco's `stdout_output`.
pub fn stdout_sink(buffered: bool) -> WriterSink<BufWriter<io::Stdout>> {
    WriterSink::new("stdout", BufWriter::new(io::stdout()), buffered)
}

/// Where the console output (`stdout_output`) writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Console {
    /// Standard output, as Falco.
    #[default]
    Stdout,
    /// Standard error (a wrapped workload owns standard output), written synchronously by
    /// the thread that emits the alert ([`crate::Outputs`]).
    Stderr,
}

impl<W: Write + Send> Sink for WriterSink<W> {
    fn name(&self) -> &str {
        self.name
    }
    fn send(&mut self, record: &Record) -> Result<(), SinkError> {
        let result = self
            .out
            .write_all(record.body.as_bytes())
            .and_then(|()| self.out.write_all(b"\n"))
            .and_then(|()| {
                if self.buffered {
                    Ok(())
                } else {
                    self.out.flush()
                }
            });
        match result {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(SinkError::Closed),
            other => Ok(other?),
        }
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        match self.out.flush() {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(SinkError::Closed),
            other => Ok(other?),
        }
    }
}

/// Falco's `file_output`: appends lines to `filename`, keeping it open with `keep_alive`
/// (reopened on [`Sink::reopen`] so rotated logs are followed), else opening it per alert.
pub struct FileSink {
    path: PathBuf,
    keep_alive: bool,
    buffered: bool,
    file: Option<BufWriter<File>>,
}

impl FileSink {
    pub fn new(path: &Path, keep_alive: bool, buffered: bool) -> FileSink {
        FileSink {
            path: path.to_owned(),
            keep_alive,
            buffered,
            file: None,
        }
    }

    fn open(&self) -> io::Result<BufWriter<File>> {
        crate::files::append(&self.path).map(BufWriter::new)
    }
}

impl Sink for FileSink {
    fn name(&self) -> &str {
        "file"
    }
    fn send(&mut self, record: &Record) -> Result<(), SinkError> {
        let mut file = match self.file.take() {
            Some(f) => f,
            None => self.open().map_err(|e| {
                SinkError::Unavailable(format!("cannot open `{}`: {e}", self.path.display()))
            })?,
        };
        file.write_all(record.body.as_bytes())?;
        file.write_all(b"\n")?;
        if !self.buffered || !self.keep_alive {
            file.flush()?;
        }
        if self.keep_alive {
            self.file = Some(file);
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        if let Some(f) = self.file.as_mut() {
            f.flush()?;
        }
        Ok(())
    }
    fn reopen(&mut self) -> Result<(), SinkError> {
        if let Some(mut f) = self.file.take() {
            f.flush()?;
        }
        Ok(())
    }
}

/// Falco's `syslog_output`: `syslog(3)`-format messages over the local datagram socket,
/// facility `user`, severity from the alert's priority (the daemon adds the host name, as it
/// does for Falco's). The message is one formatted record: one line, its values escaped.
pub struct SyslogSink {
    path: PathBuf,
    socket: Option<UnixDatagram>,
    pid: u32,
}

impl SyslogSink {
    pub fn new(path: &Path) -> SyslogSink {
        SyslogSink {
            path: path.to_owned(),
            socket: None,
            pid: std::process::id(),
        }
    }

    /// The message for `record` at `now_ns` (nanoseconds since the epoch) in the local
    /// socket's format that `syslog(3)` writes and daemons parse by default (rsyslog's
    /// imuxsock, syslog-ng, journald): `<PRI>Mmm dd hh:mm:ss vigil[PID]: MSG`, the time in
    /// UTC. (An RFC 5424 header on the local socket is read as an old-style header by a
    /// stock rsyslog, which then names the program `1`.) Facility 1, user-level messages.
    pub fn message(&self, record: &Record, now_ns: u64) -> String {
        let pri = 8 + u32::from(record.severity.min(7));
        format!(
            "<{pri}>{} vigil[{}]: {}",
            bsd_timestamp(now_ns),
            self.pid,
            record.body
        )
    }
}

/// `Mmm dd hh:mm:ss` (RFC 3164), UTC; the day padded with a space.
fn bsd_timestamp(now_ns: u64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    // `YYYY-MM-DDThh:mm:ss.nnnnnnnnnZ`
    let iso = crate::time::rfc3339(now_ns);
    let month = iso
        .get(5..7)
        .and_then(|m| m.parse::<usize>().ok())
        .and_then(|m| MONTHS.get(m.wrapping_sub(1)))
        .copied()
        .unwrap_or("Jan");
    let day = iso
        .get(8..10)
        .and_then(|d| d.parse::<u32>().ok())
        .unwrap_or(1);
    let time = iso.get(11..19).unwrap_or("00:00:00");
    format!("{month} {day:>2} {time}")
}

impl Sink for SyslogSink {
    fn name(&self) -> &str {
        "syslog"
    }
    fn send(&mut self, record: &Record) -> Result<(), SinkError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let message = self.message(record, now);
        if self.socket.is_none() {
            let socket = UnixDatagram::unbound()?;
            socket.connect(&self.path).map_err(|e| {
                SinkError::Unavailable(format!("cannot connect to `{}`: {e}", self.path.display()))
            })?;
            self.socket = Some(socket);
        }
        let socket = self.socket.as_ref().expect("connected above");
        match socket.send(message.as_bytes()) {
            Ok(_) => Ok(()),
            Err(e) => {
                // The daemon may have restarted: reconnect on the next attempt.
                self.socket = None;
                Err(SinkError::Unavailable(format!("syslog send failed: {e}")))
            }
        }
    }
    fn reopen(&mut self) -> Result<(), SinkError> {
        self.socket = None;
        Ok(())
    }
}

/// Falco's `program_output`: `sh -c PROGRAM` with one alert per line on its standard input.
/// With `keep_alive` one process receives every alert (restarted if it exits); without, a
/// process runs per alert and must exit successfully.
pub struct ProgramSink {
    program: String,
    keep_alive: bool,
    child: Option<(Child, ChildStdin)>,
}

impl ProgramSink {
    pub fn new(program: &str, keep_alive: bool) -> ProgramSink {
        ProgramSink {
            program: program.to_owned(),
            keep_alive,
            child: None,
        }
    }

    fn spawn(&self) -> Result<(Child, ChildStdin), SinkError> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&self.program)
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|e| SinkError::Unavailable(format!("cannot start `{}`: {e}", self.program)))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| SinkError::Unavailable("program has no stdin".into()))?;
        Ok((child, stdin))
    }

    fn close(&mut self) -> Result<(), SinkError> {
        if let Some((mut child, stdin)) = self.child.take() {
            drop(stdin);
            let status = child.wait()?;
            if !status.success() {
                return Err(SinkError::Unavailable(format!(
                    "`{}` exited with {status}",
                    self.program
                )));
            }
        }
        Ok(())
    }
}

impl Sink for ProgramSink {
    fn name(&self) -> &str {
        "program"
    }
    fn send(&mut self, record: &Record) -> Result<(), SinkError> {
        if let Some((child, _)) = self.child.as_mut() {
            // A kept-alive program that exited is restarted.
            if child.try_wait()?.is_some() {
                let _ = self.close();
            }
        }
        if self.child.is_none() {
            self.child = Some(self.spawn()?);
        }
        let (_, stdin) = self.child.as_mut().expect("spawned above");
        let written = stdin
            .write_all(record.body.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"))
            .and_then(|()| stdin.flush());
        if let Err(e) = written {
            let _ = self.close();
            return Err(SinkError::Unavailable(format!(
                "cannot write to `{}`: {e}",
                self.program
            )));
        }
        if !self.keep_alive {
            self.close()?;
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        if let Some((_, stdin)) = self.child.as_mut() {
            stdin.flush()?;
        }
        Ok(())
    }
    fn reopen(&mut self) -> Result<(), SinkError> {
        self.close()
    }
}

impl Drop for ProgramSink {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(s: &str) -> Record {
        Record {
            severity: 4,
            body: s.into(),
        }
    }

    #[test]
    fn file_sink_appends_and_follows_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.txt");
        let mut sink = FileSink::new(&path, true, false);
        sink.send(&rec("one")).unwrap();
        std::fs::rename(&path, dir.path().join("events.txt.1")).unwrap();
        sink.send(&rec("two")).unwrap();
        sink.reopen().unwrap();
        sink.send(&rec("three")).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("events.txt.1")).unwrap(),
            "one\ntwo\n"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three\n");
        // Without keep_alive the file is reopened per alert.
        let mut sink = FileSink::new(&path, false, false);
        std::fs::remove_file(&path).unwrap();
        sink.send(&rec("four")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "four\n");
    }

    #[test]
    fn syslog_sink_sends_rfc5424() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.sock");
        let mut sink = SyslogSink::new(&path);
        assert!(matches!(
            sink.send(&rec("x")),
            Err(SinkError::Unavailable(_))
        ));
        let server = UnixDatagram::bind(&path).unwrap();
        sink.send(&rec("Sensitive file opened")).unwrap();
        let mut buf = [0u8; 1024];
        let n = server.recv(&mut buf).unwrap();
        let msg = std::str::from_utf8(&buf[..n]).unwrap();
        // <PRI>Mmm dd hh:mm:ss TAG[PID]: MSG; user.warning = 12.
        let pid = std::process::id();
        assert!(msg.starts_with("<12>"), "{msg}");
        assert!(
            msg.ends_with(&format!(" vigil[{pid}]: Sensitive file opened")),
            "{msg}"
        );
        assert_eq!(
            sink.message(&rec("m"), 1_700_000_000_000_001_000),
            format!("<12>Nov 14 22:13:20 vigil[{pid}]: m")
        );
        assert_eq!(bsd_timestamp(1_699_142_400_000_000_000), "Nov  5 00:00:00");
    }

    #[test]
    fn program_sink_pipes_lines() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.txt");
        let cmd = format!("cat >> {}", out.display());
        let mut sink = ProgramSink::new(&cmd, true);
        sink.send(&rec("a")).unwrap();
        sink.send(&rec("b")).unwrap();
        sink.reopen().unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "a\nb\n");
        let mut sink = ProgramSink::new(&cmd, false);
        sink.send(&rec("c")).unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "a\nb\nc\n");
        let mut failing = ProgramSink::new("exit 3", false);
        assert!(failing.send(&rec("d")).is_err());
    }

    #[test]
    fn writer_sink_lines() {
        let mut sink = WriterSink::new("stdout", Vec::new(), false);
        sink.send(&rec("x")).unwrap();
        sink.send(&rec("y")).unwrap();
        assert_eq!(sink.out, b"x\ny\n");
    }
}
