//! The call plan: which tools are called, in which order, with which arguments. Tools that
//! declare `readOnlyHint: true` go first, additive ones (`destructiveHint: false`) next and the
//! rest last, so that one tool's deletions do not starve another of its inputs. Tools that
//! require task-augmented calls are skipped with that reason. User overrides (`--args`) are
//! merged over the synthesized arguments.

use std::collections::BTreeMap;

use serde_json::Value;

use super::semantics::{Semantics, WorkspaceFacts};
use super::synth::synthesize_arguments;
use crate::mcp::tool::ToolDecl;

/// One planned tool.
#[derive(Debug, Clone)]
pub struct PlannedTool {
    /// Index into the inventory.
    pub tool_index: usize,
    /// The arguments of the first call (repeats reuse them exactly).
    pub arguments: Value,
    /// Synthesis notes.
    pub notes: Vec<String>,
    /// Argument names that came from an override.
    pub overridden: Vec<String>,
    /// Why the tool is not called, if it is not.
    pub skip: Option<String>,
}

/// Orders the tools and builds their arguments.
pub fn plan(
    tools: &[ToolDecl],
    seed: u64,
    overrides: &BTreeMap<String, Value>,
    workspace: Option<&WorkspaceFacts>,
) -> Vec<PlannedTool> {
    let mut order: Vec<usize> = (0..tools.len()).collect();
    order.sort_by_key(|&i| {
        let h = &tools[i].hints;
        let rank = if h.read_only.declared() == Some(true) {
            0
        } else if h.destructive.declared() == Some(false) {
            1
        } else {
            2
        };
        (rank, i)
    });
    order
        .into_iter()
        .map(|i| {
            let tool = &tools[i];
            let skip = (tool.task_support.as_deref() == Some("required"))
                .then(|| "execution.taskSupport is \"required\": the tool can only be called as a task, which hintcheck does not do".to_string());
            let semantics = workspace.map(|w| Semantics::new(w, tool));
            let synthesis =
                synthesize_arguments(&tool.input_schema, seed, &tool.name, semantics.as_ref());
            let mut arguments = synthesis.arguments;
            let mut overridden = Vec::new();
            if let Some(o) = overrides.get(&tool.name) {
                match (o, &mut arguments) {
                    (Value::Object(over), Value::Object(args)) => {
                        for (k, v) in over {
                            args.insert(k.clone(), v.clone());
                            overridden.push(k.clone());
                        }
                    }
                    (other, _) => {
                        arguments = other.clone();
                        overridden.push("*".into());
                    }
                }
            }
            PlannedTool {
                tool_index: i,
                arguments,
                notes: synthesis.notes,
                overridden,
                skip,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tool::parse_tool;
    use serde_json::json;

    #[test]
    fn read_only_first_then_additive_then_the_rest_and_overrides_win() {
        let tools: Vec<ToolDecl> = [
            json!({"name":"wipe","inputSchema":{"type":"object"}}),
            json!({"name":"add","inputSchema":{"type":"object"},"annotations":{"destructiveHint":false}}),
            json!({"name":"read","inputSchema":{"type":"object","required":["p"],"properties":{"p":{"type":"string"}}},"annotations":{"readOnlyHint":true}}),
            json!({"name":"task","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}),
        ]
        .iter()
        .enumerate()
        .map(|(i, t)| parse_tool(t, i).expect("tool"))
        .collect();
        let overrides = BTreeMap::from([("read".to_string(), json!({"p": "given.txt"}))]);
        let p = plan(&tools, 0, &overrides, None);
        let names: Vec<&str> = p
            .iter()
            .map(|x| tools[x.tool_index].name.as_str())
            .collect();
        assert_eq!(names, ["read", "add", "wipe", "task"]);
        assert_eq!(p[0].arguments, json!({"p": "given.txt"}));
        assert_eq!(p[0].overridden, ["p"]);
        assert!(p[3].skip.is_some());
    }
}
