//! Falco's version information (`falco::versions_info`): the object `/versions` serves (what
//! falcoctl reads before it installs a rules artifact), `--support`'s `engine_info`, and the
//! block `--version` prints, with Falco 0.44.1's keys and Vigil's own values. What each value
//! holds for Vigil is in `docs/cli.md` ("Versions"): the engine version is the Falco engine
//! whose rules language Vigil implements ([`vigil_rules::ENGINE_VERSION`]); components Vigil
//! does not have (falcosecurity/libs, a plugin API, plugins) are `0.0.0` and `{}`; the driver is
//! built into the binary, so its versions are the binary's.

use std::collections::BTreeMap;

/// What Vigil reports for a component it does not contain.
pub const ABSENT: &str = "0.0.0";

/// One agent's versions, under Falco's names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versions {
    /// The agent's version (Falco's `falco_version`; Vigil's, as in
    /// `falcosecurity_falco_version_info`).
    pub falco_version: String,
    pub libs_version: String,
    pub plugin_api_version: String,
    pub driver_api_version: String,
    pub driver_schema_version: String,
    pub default_driver_version: String,
    /// The engine version's minor number alone (Falco's pre-semver form, kept for tools that
    /// still compare it).
    pub engine_version: String,
    pub engine_version_semver: String,
    /// Loaded plugins by name: none in Vigil.
    pub plugin_versions: BTreeMap<String, String>,
}

impl Versions {
    /// This build's versions.
    pub fn current() -> Versions {
        let agent = env!("CARGO_PKG_VERSION").to_owned();
        Versions {
            falco_version: agent.clone(),
            libs_version: ABSENT.to_owned(),
            plugin_api_version: ABSENT.to_owned(),
            driver_api_version: agent.clone(),
            driver_schema_version: agent.clone(),
            default_driver_version: agent,
            engine_version: vigil_rules::ENGINE_VERSION.1.to_string(),
            engine_version_semver: vigil_rules::version_text(vigil_rules::ENGINE_VERSION),
            plugin_versions: BTreeMap::new(),
        }
    }

    /// Falco's `--support` report: these versions, this host, the command line, the
    /// configuration (`config_yaml`) and each rules file's text (Falco's shape: one variant
    /// per file).
    pub fn support_report(
        &self,
        config_yaml: &str,
        files: &[vigil_engine::RulesText],
    ) -> serde_json::Value {
        let read = |name: &str| {
            std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
                .map(|s| s.trim().to_owned())
                .unwrap_or_default()
        };
        let cmdline: Vec<String> = std::env::args().collect();
        serde_json::json!({
            "version": self.falco_version,
            "engine_info": self.to_json(),
            "system_info": {
                "sysname": read("ostype"),
                "nodename": vigil_state::procfs::host_name(),
                "release": read("osrelease"),
                "version": read("version"),
                "machine": std::env::consts::ARCH,
            },
            "cmdline": cmdline.join(" "),
            "config": config_yaml,
            "rules_files": files
                .iter()
                .map(|f| serde_json::json!({ "name": f.name, "variants": [{ "content": f.text }] }))
                .collect::<Vec<_>>(),
        })
    }

    /// The JSON object (`/versions`, `--support`'s `engine_info`, `--version` with
    /// `json_output`). Falco leaves `plugin_versions` out when no plugin is loaded; Vigil
    /// always writes it (an empty object), so the key set is the same on every agent.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "falco_version": self.falco_version,
            "libs_version": self.libs_version,
            "plugin_api_version": self.plugin_api_version,
            "driver_api_version": self.driver_api_version,
            "driver_schema_version": self.driver_schema_version,
            "default_driver_version": self.default_driver_version,
            "engine_version": self.engine_version,
            "engine_version_semver": self.engine_version_semver,
            "plugin_versions": self.plugin_versions,
        })
    }

    /// The block Falco's `--version` prints (`print_version.cpp`), labels and alignment
    /// included, so scripts that read it (`grep 'Engine:' | awk '{print $2}'`) work.
    pub fn text_block(&self) -> String {
        format!(
            "Falco version: {}\nLibs version:  {}\nPlugin API:    {}\nEngine:        {}\nDriver:\n  API version:    {}\n  Schema version: {}\n  Default driver: {}\n",
            self.falco_version,
            self.libs_version,
            self.plugin_api_version,
            self.engine_version_semver,
            self.driver_api_version,
            self.driver_schema_version,
            self.default_driver_version,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Falco 0.44.1's keys (`versions_info::as_json`), exactly.
    const FALCO_KEYS: [&str; 9] = [
        "default_driver_version",
        "driver_api_version",
        "driver_schema_version",
        "engine_version",
        "engine_version_semver",
        "falco_version",
        "libs_version",
        "plugin_api_version",
        "plugin_versions",
    ];

    #[test]
    fn the_json_has_falcos_keys_and_the_engine_version() {
        let v = Versions::current();
        let json: serde_json::Value = v.to_json();
        let object = json.as_object().expect("an object");
        let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, FALCO_KEYS);
        let (major, minor, patch) = vigil_rules::ENGINE_VERSION;
        assert_eq!(
            json["engine_version_semver"],
            format!("{major}.{minor}.{patch}")
        );
        assert_eq!(json["engine_version"], minor.to_string());
        assert_eq!(json["falco_version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(json["libs_version"], ABSENT);
        assert_eq!(json["plugin_versions"], serde_json::json!({}));
        // Every other value is a string, as falcoctl reads them.
        assert!(FALCO_KEYS
            .iter()
            .filter(|k| **k != "plugin_versions")
            .all(|k| json[*k].is_string()));
    }

    #[test]
    fn the_text_block_is_falcos() {
        let v = Versions::current();
        let text = v.text_block();
        let labels: Vec<&str> = text
            .lines()
            .map(|l| l.split_once(':').map_or(l, |(label, _)| label))
            .collect();
        assert_eq!(
            labels,
            [
                "Falco version",
                "Libs version",
                "Plugin API",
                "Engine",
                "Driver",
                "  API version",
                "  Schema version",
                "  Default driver"
            ]
        );
        // Falco's CI reads the engine version so: `grep 'Engine:' | awk '{print $2}'`.
        let engine = text
            .lines()
            .find(|l| l.starts_with("Engine:"))
            .and_then(|l| l.split_whitespace().nth(1));
        assert_eq!(engine, Some(v.engine_version_semver.as_str()));
        // Values line up as in Falco's printf format.
        assert!(text.starts_with(&format!(
            "Falco version: {}\nLibs version:  ",
            v.falco_version
        )));
    }
}
