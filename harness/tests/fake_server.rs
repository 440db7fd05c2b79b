//! The fake server as the tests use it: started on a scenario file, it completes the
//! handshake and lists the scenario's tools. (Being an integration test of this package also
//! makes `cargo test --workspace` build the binary that hintcheck's own tests start.)

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

#[test]
fn the_demo_scenario_is_served() {
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/demo/scenario.toml"
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_hintcheck-fake-server"))
        .args(["--scenario", scenario])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the fake server starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut ask = |request: &str| -> serde_json::Value {
        writeln!(stdin, "{request}").expect("write");
        stdin.flush().expect("flush");
        let line = lines.next().expect("an answer").expect("utf8");
        serde_json::from_str(&line).expect("JSON")
    };
    let init = ask(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert_eq!(init["id"], 1);
    assert_eq!(init["result"]["serverInfo"]["name"], "demo-notes", "{init}");
    // The notification gets no answer; the listing that follows does.
    let list = ask(concat!(
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#
    ));
    assert_eq!(list["id"], 2);
    let tools = list["result"]["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 11, "{list}");
    assert!(tools.iter().any(|t| t["name"] == "read_note"));
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
}
