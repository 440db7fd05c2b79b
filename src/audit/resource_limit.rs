//! `resource-limit`: the server went past a limit of the run (memory of its process tree,
//! bytes in its scratch directories) and the watchdog ended it. The run stops there: what was
//! not called yet is not judged, and the report is partial.

use super::AuditMeta;
use crate::finding::{Confidence, Evidence, Finding, Severity};

/// Metadata.
pub const META: AuditMeta = AuditMeta {
    id: "resource-limit",
    summary: "the server went past a resource limit and the run was ended",
    docs: "hintcheck bounds what a server may consume, also where no memory cgroup exists \
(unprivileged runs, hosts without the controller): the sandbox's /tmp, /var/tmp, /dev/shm and /run \
are size-limited tmpfs, System V shared memory is limited in the sandbox's IPC namespace, and a \
watchdog samples the server's process tree four times a second (proportional anonymous and shared \
memory, plus memfd files held open) and the bytes in its scratch directories once a second. Past \
a quarter above `--memory-limit` (default 8GiB; each process's RLIMIT_DATA, and a cgroup's \
memory.max where there is one, act at the limit itself) or past `--disk-limit` (default 4GiB) it \
kills the whole sandbox and the run ends here: the report is partial, and tools not called yet stay unexercised.\n\n\
Fix: if the server legitimately needs more, raise the limit; otherwise find what the tool named in \
the evidence allocated or wrote.",
};

/// The finding for a run the watchdog ended; `during` names the tool whose call was in flight.
pub fn finding(why: &str, during: Option<&str>) -> Finding {
    Finding {
        resolved_for: None,
        category: None,
        fingerprint: String::new(),
        accepted: None,
        audit: META.id,
        tool: during.map(str::to_string),
        hint: None,
        severity: Severity::Warning,
        confidence: Confidence::High,
        message: format!("the run was ended: {why}"),
        evidence: vec![Evidence {
            category: None,
            seen_by: None,
            firm: false,
            uncertain: false,
            source: "watchdog".into(),
            text: match during {
                Some(t) => format!("{why}, during a call of {t}"),
                None => format!("{why}, outside any tool call"),
            },
        }],
    }
}
