//! `ctxhost plugins …`: list, install (copy or link), uninstall, enable, disable, use, gc, new.
//! Each command with more than a few lines of its own is a module: listing, installing (and
//! finding the component), the imports a component may not have, the compiled cache.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use ctxhost::Host;
use ctxhost::plugins::Lang;

use super::output::stdout_line;

mod cache;
mod imports;
mod install;
mod list;

#[cfg(test)]
pub(super) use list::PluginsList;

#[derive(Subcommand)]
pub(super) enum PluginsCommand {
    /// Every engine, bundled and installed, with its state and capabilities.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Validates a plugin package folder completely, then installs it.
    Install {
        /// The package folder (with ctxhost.plugin.json).
        path: PathBuf,
        /// Record the folder instead of copying it: rebuilds are picked up without reinstalling.
        #[arg(short = 'l', long)]
        link: bool,
        /// Replace an installed plugin of the same id.
        #[arg(long)]
        force: bool,
    },
    /// Removes an installed plugin (its state dir is kept unless --purge).
    Uninstall {
        id: String,
        /// Also delete $CTXHOST_HOME/state/<id>/.
        #[arg(long, conflicts_with = "keep_state")]
        purge: bool,
        /// Keep $CTXHOST_HOME/state/<id>/ (the default).
        #[arg(long)]
        keep_state: bool,
    },
    Enable {
        id: String,
    },
    Disable {
        id: String,
    },
    /// Selects the context engine (plugins.slots.contextEngine).
    Use {
        id: String,
    },
    /// Removes compiled components from the cache that no bundled or installed engine uses.
    Gc {
        /// Only report what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Scaffolds an engine project in ./NAME that builds with one command and installs as is.
    New {
        name: String,
        /// The engine's language.
        #[arg(long, value_enum, default_value_t = LangArg::Rust)]
        lang: LangArg,
        /// Rust only: depend on this ctxhost-sdk folder instead of the copy this ctxhost
        /// carries (vendored into the project).
        #[arg(long, value_name = "PATH")]
        sdk: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum LangArg {
    Rust,
    Python,
    #[value(alias = "js")]
    Javascript,
}

impl From<LangArg> for Lang {
    fn from(lang: LangArg) -> Self {
        match lang {
            LangArg::Rust => Lang::Rust,
            LangArg::Python => Lang::Python,
            LangArg::Javascript => Lang::JavaScript,
        }
    }
}

pub(super) async fn run(host: Host, command: PluginsCommand) -> anyhow::Result<ExitCode> {
    match command {
        PluginsCommand::List { json } => list::list(&host, json),
        PluginsCommand::Install { path, link, force } => {
            install::install(&host, path, link, force).await
        }
        PluginsCommand::Uninstall { id, purge, .. } => uninstall(&host, &id, purge),
        PluginsCommand::Enable { id } => {
            ctxhost::plugin_ops::set_enabled(&host, &id, true)?;
            stdout_line!("enabled `{id}`");
            Ok(ExitCode::SUCCESS)
        }
        PluginsCommand::Disable { id } => {
            ctxhost::plugin_ops::set_enabled(&host, &id, false)?;
            stdout_line!("disabled `{id}`");
            Ok(ExitCode::SUCCESS)
        }
        PluginsCommand::Use { id } => {
            ctxhost::plugin_ops::use_engine(&host, &id)?;
            stdout_line!(
                "context engine is now `{id}` (plugins.slots.contextEngine in {})",
                host.config().source.path().display()
            );
            Ok(ExitCode::SUCCESS)
        }
        PluginsCommand::Gc { dry_run } => cache::gc(&host, dry_run),
        PluginsCommand::New { name, lang, sdk } => new(&name, lang, sdk.as_deref()),
    }
}

/// `plugins uninstall`: removes a package, keeping its state unless `purge`.
fn uninstall(host: &Host, id: &str, purge: bool) -> anyhow::Result<ExitCode> {
    let done = ctxhost::plugin_ops::uninstall(host, id, purge)?;
    stdout_line!("uninstalled `{id}`");
    if done.slot_reset {
        stdout_line!("it was the active engine: plugins.slots.contextEngine is now `legacy`");
    }
    match &done.kept_state {
        Some(dir) => stdout_line!(
            "its state is kept in {} (--purge deletes it)",
            dir.display()
        ),
        None if purge => stdout_line!("its state was deleted"),
        None => {}
    }
    cache::collect_cache(host, false);
    Ok(ExitCode::SUCCESS)
}

/// `plugins new`: a package folder for an engine in `lang`, and the command that builds it.
fn new(name: &str, lang: LangArg, sdk: Option<&Path>) -> anyhow::Result<ExitCode> {
    let lang = Lang::from(lang);
    if sdk.is_some() && lang != Lang::Rust {
        anyhow::bail!("--sdk is for Rust projects; a {lang:?} project carries its WIT");
    }
    let cwd = std::env::current_dir()?;
    let dir = ctxhost::plugins::scaffold_lang(&cwd, name, lang, sdk)?;
    stdout_line!("created {}", dir.display());
    let setup = match lang {
        Lang::Rust => "",
        Lang::Python => "pip install componentize-py && ",
        Lang::JavaScript => "npm install && ",
    };
    stdout_line!(
        "next: cd {name} && {setup}{} && ctxhost plugins install .",
        lang.build_command()
    );
    Ok(ExitCode::SUCCESS)
}
