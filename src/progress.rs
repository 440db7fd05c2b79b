//! Progress of a run on stderr. The orchestrator emits [`ProgressEvent`]s through a
//! [`ProgressHook`] (none by default); the binary installs a terminal display ([`Display`],
//! an indicatif bar) only when stderr is a terminal and `--no-progress` was not given, so logs
//! and pipes never get progress noise. NO_COLOR and `--color never` keep it monochrome.

use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// What the run is doing.
#[derive(Debug, Clone, Copy)]
pub enum ProgressEvent<'a> {
    /// A stage that has no count (starting the server, listing tools, replaying, judging).
    Stage(&'a str),
    /// The tool list is known: this many tools will be called.
    Planned(usize),
    /// Calling a tool (`position` counts from 0).
    Tool {
        /// Tools done before this one.
        position: usize,
        /// The tool's name (untrusted: escaped before display).
        name: &'a str,
    },
}

type Callback = dyn Fn(ProgressEvent<'_>) + Send + Sync;

/// Where progress events go; `ProgressHook::default()` drops them.
#[derive(Clone, Default)]
pub struct ProgressHook(Option<Arc<Callback>>);

impl std::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "ProgressHook(on)"
        } else {
            "ProgressHook(off)"
        })
    }
}

impl ProgressHook {
    /// A hook calling `f` for every event.
    pub fn new(f: impl Fn(ProgressEvent<'_>) + Send + Sync + 'static) -> ProgressHook {
        ProgressHook(Some(Arc::new(f)))
    }

    /// Reports an event.
    pub fn emit(&self, event: ProgressEvent<'_>) {
        if let Some(f) = &self.0 {
            f(event);
        }
    }
}

/// A progress bar on stderr.
#[derive(Debug, Clone)]
pub struct Display {
    bar: ProgressBar,
}

impl Display {
    /// A bar drawn on stderr (callers check that stderr is a terminal first).
    pub fn stderr(color: bool) -> Display {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        let template = if color {
            "{spinner:.cyan} [{elapsed_precise}] {bar:30.cyan/blue} {pos}/{len} {msg}"
        } else {
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.enable_steady_tick(Duration::from_millis(120));
        Display { bar }
    }

    /// The hook that drives this display.
    pub fn hook(&self) -> ProgressHook {
        let bar = self.bar.clone();
        ProgressHook::new(move |e| match e {
            ProgressEvent::Stage(s) => bar.set_message(s.to_string()),
            ProgressEvent::Planned(n) => bar.set_length(n as u64),
            ProgressEvent::Tool { position, name } => {
                bar.set_position(position as u64);
                let shown = crate::mcp::tool::shorten(&crate::report::escape_untrusted(name), 40);
                bar.set_message(format!("calling {shown}"));
            }
        })
    }

    /// Removes the bar before the report is printed.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn hooks_deliver_events_and_the_default_drops_them() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let hook = ProgressHook::new(move |e| {
            if let ProgressEvent::Tool { name, .. } = e {
                sink.lock().expect("lock").push(name.to_string());
            }
        });
        hook.emit(ProgressEvent::Tool {
            position: 0,
            name: "a",
        });
        ProgressHook::default().emit(ProgressEvent::Stage("x"));
        assert_eq!(*seen.lock().expect("lock"), ["a"]);
    }
}
