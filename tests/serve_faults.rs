//! `ctxhost serve` with a hostile engine: a fault in one session is an error response naming
//! the engine and function, the session recovers on its next call, and other sessions on the
//! same server keep working meanwhile. Runs the server in-process over a unix socket pair.

use std::sync::Arc;

use ctxhost_serve::{ServeOptions, Server};
use ctxhost_tests::{HOSTILE_WASM, Scratch, block_on};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

struct Client {
    write: tokio::net::unix::OwnedWriteHalf,
    read: tokio::io::Lines<BufReader<tokio::net::unix::OwnedReadHalf>>,
    next_id: u64,
    pending: std::collections::HashMap<u64, Value>,
}

impl Client {
    async fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let line =
            json!({ "jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params });
        self.write
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        self.next_id
    }

    async fn response(&mut self, id: u64) -> Value {
        if let Some(response) = self.pending.remove(&id) {
            return response;
        }
        loop {
            let line = self.read.next_line().await.unwrap().expect("a response");
            let response: Value = serde_json::from_str(&line).unwrap();
            let got = response["id"].as_u64().unwrap();
            if got == id {
                return response;
            }
            self.pending.insert(got, response);
        }
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params).await;
        self.response(id).await
    }
}

/// A client connected to `server` over a socket pair, and the task serving it.
fn connect(server: &Arc<Server>) -> (Client, tokio::task::JoinHandle<()>) {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let (read, write) = theirs.into_split();
    let serving = {
        let server = server.clone();
        tokio::spawn(async move {
            server
                .serve_connection(tokio::io::BufReader::new(read), write)
                .await
        })
    };
    let (read, write) = ours.into_split();
    let client = Client {
        write,
        read: BufReader::new(read).lines(),
        next_id: 0,
        pending: Default::default(),
    };
    (client, serving)
}

fn user(text: &str) -> Value {
    json!({ "role": "user", "content": text, "timestamp": 1 })
}

#[test]
fn an_engine_fault_is_an_error_for_its_session_only() {
    let scratch = Scratch::new();
    scratch.install("hostile", std::path::Path::new(HOSTILE_WASM));
    let host = scratch.host(r#"{ plugins: { slots: { contextEngine: "hostile" } } }"#);
    block_on(async move {
        let server = Server::new(Arc::new(host), ServeOptions::default());
        let (mut client, serving) = connect(&server);
        for key in ["panic", "benign-1"] {
            let boot = client
                .call("session.bootstrap", json!({ "sessionKey": key }))
                .await;
            assert!(boot.get("result").is_some(), "{boot}");
            let commit = client
                .call(
                    "session.commitTurn",
                    json!({ "sessionKey": key, "advancementKey": "t1", "messages": [user(key)] }),
                )
                .await;
            assert_eq!(commit["result"]["status"], "committed", "{commit}");
        }
        // Both assembles in flight at once: the panicking one fails, the other answers.
        let faulty = client
            .send(
                "session.assemble",
                json!({ "sessionKey": "panic", "messageCount": 1 }),
            )
            .await;
        let healthy = client
            .send(
                "session.assemble",
                json!({ "sessionKey": "benign-1", "messageCount": 1 }),
            )
            .await;
        let error = client.response(faulty).await;
        assert_eq!(error["error"]["code"], -32002, "{error}");
        assert_eq!(error["error"]["data"]["engine"], "hostile");
        assert_eq!(error["error"]["data"]["function"], "assemble");
        let ok = client.response(healthy).await;
        assert_eq!(ok["result"]["items"], json!([{ "index": 0 }]), "{ok}");
        // The benign instance saw only its own message: no cross-talk.
        assert_eq!(
            ok["result"]["systemPromptAddition"],
            json!("[\"benign-1\"]")
        );

        // The faulty session recovers with a fresh instance: its other hooks still answer,
        // and its mirror kept the committed turn.
        let after = client
            .call(
                "session.commitTurn",
                json!({ "sessionKey": "panic", "advancementKey": "t2", "messages": [user("again")] }),
            )
            .await;
        assert_eq!(
            after["result"],
            json!({ "status": "committed", "messageCount": 2 }),
            "{after}"
        );
        let again = client
            .call(
                "session.assemble",
                json!({ "sessionKey": "benign-1", "messageCount": 1 }),
            )
            .await;
        assert!(again.get("result").is_some(), "{again}");

        let bye = client.call("shutdown", json!({})).await;
        assert_eq!(bye["result"], json!({}));
        serving.await.unwrap();
    });
}

#[test]
fn a_refused_bootstrap_leaves_no_session_behind() {
    let scratch = Scratch::new();
    let host = scratch.host("{}");
    // The sessions dir is a file: no mirror can be created under it.
    let sessions = scratch.home().sessions_dir();
    std::fs::create_dir_all(sessions.parent().unwrap()).unwrap();
    std::fs::write(&sessions, "not a directory").unwrap();
    block_on(async move {
        let server = Server::new(Arc::new(host), ServeOptions::default());
        let (mut client, serving) = connect(&server);
        for attempt in 0..3 {
            let refused = client
                .call(
                    "session.bootstrap",
                    json!({ "sessionKey": format!("s{attempt}") }),
                )
                .await;
            assert_eq!(refused["error"]["code"], -32004, "{refused}");
        }
        // A key that cannot be a file name is refused before any session state exists.
        let long = client
            .call(
                "session.bootstrap",
                json!({ "sessionKey": "k".repeat(1 << 20) }),
            )
            .await;
        assert_eq!(long["error"]["code"], -32602, "{long}");
        assert!(long.to_string().len() < 4096, "the key came back");
        assert_eq!(server.session_count(), 0);
        let bye = client.call("shutdown", json!({})).await;
        assert_eq!(bye["result"], json!({}));
        serving.await.unwrap();
    });
}
