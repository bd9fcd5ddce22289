//! `vigil generate`: list and run the generator's actions (real suspicious system calls that
//! the rules detect).
//!
//! `run` executes every selected action in a child process (`vigil generate run --exact NAME`)
//! so that each action's process identity is clean and an action that changes its own
//! credentials or namespaces cannot affect the next one. Under a tracer (`vigil run`), an
//! action whose data says [`vigil_generator::UnderRun::RefusedButAlerts`] counts as run when it
//! fails: the kernel refuses it there, and the attempt is what the rules see.

use std::io::{self, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::thread;
use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};
use vigil_generator::{Action, Context};

use crate::error::InvalidInput;
use crate::flags::duration;

#[derive(Subcommand)]
pub enum GenerateCommand {
    /// List the actions, the rules each is expected to trigger and what it needs.
    List {
        /// Only actions whose name matches this regular expression.
        #[arg(value_name = "REGEX")]
        pattern: Option<String>,
        /// Print one JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Run the actions whose name matches REGEX (all by default).
    #[command(
        after_help = "Examples:\n  vigil generate run\n  vigil generate run 'syscall\\.Ptrace' --loop --sleep 1s\n  vigil generate run ReadSensitive --as-user nobody"
    )]
    Run(RunArgs),
    /// Falco event-generator's capacity method: rounds of actions, alerts counted per action.
    #[command(
        after_help = "Examples:\n  vigil generate bench 'ReadSensitive|WriteBelowBinaryDir' --loop --alerts-file alerts.jsonl --pid $(pidof -s vigil)\n  \
        vigil generate bench . --loop --listen 127.0.0.1:2801 --rules-set stable --pid $(pidof -s falco)"
    )]
    Bench(crate::bench::GenerateBenchArgs),
}

#[derive(Args)]
pub struct RunArgs {
    /// Regular expression over action names (unanchored; default: every action).
    #[arg(value_name = "REGEX")]
    pattern: Option<String>,
    /// Repeat the selection until interrupted.
    #[arg(long = "loop")]
    repeat: bool,
    /// Pause between actions, e.g. `100ms`, `1s`, `2m`.
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = duration)]
    sleep: Duration,
    /// Run the actions as this user (their child processes drop to its uid and gid).
    #[arg(long, value_name = "NAME")]
    as_user: Option<String>,
    /// Include actions that take several seconds.
    #[arg(long)]
    slow: bool,
    /// Run exactly this action in this process (what `run` executes in each child).
    #[arg(long, value_name = "NAME", hide = true)]
    exact: Option<String>,
}

pub fn generate(command: GenerateCommand) -> Result<ExitCode> {
    match command {
        GenerateCommand::List { pattern, json } => list(pattern.as_deref().unwrap_or(""), json),
        GenerateCommand::Run(args) => match &args.exact {
            Some(name) => run_exact(name),
            None => run(&args),
        },
        GenerateCommand::Bench(args) => crate::bench::generate_bench(args),
    }
}

fn select(pattern: &str) -> Result<Vec<&'static Action>> {
    vigil_generator::select(pattern).map_err(|e| InvalidInput(e.to_string()).into())
}

fn list(pattern: &str, json: bool) -> Result<ExitCode> {
    let ctx = Context::from_env();
    let mut out = io::stdout().lock();
    for action in select(pattern)? {
        if json {
            writeln!(out, "{}", action.to_json(&ctx))?;
        } else {
            out.write_all(action.to_text(&ctx).as_bytes())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs one action in this process.
fn run_exact(name: &str) -> Result<ExitCode> {
    let action = vigil_generator::find(name).map_err(|e| InvalidInput(e.to_string()))?;
    match action.run(&Context::from_env()) {
        Ok(summary) => {
            println!("{summary}");
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            eprintln!("{err}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The uid and gid of a user name from the system's user database.
fn lookup_user(name: &str) -> Result<(u32, u32)> {
    vigil_generator::user_ids(name)
        .context("reading /etc/passwd")?
        .ok_or_else(|| InvalidInput(format!("no user named `{name}` in /etc/passwd")).into())
}

fn run(args: &RunArgs) -> Result<ExitCode> {
    let pause = args.sleep;
    let actions: Vec<_> = select(args.pattern.as_deref().unwrap_or(""))?
        .into_iter()
        .filter(|a| args.slow || !a.slow)
        .collect();
    if actions.is_empty() {
        return Err(InvalidInput("no action matches".into()).into());
    }
    let user = args.as_user.as_deref().map(lookup_user).transpose()?;
    let exe = std::env::current_exe().context("locating the vigil binary")?;
    let ctx = Context::from_env();
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.is_file());
    // Under a tracer (`vigil run`, strace), actions documented as refused there fail by design.
    let traced = Action::traced();
    let (mut ran, mut failed, mut skipped) = (0u64, 0u64, 0u64);
    loop {
        for action in &actions {
            // `--as-user` drops root, so root-only actions cannot succeed: skip them.
            let why = match (user, action.needs_root || action.needs_runc()) {
                (Some((uid, _)), true) if uid != 0 => Some(format!(
                    "needs root (running as {})",
                    args.as_user.as_deref().unwrap_or("")
                )),
                // A tracer sees every attempt: kernel-capture checks do not apply.
                _ if traced => action.unavailable_under_run(&ctx),
                _ => action.unavailable(&ctx),
            };
            if let Some(why) = why {
                println!("skip  {}: {why}", action.name);
                skipped += 1;
                continue;
            }
            let mut cmd = match user {
                // setpriv also clears root's supplementary groups, which std cannot do.
                Some((uid, gid)) if setpriv.is_some() => {
                    let mut cmd = Command::new(setpriv.as_deref().unwrap_or("setpriv".as_ref()));
                    cmd.arg(format!("--reuid={uid}"))
                        .arg(format!("--regid={gid}"))
                        .arg("--clear-groups")
                        .arg(&exe);
                    cmd
                }
                Some((uid, gid)) => {
                    let mut cmd = Command::new(&exe);
                    cmd.uid(uid).gid(gid);
                    cmd
                }
                None => Command::new(&exe),
            };
            cmd.args(["generate", "run", "--exact", action.name])
                .stdin(Stdio::null());
            let out = cmd
                .output()
                .with_context(|| format!("running {}", action.name))?;
            let text = |b: &[u8]| String::from_utf8_lossy(b).trim().replace('\n', "; ");
            if out.status.success() {
                println!("ok    {}: {}", action.name, text(&out.stdout));
                ran += 1;
            } else if let (true, Some(why)) = (traced, action.under_run.reason()) {
                // The attempt is what the rules see; the refusal is documented.
                println!(
                    "ok    {}: refused under a tracer, as documented: {} ({why})",
                    action.name,
                    text(&out.stderr)
                );
                ran += 1;
            } else {
                println!("FAIL  {}: {}", action.name, text(&out.stderr));
                failed += 1;
            }
            io::stdout().flush()?;
            thread::sleep(pause);
        }
        if !args.repeat {
            break;
        }
    }
    println!("{ran} ran, {failed} failed, {skipped} skipped");
    Ok(if failed == 0 && skipped == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_takes_every_form_it_took_before_the_grammars_merged() {
        // `--sleep` had its own grammar; these are the forms it accepted, in config's now.
        assert_eq!(duration("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(duration("0s"), Ok(Duration::ZERO));
        for bad in ["", "s", "1x", "-1s", "1e999s", "abc"] {
            assert!(duration(bad).is_err(), "{bad:?}");
        }
    }
}
