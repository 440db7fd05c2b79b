//! The demo from anywhere: the released binary alone (copied into an empty directory) runs
//! `hintcheck demo`, and a checkout's `verify --scenario scenarios/demo` works, from /tmp,
//! /var/tmp and a home directory (places the sandbox covers with its own tmpfs or hides), as
//! root and as an unprivileged user.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::sandbox::{As, is_root, prefix};
use crate::util::{Outcome, capture, fake_server, hintcheck_bin, repo};

/// The demo's lies: every contradicted hint, as (tool, hint).
const DEMO_LIES: [(&str, &str); 7] = [
    ("get_status", "readOnlyHint"),
    ("get_status", "idempotentHint"),
    ("peek_cache", "readOnlyHint"),
    ("tidy_notes", "readOnlyHint"),
    ("add_item", "idempotentHint"),
    ("reset_items", "destructiveHint"),
    ("archive_note", "destructiveHint"),
];

/// A directory of its own under `place`, readable by every user, removed when dropped.
struct Place {
    dir: PathBuf,
}

impl Place {
    fn under(place: &Path) -> Place {
        let dir = tempfile::Builder::new()
            .prefix("hintcheck-place-")
            .tempdir_in(place)
            .expect("mkdir")
            .keep();
        open_up(&dir);
        Place { dir }
    }

    /// Copies `from` to `rel` inside, every directory on the way open to all.
    fn put(&self, from: &Path, rel: &str, mode: u32) -> PathBuf {
        let to = self.dir.join(rel);
        let mut d = to.parent().expect("parent").to_path_buf();
        std::fs::create_dir_all(&d).expect("mkdir");
        while d != self.dir {
            open_up(&d);
            d = d.parent().expect("parent").to_path_buf();
        }
        std::fs::copy(from, &to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode)).expect("chmod");
        to
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn open_up(dir: &Path) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// The places a user may keep hintcheck in that the sandbox covers or hides: /tmp, /var/tmp,
/// and a home directory (root's own as root; one under /home for the unprivileged user, who
/// cannot enter /root; the user's own when the tests do not run as root).
fn places(who: As) -> Vec<PathBuf> {
    let home = match (is_root(), who) {
        (true, As::Root) => PathBuf::from("/root"),
        (true, As::Unprivileged) => PathBuf::from("/home"),
        (false, _) => PathBuf::from(std::env::var("HOME").expect("HOME")),
    };
    std::fs::create_dir_all(&home).expect("the home place");
    vec!["/tmp".into(), "/var/tmp".into(), home]
}

/// Runs `program args` as `who` from `cwd`, without the tests' fake server in the
/// environment (what a user's shell has).
fn run_from(who_prefix: &[String], program: &Path, args: &[&str], cwd: &Path) -> Outcome {
    let mut argv: Vec<String> = who_prefix.to_vec();
    argv.push(program.display().to_string());
    argv.extend(args.iter().map(|a| a.to_string()));
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(cwd)
        .env_remove("HINTCHECK_FAKE_SERVER")
        .env_remove("HINTCHECK_CONFIG")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env("TMPDIR", "/tmp");
    capture(cmd, Duration::from_secs(120), &format!("{argv:?}"))
}

/// The demo's report found every lie and accused no honest tool.
pub(crate) fn assert_demo_lies(o: &Outcome, place: &Path) {
    assert_eq!(
        o.code,
        1,
        "from {}: exit {}\nstdout:\n{}\nstderr:\n{}",
        place.display(),
        o.code,
        o.stdout,
        o.stderr
    );
    let r = o.json();
    let mut contradicted: Vec<(String, String)> = r["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .flat_map(|t| {
            t["verdicts"]
                .as_array()
                .expect("verdicts")
                .iter()
                .filter(|v| v["verdict"] == "contradicted")
                .map(|v| {
                    (
                        t["name"].as_str().unwrap_or_default().to_string(),
                        v["hint"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    contradicted.sort();
    let mut expected: Vec<(String, String)> = DEMO_LIES
        .iter()
        .map(|(t, h)| (t.to_string(), h.to_string()))
        .collect();
    expected.sort();
    assert_eq!(
        contradicted,
        expected,
        "from {}: the tools {:#}\nout of window {:#}",
        place.display(),
        r["tools"],
        r["out_of_window"]
    );
}

/// The files under `dir`, as paths relative to it.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else if let Ok(rel) = e.path().strip_prefix(dir) {
                out.push(rel.display().to_string());
            }
        }
    }
    out
}

/// `hintcheck demo` from a copy of the binary alone, under each place.
fn binary_alone_runs_the_demo(who: As) {
    let Some(who_prefix) = prefix(who, false) else {
        return;
    };
    for place in places(who) {
        let at = Place::under(&place);
        // Two levels deep: nothing named hintcheck-fake-server is beside it or above it.
        let program = at.put(&hintcheck_bin(), "bin/a/hintcheck", 0o755);
        let o = run_from(
            &who_prefix,
            &program,
            &["demo", "--format", "json"],
            &at.dir,
        );
        assert_demo_lies(&o, &place);
        let command = &o.json()["server"]["command"];
        assert_eq!(command[0], program.display().to_string(), "{command}");
        assert_eq!(command[1], "fake-server", "the server is the binary itself");
    }
}

/// The README's first command from a checkout under each place (the built binaries and the
/// demo scenario where a checkout keeps them), run from the checkout's root.
fn checkout_runs_the_readme_command(who: As) {
    let Some(who_prefix) = prefix(who, false) else {
        return;
    };
    let demo = repo().join("scenarios/demo");
    for place in places(who) {
        let checkout = Place::under(&place);
        let program = checkout.put(&hintcheck_bin(), "target/release/hintcheck", 0o755);
        checkout.put(
            &fake_server(),
            "target/release/hintcheck-fake-server",
            0o755,
        );
        for rel in files_under(&demo) {
            checkout.put(&demo.join(&rel), &format!("scenarios/demo/{rel}"), 0o644);
        }
        let o = run_from(
            &who_prefix,
            &program,
            &["verify", "--scenario", "scenarios/demo", "--format", "json"],
            &checkout.dir,
        );
        assert_demo_lies(&o, &place);
        let command = o.json()["server"]["command"][0].clone();
        assert!(
            command
                .as_str()
                .is_some_and(|c| c.ends_with("target/release/hintcheck-fake-server")),
            "the checkout's fake server ran: {command}"
        );
    }
}

as_root_and_unprivileged!(
    the_binary_alone_runs_the_demo_anywhere_as_root,
    the_binary_alone_runs_the_demo_anywhere_unprivileged,
    binary_alone_runs_the_demo
);

as_root_and_unprivileged!(
    a_checkout_runs_the_demo_anywhere_as_root,
    a_checkout_runs_the_demo_anywhere_unprivileged,
    checkout_runs_the_readme_command
);

/// The demo runs the server built in: a command or a scenario of the user's is refused, with
/// the way to verify it.
#[test]
fn demo_refuses_a_server_of_the_users() {
    for args in [
        &["demo", "--", "node", "server.js"][..],
        &["demo", "--scenario", "scenarios/demo"][..],
    ] {
        let o = crate::util::run(args, &[], Duration::from_secs(30));
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
        assert!(
            o.stderr.contains("hintcheck verify -- CMD"),
            "{args:?}: {}",
            o.stderr
        );
    }
}
