//! The pre-flight check before a launch: the account the server runs as in the sandbox must be
//! able to reach what the command needs, the program, the interpreter its `#!` line names
//! (through `env` too) and the script an interpreter is given. Every directory on the way must
//! be searchable and the file readable (or executable) by that uid, judged by the mode bits as
//! the kernel would (the sandbox drops the capabilities that override them). A failure names
//! the first directory or file in the way and the fixes, before anything starts, instead of
//! the runtime's own "Cannot find module" from inside the sandbox.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Whose access is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Account {
    /// hintcheck's own user (the server keeps it in a user namespace): the kernel decides.
    Current,
    /// The uid and gid the server gets in the sandbox (hintcheck runs as root).
    Ids(u32, u32),
}

/// What the server's account cannot reach.
#[derive(Debug, thiserror::Error)]
#[error(
    "{what} {} is out of reach of {}: {blocker}; {fixes}",
    path.display(),
    account_words(*account)
)]
pub struct Unreachable {
    /// What the path is to the command (`the program`, `the interpreter named by …`).
    pub what: String,
    /// The path as the command names it.
    pub path: PathBuf,
    /// Who runs the server.
    pub account: Account,
    /// The directory or file in the way, with its mode and owner.
    pub blocker: String,
    /// What the user can do.
    pub fixes: String,
}

fn account_words(account: Account) -> String {
    match account {
        Account::Current => "this user".into(),
        Account::Ids(uid, _) => format!("uid {uid}, which the server runs as in the sandbox"),
    }
}

/// Interpreters whose first operand is a script or module file.
const INTERPRETERS: [&str; 12] = [
    "node", "nodejs", "python", "python3", "bash", "sh", "dash", "ruby", "perl", "deno", "bun",
    "php",
];

/// Options of those interpreters after which no script file follows (code or a module name).
const NO_SCRIPT_AFTER: [&str; 6] = ["-m", "-c", "-e", "--eval", "-p", "--print"];

fn is_interpreter(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    // python3.12, node20: the family name with a version after it.
    let family = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    INTERPRETERS.contains(&name) || INTERPRETERS.contains(&family)
}

/// The words of the `#!` line of `program`, the first an absolute path (none otherwise).
pub fn shebang_words(program: &Path) -> Vec<String> {
    let mut head = [0u8; 256];
    let Ok(mut file) = std::fs::File::open(program) else {
        return Vec::new();
    };
    let Ok(n) = std::io::Read::read(&mut file, &mut head) else {
        return Vec::new();
    };
    let Some(line) = head[..n].strip_prefix(b"#!") else {
        return Vec::new();
    };
    let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
    let words: Vec<String> = String::from_utf8_lossy(line)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    if words.first().is_some_and(|w| w.starts_with('/')) {
        words
    } else {
        Vec::new()
    }
}

/// The `#!` line of `program`: the interpreter and, for `/usr/bin/env NAME`, NAME resolved
/// through `path_var`.
pub fn shebang_interpreters(program: &Path, path_var: Option<&str>) -> Vec<PathBuf> {
    let words = shebang_words(program);
    let Some(first) = words.first() else {
        return Vec::new();
    };
    let mut out = vec![PathBuf::from(first)];
    if Path::new(first).file_name().is_some_and(|n| n == "env") {
        let named = words[1..]
            .iter()
            .find(|w| !w.starts_with('-') && !w.contains('='));
        if let Some(found) = named.and_then(|n| super::process::resolve_program(n, path_var).ok()) {
            out.push(found);
        }
    }
    out
}

/// Permission bits wanted.
const READ: u32 = 4;
const EXEC: u32 = 1;

fn allowed(path: &Path, account: Account, want: u32) -> Result<bool, std::io::Error> {
    match account {
        Account::Current => {
            let mut mode = rustix::fs::Access::empty();
            if want & READ != 0 {
                mode |= rustix::fs::Access::READ_OK;
            }
            if want & EXEC != 0 {
                mode |= rustix::fs::Access::EXEC_OK;
            }
            Ok(rustix::fs::access(path, mode).is_ok())
        }
        Account::Ids(uid, gid) => {
            let meta = std::fs::metadata(path)?;
            let mode = meta.mode();
            let bits = if meta.uid() == uid {
                mode >> 6
            } else if meta.gid() == gid {
                mode >> 3
            } else {
                mode
            } & 7;
            Ok(bits & want == want)
        }
    }
}

fn describe(path: &Path) -> String {
    match std::fs::metadata(path) {
        Ok(m) => format!("mode {:04o}, owner uid {}", m.mode() & 0o7777, m.uid()),
        Err(e) => e.to_string(),
    }
}

/// What the sandbox shows of the host's tree: the private places it covers with a tmpfs
/// (traversable where something in them is shown) and what it shows in them, at the same
/// paths.
#[derive(Debug, Clone, Copy, Default)]
pub struct View<'a> {
    /// The covered places.
    pub hidden: &'a [PathBuf],
    /// What is shown in them.
    pub exposed: &'a [PathBuf],
}

/// How the sandbox shows a path.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// As on the host, with its own mode.
    Real,
    /// A directory of the covering tmpfs, on the way to something shown: traversable.
    Traversable,
    /// Not at all, inside the covered place.
    Hidden(PathBuf),
}

impl View<'_> {
    fn seen(&self, p: &Path) -> Seen {
        let Some(place) = self.hidden.iter().find(|h| p.starts_with(h)) else {
            return Seen::Real;
        };
        if self.exposed.iter().any(|e| p.starts_with(e)) {
            Seen::Real
        } else if p == place.as_path() || self.exposed.iter().any(|e| e.starts_with(p)) {
            Seen::Traversable
        } else {
            Seen::Hidden(place.clone())
        }
    }
}

/// The first directory on the way to `path` that `account` cannot search in the sandbox, or
/// `path` itself when it lacks `want` or is hidden; `None` when all is in reach (or `path`
/// does not exist: the launch reports that in its own words).
fn blocker(path: &Path, account: Account, want: u32, view: View<'_>) -> Option<String> {
    let mut checked: Vec<PathBuf> = vec![path.to_path_buf()];
    if let Ok(real) = std::fs::canonicalize(path) {
        if real != path {
            checked.push(real);
        }
    }
    for p in &checked {
        // Every directory on the way, then the path itself, as the sandbox shows them.
        let mut step = PathBuf::new();
        for part in p.components() {
            step.push(part);
            match view.seen(&step) {
                Seen::Traversable => continue,
                Seen::Hidden(place) => {
                    return Some(format!(
                        "it lies in {}, which the sandbox hides, and is not shown there",
                        place.display()
                    ));
                }
                Seen::Real => {}
            }
            let last = step == *p;
            if allowed(&step, account, if last { want } else { EXEC }).unwrap_or(true) {
                continue;
            }
            return Some(if !last {
                format!(
                    "the directory {} ({}) cannot be entered",
                    step.display(),
                    describe(&step)
                )
            } else if want & READ != 0 {
                format!("{} ({}) cannot be read", p.display(), describe(p))
            } else {
                format!("{} ({}) cannot be run", p.display(), describe(p))
            });
        }
    }
    None
}

fn fixes(path: &Path, account: Account, hidden: &[PathBuf]) -> String {
    let mut fixes = Vec::new();
    if let Account::Ids(uid, _) = account {
        if uid != 0 {
            fixes.push(
                "pass --run-as 0 to keep root's file ownership in the sandbox (writes stay confined and capabilities dropped)"
                    .to_string(),
            );
        }
    }
    fixes.push(
        "install the server where every user can read it (/opt, /usr/local, or the cache hintcheck's [setup] uses)"
            .into(),
    );
    if let Some(place) = hidden.iter().find(|h| path.starts_with(h)) {
        fixes.push(format!(
            "pass --expose DIR for what else it needs under {}, which the sandbox hides",
            place.display()
        ));
    } else {
        fixes.push("or make the directory readable (chmod o+rx DIR)".into());
    }
    format!("fixes: {}", fixes.join("; "))
}

/// Checks that `account` can reach, as the sandbox shows the tree (`view`), what `command`
/// (its program already resolved to `program`) needs. `path_var` is the server's PATH.
pub fn check(
    program: &Path,
    command: &[String],
    account: Account,
    path_var: Option<&str>,
    view: View<'_>,
) -> Result<(), Box<Unreachable>> {
    let hidden = view.hidden;
    let fail = |what: String, path: &Path, blocker: String| {
        Box::new(Unreachable {
            what,
            path: path.to_path_buf(),
            account,
            blocker,
            fixes: fixes(path, account, hidden),
        })
    };
    let interpreters = shebang_interpreters(program, path_var);
    let want = if interpreters.is_empty() {
        EXEC
    } else {
        EXEC | READ
    };
    if let Some(b) = blocker(program, account, want, view) {
        return Err(fail("the program".into(), program, b));
    }
    for i in &interpreters {
        if let Some(b) = blocker(i, account, EXEC, view) {
            return Err(fail(
                format!(
                    "the interpreter named by the #! line of {},",
                    program.display()
                ),
                i,
                b,
            ));
        }
    }
    let runs_scripts = is_interpreter(program) || interpreters.iter().any(|i| is_interpreter(i));
    if runs_scripts {
        let script = command
            .iter()
            .skip(1)
            .take_while(|a| !NO_SCRIPT_AFTER.contains(&a.as_str()))
            .find(|a| !a.starts_with('-'));
        if let Some(script) = script
            .map(Path::new)
            .filter(|p| p.is_absolute() && p.exists())
        {
            if let Some(b) = blocker(script, account, READ, view) {
                return Err(fail(
                    format!("the script {} runs,", program.display()),
                    script,
                    b,
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn a_script_under_a_closed_directory_is_named_with_the_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let closed = dir.path().join("closed");
        std::fs::create_dir(&closed).expect("mkdir");
        let script = closed.join("server.js");
        std::fs::write(&script, "console.log(1)\n").expect("write");
        chmod(dir.path(), 0o755);
        chmod(&closed, 0o700);
        let me = rustix::process::getuid().as_raw();
        // Another account than the directory's owner, in no group of it.
        let other = Account::Ids(me + 4321, 4321);
        let node = PathBuf::from("/usr/bin/node");
        let command = vec![
            "node".to_string(),
            "--no-warnings".into(),
            script.display().to_string(),
        ];
        let err = check(&node, &command, other, None, View::default()).expect_err("closed");
        let text = err.to_string();
        assert!(text.contains(&closed.display().to_string()), "{text}");
        assert!(text.contains("mode 0700"), "{text}");
        assert!(text.contains("--run-as 0"), "{text}");
        // Its owner reaches it; a module (-m) or code (-e) is not a script path.
        assert!(check(&node, &command, Account::Ids(me, 0), None, View::default()).is_ok());
        let code = vec!["node".into(), "-e".into(), script.display().to_string()];
        assert!(check(&node, &code, other, None, View::default()).is_ok());
        chmod(&closed, 0o755);
        assert!(check(&node, &command, other, None, View::default()).is_ok());
    }

    #[test]
    fn covered_places_are_traversable_to_what_is_shown_and_hide_the_rest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let place = dir.path().join("home");
        let shown = place.join("dev/server");
        std::fs::create_dir_all(&shown).expect("mkdir");
        let script = shown.join("main.py");
        std::fs::write(&script, "").expect("write");
        let secret = place.join("dev/other.py");
        std::fs::write(&secret, "").expect("write");
        chmod(&script, 0o644);
        chmod(&shown, 0o755);
        chmod(&place.join("dev"), 0o700);
        chmod(&place, 0o700);
        let hidden = [place.clone()];
        let exposed = [shown.clone()];
        let view = View {
            hidden: &hidden,
            exposed: &exposed,
        };
        let me = rustix::process::getuid().as_raw();
        let other = Account::Ids(me + 4321, 4321);
        let python = PathBuf::from("/usr/bin/python3");
        let run = |p: &Path| vec!["python3".to_string(), p.display().to_string()];
        // The closed home directories are the tmpfs's own, traversable, in the sandbox.
        assert!(check(&python, &run(&script), other, None, view).is_ok());
        let err = check(&python, &run(&secret), other, None, view).expect_err("hidden");
        assert!(err.to_string().contains("which the sandbox hides"), "{err}");
        assert!(err.to_string().contains("--expose"), "{err}");
    }

    #[test]
    fn env_shebangs_name_the_interpreter_they_find() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("mkdir");
        let fake = bin.join("fakenode");
        std::fs::write(&fake, "").expect("write");
        chmod(&fake, 0o700);
        let script = dir.path().join("server");
        std::fs::write(&script, "#!/usr/bin/env -S fakenode --flag\n").expect("write");
        chmod(&script, 0o755);
        let path = bin.display().to_string();
        let found = shebang_interpreters(&script, Some(&path));
        assert_eq!(found, [PathBuf::from("/usr/bin/env"), fake.clone()]);
        let me = rustix::process::getuid().as_raw();
        let err = check(
            &script,
            &[],
            Account::Ids(me + 4321, 4321),
            Some(&path),
            View::default(),
        )
        .expect_err("interpreter closed");
        assert!(
            err.to_string()
                .contains("the interpreter named by the #! line"),
            "{err}"
        );
        assert!(err.to_string().contains("cannot be run"), "{err}");
        assert!(is_interpreter(Path::new("/usr/bin/python3.12")));
        assert!(!is_interpreter(Path::new("/usr/bin/mcp-server")));
    }
}
