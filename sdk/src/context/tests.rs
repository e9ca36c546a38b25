use super::*;

#[test]
fn columns_and_entries_agree_both_ways() {
    let bash: Rc<str> = "bash".into();
    let entries = vec![
        ContextEntry::new(4, Role::User, 10),
        ContextEntry {
            tool_name: Some(bash.clone()),
            is_error: true,
            ..ContextEntry::new(5, Role::ToolResult, 20)
        },
        ContextEntry {
            tool_name: Some("read".into()),
            pruned: true,
            ..ContextEntry::new(6, Role::ToolResult, 3)
        },
        ContextEntry {
            tool_name: Some(bash),
            ..ContextEntry::new(7, Role::ToolResult, 1)
        },
    ];
    let from_vec = Entries::from(entries.clone());
    assert_eq!(from_vec.refs(), [4, 5, 6, 7]);
    assert_eq!(from_vec.tool_names(), ["bash", "read"]);
    assert_eq!(from_vec.total_tokens(), 34);
    // As the host sends them: built from the columns alone.
    let sent = Entries::from_columns(from_vec.0.context.clone());
    assert!(sent.0.built.get().is_none());
    assert_eq!(sent.len(), 4);
    assert!(sent.0.built.get().is_none(), "len reads the columns");
    assert_eq!(*sent, *entries);
    assert!(sent[1].is_tool_result_of("bash") && !sent[0].is_tool_result());
}

mod incremental {
    use super::*;
    use crate::wit::incremental::{Appended, ContextChange};
    use proptest::prelude::*;

    /// Rows `from..to` of a context where every third entry is a tool result of tool `row % 5`
    /// (names `t0`..`t4`, introduced as they first appear), every seventh an error.
    fn rows(from: u32, to: u32, salt: u32) -> Vec<ContextEntry> {
        (from..to)
            .map(|i| {
                let mut e = ContextEntry::new(i * 2 + salt, role_of((i % 7) as u8), i % 13 + salt);
                if i % 3 == 0 {
                    e.role = Role::ToolResult;
                    e.tool_name = Some(format!("t{}", (i + salt) % 5).into());
                    e.is_error = i % 7 == 0;
                    e.pruned = salt % 2 == 1;
                }
                e
            })
            .collect()
    }

    /// The host's side: the whole context and its revision.
    struct Host {
        revision: u64,
        whole: g::Context,
    }

    impl Host {
        fn new(revision: u64, entries: Vec<ContextEntry>) -> Self {
            Host {
                revision,
                whole: Entries::from(entries).into_columns(),
            }
        }

        /// The change of the rows and names after these many.
        fn after(&self, rows: usize, names: usize) -> ContextChange {
            let w = &self.whole;
            ContextChange::Appended(Appended {
                rows: rows as u32,
                tool_names: names as u32,
                added: g::Context {
                    entries: w.entries[rows..].to_vec(),
                    roles: w.roles[rows..].to_vec(),
                    tokens: w.tokens[rows..].to_vec(),
                    tools: w.tools[rows..].to_vec(),
                    flags: w.flags[rows..].to_vec(),
                    tool_names: w.tool_names[names..].to_vec(),
                },
            })
        }

        fn append(&mut self, count: u32) {
            let mut all: Vec<ContextEntry> = Entries::from_columns(self.whole.clone()).to_vec();
            let from = all.len() as u32;
            all.extend(rows(from, from + count, 0));
            // Names only grow: the new entries' names are appended after the known ones.
            let known = self.whole.tool_names.clone();
            let mut columns = Entries::from(all).into_columns();
            let mut names = known;
            for name in &columns.tool_names {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
            let old = columns.tool_names.clone();
            for tool in &mut columns.tools {
                if *tool > 0 {
                    let name = &old[*tool as usize - 1];
                    *tool = names.iter().position(|n| n == name).unwrap() as u32 + 1;
                }
            }
            columns.tool_names = names;
            self.whole = columns;
        }
    }

    fn view(entries: &Entries) -> (Vec<ContextEntry>, u32, Vec<String>) {
        (
            entries.to_vec(),
            entries.total_tokens(),
            entries.tool_names().to_vec(),
        )
    }

    #[test]
    fn appended_rows_extend_the_held_context_and_anything_else_is_refused() {
        forget();
        let mut host = Host::new(4, rows(0, 6, 0));
        let names = host.whole.tool_names.len();
        let first = receive(4, ContextChange::Whole(host.whole.clone())).unwrap();
        let _ = first.to_vec(); // built before the append: extended in place with it
        drop(first);
        host.append(4);
        let grown = receive(4, host.after(6, names)).unwrap();
        assert_eq!(
            view(&grown),
            view(&Entries::from_columns(host.whole.clone()))
        );
        let names = host.whole.tool_names.len();
        // Another revision: refused, and what was held is dropped, so even the right change
        // then asks for the whole context.
        assert!(receive(5, host.after(10, names)).is_none());
        assert!(
            receive(4, host.after(10, names)).is_none(),
            "nothing is held any more"
        );
        let resend = || ContextChange::Whole(host.whole.clone());
        let _ = receive(4, resend()).unwrap();
        assert!(
            receive(4, host.after(9, names)).is_none(),
            "an overlap: row 9 again"
        );
        let _ = receive(4, resend()).unwrap();
        assert!(
            receive(4, host.after(10, names - 1)).is_none(),
            "a tool name again"
        );
        let _ = receive(4, resend()).unwrap();
        host.append(2);
        assert!(
            receive(4, host.after(11, names)).is_none(),
            "a gap: row 10 never sent"
        );
        // The unknown revision 0 never takes appended rows.
        let _ = receive(0, ContextChange::Whole(host.whole.clone())).unwrap();
        assert!(receive(0, host.after(12, names)).is_none());
    }

    #[test]
    fn columns_of_unequal_lengths_are_refused_or_padded() {
        forget();
        let host = Host::new(1, rows(0, 4, 0));
        let _ = receive(1, ContextChange::Whole(host.whole.clone())).unwrap();
        let mut short = host.after(2, 0);
        if let ContextChange::Appended(a) = &mut short {
            a.rows = 4;
            a.tool_names = host.whole.tool_names.len() as u32;
            a.added.entries = vec![100, 101];
            a.added.roles = vec![0];
            a.added.tokens = vec![1, 1];
            a.added.tools = vec![0, 0];
            a.added.flags = vec![0, 0];
            a.added.tool_names.clear();
        }
        assert!(receive(1, short).is_none());
        // A whole context with a short column reads the missing cells as "nothing known".
        let mut whole = host.whole.clone();
        whole.tokens.truncate(1);
        let entries = receive(2, ContextChange::Whole(whole)).unwrap();
        assert_eq!(entries.tokens().len(), 4);
        assert_eq!(entries.total_tokens(), host.whole.tokens[0]);
    }

    /// What the host does between two `assemble`s.
    #[derive(Debug, Clone)]
    enum Step {
        /// Messages appended (a delta follows).
        Append(u32),
        /// A compaction rewrote the context (a new revision, sent whole).
        Compact(u32),
        /// The engine lost what it held without the host knowing (a restart it did not see):
        /// the host's delta must be refused.
        Forget,
        /// The host sends a delta that skips rows (a lost call): it must be refused.
        Gap,
        /// The host sends a delta under another revision: it must be refused.
        WrongRevision,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0u32..6).prop_map(Step::Append),
            1 => (1u32..20).prop_map(Step::Compact),
            1 => Just(Step::Forget),
            1 => Just(Step::Gap),
            1 => Just(Step::WrongRevision),
        ]
    }

    proptest! {
        /// After every step the engine's view equals the host's whole context: a delta that
        /// applies extends it, one that does not is refused and the whole context resent.
        #[test]
        fn the_engine_sees_the_whole_context_after_any_sequence(
            steps in proptest::collection::vec(step(), 1..40),
            build_early in any::<bool>(),
        ) {
            forget();
            let mut host = Host::new(1, rows(0, 3, 0));
            // What the host believes the engine holds: (revision, rows, names).
            let mut believed: Option<(u64, usize, usize)> = None;
            for step in steps {
                let mut skew = (0usize, 0u64);
                match step {
                    Step::Append(n) => host.append(n),
                    Step::Compact(n) => {
                        host = Host::new(host.revision + 1, rows(0, n, host.revision as u32));
                    }
                    Step::Forget => forget(),
                    Step::Gap => {
                        host.append(2);
                        skew.0 = 1;
                    }
                    Step::WrongRevision => {
                        host.append(1);
                        skew.1 = 1;
                    }
                }
                let change = match believed {
                    Some((revision, rows, names)) if revision == host.revision => {
                        host.after(rows + skew.0, names)
                    }
                    _ => ContextChange::Whole(host.whole.clone()),
                };
                let sent_whole = matches!(change, ContextChange::Whole(_));
                // A whole context applies whatever its revision: only deltas are skewed.
                let honest = sent_whole || skew == (0, 0);
                let revision = host.revision + if sent_whole { 0 } else { skew.1 };
                let entries = match receive(revision, change) {
                    Some(entries) => {
                        prop_assert!(honest, "a bad delta was applied");
                        entries
                    }
                    None => {
                        prop_assert!(!sent_whole);
                        receive(host.revision, ContextChange::Whole(host.whole.clone()))
                            .expect("the whole context always applies")
                    }
                };
                let fresh = Entries::from_columns(host.whole.clone());
                prop_assert_eq!(view(&entries), view(&fresh));
                if build_early {
                    let _ = entries.to_vec();
                }
                believed = Some((host.revision, host.whole.entries.len(), host.whole.tool_names.len()));
            }
        }
    }
}
