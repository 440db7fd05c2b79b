//! The MCP layer above JSON-RPC: [`client`] speaks both protocol eras and lists and calls
//! tools; [`tool`] reads tool definitions leniently, hints as tri-state values; [`error_like`]
//! tells results that report a failure without `isError`; [`labels`] reads the data labels
//! (SEP-1913's drafts, the trust-annotations extension) declared on tools and results;
//! [`resolve`] reads a tool's annotations resolved for given arguments (SEP-1862).

pub mod client;
pub mod error_like;
pub mod labels;
pub mod resolve;
pub mod tool;
