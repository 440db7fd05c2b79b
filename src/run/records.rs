//! The run's records in the report's words: the sandbox's status, how server processes
//! ended, the wire's counts and the server's requests, and what each observer covers are
//! converted here into the plain records the report owns, so that no renderer depends on a
//! sandbox, wire or observer type.

use crate::observe::ObserverStatus;
use crate::report::{ObserverSummary, SandboxSummary, ServerExit, ServerRequest, WireStats};
use crate::rpc::session::ServerRequestRecord;
use crate::rpc::transcript::TranscriptStats;
use crate::sandbox::SandboxStatus;
use crate::sandbox::process::ExitSummary;

impl From<SandboxStatus> for SandboxSummary {
    fn from(s: SandboxStatus) -> Self {
        SandboxSummary {
            level: s.level,
            requested: s.requested,
            summary: s.summary,
            enforced: s.enforced,
            not_enforced: s.not_enforced,
        }
    }
}

impl From<ExitSummary> for ServerExit {
    fn from(e: ExitSummary) -> Self {
        ServerExit {
            code: e.code,
            signal: e.signal,
            how: e.how,
            stragglers_killed: e.stragglers_killed,
        }
    }
}

impl From<ObserverStatus> for ObserverSummary {
    fn from(o: ObserverStatus) -> Self {
        ObserverSummary {
            name: o.name,
            covers: o.covers,
            blind_spots: o.blind_spots,
        }
    }
}

impl From<TranscriptStats> for WireStats {
    fn from(s: TranscriptStats) -> Self {
        WireStats {
            sent: s.sent,
            received: s.received,
            garbage: s.garbage,
            unknown_id: s.unknown_id,
            dropped_entries: s.dropped_entries,
        }
    }
}

impl From<ServerRequestRecord> for ServerRequest {
    fn from(r: ServerRequestRecord) -> Self {
        ServerRequest {
            seq: r.seq,
            method: r.method,
            answer: r.answer,
        }
    }
}
