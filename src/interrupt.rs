//! The process-wide interrupt. [`install`] makes SIGINT and SIGTERM set one flag instead of
//! ending the process, before anything long starts: the synchronous phases (the `[setup]`
//! installs) poll [`requested`], and the async run turns it into a watch channel
//! ([`watch`]), so that an interrupt in any phase ends the run within about a second, with
//! what it has so far. The signal that came is kept: an interrupted run exits 128 plus its
//! number (130 for SIGINT, 143 for SIGTERM), as shells expect ([`exit_code`]).

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::watch;

/// The number of the last interrupting signal that came (0: none).
static SIGNAL: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

/// Makes SIGINT and SIGTERM set the interrupt flag (once per process; later calls do nothing).
/// Returns whether the handlers are in place.
pub fn install() -> bool {
    let flag = SIGNAL.get_or_init(|| Arc::new(AtomicUsize::new(0)));
    [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM]
        .into_iter()
        .all(|sig| signal_hook::flag::register_usize(sig, flag.clone(), sig as usize).is_ok())
}

/// Whether an interrupt arrived since [`install`].
pub fn requested() -> bool {
    signal().is_some()
}

/// The signal that interrupted the process, if one did.
pub fn signal() -> Option<i32> {
    SIGNAL
        .get()
        .map(|f| f.load(Ordering::Relaxed))
        .filter(|&n| n != 0)
        .map(|n| n as i32)
}

/// The exit code of a process the signal interrupted: 128 plus its number.
pub fn exit_code() -> Option<i32> {
    signal().map(|n| 128 + n)
}

/// The interrupting signal's name (`SIGINT`, `SIGTERM`).
pub fn signal_name() -> Option<&'static str> {
    signal().map(|n| match n {
        signal_hook::consts::SIGINT => "SIGINT",
        signal_hook::consts::SIGTERM => "SIGTERM",
        _ => "a signal",
    })
}

/// A receiver that turns true at the first interrupt (inside a runtime): at once when one
/// already arrived, else when the next SIGINT or SIGTERM comes.
pub fn watch() -> watch::Receiver<bool> {
    let (stop_tx, stop_rx) = watch::channel(requested());
    if !requested() {
        tokio::spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                return;
            };
            // One that came while the listeners were being made set the flag only.
            if !requested() {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            let _ = stop_tx.send(true);
        });
    }
    stop_rx
}
