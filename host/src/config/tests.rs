use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_str(text, Path::new("/etc/ctxhost.json"))
}

#[test]
fn empty_object_selects_legacy() {
    let config = parse("{}").unwrap();
    assert_eq!(config.active_engine(), "legacy");
    assert_eq!(config.settings.agents.defaults.context_window, 200_000);
}

#[test]
fn json5_with_comments_and_unknown_keys() {
    let config = parse(
        "{ // openclaw keys we do not own survive\n gateway: { port: 1 },\n plugins: { slots: { contextEngine: 'sliding-window' }, entries: { 'sliding-window': { config: { maxTokens: 100, } } } } }",
    )
    .unwrap();
    assert_eq!(config.active_engine(), "sliding-window");
    assert_eq!(config.raw["gateway"]["port"], 1);
    let entry = config.plugin_entry("sliding-window").unwrap();
    assert_eq!(entry.config.as_ref().unwrap()["maxTokens"], 100);
}

#[test]
fn an_engine_per_agent_by_the_leading_segments_of_the_session_key() {
    let config = parse(
        "{ plugins: { slots: { contextEngine: 'legacy', contextEngineByAgent: {
            'agent:main': 'lossless', 'agent:main:review': 'checkpoint-manager', pi: 'sliding-window' } } } }",
    )
    .unwrap();
    let choice = |key: &str| {
        let c = config.engine_for(key);
        (c.engine, c.agent)
    };
    assert_eq!(
        choice("agent:main:chat-1"),
        ("lossless", Some("agent:main"))
    );
    assert_eq!(
        choice("agent:main:review:x"),
        ("checkpoint-manager", Some("agent:main:review")),
        "the longest key wins"
    );
    assert_eq!(
        choice("agent:mainframe:x"),
        ("legacy", None),
        "whole segments only"
    );
    assert_eq!(choice("pi:0193-abc"), ("sliding-window", Some("pi")));
    assert_eq!(choice("hermes:s1"), ("legacy", None), "the slot otherwise");
    assert!(
        config.unknown_keys().is_empty(),
        "{:?}",
        config.unknown_keys()
    );
}

#[test]
fn syntax_error_names_line_and_column() {
    let err = parse("{\n  plugins: {\n    slots: { contextEngine: 'x' ,, }\n  }\n}").unwrap_err();
    match &err {
        ConfigError::Syntax { line, column, .. } => {
            assert_eq!(*line, 3);
            assert!(*column > 1, "column {column}");
        }
        other => panic!("expected a syntax error, got {other:?}"),
    }
    assert!(err.to_string().starts_with("config /etc/ctxhost.json:3:"));
}

#[test]
fn wrong_type_names_the_field_path() {
    let err =
        parse("{ agents: { defaults: { compaction: { reserveTokens: 'lots' } } } }").unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("agents.defaults.compaction.reserveTokens"),
        "{text}"
    );
}

#[test]
fn limits_are_range_checked_and_applied() {
    let config =
        parse("{ plugins: { entries: { e: { limits: { memoryMiB: 64, callTimeoutMs: 300 } } } } }")
            .unwrap();
    let limits = config.plugin_entry("e").unwrap().limits.as_ref().unwrap();
    let applied = limits.apply(ctxhost_runtime::Limits::default());
    assert_eq!(applied.memory_bytes, 64 << 20);
    assert_eq!(applied.call_timeout, std::time::Duration::from_millis(300));

    let err = parse("{ plugins: { entries: { e: { limits: { memoryMiB: 0 } } } } }")
        .unwrap_err()
        .to_string();
    assert!(err.contains("plugins.entries.e.limits.memoryMiB"), "{err}");
    assert!(err.contains("out of range"), "{err}");
    let err = parse("{ plugins: { entries: { e: { limits: { memoryMb: 10 } } } } }")
        .unwrap_err()
        .to_string();
    assert!(err.contains("memoryMb"), "{err}");
}

#[test]
fn host_side_limits_and_the_quota_are_configurable() {
    let config = parse(
        "{ plugins: { entries: { e: { limits: { importBytesPerCall: 4096, importCallsPerCall: 10, slowImportsPerCall: 2, wallTimeoutMs: 1500, stateDirQuotaMiB: 8 } } } } }",
    )
    .unwrap();
    let limits = config.plugin_entry("e").unwrap().limits.as_ref().unwrap();
    let applied = limits.apply(ctxhost_runtime::Limits::default());
    assert_eq!(applied.import_bytes_per_call, 4096);
    assert_eq!(applied.import_calls_per_call, 10);
    assert_eq!(applied.slow_imports_per_call, 2);
    assert_eq!(applied.wall_timeout, std::time::Duration::from_millis(1500));
    assert_eq!(applied.state_dir_quota_bytes, 8 << 20);
    assert_eq!(
        ctxhost_runtime::Limits::default().state_dir_quota_bytes,
        256 << 20
    );
    let err = parse("{ plugins: { entries: { e: { limits: { stateDirQuotaMiB: 0 } } } } }")
        .unwrap_err()
        .to_string();
    assert!(err.contains("limits.stateDirQuotaMiB"), "{err}");
}

#[test]
fn an_unknown_limit_is_an_error_that_names_the_one_meant() {
    let err = parse("{ plugins: { entries: { e: { limits: { callTimeoutMS: 10 } } } } }")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("plugins.entries.e.limits.callTimeoutMS"),
        "{err}"
    );
    assert!(err.contains("did you mean `callTimeoutMs`"), "{err}");
    let err = parse("{ plugins: { entries: { e: { limits: { cpus: 2 } } } } }")
        .unwrap_err()
        .to_string();
    assert!(err.contains("the limits are memoryMiB, "), "{err}");
    let err = parse("{ plugins: { entries: { e: { limits: { memoryMiB: '64' } } } } }")
        .unwrap_err()
        .to_string();
    assert!(err.contains("plugins.entries.e.limits"), "{err}");
}

/// The README's table of limits is written by hand: it must list every key with its default.
#[test]
fn the_readme_lists_every_limit_with_its_default() {
    let readme = include_str!("../../../README.md");
    let defaults = ctxhost_runtime::Limits::default();
    for limit in ctxhost_runtime::LIMIT_KEYS {
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", limit.key)))
            .unwrap_or_else(|| panic!("README.md has no row for `{}`", limit.key));
        let default = limit.get(&defaults).to_string();
        let written: String = row
            .split('|')
            .nth(2)
            .unwrap()
            .chars()
            .filter(char::is_ascii_digit)
            .collect();
        assert!(
            written.starts_with(&default),
            "{row}: the default is {default}"
        );
    }
}

#[test]
fn missing_home_config_is_defaults_but_missing_flag_path_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    let config = Config::load(ConfigSource::Home(home.default_config_path())).unwrap();
    assert!(!config.found);
    let err = Config::load(ConfigSource::Flag(dir.path().join("nope.json"))).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }), "{err}");
}
