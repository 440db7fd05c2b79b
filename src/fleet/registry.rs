//! Registry entries as scan targets: a `server.json` document (the official MCP registry's
//! format) or a registry list page (`{"servers": [{"server": {…}}], "metadata": …}`) becomes
//! one target per server. A server with an npm or PyPI package becomes a scenario written
//! for it (a pinned `[setup]` install, the launch command built from the package's arguments,
//! its environment, and the HTTP transport where the package speaks HTTP); anything hintcheck
//! cannot run here (remote-only servers, OCI images, MCPB bundles, other registries, required
//! secrets, arguments with no value to give) is a skip that says why. Nothing in a document
//! is trusted: names become file names only through a hash, values reach the server only as
//! arguments and environment (never through a shell).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::mcp::tool::{sha256_hex, shorten};

/// Errors reading registry documents.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not JSON, or not a server.json document or a list page.
    #[error("{}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A generated scenario cannot be written.
    #[error("cannot write the scenario for {id} under {}: {source}", dir.display())]
    Write {
        /// The server.
        id: String,
        /// Where.
        dir: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Most servers one document may list.
const MAX_SERVERS: usize = 100_000;

/// One server of a registry document: the scenario written for it, or why it is skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryTarget {
    /// `name@version`.
    pub id: String,
    /// Where it came from: the document and the entry's position.
    pub origin: String,
    /// The scenario written for it, or the reason it is not run.
    pub plan: Result<PathBuf, String>,
}

/// Whether a path names a registry document (a `.json` file) rather than a scenario.
pub fn is_registry_document(path: &Path) -> bool {
    path.is_file() && path.extension().is_some_and(|e| e == "json")
}

/// Whether a `server.json` found in a directory is a registry document: a JSON object naming
/// a server (`name`) with its `packages` or `remotes`, or a list page (`servers`). Another
/// file of that name (a server's own settings) is not scanned.
pub fn looks_like_registry_entry(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    let Ok(Value::Object(doc)) = serde_json::from_str::<Value>(&text) else {
        return false;
    };
    doc.get("servers").is_some_and(Value::is_array)
        || (doc.get("name").is_some_and(Value::is_string)
            && (doc.contains_key("packages") || doc.contains_key("remotes")))
}

/// Reads a document and writes a scenario for each runnable server under `out_dir`.
pub fn targets(path: &Path, out_dir: &Path) -> Result<Vec<RegistryTarget>, RegistryError> {
    let text = std::fs::read_to_string(path).map_err(|source| RegistryError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let invalid = |message: String| RegistryError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    let doc: Value = serde_json::from_str(&text).map_err(|e| invalid(format!("not JSON: {e}")))?;
    let entries: Vec<&Value> = match doc.get("servers") {
        Some(Value::Array(list)) => list
            .iter()
            .map(|e| e.get("server").unwrap_or(e))
            .take(MAX_SERVERS)
            .collect(),
        Some(_) => return Err(invalid("`servers` is not a list".into())),
        None if doc.get("name").is_some() => vec![&doc],
        None => {
            return Err(invalid(
                "neither a server.json document (with `name`) nor a registry list page (with `servers`)".into(),
            ));
        }
    };
    let mut out = Vec::new();
    for (i, server) in entries.into_iter().enumerate() {
        let name = server["name"].as_str().unwrap_or("(no name)");
        let version = server["version"].as_str().unwrap_or("(no version)");
        let id = shorten(&format!("{name}@{version}"), 200);
        let origin = format!("{}#{i}", path.display());
        let plan = match scenario_for(server) {
            Ok(toml) => {
                let dir = out_dir.join(&sha256_hex(toml.as_bytes())[..16]);
                let write = std::fs::create_dir_all(&dir)
                    .and_then(|()| std::fs::write(dir.join("scenario.toml"), &toml));
                write.map_err(|source| RegistryError::Write {
                    id: id.clone(),
                    dir: dir.clone(),
                    source,
                })?;
                Ok(dir.join("scenario.toml"))
            }
            Err(why) => Err(why),
        };
        out.push(RegistryTarget { id, origin, plan });
    }
    Ok(out)
}

/// The package hintcheck runs for a server: the first npm or PyPI package, else why none.
fn runnable_package(server: &Value) -> Result<&Value, String> {
    let packages = server["packages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if let Some(p) = packages
        .iter()
        .find(|p| matches!(p["registryType"].as_str(), Some("npm" | "pypi")))
    {
        return Ok(p);
    }
    let kinds: Vec<String> = packages
        .iter()
        .map(|p| shorten(p["registryType"].as_str().unwrap_or("(none)"), 40))
        .collect();
    let remotes = server["remotes"].as_array().map_or(0, Vec::len);
    Err(match (kinds.is_empty(), remotes) {
        (true, 0) => "no package and no remote: nothing to run".into(),
        (true, _) => {
            "remote only: hintcheck runs servers it can start in its sandbox, not hosted ones"
                .into()
        }
        (false, _) if kinds.iter().all(|k| k == "oci") => {
            "an OCI image only: hintcheck does not run containers".into()
        }
        (false, _) if kinds.iter().all(|k| k == "mcpb") => {
            "an MCPB bundle only: hintcheck does not unpack bundles".into()
        }
        (false, _) => format!(
            "no npm or PyPI package (only {}): hintcheck installs from npm and PyPI",
            kinds.join(", ")
        ),
    })
}

/// The scenario (TOML) for a server, or why it cannot be run.
pub fn scenario_for(server: &Value) -> Result<String, String> {
    let package = runnable_package(server)?;
    let pinned = pinned(package)?;
    let endpoint = endpoint(package)?;
    let port_variable = endpoint.as_ref().and_then(|e| e.port_variable.as_deref());
    let (args, env) = launch(package, port_variable)?;
    write_scenario(server, pinned, args, env, endpoint)
}

/// Where a server that speaks HTTP listens: the endpoint's path, and its port named by a
/// variable (one hintcheck chooses) or fixed.
struct Endpoint {
    path: String,
    port_variable: Option<String>,
    fixed_port: Option<u16>,
}

/// A package pinned by its registry, name and version.
struct Pinned<'a> {
    registry: &'a str,
    identifier: &'a str,
    version: &'a str,
}

/// The package's registry, name and version, each checked to be one pinned package.
fn pinned(package: &Value) -> Result<Pinned<'_>, String> {
    use crate::fleet::setup::requirement::{
        is_npm_name, is_npm_version, is_pypi_name, is_pypi_version,
    };
    let registry = package["registryType"].as_str().unwrap_or_default();
    let npm = registry == "npm";
    // A field that must be one thing of the package's registry, said as `what` when it is not.
    let checked = |field: &str, on_npm: fn(&str) -> bool, on_pypi: fn(&str) -> bool, what: &str| {
        package[field]
            .as_str()
            .filter(|v| if npm { on_npm(v) } else { on_pypi(v) })
            .ok_or_else(|| {
                format!(
                    "package {field} {} is not {what}",
                    shorten(&package[field].to_string(), 80)
                )
            })
    };
    let identifier = checked("identifier", is_npm_name, is_pypi_name, "a package name")?;
    let version = checked(
        "version",
        is_npm_version,
        is_pypi_version,
        "one pinned version",
    )?;
    Ok(Pinned {
        registry,
        identifier,
        version,
    })
}

/// How the server speaks: stdio (`None`), or HTTP at a path on a port hintcheck chooses (named
/// by a variable) or on a fixed one.
fn endpoint(package: &Value) -> Result<Option<Endpoint>, String> {
    let transport = &package["transport"];
    let kind = transport["type"].as_str().unwrap_or("stdio");
    let mut http: Option<(String, UrlPort)> = None;
    match kind {
        "stdio" => {}
        "streamable-http" | "sse" => {
            let url = transport["url"].as_str().unwrap_or_default();
            http = Some(http_endpoint(url)?);
        }
        other => {
            return Err(format!(
                "transport {} is not one hintcheck speaks",
                shorten(other, 40)
            ));
        }
    }
    let port_variable = match &http {
        Some((_, UrlPort::Variable(v))) => Some(v.clone()),
        _ => None,
    };
    let fixed_port = match &http {
        Some((_, UrlPort::Fixed(p))) if *p < 1024 => {
            return Err(format!(
                "the transport's URL has the fixed port {p}, below 1024, where a server without privileges cannot listen"
            ));
        }
        Some((_, UrlPort::Fixed(p))) => Some(*p),
        Some((_, UrlPort::Default)) => {
            return Err(
                "the transport's URL names no port (80 or 443), where a server without privileges cannot listen"
                    .into(),
            );
        }
        _ => None,
    };
    Ok(http.map(|(path, _)| Endpoint {
        path,
        port_variable,
        fixed_port,
    }))
}

/// The server's arguments and environment, from the package's inputs; none may name a path
/// on the scanning machine, and a port variable the URL names must be set by one of them.
fn launch(
    package: &Value,
    port_variable: Option<&str>,
) -> Result<(Vec<String>, BTreeMap<String, String>), String> {
    let mut inputs = Inputs {
        port_variable,
        port_used: false,
    };
    let mut args: Vec<String> = Vec::new();
    for arg in package["packageArguments"].as_array().into_iter().flatten() {
        args.extend(inputs.argument(arg)?);
    }
    if let Some(path) = args.iter().find_map(|a| host_path(a)) {
        return Err(format!(
            "an argument names {}, a path on the scanning machine: a registry document may not show the server the scanner's files",
            shorten(path, 80)
        ));
    }
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for var in package["environmentVariables"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = var["name"]
            .as_str()
            .filter(|n| valid_env_name(n))
            .ok_or_else(|| {
                format!(
                    "environment variable name {} is not usable",
                    shorten(&var["name"].to_string(), 60)
                )
            })?;
        if let Some(value) = inputs.value(var, name)? {
            if let Some(path) = host_path(&value) {
                return Err(format!(
                    "environment variable {name} names {}, a path on the scanning machine: a registry document may not show the server the scanner's files",
                    shorten(path, 80)
                ));
            }
            env.insert(name.to_string(), value);
        }
    }
    if let Some(v) = port_variable
        && !inputs.port_used
    {
        return Err(format!(
            "the transport's URL names its port by {{{v}}}, which no argument or environment variable of the package sets"
        ));
    }
    Ok((args, env))
}

/// The scenario's TOML: `[meta]` from the registry entry, `[setup]` with the pin, `[server]`
/// with the installed command, and `[run]` for HTTP.
fn write_scenario(
    server: &Value,
    package: Pinned<'_>,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    http: Option<Endpoint>,
) -> Result<String, String> {
    let Pinned {
        registry,
        identifier,
        version,
    } = package;
    let (setup_key, pin, command) = match registry {
        "npm" => (
            "npm",
            format!("{identifier}@{version}"),
            vec![
                format!("{{node_for:{identifier}}}"),
                format!("{{npm_bin:{identifier}}}"),
            ],
        ),
        _ => (
            "pip",
            format!("{identifier}=={version}"),
            vec![format!("{{venv_bin:{identifier}}}")],
        ),
    };
    let mut doc = toml::Table::new();
    let mut meta = toml::Table::new();
    meta.insert(
        "id".into(),
        format!(
            "{}@{}",
            shorten(server["name"].as_str().unwrap_or("(no name)"), 200),
            shorten(server["version"].as_str().unwrap_or("(no version)"), 60)
        )
        .into(),
    );
    if let Some(d) = server["description"].as_str() {
        meta.insert("description".into(), shorten(d, 300).into());
    }
    doc.insert("meta".into(), meta.into());
    let mut setup = toml::Table::new();
    setup.insert(setup_key.into(), toml::Value::Array(vec![pin.into()]));
    doc.insert("setup".into(), setup.into());
    let mut server_table = toml::Table::new();
    server_table.insert(
        "command".into(),
        toml::Value::Array(command.into_iter().chain(args).map(Into::into).collect()),
    );
    if !env.is_empty() {
        server_table.insert(
            "env".into(),
            toml::Value::Table(env.into_iter().map(|(k, v)| (k, v.into())).collect()),
        );
    }
    doc.insert("server".into(), server_table.into());
    if let Some(Endpoint {
        path, fixed_port, ..
    }) = http
    {
        let mut run = toml::Table::new();
        run.insert("transport".into(), "http".into());
        run.insert("http_path".into(), path.into());
        if let Some(p) = fixed_port {
            run.insert("http_port".into(), i64::from(p).into());
        }
        doc.insert("run".into(), run.into());
    }
    toml::to_string(&doc).map_err(|e| format!("cannot write its scenario: {e}"))
}

/// How an HTTP transport's URL gives the port.
#[derive(Debug, Clone, PartialEq, Eq)]
enum UrlPort {
    /// A `{variable}` the package's inputs set (hintcheck chooses the port).
    Variable(String),
    /// A number: the server always listens there.
    Fixed(u16),
    /// None: the scheme's (80 or 443).
    Default,
}

/// The path of an HTTP transport's URL and how it gives the port. Only URLs on this machine
/// can be served from the sandbox.
fn http_endpoint(url: &str) -> Result<(String, UrlPort), String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| format!("transport URL {} is not http(s)", shorten(url, 80)))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = authority.rsplit_once(':').unwrap_or((authority, ""));
    let local = matches!(host, "localhost" | "127.0.0.1" | "[::1]" | "0.0.0.0")
        || host.starts_with('{') && host.ends_with('}');
    if !local {
        return Err(format!(
            "transport URL {} is not on this machine",
            shorten(url, 80)
        ));
    }
    let port = if port.is_empty() {
        UrlPort::Default
    } else if let Some(v) = port.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
        UrlPort::Variable(v.to_string())
    } else {
        UrlPort::Fixed(
            port.parse()
                .map_err(|_| format!("transport URL {} has no usable port", shorten(url, 80)))?,
        )
    };
    let path = path.split('?').next().unwrap_or("/").to_string();
    if path.contains('{') {
        return Err(format!(
            "transport URL {} has a variable in its path",
            shorten(url, 80)
        ));
    }
    Ok((path, port))
}

/// Values for a package's inputs.
struct Inputs<'a> {
    /// The variable of the transport URL that names the port (its input gets `{port}`).
    port_variable: Option<&'a str>,
    /// Whether an input took `{port}`.
    port_used: bool,
}

impl Inputs<'_> {
    /// The command-line words of one argument (none when it is optional and has no value).
    fn argument(&mut self, arg: &Value) -> Result<Vec<String>, String> {
        let kind = arg["type"].as_str().unwrap_or_default();
        let label = arg["name"]
            .as_str()
            .or_else(|| arg["valueHint"].as_str())
            .unwrap_or("an argument");
        match kind {
            "positional" => Ok(self.value(arg, label)?.into_iter().collect()),
            "named" => {
                let name = arg["name"]
                    .as_str()
                    .filter(|n| !n.is_empty() && n.len() <= 200)
                    .ok_or("a named argument without a name")?;
                match self.value(arg, name)? {
                    Some(v) => Ok(vec![name.to_string(), v]),
                    None if arg["isRequired"] == true => Ok(vec![name.to_string()]),
                    None => Ok(Vec::new()),
                }
            }
            other => Err(format!(
                "argument of type {} is not positional or named",
                shorten(other, 40)
            )),
        }
    }

    /// The value an input gets: the port for the URL's port variable, its fixed value (with
    /// its variables filled in), a workspace path for a file path, its default, its first
    /// choice; `None` when it is optional and has none; an error for what only a person
    /// could supply (a secret, a required value without a default).
    fn value(&mut self, input: &Value, label: &str) -> Result<Option<String>, String> {
        let names = [input["name"].as_str(), input["valueHint"].as_str()];
        if let Some(var) = self.port_variable {
            if names.iter().flatten().any(|n| n.eq_ignore_ascii_case(var))
                || input["value"]
                    .as_str()
                    .is_some_and(|v| v.contains(&format!("{{{var}}}")))
            {
                self.port_used = true;
                return Ok(Some(match input["value"].as_str() {
                    Some(v) => v.replace(&format!("{{{var}}}"), "{port}"),
                    None => "{port}".into(),
                }));
            }
        }
        let required = input["isRequired"] == true;
        let secret = input["isSecret"] == true;
        if let Some(v) = input["value"].as_str() {
            let mut v = v.to_string();
            for (name, var) in input["variables"].as_object().into_iter().flatten() {
                let token = format!("{{{name}}}");
                if !v.contains(&token) {
                    continue;
                }
                match self.value(var, name)? {
                    Some(x) => v = v.replace(&token, &x),
                    None => return Err(format!("{label}: no value for its variable {name}")),
                }
            }
            return Ok(Some(v));
        }
        if secret {
            return if required {
                Err(format!(
                    "needs the secret {} (not supplied to a scan)",
                    shorten(label, 60)
                ))
            } else {
                Ok(None)
            };
        }
        if input["format"] == "filepath" {
            return Ok(Some("{workspace}".into()));
        }
        if let Some(d) = input["default"].as_str() {
            return Ok(Some(d.to_string()));
        }
        if let Some(first) = input["choices"]
            .as_array()
            .and_then(|c| c.first())
            .and_then(Value::as_str)
        {
            return Ok(Some(first.to_string()));
        }
        if required {
            return Err(format!(
                "needs a value for {} (no default, no choices)",
                shorten(label, 60)
            ));
        }
        Ok(None)
    }
}

/// The part of a value that names a path of the machine running the scan (absolute, `//…`
/// included, or in a home through `~`), also after `=`, `:`, `,` or a space (`--root=/home/x`,
/// `a:/etc`), and a `file:` URL. Other URLs (`https://host/path`) name no local path.
fn host_path(value: &str) -> Option<&str> {
    value.split(['=', ',', ' ']).find_map(|token| {
        if let Some((scheme, _)) = token.split_once("://") {
            return scheme.eq_ignore_ascii_case("file").then_some(token);
        }
        token
            .split(':')
            .find(|part| part.starts_with('/') || part.starts_with('~'))
    })
}

/// An environment variable name a server can be given.
fn valid_env_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 128
        && !n.starts_with(|c: char| c.is_ascii_digit())
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan(server: Value) -> Result<toml::Table, String> {
        scenario_for(&server).map(|t| t.parse::<toml::Table>().expect("toml"))
    }

    #[test]
    fn an_npm_package_becomes_a_pinned_install_and_its_command() {
        let s = plan(json!({"name": "io.github.x/notes", "version": "1.2.0", "description": "Notes",
            "packages": [{"registryType": "npm", "identifier": "@x/notes", "version": "1.2.0",
                "transport": {"type": "stdio"},
                "packageArguments": [
                    {"type": "positional", "valueHint": "dir", "format": "filepath", "isRequired": true},
                    {"type": "named", "name": "--mode", "choices": ["fast", "slow"]},
                    {"type": "named", "name": "--opt"}],
                "environmentVariables": [
                    {"name": "NOTES_FILE", "value": "{dir}/notes.json", "variables": {"dir": {"format": "filepath"}}},
                    {"name": "TOKEN", "isSecret": true}]}]}))
        .expect("runnable");
        assert_eq!(s["setup"]["npm"][0].as_str(), Some("@x/notes@1.2.0"));
        let command: Vec<&str> = s["server"]["command"]
            .as_array()
            .expect("command")
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert_eq!(
            command,
            [
                "{node_for:@x/notes}",
                "{npm_bin:@x/notes}",
                "{workspace}",
                "--mode",
                "fast"
            ]
        );
        assert_eq!(
            s["server"]["env"]["NOTES_FILE"].as_str(),
            Some("{workspace}/notes.json")
        );
        assert!(
            s["server"]["env"].get("TOKEN").is_none(),
            "an optional secret is left out"
        );
        assert_eq!(s["meta"]["id"].as_str(), Some("io.github.x/notes@1.2.0"));
    }

    #[test]
    fn an_http_package_listens_on_the_port_hintcheck_chooses() {
        let s = plan(
            json!({"name": "a/b", "version": "2.0.0", "packages": [{"registryType": "pypi",
            "identifier": "b-server", "version": "2.0.0",
            "transport": {"type": "streamable-http", "url": "http://localhost:{PORT}/api/mcp"},
            "environmentVariables": [{"name": "PORT", "default": "8000"}]}]}),
        )
        .expect("runnable");
        assert_eq!(s["setup"]["pip"][0].as_str(), Some("b-server==2.0.0"));
        assert_eq!(s["server"]["env"]["PORT"].as_str(), Some("{port}"));
        assert_eq!(s["run"]["transport"].as_str(), Some("http"));
        assert_eq!(s["run"]["http_path"].as_str(), Some("/api/mcp"));
        assert_eq!(
            s["server"]["command"][0].as_str(),
            Some("{venv_bin:b-server}")
        );
        // A fixed port is the server's own in the sandbox's network namespace.
        let fixed = |url: &str| {
            plan(
                json!({"name": "a/c", "version": "1.0.0", "packages": [{"registryType": "npm",
                "identifier": "c", "version": "1.0.0",
                "transport": {"type": "streamable-http", "url": url}}]}),
            )
        };
        let s = fixed("http://localhost:8080/mcp").expect("runnable");
        assert_eq!(s["run"]["http_port"].as_integer(), Some(8080));
        assert_eq!(s["run"]["http_path"].as_str(), Some("/mcp"));
        assert!(
            fixed("http://127.0.0.1:443/mcp")
                .expect_err("a skip")
                .contains("below 1024")
        );
        assert!(
            fixed("http://localhost/mcp")
                .expect_err("a skip")
                .contains("names no port")
        );
        assert!(fixed("http://localhost:99999/mcp").is_err());
    }

    #[test]
    fn what_cannot_run_here_is_a_skip_that_says_why() {
        let skip = |server: Value| plan(server).expect_err("a skip");
        assert!(
            skip(json!({"name": "a/r", "version": "1", "remotes": [
            {"type": "streamable-http", "url": "https://api.example.test/mcp"}]}))
            .contains("remote only")
        );
        assert!(skip(json!({"name": "a/o", "version": "1", "packages": [
            {"registryType": "oci", "identifier": "docker.io/a/o", "version": "1.0.0", "transport": {"type": "stdio"}}]}))
        .contains("OCI"));
        assert!(skip(json!({"name": "a/m", "version": "1", "packages": [
            {"registryType": "mcpb", "identifier": "https://example.test/m.mcpb", "version": "1.0.0", "transport": {"type": "stdio"}}]}))
        .contains("MCPB"));
        assert!(skip(json!({"name": "a/s", "version": "1", "packages": [
            {"registryType": "npm", "identifier": "s", "version": "1.0.0", "transport": {"type": "stdio"},
             "environmentVariables": [{"name": "API_KEY", "isSecret": true, "isRequired": true}]}]}))
        .contains("secret API_KEY"));
        assert!(skip(json!({"name": "a/n", "version": "1", "packages": [
            {"registryType": "npm", "identifier": "n", "version": "^1.0.0", "transport": {"type": "stdio"}}]}))
        .contains("pinned"));
        assert!(skip(json!({"name": "a/i", "version": "1", "packages": [
            {"registryType": "npm", "identifier": "--registry=http://evil.test x", "version": "1.0.0"}]}))
        .contains("not a package name"));
        assert!(skip(json!({"name": "a/q", "version": "1", "packages": [
            {"registryType": "npm", "identifier": "q", "version": "1.0.0", "transport": {"type": "stdio"},
             "packageArguments": [{"type": "positional", "valueHint": "db_url", "isRequired": true}]}]}))
        .contains("needs a value for db_url"));
    }

    #[test]
    fn identifiers_and_versions_that_would_install_something_else_are_skips() {
        let skip = |registry: &str, identifier: &str, version: &str| {
            plan(json!({"name": "a/x", "version": "1", "packages": [
                {"registryType": registry, "identifier": identifier, "version": version,
                 "transport": {"type": "stdio"}}]}))
            .expect_err("a skip")
        };
        // A relative path pip would build from the scan's working directory.
        assert!(skip("pypi", "pkgs/src", "1").contains("not a package name"));
        assert!(skip("pypi", "./x", "1.0").contains("not a package name"));
        assert!(skip("pypi", "x", "1.0 ; os_name=='posix'").contains("not one pinned version"));
        // A version npm reads as a local tarball, a URL, a tag or a range.
        for v in ["1.0.0.tgz", "file:../x", "latest", "^1.0.0", "1.0"] {
            assert!(
                skip("npm", "x", v).contains("not one pinned version"),
                "{v}"
            );
        }
        assert!(skip("npm", "X/../../y", "1.0.0").contains("not a package name"));
    }

    #[test]
    fn arguments_and_variables_that_name_the_scanners_files_are_skips() {
        let with = |args: Value, env: Value| {
            plan(json!({"name": "a/p", "version": "1", "packages": [
                {"registryType": "npm", "identifier": "p", "version": "1.0.0",
                 "transport": {"type": "stdio"}, "packageArguments": args,
                 "environmentVariables": env}]}))
        };
        for value in [
            "/home/alice/.ssh",
            "//home/alice/.ssh",
            "--x=//var/lib/secret",
            "--root=/root",
            "~/.aws",
            "a,/etc/shadow",
            "file:///etc/passwd",
            "db:/var/lib/x",
        ] {
            let e =
                with(json!([{"type": "positional", "value": value}]), json!([])).expect_err(value);
            assert!(e.contains("a path on the scanning machine"), "{e}");
        }
        let e = with(json!([]), json!([{"name": "DATA", "value": "/var/lib/x"}])).expect_err("env");
        assert!(e.contains("DATA names /var/lib/x"), "{e}");
        // URLs and the workspace are fine.
        assert!(
            with(
                json!([{"type": "named", "name": "--url", "value": "https://example.test/x"}]),
                json!([])
            )
            .is_ok()
        );
        assert!(
            with(
                json!([{"type": "positional", "format": "filepath", "isRequired": true}]),
                json!([])
            )
            .is_ok()
        );
    }
}
