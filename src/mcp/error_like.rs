//! Results that report a failure without saying `isError`: a text led by "Error:", "Failed
//! to …", "… not found", or a JSON object whose main member is `error`, or a short status
//! object that says it failed (`{"success": false, "message": …}`, `{"status": "error", …}`),
//! a batch whose every item reports its failure, or a summary counting no success and some
//! failures ("Succeeded: 0  Failed: 1"). Many servers answer
//! every failure this way, and a call that did nothing must not count as a success: the
//! explorer tries its next candidate, and a `consistent` verdict needs a call whose result
//! does not look like this. The rules are conservative (a document about errors is not an
//! error): the text must be led by a failure, or be short and say one.

use serde_json::{Map, Value};

/// Words that, leading a result, say it failed (after any leading punctuation or emoji).
const LEADERS: [&str; 29] = [
    "failed to",
    "failed:",
    "failure:",
    "fatal:",
    "exception:",
    "traceback (most recent call last)",
    "not found",
    "no such file",
    "does not exist",
    "invalid argument",
    "invalid parameter",
    "invalid input",
    "not allowed",
    "permission denied",
    "access denied",
    "unable to",
    "could not",
    "cannot ",
    "unknown tool",
    "missing required",
    "unauthorized",
    "forbidden",
    // Chinese: error, not found, failed, invalid.
    "錯誤",
    "错误",
    "找不到",
    "失敗",
    "失败",
    "無效",
    "无效",
];

/// Phrases that, in a short result, say it failed.
const FAILURES: [&str; 22] = [
    "not found",
    "does not exist",
    "doesn't exist",
    "failed to",
    "not allowed",
    "permission denied",
    "access denied",
    "no such file or directory",
    "is required",
    "錯誤",
    "错误",
    "找不到",
    "不存在",
    "失敗",
    "失败",
    // Chinese: not found, nothing open.
    "未找到",
    "没有找到",
    "沒有找到",
    "没有打开",
    "沒有打開",
    "未打开",
    "未打開",
];

/// The states a not-ready statement says the object is not in ("not loaded", "has not
/// been indexed").
const NOT_READY_STATE: &str = r"(indexed|loaded|initiali[sz]ed|ready|connected|opened|open|built|set\ up|configured|selected|started|authenticated|available\ yet)";

/// A subject that "is not indexed yet", "has not been loaded" (the first statement
/// [`not_ready_or_missing`] prefers, before the led one), in `(?x)` syntax.
fn subject_not_ready_source() -> String {
    format!(
        r"\b(is|are|was|were|has|have|had)(\s+not|n't)(\s+yet)?(\s+been)?(\s+yet)?\s+{NOT_READY_STATE}\b"
    )
}

/// "not loaded", "not yet initialized" anywhere (the led statement's end), in `(?x)` syntax.
fn not_in_state_source() -> String {
    format!(r"\bnot\s+(yet\s+)?{NOT_READY_STATE}\b")
}

/// A character of a text's leading subject (the led statement's start).
const SUBJECT_CHARACTER: &str = r"[\w'`.\ \-/:]";

/// The statements after the led one, in the order they are preferred, in `(?x)` syntax.
const STILL_NOT_READY_OR_MISSING_SOURCE: &str = r"
        \bstill\s+(being\s+)?(indexing|indexed|loading|initiali[sz]ing|starting)\b
        | \b(call|run|use|invoke|open|load|start)\s+`?[\w./\-]+`?\s+first\b
        | \bno\s+(active|open|current|loaded)\s+(session|project|workspace|repository|connection|document|vault|database)\b
        | ^\d+\s+validation\s+errors?\s+for\b
        | \bfield\s+required\b
        | \bis\s+a\s+required\s+property\b
        | \bmust\s+have\s+required\s+property\b
        | \brequired\s+(argument|parameter|field)s?\b.{0,40}\b(missing|not\s+(found|provided|given))\b
        ";

/// One of the not-ready statements' patterns, from its `(?x)` source.
fn not_ready_pattern(source: &str) -> regex::Regex {
    regex::Regex::new(&format!("(?x){source}"))
        .unwrap_or_else(|e| panic!("the not-ready pattern: {e}"))
}

static SUBJECT_NOT_READY: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| not_ready_pattern(&subject_not_ready_source()));

static NOT_IN_STATE: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| not_ready_pattern(&not_in_state_source()));

/// A text's leading run of subject characters.
static SUBJECT_CHARACTERS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(&format!("^{SUBJECT_CHARACTER}*"))
        .unwrap_or_else(|e| panic!("the subject pattern: {e}"))
});

static STILL_NOT_READY_OR_MISSING: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| not_ready_pattern(STILL_NOT_READY_OR_MISSING_SOURCE));

/// Longest subject before a led "not loaded".
const LED_SUBJECT: usize = 60;

/// A text led by a short subject (at most [`LED_SUBJECT`] characters of words, quotes, dots,
/// spaces, dashes, slashes and colons) and "not loaded" / "not yet initialized": the text up
/// to the end of the statement, where the earliest such statement ends.
fn led_by_not_ready(text: &str) -> Option<&str> {
    let subject = SUBJECT_CHARACTERS.find(text)?.as_str();
    let subject_end = subject
        .char_indices()
        .nth(LED_SUBJECT)
        .map_or(subject.len(), |(at, _)| at);
    // The earliest statement: where it starts, the subject before it is all the subject
    // characters (a later start has more of them, or a character of another kind).
    let statement = NOT_IN_STATE.find(text)?;
    (statement.start() <= subject_end).then(|| &text[..statement.end()])
}

/// Statements that the object asked about is not ready to be used, or that an argument is
/// missing, in the forms frameworks and servers write them: a subject that "is not indexed
/// yet", "has not been loaded", "is still being indexed"; a text led by a short subject and
/// "not loaded" / "not initialized" (no parenthesis before it: "Loaded demo (3 files not
/// loaded)" is a success; [`led_by_not_ready`]); "run index_repository first"; pydantic's
/// "1 validation error for …" and "Field required", the Python SDK's "'query' is a required
/// property", ajv's "must have required property".
///
/// One pattern would say it all, the led statement as `^[\w'`.\ \-/:]{0,60}?\bnot\s+…`, but
/// its sixty copies of the Unicode word class cost 20 ms to compile, on the path of a run's
/// first call: the led statement is found by [`led_by_not_ready`] instead, the others by
/// two patterns, and the earliest of the three is taken, as the one pattern would take it.
///
/// The first such statement of `text`: the earliest to start, where two start together the
/// one listed first.
fn not_ready_or_missing(text: &str) -> Option<&str> {
    let found = [
        SUBJECT_NOT_READY
            .find(text)
            .map(|m| (m.start(), m.as_str())),
        led_by_not_ready(text).map(|s| (0, s)),
        STILL_NOT_READY_OR_MISSING
            .find(text)
            .map(|m| (m.start(), m.as_str())),
    ];
    // `min_by_key` keeps the first of equal starts.
    found
        .into_iter()
        .flatten()
        .min_by_key(|(start, _)| *start)
        .map(|(_, statement)| statement)
}

/// How far into a longer text a not-ready or missing-argument statement still says the
/// result failed.
const LEAD: usize = 160;

/// Phrases that say no error happened ("0 errors", "no errors found").
const ALL_CLEAR: [&str; 6] = [
    "no error",
    "0 error",
    "without error",
    "errors: 0",
    "errors: none",
    "success",
];

/// The longest result judged by the phrases it contains rather than by how it starts.
const SHORT: usize = 200;

/// Why a result without `isError` looks like a failure, if it does.
pub fn error_like(result: &Map<String, Value>) -> Option<String> {
    if let Some(Value::Object(structured)) = result.get("structuredContent") {
        if let Some(member) = error_member(structured) {
            return Some(format!("its structuredContent's main member is `{member}`"));
        }
        if let Some(status) = failed_status(structured) {
            return Some(format!("its structuredContent says `{status}`"));
        }
        if batch_failed(structured) {
            return Some(ALL_ITEMS_FAILED.into());
        }
    }
    let texts: Vec<&str> = match result.get("content") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|i| i.get("text").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    };
    let first = texts.first()?.trim();
    match serde_json::from_str::<Value>(first) {
        Ok(Value::Object(json)) => {
            return error_member(&json)
                .map(|m| format!("its text is a JSON object whose main member is `{m}`"))
                .or_else(|| {
                    failed_status(&json)
                        .map(|s| format!("its text is a JSON object that says `{s}`"))
                })
                .or_else(|| batch_failed(&json).then(|| ALL_ITEMS_FAILED.into()));
        }
        Ok(Value::Array(items)) if all_items_failed(&items) => {
            return Some(ALL_ITEMS_FAILED.into());
        }
        _ => {}
    }
    text_failure(first).or_else(|| {
        validation_issues(first)
            .then(|| "its text carries a validator's list of issues (code, path)".to_string())
    })
}

/// `error` or `errors` when it is what the object is about: set to something, beside at most
/// one other member or a `success`/`ok` that is false.
fn error_member(object: &Map<String, Value>) -> Option<&'static str> {
    let set = |v: &Value| match v {
        Value::Null | Value::Bool(false) => false,
        Value::String(s) => !s.trim().is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => true,
    };
    let member = ["error", "errors"]
        .into_iter()
        .find(|k| object.get(*k).is_some_and(set))?;
    let flagged_failed = ["success", "ok"]
        .iter()
        .any(|k| object.get(*k) == Some(&Value::Bool(false)));
    (object.len() <= 2 || flagged_failed).then_some(member)
}

/// Why a batch's answer is a failure.
const ALL_ITEMS_FAILED: &str = "every item of its list of results says it failed";

/// A batch tool's answer whose items all failed: `[{"path": "a", "success": false, "error":
/// "…"}]`, or such a list under `result`, `results` or `items` with nothing beside it that
/// says the call worked, or items keyed by what they were about (`{"/w/a.txt": {"result":
/// "error", "reason": "Hash mismatch"}}`, a text editor's).
fn batch_failed(object: &Map<String, Value>) -> bool {
    let said_ok = ["success", "ok"]
        .iter()
        .any(|k| object.get(*k) == Some(&Value::Bool(true)));
    let keyed: Vec<Value> = object.values().take(1001).cloned().collect();
    !said_ok
        && (["result", "results", "items"].iter().any(|k| {
            object
                .get(*k)
                .and_then(Value::as_array)
                .is_some_and(|items| all_items_failed(items))
        }) || all_items_failed(&keyed))
}

/// Whether every item of a non-empty list is an object that reports its own failure:
/// `success` or `ok` false, or a `status` (or `result`) of error or failed with an error
/// message (`error`, `reason`) beside it.
/// Data that merely has such fields (log entries with an `error`, jobs whose `status` is
/// failed) is no report: it carries no flag and no message of a failure of this call.
fn all_items_failed(items: &[Value]) -> bool {
    let failed = |item: &Value| {
        let Some(o) = item.as_object() else {
            return false;
        };
        let flag = |k: &str| o.get(k).and_then(Value::as_bool);
        let message = ["error", "reason"].iter().any(|k| {
            o.get(*k)
                .and_then(Value::as_str)
                .is_some_and(|s| !s.trim().is_empty())
        });
        let status_failed = ["status", "result"].iter().any(|k| {
            o.get(*k).and_then(Value::as_str).is_some_and(|s| {
                matches!(s.to_lowercase().as_str(), "error" | "failed" | "failure")
            })
        });
        flag("success") == Some(false) || flag("ok") == Some(false) || (status_failed && message)
    };
    !items.is_empty() && items.len() <= 1000 && items.iter().all(failed)
}

/// A short status object that says it failed: `success` or `ok` false, or a `status` of
/// `error`, `failed`, `failure` or `fail`, beside at most two other members that a status
/// report carries (a message, a code, details), not data (`{"id": 3, "status": "failed"}`
/// is a job that failed, answered by a call that worked).
fn failed_status(object: &Map<String, Value>) -> Option<String> {
    const REPORT_MEMBERS: &[&str] = &[
        "success", "ok", "status", "message", "msg", "error", "reason", "detail", "details",
        "code", "hint", "output",
    ];
    if object.len() > 3 || object.keys().any(|k| !REPORT_MEMBERS.contains(&k.as_str())) {
        return None;
    }
    if let Some(k) = ["success", "ok"]
        .into_iter()
        .find(|k| object.get(*k) == Some(&Value::Bool(false)))
    {
        return Some(format!("{k}: false"));
    }
    let status = object.get("status")?.as_str()?.to_lowercase();
    matches!(status.as_str(), "error" | "failed" | "failure" | "fail")
        .then(|| format!("status: {status}"))
}

/// Why a text says it failed: led by a failure, or short and naming one.
fn text_failure(text: &str) -> Option<String> {
    let lowered = text.to_lowercase();
    let start = lowered.trim_start_matches(|c: char| !c.is_alphanumeric());
    // A batch's summary that counts no success and some failures ("Succeeded: 0  Failed: 1").
    static NONE_SUCCEEDED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\b(?:succeeded|successful|successes|success|ok)\s*[:=]\s*0(?:[^.\d]|$)")
            .expect("static regex")
    });
    static SOME_FAILED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\b(?:failed|failures|errors)\s*[:=]\s*[1-9]").expect("static regex")
    });
    // What a test runner or a CI tool reports ("2 tests failed", "Jobs: ok: 0, failed: 2")
    // is its result.
    let reported = [
        "test",
        "check",
        "assertion",
        "build",
        "job",
        "step",
        "deployment",
    ]
    .iter()
    .any(|w| {
        start
            .split(|c: char| !c.is_alphanumeric())
            .filter(|x| !x.is_empty())
            .take(3)
            .any(|x| x.trim_end_matches('s') == *w)
    });
    let summary: String = start.chars().take(400).collect();
    if !reported && NONE_SUCCEEDED.is_match(&summary) && SOME_FAILED.is_match(&summary) {
        return Some("its summary counts no success and some failures".into());
    }
    if ALL_CLEAR.iter().any(|c| start.contains(c)) {
        return None;
    }
    let led_by_error = start == "error"
        || [
            "error:",
            "error!",
            "error -",
            "error occurred",
            "error while",
            "error executing",
        ]
        .iter()
        .any(|p| start.starts_with(p));
    if led_by_error {
        return Some("its text begins with \"Error\"".into());
    }
    // A Markdown heading that is nothing but "Error" ("## System Error", "## 錯誤").
    if let Some(heading) = text
        .lines()
        .filter(|l| l.trim_start().starts_with('#'))
        .take(3)
        .find(|l| is_error_heading(l))
    {
        return Some(format!("its heading \"{}\" says it failed", heading.trim()));
    }
    if let Some(leader) = LEADERS.iter().find(|l| start.starts_with(*l)) {
        return Some(format!("its text begins with \"{}\"", leader.trim_end()));
    }
    // "❌ Compression failed: Input path not found: x", "Listing failed: …": a cross mark
    // before a first line that says what failed (not a checklist of marks), or one or two
    // words and "failed" leading the text.
    let trimmed = text.trim_start();
    let first_line = start.lines().next().unwrap_or("");
    if trimmed.starts_with(['❌', '✖', '✗', '⛔'])
        && !text.contains(['✅', '✔'])
        && [
            "fail",
            "error",
            "not found",
            "invalid",
            "cannot",
            "unsupported",
        ]
        .iter()
        .any(|w| first_line.contains(w))
    {
        return Some("its text begins with a cross mark".into());
    }
    static NAMED_FAILURE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^[a-z]+(?: [a-z]+)? failed(?:[:!]| with\b| because\b)")
            .expect("static regex")
    });
    if NAMED_FAILURE.is_match(start) && !reported {
        return Some("its text begins with what failed".into());
    }
    if start.chars().count() <= SHORT {
        if let Some(phrase) = FAILURES.iter().find(|p| start.contains(*p)) {
            return Some(format!("its short text says \"{phrase}\""));
        }
    }
    let lead: String = start.chars().take(LEAD).collect();
    let judged = if start.chars().count() <= SHORT {
        start
    } else {
        lead.as_str()
    };
    if let Some(statement) = not_ready_or_missing(judged) {
        return Some(format!(
            "its text says \"{}\" (not ready, or an argument is missing)",
            statement.trim()
        ));
    }
    None
}

/// Whether the text carries a validator's issue list (zod, ajv): JSON objects, each with a
/// `code` or `keyword` and a `path` or `instancePath`.
fn validation_issues(text: &str) -> bool {
    let Some(start) = text.find('[') else {
        return false;
    };
    let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    let Some(Ok(Value::Array(items))) = stream.next() else {
        return false;
    };
    !items.is_empty()
        && items.iter().all(|i| {
            (i.get("code").is_some() || i.get("keyword").is_some())
                && (i.get("path").is_some() || i.get("instancePath").is_some())
        })
}

/// `# Error`, `## System Error`, `### 錯誤`: a heading that says only that it failed.
fn is_error_heading(line: &str) -> bool {
    let title = line
        .trim()
        .trim_start_matches('#')
        .trim()
        .trim_end_matches([':', '!'])
        .to_lowercase();
    let title = title.strip_prefix("system ").unwrap_or(&title);
    let title = title
        .strip_prefix("系統")
        .or_else(|| title.strip_prefix("系统"))
        .unwrap_or(title);
    matches!(
        title,
        "error" | "errors" | "failure" | "failed" | "錯誤" | "错误" | "失敗" | "失败"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn judge(result: Value) -> Option<String> {
        error_like(result.as_object().expect("object"))
    }

    fn text(t: &str) -> Value {
        json!({"content": [{"type": "text", "text": t}]})
    }

    /// The not-ready statements as one pattern, the led statement a branch of it as it was
    /// before it was found apart: what [`not_ready_or_missing`] must find exactly.
    fn as_one_pattern() -> regex::Regex {
        not_ready_pattern(&format!(
            "(?:{}) | ^{SUBJECT_CHARACTER}{{0,60}}?(?:{}) | (?:{STILL_NOT_READY_OR_MISSING_SOURCE})",
            subject_not_ready_source(),
            not_in_state_source(),
        ))
    }

    /// Pieces the statements are made of, and what may lead or break them.
    const PIECES: [&str; 43] = [
        "is",
        "has",
        "not",
        "n't",
        "yet",
        "been",
        "loaded",
        "ready",
        "open",
        "opened",
        "set up",
        "available yet",
        "still",
        "being",
        "indexing",
        "call",
        "run",
        "first",
        "no",
        "active",
        "session",
        "1",
        "validation",
        "errors",
        "for",
        "field",
        "required",
        "property",
        "argument",
        "missing",
        "found",
        "x",
        "Project",
        "é",
        "—",
        "(",
        ":",
        "'",
        "-",
        "\n",
        "repository_index_ab",
        "loaded not loaded",
        "the-vault/notes:",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config {
            cases: 4000,
            failure_persistence: None,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed_0037),
            ..proptest::test_runner::Config::default()
        })]

        #[test]
        fn the_statements_found_apart_are_those_the_one_pattern_found(
            pieces in proptest::collection::vec(
                (0..PIECES.len(), proptest::sample::select(vec!["", " ", "  ", "x"])),
                0..24,
            )
        ) {
            let text: String = pieces
                .iter()
                .map(|(i, gap)| format!("{}{gap}", PIECES[*i]))
                .collect();
            static ONE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(as_one_pattern);
            proptest::prop_assert_eq!(
                not_ready_or_missing(&text),
                ONE.find(&text).map(|m| m.as_str()),
                "{:?}", text
            );
        }
    }

    #[test]
    fn a_led_statement_is_found_within_sixty_characters_of_subject_only() {
        let subject = "a".repeat(55);
        for (text, found) in [
            (format!("{subject} not loaded"), true),
            (format!("{subject}aaaaa not loaded"), false),
            (format!("{subject}aaaa not loaded"), true),
            ("Loaded demo (3 files not loaded)".to_string(), false),
            ("Vault 'notes' not yet opened. Open it.".to_string(), true),
            ("Projet café: not loaded".to_string(), true),
            ("Project — not loaded".to_string(), false),
            // Characters, not bytes, count toward the subject's sixty (the space too).
            (format!("{} not loaded", "é".repeat(59)), true),
            (format!("{} not loaded", "日".repeat(60)), false),
            // Led and later statements starting together: the led one, listed first.
            ("field required not loaded".to_string(), true),
            ("is not ready".to_string(), true),
        ] {
            assert_eq!(not_ready_or_missing(&text).is_some(), found, "{text:?}");
            assert_eq!(
                not_ready_or_missing(&text),
                as_one_pattern().find(&text).map(|m| m.as_str()),
                "{text:?}"
            );
        }
    }

    #[test]
    fn failures_without_is_error_are_recognised() {
        for failed in [
            "Error: ENOENT: no such file or directory, open '/w/x'",
            "❌ Error: vault not found",
            "Failed to open project: no working directory set",
            "Note 'x.md' not found",
            "File /w/missing.txt does not exist",
            "Unable to connect to the database",
            "Permission denied: /etc/shadow",
            "Traceback (most recent call last):\n  File \"x.py\"",
            "{\"error\": \"unknown sheet 'Sheet9'\"}",
            "{\"success\": false, \"error\": {\"code\": 3}, \"data\": null, \"hint\": \"x\"}",
            // Status objects: a command server's refusal, a task server's.
            "{\"success\": false, \"message\": \"Invalid command type\"}",
            "{\"status\": \"error\", \"message\": \"Task not found\"}",
            "# Task Update Result\n\n## System Error\n\nTask with ID `x` could not be found after a long explanation that goes on and on and on and on and on and on and on and on and on and on and on and on and on and on and on and on and on and on.",
            "## 系統錯誤\n\n找不到ID為 `x` 的任務。",
            "找不到ID為 `x` 的任務。請確認任務ID是否正確。",
            "没有打开的文档，请先打开文档",
            "工具 'x' 未找到",
            "tasksRaw 參數格式錯誤，請確保格式正確",
            // An archive server's answers.
            "❌ Compression failed: Input path not found: x",
            "Preview failed: Unsupported archive format",
            "Extraction completed\n====\nArchives processed: 1\nSucceeded: 0\nFailed: 1\nFiles extracted: 0",
            "Batch done. Successful: 0, errors: 2",
            // A batch tool whose every item failed (a file server's, and under `results`).
            "[ { \"path\": \"a.txt\", \"success\": false, \"error\": \"Path exists but is not a directory\" } ]",
            "{\"results\": [{\"path\": \"a\", \"status\": \"error\", \"error\": \"Operation not permitted\"}]}",
            // A text editor's answer, keyed by the file it was about (mcp-text-editor).
            "{\"/w/draft.txt\": {\"result\": \"error\", \"reason\": \"Hash mismatch - file has been modified\", \"file_hash\": null, \"content\": \"Project plan draft\\n\"}}",
            // A validator's issue list is still read as one.
            "[{\"code\": \"invalid_type\", \"expected\": \"string\", \"received\": \"number\", \"path\": [\"name\"], \"message\": \"Expected string, received number and a long explanation after it so that the text is longer than two hundred characters in all, as zod's are\"}]",
            "tasks format: [ { \"received\": \"x\", \"code\": \"invalid_enum_value\", \"options\": [\"A\"], \"path\": [0, \"type\"], \"message\": \"Invalid enum value. Expected 'A', received 'x' and a long explanation after it that makes this text longer than two hundred characters in all\" } ]",
        ] {
            assert!(judge(text(failed)).is_some(), "{failed}");
        }
        assert!(
            judge(json!({"content": [], "structuredContent": {"errors": ["bad id"]}})).is_some()
        );
    }

    #[test]
    fn statements_that_the_object_is_not_ready_or_an_argument_missing_are_failures() {
        for failed in [
            // Code-search and knowledge servers.
            "Repository 'demo' is not indexed yet. Run index_repository first.",
            "The index has not been built yet; call build_index first.",
            "Knowledge graph not loaded",
            "Collection 'docs' is still being indexed, try again later",
            "Vault is not initialized. Please run init_vault.",
            "No active session. Call start_session first.",
            "Project isn't loaded yet",
            "Database not connected: use connect first",
            "Please run `scan` first to analyse the project before asking about it.",
            // Validation: pydantic (FastMCP), the Python SDK's jsonschema check, ajv.
            "1 validation error for search_docsArguments\nquery\n  Field required [type=missing, input_value={}, input_type=dict]",
            "Input validation error: 'query' is a required property",
            "data must have required property 'path'",
            "Required argument \"name\" is missing",
        ] {
            assert!(judge(text(failed)).is_some(), "{failed}");
        }
        // Past the lead of a long text, such words are the document's, not a failure.
        let long = format!(
            "{} The guide explains what to do when a repository is not indexed yet.",
            "Indexing guide: how repositories are indexed and searched. ".repeat(4)
        );
        for fine in [
            "Loaded project demo (3 files not loaded: too large)",
            "Indexed 42 files; the index is ready.",
            "Connected to the database",
            "Status: ready",
            long.as_str(),
        ] {
            assert_eq!(judge(text(fine)), None, "{fine}");
        }
    }

    #[test]
    fn ordinary_results_are_not_failures() {
        for fine in [
            "hintcheck sample notes\nsecond line",
            "Error handling in Rust uses Result; see chapter 9 for the details of how errors propagate through a program and how the question mark operator works.",
            "Search finished: 0 errors, 3 warnings",
            "No errors found",
            "Created note 'a.md'",
            "{\"result\": [1, 2], \"error\": null}",
            "{\"items\": [], \"errors\": [], \"total\": 0}",
            "{\"status\": \"ok\", \"message\": \"saved\"}",
            "{\"success\": true}",
            // Data that happens to hold a false flag is not a status report.
            "{\"name\": \"a\", \"ok\": false, \"size\": 3, \"kind\": \"file\"}",
            "{\"id\": \"t1\", \"status\": \"failed\", \"name\": \"build\"}",
            "{\"status\": \"failed\", \"passed\": 3, \"failed\": 1}",
            "[]",
            "",
            "Successfully wrote to /w/new.txt",
            "# Error handling guide\n\nHow this project reports failures.",
            // A batch where one item worked, and a report that counts failures.
            "[{\"path\": \"a\", \"success\": true}, {\"path\": \"b\", \"success\": false}]",
            "{\"success\": true, \"results\": [{\"path\": \"a\", \"error\": \"exists\"}]}",
            "Build finished: 3 tests failed: see the log",
            "Tests failed: 2 of 10",
            "Jobs: ok: 0, failed: 2",
            "Success: 0.97, failed: 3",
            "❌ lint\n✅ build",
            "[{\"timestamp\": \"t\", \"error\": \"Timeout\"}, {\"timestamp\": \"u\", \"error\": \"Reset\"}]",
            "[{\"id\": 1, \"status\": \"failed\", \"name\": \"build\"}]",
            "Extraction completed: succeeded: 2, failed: 1",
            "Successful: 3, errors: 0",
            // Items keyed by name: one worked, or failed jobs without a failure of the call.
            "{\"/w/a.txt\": {\"result\": \"ok\"}, \"/w/b.txt\": {\"result\": \"error\", \"reason\": \"gone\"}}",
            "{\"build\": {\"status\": \"failed\", \"duration\": 3}}",
        ] {
            assert_eq!(judge(text(fine)), None, "{fine}");
        }
        assert_eq!(
            judge(json!({"content": [{"type": "image", "data": "x"}]})),
            None
        );
    }
}
