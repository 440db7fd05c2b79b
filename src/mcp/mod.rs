//! The MCP layer above JSON-RPC: [`client`] speaks both protocol eras and lists and calls
//! tools; [`tool`] reads tool definitions leniently, hints as tri-state values; [`error_like`]
//! tells results that report a failure without `isError`.

pub mod client;
pub mod error_like;
pub mod tool;
