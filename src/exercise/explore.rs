//! The explorer: calls every tool of the plan and learns from each answer. It owns the plan,
//! the attempts and what was learned: values the server handed out go to a [`ValuePool`] that
//! later parameters draw from (`taskId` from the tool that created the task); an error that
//! names an allowed directory, offered values, a missing field or a confirmation flag steers
//! the next attempt ([`super::feedback`]); an error or description that names another tool
//! ("use set_working_dir first") makes that tool run first, then the refused call is tried
//! again; session set-up tools (set a working directory, activate a project) run before the
//! rest, with a directory. Tools whose references the pool cannot fill yet wait until the
//! others ran, and tools left without a successful call get another turn once the pool has
//! grown. The server itself is reached through a [`Host`], which starts, observes and
//! restarts it: the explorer only decides what to call next.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use super::feedback::corrections;
use super::plan::{
    PlannedTool, allowed_dirs_in, is_session_setup, kind_candidate, plan, removes,
    steered_candidate,
};
use super::pool::ValuePool;
use super::semantics::{WorkspaceFacts, words};
use crate::config::ExploreOptions;
use crate::evidence::{CallRecord, ToolRun};
use crate::mcp::client::CallOutcome;
use crate::mcp::tool::ToolDecl;
use crate::progress::ProgressEvent;
use crate::progress::ProgressHook;

/// Calls made because another tool asked for them, at most, per tool.
const MAX_PREREQUISITES_PER_TOOL: usize = 2;

/// Sets tried with other pooled values after refusals of pooled ones, at most, per turn.
const MAX_ALTERNATIVES: usize = 2;

/// Passes of retries over the tools not yet reached, at most (another pass only after one
/// reached a tool).
const RETRY_PASSES: usize = 3;

/// One call as the host made and observed it.
#[derive(Debug)]
pub struct ObservedCall {
    /// The record (number, attempt and provenance are set by the explorer).
    pub record: CallRecord,
    /// The result object (or the JSON-RPC error) as the server sent it.
    pub result: Option<Value>,
    /// The server crashed or hung: it is not used again.
    pub broken: bool,
    /// The run was interrupted during the call.
    pub interrupted: bool,
}

/// What the explorer needs from the run: a server to call, observed.
#[allow(async_fn_in_trait)]
pub trait Host {
    /// Why no more calls may be made (interrupt, resource limit, run timeout), if so.
    fn must_stop(&self) -> Option<String>;
    /// A running server: starts one when none runs. `Err` says why the tool cannot be called.
    async fn ready(&mut self) -> Result<(), String>;
    /// Closes the time since the last call (what happened in it belongs to no call).
    fn between_calls(&mut self, last_tool: Option<&str>);
    /// Calls `tool` with `arguments` and observes the call's window; `label` names the call.
    async fn call(&mut self, tool: &str, label: &str, arguments: &Value) -> ObservedCall;
    /// Stops a server that broke (crash, hang, interrupt).
    async fn discard(&mut self, last_tool: Option<&str>);
    /// Calls `tool` on a fresh server of its own (`--isolate`).
    async fn isolated(&mut self, tool: &str) -> Result<Vec<CallRecord>, String>;
    /// Calls each of `tools` on a fresh server of its own (`--isolate`), several at the same
    /// time where the host can; the results in `tools`' order.
    async fn isolated_all(&mut self, tools: &[String]) -> Vec<Result<Vec<CallRecord>, String>> {
        let mut out = Vec::new();
        for tool in tools {
            out.push(self.isolated(tool).await);
        }
        out
    }
}

/// What exploring left: a run per tool (in inventory order) and the plan's first arguments.
#[derive(Debug, Default)]
pub struct Explored {
    /// Per tool, in inventory order.
    pub runs: Vec<ToolRun>,
    /// Per tool: whether a call was made (or attempted).
    pub called: Vec<bool>,
    /// Per tool: the first argument set planned.
    pub planned_arguments: Vec<Value>,
    /// Why the run stopped early, if it did.
    pub partial: Option<String>,
    /// Notes for the report.
    pub notes: Vec<String>,
    /// Values learned from responses.
    pub pooled_values: usize,
}

/// Argument sets with pooled values, and which earlier answer gave each value.
type Provenance = Vec<(Value, BTreeMap<String, String>)>;

/// What a failed call's error led to (see `Explorer::prerequisite_asked`).
enum Asked {
    /// Nothing it asked for could be done.
    Nothing,
    /// A prerequisite ran: the same arguments are worth another try.
    RetrySame,
    /// A new argument set was made for the tool.
    NewCandidate,
}

/// How a riskier case's call ended.
enum CaseOutcome {
    /// Answered, successfully or with an error that teaches nothing.
    Done,
    /// Refused with this error, worth one more attempt.
    Refused(String),
    /// No answer (a timeout, a wait): the tool's other cases would cost the same.
    Unanswered,
    /// The server broke or could not be made ready: why, for the notes.
    Broken(String),
}

/// The explorer of one run.
pub struct Explorer<'a> {
    tools: &'a [ToolDecl],
    /// Each tool's input schema with its local references inlined (errors speak of nested
    /// fields that a `$ref` hides).
    schemas: Vec<Value>,
    options: &'a ExploreOptions,
    /// What the server was told and the run's words, for what the workspace holds.
    given: Given,
    progress: &'a ProgressHook,
    planned: Vec<PlannedTool>,
    /// Tool index → index into `planned`.
    plan_of: Vec<usize>,
    runs: Vec<ToolRun>,
    called: Vec<bool>,
    /// Tools whose turn was taken.
    taken: Vec<bool>,
    /// `--isolate`: tools whose first turn came, to be called together (`None` once they were).
    isolated_turns: Option<Vec<usize>>,
    /// Prerequisite calls made per tool.
    prerequisites: Vec<usize>,
    /// Per tool, the arguments and result of its last successful call (what a creating tool
    /// made, for the tools that need such an object).
    made: Vec<Option<(Value, Value)>>,
    /// Per tool, an argument set to try first on its next turn (made for it by another tool).
    next_first: Vec<Option<Value>>,
    /// Pool size and lessons when a tool's last turn ended (another turn is worth it when
    /// they grew).
    pool_at_turn: Vec<usize>,
    /// Lessons when a tool's last turn ended.
    lessons_at_turn: Vec<usize>,
    pool: ValuePool,
    /// Where a server said paths must be, once an error told us.
    steer: Option<WorkspaceFacts>,
    /// The kind of file (extension) the server's errors asked for.
    file_kind: Option<&'static str>,
    /// The server's errors refused absolute paths: paths are relative to the workspace.
    relative_paths: bool,
    /// Recognises an error that says a session is not set up (with the packs' contexts).
    not_set_up: Regex,
    /// Server-wide lessons learned (a kind of file, relative paths): a tool that failed
    /// before one was learned gets another turn.
    lessons: usize,
    workspace: std::path::PathBuf,
    partial: Option<String>,
    last_tool: Option<String>,
    position: usize,
    notes: Vec<String>,
}

impl<'a> Explorer<'a> {
    /// Plans the calls of `tools` over the workspace at `workspace`, as `options` say;
    /// `given` is what the server was told and the run's seed, `progress` where the explorer
    /// says which tool it is on.
    pub fn new(
        tools: &'a [ToolDecl],
        options: &'a ExploreOptions,
        given: Given,
        progress: &'a ProgressHook,
        workspace: &std::path::Path,
    ) -> Self {
        let facts = facts_of(workspace, &given);
        let planned = plan(
            tools,
            crate::workspace::vocab::SYNTHESIS_SEED,
            &options.overrides,
            Some(&facts),
            options.attempts,
        );
        let mut plan_of = vec![0; tools.len()];
        for (k, p) in planned.iter().enumerate() {
            plan_of[p.tool_index] = k;
        }
        let n = tools.len();
        let mut pool = ValuePool::with_packs(&options.packs)
            .knowing_listed(tools.iter().map(|t| t.name.as_str()))
            .knowing_tools(tools.iter().map(|t| t.name.as_str()));
        pool.know_workspace(&facts);
        Explorer {
            tools,
            schemas: tools
                .iter()
                .map(|t| super::synth::inline_refs(&t.input_schema))
                .collect(),
            options,
            given,
            progress,
            planned,
            plan_of,
            runs: vec![ToolRun::default(); n],
            called: vec![false; n],
            taken: vec![false; n],
            isolated_turns: Some(Vec::new()),
            prerequisites: vec![0; n],
            made: vec![None; n],
            next_first: vec![None; n],
            pool_at_turn: vec![0; n],
            lessons_at_turn: vec![0; n],
            pool,
            not_set_up: not_set_up(&options.packs),
            steer: None,
            file_kind: None,
            relative_paths: false,
            lessons: 0,
            workspace: workspace.to_path_buf(),
            partial: None,
            last_tool: None,
            position: 0,
            notes: Vec::new(),
        }
    }

    /// What an isolated run of tool `i` gave: its calls, or why it was not called.
    fn keep_isolated(&mut self, i: usize, result: Result<Vec<CallRecord>, String>) {
        match result {
            Ok(calls) => self.runs[i].calls = calls,
            Err(why) => self.runs[i].skipped = Some(why),
        }
    }

    /// Calls every planned tool through `host`; returns what was done and learned.
    pub async fn run<H: Host>(mut self, host: &mut H) -> Explored {
        self.progress
            .emit(ProgressEvent::Planned(self.planned.len()));
        let mut queue: std::collections::VecDeque<usize> =
            self.planned.iter().map(|p| p.tool_index).collect();
        // A run limited to some tools in an order (a replay of "this tool, then that one")
        // calls them in that order; tools outside the list (session set-up) keep their place
        // first.
        if let Some(only) = self
            .options
            .only_tools
            .as_ref()
            .filter(|_| self.options.keep_order)
        {
            let position = |i: &usize| only.iter().position(|n| *n == self.tools[*i].name);
            queue
                .make_contiguous()
                .sort_by_key(|i| position(i).map_or(0, |p| p + 1));
        }
        let mut deferred = vec![false; self.tools.len()];
        while let Some(i) = queue.pop_front() {
            if self.taken[i] {
                continue;
            }
            // A tool that takes references the pool cannot fill yet waits for the tools that
            // may hand them out (once).
            if !deferred[i] && queue.iter().any(|&j| !self.taken[j]) && self.awaits_references(i) {
                deferred[i] = true;
                queue.push_back(i);
                continue;
            }
            Box::pin(self.turn(i, host, 0)).await;
        }
        // --isolate: every tool on a server of its own, side by side where the host can.
        if let Some(turns) = self.isolated_turns.take().filter(|t| !t.is_empty()) {
            if self.partial.is_none() {
                let names: Vec<String> =
                    turns.iter().map(|&i| self.tools[i].name.clone()).collect();
                let results = host.isolated_all(&names).await;
                for (i, result) in turns.into_iter().zip(results) {
                    self.keep_isolated(i, result);
                }
                self.partial = host.must_stop();
            }
        }
        // Tools still without a successful call get another turn when the pool has grown
        // or a server-wide lesson was learned since their last one; again while such turns
        // succeed (a tool reached here hands out what one planned before it lacked: a
        // node's text read, then the edit that quotes it, then the review of that edit).
        for pass in 0..RETRY_PASSES {
            let reached_before = self.runs.iter().filter(|r| r.succeeded()).count();
            self.retry_pass(pass, host).await;
            if self.partial.is_some()
                || self.runs.iter().filter(|r| r.succeeded()).count() == reached_before
            {
                break;
            }
        }
        self.riskier_cases(host).await;
        let planned_arguments = (0..self.tools.len())
            .map(|i| self.planned[self.plan_of[i]].arguments().clone())
            .collect();
        Explored {
            runs: self.runs,
            called: self.called,
            planned_arguments,
            partial: self.partial,
            notes: self.notes,
            pooled_values: self.pool.len(),
        }
    }

    /// One pass of retries over the tools still without a successful call (pass 0 also makes
    /// what their last errors said was missing).
    async fn retry_pass<H: Host>(&mut self, pass: usize, host: &mut H) {
        for k in 0..self.planned.len() {
            let i = self.planned[k].tool_index;
            let run = &self.runs[i];
            if run.calls.is_empty() || run.succeeded() || run.skipped.is_some() {
                continue;
            }
            // A tool whose last call got no answer (a timeout, a wait, a crash) is not
            // retried with other arguments in its turn, nor here: each try would cost the
            // call timeout again for a hang that arguments rarely cause.
            if !run.calls.last().is_some_and(|c| c.outcome.answered()) {
                continue;
            }
            let grown = self.pool.learned() + self.lessons > self.pool_at_turn[i];
            let useful = self.lessons > self.lessons_at_turn[i]
                || self
                    .pooled_candidate(i, &self.planned[k].candidates[0])
                    .is_some();
            // What its last error said was missing can be made now: made, then tried on
            // (once: a later pass would make another of the same).
            let last = run
                .calls
                .last()
                .filter(|_| pass == 0)
                .map(|c| (error_text(&c.outcome, None), c.arguments.clone()));
            if let Some((text, arguments)) = last {
                let creator = self
                    .creator_for(i, &text)
                    .filter(|&j| self.made[j].is_some());
                if let Some(j) = creator {
                    if let Some(next) = self.make_object(j, i, &arguments, host).await {
                        self.next_first[i] = Some(next);
                    }
                }
            }
            if (grown && useful) || self.next_first[i].is_some() {
                self.notes.push(format!(
                    "{} was tried again after later calls taught what it may take",
                    self.tools[i].name
                ));
                Box::pin(self.turn(i, host, 0)).await;
            }
        }
    }

    /// Each tool that succeeded, called once for each riskier case of it (its other
    /// operations, its flags set the other way, an existing target: see
    /// [`super::variants`]), after every tool had its turns: every tool's cases that remove
    /// after every tool's others (so that what a case removes was there for the rest), each
    /// group in the plan's order. A case refused with an error gets one more attempt with what
    /// the error says to change, when that keeps the case. A case that gets no answer ends its
    /// tool's cases; one that breaks the server ends them all (a fresh server has lost the
    /// session the cases were made in).
    async fn riskier_cases<H: Host>(&mut self, host: &mut H) {
        if self.options.isolate || !self.options.riskier_cases {
            return;
        }
        let root = self
            .steer
            .as_ref()
            .map_or(self.workspace.clone(), |f| f.root.clone());
        let facts = facts_of(&root, &self.given);
        let mut cases: Vec<(usize, Value, super::variants::Variant)> = Vec::new();
        // The files the tools' working calls name: a file given in place of one that is gone
        // is none of these (another tool's cases may change or remove them), nor one given to
        // another tool before.
        let named_by = |runs: &[ToolRun], which: &dyn Fn(usize) -> bool| -> Vec<String> {
            runs.iter()
                .enumerate()
                .filter(|(j, _)| which(*j))
                .flat_map(|(_, r)| {
                    r.calls
                        .iter()
                        .filter(|c| c.number == 1 && c.outcome.is_success())
                })
                .filter_map(|c| c.arguments.as_object())
                .flat_map(|m| m.values().filter_map(Value::as_str).map(str::to_string))
                .collect()
        };
        let mut taken = FilesInUse {
            named: named_by(&self.runs, &|_| true),
            // Those that tools which remove or move name are never given.
            endangered: named_by(&self.runs, &|j| {
                super::plan::removes(&self.tools[j])
                    || words(&self.tools[j].name)
                        .iter()
                        .any(|w| matches!(w.as_str(), "move" | "rename" | "mv"))
            }),
        };
        for k in 0..self.planned.len() {
            let i = self.planned[k].tool_index;
            if self.refusal(i).is_some() || is_session_setup(&self.tools[i], &self.options.packs) {
                continue;
            }
            let Some(worked) = self.runs[i]
                .calls
                .iter()
                .find(|c| c.number == 1 && c.outcome.is_success())
                .map(|c| c.arguments.clone())
            else {
                continue;
            };
            let fixed: Vec<String> = self
                .options
                .overrides
                .get(&self.tools[i].name)
                .and_then(Value::as_object)
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            // A file the call read may be gone since (a later tool moved or removed it): the
            // cases take another existing file of its kind, or they would only fail.
            let worked = revived(&worked, &facts, &mut taken);
            for case in
                super::variants::variants(&self.tools[i], &self.schemas[i], &worked, &facts, &fixed)
            {
                cases.push((i, worked.clone(), case));
            }
        }
        // Stable: within each group, the plan's order and each tool's own.
        cases.sort_by_key(|(_, _, case)| case.removes);
        // The session the tools worked in may have been cleared or changed by a later tool
        // (`clear_working_dir`): its set-up runs again, as it worked, before the cases.
        if let Some((first, _, _)) = cases.first() {
            let first = *first;
            let setups: Vec<(usize, Value)> = (0..self.tools.len())
                .filter(|&j| is_session_setup(&self.tools[j], &self.options.packs))
                .filter_map(|j| {
                    let worked = self.runs[j].calls.iter().find(|c| c.outcome.is_success())?;
                    Some((j, worked.arguments.clone()))
                })
                .collect();
            for (j, arguments) in setups {
                self.call_for(j, first, &arguments, host).await;
            }
        }
        let mut unanswered: Vec<usize> = Vec::new();
        // Files found gone while the cases ran (another case moved or removed them), each with
        // the file given instead, for the tool's later cases.
        let mut swapped: Vec<(usize, Value, Value)> = Vec::new();
        for (i, worked, mut case) in cases {
            if self.partial.is_some() {
                return;
            }
            if unanswered.contains(&i) {
                continue;
            }
            for (_, from, to) in swapped.iter().filter(|(j, _, _)| *j == i) {
                if let Some(m) = case.arguments.as_object_mut() {
                    for v in m.values_mut().filter(|v| *v == from) {
                        *v = to.clone();
                    }
                }
            }
            let text = match self.call_variant(i, &case, &case.arguments, host).await {
                CaseOutcome::Done => continue,
                CaseOutcome::Unanswered => {
                    unanswered.push(i);
                    continue;
                }
                CaseOutcome::Broken(why) => {
                    self.notes.push(why);
                    return;
                }
                CaseOutcome::Refused(text) => text,
            };
            // "ENOENT: no such file or directory, stat '/w/a.txt'": a file the case names is
            // gone; another of its kind, once, for this case and the tool's later ones.
            let lowered = text.to_lowercase();
            if NOT_THERE.iter().any(|p| lowered.contains(p)) {
                let now = facts_of(&root, &self.given);
                let next = revived(&case.arguments, &now, &mut taken);
                if next != case.arguments {
                    if let (Some(old), Some(new)) = (case.arguments.as_object(), next.as_object()) {
                        for (k, v) in old {
                            if new.get(k) != Some(v) {
                                swapped.push((i, v.clone(), new[k].clone()));
                            }
                        }
                    }
                    if let CaseOutcome::Broken(why) = self.call_variant(i, &case, &next, host).await
                    {
                        self.notes.push(why);
                        return;
                    }
                    continue;
                }
            }
            let k = self.plan_of[i];
            let mut others = vec![worked];
            others.extend(self.planned[k].candidates.iter().cloned());
            let next = corrections(
                &text,
                &self.schemas[i],
                &case.arguments,
                &others,
                &self.options.packs,
            )
            .into_iter()
            .filter(|c| !self.puts_a_tool_name(c, &case.arguments))
            .find(|c| c.get(&case.parameter) == case.arguments.get(&case.parameter));
            if let Some(next) = next {
                if let CaseOutcome::Broken(why) = self.call_variant(i, &case, &next, host).await {
                    self.notes.push(why);
                    return;
                }
            }
        }
    }

    /// Calls tool `i` with `arguments` for riskier case `case` (numbered 0, marked with the
    /// case), and says how it ended.
    async fn call_variant<H: Host>(
        &mut self,
        i: usize,
        case: &super::variants::Variant,
        arguments: &Value,
        host: &mut H,
    ) -> CaseOutcome {
        let name = self.tools[i].name.clone();
        if let Some(why) = host.must_stop() {
            self.partial.get_or_insert(why);
            return CaseOutcome::Done;
        }
        if let Err(why) = host.ready().await {
            return CaseOutcome::Broken(format!(
                "riskier cases stopped before {name}'s ({}): {why}",
                case.what
            ));
        }
        host.between_calls(self.last_tool.as_deref());
        self.last_tool = Some(name.clone());
        let label = format!("variant ({})", case.what);
        let observed = host
            .call(&name, &format!("{name} {label}"), arguments)
            .await;
        let mut record = observed.record;
        record.number = 0;
        record.attempt = 0;
        record.variant = Some(case.what.clone());
        let outcome = record.outcome.clone();
        if let (true, Some(r)) = (outcome.is_success(), &observed.result) {
            if case.removes || removes(&self.tools[i]) {
                self.pool.forget(&name, arguments);
            }
            self.pool.end(&name, arguments);
            self.pool.learn(&name, &label, r);
        }
        self.runs[i].calls.push(record);
        if observed.broken || observed.interrupted {
            if observed.interrupted {
                self.partial = Some("interrupted by a signal".into());
            }
            host.discard(self.last_tool.as_deref()).await;
            return CaseOutcome::Broken(format!(
                "riskier cases stopped at {name}'s ({}): the server {}; a fresh one would lack \
                 the session the other cases were made in",
                case.what,
                outcome.label()
            ));
        }
        if !outcome.answered() {
            return CaseOutcome::Unanswered;
        }
        if outcome.worth_another_attempt() {
            CaseOutcome::Refused(error_text(&outcome, observed.result.as_ref()))
        } else {
            CaseOutcome::Done
        }
    }

    /// Whether tool `i` requires a reference (an id, a pid, a session) that the pool cannot
    /// give yet.
    fn awaits_references(&self, i: usize) -> bool {
        let schema = &self.tools[i].input_schema;
        let (Some(props), Some(required)) = (
            schema.get("properties").and_then(Value::as_object),
            schema.get("required").and_then(Value::as_array),
        ) else {
            return false;
        };
        let overrides = self.options.overrides.get(&self.tools[i].name);
        required.iter().filter_map(Value::as_str).any(|name| {
            let Some(p) = props.get(name).and_then(Value::as_object) else {
                return false;
            };
            let ws = words(name);
            let reference = ws.last().is_some_and(|w| {
                matches!(
                    w.as_str(),
                    "id" | "ids" | "uuid" | "pid" | "handle" | "session" | "token" | "cursor"
                ) || (w.ends_with("id") && w.len() > 3 && w != "valid")
            });
            reference
                && !p.contains_key("enum")
                && !p.contains_key("default")
                && overrides.and_then(|o| o.get(name)).is_none()
                && self.pool.pick(&self.tools[i].name, name, p).is_none()
        })
    }

    /// Why tool `i` is not called at all, if it is not (the plan skips it, or it is not
    /// selected).
    fn refusal(&self, i: usize) -> Option<String> {
        if let Some(why) = &self.planned[self.plan_of[i]].skip {
            return Some(why.clone());
        }
        match &self.options.only_tools {
            // A run limited to some tools (a replay, `--isolate`) still sets up the session
            // they work in.
            Some(only)
                if !only.contains(&self.tools[i].name)
                    && !is_session_setup(&self.tools[i], &self.options.packs) =>
            {
                Some("not selected for this run".into())
            }
            _ => None,
        }
    }

    /// One turn of tool `i`: its first call, tried with candidate argument sets in turn while
    /// it fails, then its repeats. `depth` is 1 for a tool called as another's prerequisite.
    async fn turn<H: Host>(&mut self, i: usize, host: &mut H, depth: usize) {
        let first_turn = self.begin_turn(i);
        if let Some(why) = self.refusal(i) {
            self.runs[i].skipped = Some(why);
            return;
        }
        if self.partial.is_none() {
            self.partial = host.must_stop();
        }
        if self.partial.is_some() {
            return;
        }
        if depth == 0 && first_turn {
            self.named_prerequisites_first(i, host, depth).await;
        }
        if self.options.isolate {
            self.called[i] = true;
            if let Some(turns) = self.isolated_turns.as_mut() {
                turns.push(i);
                return;
            }
            let result = host.isolated(&self.tools[i].name).await;
            self.keep_isolated(i, result);
            self.partial = self.partial.take().or_else(|| host.must_stop());
            return;
        }
        let (mut candidates, mut provenance, previous_attempts) = self.turn_candidates(i);
        if candidates.is_empty() {
            return;
        }
        let mut budget = self.options.attempts.max(1);
        let max_budget = budget * 3;
        let mut errors_seen: Vec<String> = Vec::new();
        let mut number = 1;
        let mut attempt = 1;
        let mut retried_after_death = false;
        let mut alternated = 0;
        let mut reshaped = false;
        while number <= self.options.repeat {
            if let Some(why) = host.must_stop() {
                self.partial.get_or_insert(why);
                break;
            }
            if let Err(why) = host.ready().await {
                if self.runs[i].calls.is_empty() {
                    self.runs[i].skipped = Some(why.clone());
                }
                self.notes.push(why);
                break;
            }
            let arguments = candidates[attempt - 1].clone();
            let (outcome, result, broken, interrupted) = self
                .call_once(
                    i,
                    host,
                    &arguments,
                    number,
                    previous_attempts + attempt,
                    &provenance,
                )
                .await;
            if interrupted {
                self.partial = Some("interrupted by a signal".into());
            }
            if broken || interrupted {
                host.discard(self.last_tool.as_deref()).await;
                // A server found dead at a tool's first call may have been dying before it
                // (it stopped listening after the call before, a background thread crashed
                // it): the same call once more on a fresh server tells that from a tool that
                // kills it.
                if !interrupted
                    && number == 1
                    && !retried_after_death
                    && matches!(outcome, CallOutcome::ServerDied)
                {
                    retried_after_death = true;
                    self.runs[i].synthesis_notes.push(
                        "the server died at its first call: the call was made once more on a \
                         fresh server"
                            .into(),
                    );
                    candidates.insert(attempt, arguments);
                    attempt += 1;
                    continue;
                }
                break;
            }
            let mut retry_same = false;
            let mut instructed = false;
            if number == 1 && outcome.worth_another_attempt() {
                let error_text = error_text(&outcome, result.as_ref());
                let learned =
                    self.learn_from_error(i, &error_text, &arguments, attempt, &mut candidates);
                // An error that differs from the ones before and says what to change is
                // progress: one more attempt, up to a bound.
                instructed = learned > 0;
                if learned > 0 && !errors_seen.contains(&error_text) {
                    if !errors_seen.is_empty() && budget < max_budget {
                        budget += 1;
                    }
                    errors_seen.push(error_text.clone());
                }
                match self
                    .prerequisite_asked(
                        i,
                        depth,
                        &error_text,
                        &arguments,
                        attempt,
                        &mut candidates,
                        host,
                    )
                    .await
                {
                    Asked::Nothing => {}
                    Asked::RetrySame => {
                        retry_same = true;
                        budget += 1;
                    }
                    Asked::NewCandidate => {
                        instructed = true;
                        budget += 1;
                    }
                }
            }
            if self.partial.is_some() {
                break;
            }
            // A refused set that took references from the pool ("Cannot update completed
            // task", "Todo with ID '1' not found": that object is done or gone) is tried
            // with other pooled ones of the same kind (twice at most), unless the error said what to do
            // instead or names a thing a tool makes ("Sheet 'x' has no charts": one is made
            // there).
            if number == 1
                && alternated < MAX_ALTERNATIVES
                && !instructed
                && !retry_same
                && outcome.worth_another_attempt()
            {
                let refusal = error_text(&outcome, result.as_ref());
                let alternative = self
                    .creator_for(i, &refusal)
                    .is_none()
                    .then(|| self.other_pooled(i, &arguments, &provenance, &refusal))
                    .flatten();
                if let Some((c, sources)) = alternative {
                    if !candidates[..attempt].contains(&c) {
                        alternated += 1;
                        self.runs[i].synthesis_notes.push(format!(
                            "attempt {attempt} was refused on pooled values: other ones were \
                             tried ({})",
                            sources.keys().cloned().collect::<Vec<_>>().join(", ")
                        ));
                        provenance.push((c.clone(), sources));
                        candidates.retain(|x| *x != c);
                        candidates.insert(attempt, c);
                        budget += 1;
                    }
                }
            }
            // "Relation not found": an existing one of the shape, as an answer held it.
            if number == 1
                && !reshaped
                && !instructed
                && !retry_same
                && outcome.worth_another_attempt()
            {
                let refusal = error_text(&outcome, result.as_ref()).to_lowercase();
                let shaped = NOT_THERE
                    .iter()
                    .any(|p| refusal.contains(p))
                    .then(|| self.shaped_candidate(i, &arguments))
                    .flatten();
                if let Some((c, sources)) =
                    shaped.filter(|(c, _)| !candidates[..attempt].contains(c))
                {
                    reshaped = true;
                    self.runs[i].synthesis_notes.push(format!(
                        "attempt {attempt} named what is not there: {} took what an answer \
                         held",
                        sources.keys().cloned().collect::<Vec<_>>().join(", ")
                    ));
                    provenance.push((c.clone(), sources));
                    candidates.retain(|x| *x != c);
                    candidates.insert(attempt, c);
                    budget += 1;
                }
            }
            if retry_same {
                // Again, with what the prerequisite handed out where it fits.
                let next = match self.pooled_candidate(i, &arguments) {
                    Some((c, sources)) => {
                        provenance.push((c.clone(), sources));
                        c
                    }
                    None => arguments,
                };
                candidates.insert(attempt, next);
                attempt += 1;
                continue;
            }
            let retry = number == 1
                && attempt < candidates.len().min(budget)
                && outcome.worth_another_attempt();
            if retry {
                attempt += 1;
            } else if number == 1 && !outcome.answered() {
                // A first call that got no answer (the tool waits on something that does not
                // come) is not repeated: the repeat would cost the call timeout again and
                // judge nothing (idempotence needs a first call that succeeded).
                break;
            } else {
                number += 1;
            }
        }
        self.pool_at_turn[i] = self.pool.learned() + self.lessons;
        self.lessons_at_turn[i] = self.lessons;
    }

    /// Takes tool `i`'s turn: its first is shown in the progress and starts its record with
    /// the plan's notes. Whether it is the first.
    fn begin_turn(&mut self, i: usize) -> bool {
        let first_turn = !self.taken[i];
        self.taken[i] = true;
        if first_turn {
            let k = self.plan_of[i];
            self.progress.emit(ProgressEvent::Tool {
                position: self.position,
                name: &self.tools[i].name,
            });
            self.position += 1;
            self.runs[i].synthesis_notes = self.planned[k].notes.clone();
            self.runs[i].overridden = self.planned[k].overridden.clone();
        }
        first_turn
    }

    /// One call of tool `i` with `arguments` (its `number`, the first or a repeat, and its
    /// attempt as shown), recorded; what a successful one answered goes to the pool. The
    /// outcome, the result, and whether the server broke or the run was interrupted.
    async fn call_once<H: Host>(
        &mut self,
        i: usize,
        host: &mut H,
        arguments: &Value,
        number: usize,
        shown_attempt: usize,
        provenance: &Provenance,
    ) -> (CallOutcome, Option<Value>, bool, bool) {
        let tool = &self.tools[i];
        host.between_calls(self.last_tool.as_deref());
        self.called[i] = true;
        self.last_tool = Some(tool.name.clone());
        let label = if number == 1 && shown_attempt > 1 {
            format!("call 1 (attempt {shown_attempt})")
        } else if number == 1 {
            "call 1".to_string()
        } else {
            format!("repeat {number}")
        };
        let observed = host
            .call(&tool.name, &format!("{} {label}", tool.name), arguments)
            .await;
        let ObservedCall {
            mut record,
            result,
            broken,
            interrupted,
        } = observed;
        record.number = number;
        record.attempt = shown_attempt;
        record.pooled = provenance
            .iter()
            .find(|(c, _)| c == arguments)
            .map(|(_, s)| s.clone())
            .unwrap_or_default();
        let outcome = record.outcome.clone();
        if let (true, Some(r)) = (outcome.is_success(), &result) {
            if removes(tool) {
                self.pool.forget(&tool.name, arguments);
            }
            self.pool.end(&tool.name, arguments);
            self.pool.learn(&tool.name, &label, r);
            self.made[i] = Some((arguments.clone(), r.clone()));
        }
        self.runs[i].calls.push(record);
        (outcome, result, broken, interrupted)
    }

    /// Tools its description says must run first ("call list_vaults first"), called first.
    async fn named_prerequisites_first<H: Host>(&mut self, i: usize, host: &mut H, depth: usize) {
        let description = self.tools[i].description.clone().unwrap_or_default();
        for j in self.prerequisites_named(&description, i, true) {
            if !self.taken[j] {
                self.runs[i].synthesis_notes.push(format!(
                    "its description asks for {} first: called before it",
                    self.tools[j].name
                ));
                Box::pin(self.turn(j, host, depth + 1)).await;
            }
        }
    }

    /// The argument sets of a turn of tool `i`, in order, each with the references the pool
    /// can fill (an invented id never works where a real one is known), without those a
    /// turn before tried (unless what it lacked was made since), a set made for it first;
    /// with where pooled values came from and how many attempts earlier turns made.
    fn turn_candidates(&mut self, i: usize) -> (Vec<Value>, Provenance, usize) {
        let mut provenance: Provenance = Vec::new();
        let mut candidates: Vec<Value> = Vec::new();
        for c in self.candidates_for(i) {
            let c = match self.pooled_candidate(i, &c) {
                Some((pooled, sources)) => {
                    if provenance.is_empty() {
                        self.runs[i].synthesis_notes.push(format!(
                            "values from earlier responses: {}",
                            sources
                                .iter()
                                .map(|(k, s)| format!("{k} from {s}"))
                                .collect::<Vec<_>>()
                                .join("; ")
                        ));
                    }
                    provenance.push((pooled.clone(), sources));
                    pooled
                }
                None => c,
            };
            if !candidates.contains(&c) {
                candidates.push(c);
            }
        }
        let tried: Vec<Value> = self.runs[i]
            .calls
            .iter()
            .filter(|c| c.number == 1)
            .map(|c| c.arguments.clone())
            .collect();
        if !tried.is_empty() {
            candidates.retain(|c| !tried.contains(c));
        }
        if let Some(first) = self.next_first[i].take() {
            candidates.retain(|c| *c != first);
            candidates.insert(0, first);
        }
        (candidates, provenance, tried.len())
    }

    /// What tool `i`'s error asks to happen first, made to happen: a prerequisite tool it
    /// names ("use set_working_dir first"), a tool with the action it names ("unmerge them
    /// first"), or the tool that makes the object it lacks ("Sheet 'x' has no charts"), which
    /// puts a new set in `candidates` at `attempt`.
    #[allow(clippy::too_many_arguments)]
    async fn prerequisite_asked<H: Host>(
        &mut self,
        i: usize,
        depth: usize,
        error_text: &str,
        arguments: &Value,
        attempt: usize,
        candidates: &mut Vec<Value>,
        host: &mut H,
    ) -> Asked {
        // "No working directory set; use set_working_dir first": run that tool,
        // then try the same arguments again.
        if depth == 0 && self.prerequisites[i] < MAX_PREREQUISITES_PER_TOOL {
            if let Some(j) = self
                .prerequisites_named(error_text, i, false)
                .first()
                .copied()
            {
                self.prerequisites[i] += 1;
                if self.satisfy(j, i, host).await {
                    return Asked::RetrySame;
                }
            }
        }
        if depth == 0 && self.prerequisites[i] < MAX_PREREQUISITES_PER_TOOL {
            if let Some((j, action)) = self.action_first(i, error_text, arguments) {
                // "Unmerge them first": the tool with that action, on the same place.
                self.prerequisites[i] += 1;
                self.runs[i].synthesis_notes.push(format!(
                    "its error asked to {} first: {} was called with that action",
                    action.1, self.tools[j].name
                ));
                let args = action.0;
                if self.call_for(j, i, &args, host).await.is_some() {
                    return Asked::RetrySame;
                }
            }
        }
        if depth == 0 && self.prerequisites[i] < MAX_PREREQUISITES_PER_TOOL {
            // A creator that already ran without making anything cannot help.
            let creator = self
                .creator_for(i, error_text)
                .filter(|&j| !self.taken[j] || self.made[j].is_some());
            if let Some(j) = creator {
                // "Sheet 'x' has no charts": the tool that makes one runs, then this
                // one is tried on what it made.
                self.prerequisites[i] += 1;
                if let Some(next) = self.make_object(j, i, arguments, host).await {
                    candidates.retain(|c| *c != next);
                    candidates.insert(attempt.min(candidates.len()), next);
                    return Asked::NewCandidate;
                }
            }
        }
        Asked::Nothing
    }

    /// Makes prerequisite `j` of tool `i` happen: its own turn when it had none, else a call
    /// with the arguments that worked for it. Whether it succeeded.
    async fn satisfy<H: Host>(&mut self, j: usize, i: usize, host: &mut H) -> bool {
        let name_j = self.tools[j].name.clone();
        if !self.taken[j] {
            self.runs[i].synthesis_notes.push(format!(
                "an error named {name_j}: it was called before the next attempt"
            ));
            Box::pin(self.turn(j, host, 1)).await;
            return self.runs[j].succeeded();
        }
        // A tool that already ran gave what it gives (its values are in the pool); only a
        // session set-up or a loader is worth repeating (a restarted server lost what it
        // set, a later tool closed or unloaded what it opened).
        if !is_session_setup(&self.tools[j], &self.options.packs) && !loads(&self.tools[j]) {
            return false;
        }
        let Some(arguments) = self.runs[j]
            .calls
            .iter()
            .find(|c| c.outcome.is_success())
            .map(|c| c.arguments.clone())
        else {
            return false;
        };
        self.runs[i].synthesis_notes.push(format!(
            "an error named {name_j}: it was called again before the next attempt"
        ));
        self.call_for(j, i, &arguments, host).await.is_some()
    }

    /// Calls tool `j` with `arguments` for tool `i` (a prerequisite call, numbered 0 and
    /// marked as made for `i`); its result when it succeeded.
    async fn call_for<H: Host>(
        &mut self,
        j: usize,
        i: usize,
        arguments: &Value,
        host: &mut H,
    ) -> Option<Value> {
        let name_i = self.tools[i].name.clone();
        let name_j = self.tools[j].name.clone();
        if host.must_stop().is_some() || host.ready().await.is_err() {
            return None;
        }
        host.between_calls(self.last_tool.as_deref());
        let observed = host
            .call(
                &name_j,
                &format!("{name_j} call before {name_i}"),
                arguments,
            )
            .await;
        let mut record = observed.record;
        record.number = 0;
        record.attempt = 0;
        record.prerequisite_for = Some(name_i);
        let ok = record.outcome.is_success();
        let result = observed.result.filter(|_| ok);
        if let Some(r) = &result {
            self.pool.learn(&name_j, "call", r);
            self.made[j] = Some((arguments.clone(), r.clone()));
        }
        self.runs[j].calls.push(record);
        self.last_tool = Some(name_j);
        if observed.broken || observed.interrupted {
            if observed.interrupted {
                self.partial = Some("interrupted by a signal".into());
            }
            host.discard(self.last_tool.as_deref()).await;
            return None;
        }
        result
    }

    /// The tool that makes what error `text` of tool `i` says is missing ("Sheet 'x' has no
    /// charts" → `create_chart`, "There are no sparklines in …" → `add_sparklines`, "No name
    /// 'T' is defined" → `set_defined_name`), if one tool's name is about that object.
    fn creator_for(&self, i: usize, text: &str) -> Option<usize> {
        let lowered = text.to_lowercase();
        let mut phrase: Vec<String> = Vec::new();
        for c in ABSENT.captures_iter(&lowered).take(3) {
            for g in ["what", "what2", "state"].iter().filter_map(|n| c.name(n)) {
                phrase.extend(
                    words(g.as_str())
                        .iter()
                        .filter(|w| !matches!(w.as_str(), "or" | "and" | "a" | "an" | "the"))
                        .map(|w| super::pool::singular(w)),
                );
            }
        }
        if phrase.is_empty() {
            return None;
        }
        let joined = phrase.concat();
        (0..self.tools.len())
            .filter(|&j| j != i && self.planned[self.plan_of[j]].skip.is_none())
            .filter(|&j| self.refusal(j).is_none() && !removes(&self.tools[j]))
            .filter(|&j| {
                let first = words(&self.tools[j].name)
                    .first()
                    .cloned()
                    .unwrap_or_default();
                MAKING_VERBS.contains(&first.as_str())
            })
            .filter_map(|j| {
                let objects = super::pool::objects_of(&self.tools[j].name);
                let all_named = !objects.is_empty()
                    && (objects.iter().all(|o| phrase.contains(o))
                        || joined.contains(&objects.concat()));
                all_named.then_some((objects.len(), j))
            })
            .min()
            .map(|(_, j)| j)
    }

    /// "Unmerge them first", "Unlock the sheet first": another tool with that action among
    /// the values of one of its parameters (`merge_cells` with `action: unmerge`), and its
    /// arguments: its first planned set with the place tool `i` was called on
    /// (`arguments`' values of the same names) and the action set. Returns the tool, the
    /// arguments and the action.
    #[allow(clippy::type_complexity)]
    fn action_first(
        &self,
        i: usize,
        text: &str,
        arguments: &Value,
    ) -> Option<(usize, (Value, String))> {
        let lowered = text.to_lowercase();
        let verb = ACTION_FIRST
            .captures(&lowered)?
            .get(1)?
            .as_str()
            .to_string();
        (0..self.tools.len())
            .filter(|&j| j != i && self.refusal(j).is_none())
            .find_map(|j| {
                let props = self.schemas[j].get("properties")?.as_object()?;
                let (param, value) = props.iter().find_map(|(k, p)| {
                    let v = p
                        .get("enum")?
                        .as_array()?
                        .iter()
                        .find(|v| v.as_str().is_some_and(|s| s.eq_ignore_ascii_case(&verb)))?;
                    Some((k.clone(), v.clone()))
                })?;
                let mut args = self.planned[self.plan_of[j]].arguments().clone();
                if let Value::Object(m) = &mut args {
                    for (k, _) in props {
                        if let Some(v) = arguments.get(k).filter(|v| v.is_string()) {
                            m.insert(k.clone(), v.clone());
                        }
                    }
                    m.insert(param, value);
                }
                Some((j, (args, verb.clone())))
            })
    }

    /// Makes the object tool `i` missed with creating tool `j`: `j`'s own turn when it had
    /// none, else `j` again with the arguments that worked for it. Returns `i`'s next
    /// arguments: `arguments` with the values of the same name taken from what `j` answered
    /// (the new object's name, sheet, cell) or was given.
    async fn make_object<H: Host>(
        &mut self,
        j: usize,
        i: usize,
        arguments: &Value,
        host: &mut H,
    ) -> Option<Value> {
        let name_j = self.tools[j].name.clone();
        if !self.taken[j] {
            self.runs[i].synthesis_notes.push(format!(
                "its error said what it needs does not exist: {name_j} was called to make it"
            ));
            Box::pin(self.turn(j, host, 1)).await;
        } else {
            let (made_with, _) = self.made[j].clone()?;
            self.runs[i].synthesis_notes.push(format!(
                "its error said what it needs does not exist: {name_j} was called again to make it"
            ));
            // Where this tool looked (its file, its sheet), else where it worked before.
            let here = with_shared(&made_with, arguments);
            let made = if here != made_with {
                self.call_for(j, i, &here, host).await
            } else {
                None
            };
            if made.is_none() {
                self.call_for(j, i, &made_with, host).await?;
            }
        }
        let (made_with, answer) = self.made[j].clone()?;
        let answered = answer
            .get("structuredContent")
            .filter(|v| v.is_object())
            .cloned()
            .or_else(|| {
                answer
                    .get("content")?
                    .as_array()?
                    .iter()
                    .filter_map(|c| c.get("text").and_then(Value::as_str))
                    .find_map(super::pool::json_in)
                    .filter(Value::is_object)
            })
            .unwrap_or(Value::Null);
        let props = self.schemas[i].get("properties")?.as_object()?;
        let made_value = |name: &str| {
            answered
                .get(name)
                .filter(|v| v.is_string() || v.is_number())
                .or_else(|| made_with.get(name).filter(|v| !v.is_object()))
                .cloned()
        };
        let mut next = arguments.as_object().cloned().unwrap_or_default();
        for (name, schema) in props {
            if let Some(v) = made_value(name) {
                next.insert(name.clone(), v);
                continue;
            }
            // An object that names what it refers to (`target: {sheet, name}`).
            let Some(inner_props) = schema.get("properties").and_then(Value::as_object) else {
                continue;
            };
            let mut inner = next
                .get(name)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let mut filled = false;
            for inner_name in inner_props.keys() {
                if let Some(v) = made_value(inner_name) {
                    inner.insert(inner_name.clone(), v);
                    filled = true;
                }
            }
            if filled {
                next.insert(name.clone(), Value::Object(inner));
            }
        }
        Some(Value::Object(next))
    }

    /// The planned candidates of tool `i`, with a session set-up tool's directory set first
    /// and the directory a server said it allows.
    fn candidates_for(&self, i: usize) -> Vec<Value> {
        let tool = &self.tools[i];
        // Earlier tools moved, deleted and created files: the sets are made again over what
        // the workspace holds now (the plan's were made before any call).
        let facts = facts_of(&self.workspace, &self.given);
        let mut candidates = plan(
            std::slice::from_ref(tool),
            crate::workspace::vocab::SYNTHESIS_SEED,
            &self.options.overrides,
            Some(&facts),
            self.options.attempts,
        )
        .pop()
        .map(|p| p.candidates)
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| self.planned[self.plan_of[i]].candidates.clone());
        let lessons = if self.file_kind.is_some() || self.relative_paths {
            let lesson_facts = self.steer.as_ref().unwrap_or(&facts);
            self.lesson_candidates(tool, lesson_facts, self.file_kind, false)
        } else {
            Vec::new()
        };
        // Once the server said which kind of file it works on, planned sets without a path of
        // that kind (other kinds, or invented names) are dropped where the tool takes such a
        // file (the sets of that kind come first below).
        if let Some(kind) = self.file_kind {
            let suffix = format!(".{kind}\"");
            let of_kind = |c: &Value| c.to_string().contains(&suffix);
            if lessons.iter().any(of_kind) {
                candidates.retain(of_kind);
            }
        }
        if let Some(facts) = &self.steer {
            let c = steered_candidate(
                tool,
                crate::workspace::vocab::SYNTHESIS_SEED,
                &self.options.overrides,
                facts,
            );
            candidates.retain(|x| *x != c);
            candidates.insert(0, c);
        }
        for (n, c) in lessons.into_iter().enumerate() {
            candidates.retain(|x| *x != c);
            candidates.insert(n, c);
        }
        if is_session_setup(tool, &self.options.packs) {
            let root = self
                .steer
                .as_ref()
                .map_or(self.workspace.clone(), |f| f.root.clone());
            if let Some(c) = directory_candidate(tool, &candidates[0], &root, &self.options.packs) {
                candidates.retain(|x| *x != c);
                candidates.insert(0, c);
            }
        }
        candidates
    }

    /// Argument sets for `tool` over `facts` that follow what the server taught: files of
    /// `kind`, existing ones with `existing`, relative paths once the server asked for them.
    fn lesson_candidates(
        &self,
        tool: &ToolDecl,
        facts: &WorkspaceFacts,
        kind: Option<&'static str>,
        existing: bool,
    ) -> Vec<Value> {
        kind_candidate(
            tool,
            crate::workspace::vocab::SYNTHESIS_SEED,
            &self.options.overrides,
            facts,
            kind,
            existing,
            self.relative_paths,
        )
    }

    /// `base` with every reference parameter the pool can fill taken from it, and where each
    /// came from; `None` when the pool fills nothing.
    fn pooled_candidate(
        &self,
        i: usize,
        base: &Value,
    ) -> Option<(Value, BTreeMap<String, String>)> {
        let tool = &self.tools[i];
        let props = tool.input_schema.get("properties")?.as_object()?;
        let overrides = self.options.overrides.get(&tool.name);
        let mut args: Map<String, Value> = base.as_object().cloned().unwrap_or_default();
        let creates = super::semantics::Intent::of(tool) == super::semantics::Intent::Create;
        let mut sources = BTreeMap::new();
        for (name, schema) in props {
            let Some(schema) = schema.as_object() else {
                continue;
            };
            if overrides.and_then(|o| o.get(name)).is_some() {
                continue;
            }
            // A tool that creates takes a fresh name, not an existing one (a new branch's
            // name is no branch that exists; the one it starts from is).
            let ws = words(name);
            let last = ws.last().cloned().unwrap_or_default();
            let starts_from = ws.iter().any(|w| {
                matches!(
                    w.as_str(),
                    "from" | "base" | "source" | "start" | "upstream"
                )
            });
            if creates
                && (matches!(last.as_str(), "name" | "title")
                    || (matches!(last.as_str(), "branch" | "tag") && !starts_from))
            {
                continue;
            }
            // Two parameters of one call that name things by id name two of them
            // (`task_id`, `depends_on_task_id`) when the pool has two.
            let idish = last.ends_with("id") || last == "ids";
            let given: Vec<Value> = sources
                .keys()
                .filter_map(|k| args.get(k).cloned())
                .collect();
            let pick = self.pool.pick(&tool.name, name, schema).and_then(|p| {
                if idish && given.contains(&p.value) {
                    self.pool
                        .pick_excluding(&tool.name, name, schema, &given)
                        .or(Some(p))
                } else {
                    Some(p)
                }
            });
            if let Some(pick) = pick {
                if args.get(name) != Some(&pick.value) {
                    args.insert(name.clone(), pick.value);
                    sources.insert(name.clone(), pick.source);
                }
            }
        }
        (!sources.is_empty()).then(|| (Value::Object(args), sources))
    }

    /// `sent` with what an answer held whole in place of what was made up, for a tool that
    /// works on existing things and was told what it named is not there ("Relation not
    /// found"): a list of objects or an object of a shape an answer held (a relation from
    /// the graph just read), or the tool's own arguments as such an object (the `source`,
    /// `target` and `type` of a relation to remove). `None` when no answer held one.
    fn shaped_candidate(
        &self,
        i: usize,
        sent: &Value,
    ) -> Option<(Value, BTreeMap<String, String>)> {
        let tool = &self.tools[i];
        if super::semantics::Intent::of(tool) == super::semantics::Intent::Create {
            return None;
        }
        let props = tool.input_schema.get("properties")?.as_object()?;
        let overrides = self.options.overrides.get(&tool.name);
        let mut next = sent.as_object()?.clone();
        let mut sources = BTreeMap::new();
        let mut put = |name: &str, value: Value, source: &str| {
            if overrides.and_then(|o| o.get(name)).is_none() && next.get(name) != Some(&value) {
                next.insert(name.to_string(), value);
                sources.insert(name.to_string(), source.to_string());
            }
        };
        for (name, schema) in props {
            let Some(schema) = schema.as_object() else {
                continue;
            };
            let (item, listed) = match schema.get("type").and_then(Value::as_str) {
                Some("array") => match schema.get("items").and_then(Value::as_object) {
                    Some(item) => (item, true),
                    None => continue,
                },
                Some("object") => (schema, false),
                _ => continue,
            };
            if let Some(pick) = self.pool.pick_object(item) {
                let value = if listed {
                    Value::Array(vec![pick.value])
                } else {
                    pick.value
                };
                put(name, value, &pick.source);
            }
        }
        if let Some(pick) = tool
            .input_schema
            .as_object()
            .and_then(|schema| self.pool.pick_object(schema))
        {
            for (name, value) in pick.value.as_object().into_iter().flatten() {
                put(name, value.clone(), &pick.source);
            }
        }
        (!sources.is_empty()).then(|| (Value::Object(next), sources))
    }

    /// `sent` (a set that took pooled values, as `provenance` records) with the pooled
    /// values `refusal` is about replaced by the pool's next best for their parameters,
    /// passing over every value tool `i`'s first calls sent there; `None` when the pool has
    /// no other. The refusal is about the values it quotes ("Todo with ID '1' not found"),
    /// else those whose parameter names the thing it names ("Cannot update completed task":
    /// `taskId`, not `requestId`); a refusal of something else ("unknown op") keeps them.
    fn other_pooled(
        &self,
        i: usize,
        sent: &Value,
        provenance: &Provenance,
        refusal: &str,
    ) -> Option<(Value, BTreeMap<String, String>)> {
        // Only a refusal of the thing named (gone, unknown, in a state that forbids the
        // call), not of the value's type ("Input should be a valid list").
        let lowered = refusal.to_lowercase();
        let about_the_thing = NOT_THERE
            .iter()
            .chain(&["cannot ", "can't ", "unknown ", "already "])
            .any(|p| lowered.contains(p));
        // "Title cannot be empty", "Unknown error": about a value or nothing in particular.
        let about_a_value = ["cannot be ", "can't be ", "unknown error"]
            .iter()
            .any(|p| lowered.contains(p));
        if !about_the_thing || about_a_value {
            return None;
        }
        let (_, pooled) = provenance.iter().find(|(c, _)| c == sent)?;
        let tool = &self.tools[i];
        let props = tool.input_schema.get("properties")?.as_object()?;
        let mut next = sent.as_object()?.clone();
        let refused_words: Vec<String> = words(&lowered)
            .into_iter()
            .map(|w| super::pool::singular(&w))
            .collect();
        let quoted: Vec<&String> = pooled
            .keys()
            .filter(|name| {
                sent.get(name.as_str())
                    .and_then(scalar_text)
                    .is_some_and(|v| quotes(&lowered, &v.to_lowercase()))
            })
            .collect();
        let named: Vec<&String> = pooled
            .keys()
            .filter(|name| {
                words(name)
                    .iter()
                    .filter(|w| !matches!(w.as_str(), "id" | "ids" | "name" | "key"))
                    .any(|w| refused_words.contains(&super::pool::singular(w)))
            })
            .collect();
        let about = if quoted.is_empty() { named } else { quoted };
        let mut sources = BTreeMap::new();
        for name in about {
            let Some(schema) = props.get(name).and_then(Value::as_object) else {
                continue;
            };
            let mut tried: Vec<Value> = self.runs[i]
                .calls
                .iter()
                .filter(|c| c.number == 1)
                .filter_map(|c| c.arguments.get(name).cloned())
                .collect();
            tried.extend(sent.get(name).cloned());
            // The values other parameters of the set took stay theirs.
            tried.extend(
                next.iter()
                    .filter(|(k, _)| *k != name)
                    .map(|(_, v)| v.clone()),
            );
            if let Some(pick) = self.pool.pick_instead(&tool.name, name, schema, &tried) {
                next.insert(name.clone(), pick.value);
                sources.insert(name.clone(), pick.source);
            }
        }
        (!sources.is_empty()).then(|| (Value::Object(next), sources))
    }

    /// Steering by an error: an allowed directory, offered values (kept in the pool for later
    /// tools too), missing fields, flags, the kind of file wanted.
    fn learn_from_error(
        &mut self,
        i: usize,
        error_text: &str,
        arguments: &Value,
        attempt: usize,
        candidates: &mut Vec<Value>,
    ) -> usize {
        let tool = &self.tools[i];
        if let Some((field, values)) = super::feedback::offered_for(
            error_text,
            &self.schemas[i],
            arguments,
            &self.options.packs,
        ) {
            // A tool's name an error quotes ("use 'set_working_dir' first") is a step to take,
            // never a value.
            let values: Vec<String> = values
                .into_iter()
                .filter(|v| !self.tools.iter().any(|t| t.name == *v))
                .collect();
            let label = format!("call 1 (attempt {attempt})");
            self.pool.learn_offered(&tool.name, &label, &field, &values);
        }
        let current = self.steer.as_ref().map_or(&self.workspace, |f| &f.root);
        if let Some(dir) = allowed_dirs_in(error_text, &self.workspace, current)
            .into_iter()
            .next()
        {
            let facts = facts_of(&dir, &self.given);
            let c = steered_candidate(
                tool,
                crate::workspace::vocab::SYNTHESIS_SEED,
                &self.options.overrides,
                &facts,
            );
            if !candidates[..attempt].contains(&c) {
                candidates.retain(|x| *x != c);
                candidates.insert(attempt, c);
            }
            self.steer = Some(facts);
        }
        // "must point to an Excel file (.xlsx)", "Document x.docx does not exist": files of
        // that kind next.
        let named_kind = super::semantics::file_kind(error_text).filter(|kind| {
            // The error only echoes a path that was sent ("notes.md not found"): no lesson.
            !arguments.to_string().contains(&format!(".{kind}\""))
        });
        // "Workbook new.xlsx does not exist", "Package not found at 'x.docx'": the path sent
        // was refused, the tool works on an existing file (of the seed).
        let lowered = error_text.to_lowercase();
        let fresh_refused = NOT_THERE.iter().any(|p| lowered.contains(p))
            && sent_paths(arguments, &self.workspace).iter().any(|p| {
                // Named in the error: missing, or not a file of the kind the tool reads.
                lowered.contains(
                    &p.file_name()
                        .map(|n| n.to_string_lossy().to_lowercase())
                        .unwrap_or_default(),
                )
            });
        if let Some(kind) = named_kind {
            // The server works on such files: later tools start with them too.
            if self.file_kind.is_none() {
                self.file_kind = Some(kind);
                self.lessons += 1;
            }
        }
        // "Path must be a portable vault-relative path": relative paths from now on.
        // "Absolute paths outside the project root are not allowed" refuses a place, not
        // absolute paths.
        let relative_asked = !self.relative_paths
            && RELATIVE_ASKED.is_match(error_text)
            && !error_text.to_lowercase().contains("outside");
        if relative_asked {
            self.relative_paths = true;
            self.lessons += 1;
        }
        // "File not found: swift-harbor", "Input folder does not exist: green-valley": a
        // made-up name was looked up as a file or a folder, whatever the parameter is called
        // (`ref`, `input`): an existing one of the workspace next, of the kind the error, the
        // parameter or the tool names.
        let mut followed = 0;
        let sent_as_files = missing_files_named(error_text, arguments);
        // The workspace as the lessons below see it, read once for all of them.
        let facts =
            (!sent_as_files.is_empty() || named_kind.is_some() || fresh_refused || relative_asked)
                .then(|| {
                    self.steer
                        .clone()
                        .unwrap_or_else(|| facts_of(&self.workspace, &self.given))
                });
        if let Some(facts) = facts.as_ref().filter(|_| !sent_as_files.is_empty()) {
            let mut places = super::semantics::Semantics::new(facts, tool);
            if self.relative_paths {
                places = places.with_relative_paths();
            }
            // Other made-up values of the refused set give way to the first set's meaningful
            // ones (a format the description lists).
            let mut next = arguments.as_object().cloned().unwrap_or_default();
            if let Some(first) = candidates.first().and_then(Value::as_object) {
                for (k, v) in next.iter_mut() {
                    let made_up = v.as_str().is_some_and(super::synth::is_invented);
                    if let Some(meant) = first
                        .get(k)
                        .filter(|m| made_up && !m.as_str().is_some_and(super::synth::is_invented))
                    {
                        *v = meant.clone();
                    }
                }
            }
            for (name, folder) in &sent_as_files {
                let described = self.schemas[i]
                    .pointer(&format!("/properties/{name}/description"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                // The error's kind, the parameter's, the tool's own (`pdf_check_access`, which
                // `places` has from the tool), and only then the kind another tool's error
                // asked for.
                let kind = named_kind
                    .or_else(|| super::semantics::file_kind(&format!("{name} {described}")))
                    .or(places.file_kind)
                    .or(self.file_kind);
                let of_kind = match kind {
                    Some(k) => places.with_file_kind(k),
                    None => places.clone(),
                };
                next.insert(name.clone(), of_kind.existing_place(*folder));
            }
            let c = Value::Object(next);
            if c != *arguments {
                followed += queue_lesson(
                    candidates,
                    attempt,
                    c,
                    &mut self.runs[i].synthesis_notes,
                    format!(
                        "its error looked up {} as a file that does not exist: an existing one \
                         was given",
                        sent_as_files
                            .iter()
                            .map(|(n, _)| n.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
        }
        if let Some(facts) = facts
            .as_ref()
            .filter(|_| named_kind.is_some() || fresh_refused || relative_asked)
        {
            let kinds =
                self.lesson_candidates(tool, facts, named_kind.or(self.file_kind), fresh_refused);
            for (n, c) in kinds.into_iter().enumerate() {
                if !candidates[..attempt].contains(&c) {
                    candidates.retain(|x| *x != c);
                    candidates.insert((attempt + n).min(candidates.len()), c);
                }
            }
        }
        // "Value at path '$' is list, expected an object", "Array has 3 items": a path into
        // the document goes one level down, to the list's first item.
        if LIST_WHERE_OBJECT.is_match(error_text) {
            let mut next = arguments.as_object().cloned().unwrap_or_default();
            let mut named = Vec::new();
            let props = tool
                .input_schema
                .get("properties")
                .and_then(Value::as_object);
            for name in props.into_iter().flat_map(|p| p.keys()) {
                // A made-up key is no place in the document: from the root.
                let sent = next
                    .get(name)
                    .and_then(Value::as_str)
                    .filter(|s| !super::synth::is_invented(s));
                if let Some(path) = super::semantics::first_item_path(tool, name, sent) {
                    next.insert(name.clone(), Value::String(path));
                    named.push(name.clone());
                }
            }
            if !named.is_empty() {
                followed += queue_lesson(
                    candidates,
                    attempt,
                    Value::Object(next),
                    &mut self.runs[i].synthesis_notes,
                    format!(
                        "its error found a list where it wanted an object: {} went to the \
                     first item",
                        named.join(", ")
                    ),
                );
            }
        }
        // "before text 'quiet-meadow' not found in node 'p:3'", "Header 'x' not found in
        // document": a parameter that must quote existing text takes text an answer showed
        // (a heading or an anchor its whole line, a small edit one word).
        if NOT_THERE.iter().any(|p| lowered.contains(p)) {
            let mut next = arguments.as_object().cloned().unwrap_or_default();
            let mut named = Vec::new();
            for (name, v) in next.iter_mut() {
                let Some(sent) = v.as_str().filter(|s| !s.is_empty()) else {
                    continue;
                };
                let Some(noun) = quoted_after_noun(&lowered, &sent.to_lowercase()) else {
                    continue;
                };
                let whole_line = matches!(noun, "header" | "heading" | "anchor");
                let refused: Vec<String> = self.runs[i]
                    .calls
                    .iter()
                    .filter_map(|c| c.arguments.get(name).and_then(Value::as_str))
                    .chain([sent])
                    .map(str::to_string)
                    .collect();
                if let Some(text) = self.pool.quoted_text(whole_line, &refused) {
                    *v = Value::String(text);
                    named.push(name.clone());
                }
            }
            if !named.is_empty() {
                followed += queue_lesson(
                    candidates,
                    attempt,
                    Value::Object(next),
                    &mut self.runs[i].synthesis_notes,
                    format!(
                        "its error did not find the text given for {}: text an answer showed \
                     was given",
                        named.join(", ")
                    ),
                );
            }
        }
        // "path suffix '' not in allowed ('.docx',)", "Invalid extension, expected .pptx": a
        // made-up word was taken for a file name; a new file of that kind in the workspace.
        if let Some(kind) = named_kind.filter(|_| SUFFIX_REFUSED.is_match(error_text)) {
            let mut next = arguments.as_object().cloned().unwrap_or_default();
            let made_up: Vec<String> = next
                .iter()
                .filter(|(_, v)| {
                    v.as_str()
                        .is_some_and(|w| super::synth::is_invented(w) && !w.contains('.'))
                })
                .map(|(k, _)| k.clone())
                .collect();
            // The one made-up word, or those whose names say they are files or places to
            // write (`out`), not a `title` beside them.
            let named: Vec<String> = if made_up.len() == 1 {
                made_up
            } else {
                made_up
                    .into_iter()
                    .filter(|k| {
                        let ws = words(k);
                        super::semantics::names_a_place_to_write(&ws)
                            || super::semantics::names_a_path(&ws)
                    })
                    .collect()
            };
            for name in &named {
                if let Some(word) = next.get(name).and_then(Value::as_str).map(str::to_string) {
                    let file = format!("{word}.{kind}");
                    let path = if self.relative_paths {
                        file
                    } else {
                        let root = self.steer.as_ref().map_or(&self.workspace, |f| &f.root);
                        root.join(file).display().to_string()
                    };
                    next.insert(name.clone(), Value::String(path));
                }
            }
            if !named.is_empty() {
                followed += queue_lesson(
                    candidates,
                    attempt,
                    Value::Object(next),
                    &mut self.runs[i].synthesis_notes,
                    format!(
                        "its error refused the file kind of {}: a new .{kind} file was named",
                        named.join(", ")
                    ),
                );
            }
        }
        let learned: Vec<Value> = corrections(
            error_text,
            &self.schemas[i],
            arguments,
            candidates,
            &self.options.packs,
        )
        .into_iter()
        .filter(|c| !candidates[..attempt].contains(c))
        .filter(|c| !self.puts_a_tool_name(c, arguments))
        .collect();
        let count = learned.len() + followed;
        for (n, c) in learned.into_iter().enumerate() {
            self.runs[i].synthesis_notes.push(format!(
                "the error of attempt {attempt} offered {c}, queued as attempt {}",
                attempt + n + 1
            ));
            candidates.retain(|x| *x != c);
            candidates.insert((attempt + n).min(candidates.len()), c);
        }
        count
    }

    /// Whether `candidate` holds, where `sent` did not, a string that is the name of one of the
    /// server's tools: an error that names a tool to call first ("use 'set_working_dir'
    /// first") offers a step, not a value.
    fn puts_a_tool_name(&self, candidate: &Value, sent: &Value) -> bool {
        fn strings<'v>(v: &'v Value, out: &mut Vec<&'v str>, depth: usize) {
            match v {
                Value::String(s) => out.push(s),
                Value::Array(items) if depth < 8 => {
                    items.iter().for_each(|i| strings(i, out, depth + 1))
                }
                Value::Object(map) if depth < 8 => {
                    map.values().for_each(|i| strings(i, out, depth + 1))
                }
                _ => {}
            }
        }
        let (mut new, mut old) = (Vec::new(), Vec::new());
        strings(candidate, &mut new, 0);
        strings(sent, &mut old, 0);
        new.iter()
            .filter(|s| !old.contains(s))
            .any(|s| self.tools.iter().any(|t| t.name == *s))
    }

    /// Other tools that `text` asks to run first: tools it names, or, when it says a session
    /// is not set up ("No working directory set"), the session set-up tools, or, when it says
    /// nothing is loaded or open, the tools that load or open. With
    /// `needs_cue`, a named tool counts only near "first", "before" or "call" (descriptions
    /// name related tools for other reasons).
    fn prerequisites_named(&self, text: &str, i: usize, needs_cue: bool) -> Vec<usize> {
        let mut out = Vec::new();
        if text.is_empty() {
            return out;
        }
        let lowered = text.to_lowercase();
        for (j, t) in self.tools.iter().enumerate() {
            if j == i || !distinctive(&t.name) {
                continue;
            }
            let Some(at) = find_word(text, &t.name) else {
                continue;
            };
            if needs_cue {
                let mut lo = at.saturating_sub(60);
                while !text.is_char_boundary(lo) {
                    lo -= 1;
                }
                let mut hi = (at + t.name.len() + 60).min(text.len());
                while !text.is_char_boundary(hi) {
                    hi += 1;
                }
                if !PREREQUISITE_CUE.is_match(&text[lo..hi]) {
                    continue;
                }
            }
            if self.planned[self.plan_of[j]].skip.is_none() {
                out.push(j);
            }
        }
        if out.is_empty() && !needs_cue && self.not_set_up.is_match(&lowered) {
            out.extend(
                (0..self.tools.len())
                    .filter(|&j| j != i && is_session_setup(&self.tools[j], &self.options.packs))
                    .filter(|&j| self.planned[self.plan_of[j]].skip.is_none()),
            );
        }
        // "No document loaded with alias 'x'", "没有打开的文档" (no open document): the tools
        // that load (open, import, mount) something, by the verb leading their names.
        if let Some(verb) = out
            .is_empty()
            .then(|| not_loaded_verb(text))
            .flatten()
            .filter(|_| !needs_cue)
        {
            out.extend((0..self.tools.len()).filter(|&j| {
                j != i
                    && loader_verb(&words(&self.tools[j].name)) == Some(verb)
                    && self.planned[self.plan_of[j]].skip.is_none()
            }));
        }
        out.truncate(2);
        out
    }
}

/// The noun right before `value` where `error` quotes it as text it looked for ("before
/// text 'x'", "Header 'x'", "Start anchor 'x'"), when that noun is one of text.
fn quoted_after_noun(error: &str, value: &str) -> Option<&'static str> {
    // Not "title": "Note with title 'x' not found" looks up a thing by name.
    const NOUNS: [&str; 8] = [
        "text",
        "string",
        "substring",
        "phrase",
        "snippet",
        "anchor",
        "header",
        "heading",
    ];
    error.match_indices(value).take(64).find_map(|(at, _)| {
        if !error[..at].ends_with(['\'', '"', '`']) {
            return None;
        }
        // The word before the quote, read back a few characters only.
        let before = error[..at].trim_end_matches(['\'', '"', '`', ' ', ':']);
        let last = before
            .rsplit(|c: char| !c.is_alphanumeric())
            .next()
            .unwrap_or("");
        NOUNS.iter().find(|n| **n == last).copied()
    })
}

/// An error that found a list where it wanted an object ("Value at path '$' is list,
/// expected an object", "Cannot index a JSON array with non-integer key 'x'. Array has 3
/// items.", "expected object, got array").
static LIST_WHERE_OBJECT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\bis (an? )?(list|array)\b[^.]{0,40}\bexpected (an? )?(object|dict|mapping)|\bexpected (an? )?(object|dict)[^.]{0,20}\b(got|received|found) (an? )?(list|array)\b|\bcannot index a json array\b|\barray has \d+ items\b",
    )
    .expect("static regex")
});

/// An error that refuses a value for its file suffix or extension ("path suffix '' not in
/// allowed ('.docx',)", "Invalid file extension", "must end with .pptx").
static SUFFIX_REFUSED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(suffix|extension|must end (with|in)|file type)\b").expect("static regex")
});

/// Phrases of an error that says something looked up is not there.
const NOT_THERE: [&str; 4] = [
    "does not exist",
    "not found",
    "no such file",
    "doesn't exist",
];

/// Queues argument set `c`, which an error taught, as the next attempt (after `attempt`
/// tries) with `note` among the tool's notes, unless it was tried already. How many sets
/// were queued (0 or 1).
fn queue_lesson(
    candidates: &mut Vec<Value>,
    attempt: usize,
    c: Value,
    notes: &mut Vec<String>,
    note: String,
) -> usize {
    if candidates[..attempt].contains(&c) {
        return 0;
    }
    notes.push(note);
    candidates.retain(|x| *x != c);
    candidates.insert(attempt.min(candidates.len()), c);
    1
}

/// The text of a scalar (a string, a number).
fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Whether `text` names `value` as a whole token ('1' in "ID '1' not found", not the 1 of
/// "task-1" or of "10").
fn quotes(text: &str, value: &str) -> bool {
    !value.is_empty()
        && text.match_indices(value).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + value.len()..].chars().next();
            let apart =
                |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric() && c != '-' && c != '_');
            apart(before) && apart(after)
        })
}

/// `worked` (arguments that worked) with each path of the workspace that no longer exists
/// (a file the call read, which a later tool moved or removed) replaced by another existing
/// file of the same kind: one no working call names and none was given before, else one that
/// no remover or mover names (see [`FilesInUse`]). Places to write
/// (`destination`, `output`) keep their paths: a new one there is what the call asked for.
fn revived(
    worked: &Value,
    facts: &super::semantics::WorkspaceFacts,
    taken: &mut FilesInUse,
) -> Value {
    let Value::Object(members) = worked else {
        return worked.clone();
    };
    let mut out = members.clone();
    for (k, v) in members {
        let Some(rel) = v
            .as_str()
            .and_then(|s| std::path::Path::new(s).strip_prefix(&facts.root).ok())
            .and_then(|r| r.to_str())
            .filter(|r| !r.is_empty())
        else {
            continue;
        };
        if super::semantics::names_a_place_to_write(&words(k))
            || facts.files.iter().any(|f| f == rel)
            || facts.dirs.iter().any(|d| d == rel)
        {
            continue;
        }
        let Some(ext) = std::path::Path::new(rel)
            .extension()
            .and_then(|e| e.to_str())
        else {
            continue;
        };
        let of_kind: Vec<String> = facts
            .files
            .iter()
            .filter(|f| super::semantics::visible(f))
            .filter(|f| std::path::Path::new(f).extension().and_then(|e| e.to_str()) == Some(ext))
            .map(|f| facts.root.join(f).display().to_string())
            .collect();
        // A file no working call names, else one only readers name (never one a remover or
        // mover works on, nor one these arguments already hold).
        let other = of_kind
            .iter()
            .find(|f| !taken.named.contains(f))
            .or_else(|| {
                of_kind.iter().find(|f| {
                    !taken.endangered.contains(f)
                        && !members.values().any(|v| v.as_str() == Some(f.as_str()))
                })
            })
            .cloned();
        if let Some(other) = other {
            taken.named.push(other.clone());
            out.insert(k.clone(), Value::String(other));
        }
    }
    Value::Object(out)
}

/// The files the tools' working calls name, and among them those that tools which remove or
/// move name (see [`revived`]).
#[derive(Debug, Default)]
struct FilesInUse {
    named: Vec<String>,
    endangered: Vec<String>,
}

/// `base` with the plain values of `from` for the members both have.
fn with_shared(base: &Value, from: &Value) -> Value {
    let mut out = base.clone();
    if let (Value::Object(o), Value::Object(f)) = (&mut out, from) {
        for (k, v) in o.iter_mut() {
            if let Some(x) = f.get(k).filter(|x| x.is_string() || x.is_number()) {
                if v.is_string() || v.is_number() {
                    *v = x.clone();
                }
            }
        }
    }
    out
}

/// The members of `arguments` holding a made-up name (`swift-harbor`) that `error` says was
/// looked up as a file or folder and not found ("File not found: swift-harbor", "Input folder
/// does not exist: x", "Cannot access file x: [Errno 2] No such file", "文档不存在: x"), each
/// with whether a folder was meant. A name the error calls something else ("Header 'x' not
/// found in document", "Todo 'x' not found") is not one.
fn missing_files_named(error: &str, arguments: &Value) -> Vec<(String, bool)> {
    const MISSING: [&str; 8] = [
        "not found",
        "does not exist",
        "doesn't exist",
        "no such file",
        "cannot access",
        "can't access",
        "不存在",
        "找不到",
    ];
    const NOUNS: [&str; 8] = [
        "file",
        "path",
        "folder",
        "directory",
        "archive",
        "文件",
        "文档",
        "目录",
    ];
    let lowered = error.to_lowercase();
    let Value::Object(members) = arguments else {
        return Vec::new();
    };
    if !MISSING.iter().any(|m| lowered.contains(m)) {
        return Vec::new();
    }
    members
        .iter()
        .filter_map(|(name, value)| {
            let sent = value.as_str().filter(|s| super::synth::is_invented(s))?;
            let sent_lowered = sent.to_lowercase();
            // "rg: x: IO error for operation on x: No such file or directory": the missing
            // file's phrase right after the name, wherever it is quoted.
            let followed = lowered.match_indices(&sent_lowered).any(|(i, _)| {
                lowered[i + sent_lowered.len()..]
                    .trim_start_matches([':', '\'', '"', '`', ' ', ')'])
                    .starts_with("no such file")
            });
            if followed {
                return Some((name.clone(), false));
            }
            let at = lowered.find(&sent_lowered)?;
            // The name may come back inside the path it was resolved to ("ENOENT: no such
            // file or directory, stat '/w/x'"): the words before that path count.
            let at = lowered[..at]
                .rfind(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`'))
                .map_or(0, |i| i + 1);
            // The noun comes just before the name: "Archive file not found: x", "Cannot
            // access file x", "文档不存在: x".
            let mut from = at.saturating_sub(40);
            while !lowered.is_char_boundary(from) {
                from -= 1;
            }
            // In the same clause, as a whole word ("profile 'x' not found" names no file).
            let clause = lowered[from..at]
                .rsplit(['.', ';', '\n'])
                .next()
                .unwrap_or("");
            let before: Vec<&str> = clause
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .collect();
            let named = |n: &str| {
                if n.is_ascii() {
                    before
                        .iter()
                        .any(|w| *w == n || w.strip_suffix('s') == Some(n))
                } else {
                    clause.contains(n)
                }
            };
            NOUNS.iter().any(|n| named(n)).then(|| {
                // "no such file or directory" names both: a file, unless only a folder is.
                let folder = ["folder", "directory", "目录"].iter().any(|n| named(n))
                    && !["file", "文件", "文档"].iter().any(|n| named(n));
                (name.clone(), folder)
            })
        })
        .collect()
}

/// Paths inside the workspace among the string values of `arguments`.
fn sent_paths(arguments: &Value, workspace: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Value::Object(m) = arguments else {
        return Vec::new();
    };
    m.values()
        .filter_map(Value::as_str)
        .map(std::path::PathBuf::from)
        .filter(|p| p.starts_with(workspace) && p != workspace)
        .collect()
}

/// "Sheet 'x' has no charts", "There are no sparklines in …", "contains no macros", "No name
/// 'T' is defined", "B2 has no note".
static ABSENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?x)
        \b(?:has|have|contains?|there\s+(?:are|is)|holds?)\s+no\s+(?P<what>[a-z]+(?:\s+(?:or\s+)?[a-z]+){0,2}?)\s*(?:['"`.,;:!]|\bin\b|\bon\b|\bfor\b|\bat\b|$)
        | \bno\s+(?P<what2>[a-z]+)\s+(?:['"`][^'"`]{0,80}['"`]\s+)?(?:is|are|was|were)\s+(?P<state>defined|set|present|attached)\b"#)
    .expect("static regex")
});

/// "Unmerge them first", "unlock the sheet first", "Stop it first": the action asked for.
static ACTION_FIRST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b([a-z]{3,})\s+(?:them|it|this|these|those|the\s+[a-z]+)?\s*first\b")
        .expect("static regex")
});

/// The first words of tools that make things (`create_chart`, `add_slicer`, `set_note`).
const MAKING_VERBS: &[&str] = &[
    "create", "add", "insert", "set", "new", "make", "put", "attach", "write", "define",
];

/// "call X first", "use X before", "must call X", "after calling X", "requires X".
static PREREQUISITE_CUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(first|before|beforehand|prior|after calling|must (call|run|use)|requires?|call|use|run)\b")
        .expect("static regex")
});

/// What the explorer knows of the run beyond the tools: the commands the server was told to
/// allow (in its environment or arguments) and the seed of the run's words.
#[derive(Debug, Clone)]
pub struct Given {
    /// Commands the server allows, as its configuration names them.
    pub allowed_commands: Vec<String>,
    /// The seed of the run's words.
    pub seed: u64,
    /// The domain packs in force.
    pub packs: super::packs::Packs,
    /// Workspace files the explorer never lists or opens (the planted secrets: a call is
    /// never pointed at one, and their reads stay the server's).
    pub unlisted: Vec<String>,
}

impl Given {
    /// The same, never listing or opening the workspace files `unlisted` names (relative).
    pub fn leaving_out(mut self, unlisted: Vec<String>) -> Given {
        self.unlisted = unlisted;
        self
    }

    /// What a server started with `command` and `env` was told, the run's `seed` and the
    /// packs in force.
    pub fn new(
        command: &[String],
        env: &[(String, String)],
        seed: u64,
        packs: &super::packs::Packs,
    ) -> Given {
        Given {
            allowed_commands: super::semantics::allowed_commands_from(env, command),
            seed,
            packs: packs.clone(),
            unlisted: Vec::new(),
        }
    }
}

/// What the workspace at `dir` holds, with the commands the server was told to allow.
fn facts_of(dir: &std::path::Path, given: &Given) -> WorkspaceFacts {
    let mut facts = WorkspaceFacts::scan_leaving_out(dir, &given.unlisted);
    facts.allowed_commands = given.allowed_commands.clone();
    facts.vocab = crate::workspace::vocab::Vocabulary::of(given.seed);
    facts.packs = given.packs.clone();
    // Files the run made itself (under the names it gives new files) come after the others:
    // a seeded document is the better input, and a made one may be gone by the next call.
    let made = |f: &String| facts.vocab.made_by_the_run(f);
    let (made_files, others): (Vec<String>, Vec<String>) = facts.files.drain(..).partition(made);
    facts.files = others.into_iter().chain(made_files).collect();
    facts
}

/// "must be a relative path", "vault-relative path", "absolute paths are not allowed".
static RELATIVE_ASKED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(relative path|must be relative|path must be relative|absolute (file )?paths?\b[^\n]{0,120}?\b(is|are)? ?not (allowed|supported|permitted)|must not be absolute|use paths? relative to)")
        .expect("static regex")
});

/// "No working directory set", "no project is activated", "database not selected", "not
/// initialized", "session not started", and the same of the contexts the packs in force name
/// ("no vault selected").
///
/// Made once per set of contexts in a process (a run's replays make explorers with the same
/// packs; each pattern takes a millisecond or two to compile), the last few kept.
fn not_set_up(packs: &super::packs::Packs) -> Regex {
    static MADE: std::sync::Mutex<Vec<(String, Regex)>> = std::sync::Mutex::new(Vec::new());
    let contexts: String = packs
        .contexts()
        .map(|c| format!("|{}", regex::escape(c)))
        .collect();
    let mut made = MADE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, pattern)) = made.iter().find(|(c, _)| *c == contexts) {
        return pattern.clone();
    }
    let pattern = not_set_up_with(&contexts);
    if made.len() >= 8 {
        made.remove(0);
    }
    made.push((contexts, pattern.clone()));
    pattern
}

/// The not-set-up pattern with the packs' `contexts` (each led by `|`).
fn not_set_up_with(contexts: &str) -> Regex {
    Regex::new(&format!(r"(?x)
        \b(no|not\ a|without\ an?)\s+(active\s+|current\s+|open\s+)?(working\s+directory|project|workspace|database|db|repository|repo|session|directory|root|connection{contexts})\b
        | \b(working\s+directory|project|workspace|database|repository|session|connection{contexts})\b[^.]{{0,30}}\bnot\s+(been\s+)?(set|selected|active|activated|open|opened|initiali[sz]ed|loaded|connected|started|configured)\b
        | \bnot\s+(initiali[sz]ed|connected|configured)\b
        | \b(set|select|activate|open|initiali[sz]e|connect)\b[^.]{{0,40}}\bfirst\b"))
    .expect("a regex of escaped words")
}

/// Whether `tool` loads, opens, imports or mounts something (its name leads with the verb,
/// or follows a prefix: `load_json`, `open_document`, `docx_open`): the step an error that
/// says nothing is loaded asks for, worth repeating once something closed what it opened.
fn loads(tool: &ToolDecl) -> bool {
    loader_verb(&words(&tool.name)).is_some()
}

/// The verb of a loader's name: its first word, or its second after a prefix that is no verb
/// of its own (`docx_open`, not `get_open_orders`); none for names about what is no document
/// (`open_url`, `open_pull_request`) or that close, list or remove.
fn loader_verb(ws: &[String]) -> Option<&str> {
    const VERBS: &[&str] = &["load", "open", "import", "mount"];
    const OTHER_VERBS: &[&str] = &[
        "get", "list", "set", "create", "delete", "update", "read", "find", "search", "show",
        "close", "add", "remove", "fetch",
    ];
    const NOT_DOCUMENTS: &[&str] = &[
        "url",
        "link",
        "page",
        "tab",
        "browser",
        "pull",
        "request",
        "issue",
        "order",
        "orders",
        "position",
        "positions",
        "port",
        "window",
    ];
    let verb = match ws {
        [first, ..] if VERBS.contains(&first.as_str()) => first,
        [prefix, second, ..]
            if VERBS.contains(&second.as_str()) && !OTHER_VERBS.contains(&prefix.as_str()) =>
        {
            second
        }
        _ => return None,
    };
    let excluded = ws.iter().any(|w| {
        NOT_DOCUMENTS.contains(&w.as_str())
            || matches!(
                w.as_str(),
                "close" | "unload" | "list" | "delete" | "remove"
            )
    });
    (!excluded).then_some(verb.as_str())
}

/// The verb of the step an error says was not taken when it says nothing is loaded or open
/// ("No document loaded with alias 'x'", "no file is open", "dataset not loaded", "没有打开的
/// 文档"): `load`, `open`, `import` or `mount`.
fn not_loaded_verb(text: &str) -> Option<&'static str> {
    static NOT_LOADED: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?ix)
            \bno\s+(?P<subject>[a-z_-]+)\s+(?:[a-z_-]+\s+)?(?:is\s+|are\s+|was\s+|been\s+)?(?P<a>loaded|opened|open|imported|mounted)\b
            | \bnot\s+(?:yet\s+)?(?:been\s+)?(?P<b>loaded|imported|mounted)\b
            | (?P<c>没有打开|未打开|未加载|没有加载)",
        )
        .expect("static regex")
    });
    let c = NOT_LOADED.captures(text)?;
    // "no longer open", "no such file open" say nothing of a step not taken.
    if c.name("subject").is_some_and(|s| {
        matches!(
            s.as_str().to_lowercase().as_str(),
            "longer" | "more" | "such"
        )
    }) {
        return None;
    }
    let word = c
        .name("a")
        .or_else(|| c.name("b"))
        .or_else(|| c.name("c"))?
        .as_str()
        .to_lowercase();
    Some(match word.as_str() {
        "loaded" | "未加载" | "没有加载" => "load",
        "imported" => "import",
        "mounted" => "mount",
        _ => "open",
    })
}

/// A tool name distinctive enough to be looked for in prose (`set_working_dir`, `listVaults`,
/// not `read` or `search`).
fn distinctive(name: &str) -> bool {
    name.len() >= 4
        && (name.contains(['_', '-', '.']) || name.chars().skip(1).any(|c| c.is_uppercase()))
}

/// Where `name` occurs in `text` as a whole word (not inside a longer name).
fn find_word(text: &str, name: &str) -> Option<usize> {
    let is_name_char = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    let mut from = 0;
    while let Some(pos) = text[from..].find(name) {
        let at = from + pos;
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        if !before.is_some_and(is_name_char) && !after.is_some_and(is_name_char) {
            return Some(at);
        }
        from = at + name.len();
    }
    None
}

/// The whole error a failed call gave: every text of an error result, or the JSON-RPC
/// error's message and data.
fn error_text(outcome: &CallOutcome, result: Option<&Value>) -> String {
    let full = result.and_then(|r| {
        if let Some(e) = r.get("error").filter(|_| r.get("content").is_none()) {
            let mut s = e
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if let Some(d) = e.get("data").filter(|d| !d.is_null()) {
                s.push('\n');
                s.push_str(&match d {
                    Value::String(t) => t.clone(),
                    other => other.to_string(),
                });
            }
            return Some(s);
        }
        let texts: Vec<&str> = r
            .get("content")?
            .as_array()?
            .iter()
            .filter_map(|i| i.get("text").and_then(Value::as_str))
            .collect();
        (!texts.is_empty()).then(|| texts.join("\n"))
    });
    let text = full.unwrap_or_else(|| match outcome {
        CallOutcome::ToolError { text, .. } | CallOutcome::ErrorLike { text, .. } => text.clone(),
        CallOutcome::RpcError { message, .. } => message.clone(),
        _ => String::new(),
    });
    text.chars().take(20_000).collect()
}

/// For a session set-up tool: `base` with each parameter that means a directory or a project
/// (`path`, `directory`, `project`, `root`, `cwd`, `repo`, or a context a pack in force names)
/// set to `root`.
fn directory_candidate(
    tool: &ToolDecl,
    base: &Value,
    root: &std::path::Path,
    packs: &super::packs::Packs,
) -> Option<Value> {
    const DIRECTORY_WORDS: &[&str] = &[
        "path",
        "dir",
        "directory",
        "root",
        "folder",
        "cwd",
        "project",
        "workspace",
        "repo",
        "repository",
        "location",
    ];
    let props = tool.input_schema.get("properties")?.as_object()?;
    let mut args = base.as_object().cloned().unwrap_or_default();
    let mut changed = false;
    for (name, schema) in props {
        let plain_string = schema.get("type").and_then(Value::as_str) == Some("string")
            && schema.get("enum").is_none();
        if plain_string
            && words(name)
                .iter()
                .any(|w| DIRECTORY_WORDS.contains(&w.as_str()) || packs.contexts().any(|c| c == w))
        {
            args.insert(name.clone(), Value::String(root.display().to_string()));
            changed = true;
        }
    }
    (changed).then_some(Value::Object(args))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tool::parse_tool;
    use serde_json::json;

    /// A server in a closure: answers each call from (tool, arguments, state), with no
    /// process and no observers.
    struct ScriptedHost<F: FnMut(&str, &Value) -> Value> {
        answer: F,
        log: Vec<(String, Value)>,
    }

    impl<F: FnMut(&str, &Value) -> Value> Host for ScriptedHost<F> {
        fn must_stop(&self) -> Option<String> {
            None
        }
        async fn ready(&mut self) -> Result<(), String> {
            Ok(())
        }
        fn between_calls(&mut self, _last_tool: Option<&str>) {}
        async fn call(&mut self, tool: &str, _label: &str, arguments: &Value) -> ObservedCall {
            self.log.push((tool.to_string(), arguments.clone()));
            let result = (self.answer)(tool, arguments);
            // `{"hang": true}`: no answer within the call timeout.
            if result["hang"] == true {
                return ObservedCall {
                    record: CallRecord::bare(arguments, CallOutcome::Timeout { after_ms: 30_000 }),
                    result: None,
                    broken: false,
                    interrupted: false,
                };
            }
            // `null`: the server was found dead.
            if result.is_null() {
                return ObservedCall {
                    record: CallRecord::bare(arguments, CallOutcome::ServerDied),
                    result: None,
                    broken: true,
                    interrupted: false,
                };
            }
            let text = result["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let outcome = if result["isError"] == true {
                CallOutcome::ToolError {
                    text,
                    result_sha256: String::new(),
                }
            } else {
                CallOutcome::Ok {
                    text,
                    result_sha256: String::new(),
                }
            };
            ObservedCall {
                record: CallRecord::bare(arguments, outcome),
                result: Some(result),
                broken: false,
                interrupted: false,
            }
        }
        async fn discard(&mut self, _last_tool: Option<&str>) {}
        async fn isolated(&mut self, _tool: &str) -> Result<Vec<CallRecord>, String> {
            Err("not in this test".into())
        }
    }

    /// Tool declarations from their JSON.
    fn tools_of(definitions: &[Value]) -> Vec<ToolDecl> {
        definitions
            .iter()
            .enumerate()
            .map(|(i, v)| parse_tool(v, i).expect("tool"))
            .collect()
    }

    /// The configuration of a run with no flags and no config file.
    fn plain_config() -> crate::config::RunConfig {
        let args = crate::cli::VerifyArgs {
            command: vec!["true".into()],
            no_config: true,
            ..Default::default()
        };
        crate::config::RunConfig::from_verify_args(&args).expect("config")
    }

    /// Runs the explorer over `tools` against `host` on a runtime of its own.
    fn explore<H: Host>(
        tools: &[ToolDecl],
        config: &crate::config::RunConfig,
        workspace: &std::path::Path,
        host: &mut H,
    ) -> Explored {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(
                Explorer::new(
                    tools,
                    &config.explore,
                    Given::new(
                        &config.server.command,
                        &config.server.env,
                        config.seed,
                        &config.explore.packs,
                    ),
                    &config.progress,
                    workspace,
                )
                .run(host),
            )
    }

    fn text(t: &str, error: bool) -> Value {
        json!({"content": [{"type": "text", "text": t}], "isError": error})
    }

    #[test]
    fn a_server_found_dead_at_a_first_call_is_given_that_call_once_more() {
        let tools = tools_of(&[
            json!({"name": "stop_listening", "annotations": {"readOnlyHint": true}}),
            json!({"name": "after", "annotations": {"readOnlyHint": true}}),
            json!({"name": "crash", "annotations": {"readOnlyHint": true}}),
        ]);
        let config = plain_config();
        let dir = tempfile::tempdir().expect("tempdir");
        // The first tool's call leaves the server dying; the next call finds it dead, and a
        // fresh server answers it. `crash` kills every server it is called on.
        let mut dying = false;
        let mut host = ScriptedHost {
            answer: |tool: &str, _: &Value| match tool {
                "stop_listening" => {
                    dying = true;
                    text("bye", false)
                }
                "after" if std::mem::take(&mut dying) => Value::Null,
                "crash" => Value::Null,
                _ => text("fine", false),
            },
            log: Vec::new(),
        };
        let explored = explore(&tools, &config, dir.path(), &mut host);
        let labels = |i: usize| -> Vec<&str> {
            explored.runs[i]
                .calls
                .iter()
                .map(|c| c.outcome.label())
                .collect()
        };
        assert_eq!(labels(1), ["server died", "ok", "ok"], "{:?}", host.log);
        assert!(explored.runs[1].succeeded());
        assert!(
            explored.runs[1]
                .synthesis_notes
                .iter()
                .any(|n| n.contains("once more on a fresh server")),
            "{:?}",
            explored.runs[1].synthesis_notes
        );
        // Twice is the tool's own: no third try.
        assert_eq!(labels(2), ["server died", "server died"]);
    }

    #[test]
    fn riskier_cases_come_after_every_turn_removals_last_and_follow_their_errors() {
        let tools = tools_of(&[
            json!({"name": "manage_items", "annotations": {"readOnlyHint": true},
                   "inputSchema": {"type": "object", "required": ["action"], "properties": {
                       "action": {"type": "string", "enum": ["list", "purge", "rename"]},
                       "newName": {"type": "string"}}}}),
            json!({"name": "count_items", "annotations": {"readOnlyHint": true},
                   "inputSchema": {"type": "object", "properties": {}}}),
        ]);
        let config = plain_config();
        let dir = tempfile::tempdir().expect("tempdir");
        let mut host = ScriptedHost {
            answer: |tool: &str, a: &Value| match (tool, a["action"].as_str()) {
                ("manage_items", Some("rename")) if a.get("newName").is_none() => {
                    text("Missing required argument: newName", true)
                }
                // An error that would undo the case: its correction is not taken.
                ("manage_items", Some("purge")) => {
                    text("action must be one of: list, rename", true)
                }
                _ => text("fine", false),
            },
            log: Vec::new(),
        };
        let explored = explore(&tools, &config, dir.path(), &mut host);
        let order: Vec<String> = host
            .log
            .iter()
            .map(|(t, a)| format!("{t} {}", a["action"].as_str().unwrap_or("")))
            .collect();
        assert_eq!(
            order,
            [
                "manage_items list",
                "manage_items list",
                "count_items ",
                "count_items ",
                "manage_items rename",
                "manage_items rename",
                "manage_items purge",
            ],
            "{:?}",
            host.log
        );
        // The rename's second try carries the field its error named.
        assert!(host.log[5].1.get("newName").is_some(), "{:?}", host.log[5]);
        let variants: Vec<(usize, Option<&str>, &str)> = explored.runs[0]
            .calls
            .iter()
            .map(|c| (c.number, c.variant.as_deref(), c.outcome.label()))
            .collect();
        assert_eq!(
            variants[2..],
            [
                (0, Some("action: rename"), "isError"),
                (0, Some("action: rename"), "ok"),
                (0, Some("action: purge"), "isError"),
            ]
        );
        assert_eq!(
            explored.runs[0].calls[2].label(),
            "variant (action: rename)"
        );
    }

    #[test]
    fn a_tool_an_error_names_is_called_first_and_never_sent_as_a_value() {
        let tools = tools_of(&[
            json!({"name": "git_reset", "annotations": {"destructiveHint": true},
                   "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}),
            json!({"name": "git_set_working_dir", "annotations": {"readOnlyHint": false},
                   "inputSchema": {"type": "object", "properties": {"dir": {"type": "string"}}}}),
        ]);
        let config = plain_config();
        let dir = tempfile::tempdir().expect("tempdir");
        let mut host = ScriptedHost {
            answer: |tool: &str, _: &Value| match tool {
                "git_reset" => text(
                    "No session working directory set. Please specify a 'path' or use 'git_set_working_dir' first.",
                    true,
                ),
                _ => text("ok", false),
            },
            log: Vec::new(),
        };
        let _ = explore(&tools, &config, dir.path(), &mut host);
        assert!(
            host.log
                .iter()
                .all(|(_, a)| a["path"] != "git_set_working_dir"),
            "{:?}",
            host.log
        );
    }

    #[test]
    fn a_tool_that_got_no_answer_gets_no_second_turn() {
        // Both readers take an item id, which make_item hands out (they wait for it): the
        // one that hung is neither repeated nor tried again (each try would cost the call
        // timeout and judge nothing).
        let reader = |name: &str| {
            json!({"name": name, "annotations": {"readOnlyHint": true},
                   "inputSchema": {"type": "object", "required": ["itemId"],
                                   "properties": {"itemId": {"type": "string"}}}})
        };
        let tools = tools_of(&[
            reader("get_item"),
            reader("watch_item"),
            json!({"name": "make_item", "annotations": {"destructiveHint": false},
                   "inputSchema": {"type": "object", "properties": {}}}),
        ]);
        let config = plain_config();
        let dir = tempfile::tempdir().expect("tempdir");
        let mut host = ScriptedHost {
            answer: |tool: &str, a: &Value| match tool {
                "make_item" => text("Created item with ID: it-7", false),
                "get_item" if a["itemId"] == "it-7" => text("item it-7", false),
                "get_item" => text(&format!("Item {} not found", a["itemId"]), true),
                "watch_item" => json!({"hang": true}),
                _ => text("unknown", true),
            },
            log: Vec::new(),
        };
        let explored = explore(&tools, &config, dir.path(), &mut host);
        let calls_of = |name: &str| host.log.iter().filter(|(t, _)| t == name).count();
        assert!(explored.runs[0].succeeded(), "{:?}", host.log);
        assert_eq!(calls_of("watch_item"), 1, "{:?}", host.log);
        assert!(
            !explored.notes.iter().any(|n| n.starts_with("watch_item")),
            "{:?}",
            explored.notes
        );
    }

    #[test]
    fn the_explorer_follows_what_the_server_says_without_a_real_server() {
        let tools = tools_of(&[
            json!({"name": "get_item", "annotations": {"readOnlyHint": true},
                   "inputSchema": {"type": "object", "required": ["itemId"],
                                   "properties": {"itemId": {"type": "string"}}}}),
            json!({"name": "make_item", "annotations": {"destructiveHint": false},
                   "inputSchema": {"type": "object", "properties": {}}}),
            json!({"name": "publish", "annotations": {"readOnlyHint": true},
                   "inputSchema": {"type": "object", "properties": {}}}),
            json!({"name": "prepare_release", "annotations": {"destructiveHint": false},
                   "inputSchema": {"type": "object", "properties": {}}}),
        ]);
        let config = plain_config();
        let dir = tempfile::tempdir().expect("tempdir");
        let mut prepared = false;
        let mut host = ScriptedHost {
            answer: |tool: &str, a: &Value| match tool {
                "make_item" => text("Created item with ID: it-7", false),
                "get_item" if a["itemId"] == "it-7" => text("item it-7", false),
                "get_item" => text(&format!("Item {} not found", a["itemId"]), true),
                "prepare_release" => {
                    prepared = true;
                    text("prepared", false)
                }
                "publish" if prepared => text("published", false),
                "publish" => text("Nothing to publish: run prepare_release first.", true),
                _ => text("unknown", true),
            },
            log: Vec::new(),
        };
        let explored = explore(&tools, &config, dir.path(), &mut host);
        // get_item waited for make_item, then took the id it handed out, and says so.
        let get = &explored.runs[0];
        assert!(get.succeeded(), "{:?}", host.log);
        let first = &get.calls[0];
        assert_eq!(first.arguments["itemId"], "it-7");
        assert!(
            first.pooled["itemId"].starts_with("make_item call 1"),
            "{:?}",
            first.pooled
        );
        // publish's error named prepare_release, which ran, then publish again.
        let publish = &explored.runs[2];
        assert!(!publish.calls[0].outcome.is_success());
        assert!(publish.succeeded(), "{:?}", host.log);
        let order: Vec<&str> = host.log.iter().map(|(t, _)| t.as_str()).collect();
        let first_publish = order.iter().position(|t| *t == "publish").expect("publish");
        let prepare = order
            .iter()
            .position(|t| *t == "prepare_release")
            .expect("prepare");
        assert!(first_publish < prepare, "{order:?}");
        assert!(explored.pooled_values >= 1);
    }

    #[test]
    fn refusals_teach_other_pooled_values_text_an_answer_showed_and_a_file_kind() {
        let object = |props: Value, required: &[&str]| json!({"type": "object", "properties": props, "required": required});
        let string = json!({"type": "string"});
        let tools = tools_of(&[
            json!({"name": "list_tasks", "annotations": {"readOnlyHint": true},
                   "inputSchema": object(json!({}), &[])}),
            json!({"name": "update_task", "inputSchema":
                   object(json!({"taskId": string, "title": string}), &["taskId"])}),
            json!({"name": "edit_node", "inputSchema":
                   object(json!({"node_id": string, "before": string, "after": string}),
                          &["node_id", "before", "after"])}),
            json!({"name": "read_node", "annotations": {"readOnlyHint": true},
                   "inputSchema": object(json!({"node_id": string}), &["node_id"])}),
            json!({"name": "save_tracked", "inputSchema":
                   object(json!({"out": string}), &["out"])}),
        ]);
        let config = plain_config();
        let dir = tempfile::tempdir().expect("tempdir");
        let mut completed: Option<Value> = None;
        let mut host = ScriptedHost {
            answer: |tool: &str, a: &Value| match tool {
                "list_tasks" => text(r#"{"tasks": [{"id": "t-1"}, {"id": "t-2"}]}"#, false),
                // Whichever task it is given first is the completed one.
                "update_task" if completed.get_or_insert(a["taskId"].clone()) == &a["taskId"] => {
                    text("Cannot update completed task", true)
                }
                "update_task" => text("updated", false),
                // read_node answers for the node its error offers, after edit_node's turn:
                // edit_node is reached in a later pass, with a word of the node's text.
                "read_node" if a["node_id"] == "p:3" => text(
                    r#"{"node_id": "p:3", "text": "The next review is in March."}"#,
                    false,
                ),
                "read_node" => text(&format!("no node {}; nodes: 'p:3'", a["node_id"]), true),
                "edit_node"
                    if a["before"]
                        .as_str()
                        .is_some_and(|b| "The next review is in March.".contains(b)) =>
                {
                    text(r#"{"op_id": "op-1"}"#, false)
                }
                "edit_node" => text(
                    &format!("before text {} not found in node 'p:3'", a["before"]),
                    true,
                ),
                "save_tracked" if a["out"].as_str().is_some_and(|o| o.ends_with(".docx")) => {
                    text("saved", false)
                }
                "save_tracked" => text("path suffix '' not in allowed ('.docx',)", true),
                _ => text("unknown", true),
            },
            log: Vec::new(),
        };
        let explored = explore(&tools, &config, dir.path(), &mut host);
        let run =
            |name: &str| &explored.runs[tools.iter().position(|t| t.name == name).expect("tool")];
        // The completed task was refused by name; the other one was tried.
        let update = run("update_task");
        assert!(update.succeeded(), "{:?}", host.log);
        let sent: Vec<&Value> = update
            .calls
            .iter()
            .filter(|c| c.number == 1)
            .map(|c| &c.arguments["taskId"])
            .collect();
        assert!(
            sent.contains(&&json!("t-1")) && sent.contains(&&json!("t-2")),
            "{sent:?}"
        );
        // The edit quoted a word of the text read_node showed, after read_node was reached.
        let edit = run("edit_node");
        assert!(edit.succeeded(), "{:?}", host.log);
        let worked = edit
            .calls
            .iter()
            .find(|c| c.outcome.is_success())
            .expect("a success");
        assert_eq!(worked.arguments["before"], "next");
        // A made-up word refused for its suffix became a new .docx file in the workspace.
        let save = run("save_tracked");
        assert!(save.succeeded(), "{:?}", host.log);
        let out = save
            .calls
            .iter()
            .find(|c| c.outcome.is_success())
            .expect("a success");
        let out = out.arguments["out"].as_str().expect("a path");
        assert!(out.starts_with(&dir.path().display().to_string()) && out.ends_with(".docx"));
    }

    #[test]
    fn refused_values_and_quoted_text_are_found_in_real_errors() {
        // todo-txt-mcp; the 1 of "task-1" or of "10" is not the value 1.
        assert!(quotes("todo with id '1' not found", "1"));
        assert!(!quotes("task task-1 is done", "1"));
        assert!(!quotes("only 10 items", "1"));
        // changex (a text the edit quoted), office-word-mcp-server (a header, an anchor).
        let changex = "before text 'quiet-meadow' not found in node 'p:00000003' — call \
                       read_node(handle, node_id='p:00000003') to read the node's exact text";
        assert_eq!(quoted_after_noun(changex, "quiet-meadow"), Some("text"));
        assert_eq!(quoted_after_noun(changex, "p:00000003"), None);
        assert_eq!(
            quoted_after_noun(
                "header '1234team offsite' not found in document.",
                "1234team offsite"
            ),
            Some("header")
        );
        assert_eq!(
            quoted_after_noun("start anchor 'x' not found.", "x"),
            Some("anchor")
        );
        // An id looked up is no text to quote.
        assert_eq!(quoted_after_noun("task 'x' not found", "x"), None);
        // changex's save_tracked (Python's tuple), and common phrasings.
        for refused in [
            "path suffix '' not in allowed ('.docx',)",
            "Invalid file extension: expected .pptx",
            "Output must end with .xlsx",
        ] {
            assert!(SUFFIX_REFUSED.is_match(refused), "{refused}");
        }
        assert!(!SUFFIX_REFUSED.is_match("File not found: x.docx"));
        // universal-json-agent's flatten and its path resolver; a plain "expected" is not it.
        for list in [
            "Error: Value at path '$' is list, expected an object. Only objects can be flattened.",
            "Cannot index a JSON array with non-integer key 'x'. Array has 3 items.",
            "expected object, got array",
        ] {
            assert!(LIST_WHERE_OBJECT.is_match(list), "{list}");
        }
        assert!(!LIST_WHERE_OBJECT.is_match("expected a string, got number"));
    }

    #[test]
    fn what_an_error_says_is_missing_is_made_by_the_tool_that_makes_it() {
        let schema = |props: Value, required: &[&str]| json!({"type": "object", "properties": props, "required": required});
        let tools = tools_of(&[
            json!({"name": "add_widget", "annotations": {"destructiveHint": false},
                   "inputSchema": schema(json!({"board": {"type": "string"}}), &["board"])}),
            json!({"name": "delete_widget", "annotations": {"destructiveHint": true},
                   "inputSchema": schema(json!({"board": {"type": "string"}, "name": {"type": "string"}}), &["board", "name"])}),
            json!({"name": "lock_board", "annotations": {"destructiveHint": false},
                   "inputSchema": schema(json!({"board": {"type": "string"},
                       "action": {"type": "string", "enum": ["lock", "unlock"]}}), &["board"])}),
            json!({"name": "paint_board", "annotations": {"destructiveHint": false},
                   "inputSchema": schema(json!({"board": {"type": "string"}}), &["board"])}),
        ]);
        let config = plain_config();
        let dir = tempfile::tempdir().expect("tempdir");
        let mut widgets: Vec<String> = Vec::new();
        let mut locked = true;
        let mut host = ScriptedHost {
            answer: |tool: &str, a: &Value| match tool {
                "add_widget" => {
                    let name = format!("Widget{}", widgets.len() + 1);
                    widgets.push(name.clone());
                    json!({"content": [{"type": "text", "text": "made"}],
                           "structuredContent": {"board": a["board"], "name": name}})
                }
                "delete_widget" if widgets.is_empty() => text("Board has no widgets.", true),
                "delete_widget" => match widgets.iter().position(|w| *w == a["name"]) {
                    Some(k) => {
                        widgets.remove(k);
                        text("deleted", false)
                    }
                    None => text(&format!("Board has no widget {}.", a["name"]), true),
                },
                "lock_board" => {
                    locked = a["action"] != "unlock";
                    text("done", false)
                }
                "paint_board" if locked => text("The board is locked. Unlock it first.", true),
                "paint_board" => text("painted", false),
                _ => text("unknown", true),
            },
            log: Vec::new(),
        };
        let explored = explore(&tools, &config, dir.path(), &mut host);
        // delete_widget found nothing, add_widget made one, and its name was used.
        let delete = &explored.runs[1];
        assert!(delete.succeeded(), "{:?}", host.log);
        let ok = delete
            .calls
            .iter()
            .find(|c| c.outcome.is_success())
            .expect("a success");
        assert!(
            ok.arguments["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("Widget"))
        );
        assert!(
            explored.runs[0]
                .calls
                .iter()
                .any(|c| c.prerequisite_for.as_deref() == Some("delete_widget")),
            "{:?}",
            host.log
        );
        // "Unlock it first": lock_board ran with action unlock, then paint_board again.
        assert!(explored.runs[3].succeeded(), "{:?}", host.log);
        assert!(
            host.log
                .iter()
                .any(|(t, a)| t == "lock_board" && a["action"] == "unlock")
        );
    }

    #[test]
    fn errors_that_say_a_session_is_missing_are_recognised() {
        let not_set_up = not_set_up(&crate::exercise::packs::Packs::all());
        for t in [
            "No working directory set. Use set_working_dir first.",
            "Error: no active project. Activate a project first",
            "Database not selected",
            "The workspace has not been initialized",
            "Please select a vault first",
        ] {
            assert!(not_set_up.is_match(&t.to_lowercase()), "{t}");
        }
        for t in [
            "File not found: a.txt",
            "Invalid argument: path",
            "no such file",
        ] {
            assert!(!not_set_up.is_match(&t.to_lowercase()), "{t}");
        }
    }

    #[test]
    fn errors_that_say_nothing_is_loaded_name_the_verb_of_the_step() {
        // Real errors: a JSON query server, a Word server (in Chinese), and two phrasings
        // of the same state.
        for (t, verb) in [
            (
                "Error: \"No document loaded with alias 'x'. Loaded documents: (none)\"",
                "load",
            ),
            ("没有打开的文档", "open"),
            ("Error: no file is open", "open"),
            ("No workbook opened", "open"),
            ("The dataset has not been loaded yet", "load"),
            ("No archive mounted", "mount"),
        ] {
            assert_eq!(not_loaded_verb(t), Some(verb), "{t}");
        }
        for t in [
            "File not found: a.txt",
            "Cannot open file: permission denied",
            "Could not open file /w/a.txt",
            "The connection is no longer open",
            "port 8080 is not open",
            "Loaded 'customers' from data/customers.json",
        ] {
            assert_eq!(not_loaded_verb(t), None, "{t}");
        }
    }

    #[test]
    fn made_up_names_looked_up_as_files_are_found_in_the_error() {
        let made_up = crate::workspace::vocab::made_up(13);
        let sent = serde_json::json!({"ref": made_up, "pages": "1", "mode": "fast"});
        // Real errors: a PDF server, an archive server, an image converter, a diff reader,
        // a Word server (in Chinese).
        for (error, folder) in [
            (
                "{ \"success\": false, \"error\": \"File not found: NAME\" }",
                false,
            ),
            ("❌ Listing failed: Archive file not found: NAME", false),
            (
                "Error: Failed to Convert Folder: Input folder does not exist: NAME",
                true,
            ),
            (
                "Cannot access file NAME: [Errno 2] No such file or directory: '/w/NAME'",
                false,
            ),
            ("文档不存在: NAME", false),
            // Node's and ripgrep's: the name inside the path it was resolved to, or
            // followed by the missing file's phrase.
            (
                "Move failed: ENOENT: no such file or directory, stat '/w/NAME'",
                false,
            ),
            (
                "Error: Command failed with exit code 2 rg: NAME: IO error for operation on NAME: No such file or directory (os error 2)",
                false,
            ),
        ] {
            let error = error.replace("NAME", &made_up);
            assert_eq!(
                missing_files_named(&error, &sent),
                vec![("ref".to_string(), folder)],
                "{error}"
            );
        }
        for error in [
            "Header 'NAME' not found in document.",
            "Todo with ID 'NAME' not found",
            "Project 'NAME' not found",
            "Profile 'NAME' not found",
            "Config file loaded; key NAME not found",
        ] {
            let error = error.replace("NAME", &made_up);
            assert!(missing_files_named(&error, &sent).is_empty(), "{error}");
        }
        // Only made-up names: a value that means something is no file looked up.
        let meant = serde_json::json!({"ref": "main"});
        assert!(missing_files_named("File not found: main", &meant).is_empty());
    }

    #[test]
    fn errors_that_ask_for_relative_paths_are_recognised() {
        for t in [
            // A code index (the path it quotes has dots of its own).
            "Operation failed: Absolute file paths like '/tmp/tmp.egc/workspace/README.md' are not allowed. Please use paths relative to the project root.",
            "Path must be a portable vault-relative path",
            "absolute paths are not supported",
        ] {
            assert!(RELATIVE_ASKED.is_match(t), "{t}");
        }
        for t in [
            "Absolute path /w/a.txt does not exist",
            "File not found: notes.txt",
        ] {
            assert!(!RELATIVE_ASKED.is_match(t), "{t}");
        }
    }

    #[test]
    fn tool_names_are_found_as_whole_words() {
        assert_eq!(
            find_word("use set_working_dir first", "set_working_dir"),
            Some(4)
        );
        assert_eq!(
            find_word("use set_working_dir_now first", "set_working_dir"),
            None
        );
        assert_eq!(find_word("`listVaults`", "listVaults"), Some(1));
        assert!(distinctive("set_working_dir"));
        assert!(distinctive("listVaults"));
        assert!(!distinctive("read"));
        assert!(!distinctive("search"));
    }

    #[test]
    fn the_whole_error_text_is_read() {
        let outcome = CallOutcome::ToolError {
            text: "short".into(),
            result_sha256: String::new(),
        };
        let r = serde_json::json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "Allowed: x, y"}], "isError": true});
        assert_eq!(error_text(&outcome, Some(&r)), "a\nAllowed: x, y");
        let rpc = CallOutcome::RpcError {
            code: -32602,
            message: "bad".into(),
        };
        let r = serde_json::json!({"error": {"code": -32602, "message": "bad", "data": {"field": "mode"}}});
        assert_eq!(error_text(&rpc, Some(&r)), "bad\n{\"field\":\"mode\"}");
    }
}
