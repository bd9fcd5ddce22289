//! A stop signal ends a source's wait at once: `Agent::drive` hands the source's waker to the
//! signal handlers. Its own test binary, since the handlers are process-wide and this test
//! raises SIGTERM.

use std::time::{Duration, Instant};

use vigil_agent::{Agent, AgentFlags};
use vigil_capture::{Source, SourceError, SourceStats, WakeReceiver, Waker};
use vigil_event::{Event, Snapshot};
use vigil_output::sinks::Console;

/// A source with nothing to deliver that waits for its waker or the deadline (polling: a
/// test fake), and keeps what ended each wait.
struct WakeableSource {
    waker: Waker,
    receiver: WakeReceiver,
    /// Per wait: true when the waker ended it.
    woken: Vec<bool>,
}

impl Source for WakeableSource {
    fn snapshot(&mut self) -> Result<Snapshot, SourceError> {
        Ok(Snapshot::default())
    }

    fn next_batch(&mut self, _out: &mut Vec<Event>, _max: usize) -> Result<bool, SourceError> {
        panic!("a loop with timers passes its deadline (next_batch_until)")
    }

    fn next_batch_until(
        &mut self,
        _out: &mut Vec<Event>,
        _max: usize,
        deadline: Instant,
    ) -> Result<bool, SourceError> {
        while Instant::now() < deadline {
            if self.receiver.clear() {
                self.woken.push(true);
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.woken.push(false);
        Ok(true)
    }

    fn stats(&self) -> SourceStats {
        SourceStats::default()
    }

    fn waker(&self) -> Option<Waker> {
        Some(self.waker.clone())
    }
}

fn notice(_: &str) {}

#[test]
fn sigterm_wakes_the_source_and_ends_the_drive() {
    let mut config =
        vigil_config::Config::from_yaml_str(vigil_config::DEFAULT_CONFIG, "<embedded config>")
            .expect("the embedded configuration loads")
            .config;
    for option in [
        "stdout_output.enabled=false",
        "syslog_output.enabled=false",
        "watch_config_files=false",
    ] {
        config.apply_override(option).expect(option);
    }
    let rules = vigil_engine::load_rules(
        &[vigil_engine::RulesText {
            name: "rules.yaml".into(),
            text: "- rule: R\n  desc: d\n  condition: evt.type = kill\n  output: o\n  \
                   priority: WARNING\n"
                .into(),
        }],
        &Default::default(),
    )
    .ruleset
    .expect("rules load");
    let mut engine = vigil_engine::Engine::new(rules, Default::default(), "host".into());
    let mut agent = Agent::start(
        config,
        "host",
        &AgentFlags {
            stats_file: None,
            live: false,
            signals: true,
            console: Console::Stderr,
            engine: "savefile",
            privileges: None,
            notice,
        },
        &mut engine,
    )
    .expect("the agent starts");
    let (waker, receiver) = Waker::pair().expect("a socket pair");
    let mut source = WakeableSource {
        waker,
        receiver,
        woken: Vec::new(),
    };
    let signal = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(300));
        signal_hook::low_level::raise(signal_hook::consts::SIGTERM).expect("raise SIGTERM");
    });
    agent
        .drive(
            &mut engine,
            &mut source,
            &mut || Err("no reload here".into()),
            vigil_agent::Drive::default(),
        )
        .expect("the drive ends");
    signal.join().expect("the signalling thread");
    assert!(agent.stop_requested(), "SIGTERM set the stop flag");
    assert_eq!(
        source.woken.last(),
        Some(&true),
        "the last wait was ended by SIGTERM's wakeup, not by a timer: {:?}",
        source.woken
    );
    agent
        .finish(&engine, &source.stats(), false)
        .expect("the agent finishes");
}
