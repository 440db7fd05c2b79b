//! Server-wide effects told apart from tools, before judging: a file the server made itself
//! outside the workspace that the calls of most tools write (a call journal, a history, a usage
//! counter, a log) is the server's per-call bookkeeping. Its writes stay in each call's
//! evidence, marked `bookkeeping`, so that a contradiction resting only on them is a warning;
//! writes to the workspace, to files that existed before the server started, and deletions or
//! moves are never bookkeeping. A file the server made that the calls of several tools write
//! but that is not bookkeeping (its own state, or data the tools share) is marked on each call
//! as shared state: a write to it is firm evidence only once a replay shows the tool does it.
//! Effects the control requests also had are the server's per-request bookkeeping, taken out
//! of the calls.

use std::collections::{BTreeMap, BTreeSet};

use crate::evidence::{FileEffect, FileEffectKind, Observation, at_or_under, path_shape};
use crate::evidence::{Phase, PhaseObservation, ToolRun};
use crate::finding::Category;
use crate::mcp::tool::ToolDecl;

/// Where the user's data lives in observed paths: never bookkeeping.
const WORKSPACE: &str = "$WORKSPACE";

/// The path a write or a write attempt names, with the shape it is grouped by.
fn written_path(o: &Observation) -> Option<&str> {
    match o {
        Observation::File(f) => Some(&f.path),
        Observation::Attempt(a) => Some(&a.path),
        _ => None,
    }
}

/// The places each tool keeps to itself, as (tool, path): a path that every successful call
/// of the tool wrote (at least two calls) and no other tool's call did, while the tool's
/// calls wrote no other path of its shape. Several tools that each append to a log of their
/// own (`log_1.txt`, `log_2.txt`) share a shape but no file: that is each tool's own write,
/// not what the server keeps for several tools, and not its per-call bookkeeping either. A
/// journal flushed on a timer under a new name each time lands in whichever window is open
/// and names a new file each flush, so it never passes for a tool's own place.
pub struct OwnPlaces(BTreeSet<(usize, String)>);

impl OwnPlaces {
    /// What the calls of `runs` show.
    pub fn of(runs: &[ToolRun]) -> OwnPlaces {
        // Per path: the tools whose calls wrote it. Per tool and shape: the paths written.
        let mut writers: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
        let mut paths: BTreeMap<(usize, String), BTreeSet<&str>> = BTreeMap::new();
        for (i, run) in runs.iter().enumerate() {
            for (_, o) in run.all_observations() {
                if let Some(path) = written_path(o).filter(|_| o.is_write()) {
                    writers.entry(path).or_default().insert(i);
                    paths.entry((i, path_shape(path))).or_default().insert(path);
                }
            }
        }
        let mut own = BTreeSet::new();
        for ((i, _), written) in paths {
            let [path] = written.into_iter().collect::<Vec<_>>()[..] else {
                continue;
            };
            let successes: Vec<_> = runs[i]
                .calls
                .iter()
                .filter(|c| c.outcome.is_success())
                .collect();
            let every_call_wrote_it = successes.len() >= 2
                && successes.iter().all(|c| {
                    c.observations
                        .iter()
                        .any(|o| o.is_write() && written_path(o) == Some(path))
                });
            if every_call_wrote_it && writers.get(path).is_some_and(|w| w.len() == 1) {
                own.insert((i, path.to_string()));
            }
        }
        OwnPlaces(own)
    }

    /// Whether `o`, an observation of a call of tool `tool`, writes a place that tool keeps
    /// to itself.
    pub fn holds(&self, tool: usize, o: &Observation) -> bool {
        written_path(o).is_some_and(|p| self.0.contains(&(tool, p.to_string())))
    }
}

/// An effect that can be bookkeeping: outside the workspace, and adding to or rewriting the
/// server's own file (removals, moves and changes of kind never are).
fn candidate(o: &Observation) -> Option<&FileEffect> {
    o.as_file()
        .filter(|f| !f.path.starts_with(WORKSPACE) && f.kind.creates_or_rewrites())
}

/// The server's per-call bookkeeping as the calls show it: the paths (by shape, so a journal
/// per day is one journal) outside the workspace that the server created during the run (at
/// start-up or in any call: they did not exist before) and that either the calls of at least
/// two tools, and of at least half the tools that were called, wrote; or the calls of at
/// least two tools and the server outside every call (between calls, at shutdown) only ever
/// created or appended to: a journal it flushes on a timer or every so many calls, whose
/// flushes land in whichever window is open.
pub struct Bookkeeping {
    /// Paths the server made during the run.
    made: BTreeSet<String>,
    /// Bookkept path shapes, each with the tools whose calls wrote it.
    bookkept: BTreeMap<String, BTreeSet<usize>>,
    /// How many tools were called.
    called: usize,
}

/// How the writes to one path shape went, over the whole run.
#[derive(Default)]
struct Writes {
    /// The tools whose calls wrote it.
    tools: BTreeSet<usize>,
    /// Every write only created or appended to it.
    appends_only: bool,
    /// The server wrote it outside every call.
    outside_calls: bool,
}

fn created(f: &FileEffect) -> bool {
    matches!(
        f.kind,
        FileEffectKind::Created | FileEffectKind::Transient { created: true }
    )
}

impl Bookkeeping {
    /// What `runs` and the observations outside calls (`phases`) show; writes to a place
    /// their tool keeps to itself (`own_places`) are no bookkeeping.
    pub fn of(
        runs: &[ToolRun],
        phases: &[PhaseObservation],
        own_places: &OwnPlaces,
    ) -> Bookkeeping {
        let mut made: BTreeSet<String> = BTreeSet::new();
        let mut writes: BTreeMap<String, Writes> = BTreeMap::new();
        let mut note = |f: &FileEffect, tool: Option<usize>| {
            let w = writes.entry(path_shape(&f.path)).or_insert(Writes {
                appends_only: true,
                ..Writes::default()
            });
            w.appends_only &= matches!(f.kind, FileEffectKind::Created | FileEffectKind::Appended);
            match tool {
                Some(i) => {
                    w.tools.insert(i);
                }
                None => w.outside_calls = true,
            }
        };
        for p in phases {
            let Some(f) = p.observation.as_file() else {
                continue;
            };
            if created(f) {
                made.insert(f.path.clone());
            }
            // The server on its own: between calls (not threads a call started) or at the end.
            let on_its_own =
                p.phase == Phase::Shutdown || p.phase == Phase::Idle && p.started_by.is_none();
            if on_its_own && candidate(&p.observation).is_some() {
                note(f, None);
            }
        }
        for (i, run) in runs.iter().enumerate() {
            for (_, o) in run.all_observations() {
                if let Some(f) = o.as_file().filter(|f| created(f)) {
                    made.insert(f.path.clone());
                }
                if let Some(f) = candidate(o).filter(|_| !own_places.holds(i, o)) {
                    note(f, Some(i));
                }
            }
        }
        let called = runs.iter().filter(|r| !r.calls.is_empty()).count();
        let bookkept = writes
            .into_iter()
            .filter(|(_, w)| {
                w.tools.len() >= 2
                    && (w.tools.len() * 2 >= called || w.appends_only && w.outside_calls)
            })
            .map(|(shape, w)| (shape, w.tools))
            .collect();
        Bookkeeping {
            made,
            bookkept,
            called,
        }
    }

    /// Whether the server made `path` (or a directory it lies in) during the run.
    fn server_made(&self, path: &str) -> bool {
        self.made.iter().any(|m| at_or_under(path, m))
    }

    /// The tools whose calls wrote `o`'s path, when `o` is a write of the server's per-call
    /// bookkeeping (a file inside a directory the server made is the server's too).
    fn writers_of<'a>(&self, o: &'a Observation) -> Option<(&'a FileEffect, &BTreeSet<usize>)> {
        let f = candidate(o)?;
        let tools = self.bookkept.get(&path_shape(&f.path))?;
        self.server_made(&f.path).then_some((f, tools))
    }

    /// Whether `o` is a write of the server's per-call bookkeeping.
    pub fn holds(&self, o: &Observation) -> bool {
        self.writers_of(o).is_some()
    }
}

/// What the server does for itself rather than for a tool, as far as the calls show before
/// any replay: its per-call bookkeeping and the upkeep of its own installed files.
pub struct ServersOwn {
    /// Its per-call bookkeeping.
    pub bookkeeping: Bookkeeping,
    /// The places each tool keeps to itself, which are neither.
    pub own_places: OwnPlaces,
    /// The roots of its installation (see [`installation_roots`]).
    pub installation: Vec<String>,
}

impl ServersOwn {
    /// What `runs` and `phases` show, given the roots of the server's installation.
    pub fn of(runs: &[ToolRun], phases: &[PhaseObservation], installation: Vec<String>) -> Self {
        let own_places = OwnPlaces::of(runs);
        ServersOwn {
            bookkeeping: Bookkeeping::of(runs, phases, &own_places),
            own_places,
            installation,
        }
    }

    /// Whether `o` is a write on the server's own installed files.
    pub fn on_installation(&self, o: &Observation) -> bool {
        written_path(o).is_some_and(|path| {
            o.is_write() && self.installation.iter().any(|r| at_or_under(path, r))
        })
    }

    /// Whether `o` stays a warning whatever a replay shows: a write that did not last, the
    /// server's per-call bookkeeping, or the upkeep of its own installation.
    pub fn stays_a_warning(&self, o: &Observation) -> bool {
        o.as_file().is_some_and(|f| f.kind.is_transient())
            || self.bookkeeping.holds(o)
            || self.on_installation(o)
    }
}

/// Marks the writes whose firmness a replay has to earn (see [`CallRecord::shared_state`]):
/// in each call, the lasting writes that bear on a hint its tool declared (in a repeat,
/// `idempotentHint: true` included), to a path the
/// server made during the run (or inside one) whose shape the calls of at least two tools
/// wrote, and the refused write attempts of a kind and shape at least two tools' calls made;
/// never what stays a warning anyway (see [`ServersOwn::stays_a_warning`]), nor a write to a
/// place its tool keeps to itself (see [`OwnPlaces`]). Returns how many calls have some.
pub fn mark_shared_state(tools: &[ToolDecl], runs: &mut [ToolRun], own: &ServersOwn) -> usize {
    // By path shape (file effects) or kind and shape (attempts the sandbox refused).
    let key = |o: &Observation| match o {
        Observation::File(f) => Some(path_shape(&f.path)),
        Observation::Attempt(_) => o.shape_key(),
        _ => None,
    };
    let own_places = &own.own_places;
    let mut writers: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        for (_, o) in run.all_observations() {
            if let Some(k) = key(o).filter(|_| !own_places.holds(i, o)) {
                writers.entry(k).or_default().insert(i);
            }
        }
    }
    let several = |o: &Observation| {
        key(o)
            .and_then(|k| writers.get(&k))
            .is_some_and(|w| w.len() >= 2)
    };
    // What stays a warning whatever a replay shows has nothing to earn; nor does a write
    // to a place the tool keeps to itself.
    let shared = |i: usize, o: &Observation| {
        !own.stays_a_warning(o)
            && !own_places.holds(i, o)
            && several(o)
            && match o {
                Observation::File(f) => own.bookkeeping.server_made(&f.path),
                // A refused write several tools' calls tried (a flush the sandbox refused,
                // on whichever call's thread was open) is the same case.
                Observation::Attempt(a) => a.denied,
                _ => false,
            }
    };
    let mut marked = 0;
    for (i, (tool, run)) in tools.iter().zip(runs.iter_mut()).enumerate() {
        for call in &mut run.calls {
            // In a repeat, a write to the shared state also bears on idempotentHint: true (a
            // counter flushed in the repeat's window is no additional effect of the tool's).
            let repeat = call.number > 1;
            let bears = |o: &Observation| {
                crate::audit::bears_on_declared(tool, o)
                    || repeat && crate::audit::bears_on_declared_idempotence(tool, o)
            };
            call.shared_state = call
                .observations
                .iter()
                .filter(|o| shared(i, o) && bears(o))
                .map(Observation::describe)
                .collect();
            marked += usize::from(!call.shared_state.is_empty());
        }
    }
    marked
}

/// The roots of the server's own installation, as far as the run knows them: where the
/// scenario's `[setup]` installed it (the npm prefix, the virtual environment) and the
/// packages of the files its command names (the `node_modules/PACKAGE` the program or script
/// lies in, a virtual environment). A system directory or a project holding a package is
/// never a root itself.
pub fn installation_roots(command: &[String], installed: &[&std::path::Path]) -> Vec<String> {
    let mut roots: Vec<String> = installed
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    for arg in command {
        let path = std::path::Path::new(arg);
        if !path.is_absolute() || !path.exists() {
            continue;
        }
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        for p in [path.to_path_buf(), real] {
            let text = p.to_string_lossy();
            if let Some(at) = text.rfind("/node_modules/") {
                // The package itself (`node_modules/pkg` or `node_modules/@scope/pkg`), not
                // the project or prefix that holds it.
                let rest = &text[at + "/node_modules/".len()..];
                let parts = if rest.starts_with('@') { 2 } else { 1 };
                let package: Vec<&str> = rest.split('/').take(parts).collect();
                if package.len() == parts {
                    roots.push(format!(
                        "{}/node_modules/{}",
                        &text[..at],
                        package.join("/")
                    ));
                }
            } else if let Some(venv) = p.ancestors().find(|a| a.join("pyvenv.cfg").is_file()) {
                roots.push(venv.to_string_lossy().into_owned());
            }
        }
    }
    roots.retain(|r| r.len() > 1);
    roots.sort();
    roots.dedup();
    roots
}

/// Marks the writes and write attempts of calls on the server's own installed files (see
/// [`ServersOwn::on_installation`]) as [`Category::OwnInstallation`]; returns a note per
/// tool and kind of effect for the report.
pub fn mark_own_installation(
    runs: &mut [ToolRun],
    names: &[String],
    own: &ServersOwn,
) -> Vec<String> {
    let mut notes = Vec::new();
    let mut noted: BTreeSet<(usize, String)> = BTreeSet::new();
    for (i, run) in runs.iter_mut().enumerate() {
        for call in &mut run.calls {
            for o in call.observations.iter().filter(|o| own.on_installation(o)) {
                let described = o.describe();
                if noted.insert((i, o.shape_key().unwrap_or_default())) {
                    notes.push(format!(
                        "{} {}: \"{described}\" is on the server's own installed files (its upkeep of itself); it is reported as own-installation (a warning)",
                        names[i],
                        call.label()
                    ));
                }
                call.categories.insert(described, Category::OwnInstallation);
            }
        }
    }
    notes
}

/// Marks the server's per-call bookkeeping (see [`Bookkeeping`]) in `runs` (one per tool,
/// named by `names`), given the observations outside calls; returns a note per bookkept file
/// for the report.
pub fn mark_bookkeeping(
    runs: &mut [ToolRun],
    names: &[String],
    phases: &[PhaseObservation],
) -> Vec<String> {
    let bookkeeping = Bookkeeping::of(runs, phases, &OwnPlaces::of(runs));
    let mut notes = Vec::new();
    let mut noted: BTreeSet<String> = BTreeSet::new();
    for run in runs.iter_mut() {
        for call in &mut run.calls {
            for o in &call.observations {
                let Some((f, tools)) = bookkeeping.writers_of(o) else {
                    continue;
                };
                call.categories.insert(o.describe(), Category::Bookkeeping);
                if noted.insert(path_shape(&f.path)) {
                    let who: Vec<&str> = tools.iter().map(|i| names[*i].as_str()).collect();
                    notes.push(format!(
                        "{} is the server's per-call bookkeeping: the server made it outside the workspace and the calls of {} of {} called tools wrote it ({}); its writes are reported as bookkeeping (warnings)",
                        f.path,
                        tools.len(),
                        bookkeeping.called,
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
/// [`Observation::shape_key`]), or an additive write of a path the controls wrote (see
/// [`Observation::additive_write_key`]: a log the first request creates and the next ones
/// append to; an overwrite of a store the controls merely created is not excused): that is the server's per-request bookkeeping (a last-used
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
        .flat_map(|p| {
            // Any write of a path's content (a creation, an overwrite) shows the server
            // writes that path for requests that run no tool.
            let wrote = p
                .observation
                .as_file()
                .filter(|f| f.kind.creates_or_rewrites());
            p.observation
                .shape_key()
                .into_iter()
                .chain(wrote.map(|f| crate::evidence::write_key(&f.path)))
        })
        .collect();
    if controls.is_empty() {
        return Vec::new();
    }
    let control_paths: BTreeSet<String> = phases
        .iter()
        .filter(|p| p.phase == Phase::Control)
        .filter_map(|p| written_path(&p.observation).map(str::to_string))
        .collect();
    // A place the tool keeps to itself that no control wrote is the tool's, however alike
    // the controls' paths look.
    let own_places = OwnPlaces::of(runs);
    let tools_own = |i: usize, o: &Observation| {
        own_places.holds(i, o) && written_path(o).is_some_and(|p| !control_paths.contains(p))
    };
    // The same kind and shape, or an additive write of a path the controls wrote.
    let seen_in_controls = |o: &Observation| {
        o.shape_key().is_some_and(|k| controls.contains(&k))
            || o.additive_write_key()
                .is_some_and(|k| controls.contains(&k))
    };
    // By shape: (one description, the tools whose calls showed it).
    let mut moved: BTreeMap<String, (String, BTreeSet<usize>)> = BTreeMap::new();
    for (i, run) in runs.iter_mut().enumerate() {
        for call in &mut run.calls {
            let (per_request, own): (Vec<Observation>, Vec<Observation>) =
                std::mem::take(&mut call.observations)
                    .into_iter()
                    .partition(|o| seen_in_controls(o) && !tools_own(i, o));
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

    fn phase(phase: Phase, o: Observation) -> PhaseObservation {
        PhaseObservation {
            started_by: None,
            phase,
            after_tool: None,
            observation: o,
        }
    }

    fn idle_tools(n: usize) -> impl Iterator<Item = ToolRun> {
        (0..n).map(|_| run(vec![call(1, ok(), vec![])]))
    }

    #[test]
    fn a_journal_flushed_on_a_timer_is_bookkeeping_though_few_windows_hold_it() {
        // Two of six tools' windows caught a flush; the server also appended between calls.
        let history = "$HOME/.srv/tool-history.jsonl";
        let mut phases = vec![phase(
            Phase::Startup,
            file("$HOME/.srv", FileEffectKind::Created),
        )];
        let mut runs: Vec<ToolRun> = vec![
            journal_run(history, FileEffectKind::Created),
            journal_run(history, FileEffectKind::Appended),
        ];
        runs.extend(idle_tools(4));
        // Without a write outside the calls it is two tools' file, not bookkeeping.
        assert!(mark_bookkeeping(&mut runs.clone(), &names(6), &phases).is_empty());
        phases.push(phase(
            Phase::Shutdown,
            file(history, FileEffectKind::Appended),
        ));
        let notes = mark_bookkeeping(&mut runs, &names(6), &phases);
        assert_eq!(notes.len(), 1, "{notes:?}");
        // A store the server rewrites is not a journal, flushed outside calls or not.
        let store = "$HOME/.srv/store.json";
        let mut runs: Vec<ToolRun> = vec![
            journal_run(store, FileEffectKind::Created),
            journal_run(store, FileEffectKind::Overwritten),
        ];
        runs.extend(idle_tools(4));
        let phases = vec![
            phase(Phase::Startup, file("$HOME/.srv", FileEffectKind::Created)),
            phase(Phase::Shutdown, file(store, FileEffectKind::Overwritten)),
        ];
        assert!(mark_bookkeeping(&mut runs, &names(6), &phases).is_empty());
    }

    #[test]
    fn writes_to_what_the_server_made_for_several_tools_must_be_earned_by_a_replay() {
        let counters = "$HOME/.index/_tool_counters.json";
        let reader = || tool(serde_json::json!({"readOnlyHint": true}));
        // Two of five tools' calls wrote it: not half of them, so not bookkeeping.
        let tools = vec![reader(), reader(), reader(), reader(), reader()];
        let mut runs = vec![
            journal_run(counters, FileEffectKind::Created),
            journal_run(counters, FileEffectKind::Overwritten),
            journal_run("$WORKSPACE/own.txt", FileEffectKind::Created),
        ];
        runs.extend(idle_tools(2));
        let own = ServersOwn::of(&runs, &[], Vec::new());
        assert_eq!(mark_shared_state(&tools, &mut runs, &own), 2);
        assert_eq!(
            runs[1].calls[0].shared_state,
            ["overwrote $HOME/.index/_tool_counters.json"]
        );
        // One tool's own file is its own.
        assert!(runs[2].calls[0].shared_state.is_empty());
        // A tool that declares no hint the write bears on has nothing to earn.
        let writer = tool(serde_json::json!({"readOnlyHint": false}));
        let tools = vec![writer.clone(), writer, reader(), reader(), reader()];
        assert_eq!(mark_shared_state(&tools, &mut runs, &own), 0);
    }

    /// A tool whose two calls each appended to `path` (created by the first).
    fn own_log_run(path: &str) -> ToolRun {
        run(vec![
            call(1, ok(), vec![file(path, FileEffectKind::Created)]),
            call(2, ok(), vec![file(path, FileEffectKind::Appended)]),
        ])
    }

    #[test]
    fn tools_that_each_write_a_file_of_their_own_share_no_state_and_keep_no_books() {
        // Twenty-five read-only tools, each appending to its own log on every call: one
        // shape, no shared file. Each write is its tool's, in the workspace or in the home.
        for dir in ["$WORKSPACE", "$HOME/.liars"] {
            let tools: Vec<ToolDecl> = (0..25)
                .map(|_| tool(serde_json::json!({"readOnlyHint": true})))
                .collect();
            let mut runs: Vec<ToolRun> = (0..25)
                .map(|i| own_log_run(&format!("{dir}/log_{i}.txt")))
                .collect();
            let own = ServersOwn::of(&runs, &[], Vec::new());
            assert!(!own.bookkeeping.holds(&runs[3].calls[1].observations[0]));
            assert_eq!(mark_shared_state(&tools, &mut runs, &own), 0, "{dir}");
        }
        // A journal flushed under a new name each time is no tool's own place, even when a
        // tool's two calls both caught a flush: its calls wrote two paths of the shape.
        let tools: Vec<ToolDecl> = (0..3)
            .map(|_| tool(serde_json::json!({"readOnlyHint": true})))
            .collect();
        let flush = |n: u32| {
            file(
                &format!("$WORKSPACE/.srv/journal-{n}.log"),
                FileEffectKind::Created,
            )
        };
        let mut runs = vec![
            run(vec![
                call(1, ok(), vec![flush(1)]),
                call(2, ok(), vec![flush(2)]),
            ]),
            run(vec![call(1, ok(), vec![flush(3)]), call(2, ok(), vec![])]),
            run(vec![call(1, ok(), vec![]), call(2, ok(), vec![flush(4)])]),
        ];
        let own = ServersOwn::of(&runs, &[], Vec::new());
        assert_eq!(mark_shared_state(&tools, &mut runs, &own), 4);
        // One path that two tools wrote is shared, however often each wrote it.
        let counters = "$WORKSPACE/.srv/counters.json";
        let mut runs = vec![
            own_log_run(counters),
            own_log_run(counters),
            own_log_run("$WORKSPACE/x"),
        ];
        let own = ServersOwn::of(&runs, &[], Vec::new());
        assert_eq!(mark_shared_state(&tools, &mut runs, &own), 4);
    }

    #[test]
    fn a_counter_flushed_in_a_repeat_must_be_earned_against_idempotent_hint_too() {
        // Three writers that declare idempotentHint: true; the server's counter file, made
        // in the first tool's call, is flushed in the repeats of two of them.
        let counters = "$WORKSPACE/.srv/counters.json";
        let writer = || {
            tool(
                serde_json::json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true}),
            )
        };
        let tools = vec![writer(), writer(), writer()];
        let mut runs = vec![
            run(vec![
                call(
                    1,
                    ok(),
                    vec![file("$WORKSPACE/.srv", FileEffectKind::Created)],
                ),
                call(2, ok(), vec![file(counters, FileEffectKind::Created)]),
            ]),
            run(vec![
                call(1, ok(), vec![]),
                call(2, ok(), vec![file(counters, FileEffectKind::Overwritten)]),
            ]),
            run(vec![call(1, ok(), vec![]), call(2, ok(), vec![])]),
        ];
        let own = ServersOwn::of(&runs, &[], Vec::new());
        assert_eq!(mark_shared_state(&tools, &mut runs, &own), 2);
        assert_eq!(
            runs[1].calls[1].shared_state,
            ["overwrote $WORKSPACE/.srv/counters.json"]
        );
        // A first call's write bears on no idempotence: only the repeats are marked for it.
        let mut runs = vec![
            run(vec![call(
                1,
                ok(),
                vec![file(counters, FileEffectKind::Created)],
            )]),
            run(vec![call(
                1,
                ok(),
                vec![file(counters, FileEffectKind::Overwritten)],
            )]),
        ];
        let own = ServersOwn::of(&runs, &[], Vec::new());
        assert_eq!(mark_shared_state(&tools[..2], &mut runs, &own), 0);
    }

    #[test]
    fn what_the_controls_did_is_per_request_but_a_tools_own_log_of_that_shape_is_not() {
        let last_used = "$WORKSPACE/.srv/last-used";
        let mut phases = vec![
            phase(Phase::Control, file(last_used, FileEffectKind::Overwritten)),
            phase(
                Phase::Control,
                file("$WORKSPACE/logs/req_0.log", FileEffectKind::Created),
            ),
        ];
        // Two calls, each rewriting the last-used stamp and writing a log.
        let logging = |first: &str, second: &str, kind: FileEffectKind| {
            let stamp = || file(last_used, FileEffectKind::Overwritten);
            run(vec![
                call(1, ok(), vec![stamp(), file(first, FileEffectKind::Created)]),
                call(2, ok(), vec![stamp(), file(second, kind)]),
            ])
        };
        let mut runs = vec![
            // A tool that keeps a log of its own, named like the controls' log.
            logging(
                "$WORKSPACE/logs/req_1.log",
                "$WORKSPACE/logs/req_1.log",
                FileEffectKind::Appended,
            ),
            // A tool whose every call writes a new log of that shape: per request.
            logging(
                "$WORKSPACE/logs/req_2.log",
                "$WORKSPACE/logs/req_3.log",
                FileEffectKind::Created,
            ),
        ];
        let notes = discount_per_request(&mut runs, &names(2), &mut phases);
        assert_eq!(notes.len(), 2, "{notes:?}");
        let kept = |r: &ToolRun| -> Vec<String> {
            r.all_observations().map(|(_, o)| o.describe()).collect()
        };
        assert_eq!(
            kept(&runs[0]),
            [
                "created $WORKSPACE/logs/req_1.log",
                "appended to $WORKSPACE/logs/req_1.log"
            ]
        );
        assert!(kept(&runs[1]).is_empty(), "{:?}", kept(&runs[1]));
    }

    #[test]
    fn the_servers_upkeep_of_its_own_installation_is_marked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let project = dir.path().join("prefix");
        let bin = project.join("node_modules/pkg/bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        std::fs::write(bin.join("rg"), "").expect("write");
        let script = bin.join("cli.js");
        std::fs::write(&script, "").expect("write");
        let command = vec![
            "node".to_string(),
            script.to_string_lossy().into_owned(),
            "--flag".into(),
        ];
        let roots = installation_roots(&command, &[]);
        let project = std::fs::canonicalize(&project)
            .expect("canonical")
            .to_string_lossy()
            .into_owned();
        assert!(
            roots.contains(&format!("{project}/node_modules/pkg")),
            "{roots:?}"
        );
        assert!(!roots.contains(&project), "{roots:?}");
        let rg = format!("{project}/node_modules/pkg/bin/rg");
        let mut runs = vec![run(vec![call(
            1,
            ok(),
            vec![
                file(
                    &rg,
                    FileEffectKind::ModeChanged {
                        from: "644".into(),
                        to: "755".into(),
                    },
                ),
                file("$WORKSPACE/x", FileEffectKind::Created),
            ],
        )])];
        let own = ServersOwn::of(&runs, &[], roots);
        let notes = mark_own_installation(&mut runs, &names(1), &own);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(
            runs[0].calls[0].categories.values().collect::<Vec<_>>(),
            [&Category::OwnInstallation]
        );
    }
}
