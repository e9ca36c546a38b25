//! Against a real HTTP server on 127.0.0.1 started by each test (bounded: it answers a fixed
//! script of responses, then stops).

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::*;
use crate::model::ModelSummarizer;
use ctxhost_transcript::compaction::{Summarizer, SummaryRequest, Tier, builtin};
use ctxhost_transcript::{MessageView, Role};

// The request reader and answers the binary's tests use too.
#[path = "../../../tests/common/http.rs"]
mod http;

enum Reply {
    Status(u16, &'static str),
    Sleep(u64),
}

struct Server {
    base_url: String,
    requests: Arc<Mutex<Vec<String>>>,
    handle: Option<JoinHandle<()>>,
}

fn serve(script: Vec<Reply>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    let handle = std::thread::spawn(move || {
        for reply in script {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let (request, stream) = http::read_request(stream);
            seen.lock().unwrap().push(request);
            let (status, body) = match reply {
                Reply::Status(status, text) => (
                    status,
                    if status == 200 && !text.starts_with('{') && !text.starts_with('<') {
                        http::completion(text)
                    } else {
                        text.to_string()
                    },
                ),
                Reply::Sleep(ms) => {
                    std::thread::sleep(Duration::from_millis(ms));
                    (200, http::completion("late"))
                }
            };
            http::respond(stream, status, &body);
        }
    });
    Server {
        base_url,
        requests,
        handle: Some(handle),
    }
}

impl Server {
    fn client(&self, key: Option<&str>) -> OpenAiCompatible {
        let config = OpenAiConfig {
            base_url: self.base_url.clone(),
            model_name: "test-model".into(),
            timeout: Duration::from_millis(400),
            backoff_min: Duration::from_millis(1),
            backoff_max: Duration::from_millis(5),
            ..OpenAiConfig::default()
        };
        OpenAiCompatible::with_key(&config, key.map(str::to_string))
    }

    fn requests(&mut self) -> Vec<String> {
        if let Some(h) = self.handle.take() {
            h.join().unwrap();
        }
        self.requests.lock().unwrap().clone()
    }
}

fn messages() -> Vec<MessageView> {
    vec![MessageView {
        role: Role::User,
        timestamp: 0,
        text: "Fix the parser".into(),
        tool_calls: vec![],
        tool_name: None,
        is_error: false,
        stop_reason: None,
        usage: None,
        tokens: 4,
    }]
}

fn request(m: &[MessageView]) -> SummaryRequest<'_> {
    SummaryRequest {
        messages: m,
        previous_summary: Some("earlier"),
        focus: Some("tests"),
        current_request: None,
    }
}

const KEY: &str = "sk-secret-value-123";

#[test]
fn success_sends_model_key_and_conversation() {
    let mut server = serve(vec![Reply::Status(200, "## Goal\n- fix it")]);
    let m = messages();
    let summarizer = ModelSummarizer::new(Box::new(server.client(Some(KEY))));
    let s = summarizer.summarize(&request(&m)).unwrap();
    // The model's text, then the facts the host copies from the messages.
    assert_eq!(
        s,
        "## Goal\n- fix it\n\n## Facts extracted by the host\n\n## Current task\n- Fix the parser"
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert!(r.starts_with("POST /v1/chat/completions"), "{r}");
    assert!(r.contains(&format!("Bearer {KEY}")));
    assert!(r.contains("\"model\":\"test-model\""));
    assert!(r.contains("Fix the parser") && r.contains("earlier") && r.contains("tests"));
}

#[test]
fn retries_429_then_succeeds() {
    let mut server = serve(vec![
        Reply::Status(429, "{\"error\":\"slow down\"}"),
        Reply::Status(503, "{}"),
        Reply::Status(200, "merged"),
    ]);
    let summarizer = ModelSummarizer::new(Box::new(server.client(None)));
    let s = summarizer.merge(&["a".into(), "b".into()], None).unwrap();
    assert_eq!(s, "merged");
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn server_error_forever_falls_back_to_the_note_tier() {
    // 1 + 3 retries for the full attempt; no oversized messages, so no partial attempt.
    let mut server = serve((0..4).map(|_| Reply::Status(500, "down")).collect());
    let summarizer = ModelSummarizer::new(Box::new(server.client(Some(KEY))));
    let m = messages();
    let mut errors = Vec::new();
    let (text, tier) =
        builtin::summarize_with_fallback(&summarizer, &request(&m), 100_000, &mut errors);
    assert_eq!(tier, Tier::Note);
    assert!(text.contains("HTTP 500"), "{text}");
    assert!(text.contains("## Current task\n- Fix the parser"), "{text}");
    assert_eq!(server.requests().len(), 4);
    for e in &errors {
        assert!(!e.contains(KEY), "{e}");
    }
    assert!(!text.contains(KEY));
}

#[test]
fn timeout_is_retried_and_reported() {
    let mut server = serve((0..2).map(|_| Reply::Sleep(800)).collect());
    let mut config = OpenAiConfig {
        base_url: server.base_url.clone(),
        model_name: "m".into(),
        timeout: Duration::from_millis(150),
        retries: 1,
        backoff_min: Duration::from_millis(1),
        backoff_max: Duration::from_millis(1),
        ..OpenAiConfig::default()
    };
    config.api_key_env = None;
    let client = OpenAiCompatible::with_key(&config, Some(KEY.into()));
    let started = std::time::Instant::now();
    let err = client.chat(None, "hi", None).unwrap_err();
    assert!(matches!(err, ModelError::Timeout { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(!err.to_string().contains(KEY));
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn malformed_body_is_not_retried() {
    let mut server = serve(vec![
        Reply::Status(200, "<html>not json</html>"),
        Reply::Status(200, "{\"choices\":[]}"),
    ]);
    let client = server.client(None);
    let err = client.chat(None, "hi", None).unwrap_err();
    assert!(matches!(err, ModelError::Malformed { .. }), "{err:?}");
    assert!(err.to_string().contains("not JSON"), "{err}");
    let err = client.chat(None, "hi", None).unwrap_err();
    assert!(
        err.to_string().contains("choices[0].message.content"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn missing_key_variable_names_the_variable_only() {
    let config = OpenAiConfig {
        api_key_env: Some("CTXHOST_TEST_SURELY_UNSET_KEY".into()),
        model_name: "m".into(),
        ..OpenAiConfig::default()
    };
    let err = OpenAiCompatible::from_env(&config).unwrap_err();
    assert!(
        err.to_string().contains("CTXHOST_TEST_SURELY_UNSET_KEY"),
        "{err}"
    );
    let client = OpenAiCompatible::with_key(&config, Some(KEY.into()));
    assert!(!format!("{client:?}").contains(KEY));
    assert_eq!(client.backoff(1), Duration::from_millis(500));
    assert_eq!(client.backoff(3), Duration::from_millis(2000));
    assert_eq!(client.backoff(9), Duration::from_millis(5000));
}
