//! Canaries: fake credentials planted where servers and libraries look for real ones (SSH
//! keys, cloud and registry tokens, a `.env`, git credentials, environment variables), unique
//! to each run (derived from its seed), so that whoever reads or sends one can be named.
//! [`detect`] finds a canary's bytes in any common encoding inside larger data. The sandbox's
//! home is its own, so a canary never collides with the real user's secrets, and none of
//! these values is a working credential.

pub mod detect;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use detect::{Detector, Sighting};

/// Why the canaries could not be planted.
#[derive(Debug, thiserror::Error)]
pub enum CanaryError {
    /// A canary's file could not be written.
    #[error("cannot plant the canary {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// One planted secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canary {
    /// What it imitates (`aws-secret-access-key`, `github-token`, `ssh-private-key`, …).
    pub kind: &'static str,
    /// Where it was planted: a file (`~/.aws/credentials`, `$WORKSPACE/.env`) or an
    /// environment variable (`$GITHUB_TOKEN`).
    pub place: String,
    /// The secret itself (made up for this run).
    pub value: String,
}

/// The fixed beginnings of the values (each credential's own shape), which other runs'
/// canaries and real credentials share: a part of a value is only its own with enough
/// made-up bytes in it.
const FIXED_PREFIXES: [&str; 14] = [
    "eyJ0eXAiOiJKV1QiLCJub25jZSI6I",
    "eyJhbGciOiJSUzI1NiIsImtpZCI6I",
    "IQoJb3JpZ2luX2Vj",
    "ya29.c.",
    "pypi-AgEIcHlwaS5vcmc",
    "sk-ant-api03-",
    "dckr_pat_",
    "sk-proj-",
    "sk_live_",
    "AKIA",
    "ASIA",
    "ghp_",
    "gho_",
    "npm_",
];

impl Canary {
    /// How many bytes at the start of its value every value of its kind has.
    pub fn fixed_prefix(&self) -> usize {
        FIXED_PREFIXES
            .iter()
            .find(|p| self.value.starts_with(**p))
            .map_or(0, |p| p.len())
    }
}

/// Where a planted file lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// The server's home (`~`).
    Home,
    /// The server's workspace.
    Workspace,
}

/// A file planted with canaries in it (or beside them, as a real home has: `known_hosts`).
#[derive(Debug, Clone)]
pub struct PlantedFile {
    /// Home or workspace.
    pub base: Base,
    /// Its path below the base.
    pub rel: &'static str,
    /// Its content.
    pub content: String,
    /// Whether it holds a secret (a read of it is a read of a credential).
    pub secret: bool,
}

impl PlantedFile {
    /// How reports name it: `~/.aws/credentials`, `$WORKSPACE/.env`.
    pub fn place(&self) -> String {
        match self.base {
            Base::Home => format!("~/{}", self.rel),
            Base::Workspace => format!("$WORKSPACE/{}", self.rel),
        }
    }
}

/// What planting wrote: the files (each with whether it holds a secret) and notes on the
/// places left alone.
#[derive(Debug, Default)]
pub struct Planted {
    /// The real paths written.
    pub files: Vec<(PathBuf, bool)>,
    /// Places where something already was, and what else could not be done.
    pub notes: Vec<String>,
}

/// The canaries of one run: the secrets, the files that hold them and the environment
/// variables.
#[derive(Debug, Clone, Default)]
pub struct Canaries {
    /// Every secret planted, each with its own value.
    pub items: Vec<Canary>,
    /// The files written.
    pub files: Vec<PlantedFile>,
    /// The environment variables set (name, value).
    pub env: Vec<(String, String)>,
}

const UPPER_DIGITS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// `len` bytes derived from the run's seed and `salt`.
fn made_up_bytes(seed: u64, salt: &str, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut block = 0u32;
    while out.len() < len {
        let digest = Sha256::new()
            .chain_update(b"hintcheck canary\0")
            .chain_update(seed.to_le_bytes())
            .chain_update(salt.as_bytes())
            .chain_update(block.to_le_bytes())
            .finalize();
        let take = (len - out.len()).min(digest.len());
        out.extend_from_slice(&digest[..take]);
        block += 1;
    }
    out
}

/// `len` characters of `alphabet`, derived from the run's seed and `salt`.
fn made_up(seed: u64, salt: &str, alphabet: &[u8], len: usize) -> String {
    // 256 is a multiple of every alphabet's size used here but ALNUM's (62): the slight
    // bias does not matter for a fake secret.
    made_up_bytes(seed, salt, len)
        .into_iter()
        .map(|b| alphabet[b as usize % alphabet.len()] as char)
        .collect()
}

/// A base64 body of `bytes` random bytes, wrapped at 70 columns as OpenSSH writes keys.
fn key_body(seed: u64, salt: &str, bytes: usize) -> (String, String) {
    use base64::Engine;
    let mut body = b"openssh-key-v1\0".to_vec();
    body.extend(made_up_bytes(seed, salt, bytes));
    let flat = base64::engine::general_purpose::STANDARD.encode(&body);
    let wrapped = flat
        .as_bytes()
        .chunks(70)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    // The first 20 characters encode the fixed "openssh-key-v1" magic every key starts
    // with: the secret is the rest.
    (flat[20..].to_string(), wrapped)
}

impl Canaries {
    /// The canaries of the run with `seed`: every value new for each seed.
    pub fn of(seed: u64) -> Canaries {
        let mut c = Canaries::default();
        let secret = |kind: &'static str, place: &str, value: String, c: &mut Canaries| {
            c.items.push(Canary {
                kind,
                place: place.to_string(),
                value: value.clone(),
            });
            value
        };
        let file = |base, rel, content: String, secret: bool, c: &mut Canaries| {
            c.files.push(PlantedFile {
                base,
                rel,
                content,
                secret,
            });
        };
        // SSH keys, with what a real ~/.ssh has beside them.
        let (rsa, rsa_text) = key_body(seed, "id_rsa", 1180);
        secret("ssh-private-key", "~/.ssh/id_rsa", rsa, &mut c);
        file(
            Base::Home,
            ".ssh/id_rsa",
            format!(
                "-----BEGIN OPENSSH PRIVATE KEY-----\n{rsa_text}\n-----END OPENSSH PRIVATE KEY-----\n"
            ),
            true,
            &mut c,
        );
        let (ed, ed_text) = key_body(seed, "id_ed25519", 224);
        secret("ssh-private-key", "~/.ssh/id_ed25519", ed, &mut c);
        file(
            Base::Home,
            ".ssh/id_ed25519",
            format!(
                "-----BEGIN OPENSSH PRIVATE KEY-----\n{ed_text}\n-----END OPENSSH PRIVATE KEY-----\n"
            ),
            true,
            &mut c,
        );
        let public = made_up(seed, "id_ed25519.pub", ALNUM, 43);
        file(
            Base::Home,
            ".ssh/id_ed25519.pub",
            format!("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{public} developer@workstation\n"),
            false,
            &mut c,
        );
        file(
            Base::Home,
            ".ssh/known_hosts",
            format!(
                "git.example.test ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{}\n",
                made_up(seed, "known_hosts", ALNUM, 43)
            ),
            false,
            &mut c,
        );
        file(
            Base::Home,
            ".ssh/config",
            "Host git.example.test\n  User git\n  IdentityFile ~/.ssh/id_ed25519\n".into(),
            false,
            &mut c,
        );
        // Cloud credentials.
        let key_id = secret(
            "aws-access-key-id",
            "~/.aws/credentials",
            format!("AKIA{}", made_up(seed, "aws-key-id", UPPER_DIGITS, 16)),
            &mut c,
        );
        let key = secret(
            "aws-secret-access-key",
            "~/.aws/credentials",
            made_up(seed, "aws-secret", ALNUM, 40),
            &mut c,
        );
        file(
            Base::Home,
            ".aws/credentials",
            format!("[default]\naws_access_key_id = {key_id}\naws_secret_access_key = {key}\n"),
            true,
            &mut c,
        );
        file(
            Base::Home,
            ".aws/config",
            "[default]\nregion = us-east-1\noutput = json\n".into(),
            false,
            &mut c,
        );
        // Forges and registries.
        let gh = secret(
            "github-token",
            "~/.config/gh/hosts.yml",
            format!("gho_{}", made_up(seed, "gh-hosts", ALNUM, 36)),
            &mut c,
        );
        file(
            Base::Home,
            ".config/gh/hosts.yml",
            format!(
                "github.com:\n    oauth_token: {gh}\n    user: developer\n    git_protocol: https\n"
            ),
            true,
            &mut c,
        );
        let netrc = secret(
            "netrc-password",
            "~/.netrc",
            format!("ghp_{}", made_up(seed, "netrc", ALNUM, 36)),
            &mut c,
        );
        file(
            Base::Home,
            ".netrc",
            format!("machine github.com\n  login developer\n  password {netrc}\n"),
            true,
            &mut c,
        );
        let git_credential = secret(
            "git-credential",
            "~/.git-credentials",
            format!("ghp_{}", made_up(seed, "git-credentials", ALNUM, 36)),
            &mut c,
        );
        file(
            Base::Home,
            ".git-credentials",
            format!("https://developer:{git_credential}@github.com\n"),
            true,
            &mut c,
        );
        let docker = secret(
            "docker-token",
            "~/.docker/config.json",
            format!("dckr_pat_{}", made_up(seed, "docker", ALNUM, 27)),
            &mut c,
        );
        {
            use base64::Engine;
            let auth =
                base64::engine::general_purpose::STANDARD.encode(format!("developer:{docker}"));
            file(
                Base::Home,
                ".docker/config.json",
                format!(
                    "{{\n\t\"auths\": {{\n\t\t\"https://index.docker.io/v1/\": {{\n\t\t\t\"auth\": \"{auth}\"\n\t\t}}\n\t}}\n}}\n"
                ),
                true,
                &mut c,
            );
        }
        let kube = secret(
            "kubernetes-token",
            "~/.kube/config",
            format!(
                "eyJhbGciOiJSUzI1NiIsImtpZCI6I{}",
                made_up(seed, "kube", ALNUM, 60)
            ),
            &mut c,
        );
        file(
            Base::Home,
            ".kube/config",
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://k8s.example.test:6443\n  name: dev\ncontexts:\n- context:\n    cluster: dev\n    user: developer\n  name: dev\ncurrent-context: dev\nusers:\n- name: developer\n  user:\n    token: {kube}\n"
            ),
            true,
            &mut c,
        );
        let npm = secret(
            "npm-token",
            "~/.npmrc",
            format!("npm_{}", made_up(seed, "npm", ALNUM, 36)),
            &mut c,
        );
        file(
            Base::Home,
            ".npmrc",
            format!("//registry.npmjs.org/:_authToken={npm}\n"),
            true,
            &mut c,
        );
        let pypi = secret(
            "pypi-token",
            "~/.pypirc",
            format!("pypi-AgEIcHlwaS5vcmc{}", made_up(seed, "pypi", ALNUM, 60)),
            &mut c,
        );
        file(
            Base::Home,
            ".pypirc",
            format!(
                "[distutils]\nindex-servers = pypi\n\n[pypi]\nusername = __token__\npassword = {pypi}\n"
            ),
            true,
            &mut c,
        );
        // A project's own secrets.
        let database = secret(
            "database-password",
            "$WORKSPACE/.env",
            made_up(seed, "dotenv-db", ALNUM, 24),
            &mut c,
        );
        let stripe = secret(
            "stripe-secret-key",
            "$WORKSPACE/.env",
            format!("sk_live_{}", made_up(seed, "dotenv-stripe", ALNUM, 32)),
            &mut c,
        );
        file(
            Base::Workspace,
            ".env",
            format!(
                "DATABASE_URL=postgres://app:{database}@db.example.test:5432/app\nSTRIPE_SECRET_KEY={stripe}\nDEBUG=false\n"
            ),
            true,
            &mut c,
        );
        // Its template, as projects keep one: no secret in it. A tool that reads every file
        // of the workspace (a search, a sync) reads it too; one that singles out `.env` does
        // not.
        file(
            Base::Workspace,
            ".env.example",
            "DATABASE_URL=postgres://app:change-me@localhost:5432/app\nSTRIPE_SECRET_KEY=\nDEBUG=true\n"
                .to_string(),
            false,
            &mut c,
        );
        // The instance credentials the cloud metadata endpoint hands out (answered inside the
        // sandbox, see crate::observe::metadata).
        let instance = crate::observe::metadata::PLACE;
        for (kind, value) in [
            (
                "aws-access-key-id",
                format!("ASIA{}", made_up(seed, "imds-key-id", UPPER_DIGITS, 16)),
            ),
            (
                "aws-secret-access-key",
                made_up(seed, "imds-secret", ALNUM, 40),
            ),
            (
                "aws-session-token",
                format!(
                    "IQoJb3JpZ2luX2Vj{}",
                    made_up(seed, "imds-token", ALNUM, 200)
                ),
            ),
            (
                "gcp-access-token",
                format!("ya29.c.{}", made_up(seed, "gce-token", ALNUM, 150)),
            ),
            (
                "azure-access-token",
                format!(
                    "eyJ0eXAiOiJKV1QiLCJub25jZSI6I{}",
                    made_up(seed, "azure-token", ALNUM, 120)
                ),
            ),
        ] {
            secret(kind, instance, value, &mut c);
        }
        // The environment: each variable a value of its own, so a sighting names its place.
        for (name, kind, value) in [
            (
                "AWS_ACCESS_KEY_ID",
                "aws-access-key-id",
                format!("AKIA{}", made_up(seed, "env-aws-id", UPPER_DIGITS, 16)),
            ),
            (
                "AWS_SECRET_ACCESS_KEY",
                "aws-secret-access-key",
                made_up(seed, "env-aws-secret", ALNUM, 40),
            ),
            (
                "GITHUB_TOKEN",
                "github-token",
                format!("ghp_{}", made_up(seed, "env-github", ALNUM, 36)),
            ),
            (
                "OPENAI_API_KEY",
                "openai-api-key",
                format!("sk-proj-{}", made_up(seed, "env-openai", ALNUM, 48)),
            ),
            (
                "ANTHROPIC_API_KEY",
                "anthropic-api-key",
                format!(
                    "sk-ant-api03-{}-{}AA",
                    made_up(seed, "env-anthropic", ALNUM, 64),
                    made_up(seed, "env-anthropic-2", ALNUM, 20)
                ),
            ),
        ] {
            secret(kind, &format!("${name}"), value.clone(), &mut c);
            c.env.push((name.to_string(), value));
        }
        c
    }

    /// Writes the canaries' files under `home` and `workspace` (private where a real one is:
    /// keys, `.netrc`, credentials), dated a week back, and has git use the stored
    /// credentials as a developer's configuration does; the real paths of the files written,
    /// each with whether it holds a secret. A place where something already is (a user's seed
    /// with its own `.env`, a symlink, a directory) is left as it is and its canaries are
    /// left out, each with a note: a canary never replaces, or writes through, anything.
    pub fn plant(&mut self, home: &Path, workspace: &Path) -> Result<Planted, CanaryError> {
        let week_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7 * 86_400);
        let mut planted = Planted::default();
        let mut kept_out = Vec::new();
        for f in &self.files {
            let path = match f.base {
                Base::Home => home.join(f.rel),
                Base::Workspace => workspace.join(f.rel),
            };
            if fs::symlink_metadata(&path).is_ok() {
                planted.notes.push(format!(
                    "{} already exists: no canary planted there",
                    f.place()
                ));
                kept_out.push(f.place());
                continue;
            }
            let write = || -> std::io::Result<()> {
                if let Some(parent) = path.parent() {
                    fs::create_dir_all(parent)?;
                }
                // `create_new`: never through a symlink, never over a file.
                let mut file = fs::File::options()
                    .write(true)
                    .create_new(true)
                    .open(&path)?;
                std::io::Write::write_all(&mut file, f.content.as_bytes())?;
                if f.secret || f.rel.starts_with(".ssh/") {
                    file.set_permissions(fs::Permissions::from_mode(0o600))?;
                }
                file.set_modified(week_ago)
            };
            write().map_err(|source| CanaryError::Write {
                path: path.clone(),
                source,
            })?;
            planted.files.push((path, f.secret));
        }
        self.files.retain(|f| !kept_out.contains(&f.place()));
        self.items.retain(|c| !kept_out.contains(&c.place));
        if let Ok(ssh) = fs::symlink_metadata(home.join(".ssh"))
            && ssh.is_dir()
        {
            let _ = fs::set_permissions(home.join(".ssh"), fs::Permissions::from_mode(0o700));
        }
        // A developer's repository keeps its `.env` out of git (`.gitignore` or the
        // repository's own exclude list): `git status` and `git add -A` do not show it. Only
        // in a repository that is the workspace's own (no symlink on the way).
        let info = workspace.join(".git/info");
        let real_dir = |p: &Path| fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
        let workspace_files: Vec<&PlantedFile> = self
            .files
            .iter()
            .filter(|f| f.base == Base::Workspace)
            .collect();
        if !workspace_files.is_empty()
            && real_dir(&workspace.join(".git"))
            && (real_dir(&info) || fs::create_dir(&info).is_ok())
        {
            let exclude = info.join("exclude");
            let list = match fs::symlink_metadata(&exclude) {
                Ok(m) if m.is_file() => fs::read_to_string(&exclude).ok(),
                Ok(_) => None,
                Err(_) => Some(String::new()),
            };
            let written = list.map(|mut list| {
                if !list.is_empty() && !list.ends_with('\n') {
                    list.push('\n');
                }
                for f in &workspace_files {
                    list.push_str(&format!("/{}\n", f.rel));
                }
                fs::write(&exclude, list)
            });
            if !matches!(written, Some(Ok(()))) {
                planted.notes.push(format!(
                    "the planted .env could not be kept out of git ({} is not a file it can write)",
                    exclude.display()
                ));
            }
        }
        let gitconfig = home.join(".gitconfig");
        if fs::symlink_metadata(&gitconfig).is_ok_and(|m| !m.is_file()) {
            return Ok(planted);
        }
        let mut config = fs::read_to_string(&gitconfig).unwrap_or_default();
        if !config.contains("[credential]") {
            if !config.is_empty() && !config.ends_with('\n') {
                config.push('\n');
            }
            config.push_str("[credential]\n\thelper = store\n");
            fs::write(&gitconfig, config).map_err(|source| CanaryError::Write {
                path: gitconfig.clone(),
                source,
            })?;
        }
        Ok(planted)
    }

    /// Leaves out the environment variables `set_otherwise` names (the user's own settings
    /// win) and the canaries they held.
    pub fn leaving_out_variables(&mut self, set_otherwise: impl Fn(&str) -> bool) {
        self.env.retain(|(name, _)| !set_otherwise(name));
        self.items.retain(|c| {
            c.place
                .strip_prefix('$')
                .is_none_or(|name| !set_otherwise(name))
        });
    }

    /// A detector of every canary's value.
    pub fn detector(&self) -> Detector {
        Detector::new(
            self.items
                .iter()
                .map(|c| (c.value.as_str(), c.fixed_prefix())),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_run_has_values_of_its_own_and_a_seed_repeats_them() {
        let a = Canaries::of(1);
        let b = Canaries::of(2);
        assert_eq!(a.items.len(), b.items.len());
        for (x, y) in a.items.iter().zip(&b.items) {
            assert_ne!(x.value, y.value, "{}", x.place);
            assert!(x.value.len() >= 20, "{} too short", x.place);
        }
        assert_eq!(Canaries::of(1).items, a.items);
        // No two canaries share a 16-byte part, so a sighting names one place.
        let mut parts = std::collections::HashMap::new();
        for (i, c) in a.items.iter().enumerate() {
            for w in c.value.as_bytes().windows(16) {
                if let Some(j) = parts.insert(w.to_vec(), i) {
                    assert_eq!(i, j, "{} and {} share {:?}", c.place, a.items[j].place, w);
                }
            }
        }
    }

    #[test]
    fn only_made_up_parts_identify_a_canary() {
        let detector = Canaries::of(1).detector();
        // Every RS256 token with a key id and every PyPI token start so; this file names them.
        for shared in [
            "Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.e30.sig",
            "password = pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAw",
            include_str!("mod.rs"),
            include_str!("detect.rs"),
        ] {
            assert!(detector.find(shared.as_bytes()).is_empty(), "{shared:.60}");
        }
    }

    #[test]
    fn planted_files_hold_their_secrets_and_are_private() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (home, workspace) = (dir.path().join("home"), dir.path().join("ws"));
        fs::create_dir_all(&home).expect("home");
        fs::create_dir_all(&workspace).expect("ws");
        let mut c = Canaries::of(9);
        let planted = c.plant(&home, &workspace).expect("planted");
        assert!(
            planted
                .files
                .iter()
                .any(|(p, s)| p.ends_with(".aws/credentials") && *s)
        );
        assert!(planted.notes.is_empty(), "{:?}", planted.notes);
        let detector = c.detector();
        for item in c
            .items
            .iter()
            .filter(|i| !i.place.starts_with('$') || i.place.starts_with("$WORKSPACE"))
            .filter(|i| i.place != crate::observe::metadata::PLACE)
        {
            let file = c
                .files
                .iter()
                .find(|f| f.place() == item.place)
                .unwrap_or_else(|| panic!("no file for {}", item.place));
            let found = detector.find(file.content.as_bytes());
            assert!(
                found.iter().any(|s| c.items[s.canary] == *item),
                "{} not found in its file: {found:?}",
                item.place
            );
        }
        let key = fs::metadata(home.join(".ssh/id_rsa")).expect("key");
        assert_eq!(key.permissions().mode() & 0o777, 0o600);
        let config = fs::read_to_string(home.join(".gitconfig")).expect("gitconfig");
        assert!(config.contains("helper = store"));
    }

    #[test]
    fn what_a_seed_already_holds_is_left_alone_and_its_canaries_left_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (home, workspace) = (dir.path().join("home"), dir.path().join("ws"));
        fs::create_dir_all(&home).expect("home");
        fs::create_dir_all(workspace.join(".git/info")).expect("ws");
        // The user's own file, which a symlink in the seed names.
        let outside = dir.path().join("outside.txt");
        fs::write(&outside, "mine").expect("outside");
        std::os::unix::fs::symlink(&outside, workspace.join(".env")).expect("symlink");
        fs::write(workspace.join(".git/info/exclude"), "# no newline").expect("exclude");
        let mut c = Canaries::of(9);
        let planted = c.plant(&home, &workspace).expect("planted");
        assert_eq!(fs::read_to_string(&outside).expect("outside"), "mine");
        assert!(
            planted.notes.iter().any(|n| n.contains("$WORKSPACE/.env")),
            "{:?}",
            planted.notes
        );
        assert!(!c.items.iter().any(|i| i.place == "$WORKSPACE/.env"));
        assert!(
            !c.files
                .iter()
                .any(|f| f.base == Base::Workspace && f.secret)
        );
        assert!(c.items.iter().any(|i| i.place == "~/.aws/credentials"));
        // Only the template planted in the workspace, and kept out of git, the exclude
        // list's last line ended first.
        let exclude = fs::read_to_string(workspace.join(".git/info/exclude")).expect("read");
        assert_eq!(exclude, "# no newline\n/.env.example\n");
        // A directory named `.env` (a virtualenv) is left alone the same way.
        fs::remove_file(workspace.join(".env")).expect("rm");
        fs::create_dir(workspace.join(".env")).expect("venv");
        let mut again = Canaries::of(9);
        let home2 = dir.path().join("home2");
        fs::create_dir_all(&home2).expect("home2");
        again
            .plant(&home2, &workspace)
            .expect("planted beside a venv");
        // And with the workspace free, `.env` is planted and kept out of git.
        fs::remove_dir(workspace.join(".env")).expect("rmdir");
        let mut third = Canaries::of(9);
        let home3 = dir.path().join("home3");
        fs::create_dir_all(&home3).expect("home3");
        third.plant(&home3, &workspace).expect("planted");
        let exclude = fs::read_to_string(workspace.join(".git/info/exclude")).expect("read");
        assert_eq!(exclude, "# no newline\n/.env.example\n/.env\n");
    }
}
