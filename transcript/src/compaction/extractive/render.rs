//! A summary's sections as markdown, within its bound: the past gives way, never the present.
use super::*;

/// Per directory of a file list: its paths and the bytes of their names.
type DirSizes<'a> = HashMap<&'a str, (usize, usize)>;

impl Sections {
    /// Elides the oldest items of a list while its rendered lines pass `budget`. The size of
    /// the grouped lines is kept per directory as paths leave, not regrouped per path.
    pub(super) fn fit_files(list: &mut Vec<String>, elided: &mut usize, budget: usize) {
        let mut dirs = dir_sizes(list);
        let mut size: usize = dirs.iter().map(|(dir, d)| grouped_line_size(dir, *d)).sum();
        let mut cut = 0;
        while list.len() - cut > 1 && size > budget {
            let (dir, file) = dir_and_file(&list[cut]);
            if let Some(d) = dirs.get_mut(dir) {
                size -= grouped_line_size(dir, *d);
                *d = (d.0 - 1, d.1 - file.len());
                size += grouped_line_size(dir, *d);
            }
            cut += 1;
        }
        list.drain(..cut);
        *elided += cut;
    }

    pub(super) fn render(&self) -> String {
        let mut out = String::new();
        self.render_asks(&mut out);
        if !self.progress_in_recent() {
            optional_section(&mut out, "Progress", &self.progress);
        }
        self.render_record(&mut out);
        optional_section(&mut out, "Earlier context", &self.earlier);
        section(&mut out, "Recent exchanges", &self.recent);
        if out.is_empty() {
            out.push_str("## Current task\n- (no user requests in the compacted part)\n");
        }
        out.trim_end().to_string()
    }

    /// What the user asked: the task now and at the start, the focus, standing instructions
    /// and the request ledger.
    fn render_asks(&self, out: &mut String) {
        optional_section(out, "Current task", &self.current);
        if self.started != self.current {
            optional_section(out, "Started with", &self.started);
        }
        optional_section(out, "Focus", &self.focus);
        section(out, "Standing instructions", &self.instructions);
        let requests = self.requests.iter().cloned();
        let requests = with_elided(self.requests_elided, "requests", requests);
        section(out, "User requests", &requests);
    }

    /// What the tools left: failures, and the files modified and read.
    fn render_record(&self, out: &mut String) {
        let failures = self.failures.iter().map(Failure::render);
        let failures = with_elided(self.failures_elided, "failures", failures);
        section(out, "Tool failures", &failures);
        for (title, list, elided) in [
            ("Files modified", &self.modified, self.modified_elided),
            ("Files read", &self.read, self.read_elided),
        ] {
            section(
                out,
                title,
                &with_elided(elided, "files", grouped(list).into_iter()),
            );
        }
    }

    /// Renders within [`MAX_CHARS`], taking from the past first: recent exchanges, the model's
    /// earlier text, progress and the first request go whole; then the oldest items of the
    /// request ledger, failures (resolved ones first), modified and read files, each list in
    /// proportion to its share ([`SHARES`]), so no section is emptied for another. The current
    /// task, focus and standing instructions are never cut, nor the newest item of a list.
    pub(super) fn render_bounded(self) -> String {
        self.render_bounded_to(MAX_CHARS)
    }

    /// [`Self::render_bounded`] within `max_chars`.
    pub(super) fn render_bounded_to(mut self, max_chars: usize) -> String {
        Self::fit_files(
            &mut self.modified,
            &mut self.modified_elided,
            MODIFIED_FILES_BUDGET,
        );
        Self::fit_files(&mut self.read, &mut self.read_elided, READ_FILES_BUDGET);
        let mut size: usize = self.requests.iter().map(|r| r.len() + 3).sum();
        let mut cut = 0;
        while self.requests.len() - cut > 1 && size > REQUESTS_BUDGET {
            size -= self.requests[cut].len() + 3;
            cut += 1;
        }
        self.requests.drain(..cut);
        self.requests_elided += cut;
        self.shed_while_surely_over(max_chars);
        self.render_shedding(max_chars)
    }

    /// Renders, and while over `max_chars` gives up one thing of the past and renders again
    /// (see [`Self::render_bounded`]). Each step renders, so it comes after
    /// [`Self::shed_while_surely_over`], which leaves it a bounded number of steps.
    pub(super) fn render_shedding(mut self, max_chars: usize) -> String {
        loop {
            let out = self.render();
            let over = out.chars().count().saturating_sub(max_chars);
            if over == 0 {
                return out;
            }
            if self.shed_one_of_the_past(over) {
                continue;
            }
            let failures = self.failures.iter().map(|f| f.render().len() + 3).sum();
            match furthest_over_share(&self.list_sizes(failures), &self.list_lens()) {
                Some(list) => self.elide_oldest(list),
                // Only the present is left; it is bounded by construction.
                None => return out,
            }
        }
    }

    /// Gives up the first thing of the past still there: a recent exchange, the earlier text
    /// (clipped by `over` while more than 200 characters would stay), progress, or the first
    /// request (the start becomes the current task). False when none is left.
    fn shed_one_of_the_past(&mut self, over: usize) -> bool {
        if !self.recent.is_empty() {
            self.recent.remove(0);
            return true;
        }
        if let Some(e) = self.earlier.take() {
            let keep = e.chars().count().saturating_sub(over + 2);
            if keep > 200 {
                self.earlier = Some(clip(&e, keep));
            }
            return true;
        }
        if self.progress.take().is_some() {
            return true;
        }
        if self.started.is_some() && self.started != self.current {
            self.started = self.current.clone();
            return true;
        }
        false
    }

    /// Elides the oldest item of list `list` (in [`SHARES`] order); failures give up their
    /// oldest resolved one first.
    fn elide_oldest(&mut self, list: usize) {
        match list {
            0 => {
                self.requests.remove(0);
                self.requests_elided += 1;
            }
            1 => {
                let i = self.failures.iter().position(|f| f.resolved).unwrap_or(0);
                self.failures.remove(i);
                self.failures_elided += 1;
            }
            2 => {
                self.modified.remove(0);
                self.modified_elided += 1;
            }
            _ => {
                self.read.remove(0);
                self.read_elided += 1;
            }
        }
    }

    /// The rendered size of each list, in [`SHARES`] order, given the failures' size.
    fn list_sizes(&self, failures: usize) -> [usize; 4] {
        [
            self.requests.iter().map(|r| r.len() + 3).sum(),
            failures,
            grouped_size(&self.modified),
            grouped_size(&self.read),
        ]
    }

    /// The items of each list, in [`SHARES`] order; the read files count one more, since
    /// their newest may go too.
    fn list_lens(&self) -> [usize; 4] {
        [
            self.requests.len(),
            self.failures.len(),
            self.modified.len(),
            self.read.len() + 1,
        ]
    }
}

impl Sections {
    /// The steps the loop of [`Self::render_bounded_to`] takes while the summary is over
    /// `max_chars`, taken without rendering for as long as it surely is: the request and failure
    /// items alone (each at least `- ` and its text up to trailing blanks) pass `max_chars`.
    /// Then the loop drops recent exchanges, the earlier text and progress, rewinds the start,
    /// and sheds list items by the same rule, which needs only the lists' sizes, kept here as
    /// items leave. The loop then goes on from where this stops, so the result is the same as
    /// rendering after each step, without the render per step (quadratic in the failures a long
    /// session collects).
    pub(super) fn shed_while_surely_over(&mut self, max_chars: usize) {
        let failures: Vec<String> = self.failures.iter().map(Failure::render).collect();
        let surely = self.requests.iter().map(|r| least_size(r)).sum::<usize>()
            + failures.iter().map(|f| least_size(f)).sum::<usize>();
        if surely <= max_chars {
            return;
        }
        self.recent.clear();
        self.earlier = None;
        self.progress = None;
        if self.started.is_some() {
            self.started = self.current.clone();
        }
        let mut shed = SurelyOver::new(self, failures, surely);
        while shed.surely > max_chars {
            let Some(list) = furthest_over_share(&shed.sizes, &shed.lens) else {
                break;
            };
            shed.elide_oldest(self, list);
        }
        self.requests.drain(..shed.requests_gone);
        let mut gone = shed.failure_gone.into_iter();
        self.failures.retain(|_| !gone.next().unwrap_or(false));
    }
}

/// [`Sections::shed_while_surely_over`] under way: the lists' sizes and lengths kept as items
/// leave, and which requests and failures are gone (they leave their lists at the end, at
/// once, rather than one shift each).
struct SurelyOver {
    /// The failures, rendered once.
    failures: Vec<String>,
    /// The least the request and failure items left render to.
    surely: usize,
    sizes: [usize; 4],
    lens: [usize; 4],
    /// Requests leave from the front.
    requests_gone: usize,
    failure_gone: Vec<bool>,
    /// The oldest failure, and the oldest resolved one, that may still be there.
    oldest: usize,
    oldest_resolved: usize,
}

impl SurelyOver {
    fn new(sections: &Sections, failures: Vec<String>, surely: usize) -> Self {
        let failures_size = failures.iter().map(|f| f.len() + 3).sum();
        SurelyOver {
            sizes: sections.list_sizes(failures_size),
            lens: sections.list_lens(),
            failure_gone: vec![false; failures.len()],
            failures,
            surely,
            requests_gone: 0,
            oldest: 0,
            oldest_resolved: 0,
        }
    }

    /// [`Sections::elide_oldest`], with the sizes kept.
    fn elide_oldest(&mut self, sections: &mut Sections, list: usize) {
        match list {
            0 => self.elide_request(sections),
            1 => self.elide_failure(sections),
            // Files were fitted to their budgets already: few, regrouped as they leave.
            2 => {
                sections.elide_oldest(2);
                self.sizes[2] = grouped_size(&sections.modified);
            }
            _ => {
                sections.elide_oldest(3);
                self.sizes[3] = grouped_size(&sections.read);
            }
        }
        self.lens[list] -= 1;
    }

    fn elide_request(&mut self, sections: &mut Sections) {
        let r = &sections.requests[self.requests_gone];
        self.sizes[0] -= r.len() + 3;
        self.surely -= least_size(r);
        self.requests_gone += 1;
        sections.requests_elided += 1;
    }

    /// The oldest resolved failure left goes, else the oldest left.
    fn elide_failure(&mut self, sections: &mut Sections) {
        let count = self.failures.len();
        while self.oldest_resolved < count
            && (self.failure_gone[self.oldest_resolved]
                || !sections.failures[self.oldest_resolved].resolved)
        {
            self.oldest_resolved += 1;
        }
        while self.failure_gone[self.oldest] {
            self.oldest += 1;
        }
        let i = if self.oldest_resolved < count {
            self.oldest_resolved
        } else {
            self.oldest
        };
        self.failure_gone[i] = true;
        self.sizes[1] -= self.failures[i].len() + 3;
        self.surely -= least_size(&self.failures[i]);
        sections.failures_elided += 1;
    }
}

/// The list furthest over its share ([`SHARES`]) among those with more than one item.
fn furthest_over_share(sizes: &[usize; 4], lens: &[usize; 4]) -> Option<usize> {
    (0..4)
        .filter(|&k| lens[k] > 1)
        .max_by(|&a, &b| (sizes[a] as f64 / SHARES[a]).total_cmp(&(sizes[b] as f64 / SHARES[b])))
}

/// The least an item renders to: `- ` and its text up to trailing blanks.
fn least_size(item: &str) -> usize {
    2 + item.trim_end().chars().count()
}

/// Per directory of `list`: its paths and the bytes of their names.
fn dir_sizes(list: &[String]) -> DirSizes<'_> {
    let mut dirs = DirSizes::new();
    for path in list {
        let (dir, file) = dir_and_file(path);
        let d = dirs.entry(dir).or_default();
        d.0 += 1;
        d.1 += file.len();
    }
    dirs
}

/// What [`grouped`] renders for a directory: `dir/name`, or `dir/{a, b}`; and `- `, `\n`.
fn grouped_line_size(dir: &str, (paths, bytes): (usize, usize)) -> usize {
    match paths {
        0 => 0,
        1 => dir.len() + bytes + 3,
        n => dir.len() + 2 + bytes + 2 * (n - 1) + 3,
    }
}

/// A list's lines after a note of how many earlier `what` were elided.
fn with_elided(elided: usize, what: &str, lines: impl Iterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    if elided > 0 {
        out.push(format!("(+{elided} earlier {what})"));
    }
    out.extend(lines);
    out
}

/// A one-item section, when there is the item.
fn optional_section(out: &mut String, title: &str, item: &Option<String>) {
    if let Some(i) = item {
        section(out, title, std::slice::from_ref(i));
    }
}
