//! The end-to-end tests of the `vigil` binary: one test binary (as ripgrep's `tests/tests.rs`
//! and aya's `integration-test`), a module per area, helpers in [`support`]. Run one area with
//! `cargo test -p vigil --test e2e run::`, one test with its full name.
//!
//! Tests of different modules run at the same time; a module whose tests see or change the
//! whole host (`vigil watch`, daemons, qemu guests, users, benches) takes
//! [`support::host::alone`] in each test, every other test [`support::host::shared`].

#![allow(clippy::print_stderr)]

mod support;

mod bench;
mod bench_falco;
mod cli;
mod container;
mod enforce_default;
mod escaping;
mod falco_config;
mod fleet;
mod generate_bench;
mod generate_run;
mod helm;
mod identity;
mod image;
mod kernels;
mod learn_runc;
mod least_privilege;
mod live_rules;
mod outputs;
mod privileges;
mod raw_bytes;
mod receivers;
mod routine_host;
mod run;
mod run_container;
mod run_outputs;
mod run_reload;
mod run_transparency;
mod runtimes;
mod users;
mod watch;
mod watch_exe_flags;
mod watch_reload;
