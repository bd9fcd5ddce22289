//! The driver-conformance suite: every case of `vigil_conformance::cases` under each driver,
//! all mismatches of a driver reported in one table.
//!
//! `vigil watch` needs root (skipped with a printed reason otherwise); `vigil run` is skipped
//! while this `vigil` has no `run` command. With `VIGIL_TEST_STRICT=1` both fail instead of
//! skipping. The `vigil` binary is built next to this test (`cargo build -p vigil`) unless
//! `VIGIL_BIN` names one. `VIGIL_CONFORMANCE_CASES=a,b` runs only those cases.
// Tests print why they skip.
#![allow(clippy::print_stderr)]

use std::path::PathBuf;
use std::process::Command;

use vigil_conformance::cases::{Case, CASES};
use vigil_conformance::check::table;
use vigil_conformance::driver::{evaluate, Driver, Run, Setup, Watch};

fn strict() -> bool {
    std::env::var("VIGIL_TEST_STRICT").as_deref() == Ok("1")
}

fn skip_or_fail(driver: &str, reason: &str) {
    if strict() {
        panic!("VIGIL_TEST_STRICT=1 and the `{driver}` conformance suite cannot run: {reason}");
    }
    eprintln!("skipping the `{driver}` conformance suite: {reason}");
}

/// The `vigil` binary: `VIGIL_BIN`, else built into this test's target directory.
fn vigil_bin() -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("VIGIL_BIN") {
        return Ok(PathBuf::from(bin));
    }
    let exe = std::env::current_exe().map_err(|e| format!("no current exe: {e}"))?;
    // target/<profile>/deps/conformance-HASH → target/<profile>/vigil
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .ok_or("unexpected test binary location")?;
    let target_dir = profile_dir
        .parent()
        .ok_or("unexpected test binary location")?;
    let mut build = Command::new(env!("CARGO"));
    build
        .args(["build", "--quiet", "-p", "vigil", "--bin", "vigil"])
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    let status = build
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("`cargo build -p vigil` failed ({status})"));
    }
    Ok(profile_dir.join("vigil"))
}

fn selected_cases() -> Vec<&'static Case> {
    match std::env::var("VIGIL_CONFORMANCE_CASES") {
        Ok(list) if !list.trim().is_empty() => {
            let names: Vec<&str> = list.split(',').map(str::trim).collect();
            for n in &names {
                assert!(
                    CASES.iter().any(|c| c.name == *n),
                    "VIGIL_CONFORMANCE_CASES names unknown case `{n}`"
                );
            }
            CASES.iter().filter(|c| names.contains(&c.name)).collect()
        }
        _ => CASES.iter().collect(),
    }
}

fn setup(driver: &str) -> Option<Setup> {
    let vigil = match vigil_bin() {
        Ok(v) => v,
        Err(reason) => {
            skip_or_fail(driver, &reason);
            return None;
        }
    };
    let work = std::env::temp_dir().join(format!(
        "vigil-conformance-{}-{}",
        driver,
        std::process::id()
    ));
    Some(Setup {
        vigil,
        trigger: PathBuf::from(env!("CARGO_BIN_EXE_vigil-trigger")),
        work,
    })
}

fn conform(driver: &mut dyn Driver) {
    if let Some(reason) = driver.missing_privilege() {
        skip_or_fail(driver.name(), &reason);
        return;
    }
    let Some(setup) = setup(driver.name()) else {
        return;
    };
    if let Some(reason) = driver.unavailable(&setup) {
        skip_or_fail(driver.name(), &reason);
        return;
    }
    let cases = selected_cases();
    let runs = driver.run_cases(&setup, &cases).unwrap_or_else(|e| {
        panic!(
            "driver `{}` could not run the cases: {}",
            driver.name(),
            vigil_conformance::driver::error_chain(&e)
        )
    });
    assert_eq!(runs.len(), cases.len(), "one run per case");
    let mismatches = evaluate(&runs);
    if mismatches.is_empty() {
        let _ = std::fs::remove_dir_all(&setup.work);
    }
    assert!(
        mismatches.is_empty(),
        "{}(captures and case directories kept under {})",
        table(driver.name(), &mismatches),
        setup.work.display()
    );
}

#[test]
fn watch_driver_conforms() {
    conform(&mut Watch::default());
}

#[test]
fn watch_driver_conforms_with_exit_tracepoints() {
    conform(&mut Watch { hook: Some("exit") });
}

#[test]
fn watch_driver_conforms_with_the_raw_exit_tracepoint() {
    conform(&mut Watch { hook: Some("raw") });
}

/// The previous design (per-syscall enter and exit tracepoints), still selectable.
#[test]
fn watch_driver_conforms_with_syscall_tracepoints() {
    conform(&mut Watch {
        hook: Some("tracepoint"),
    });
}

#[test]
fn run_driver_conforms() {
    conform(&mut Run);
}
