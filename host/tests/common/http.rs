//! A chat-completions endpoint for tests, over plain TCP on 127.0.0.1: a connection carries
//! one request, read whole, and one answer. The binary's tests use it through `common`, the
//! model client's unit tests include this file by path.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

/// One request read off `stream`: its head and body as text (what tests assert on), and the
/// stream to answer on.
pub(crate) fn read_request(stream: TcpStream) -> (String, TcpStream) {
    let mut reader = BufReader::new(stream);
    let (mut request, mut length) = (String::new(), 0);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        request.push_str(&line);
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    request.push_str(&String::from_utf8_lossy(&body));
    (request, reader.into_inner())
}

/// Answers with `status` and `body` (sent as JSON, whatever it holds), then closes.
pub(crate) fn respond(mut stream: TcpStream, status: u16, body: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status} Stub\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A chat completion whose assistant message says `text`.
pub(crate) fn completion(text: &str) -> String {
    serde_json::json!({"choices": [{"message": {"role": "assistant", "content": text}}]})
        .to_string()
}
