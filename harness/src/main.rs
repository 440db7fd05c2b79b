//! `hintcheck-fake-server`: the fake MCP server of hintcheck's tests as a program of its own
//! (see the library's documentation for what it does).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    hintcheck_harness::run(&args, &[])
}
