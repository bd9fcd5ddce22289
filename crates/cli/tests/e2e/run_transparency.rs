//! Transparency of `vigil run`: real programs behave the same with and without Vigil —
//! identical exit status (code or killing signal) and stdout — and Vigil's documented
//! differences (ptrace by the workload, tracer death) behave as documented.
//!
//! Requirements: ptrace of a child; `gcc`/`make` for the C tests, `python3`, `go` for the Go
//! test. Missing tools skip with a reason (fail under `VIGIL_TEST_STRICT=1`, except `go`,
//! which is optional by design).

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Output, Stdio};

use crate::support::{can_trace, host, scratch, skip, text, vigil_cmd};

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// How a process ended: `(exit code, killing signal)`.
fn ending(status: ExitStatus) -> (Option<i32>, Option<i32>) {
    (status.code(), status.signal())
}

fn native(argv: &[&str], dir: &Path) -> Output {
    Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run natively")
}

fn traced(argv: &[&str], dir: &Path) -> Output {
    vigil_cmd()
        .arg("run")
        .arg("--")
        .args(argv)
        .current_dir(dir)
        .output()
        .expect("run under vigil")
}

/// Runs `argv` natively and under `vigil run` (in `dir`) and asserts the same ending and
/// stdout (`sort`: compare sorted lines, for parallel programs).
fn same(test: &str, argv: &[&str], dir: &Path, sort: bool) -> Output {
    let a = native(argv, dir);
    let b = traced(argv, dir);
    assert_eq!(
        ending(a.status),
        ending(b.status),
        "{test}: exit status differs; vigil stderr: {}",
        text(&b.stderr)
    );
    let lines = |o: &Output| {
        let mut l: Vec<String> = text(&o.stdout).lines().map(str::to_string).collect();
        if sort {
            l.sort();
        }
        l
    };
    assert_eq!(
        lines(&a),
        lines(&b),
        "{test}: stdout differs; vigil stderr: {}",
        text(&b.stderr)
    );
    b
}

#[test]
fn exit_codes_and_death_by_signal() {
    let _host = host::shared();
    if !can_trace("exit_codes") {
        return;
    }
    let dir = scratch("exit_codes");
    for (script, expect) in [
        ("echo out; exit 0", (Some(0), None)),
        ("echo out; exit 42", (Some(42), None)),
        ("exit 255", (Some(255), None)),
        ("kill -TERM $$", (None, Some(15))),
        ("kill -KILL $$", (None, Some(9))),
        ("kill -SEGV $$", (None, Some(11))),
        ("kill -USR1 $$", (None, Some(10))),
    ] {
        let out = same(script, &["sh", "-c", script], &dir, false);
        assert_eq!(ending(out.status), expect, "{script}");
    }
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn multithreaded_programs() {
    let _host = host::shared();
    if !can_trace("threads") {
        return;
    }
    let dir = scratch("threads");
    let py = "import threading\n\
        out = [None] * 16\n\
        def work(i):\n    out[i] = len(open('/etc/hostname').read()) * 0 + i * i\n\
        ts = [threading.Thread(target=work, args=(i,)) for i in range(16)]\n\
        [t.start() for t in ts]\n[t.join() for t in ts]\nprint(out)\nraise SystemExit(3)\n";
    same("python threads", &["python3", "-c", py], &dir, false);
    // Exec from a non-main thread: the thread takes over the process id.
    let py_exec = "import threading, os\n\
        def f(): os.execv('/bin/sh', ['sh', '-c', 'echo from-thread; exit 9'])\n\
        t = threading.Thread(target=f); t.start(); t.join()\n";
    let out = same("exec from thread", &["python3", "-c", py_exec], &dir, false);
    assert_eq!(text(&out.stdout), "from-thread\n");

    if !have("gcc") {
        skip("threads (C)", "gcc not found");
        return;
    }
    let src = dir.join("threads.c");
    fs::write(
        &src,
        "#include <pthread.h>\n#include <stdio.h>\n#include <fcntl.h>\n#include <unistd.h>\n\
         static long sums[8];\n\
         static void *run(void *arg) { long i = (long)arg; for (int k = 0; k < 200; k++) {\n\
           int fd = open(\"/etc/hostname\", O_RDONLY); if (fd >= 0) close(fd); sums[i] += k; }\n\
           return 0; }\n\
         int main(void) { pthread_t t[8]; for (long i = 0; i < 8; i++) pthread_create(&t[i], 0, run, (void *)i);\n\
           long total = 0; for (int i = 0; i < 8; i++) { pthread_join(t[i], 0); total += sums[i]; }\n\
           printf(\"total=%ld\\n\", total); return 7; }\n",
    )
    .unwrap();
    let built = Command::new("gcc")
        .args(["-O1", "-pthread", "-o", "threads", "threads.c"])
        .current_dir(&dir)
        .status()
        .unwrap();
    assert!(built.success(), "gcc failed");
    let out = same("C threads", &["./threads"], &dir, false);
    assert_eq!(text(&out.stdout), "total=159200\n");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn shell_pipeline_with_job_control() {
    let _host = host::shared();
    if !can_trace("job_control") {
        return;
    }
    let dir = scratch("job_control");
    let out = same(
        "job control",
        &["bash", "-c", "set -m; sleep 0.1 & fg; echo a | tr a b"],
        &dir,
        false,
    );
    assert!(text(&out.stdout).ends_with("b\n"));
    // A stopped and continued job: group-stops are passed through (PTRACE_LISTEN), so the
    // job runs to its end (a job left stopped ends the loop after 5 s, and `wait` then says
    // 147). The loop waits for the end itself: `wait` right after `kill -CONT` returns
    // 147 instead of 0 when bash has seen the stop but not yet the continuation, natively
    // too, under load.
    same(
        "stop and continue",
        &[
            "bash",
            "-c",
            "set -m; sleep 0.3 & pid=$!; kill -STOP $pid; kill -CONT $pid; \
             i=0; while kill -0 $pid 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); \
             done; wait $pid; echo done=$?",
        ],
        &dir,
        false,
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn make_j2_of_a_small_c_project() {
    let _host = host::shared();
    if !can_trace("make") {
        return;
    }
    if !have("make") || !have("cc") {
        skip("make", "make or cc not found");
        return;
    }
    let mut outputs = Vec::new();
    for mode in ["native", "vigil"] {
        // The same directory for both runs: make prints it when run under another make
        // (`make test` exports MAKEFLAGS/MAKELEVEL), and the outputs are compared.
        let dir = scratch("make");
        for i in 0..4 {
            fs::write(
                dir.join(format!("f{i}.c")),
                format!("int f{i}(void) {{ return {i}; }}\n"),
            )
            .unwrap();
        }
        fs::write(
            dir.join("main.c"),
            "#include <stdio.h>\nint f0(void); int f1(void); int f2(void); int f3(void);\n\
             int main(void) { printf(\"sum=%d\\n\", f0() + f1() + f2() + f3()); return 0; }\n",
        )
        .unwrap();
        fs::write(
            dir.join("Makefile"),
            "OBJS = main.o f0.o f1.o f2.o f3.o\nprog: $(OBJS)\n\tcc -o $@ $(OBJS)\n\
             %.o: %.c\n\tcc -c -o $@ $<\nrun: prog\n\t./prog\n",
        )
        .unwrap();
        let out = if mode == "native" {
            native(&["make", "-j2", "run"], &dir)
        } else {
            traced(&["make", "-j2", "run"], &dir)
        };
        assert!(out.status.success(), "{mode}: {}", text(&out.stderr));
        let mut lines: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
        lines.sort();
        outputs.push(lines);
        let _ = fs::remove_dir_all(&dir);
    }
    assert_eq!(outputs[0], outputs[1]);
    assert!(outputs[1].contains(&"sum=6".to_string()));
}

#[test]
fn python_subprocess_signals_and_posix_spawn() {
    let _host = host::shared();
    if !can_trace("python") {
        return;
    }
    let dir = scratch("python");
    // SIGHUP is reset before the final self-kill: under `nohup` it arrives ignored.
    let py = "import os, signal, subprocess, sys\n\
        got = []\n\
        signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))\n\
        subprocess.run(['sh', '-c', 'kill -USR1 $PPID'], check=True)\n\
        r = subprocess.run(['sh', '-c', 'echo child; exit 3'], capture_output=True, text=True)\n\
        print(r.stdout.strip(), r.returncode)\n\
        p = subprocess.Popen(['sleep', '10']); p.send_signal(signal.SIGTERM); print('sleep', p.wait())\n\
        pid = os.posix_spawn('/bin/echo', ['echo', 'spawned'], os.environ)\n\
        print('spawn', os.waitpid(pid, 0)[1])\n\
        print('got', got)\n\
        signal.signal(signal.SIGHUP, signal.SIG_DFL)\n\
        sys.stdout.flush(); os.kill(os.getpid(), signal.SIGHUP)\n";
    let out = same("python", &["python3", "-c", py], &dir, false);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("child 3") && stdout.contains("sleep -15"),
        "{stdout}"
    );
    assert!(stdout.contains("got [10]"), "{stdout}");
    assert_eq!(out.status.signal(), Some(1));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn orphaned_grandchildren_are_waited_for() {
    let _host = host::shared();
    if !can_trace("orphans") {
        return;
    }
    let dir = scratch("orphans");
    // The shell exits first; its orphan keeps the stdout pipe (so `output()` waits in both
    // cases) and Vigil keeps tracing it, then exits with the shell's status.
    let out = same(
        "orphan",
        &["sh", "-c", "(sleep 0.3; echo orphan) & echo parent; exit 4"],
        &dir,
        false,
    );
    assert_eq!(text(&out.stdout), "parent\norphan\n");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn go_binary() {
    let _host = host::shared();
    if !can_trace("go") {
        return;
    }
    let go = ["go", "/usr/local/go/bin/go", "/usr/lib/go/bin/go"]
        .into_iter()
        .find(|g| have(g));
    let Some(go) = go else {
        eprintln!("skipping go_binary: go is not installed (optional)");
        return;
    };
    let dir = scratch("go");
    fs::write(
        dir.join("main.go"),
        "package main\nimport (\"fmt\"; \"os\"; \"os/exec\"; \"sync\")\n\
         func main() {\n\
           var wg sync.WaitGroup; sums := make([]int, 8)\n\
           for i := 0; i < 8; i++ { wg.Add(1); go func(i int) { defer wg.Done()\n\
             for k := 0; k < 100; k++ { if f, err := os.Open(\"/etc/hostname\"); err == nil { f.Close() }; sums[i] += k } }(i) }\n\
           wg.Wait(); t := 0; for _, s := range sums { t += s }\n\
           out, _ := exec.Command(\"echo\", \"from-child\").Output()\n\
           fmt.Printf(\"total=%d %s\", t, out); os.Exit(6) }\n",
    )
    .unwrap();
    fs::write(dir.join("go.mod"), "module vigiltest\n\ngo 1.18\n").unwrap();
    let built = Command::new(go)
        .args(["build", "-o", "gobin", "."])
        .current_dir(&dir)
        .env("GOFLAGS", "-mod=mod")
        .env("GOCACHE", dir.join("cache"))
        .env("GOPATH", dir.join("gopath"))
        .env("CGO_ENABLED", "0")
        .output()
        .unwrap();
    assert!(built.status.success(), "go build: {}", text(&built.stderr));
    let out = same("go", &["./gobin"], &dir, false);
    assert_eq!(text(&out.stdout), "total=39600 from-child\n");
    let _ = Command::new("chmod").args(["-R", "u+w"]).arg(&dir).status();
    let _ = fs::remove_dir_all(&dir);
}

/// Spawns `vigil run -- python3 -c SCRIPT` and returns it once the workload printed `ready`.
fn spawn_ready(script: &str) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    let mut child = vigil_cmd()
        .args(["run", "--", "python3", "-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn vigil");
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    (child, reader)
}

#[test]
fn signals_sent_to_vigil_reach_the_workload() {
    let _host = host::shared();
    if !can_trace("forwarding") {
        return;
    }
    // The handler writes with os.write: a signal can land while `print('ready', flush=True)`
    // still holds stdout's buffer (the test reads `ready` as soon as it is written), and a
    // print from the handler would then fail with CPython's "reentrant call" error.
    let script = "import os, signal, time\n\
        def h(s, f):\n    os.write(1, b'got %d\\n' % s)\n    os._exit(s)\n\
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):\n\
        \x20   signal.signal(s, h)\n\
        print('ready', flush=True)\ntime.sleep(60)\n";
    for sig in [15, 2, 1, 10, 12] {
        let (mut child, mut reader) = spawn_ready(script);
        let sent = Command::new("kill")
            .args([format!("-{sig}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
        let status = child.wait().unwrap();
        // The status says which side failed if the output is missing: killed by the signal
        // (Vigil did not forward it), exit 1 (the workload failed), or a Vigil error.
        assert_eq!(
            rest,
            format!("got {sig}\n"),
            "signal {sig}: exit {:?}",
            ending(status)
        );
        assert_eq!(status.code(), Some(sig), "signal {sig}");
    }
    // An unhandled forwarded signal kills the workload, and Vigil dies the same way.
    let (mut child, _reader) =
        spawn_ready("import time\nprint('ready', flush=True)\ntime.sleep(60)\n");
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(15));
}

fn proc_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    after.trim_start().chars().next()
}

#[test]
fn tracer_death_kills_the_workload() {
    let _host = host::shared();
    if !can_trace("tracer_death") {
        return;
    }
    let (mut child, mut reader) = spawn_ready(
        "import os, time\nprint('ready', flush=True)\nprint(os.getpid(), flush=True)\ntime.sleep(60)\n",
    );
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let workload: u32 = line.trim().parse().expect("workload pid");
    child.kill().unwrap(); // SIGKILL: the tracer cannot clean up.
    child.wait().unwrap();
    // PTRACE_O_EXITKILL: the kernel kills the tracee with its tracer. Wait for that (a zombie
    // awaiting its new parent's reaping counts as dead).
    let mut dead = false;
    for _ in 0..200 {
        if matches!(proc_state(workload), None | Some('Z') | Some('X')) {
            dead = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(dead, "workload {workload} survived its tracer");
}

#[test]
fn workloads_that_use_ptrace_get_eperm() {
    let _host = host::shared();
    if !can_trace("ptrace_workload") {
        return;
    }
    let dir = scratch("ptrace_workload");
    // PTRACE_TRACEME: the workload already has a tracer (Vigil), so the kernel refuses.
    let py = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n\
        r = libc.ptrace(0, 0, 0, 0)\nprint(r, ctypes.get_errno())\n";
    let plain = native(&["python3", "-c", py], &dir);
    assert_eq!(text(&plain.stdout), "0 0\n");
    let out = traced(&["python3", "-c", py], &dir);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout),
        "-1 1\n",
        "documented: EPERM under vigil run"
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn stopping_and_continuing_the_whole_job() {
    let _host = host::shared();
    if !can_trace("job_stop") {
        return;
    }
    if !have("setsid") {
        skip("job_stop", "setsid not found");
        return;
    }
    // What a shell does on Ctrl-Z / `fg`: stop, then continue, Vigil and the workload
    // together (their shared process group).
    let mut child = Command::new("setsid")
        .arg(env!("CARGO_BIN_EXE_vigil"))
        .args(["run", "--", "python3", "-c"])
        .arg("import time\nprint('ready', flush=True)\ntime.sleep(0.5)\nprint('done')\n")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn vigil");
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    let group = format!("-{}", child.id());
    for sig in ["-STOP", "-CONT"] {
        let ok = Command::new("kill")
            .args([sig, "--", &group])
            .status()
            .unwrap();
        assert!(ok.success(), "kill {sig}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
    assert_eq!(rest, "done\n");
    assert_eq!(child.wait().unwrap().code(), Some(0));
}
