//! `ctxhost doctor`: every check an operator needs before trusting a setup, each with a fix.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use ctxhost::Host;
use ctxhost::config::{Config, ConfigSource, Home};
use serde::Serialize;

use super::output::print_json;

#[derive(Serialize)]
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

#[derive(Serialize)]
struct Report {
    ok: bool,
    home: String,
    checks: Vec<Check>,
}

impl Report {
    fn pass(&mut self, name: &'static str, detail: impl Into<String>) {
        self.checks.push(Check {
            name,
            ok: true,
            detail: detail.into(),
            fix: None,
        });
    }
    fn fail(&mut self, name: &'static str, detail: impl Into<String>, fix: impl Into<String>) {
        self.ok = false;
        self.checks.push(Check {
            name,
            ok: false,
            detail: detail.into(),
            fix: Some(fix.into()),
        });
    }
}

pub async fn run(flag: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    let home = Home::from_env()?;
    let mut report = Report {
        ok: true,
        home: home.root().display().to_string(),
        checks: Vec::new(),
    };
    check(&mut report, home, flag).await;
    if json {
        print_json(&report)?;
    } else {
        for c in &report.checks {
            println!(
                "{} {:<12} {}",
                if c.ok { "ok  " } else { "FAIL" },
                c.name,
                c.detail
            );
            if let Some(fix) = &c.fix {
                println!("     {:<12} fix: {fix}", "");
            }
        }
        let failed = report.checks.iter().filter(|c| !c.ok).count();
        println!(
            "{} checks, {} failed (home {})",
            report.checks.len(),
            failed,
            report.home
        );
    }
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn check(report: &mut Report, home: Home, flag: Option<&Path>) {
    let source = ConfigSource::resolve(flag, &home);
    let config = match Config::load(source.clone()) {
        Ok(config) if config.found => {
            report.pass("config", format!("{} parsed", source.path().display()));
            config
        }
        Ok(config) => {
            report.pass(
                "config",
                format!("{} not found; using defaults", source.path().display()),
            );
            config
        }
        Err(e) => {
            report.fail(
                "config",
                e.to_string(),
                "fix the file at the position shown",
            );
            return;
        }
    };
    let selected = config.active_engine().to_string();
    let host = match Host::new(home.clone(), config) {
        Ok(host) => host,
        Err(e) => {
            report.fail(
                "runtime",
                e.to_string(),
                "see the error; the wasm engine could not start",
            );
            return;
        }
    };
    for broken in &host.registry().broken {
        report.fail(
            "plugin",
            broken.to_string(),
            "fix or remove the plugin package",
        );
    }
    match host
        .registry()
        .resolve(&selected, host.config().source.path())
    {
        Ok(available) => report.pass(
            "slot",
            format!(
                "plugins.slots.contextEngine = `{selected}` ({})",
                available.origin()
            ),
        ),
        Err(e) => {
            report.fail(
                "slot",
                e.to_string(),
                "set plugins.slots.contextEngine to one of the available engines",
            );
            return;
        }
    }
    let started = Instant::now();
    let engine = match host.engine(&selected).await {
        Ok(engine) => engine,
        Err(e) => {
            report.fail(
                "engine",
                e.to_string(),
                "rebuild or reinstall the engine's component",
            );
            return;
        }
    };
    let info = engine.info();
    report.pass(
        "engine",
        format!(
            "`{}` {} {} (contract {}), {:?}, instantiated and answered info in {:.1} ms",
            info.id,
            info.name,
            info.version,
            engine.contract_version(),
            engine.load_source(),
            started.elapsed().as_secs_f64() * 1e3
        ),
    );
    if info.id != selected {
        report.fail(
            "engine-id",
            format!(
                "the component says its id is `{}`, but it is installed as `{selected}`",
                info.id
            ),
            "install it under the id its info() reports",
        );
    }
    let state_dir = home.state_dir(&selected);
    match writable(&state_dir) {
        Ok(()) => report.pass("state-dir", format!("{} writable", state_dir.display())),
        Err(e) => report.fail(
            "state-dir",
            format!("{}: {e}", state_dir.display()),
            "make the directory writable by this user, or set CTXHOST_HOME",
        ),
    }
}

fn writable(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let probe = tempfile::NamedTempFile::new_in(dir)?;
    std::fs::write(probe.path(), b"ok")?;
    Ok(())
}
