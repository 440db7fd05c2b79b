//! The process-wide interrupt. [`install`] makes SIGINT and SIGTERM set one flag instead of
//! ending the process, before anything long starts: the synchronous phases (the `[setup]`
//! installs) poll [`requested`], and the async run turns it into a watch channel
//! ([`watch`]), so that an interrupt in any phase ends the run within about a second, with
//! what it has so far.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Makes SIGINT and SIGTERM set the interrupt flag (once per process; later calls do nothing).
/// Returns whether the handlers are in place.
pub fn install() -> bool {
    let flag = FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)));
    [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM]
        .into_iter()
        .all(|sig| signal_hook::flag::register(sig, flag.clone()).is_ok())
}

/// Whether an interrupt arrived since [`install`].
pub fn requested() -> bool {
    FLAG.get().is_some_and(|f| f.load(Ordering::Relaxed))
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
