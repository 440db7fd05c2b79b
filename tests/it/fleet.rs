//! The ready files for scanning on fleets, run here the way their engines would run them: the
//! Kubernetes Indexed Job's container script once per completion index (under `sh`, as in the
//! image), the GitHub workflow's scan step once per matrix job (under `bash -eo pipefail`, as
//! the runner does), each with the environment its engine sets, then their merge steps. What
//! only a cluster or a runner can check (the pod's security settings, the workflow's syntax)
//! is checked as data.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use yaml_rust2::{Yaml, YamlLoader};

use crate::util::{
    assert_self_contained, cache, hintcheck_bin, installers_present, repo, wait_within,
};

fn load(path: &str) -> Vec<Yaml> {
    let text = std::fs::read_to_string(repo().join(path)).expect(path);
    YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Runs `script` with `shell` in `cwd`, hintcheck under test first on PATH, and `env`.
fn run_script(
    shell: &[&str],
    script: &str,
    cwd: &Path,
    env: &[(String, String)],
) -> std::process::Output {
    let bin_dir = hintcheck_bin()
        .parent()
        .expect("bin dir")
        .display()
        .to_string();
    let path = format!("{bin_dir}:{}", std::env::var("PATH").unwrap_or_default());
    let mut cmd = Command::new(shell[0]);
    cmd.args(&shell[1..])
        .arg(script)
        .current_dir(cwd)
        .env("PATH", path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for k in [
        "GITHUB_STEP_SUMMARY",
        "HINTCHECK_CONFIG",
        "JOB_COMPLETION_INDEX",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("shell");
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            buf
        })
    };
    let out = reader(Box::new(child.stdout.take().expect("stdout")));
    let err = reader(Box::new(child.stderr.take().expect("stderr")));
    let status = wait_within(&mut child, Duration::from_secs(600), "a fleet script");
    std::process::Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A container's `env` entries as pairs.
fn container_env(container: &Yaml) -> Vec<(String, String)> {
    container["env"]
        .as_vec()
        .expect("env")
        .iter()
        .map(|e| {
            (
                e["name"].as_str().expect("name").to_string(),
                e["value"].as_str().expect("value").to_string(),
            )
        })
        .collect()
}

/// The environment of `container` with the paths a pod would mount replaced by ours.
fn with_local_paths(container: &Yaml, local: &[(&str, String)]) -> Vec<(String, String)> {
    container_env(container)
        .into_iter()
        .map(|(k, v)| {
            let v = local
                .iter()
                .find(|(name, _)| *name == k)
                .map_or(v, |(_, v)| v.clone());
            (k, v)
        })
        .collect()
}

/// Pairs of names and values as an environment.
fn env_of(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn merged_summary(results: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(results.join("summary.json")).expect("summary"))
        .expect("summary.json is JSON")
}

#[test]
fn the_kubernetes_indexed_job_scans_and_merges_here_as_in_a_cluster() {
    let docs = load("deploy/kubernetes/scan-job.yaml");
    let job = &docs[0];
    assert_eq!(job["kind"].as_str(), Some("Job"));
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    let completions = spec["completions"].as_i64().expect("completions");
    let pod = &spec["template"]["spec"];
    // What the sandbox needs from the pod.
    assert_eq!(pod["hostUsers"].as_bool(), Some(false), "a user namespace");
    assert_eq!(pod["restartPolicy"].as_str(), Some("Never"));
    assert!(
        pod["securityContext"]["seccompProfile"]["type"]
            .as_str()
            .is_some()
    );
    assert!(
        pod["securityContext"]["appArmorProfile"]["type"]
            .as_str()
            .is_some()
    );
    assert_eq!(pod["securityContext"]["runAsNonRoot"].as_bool(), Some(true));
    let container = &pod["containers"][0];
    let security = &container["securityContext"];
    assert_eq!(security["procMount"].as_str(), Some("Unmasked"));
    assert_eq!(security["allowPrivilegeEscalation"].as_bool(), Some(false));
    let requests = &container["resources"]["requests"];
    assert!(requests["cpu"].as_str().is_some() && requests["memory"].as_str().is_some());
    let env = container_env(container);
    let shards = env
        .iter()
        .find(|(k, _)| k == "SHARDS")
        .map(|(_, v)| v.parse::<i64>().expect("SHARDS"))
        .expect("SHARDS");
    assert_eq!(shards, completions, "SHARDS is the Job's completions");
    let mounts: Vec<&str> = container["volumeMounts"]
        .as_vec()
        .expect("mounts")
        .iter()
        .filter_map(|m| m["mountPath"].as_str())
        .collect();
    for (var, _) in env
        .iter()
        .filter(|(k, _)| ["RESULTS", "CACHE"].contains(&k.as_str()))
    {
        let value = &env.iter().find(|(k, _)| k == var).expect("var").1;
        assert!(mounts.contains(&value.as_str()), "{var}={value} is mounted");
    }
    let script = container["args"][0].as_str().expect("the script");
    assert!(script.contains("--shard \"auto/$SHARDS\"") && script.contains("--resume"));

    if !installers_present() {
        return;
    }
    // Every completion index, as the Job controller starts them.
    let dir = tempfile::tempdir().expect("tmp");
    let results = dir.path().join("results");
    std::fs::create_dir_all(&results).expect("results");
    let home = dir.path().join("home");
    let local = [
        (
            "SERVERS",
            repo()
                .join("tests/fixtures/registry/page.json")
                .display()
                .to_string(),
        ),
        ("RESULTS", results.display().to_string()),
        ("CACHE", cache()),
        ("HOME", home.display().to_string()),
    ];
    let mut pod_env = with_local_paths(container, &local);
    let run_index = |index: i64, pod_env: &mut Vec<(String, String)>| {
        pod_env.retain(|(k, _)| k != "JOB_COMPLETION_INDEX");
        pod_env.push(("JOB_COMPLETION_INDEX".into(), index.to_string()));
        run_script(&["sh", "-c"], script, dir.path(), pod_env)
    };
    for index in 0..completions {
        let o = run_index(index, &mut pod_env);
        assert!(o.status.success(), "index {index}: {}", text(&o));
        assert!(
            text(&o).contains(&format!("shard {}/{completions}", index + 1)),
            "{}",
            text(&o)
        );
    }
    let files: Vec<PathBuf> = (0..completions)
        .map(|i| results.join(format!("shard-{i}.jsonl")))
        .collect();
    assert!(files.iter().all(|f| f.is_file()), "a file per index");
    // A retried index resumes.
    let again = run_index(0, &mut pod_env);
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        text(&again).contains("already verified"),
        "{}",
        text(&again)
    );

    // The merge Job, once all indexes completed.
    let merge_docs = load("deploy/kubernetes/merge-job.yaml");
    let merge = &merge_docs[0]["spec"]["template"]["spec"]["containers"][0];
    let merge_script = merge["args"][0].as_str().expect("merge script");
    let merge_env = with_local_paths(merge, &[("RESULTS", results.display().to_string())]);
    let o = run_script(&["sh", "-c"], merge_script, dir.path(), &merge_env);
    assert!(o.status.success(), "{}", text(&o));
    let summary = merged_summary(&results);
    assert_eq!(summary["totals"]["servers"], 7, "{summary}");
    assert_eq!(summary["totals"]["skipped"], 4, "{summary}");
    assert_eq!(
        summary["shard_notes"].as_array().map(Vec::len),
        Some(0),
        "every shard is there: {summary}"
    );
    assert_self_contained(&std::fs::read_to_string(results.join("report.html")).expect("html"));
}

#[test]
fn the_github_matrix_workflow_scans_and_merges_here_as_on_a_runner() {
    let docs = load(".github/workflows/registry-scan.yml");
    let wf = &docs[0];
    let scan = &wf["jobs"]["scan"];
    let matrix = scan["strategy"]["matrix"]["shard"]
        .as_vec()
        .expect("matrix");
    let total = matrix.len();
    assert_eq!(scan["strategy"]["fail-fast"].as_bool(), Some(false));
    let job_env = &scan["env"];
    assert_eq!(
        job_env["HINTCHECK_SHARD_INDEX"].as_str(),
        Some("${{ strategy.job-index }}")
    );
    assert_eq!(
        job_env["HINTCHECK_SHARD_COUNT"].as_str(),
        Some("${{ strategy.job-total }}")
    );
    let step = |job: &Yaml, name: &str| -> String {
        job["steps"]
            .as_vec()
            .expect("steps")
            .iter()
            .find(|s| s["name"].as_str() == Some(name))
            .and_then(|s| s["run"].as_str())
            .unwrap_or_else(|| panic!("step {name}"))
            .to_string()
    };
    let scan_script = step(scan, "Scan this shard");
    let merge_script = step(&wf["jobs"]["merge"], "Merge the shards");
    for s in [&scan_script, &merge_script] {
        assert!(
            !s.contains("${{"),
            "inputs reach scripts through env only: {s}"
        );
    }
    assert_eq!(
        wf["jobs"]["merge"]["needs"].as_str(),
        Some("scan"),
        "the merge waits for every shard"
    );

    if !installers_present() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let bash = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c"];
    for index in 0..total {
        let env = env_of(&[
            ("HINTCHECK_SHARD_INDEX", index.to_string()),
            ("HINTCHECK_SHARD_COUNT", total.to_string()),
            (
                "SERVERS",
                repo()
                    .join("tests/fixtures/registry/page.json")
                    .display()
                    .to_string(),
            ),
            ("RESULTS", "results".to_string()),
            ("CACHE", cache()),
            ("JOBS", "2".to_string()),
        ]);
        let o = run_script(&bash, &scan_script, dir.path(), &env);
        assert!(o.status.success(), "matrix job {index}: {}", text(&o));
    }
    // The merge job downloads every shard's artifact into results/.
    let summary_md = dir.path().join("step-summary.md");
    let o = run_script(
        &bash,
        &merge_script,
        dir.path(),
        &env_of(&[("GITHUB_STEP_SUMMARY", summary_md.display().to_string())]),
    );
    assert!(o.status.success(), "{}", text(&o));
    let md = std::fs::read_to_string(&summary_md).expect("step summary");
    assert!(
        md.contains("7 server(s)") && md.contains("4 skipped"),
        "{md}"
    );
    let summary = merged_summary(dir.path());
    assert_eq!(summary["totals"]["servers"], 7, "{summary}");
    assert_self_contained(&std::fs::read_to_string(dir.path().join("report.html")).expect("html"));
}
