//! A forward scanner over one line of JSON that validates as it goes and measures strings where
//! they lie, for the fast path in `envelope`: it builds no value and no string, and answers
//! `None` for anything serde might read otherwise.

use std::ops::Range;

/// serde_json refuses deeper nesting; deeper lines go to it for its error.
const MAX_DEPTH: usize = 100;

/// A string literal: where its content sits and how long it is.
#[derive(Debug, Clone, Copy)]
pub(super) struct Str {
    start: usize,
    end: usize,
    /// Chars of the literal as written (escapes count as their spelling), quotes excluded.
    raw_chars: usize,
    /// Chars of the decoded string.
    pub(super) chars: usize,
    escaped: bool,
    /// A `\u` escape: serde decodes such a string when it is a message's whole `content`
    /// (and refuses lone surrogates), so that case is left to it.
    pub(super) unicode: bool,
}

pub(super) struct Scan<'a> {
    pub(super) b: &'a [u8],
    pub(super) i: usize,
    /// Count chars (for token estimates); a check of the line alone leaves them at 0.
    pub(super) measure: bool,
    /// A `\u` escape of half a surrogate pair was passed: every reader replaces it first
    /// (see `lenient`), so a line with one is not what this scan saw.
    pub(super) lone_surrogate: bool,
}

/// The 16 bytes of `chunk` as two bit masks (bit `k` for byte `k`): the bytes that end a run
/// of plain string text (a quote, a backslash, or a control character, which JSON strings may
/// not hold) and, when `measure`, the UTF-8 continuation bytes (a string's length in chars is
/// its bytes minus those). Text is most of a transcript's bytes: this is the scanner's inner
/// loop, sixteen bytes per step with SSE2, which every x86-64 CPU has.
#[cfg(target_arch = "x86_64")]
fn masks(chunk: &[u8; 16], measure: bool) -> (u32, u32) {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is in the x86-64 baseline (the compiler assumes it everywhere), and the
    // load reads the 16 bytes of `chunk`.
    unsafe {
        let x = _mm_loadu_si128(chunk.as_ptr().cast());
        let quote = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8));
        // max(x, 0x1f) == 0x1f exactly for the bytes 0x00..=0x1f.
        let low = _mm_set1_epi8(0x1f);
        let control = _mm_cmpeq_epi8(_mm_max_epu8(x, low), low);
        let stop = _mm_or_si128(_mm_or_si128(quote, backslash), control);
        // Continuation bytes are -128..=-65 as signed bytes; ASCII has none.
        let continuation = if measure && _mm_movemask_epi8(x) != 0 {
            _mm_movemask_epi8(_mm_cmplt_epi8(x, _mm_set1_epi8(-64))) as u32
        } else {
            0
        };
        (_mm_movemask_epi8(stop) as u32, continuation)
    }
}

/// [`masks`] elsewhere, a byte at a time.
#[cfg(not(target_arch = "x86_64"))]
fn masks(chunk: &[u8; 16], measure: bool) -> (u32, u32) {
    masks_bytewise(chunk, measure)
}

/// What [`masks`] computes, a byte at a time: the definition the SSE2 path is tested against.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn masks_bytewise(chunk: &[u8; 16], measure: bool) -> (u32, u32) {
    let (mut stop, mut continuation) = (0, 0);
    for (k, &c) in chunk.iter().enumerate() {
        stop |= u32::from(c == b'"' || c == b'\\' || c < 0x20) << k;
        continuation |= u32::from(measure && c & 0xC0 == 0x80) << k;
    }
    (stop, continuation)
}

/// The first byte at or after `j` that ends a run of plain string text (see [`masks`]), or
/// `b.len()`, and the continuation bytes before it when `measure`.
fn plain_run(b: &[u8], mut j: usize, measure: bool) -> (usize, usize) {
    let mut cont = 0;
    while let Some(chunk) = b.get(j..j + 16) {
        let (stop, continuation) = masks(chunk.try_into().unwrap_or(&[0; 16]), measure);
        if stop != 0 {
            let n = stop.trailing_zeros() as usize;
            return (j + n, cont + count_below(continuation, n));
        }
        cont += count_below(continuation, 16);
        j += 16;
    }
    // The last bytes of the line, one at a time.
    while let Some(&c) = b.get(j) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            break;
        }
        cont += usize::from(measure && c & 0xC0 == 0x80);
        j += 1;
    }
    (j, cont)
}

/// Set bits of `mask` below bit `n`. Counting bits takes a dozen instructions without a
/// popcount one, so ASCII text (no bits) skips it.
fn count_below(mask: u32, n: usize) -> usize {
    if mask == 0 {
        return 0;
    }
    (mask & !(u32::MAX << n)).count_ones() as usize
}

/// What a string literal's escapes add up to, as they are passed.
#[derive(Default)]
struct Escapes {
    /// Chars they save when decoded.
    shrink: usize,
    any: bool,
    pub(super) unicode: bool,
}

impl<'a> Scan<'a> {
    /// A scan of `line` from its start; `measure` counts chars.
    pub(super) fn new(line: &'a str, measure: bool) -> Scan<'a> {
        Scan {
            b: line.as_bytes(),
            i: 0,
            measure,
            lone_surrogate: false,
        }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    pub(super) fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// A string literal at `i` (after whitespace): its text is passed by [`plain_run`], from
    /// escape to escape.
    pub(super) fn string(&mut self) -> Option<Str> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        let mut esc = Escapes::default();
        let (end, cont) = self.string_end(start, &mut esc)?;
        let raw = end - start - cont;
        self.i = end + 1;
        Some(Str {
            start,
            end,
            raw_chars: raw,
            chars: raw - esc.shrink,
            escaped: esc.any,
            unicode: esc.unicode,
        })
    }

    /// The closing quote of the string whose text starts at `start`, and the UTF-8
    /// continuation bytes before it (when measuring); the escapes on the way go to `esc`.
    #[inline]
    fn string_end(&mut self, start: usize, esc: &mut Escapes) -> Option<(usize, usize)> {
        let mut j = start; // the bytes before `j` are passed
        let mut cont = 0usize; // continuation bytes
        loop {
            let (k, c) = plain_run(self.b, j, self.measure);
            cont += c;
            match *self.b.get(k)? {
                b'"' => return Some((k, cont)),
                b'\\' => j = self.escape(k, esc)?,
                _ => return None, // a control character
            }
        }
    }

    /// The escape at `k` (a backslash): where the text after it starts.
    fn escape(&mut self, k: usize, esc: &mut Escapes) -> Option<usize> {
        esc.any = true;
        match *self.b.get(k + 1)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                esc.shrink += 1;
                Some(k + 2)
            }
            b'u' => self.unicode_escape(k, esc),
            _ => None,
        }
    }

    /// The `\u` escape at `k`: where the text after it starts. A high surrogate followed by
    /// another escape is one char of 12 bytes, as `tokens::json_string_chars` counts it.
    #[inline]
    fn unicode_escape(&mut self, k: usize, esc: &mut Escapes) -> Option<usize> {
        let b = self.b;
        esc.unicode = true;
        let unit = hex4(b.get(k + 2..k + 6)?)?;
        let next = b.get(k + 6..k + 12).filter(|e| e.starts_with(b"\\u"));
        if (0xD800..0xDC00).contains(&unit) && next.is_some() {
            let low = hex4(&next?[2..])?;
            self.lone_surrogate |= !(0xDC00..0xE000).contains(&low);
            esc.shrink += 11;
            Some(k + 12)
        } else {
            self.lone_surrogate |= (0xD800..0xE000).contains(&unit);
            esc.shrink += 5;
            Some(k + 6)
        }
    }

    /// A string without escapes (ids, types, roles): its content.
    pub(super) fn plain(&mut self) -> Option<Range<usize>> {
        let s = self.string()?;
        (!s.escaped).then_some(s.start..s.end)
    }

    /// `null`, or a string without escapes.
    pub(super) fn plain_or_null(&mut self) -> Option<Option<Range<usize>>> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(None);
        }
        self.plain().map(Some)
    }

    pub(super) fn literal(&mut self, word: &[u8]) -> Option<usize> {
        self.peek()?;
        (self.b.get(self.i..self.i + word.len())? == word).then(|| {
            self.i += word.len();
            word.len()
        })
    }

    pub(super) fn is_null(&mut self) -> Option<bool> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(true);
        }
        Some(false)
    }

    /// A JSON number; its length in chars.
    fn number(&mut self) -> Option<usize> {
        self.peek()?;
        let start = self.i;
        self.i = number_end(self.b, start)?;
        Some(self.i - start)
    }

    /// A whole number written plainly (what token counts are): its value as serde reads it.
    /// Anything else (fractions, exponents, signs, 16+ digits) is left to serde.
    pub(super) fn count(&mut self) -> Option<f64> {
        self.peek()?;
        let start = self.i;
        let len = self.number()?;
        let text = &self.b[start..start + len];
        if len > 15 || !text.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let n = text.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        Some(n as f64)
    }

    /// Any value, checked; its length as `JSON.stringify` writes it (whitespace dropped,
    /// strings as spelled), which is how tool-call arguments are counted.
    pub(super) fn value(&mut self, depth: usize) -> Option<usize> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(|s| s.raw_chars + 2),
            b'{' => self.object_value(depth),
            b'[' => self.array_value(depth),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        }
    }

    /// An object at `depth`, in chars as written.
    fn object_value(&mut self, depth: usize) -> Option<usize> {
        self.sequence(b'}', |s| {
            let key = s.string()?.raw_chars + 3; // quotes and colon
            s.eat(b':')?;
            Some(key + s.value(depth + 1)?)
        })
    }

    /// An array at `depth`, in chars as written.
    fn array_value(&mut self, depth: usize) -> Option<usize> {
        self.sequence(b']', |s| s.value(depth + 1))
    }

    /// The items of an object or array, each read by `item`, between its opening bracket (at
    /// the cursor) and `close`.
    pub(super) fn items(
        &mut self,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        self.i += 1;
        if self.peek()? == close {
            self.i += 1;
            return Some(());
        }
        loop {
            item(self)?;
            match self.peek()? {
                b',' => self.i += 1,
                c if c == close => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// [`Scan::items`] in chars as written: brackets, items and the commas between them.
    fn sequence(
        &mut self,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Option<usize>,
    ) -> Option<usize> {
        let (mut chars, mut count) = (2, 0usize);
        self.items(close, |s| {
            chars += item(s)?;
            count += 1;
            Some(())
        })?;
        Some(chars + count.saturating_sub(1))
    }

    /// The members of an object: calls `member` with each key that is one of `names` (None for
    /// any other) and leaves the scanner at its value, which `member` must consume. Members
    /// are told by name, so the order of a table binds nothing. A key spelled with escapes, or
    /// a named member given twice, ends the fast path.
    pub(super) fn object(
        &mut self,
        names: &[&'static [u8]],
        mut member: impl FnMut(&mut Self, Option<&'static [u8]>) -> Option<()>,
    ) -> Option<()> {
        if self.peek()? != b'{' {
            return None;
        }
        let mut seen = 0u32;
        self.items(b'}', |s| {
            let which = s.key(names, &mut seen)?;
            s.eat(b':')?;
            member(s, which)
        })
    }

    /// A member's key, as one of `names` (None for any other), marked in `seen`; a key with
    /// escapes or a named member seen before ends the fast path.
    #[inline]
    fn key(&mut self, names: &[&'static [u8]], seen: &mut u32) -> Option<Option<&'static [u8]>> {
        let key = self.string()?;
        if key.escaped {
            return None;
        }
        let name = &self.b[key.start..key.end];
        let Some(k) = names.iter().position(|n| *n == name) else {
            return Some(None);
        };
        if *seen & (1 << k) != 0 {
            return None;
        }
        *seen |= 1 << k;
        Some(Some(names[k]))
    }

    pub(super) fn bool_or_null(&mut self) -> Option<Option<bool>> {
        match self.peek()? {
            b't' => self.literal(b"true").map(|_| Some(true)),
            b'f' => self.literal(b"false").map(|_| Some(false)),
            _ => self.literal(b"null").map(|_| None),
        }
    }

    /// Any value, its length as written (see [`Scan::value`]), or null.
    pub(super) fn value_or_null(&mut self, depth: usize) -> Option<Option<usize>> {
        if self.is_null()? {
            return Some(None);
        }
        self.value(depth).map(Some)
    }

    /// A member holding a string measured in chars, or null.
    pub(super) fn chars_or_null(&mut self) -> Option<Option<usize>> {
        if self.is_null()? {
            return Some(None);
        }
        self.string().map(|s| Some(s.chars))
    }
}

/// Where the JSON number at `start` ends: sign, integer part, fraction, exponent.
#[inline]
fn number_end(b: &[u8], start: usize) -> Option<usize> {
    let mut j = start + usize::from(b.get(start) == Some(&b'-'));
    match b.get(j)? {
        b'0' => j += 1,
        b'1'..=b'9' => j = digits_end(b, j),
        _ => return None,
    }
    if b.get(j) == Some(&b'.') {
        j = some_digits_end(b, j + 1)?;
    }
    if matches!(b.get(j), Some(b'e' | b'E')) {
        j += 1;
        j += usize::from(matches!(b.get(j), Some(b'+' | b'-')));
        j = some_digits_end(b, j)?;
    }
    Some(j)
}

/// The end of the digits from `j` on (`j` when there are none).
#[inline]
fn digits_end(b: &[u8], mut j: usize) -> usize {
    while b.get(j).is_some_and(u8::is_ascii_digit) {
        j += 1;
    }
    j
}

/// The end of the digits from `j` on, of which there must be one at least.
#[inline]
fn some_digits_end(b: &[u8], j: usize) -> Option<usize> {
    let end = digits_end(b, j);
    (end > j).then_some(end)
}

fn hex4(b: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(b).ok()?;
    if !text.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u16::from_str_radix(text, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vector_masks_are_the_bytewise_ones_for_every_byte_at_every_position() {
        for byte in 0..=255u8 {
            for at in 0..16 {
                let mut chunk = [b'a'; 16];
                chunk[at] = byte;
                chunk[(at + 7) % 16] = 0xC3; // a lead byte beside it
                for measure in [false, true] {
                    assert_eq!(
                        masks(&chunk, measure),
                        masks_bytewise(&chunk, measure),
                        "byte {byte:#04x} at {at}, measure {measure}"
                    );
                }
            }
        }
    }
}
