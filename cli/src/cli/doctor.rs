//! `ctxhost doctor`: every check an operator needs before trusting a setup, each failure with
//! the command or config key that fixes it. Exit 1 on any failure, 0 with warnings.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use ctxhost::Host;
use ctxhost::config::{Config, ConfigSource, Home};
use schemars::JsonSchema;
use serde::Serialize;

use super::output::print_json;
use super::output::stdout_line;

/// A check's verdict: `warn` works but wants attention, `fail` does not work.
#[derive(Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Status {
    Ok,
    Warn,
    Fail,
}

/// One check.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Check {
    name: String,
    status: Status,
    /// False only for `fail`.
    ok: bool,
    /// What was found.
    detail: String,
    /// The command or config key that fixes it; absent when it passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

/// `ctxhost doctor --json` (docs/cli-json/doctor.schema.json).
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Report {
    /// No check failed (the exit code is 0).
    ok: bool,
    /// The `CTXHOST_HOME` checked.
    home: String,
    checks: Vec<Check>,
    /// The counts in a sentence.
    summary: String,
}

impl Report {
    fn add(
        &mut self,
        name: impl Into<String>,
        status: Status,
        detail: impl Into<String>,
        fix: Option<String>,
    ) {
        self.ok &= status != Status::Fail;
        self.checks.push(Check {
            name: name.into(),
            status,
            ok: status != Status::Fail,
            detail: detail.into(),
            fix,
        });
    }
    fn pass(&mut self, name: impl Into<String>, detail: impl Into<String>) {
        self.add(name, Status::Ok, detail, None);
    }
    fn warn(&mut self, name: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) {
        self.add(name, Status::Warn, detail, Some(fix.into()));
    }
    fn fail(&mut self, name: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) {
        self.add(name, Status::Fail, detail, Some(fix.into()));
    }
    fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }
}

pub(super) async fn run(flag: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    let home = Home::from_env()?;
    let mut report = Report {
        ok: true,
        home: home.root().display().to_string(),
        checks: Vec::new(),
        summary: String::new(),
    };
    check(&mut report, home, flag).await;
    report.summary = format!(
        "{} checks: {} ok, {} warnings, {} failed",
        report.checks.len(),
        report.count(Status::Ok),
        report.count(Status::Warn),
        report.count(Status::Fail)
    );
    if json {
        print_json(&report)?;
    } else {
        for c in &report.checks {
            let label = match c.status {
                Status::Ok => "ok  ",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
            };
            stdout_line!("{label} {:<28} {}", c.name, c.detail);
            if let Some(fix) = &c.fix {
                stdout_line!("     {:<28} fix: {fix}", "");
            }
        }
        stdout_line!("{} (home {})", report.summary, report.home);
    }
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Each check in turn; one that leaves nothing to check further (no config, no runtime) ends
/// the list.
async fn check(report: &mut Report, home: Home, flag: Option<&Path>) {
    let Some(config) = check_config(report, &home, flag) else {
        return;
    };
    let selected = config.active_engine().to_string();
    let Some(host) = start_host(report, &home, config, &selected) else {
        return;
    };
    let engines: Vec<_> = host.registry().all().cloned().collect();
    for available in engines {
        check_engine(report, &host, &home, &available, &selected).await;
    }
    check_cache(report, &home);
}

/// The config parses, and every key in it is one ctxhost knows.
fn check_config(report: &mut Report, home: &Home, flag: Option<&Path>) -> Option<Config> {
    let source = ConfigSource::resolve(flag, home);
    let config = match Config::load(source.clone()) {
        Ok(config) => {
            let state = if config.found {
                "parsed"
            } else {
                "not found; using defaults"
            };
            report.pass("config", format!("{} {state}", source.path().display()));
            config
        }
        Err(e) => {
            report.fail(
                "config",
                e.to_string(),
                "correct the file at the position shown",
            );
            return None;
        }
    };
    // No silent keys: each key ctxhost does not know, with its path and the likely intended one.
    for unknown in config.unknown_keys() {
        let fix = match &unknown.did_you_mean {
            Some(known) => format!("rename it to `{known}`, or remove it"),
            None => "remove it, or check the spelling against the README's config section".into(),
        };
        report.warn("config keys", unknown.to_string(), fix);
    }
    Some(config)
}

/// The runtime starts, every installed package reads, and the slot names an available engine.
fn start_host(report: &mut Report, home: &Home, config: Config, selected: &str) -> Option<Host> {
    let host = match Host::new(home.clone(), config) {
        Ok(host) => host,
        Err(e) => {
            report.fail(
                "runtime",
                ctxhost::error::chain(&e),
                "see the error; the wasm engine could not start",
            );
            return None;
        }
    };
    for (folder, broken) in &host.registry().broken {
        report.fail(
            format!("plugin {folder}"),
            broken.to_string(),
            format!("fix the package, or remove it: ctxhost plugins uninstall {folder}"),
        );
    }
    match host
        .registry()
        .resolve(selected, host.config().source.path())
    {
        Ok(available) => report.pass(
            "slot",
            format!(
                "plugins.slots.contextEngine = `{selected}` ({})",
                available.origin()
            ),
        ),
        Err(e) => report.fail(
            "slot",
            e.to_string(),
            "ctxhost plugins use <id> with one of the available engines",
        ),
    }
    Some(host)
}

/// One engine: enabled (or disabled and not the active one), instantiated with its config,
/// healthy, its capabilities granted, its state dir writable.
async fn check_engine(
    report: &mut Report,
    host: &Host,
    home: &Home,
    available: &ctxhost::plugins::AvailableEngine,
    selected: &str,
) {
    let id = available.id.clone();
    let disabled = host.config().plugin_entry(&id).and_then(|e| e.enabled) == Some(false);
    if disabled {
        if id == selected {
            report.fail(
                format!("engine {id}"),
                "the active engine is disabled",
                format!("ctxhost plugins enable {id}, or ctxhost plugins use another engine"),
            );
        } else {
            report.pass(format!("engine {id}"), "disabled");
        }
        return;
    }
    let started = Instant::now();
    match host.engine(&id).await {
        Ok(engine) => {
            let info = engine.info();
            report.pass(
                format!("engine {id}"),
                format!(
                    "{} {} ({}), contract {}, {:?}; instantiated, info() answered, config valid in {:.1} ms",
                    info.name,
                    info.version,
                    available.kind(),
                    engine.contract_version(),
                    engine.load_source(),
                    started.elapsed().as_secs_f64() * 1e3
                ),
            );
            if let Some(reason) = engine.health().circuit_open {
                report.fail(
                    format!("engine {id} health"),
                    format!("refused after repeated faults: {reason}"),
                    "fix the engine, then restart the process (or Host::reset_engine)",
                );
            }
        }
        Err(e) => report.fail(
            format!("engine {id}"),
            ctxhost::error::chain(&e),
            match &e {
                ctxhost::Error::Plugin(ctxhost::plugins::PluginError::Config { .. }) => {
                    format!("correct plugins.entries.{id}.config in {}", host.config().source.path().display())
                }
                _ => format!("rebuild the component and reinstall: ctxhost plugins install PATH --force (or ctxhost plugins disable {id})"),
            },
        ),
    }
    check_capabilities(report, host, available);
    check_state_dir(report, home, &id);
}

/// Capabilities the engine asks for and the operator has not granted.
fn check_capabilities(
    report: &mut Report,
    host: &Host,
    available: &ctxhost::plugins::AvailableEngine,
) {
    let id = &available.id;
    let ungranted = host.ungranted(id, available.capabilities());
    let names: Vec<&str> = ungranted.iter().map(|c| c.name()).collect();
    if !ungranted.is_empty() && available.is_bundled() {
        // A bundled engine works without them; granting is the operator's opt-in.
        report.pass(
            format!("engine {id} capabilities"),
            format!(
                "optional, not granted: {} (grant in plugins.entries.{id}.grants to use)",
                names.join(", ")
            ),
        );
    } else if !ungranted.is_empty() {
        report.warn(
            format!("engine {id} capabilities"),
            format!("requested but not granted: {}", names.join(", ")),
            format!("grant in plugins.entries.{id}.grants (llm: true, workspaceRead: \"DIR\") if you trust it"),
        );
    }
}

fn check_state_dir(report: &mut Report, home: &Home, id: &str) {
    let state_dir = home.state_dir(id);
    match writable(&state_dir) {
        Ok(()) => report.pass(
            format!("engine {id} state-dir"),
            format!("{} writable", state_dir.display()),
        ),
        Err(e) => report.fail(
            format!("engine {id} state-dir"),
            format!("{}: {e}", state_dir.display()),
            "make the directory writable by this user, or set CTXHOST_HOME",
        ),
    }
}

fn check_cache(report: &mut Report, home: &Home) {
    let cache = ctxhost::runtime::cache_usage(&home.cache_dir());
    report.pass(
        "component cache",
        format!(
            "{} compiled component(s), {:.1} MiB in {} (ctxhost plugins gc drops unused ones)",
            cache.entries,
            cache.bytes as f64 / (1024.0 * 1024.0),
            home.cache_dir().display()
        ),
    );
}

fn writable(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let probe = tempfile::NamedTempFile::new_in(dir)?;
    std::fs::write(probe.path(), b"ok")?;
    Ok(())
}
