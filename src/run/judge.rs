//! The judge stage: each tool's calls go through the audits (verdicts, findings, the
//! annotations the observations support) and become the report's tool entries; the windows
//! outside the calls, unusable tool definitions, a limit that ended the server and escape
//! attempts are judged too; the coverage summary counts what was reached.

use serde_json::Value;

use super::attribute::Attributed;
use super::collect::{RunEvent, RunLog};
use super::explore::{Evidence, Reached};
use super::server::{RunContext, limit_reason};
use crate::audit;
use crate::config::RunConfig;
use crate::evidence::{Coverage, ToolRun};
use crate::finding::Finding;
use crate::mcp::client::Inventory;
use crate::mcp::tool::{HintName, shorten};
use crate::report::{CoverageSummary, ToolReport};

/// Judges the attributed evidence.
pub(super) fn judge(ctx: &RunContext<'_>, attributed: Attributed, log: &mut RunLog) {
    let Attributed {
        evidence: Evidence { runs, phases },
        reached,
    } = attributed;
    let Reached {
        observers,
        coverage,
        inventory,
        called,
        planned_arguments,
        pooled_values,
        background_threads,
        limit_during,
        ..
    } = reached;
    let (tools, mut findings) = judge_tools(
        ctx.config,
        &inventory,
        runs,
        &planned_arguments,
        &coverage,
        ctx.secrets.is_some(),
    );
    findings.extend(audit::malformed_tool::unusable_findings(
        &inventory.unusable,
    ));
    findings.extend(audit::out_of_window::findings(&phases));
    if let Some(why) = limit_reason(ctx) {
        findings.push(audit::resource_limit::finding(
            &why,
            limit_during.as_deref(),
        ));
        log.emit(RunEvent::Partial(why));
    }
    findings.extend(audit::sandbox_evasion::findings(
        tools.iter().map(|t| (t.name.as_str(), t.calls.as_slice())),
        &phases,
    ));
    findings.extend(audit::secret_access::findings(
        tools.iter().map(|t| (t.name.as_str(), t.calls.as_slice())),
        &phases,
    ));
    findings.extend(audit::exfiltration::findings(
        inventory.tools.iter().zip(&tools).map(|(decl, t)| {
            (
                t.name.as_str(),
                decl.hints
                    .get(crate::mcp::tool::HintName::OpenWorld)
                    .declared()
                    == Some(false),
                t.calls.as_slice(),
            )
        }),
        &phases,
    ));
    if let Some(watch) = &ctx.secrets {
        let listed = watch.in_listing(
            inventory
                .tools
                .iter()
                .map(|t| (t.name.as_str(), &t.definition)),
        );
        findings.extend(audit::secret_access::listing_findings(
            listed
                .iter()
                .map(|(tool, found)| {
                    let found = found.iter().map(|c| (c.kind, c.place.as_str())).collect();
                    (tool.clone(), found)
                })
                .collect(),
        ));
    }
    let coverage = coverage_summary(
        observers,
        &coverage,
        &inventory,
        &tools,
        &called,
        background_threads,
        pooled_values,
    );
    log.emit(RunEvent::Judged { tools, coverage });
    log.emit(RunEvent::Phases(phases));
    log.emit(RunEvent::Findings(findings));
}

/// Every tool's report entry and the findings about it.
fn judge_tools(
    config: &RunConfig,
    inventory: &Inventory,
    runs: Vec<ToolRun>,
    planned_arguments: &[Value],
    coverage: &Coverage,
    canaries: bool,
) -> (Vec<ToolReport>, Vec<Finding>) {
    let mut findings: Vec<Finding> = Vec::new();
    let mut tools = Vec::new();
    for (tool, mut run) in inventory.tools.iter().zip(runs) {
        // A path the tool's own schema offered is not the caller asking for a secret.
        for call in &mut run.calls {
            crate::observe::secrets::asked_only_by_schema(
                &mut call.observations,
                &call.arguments,
                &tool.input_schema,
            );
        }
        // The arguments that select what the tool does, and the values each call had.
        let schema = crate::exercise::synth::inline_refs(&tool.input_schema);
        let tried: Vec<&Value> = run.calls.iter().map(|c| &c.arguments).collect();
        let selectors = crate::exercise::variants::selectors(&schema, &tried);
        for call in run.calls.iter_mut().filter(|c| c.variant.is_none()) {
            call.selection = selection(&selectors, &call.arguments);
        }
        let mut judgement = audit::judge_tool(tool, &run, coverage);
        let by_argument =
            audit::by_argument::profile(&run, coverage, &selectors, &judgement.verdicts);
        name_the_values(&mut judgement, &by_argument);
        findings.extend(judgement.findings);
        // The hints the server resolved for the calls' arguments, judged beside the static
        // ones.
        let resolved = audit::resolved::judge(tool, &run, coverage, inventory.resolve_announced);
        findings.extend(resolved.findings);
        let labels = audit::data_labels::judge(tool, &run, coverage, canaries);
        findings.extend(labels.findings);
        if config.judge.require_hints {
            findings.extend(audit::missing_hints::finding(tool, &judgement.supported));
        }
        tools.push(ToolReport {
            name: tool.name.clone(),
            title: tool.title.clone(),
            description: tool.description.as_ref().map(|d| shorten(d, 300)),
            index: tool.index,
            definition_sha256: tool.definition_sha256.clone(),
            declared: HintName::ALL
                .iter()
                .map(|h| (h.key(), tool.hints.get(*h).describe()))
                .collect(),
            skipped: run.skipped.clone(),
            // The arguments that worked, or else the first set tried.
            arguments: run
                .calls
                .iter()
                .find(|c| c.number == 1 && c.outcome.is_success())
                .map(|c| c.arguments.clone())
                .or_else(|| planned_arguments.get(tool.index).cloned())
                .unwrap_or(Value::Null),
            synthesis_notes: run.synthesis_notes.clone(),
            overridden: run.overridden.clone(),
            calls: run.calls,
            verdicts: judgement.verdicts,
            suggestions: judgement.suggestions,
            supported: judgement.supported,
            labels: labels.verdicts,
            labels_supported: labels.supported,
            by_argument,
            resolved: resolved.verdicts,
            definition: tool.definition.clone(),
        });
    }
    (tools, findings)
}

/// The values of `selectors` in force in a call sent `arguments` that say what it did: every
/// operation's, and a flag's only where it is not its default (`action: read, force: true`).
fn selection(
    selectors: &[crate::exercise::variants::Selector],
    arguments: &Value,
) -> Option<String> {
    let said: Vec<String> = selectors
        .iter()
        .filter_map(|s| {
            let v = s.in_force(arguments)?;
            (!s.flag || s.default.as_ref() != Some(&v))
                .then(|| crate::exercise::variants::selected(&s.argument, &v))
        })
        .collect();
    (!said.is_empty()).then(|| said.join(", "))
}

/// A contradicted hint that only some values of a selecting argument bore out says which, in
/// its verdict and its finding: `… but 1 write(s) were observed during its calls (with
/// action: delete)`.
fn name_the_values(
    judgement: &mut audit::ToolJudgement,
    profile: &[audit::by_argument::ArgumentBehaviour],
) {
    for v in &mut judgement.verdicts {
        let Some(values) = audit::by_argument::only_with(profile, v.hint) else {
            continue;
        };
        let with = format!(" (with {values})");
        v.reason.push_str(&with);
        for f in judgement
            .findings
            .iter_mut()
            .filter(|f| f.hint == Some(v.hint) && f.audit == v.audit)
        {
            f.message.push_str(&with);
        }
    }
}

/// What the run reached and observed.
fn coverage_summary(
    observers: Vec<crate::observe::ObserverStatus>,
    coverage: &Coverage,
    inventory: &Inventory,
    tools: &[ToolReport],
    called: &[bool],
    background_threads: usize,
    values_learned: usize,
) -> CoverageSummary {
    CoverageSummary {
        observers: observers.into_iter().map(Into::into).collect(),
        files_observed: coverage.files.is_some(),
        network_observed: coverage.network.is_some(),
        tools_listed: inventory.tools.len(),
        tools_succeeded: tools
            .iter()
            .filter(|t| t.calls.iter().any(|c| c.outcome.is_success()))
            .count(),
        tools_failed: tools
            .iter()
            .filter(|t| !t.calls.is_empty() && !t.calls.iter().any(|c| c.outcome.is_success()))
            .count(),
        tools_skipped: tools
            .iter()
            .filter(|t| t.calls.is_empty() && t.skipped.is_some())
            .count(),
        tools_not_called: tools
            .iter()
            .enumerate()
            .filter(|(i, t)| !called[*i] && t.skipped.is_none())
            .count(),
        calls: tools.iter().map(|t| t.calls.len()).sum(),
        inventory_incomplete: inventory.incomplete.clone(),
        background_threads,
        values_learned,
        unreached: tools
            .iter()
            .filter_map(|t| crate::report::Unreached::of(&t.name, &t.calls))
            .collect(),
    }
}
