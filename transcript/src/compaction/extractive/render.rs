//! A summary's sections as markdown, within its bound: the past gives way, never the present.
use super::*;

impl Sections {
    /// Elides the oldest items of a list while its rendered lines pass `budget`. The size of
    /// the grouped lines is kept per directory as paths leave, not regrouped per path.
    pub(super) fn fit_files(list: &mut Vec<String>, elided: &mut usize, budget: usize) {
        // Per directory: its paths and the bytes of their names.
        let mut dirs: HashMap<&str, (usize, usize)> = HashMap::new();
        for path in list.iter() {
            let (dir, file) = dir_and_file(path);
            let d = dirs.entry(dir).or_default();
            d.0 += 1;
            d.1 += file.len();
        }
        // What `grouped` renders for a directory: `dir/name`, or `dir/{a, b}`; and `- `, `\n`.
        let line = |dir: &str, (paths, bytes): (usize, usize)| match paths {
            0 => 0,
            1 => dir.len() + bytes + 3,
            n => dir.len() + 2 + bytes + 2 * (n - 1) + 3,
        };
        let mut size: usize = dirs.iter().map(|(dir, d)| line(dir, *d)).sum();
        let mut cut = 0;
        while list.len() - cut > 1 && size > budget {
            let (dir, file) = dir_and_file(&list[cut]);
            if let Some(d) = dirs.get_mut(dir) {
                size -= line(dir, *d);
                *d = (d.0 - 1, d.1 - file.len());
                size += line(dir, *d);
            }
            cut += 1;
        }
        list.drain(..cut);
        *elided += cut;
    }

    pub(super) fn render(&self) -> String {
        let mut out = String::new();
        let one = |out: &mut String, title: &str, item: &Option<String>| {
            if let Some(i) = item {
                section(out, title, std::slice::from_ref(i));
            }
        };
        one(&mut out, "Current task", &self.current);
        if self.started != self.current {
            one(&mut out, "Started with", &self.started);
        }
        one(&mut out, "Focus", &self.focus);
        section(&mut out, "Standing instructions", &self.instructions);
        let mut requests = Vec::new();
        if self.requests_elided > 0 {
            requests.push(format!("(+{} earlier requests)", self.requests_elided));
        }
        requests.extend(self.requests.iter().cloned());
        section(&mut out, "User requests", &requests);
        if !self.progress_in_recent() {
            one(&mut out, "Progress", &self.progress);
        }
        let mut failures = Vec::new();
        if self.failures_elided > 0 {
            failures.push(format!("(+{} earlier failures)", self.failures_elided));
        }
        failures.extend(self.failures.iter().map(Failure::render));
        section(&mut out, "Tool failures", &failures);
        for (title, list, elided) in [
            ("Files modified", &self.modified, self.modified_elided),
            ("Files read", &self.read, self.read_elided),
        ] {
            let mut lines = Vec::new();
            if elided > 0 {
                lines.push(format!("(+{elided} earlier files)"));
            }
            lines.extend(grouped(list));
            section(&mut out, title, &lines);
        }
        one(&mut out, "Earlier context", &self.earlier);
        section(&mut out, "Recent exchanges", &self.recent);
        if out.is_empty() {
            out.push_str("## Current task\n- (no user requests in the compacted part)\n");
        }
        out.trim_end().to_string()
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
            if !self.recent.is_empty() {
                self.recent.remove(0);
                continue;
            }
            if let Some(e) = self.earlier.take() {
                let keep = e.chars().count().saturating_sub(over + 2);
                if keep > 200 {
                    self.earlier = Some(clip(&e, keep));
                }
                continue;
            }
            if self.progress.take().is_some() {
                continue;
            }
            if self.started.is_some() && self.started != self.current {
                self.started = self.current.clone();
                continue;
            }
            // The list furthest over its share gives up its oldest item.
            let sizes = [
                self.requests.iter().map(|r| r.len() + 3).sum::<usize>(),
                self.failures.iter().map(|f| f.render().len() + 3).sum(),
                grouped(&self.modified).iter().map(|l| l.len() + 3).sum(),
                grouped(&self.read).iter().map(|l| l.len() + 3).sum(),
            ];
            let lens = [
                self.requests.len(),
                self.failures.len(),
                self.modified.len(),
                self.read.len() + 1,
            ];
            let pick = (0..4).filter(|&k| lens[k] > 1).max_by(|&a, &b| {
                (sizes[a] as f64 / SHARES[a]).total_cmp(&(sizes[b] as f64 / SHARES[b]))
            });
            match pick {
                Some(0) => {
                    self.requests.remove(0);
                    self.requests_elided += 1;
                }
                Some(1) => {
                    let i = self.failures.iter().position(|f| f.resolved).unwrap_or(0);
                    self.failures.remove(i);
                    self.failures_elided += 1;
                }
                Some(2) => {
                    self.modified.remove(0);
                    self.modified_elided += 1;
                }
                Some(_) => {
                    self.read.remove(0);
                    self.read_elided += 1;
                }
                // Only the present is left; it is bounded by construction.
                None => return out,
            }
        }
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
        let floor = |item: &str| 2 + item.trim_end().chars().count();
        let failures: Vec<String> = self.failures.iter().map(Failure::render).collect();
        let mut surely: usize = self.requests.iter().map(|r| floor(r)).sum::<usize>()
            + failures.iter().map(|f| floor(f)).sum::<usize>();
        if surely <= max_chars {
            return;
        }
        self.recent.clear();
        self.earlier = None;
        self.progress = None;
        if self.started.is_some() {
            self.started = self.current.clone();
        }
        let mut sizes = [
            self.requests.iter().map(|r| r.len() + 3).sum::<usize>(),
            failures.iter().map(|f| f.len() + 3).sum(),
            grouped_size(&self.modified),
            grouped_size(&self.read),
        ];
        let mut lens = [
            self.requests.len(),
            self.failures.len(),
            self.modified.len(),
            self.read.len() + 1,
        ];
        // Requests leave from the front; failures the oldest resolved one first, else the oldest.
        let mut requests_gone = 0;
        let mut failure_gone = vec![false; failures.len()];
        let (mut oldest, mut oldest_resolved) = (0, 0);
        while surely > max_chars {
            let pick = (0..4).filter(|&k| lens[k] > 1).max_by(|&a, &b| {
                (sizes[a] as f64 / SHARES[a]).total_cmp(&(sizes[b] as f64 / SHARES[b]))
            });
            match pick {
                Some(0) => {
                    let r = &self.requests[requests_gone];
                    sizes[0] -= r.len() + 3;
                    surely -= floor(r);
                    requests_gone += 1;
                    self.requests_elided += 1;
                }
                Some(1) => {
                    while oldest_resolved < failures.len()
                        && (failure_gone[oldest_resolved]
                            || !self.failures[oldest_resolved].resolved)
                    {
                        oldest_resolved += 1;
                    }
                    while failure_gone[oldest] {
                        oldest += 1;
                    }
                    let i = if oldest_resolved < failures.len() {
                        oldest_resolved
                    } else {
                        oldest
                    };
                    failure_gone[i] = true;
                    sizes[1] -= failures[i].len() + 3;
                    surely -= floor(&failures[i]);
                    self.failures_elided += 1;
                }
                // Files were fitted to their budgets already: few, regrouped as they leave.
                Some(2) => {
                    self.modified.remove(0);
                    self.modified_elided += 1;
                    sizes[2] = grouped_size(&self.modified);
                }
                Some(_) => {
                    self.read.remove(0);
                    self.read_elided += 1;
                    sizes[3] = grouped_size(&self.read);
                }
                None => break,
            }
            if let Some(k) = pick {
                lens[k] -= 1;
            }
        }
        self.requests.drain(..requests_gone);
        let mut gone = failure_gone.into_iter();
        self.failures.retain(|_| !gone.next().unwrap_or(false));
    }
}
