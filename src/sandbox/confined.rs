//! A program run to completion inside the sandbox, synchronously, with its output on the
//! descriptors the caller chooses: the installers of `[setup]`, whose package code must not
//! run on the host. The same init as a server's (hintcheck re-executed as `/sbin/init`, the
//! config in its environment, the control socket on fd 3) sets up the namespaces, mounts,
//! Landlock and seccomp; the caller waits for the returned child like any other and kills
//! its process group to stop it (the init's PID 1 takes everything inside with it).

#![allow(unsafe_code)]

use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use super::LaunchError;
use super::control::{self, ControlRecord, StepFailure};
use super::policy::{Enforcement, SandboxConfig};
use super::process::InitLaunch;

/// How long the sandbox may take to start the program.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// A program started in the sandbox.
#[derive(Debug)]
pub struct Confined {
    /// The sandbox's init, outside (the leader of its own process group): its exit code is
    /// the program's (128 + the signal when a signal ended it).
    pub child: Child,
    /// What the sandbox enforced.
    pub enforcement: Enforcement,
}

/// Starts `config.program` in the sandbox `config` describes, with stdin closed and its
/// output on `stdout` and `stderr`; returns once the program was executed. `exe` names the
/// hintcheck binary when the running executable is not hintcheck (a test binary).
pub fn spawn(
    config: &SandboxConfig,
    exe: Option<&Path>,
    stdout: Stdio,
    stderr: Stdio,
) -> Result<Confined, LaunchError> {
    let InitLaunch {
        exe: _exe,
        host_end,
        init_end,
        mut command,
    } = InitLaunch::prepare(config, exe)?;
    command.stdin(Stdio::null()).stdout(stdout).stderr(stderr);
    let mut child = command.spawn().map_err(InitLaunch::spawn_failed)?;
    drop(init_end);
    // Read until the program's execve closes the channel (or a step fails), in a thread so
    // that a stuck init cannot hold the caller past the timeout.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut enforced = None;
        let outcome = loop {
            match control::recv(host_end.as_fd()) {
                Ok(Some((ControlRecord::Enforced(e), _))) => enforced = Some(e),
                Ok(Some((ControlRecord::Failed(f), _))) => break Err(f),
                Ok(Some(_)) => {}
                Ok(None) => break Ok(enforced),
                Err(e) => {
                    break Err(StepFailure {
                        step: "control".into(),
                        errno: e.raw_os_error(),
                        message: format!("reading the control channel: {e}"),
                    });
                }
            }
        };
        let _ = tx.send(outcome);
    });
    let stop = |child: &mut Child| {
        let _ = rustix::process::kill_process_group(
            rustix::process::Pid::from_child(child),
            rustix::process::Signal::KILL,
        );
        let _ = child.wait();
    };
    match rx.recv_timeout(START_TIMEOUT) {
        Ok(Ok(Some(enforcement))) => Ok(Confined { child, enforcement }),
        Ok(Ok(None)) => {
            stop(&mut child);
            Err(LaunchError::Sandbox(StepFailure {
                step: "init".into(),
                errno: None,
                message: "the sandbox init ended before starting the program".into(),
            }))
        }
        Ok(Err(f)) => {
            stop(&mut child);
            Err(LaunchError::Sandbox(f))
        }
        Err(_) => {
            stop(&mut child);
            Err(LaunchError::Sandbox(StepFailure {
                step: "start".into(),
                errno: None,
                message: format!("the sandbox did not start the program within {START_TIMEOUT:?}"),
            }))
        }
    }
}
