//! The hits of one search: each indexed text once (the same request sent again, the same error
//! on every retry would otherwise push every other text off the list). Copies are told apart
//! by a key of their indexed text kept in the index, so no entry is decoded to compare them.

/// A match as a round ranks it: where it is and which text it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ranked {
    pub(crate) seq: usize,
    /// The same for every entry of the same indexed text: [`copy_key`].
    pub(crate) copy: i64,
}

/// What tells copies of a text apart from other texts: the first 8 bytes of the indexed
/// text's BLAKE3 hash.
pub(crate) fn copy_key(indexed: &str) -> i64 {
    let hash = blake3::hash(indexed.as_bytes());
    i64::from_le_bytes(hash.as_bytes()[..8].try_into().expect("8 of 32 bytes"))
}

/// The matches listed so far, best first. Of a text's copies the best-ranked is listed, unless
/// a later one is out of the model's context while the listed one is in it: the copy the model
/// cannot see is the one a search is for.
pub(crate) struct Listed<F> {
    pub(crate) rows: Vec<Ranked>,
    limit: usize,
    in_context: F,
}

impl<F: Fn(usize) -> bool> Listed<F> {
    pub(crate) fn new(limit: usize, in_context: F) -> Self {
        Self {
            rows: Vec::new(),
            limit,
            in_context,
        }
    }

    pub(crate) fn is_full(&self) -> bool {
        self.rows.len() >= self.limit
    }

    pub(crate) fn offer(&mut self, row: Ranked) {
        if self.rows.iter().any(|listed| listed.seq == row.seq) {
            return;
        }
        match self.rows.iter().position(|listed| listed.copy == row.copy) {
            Some(at) => {
                if !(self.in_context)(row.seq) && (self.in_context)(self.rows[at].seq) {
                    self.rows[at] = row;
                }
            }
            None if !self.is_full() => self.rows.push(row),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_listed_once_by_its_copy_out_of_context() {
        // Entries from 10 on are in the context; the ranking put the in-context copy first.
        let mut listed = Listed::new(3, |seq| seq >= 10);
        let offer = |listed: &mut Listed<_>, seq, text: &str| {
            listed.offer(Ranked {
                seq,
                copy: copy_key(text),
            })
        };
        offer(&mut listed, 12, "socket timeout");
        offer(&mut listed, 11, "socket timeout");
        offer(&mut listed, 3, "socket timeout");
        offer(&mut listed, 4, "socket timeout");
        offer(&mut listed, 13, "the deploy script times out");
        offer(&mut listed, 2, "retry the upload");
        offer(&mut listed, 1, "one text too many");
        let seqs: Vec<usize> = listed.rows.iter().map(|r| r.seq).collect();
        assert_eq!(
            seqs,
            [3, 13, 2],
            "the first compacted copy stands for its text"
        );
    }

    #[test]
    fn copies_share_a_key_and_other_texts_do_not() {
        assert_eq!(copy_key("socket timeout"), copy_key("socket timeout"));
        assert_ne!(copy_key("socket timeout"), copy_key("socket timeout "));
    }
}
