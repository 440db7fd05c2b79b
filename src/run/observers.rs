//! The observers of a run, built once before the server starts: file snapshots and change
//! notifications over the scratch directories (and, in the sandbox, its private /tmp, /var/tmp,
//! /dev/shm and the overlays' upper layers), seccomp write and network attempts, and the
//! network observer; and the coverage statement the report makes about them.

use std::path::PathBuf;

use super::server::{RunContext, SANDBOX_RESOLVER};
use crate::config::RunConfig;
use crate::evidence::Coverage;
use crate::observe::Recorder;
use crate::observe::attempts::AttemptObserver;
use crate::observe::fs::{
    FsSnapshotObserver, OverlayRoot, SandboxDir, SnapshotLimits, SnapshotRoot,
};
use crate::observe::inotify::InotifyObserver;
use crate::observe::reads::SecretReads;
use crate::sandbox::policy::TEMPORARY_PLACES;
use crate::sandbox::scratch::Scratch;

/// The recorder over every observer of the run, and what they cover.
pub(super) fn build(
    config: &RunConfig,
    scratch: &Scratch,
    ctx: &RunContext<'_>,
) -> (Recorder, Coverage) {
    let scratch_roots = vec![
        SnapshotRoot::new("$WORKSPACE", scratch.workspace.clone()),
        SnapshotRoot::new("$HOME", scratch.home.clone()),
        SnapshotRoot::new("$TMPDIR", scratch.tmp.clone()),
    ];
    // Change notifications from now on: what the harness did to the scratch directories is
    // over (seed, sandbox preparation).
    let mut inotify_observer = InotifyObserver::new(&scratch_roots);
    let notified = inotify_observer.is_active();
    // The planted secrets: never opened by the snapshots, so that every read of one is the
    // server's.
    let secret_files = ctx
        .secrets
        .as_ref()
        .map(|w| w.secret_files(&scratch.home, &scratch.workspace))
        .unwrap_or_default();
    let decoys = ctx
        .secrets
        .as_ref()
        .map(|w| w.decoy_files(&scratch.workspace))
        .unwrap_or_default();
    let unread: Vec<PathBuf> = secret_files
        .iter()
        .map(|f| f.path.clone())
        .chain(decoys.iter().cloned())
        .collect();
    let mut fs_observer =
        FsSnapshotObserver::never_reading(scratch_roots, SnapshotLimits::default(), &unread);
    fs_observer.follow(inotify_observer.feed());
    let read_only_shown = &ctx.placement.shown_temporary;
    if config.sandbox.level.is_some() {
        // In the sandbox's temporary places, the scratch root is watched through the scratch
        // roots, the overlays through their own roots, and the read-only entries the server
        // runs on cannot change: walk none of them twice.
        let scratch_root = scratch.root().map(|p| p.to_path_buf()).unwrap_or_default();
        let sandbox_dirs: Vec<SandboxDir> = TEMPORARY_PLACES
            .iter()
            .map(|place| {
                let mut skip: Vec<String> = read_only_shown
                    .iter()
                    .chain(config.sandbox.overlays.iter())
                    .chain(std::iter::once(&scratch_root))
                    .filter_map(|p| p.strip_prefix(place).ok())
                    .filter_map(|rel| rel.components().next())
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                skip.sort();
                skip.dedup();
                SandboxDir::new(place, skip)
            })
            .collect();
        inotify_observer.watch_sandbox_dirs(sandbox_dirs.clone());
        fs_observer.watch_sandbox_dirs(sandbox_dirs);
        // Overlays through their layers: only what the upper layer holds is walked (and
        // watched for writes that do not last).
        let overlays: Vec<OverlayRoot> = config
            .sandbox
            .overlays
            .iter()
            .enumerate()
            .map(|(i, d)| OverlayRoot {
                label: d.display().to_string(),
                lower: d.clone(),
                upper: crate::sandbox::scratch::overlay_dir(&scratch_root, i).join("upper"),
            })
            .collect();
        inotify_observer.watch_overlay_uppers(&overlays);
        fs_observer.watch_overlays(overlays);
    }
    let snapshot_gap = (fs_observer.gap_flag(), fs_observer.max_depth());
    let mut observers: Vec<Box<dyn crate::observe::Observer>> =
        vec![Box::new(fs_observer), Box::new(inotify_observer)];
    if !secret_files.is_empty() {
        observers.push(Box::new(SecretReads::new(secret_files, &decoys)));
    }
    if config.sandbox.level.is_some() {
        let mut writable: Vec<PathBuf> = vec![
            scratch.workspace.clone(),
            scratch.home.clone(),
            scratch.tmp.clone(),
        ];
        writable.extend(TEMPORARY_PLACES.map(PathBuf::from));
        writable.extend(config.sandbox.overlays.iter().cloned());
        writable.extend(ctx.placement.identity.home.clone());
        let resolver = SANDBOX_RESOLVER
            .parse()
            .unwrap_or(std::net::IpAddr::from([192, 0, 2, 53]));
        // The scratch root itself is read-only inside (only its three directories are not).
        let mut read_only = read_only_shown.clone();
        read_only.extend(scratch.root().map(|p| p.to_path_buf()));
        observers.push(Box::new(
            AttemptObserver::new(writable, read_only, resolver)
                .seeing_snapshot_gaps(snapshot_gap.0, snapshot_gap.1),
        ));
        observers.push(Box::new(
            crate::observe::net::NetObserver::new(config.sandbox.observe_ports.clone())
                .ignoring_harness_port(ctx.http_port),
        ));
    }
    let mut recorder = Recorder::new(observers);
    if let Some(watch) = &ctx.secrets {
        recorder.watch_secrets(
            watch.clone(),
            vec![
                ("$HOME".into(), scratch.home.clone()),
                ("$TMPDIR".into(), scratch.tmp.clone()),
            ],
        );
    }
    let coverage = Coverage {
        files: Some(format!(
            "{}{}",
            if config.sandbox.level.is_some() {
                "$WORKSPACE, $HOME, $TMPDIR and the sandbox's /tmp, /var/tmp, /dev/shm (effects); write attempts anywhere (seccomp)"
            } else {
                "$WORKSPACE, $HOME, $TMPDIR only (effects), the weaker mode without a sandbox: writes elsewhere and write attempts are unseen"
            },
            match (notified, config.sandbox.level.is_some()) {
                (true, true) => "; writes that did not last under $WORKSPACE, $HOME, $TMPDIR and the sandbox's /tmp, /var/tmp, /dev/shm (inotify)",
                (true, false) => "; writes that did not last under $WORKSPACE, $HOME, $TMPDIR (inotify)",
                (false, _) => "",
            }
        )),
        network: config.sandbox.level.is_some().then(|| {
            format!("DNS questions with their names, connect, sendto and sendmmsg attempts (seccomp), every outgoing TCP SYN and every packet of another IP protocol on lo (UDP on any port and with any payload, UDP-Lite, SCTP, ICMP) whatever sent it (a packet socket, where the sandbox says it made one), TLS SNI and HTTP requests on ports {}, and what a TCP connection past loopback to any other port sends (a listener opened for it)", config.sandbox.observe_ports.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", "))
        }),
    };
    (recorder, coverage)
}
