//! The state engine's configuration for this host: its hostname and its users and groups,
//! read once (a capture's replay) or followed as they change (a live capture).

use vigil_state::StateConfig;

/// State configuration for this host: its user database (an unreadable one is reported to
/// `notice` and replaced by an empty one, so names print as `<NA>`) and hostname.
pub fn system_state_config(hostname: &str, notice: fn(&str)) -> StateConfig {
    let user_db: Box<dyn vigil_state::UserDb> = match vigil_state::FileUserDb::system() {
        Ok(db) => Box::new(db),
        Err(err) => {
            notice(&format!(
                "warning: {err}; user and group names will be unknown"
            ));
            Box::new(vigil_state::MemUserDb::default())
        }
    };
    StateConfig {
        hostname: hostname.as_bytes().to_vec(),
        user_db,
        ..StateConfig::default()
    }
}

/// State configuration for live capture on this host (`watch`, `run`): users and groups are
/// followed as they change — the host's `/etc/passwd` and `/etc/group`, and each container's
/// own files through `/proc/PID/root` — instead of read once.
pub fn live_state_config(hostname: &str, notice: fn(&str)) -> StateConfig {
    let live_users = vigil_state::LiveUsers::system();
    if let Some(err) = live_users.start_error() {
        let cause = std::error::Error::source(err).map_or(String::new(), |e| format!(": {e}"));
        notice(&format!(
            "warning: {err}{cause}; user and group names stay unknown until it can be read"
        ));
    }
    StateConfig {
        hostname: hostname.as_bytes().to_vec(),
        live_users: Some(live_users),
        ..StateConfig::default()
    }
}
