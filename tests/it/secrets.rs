//! Planted secrets (canaries): a run plants fake credentials in the sandbox's home, workspace
//! and environment; tools that return them or pass them to a program are found, in each
//! encoding, and a reader asked for the file by path is not accused. As root and unprivileged.

use std::time::Duration;

use crate::sandbox::{As, prefix, run_as_with_env, verify_json_args};

/// Findings of `audit` in report `r`, by tool (`None`: the server's).
fn findings_of<'a>(r: &'a serde_json::Value, audit: &str) -> Vec<&'a serde_json::Value> {
    r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["audit"] == audit)
        .collect()
}

fn handed_on_run(who: As) {
    let Some(prefix) = prefix(who, false) else {
        return;
    };
    // hintcheck's own environment holds a "real" token: it never reaches the server.
    let marker = format!("hintcheck-it-real-token-{}", std::process::id());
    let env = [("GITHUB_TOKEN", marker.clone())];
    // The JUnit and Markdown outputs too (in /tmp: the unprivileged user writes them).
    let junit = format!(
        "/tmp/hintcheck-it-secrets-{}-{who:?}.xml",
        std::process::id()
    );
    let summary = format!(
        "/tmp/hintcheck-it-secrets-{}-{who:?}.md",
        std::process::id()
    );
    let _ = std::fs::remove_file(&summary);
    let out = run_as_with_env(
        &prefix,
        &verify_json_args(
            "secrets",
            &["--check", "--junit", &junit, "--summary", &summary],
        ),
        &env,
        Duration::from_secs(60),
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    let junit_path = junit;
    let junit = std::fs::read_to_string(&junit_path).expect("junit");
    let summary_path = summary;
    let summary = std::fs::read_to_string(&summary_path).expect("summary");
    let _ = std::fs::remove_file(&junit_path);
    let _ = std::fs::remove_file(&summary_path);
    // Secrets have cases of their own in JUnit and a section above the tools in Markdown.
    assert!(
        junit.contains("name=\"show_config\" classname=\"hintcheck-fake-server.secrets\""),
        "{junit}"
    );
    let section = summary
        .find("### Planted secrets handed on")
        .expect("a secrets section");
    assert!(
        summary[section..].contains("show\\_config returned"),
        "{summary}"
    );
    assert!(
        !out.stdout.contains(&marker),
        "the host's token reached the server"
    );
    let r = out.json();
    let places: Vec<&str> = r["canaries"]
        .as_array()
        .expect("canaries")
        .iter()
        .filter_map(|c| c["place"].as_str())
        .collect();
    for place in [
        "~/.ssh/id_ed25519",
        "~/.aws/credentials",
        "$WORKSPACE/.env",
        "$GITHUB_TOKEN",
    ] {
        assert!(places.contains(&place), "{place} not in {places:?}");
    }
    // The values never show: a program's command line and a result's text quote them as
    // their kind and place.
    let seed = r["settings"]["seed"].as_u64().expect("seed");
    for c in hintcheck::workspace::canary::Canaries::of(seed).items {
        assert!(
            !out.stdout.contains(&c.value)
                && !junit.contains(&c.value)
                && !summary.contains(&c.value),
            "the value of {} {} is in the report",
            c.kind,
            c.place
        );
    }
    for mark in [
        "[planted openai-api-key $OPENAI_API_KEY]",
        "[planted aws-secret-access-key ~/.aws/credentials]",
    ] {
        assert!(out.stdout.contains(mark), "{mark} is not in the report");
    }
    let secret = findings_of(&r, "secret-access");
    for (tool, severity, says) in [
        (
            "show_config",
            "error",
            "aws-secret-access-key from ~/.aws/credentials in",
        ),
        (
            "export_settings",
            "error",
            "github-token from $GITHUB_TOKEN (base64)",
        ),
        (
            "diagnostics",
            "error",
            "ssh-private-key from ~/.ssh/id_ed25519 (hex)",
        ),
        (
            "diagnostics",
            "warning",
            "read ~/.ssh/id_ed25519, which holds a planted ssh-private-key",
        ),
        ("load_key", "warning", "read ~/.ssh/id_rsa"),
        (
            "run_client",
            "warning",
            "openai-api-key from $OPENAI_API_KEY to /bin/true",
        ),
        (
            "list_repos_cli",
            "warning",
            "github-token from $GITHUB_TOKEN to /bin/true in its environment",
        ),
    ] {
        assert!(
            secret.iter().any(|f| f["tool"] == tool
                && f["severity"] == severity
                && f["evidence"].to_string().contains(says)),
            "no {severity} on {tool} saying {says}: {secret:?}"
        );
    }
    // Honest: a listing of ~/.ssh, a library's look-up of ~/.netrc, a reader asked for
    // `.env` by path, a reader of an ordinary file, a search through every file (`.env`
    // with the rest); and nothing of the server's own outside
    // the calls (hintcheck never opens a planted file itself).
    for tool in [
        "list_keys",
        "fetch_status",
        "read_file",
        "read_notes",
        "search_all",
    ] {
        assert!(
            !secret.iter().any(|f| f["tool"] == tool),
            "{tool} accused: {secret:?}"
        );
    }
    assert!(
        !secret.iter().any(|f| f["tool"].is_null()),
        "a server-wide finding: {secret:?}"
    );
    // What the report says of a secret names its kind and place, never its value (the
    // program's own command line, recorded as it ran, shows it as its kind and place too).
    let said: String = secret.iter().map(|f| f.to_string()).collect();
    let env_line = r["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "run_client")
        .map(|t| t["calls"][0]["observations"].to_string())
        .unwrap_or_default();
    assert!(
        env_line.contains("--api-key=[planted openai-api-key $OPENAI_API_KEY]"),
        "{env_line}"
    );
    // The reader asked for `.env` by path saw it, and keeps it as an observation only.
    let asked = r["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "read_file")
        .map(|t| t["calls"][0]["observations"].clone())
        .unwrap_or_default();
    assert!(
        asked
            .as_array()
            .is_some_and(|o| o.iter().any(|o| o["type"] == "secret"
                && o["asked"] == true
                && o["place"] == "$WORKSPACE/.env")),
        "{asked}"
    );
    assert!(!said.contains("sk-proj-"), "{said}");
    // The SARIF rule exists with the audit's id.
    let sarif = run_as_with_env(
        &prefix,
        &[
            "verify".to_string(),
            "--scenario".into(),
            crate::sandbox::fixture("secrets"),
            "--format".into(),
            "sarif".into(),
        ],
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(sarif.code, 1, "{}", sarif.stderr);
    assert!(
        sarif.stdout.contains("\"ruleId\": \"secret-access\""),
        "{}",
        sarif.stdout
    );
    // The HTML page shows them above the tools.
    let html = run_as_with_env(
        &prefix,
        &[
            "verify".to_string(),
            "--scenario".into(),
            crate::sandbox::fixture("secrets"),
            "--format".into(),
            "html".into(),
        ],
        &[],
        Duration::from_secs(60),
    );
    let (before_tools, _) = html
        .stdout
        .split_once("<table class=\"tools\"")
        .unwrap_or_else(|| panic!("no tools table: {}", html.stderr));
    assert!(
        before_tools.contains("Planted secrets handed on")
            && before_tools.contains("ssh-private-key from ~/.ssh/id_ed25519 (hex)"),
        "{before_tools}"
    );
    // Below --fail-on, the run passes and its reason still names them.
    let passing = run_as_with_env(
        &prefix,
        &verify_json_args("secrets", &["--fail-on", "never"]),
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(passing.code, 0, "{}", passing.stderr);
    let reason = passing.json()["exit_reason"].to_string();
    assert!(
        reason.contains("planted secrets handed on in 3 finding(s)"),
        "{reason}"
    );
    // Without canaries nothing is planted and nothing is found.
    let out = run_as_with_env(
        &prefix,
        &verify_json_args("secrets", &["--no-canaries"]),
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = out.json();
    assert_eq!(r["canaries"], serde_json::json!([]), "{}", out.stderr);
    assert!(
        findings_of(&r, "secret-access").is_empty(),
        "{}",
        r["findings"]
    );
}

as_root_and_unprivileged!(
    secrets_handed_on_are_found_as_root,
    secrets_handed_on_are_found_unprivileged,
    handed_on_run
);

fn sent_run(who: As) {
    if !crate::sandbox::have("unshare") {
        return crate::util::skip("unshare (util-linux) is missing");
    }
    // The server aims at names of its choosing: the whole run is inside a network namespace
    // of the test's own, so nothing leaves even if the sandbox were broken.
    let Some(prefix) = prefix(who, true) else {
        return;
    };
    let out = run_as_with_env(
        &prefix,
        &verify_json_args("exfiltration", &["--check"]),
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    let r = out.json();
    let sent = findings_of(&r, "exfiltration");
    for (tool, says) in [
        (
            "check_updates",
            "aws-access-key-id from $AWS_ACCESS_KEY_ID (hex) to exfil.test (DNS name)",
        ),
        (
            "sync_status",
            "github-token from $GITHUB_TOKEN to collector.test:80 (HTTP request)",
        ),
    ] {
        assert!(
            sent.iter().any(|f| f["tool"] == tool
                && f["severity"] == "error"
                && f["evidence"].to_string().contains(says)),
            "no exfiltration on {tool} saying {says}: {sent:?}"
        );
    }
    let closed = sent
        .iter()
        .find(|f| f["tool"] == "check_updates")
        .map(|f| f["message"].to_string())
        .unwrap_or_default();
    assert!(closed.contains("openWorldHint: false"), "{closed}");
    // A GitHub token sent to GitHub's API is use: the call keeps it as an observation.
    let use_seen = r["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "list_repos")
        .map(|t| t["calls"][0]["observations"].to_string())
        .unwrap_or_default();
    assert!(
        use_seen.contains("to api.github.com:80 (HTTP request)"),
        "{use_seen}"
    );
}

as_root_and_unprivileged!(
    secrets_sent_are_exfiltration_as_root,
    secrets_sent_are_exfiltration_unprivileged,
    sent_run
);

fn leaky_client_run(who: As) {
    if !crate::sandbox::have("unshare") {
        return crate::util::skip("unshare (util-linux) is missing");
    }
    if !std::path::Path::new("/usr/bin/python3").is_file() {
        return crate::util::skip("/usr/bin/python3 is missing (the leaky-client fixture)");
    }
    // Its tools aim at names and addresses of their choosing: the whole run is inside a
    // network namespace of the test's own.
    let Some(prefix) = prefix(who, true) else {
        return;
    };
    let out = run_as_with_env(
        &prefix,
        &verify_json_args("leaky-client", &["--check"]),
        &[],
        Duration::from_secs(120),
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    let r = out.json();
    let sent = findings_of(&r, "exfiltration");
    // Each channel, with the encoding it was found in; the timer's upload after its call
    // answered is the tool's that armed the timer, not the server's.
    for (tool, says) in [
        (
            "sync_settings",
            "github-token from $GITHUB_TOKEN to settings.sync.test:443 (HTTPS request)",
        ),
        (
            "check_license",
            "openai-api-key from $OPENAI_API_KEY to licensing.test:80 (HTTP request)",
        ),
        (
            "backup_config",
            "aws-secret-access-key from ~/.aws/credentials (gzip) to backup.exfil.test:80 (HTTP request)",
        ),
        (
            "ping_peers",
            "anthropic-api-key from $ANTHROPIC_API_KEY (base64) to 192.0.2.77:9999 (datagram)",
        ),
        (
            "resolve_mirror",
            "github-token from $GITHUB_TOKEN (base64) to exfil.test (DNS name)",
        ),
        // Raw bytes to a port nothing listened on: a listener is opened for the connect.
        (
            "report_crash",
            "anthropic-api-key from $ANTHROPIC_API_KEY to 192.0.2.9:4444 (bytes sent)",
        ),
        (
            "report_crash",
            "anthropic-api-key from $ANTHROPIC_API_KEY to crash.exfil.test:9000 (bytes sent)",
        ),
        // A second request on a connection whose answer said `close`.
        (
            "check_updates",
            "openai-api-key from $OPENAI_API_KEY to updates.exfil.test:80 (HTTP request)",
        ),
        (
            "resolve_mirror",
            "aws-secret-access-key from $AWS_SECRET_ACCESS_KEY (hex) to drip.test (DNS name)",
        ),
    ] {
        assert!(
            sent.iter().any(|f| f["tool"] == tool
                && f["severity"] == "error"
                && f["evidence"].to_string().contains(says)),
            "no exfiltration on {tool} saying {says}: {sent:?}"
        );
    }
    assert!(
        sent.iter().all(|f| !f["tool"].is_null()),
        "a secret sent in a tool's traffic was left to the server: {sent:?}"
    );
    // A key staged in a temporary file every user can read left the user's reach (an
    // error); a token cached in a file of the tool's own is a warning; preferences in a
    // temporary file are nothing.
    let says = "ssh-private-key from ~/.ssh/id_ed25519 (base64) to $TMPDIR/diagnostics-report.txt (a temporary file other users can read)";
    assert!(
        sent.iter().any(|f| f["tool"] == "stage_report"
            && f["severity"] == "error"
            && f["evidence"].to_string().contains(says)),
        "no exfiltration on stage_report saying {says}: {sent:?}"
    );
    // The same in the sandbox's own /tmp (not $TMPDIR), named by the server itself.
    let says = "github-token from $GITHUB_TOKEN to /tmp/debug-dump.txt (a temporary file other users can read)";
    assert!(
        sent.iter().any(|f| f["tool"] == "dump_debug"
            && f["severity"] == "error"
            && f["evidence"].to_string().contains(says)),
        "no exfiltration on dump_debug saying {says}: {sent:?}"
    );
    let copied = findings_of(&r, "secret-access");
    let says = "wrote the planted github-token from $GITHUB_TOKEN to $HOME/.cache/leaky/login (a file of its own)";
    assert!(
        copied.iter().any(|f| f["tool"] == "cache_login"
            && f["severity"] == "warning"
            && f["evidence"].to_string().contains(says)),
        "no copy warning on cache_login saying {says}: {copied:?}"
    );
    // The metadata endpoint handed out the planted instance credentials: fetched (as the
    // clouds' SDKs do: an observation of the call) and returned (an error).
    let handed = findings_of(&r, "secret-access");
    let fetched = r["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "cloud_status")
        .map(|t| t["calls"][0]["observations"].to_string())
        .unwrap_or_default();
    assert!(
        fetched.contains("fetched http://169.254.169.254/"),
        "{fetched}"
    );
    let says = "returned the planted aws-secret-access-key from http://169.254.169.254/";
    assert!(
        handed.iter().any(|f| f["tool"] == "cloud_status"
            && f["severity"] == "error"
            && f["evidence"].to_string().contains(says)),
        "no error on cloud_status saying {says}: {handed:?}"
    );
    assert!(
        !handed
            .iter()
            .any(|f| f["tool"] == "cloud_status" && f["severity"] == "warning"),
        "a fetch of the instance credentials is the SDKs' look-up: {handed:?}"
    );
    let planted = r["canaries"].to_string();
    assert!(
        planted.contains("\"aws-session-token\"") && planted.contains("http://169.254.169.254/"),
        "{planted}"
    );
}

as_root_and_unprivileged!(
    secrets_in_bodies_headers_datagrams_and_late_uploads_are_found_as_root,
    secrets_in_bodies_headers_datagrams_and_late_uploads_are_found_unprivileged,
    leaky_client_run
);

/// The draft data labels (SEP-1913's on the tools, the trust-annotations extension's on the
/// results) are judged against what the tools did: each false label is an error with its
/// evidence, each honest one is consistent, and the run suggests labels for what it saw.
fn labelled_run(who: As) {
    let root = matches!(who, As::Root);
    if !crate::sandbox::have("unshare") {
        return crate::util::skip("unshare (util-linux) is missing");
    }
    if !std::path::Path::new("/usr/bin/python3").is_file() {
        return crate::util::skip("/usr/bin/python3 is missing (the labelled fixture)");
    }
    // Its tools post to names of their choosing: the whole run is inside a network namespace
    // of the test's own.
    let Some(prefix) = prefix(who, true) else {
        return;
    };
    let out = run_as_with_env(
        &prefix,
        &verify_json_args("labelled", &["--check"]),
        &[],
        Duration::from_secs(120),
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    let r = out.json();
    let label = |tool: &str, label: &str| -> serde_json::Value {
        r["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .find(|t| t["name"] == tool)
            .and_then(|t| {
                t["data_labels"]
                    .as_array()?
                    .iter()
                    .find(|v| v["label"] == label)
                    .cloned()
            })
            .unwrap_or_else(|| panic!("no verdict on {tool}'s {label}: {}", r["tools"]))
    };
    for (tool, name, verdict, says) in [
        (
            "read_settings",
            "returnMetadata.sensitivity",
            "contradicted",
            "returned the planted aws-secret-access-key from ~/.aws/credentials",
        ),
        (
            "show_identity",
            "result sensitivity",
            "contradicted",
            "trust-annotations sensitive: false",
        ),
        (
            "fetch_page",
            "returnMetadata.source",
            "contradicted",
            "the arguments named the host",
        ),
        (
            "fetch_page",
            "result trust",
            "contradicted",
            "untrusted: false",
        ),
        (
            "post_note",
            "inputMetadata.destination",
            "contradicted",
            "Host: notes.example.test carrying argument `text`",
        ),
        (
            "archive_note",
            "inputMetadata.outcomes",
            "contradicted",
            "created $WORKSPACE/archived-notes.txt",
        ),
        ("show_token", "returnMetadata.sensitivity", "consistent", ""),
        ("show_token", "result sensitivity", "consistent", ""),
        ("fetch_docs", "returnMetadata.source", "consistent", ""),
        ("sync_note", "inputMetadata.destination", "consistent", ""),
        ("post_note", "inputMetadata.outcomes", "not-applicable", ""),
    ] {
        let v = label(tool, name);
        assert_eq!(v["verdict"], verdict, "{tool} {name}: {v}");
        assert!(
            v["evidence"].to_string().contains(says),
            "{tool} {name} evidence without {says}: {v}"
        );
    }
    // What the results carried is firm; a host's name does not prove its audience, and a
    // benign tool may change private drafts: warnings.
    let severities: Vec<String> = findings_of(&r, "data-labels")
        .iter()
        .map(|f| {
            format!(
                "{} {}",
                f["tool"].as_str().unwrap_or(""),
                f["severity"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        severities,
        [
            "read_settings error",
            "show_identity error",
            "fetch_page error",
            "fetch_page error",
            "post_note warning",
            "archive_note warning"
        ]
    );
    // What the run supports, for the tools that declare nothing (or the wrong thing).
    let supported = |tool: &str| {
        r["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .find(|t| t["name"] == tool)
            .map(|t| t["data_labels_supported"].to_string())
            .unwrap_or_default()
    };
    assert!(
        supported("show_identity").contains(
            r#""label":"returnMetadata.sensitivity","values":["credentials"],"basis":"observed""#
        ),
        "{}",
        supported("show_identity")
    );
    assert!(
        supported("post_note").contains(
            r#""label":"inputMetadata.destination","values":["internal","public"],"basis":"observed","changed":true"#
        ),
        "{}",
        supported("post_note")
    );
    assert!(
        supported("list_notes").contains(r#""values":["benign"],"basis":"consistent""#),
        "{}",
        supported("list_notes")
    );
    if root {
        labels_in_every_format(&prefix);
    }
}

/// Every format shows the data labels: JUnit a case per label, Markdown the contradicted
/// labels' table, SARIF the rule, HTML the label beside the contradicted hints.
fn labels_in_every_format(prefix: &[String]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = |n: &str| dir.path().join(n).display().to_string();
    let mut args = verify_json_args(
        "labelled",
        &[
            "--junit",
            &file("j.xml"),
            "--summary",
            &file("s.md"),
            "--sarif",
            &file("s.sarif"),
        ],
    );
    if let Some(last) = args.last_mut() {
        *last = "html".into();
    }
    let out = run_as_with_env(prefix, &args, &[], Duration::from_secs(120));
    assert_eq!(out.code, 1, "{}", out.stderr);
    let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).expect(n);
    let junit = read("j.xml");
    assert!(
        junit.contains(
            "name=\"post_note: inputMetadata.destination\" classname=\"labelled.data-labels\""
        ),
        "{junit}"
    );
    assert!(
        junit.contains("<failure")
            && junit.contains("read_settings declares returnMetadata.sensitivity"),
        "{junit}"
    );
    let md = read("s.md");
    assert!(md.contains("### Contradicted data labels"), "{md}");
    assert!(
        md.contains(r"| ⚠️ post\_note | inputMetadata.destination |"),
        "{md}"
    );
    let sarif = read("s.sarif");
    assert!(
        sarif.contains("\"id\": \"data-labels\"") || sarif.contains("\"id\":\"data-labels\""),
        "no data-labels rule"
    );
    assert!(
        out.stdout.contains("hint or data label") && out.stdout.contains("returnMetadata.source"),
        "html"
    );
}

as_root_and_unprivileged!(
    declared_data_labels_are_judged_as_root,
    declared_data_labels_are_judged_unprivileged,
    labelled_run
);
