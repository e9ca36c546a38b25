//! Embedding ctxhost in an agent runtime: the calls README.md's "Embedding" section shows, as a
//! program that builds (a test keeps the two alike). Running it appends to a session under
//! `$CTXHOST_HOME` (`cargo run -p ctxhost --example embedding -- KEY`).

use ctxhost::config::{Config, ConfigSource, Home};
use ctxhost::prompt::PromptSettings;
use ctxhost::session::TurnOptions;
use ctxhost::{AfterTurnOptions, Host, SessionOptions, SessionTarget, TurnRequest};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let key = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "agent:main:embedding-example".into());
    let message = serde_json::json!({"role": "user", "content": "Why do the parser tests fail?"});
    // README: begin
    let home = Home::from_env()?;
    let config = Config::load(ConfigSource::resolve(None, &home))?;
    let host = Host::new(home, config)?;
    let target = SessionTarget::Key(key);
    let mut session = host
        .open_session(&target, &SessionOptions::default())
        .await?;
    session.append(&message).await?; // written, then ingested
    // One turn as serve and replay run it: assemble, and compact first when the context passed
    // the threshold (the closure hears of it before, for `notifyBeforeAuto`).
    let turn = session
        .assemble_turn(&TurnRequest::default(), &mut |due| eprintln!("{due}"))
        .await?;
    let messages = session.render(&turn.assembly); // AgentMessage JSON, kept ones byte-identical

    // Or the whole model request: system prompt sections, history within what the window
    // leaves, one compaction on overflow (else `Error::Overflow` with every part's numbers),
    // and the memory-flush signal.
    let settings = PromptSettings::from_config(&host.config().settings.agents.defaults);
    let request = session
        .prepare_request(&settings, &TurnOptions::default())
        .await?;

    // After the model answered: its messages appended the same way, then the turn's end.
    session.after_turn(&AfterTurnOptions::default()).await?;
    session.close().await?;
    // README: end
    println!(
        "{} messages assembled; the request holds {} tokens",
        messages.len(),
        request.breakdown.total
    );
    Ok(())
}
