//! Server-wide effects told apart from tools, before judging: a file the server made itself
//! outside the workspace that the calls of most tools write (a call journal, a history, a usage
//! counter, a log) is the server's per-call bookkeeping. Its writes stay in each call's
//! evidence, marked `bookkeeping`, so that a contradiction resting only on them is a warning;
//! writes to the workspace, to files that existed before the server started, and deletions or
//! moves are never bookkeeping.

use std::collections::{BTreeMap, BTreeSet};

use crate::evidence::{Phase, PhaseObservation, ToolRun};
use crate::finding::Category;
use crate::observe::{FileEffect, FileEffectKind, Observation, at_or_under, path_shape};

/// Where the user's data lives in observed paths: never bookkeeping.
const WORKSPACE: &str = "$WORKSPACE";

/// An effect that can be bookkeeping: outside the workspace, and adding to or rewriting the
/// server's own file (removals, moves and changes of kind never are).
fn candidate(o: &Observation) -> Option<&FileEffect> {
    o.as_file()
        .filter(|f| !f.path.starts_with(WORKSPACE) && f.kind.creates_or_rewrites())
}

/// Marks the server's per-call bookkeeping in `runs` (one per tool, named by `names`), given
/// the observations outside calls; returns a note per bookkept file for the report.
///
/// A path (by shape, so a journal per day is one journal) is bookkeeping when the server
/// created it during the run (at start-up or in any call: it did not exist before), it lies
/// outside the workspace, and the calls of at least two tools, and of at least half the tools
/// that were called, wrote it.
pub fn mark_bookkeeping(
    runs: &mut [ToolRun],
    names: &[String],
    phases: &[PhaseObservation],
) -> Vec<String> {
    // Paths the server made during the run, and the tools whose calls wrote each shape.
    let mut made: BTreeSet<String> = BTreeSet::new();
    let mut writers: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    let created = |f: &FileEffect| {
        matches!(
            f.kind,
            FileEffectKind::Created | FileEffectKind::Transient { created: true }
        )
    };
    for p in phases {
        if let Some(f) = p.observation.as_file().filter(|f| created(f)) {
            made.insert(f.path.clone());
        }
    }
    for (i, run) in runs.iter().enumerate() {
        for (_, o) in run.all_observations() {
            let Some(f) = candidate(o) else { continue };
            if created(f) {
                made.insert(f.path.clone());
            }
            writers.entry(path_shape(&f.path)).or_default().insert(i);
        }
    }
    let called = runs.iter().filter(|r| !r.calls.is_empty()).count();
    // A file inside a directory the server made is the server's too.
    let server_made = |path: &str| made.iter().any(|m| at_or_under(path, m));
    let bookkept: BTreeMap<&String, &BTreeSet<usize>> = writers
        .iter()
        .filter(|(_, tools)| tools.len() >= 2 && tools.len() * 2 >= called)
        .collect();
    let mut notes = Vec::new();
    let mut noted: BTreeSet<String> = BTreeSet::new();
    for run in runs.iter_mut() {
        for call in &mut run.calls {
            for o in &call.observations {
                let Some(f) = candidate(o) else { continue };
                let shape = path_shape(&f.path);
                let Some(tools) = bookkept.get(&shape) else {
                    continue;
                };
                if !server_made(&f.path) {
                    continue;
                }
                call.categories.insert(o.describe(), Category::Bookkeeping);
                if noted.insert(shape) {
                    let who: Vec<&str> = tools.iter().map(|i| names[*i].as_str()).collect();
                    notes.push(format!(
                        "{} is the server's per-call bookkeeping: the server made it outside the workspace and the calls of {} of {} called tools wrote it ({}); its writes are reported as bookkeeping (warnings)",
                        f.path,
                        tools.len(),
                        called,
                        who.join(", ")
                    ));
                }
            }
        }
    }
    notes
}

/// Moves out of the tools' calls every effect the server also had for the control requests
/// (requests that run no tool), matched by kind and shape (see
/// [`Observation::shape_key`]): that is the server's per-request bookkeeping (a last-used
/// timestamp rewritten on every request, a request log), reported once, server-wide, as
/// [`Phase::PerRequest`] observations naming the tool whose call showed them, and never a
/// tool's evidence. An effect that every tool call has but no control does stays each
/// tool's. Returns a note when something moved.
pub fn discount_per_request(
    runs: &mut [ToolRun],
    names: &[String],
    phases: &mut Vec<PhaseObservation>,
) -> Vec<String> {
    let controls: BTreeSet<String> = phases
        .iter()
        .filter(|p| p.phase == Phase::Control && p.observation.is_evidential())
        .filter_map(|p| p.observation.shape_key())
        .collect();
    if controls.is_empty() {
        return Vec::new();
    }
    // By shape: (one description, the tools whose calls showed it).
    let mut moved: BTreeMap<String, (String, BTreeSet<usize>)> = BTreeMap::new();
    for (i, run) in runs.iter_mut().enumerate() {
        for call in &mut run.calls {
            let (per_request, own): (Vec<Observation>, Vec<Observation>) =
                std::mem::take(&mut call.observations)
                    .into_iter()
                    .partition(|o| o.shape_key().is_some_and(|k| controls.contains(&k)));
            call.observations = own;
            for o in per_request {
                let (_, tools) = moved
                    .entry(o.shape_key().unwrap_or_default())
                    .or_insert_with(|| (o.describe(), BTreeSet::new()));
                tools.insert(i);
                phases.push(PhaseObservation {
                    started_by: None,
                    phase: Phase::PerRequest,
                    after_tool: Some(names[i].clone()),
                    observation: o,
                });
            }
        }
    }
    moved
        .into_values()
        .map(|(what, tools)| {
            let who: Vec<&str> = tools.iter().map(|i| names[*i].as_str()).collect();
            format!(
                "\"{what}\" is the server's own (per-request bookkeeping, or work it does on its own): the control requests (requests that run no tool) saw the same; it is no tool's evidence (seen in the calls of {})",
                who.join(", ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::testing::*;
    use crate::evidence::Phase;

    fn journal_run(path: &str, kind: FileEffectKind) -> ToolRun {
        run(vec![call(1, ok(), vec![file(path, kind)])])
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("tool{i}")).collect()
    }

    #[test]
    fn a_journal_the_server_made_and_every_tool_appends_to_is_bookkeeping() {
        let journal = "$HOME/.local/state/srv/calls.jsonl";
        let mut runs = vec![
            run(vec![call(
                1,
                ok(),
                vec![
                    file("$HOME/.local/state/srv", FileEffectKind::Created),
                    file(journal, FileEffectKind::Created),
                ],
            )]),
            journal_run(journal, FileEffectKind::Appended),
            journal_run(journal, FileEffectKind::Appended),
            journal_run("$WORKSPACE/notes.md", FileEffectKind::Overwritten),
        ];
        let notes = mark_bookkeeping(&mut runs, &names(4), &[]);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("3 of 4 called tools"), "{}", notes[0]);
        for r in &runs[1..3] {
            assert_eq!(
                r.calls[0].categories.values().collect::<Vec<_>>(),
                [&Category::Bookkeeping]
            );
        }
        assert!(runs[3].calls[0].categories.is_empty());
    }

    #[test]
    fn files_that_existed_before_or_lie_in_the_workspace_are_never_bookkeeping() {
        // A configuration file every tool rewrites, which the server did not make.
        let config = "$HOME/.config/srv/settings.json";
        let mut runs = vec![
            journal_run(config, FileEffectKind::Overwritten),
            journal_run(config, FileEffectKind::Overwritten),
        ];
        assert!(mark_bookkeeping(&mut runs, &names(2), &[]).is_empty());
        // A log in the workspace, made at start-up.
        let log = "$WORKSPACE/server.log";
        let startup = [PhaseObservation {
            started_by: None,
            phase: Phase::Startup,
            after_tool: None,
            observation: file(log, FileEffectKind::Created),
        }];
        let mut runs = vec![
            journal_run(log, FileEffectKind::Appended),
            journal_run(log, FileEffectKind::Appended),
        ];
        assert!(mark_bookkeeping(&mut runs, &names(2), &startup).is_empty());
    }

    #[test]
    fn one_tools_own_file_is_not_the_servers_bookkeeping() {
        let startup = [PhaseObservation {
            started_by: None,
            phase: Phase::Startup,
            after_tool: None,
            observation: file("$HOME/.cache/srv", FileEffectKind::Created),
        }];
        let mut runs = vec![
            journal_run("$HOME/.cache/srv/a.log", FileEffectKind::Appended),
            run(vec![call(1, ok(), vec![])]),
            run(vec![call(1, ok(), vec![])]),
        ];
        assert!(mark_bookkeeping(&mut runs, &names(3), &startup).is_empty());
        // Two of five called tools are not half of them.
        let mut runs = vec![
            journal_run("$HOME/.cache/srv/a.log", FileEffectKind::Appended),
            journal_run("$HOME/.cache/srv/a.log", FileEffectKind::Appended),
            run(vec![call(1, ok(), vec![])]),
            run(vec![call(1, ok(), vec![])]),
            run(vec![call(1, ok(), vec![])]),
        ];
        assert!(mark_bookkeeping(&mut runs, &names(5), &startup).is_empty());
    }
}
