//! `sandbox-evasion`: system calls the sandbox refused outright because no server needs them
//! and they are the usual first steps out of a sandbox: socket families other than IPv4, IPv6
//! and routing netlink (`AF_VSOCK` reaches a virtual machine's host), and nested namespaces
//! (`unshare`, `clone` with `CLONE_NEW*`, `setns`). One finding per tool (or per phase outside
//! the calls), with every distinct attempt as evidence.

use std::collections::BTreeMap;

use super::AuditMeta;
use crate::evidence::Observation;
use crate::evidence::{CallRecord, PhaseObservation};
use crate::finding::{Confidence, Evidence, Finding, Severity};

/// Metadata.
pub const META: AuditMeta = AuditMeta {
    id: "sandbox-evasion",
    summary: "the server tried something only a sandbox escape needs",
    docs: "The sandbox refuses, and records, system calls that no MCP server needs to do its work \
and that are the usual first steps out of a sandbox: sockets of any family but IPv4, IPv6 and \
routing netlink (AF_VSOCK talks to the host of a virtual machine; AF_PACKET, AF_ALG, other netlink \
protocols such as nf_tables reach kernel code a server has no use for), IPv4 and IPv6 sockets of \
other protocols than TCP, UDP, ICMP, UDP-Lite and MPTCP (SCTP and DCCP are modules the kernel \
loads on demand), socket pairs of any family \
but AF_UNIX, and nested namespaces: `unshare` or `clone` with a CLONE_NEW* flag, and `setns`. A \
nested user namespace hands its creator every capability over new kernel objects, the route most \
kernel privilege escalations take. The server got an ordinary error (EAFNOSUPPORT, \
EPROTONOSUPPORT, EPERM), as on a host without the feature; nothing was created.\n\n\
The finding is a warning: some legitimate programs probe these (a browser's own sandbox creates a \
user namespace), so it does not fail a run unless `--fail-on warning` is given. For a server from \
a third party it deserves a look: the evidence names each call and the tool whose window it fell in.\n\n\
Fix: do not create these sockets or namespaces from an MCP server.",
};

/// Findings for every refused call: one per tool (and one for the calls outside every tool
/// call), each distinct attempt once, with the first window it was seen in.
pub fn findings<'a>(
    tools: impl IntoIterator<Item = (&'a str, &'a [CallRecord])>,
    phases: &[PhaseObservation],
) -> Vec<Finding> {
    let mut by_tool: BTreeMap<Option<String>, Vec<Evidence>> = BTreeMap::new();
    super::each_observation(tools, phases, |tool, source, o| {
        if !matches!(o, Observation::Refused(_)) {
            return;
        }
        let list = by_tool.entry(tool.map(str::to_string)).or_default();
        super::add_distinct(list, source, o.describe());
    });
    by_tool
        .into_iter()
        .map(|(tool, evidence)| Finding {
            resolved_for: None,
            category: None,
            fingerprint: String::new(),
            accepted: None,
            audit: META.id,
            message: match &tool {
                Some(t) => format!(
                    "{t} tried {} kind(s) of system call only a sandbox escape needs; the sandbox refused them",
                    evidence.len()
                ),
                None => format!(
                    "the server tried {} kind(s) of system call only a sandbox escape needs, outside any tool call; the sandbox refused them",
                    evidence.len()
                ),
            },
            tool,
            hint: None,
            severity: Severity::Warning,
            confidence: Confidence::High,
            evidence,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::Phase;
    use crate::evidence::{Mechanism, RefusedCall};

    fn refused(what: &str) -> Observation {
        Observation::Refused(RefusedCall {
            syscall: "socket".into(),
            what: what.into(),
            pid: 7,
            mechanism: Mechanism::Attempt,
        })
    }

    #[test]
    fn each_attempt_is_named_once_per_tool_and_outside_calls_apart() {
        let call = |number: usize, observations: Vec<Observation>| {
            crate::audit::testing::call(number, crate::audit::testing::ok(), observations)
        };
        let calls = vec![
            call(1, vec![refused("socket(AF_VSOCK)")]),
            call(2, vec![refused("socket(AF_VSOCK)"), refused("setns")]),
        ];
        let phases = vec![PhaseObservation {
            started_by: None,
            phase: Phase::Startup,
            after_tool: None,
            observation: refused("unshare(CLONE_NEWUSER)"),
        }];
        let f = findings([("probe", calls.as_slice())], &phases);
        assert_eq!(f.len(), 2);
        let tool = f.iter().find(|f| f.tool.is_some()).expect("tool finding");
        assert_eq!(tool.severity, Severity::Warning);
        let texts: Vec<&str> = tool.evidence.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "tried socket(AF_VSOCK), refused by the sandbox",
                "tried setns, refused by the sandbox"
            ]
        );
        assert_eq!(tool.evidence[0].source, "call 1 (attempt 1)");
        let outside = f.iter().find(|f| f.tool.is_none()).expect("outside");
        assert!(
            outside.message.contains("outside any tool call"),
            "{}",
            outside.message
        );
    }
}
