//! Reading transcript files. The session header is read and checked before anything else, so
//! a file that is not a transcript (a 2 GB sparse file, a binary) is refused after at most
//! [`MAX_HEADER`] bytes instead of being read whole. A UTF-8 byte order mark (Windows editors
//! write one) is accepted; invalid UTF-8 is reported with its line.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::Path;

use crate::entry::Header;
use crate::error::TranscriptError;

/// Longest header line accepted (real headers are a few hundred bytes).
pub(crate) const MAX_HEADER: usize = 1 << 20;

/// The UTF-8 byte order mark.
pub(crate) const BOM: &str = "\u{feff}";

/// The header line of a file and where it sits.
pub(crate) struct Head {
    pub header: Header,
    /// The header line without BOM, `\r` or newline.
    pub text: String,
    /// 1-based line of the header (blank lines may precede it).
    pub line: usize,
    /// Byte offset just after the header line's newline (the file length without one).
    pub body_start: u64,
}

fn io<'a>(path: &'a Path, action: &'static str) -> impl Fn(std::io::Error) -> TranscriptError + 'a {
    move |e| TranscriptError::io(path, action, e)
}

/// Opens a transcript for reading, refusing what is not a regular file first: opening a FIFO
/// waits for a writer forever, and a device or socket is never a transcript. Every reader of
/// a transcript opens it here, so every command gives the same answer.
pub(crate) fn open_transcript(path: &Path) -> Result<File, TranscriptError> {
    let meta = std::fs::metadata(path).map_err(io(path, "cannot open transcript"))?;
    if !meta.is_file() {
        let kind = describe_file_type(&meta.file_type());
        let problem = format!("it is {kind}, not a regular file");
        let error = std::io::Error::new(std::io::ErrorKind::InvalidInput, problem);
        return Err(TranscriptError::io(path, "cannot open transcript", error));
    }
    File::open(path).map_err(io(path, "cannot open transcript"))
}

#[cfg(unix)]
fn describe_file_type(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else {
        "not a file"
    }
}

/// Elsewhere (the crate also builds for wasm guests) only directories are told apart.
#[cfg(not(unix))]
fn describe_file_type(kind: &std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

/// Read and check the header at the start of `file`.
pub(crate) fn read_head(file: &mut File, path: &Path) -> Result<Head, TranscriptError> {
    let source = path.display().to_string();
    let head = read_first_line(file, path)?;
    let (range, line) = header_line(&head, &source)?;
    let body_start = (range.end + 1).min(head.len()) as u64;
    let text = header_text(&head[range], line, &source)?;
    let header = Header::parse(&text).map_err(|p| TranscriptError::invalid(&source, line, p))?;
    Ok(Head {
        header,
        text,
        line,
        body_start,
    })
}

/// The start of `file`, read in small steps until the first non-blank line ends: a real
/// header is a few hundred bytes, and reading the whole megabyte would read a small file twice.
fn read_first_line(file: &mut File, path: &Path) -> Result<Vec<u8>, TranscriptError> {
    file.seek(SeekFrom::Start(0))
        .map_err(io(path, "cannot seek"))?;
    let limit = (MAX_HEADER + BOM.len()) as u64;
    let mut head = Vec::new();
    loop {
        let step = (64 << 10).min(limit - head.len() as u64);
        let before = head.len();
        file.take(step)
            .read_to_end(&mut head)
            .map_err(io(path, "cannot read transcript"))?;
        let ended = head.len() - before < step as usize || head.len() as u64 >= limit;
        if ended || first_line_ends(&head) {
            return Ok(head);
        }
    }
}

/// Where in `head` the first non-blank line (after a BOM) lies, without its line break, and
/// its 1-based line; an error when there is none, or it does not end within [`MAX_HEADER`].
fn header_line(head: &[u8], source: &str) -> Result<(Range<usize>, usize), TranscriptError> {
    let mut pos = if head.starts_with(BOM.as_bytes()) {
        BOM.len()
    } else {
        0
    };
    let mut line = 1;
    loop {
        let end = memchr::memchr(b'\n', &head[pos..]).map(|n| pos + n);
        let range = pos..end.unwrap_or(head.len());
        let blank = head[range.clone()].iter().all(u8::is_ascii_whitespace);
        match end {
            Some(end) if blank => {
                pos = end + 1;
                line += 1;
            }
            // A megabyte of blanks is no transcript either.
            None if head.len() > MAX_HEADER => {
                let why = format!("no line break in the first {} MiB", MAX_HEADER >> 20);
                return Err(not_a_header(source, line, &why));
            }
            None if blank => {
                let problem = "empty file: no session header";
                return Err(TranscriptError::invalid(source, 1, problem));
            }
            _ => return Ok((range, line)),
        }
    }
}

/// The header line as text (read as loading reads it), without a `\r`.
fn header_text(bytes: &[u8], line: usize, source: &str) -> Result<String, TranscriptError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let why = format!("not valid UTF-8 at byte {}", e.valid_up_to() + 1);
        not_a_header(source, line, &why)
    })?;
    let text = text.strip_suffix('\r').unwrap_or(text);
    Ok(crate::lenient::str(text).into_owned())
}

fn not_a_header(source: &str, line: usize, why: &str) -> TranscriptError {
    let problem = format!("first line is not a session header ({why})");
    TranscriptError::invalid(source, line, problem)
}

/// Whether `head` holds a line break after its first non-blank byte.
fn first_line_ends(head: &[u8]) -> bool {
    head.iter()
        .position(|b| !b.is_ascii_whitespace())
        .is_some_and(|p| memchr::memchr(b'\n', &head[p..]).is_some())
}

/// The whole file as text, once its header has been checked. A BOM is kept (parsing skips
/// it); invalid UTF-8 is an error naming the line.
pub(crate) fn read_text(path: &Path) -> Result<String, TranscriptError> {
    let mut file = open_transcript(path)?;
    read_head(&mut file, path)?;
    let len = file_len(&file, path)?;
    file.seek(SeekFrom::Start(0))
        .map_err(io(path, "cannot seek"))?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.read_to_end(&mut bytes)
        .map_err(io(path, "cannot read transcript"))?;
    text_of(bytes, &path.display().to_string())
}

/// The length of the open transcript `file` (at `path`).
pub(crate) fn file_len(file: &File, path: &Path) -> Result<u64, TranscriptError> {
    let meta = file
        .metadata()
        .map_err(io(path, "cannot stat transcript"))?;
    Ok(meta.len())
}

/// Bytes as UTF-8 text; the error names the line and the byte within it.
pub(crate) fn text_of(bytes: Vec<u8>, source: &str) -> Result<String, TranscriptError> {
    String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let bad = e.utf8_error().valid_up_to();
        let line_start = memchr::memrchr(b'\n', &bytes[..bad]).map_or(0, |n| n + 1);
        let line = 1 + memchr::memchr_iter(b'\n', &bytes[..bad]).count();
        invalid_utf8(source, line, bad - line_start)
    })
}

/// Invalid UTF-8 at byte `at` (from 0) of line `line`, in the words of every reader.
pub(crate) fn invalid_utf8(source: &str, line: usize, at: usize) -> TranscriptError {
    TranscriptError::invalid(
        source,
        line,
        format!("not valid UTF-8 at byte {} of the line", at + 1),
    )
}

/// The JSON objects of a line holding two or more written without a line break between them
/// (pi opens such files, skipping the line); None for anything else.
pub(crate) fn split_concatenated(line: &str) -> Option<Vec<&str>> {
    let mut parts = Vec::new();
    for value in
        serde_json::Deserializer::from_str(line).into_iter::<&serde_json::value::RawValue>()
    {
        let part = value.ok()?.get();
        if !part.starts_with('{') {
            return None;
        }
        parts.push(part);
    }
    (parts.len() >= 2).then_some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, bytes).unwrap();
        (dir, path)
    }

    const HEADER: &str = r#"{"type":"session","version":3,"id":"s","cwd":"/w"}"#;

    #[test]
    fn invalid_utf8_names_its_line_once() {
        let mut bytes =
            format!("{HEADER}\n{{\"type\":\"custom\",\"id\":\"a\",\"x\":\"ab").into_bytes();
        bytes.extend_from_slice(b"\xff\"}\n");
        let (_d, path) = write(&bytes);
        let e = read_text(&path).unwrap_err();
        assert_eq!(e.line(), Some(2), "{e}");
        let shown = e.to_string();
        assert!(
            shown.ends_with(":2: not valid UTF-8 at byte 34 of the line"),
            "{shown}"
        );
        assert_eq!(shown.matches("UTF-8").count(), 1, "{shown}");
        assert!(std::error::Error::source(&e).is_none());
    }

    #[test]
    fn a_bom_is_accepted() {
        let (_d, path) = write(format!("{BOM}{HEADER}\n").as_bytes());
        let mut f = File::open(&path).unwrap();
        let head = read_head(&mut f, &path).unwrap();
        assert_eq!(head.text, HEADER);
        assert_eq!(
            (head.line, head.body_start),
            (1, 3 + HEADER.len() as u64 + 1)
        );
        assert_eq!(head.header.id(), "s");
    }

    #[test]
    fn a_huge_file_without_a_header_is_refused_after_the_first_megabyte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse.jsonl");
        // 4 GiB of zeros without using the disk: only the header check may read it.
        let f = File::create(&path).unwrap();
        f.set_len(4 << 30).unwrap();
        drop(f);
        let started = std::time::Instant::now();
        let e = read_text(&path).unwrap_err();
        assert!(started.elapsed().as_secs() < 5);
        assert_eq!(e.line(), Some(1));
        assert!(e.to_string().contains("not a session header"), "{e}");
        // a header that is JSON but not a header is refused the same way, before the rest
        let (_d, path) = write(b"[1,2]\n{}\n");
        let e = read_text(&path).unwrap_err();
        assert!(e.to_string().contains("not a session header"), "{e}");
    }

    #[test]
    fn a_lone_unterminated_line_is_judged_as_a_header_not_as_empty() {
        let (_d, path) = write(br#"{"type":"session","version":3,"id""#);
        let e = read_text(&path).unwrap_err();
        assert!(!e.to_string().contains("empty"), "{e}");
        assert!(e.to_string().contains("not a session header"), "{e}");
        let (_d, path) = write(HEADER.as_bytes());
        assert_eq!(read_text(&path).unwrap(), HEADER);
        let (_d, path) = write(b"\n \n");
        assert!(
            read_text(&path)
                .unwrap_err()
                .to_string()
                .contains("empty file")
        );
    }
}
