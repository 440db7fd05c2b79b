//! The MCP layer above JSON-RPC: [`client`] speaks both protocol eras and lists and calls
//! tools; [`tool`] reads tool definitions leniently, hints as tri-state values.

pub mod client;
pub mod tool;
