//! JSON-RPC 2.0 over stdio, written for a hostile peer: [`framing`] reads bounded lines and
//! classifies them, [`transcript`] records every line before it is parsed, and [`session`]
//! correlates requests with responses under timeouts.

pub mod framing;
pub mod http;
pub mod session;
pub mod transcript;
