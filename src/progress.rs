//! Progress of a run on stderr. The orchestrator emits [`ProgressEvent`]s through a
//! [`ProgressHook`] (none by default); the binary installs a terminal display ([`Display`],
//! an indicatif bar) when stderr is a terminal, and plain lines ([`Lines`]: one every few
//! seconds, none on a run shorter than that) when it is a log, unless `--no-progress`.
//! NO_COLOR and `--color never` keep the bar monochrome.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
                let shown = crate::mcp::tool::shorten(&crate::text::escape::terminal(name), 40);
                bar.set_message(format!("calling {shown}"));
            }
        })
    }

    /// Removes the bar before the report is printed.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// What a [`Lines`] display knows of the run.
#[derive(Debug, Default)]
struct RunState {
    stage: String,
    planned: Option<usize>,
    tool: Option<(usize, String)>,
}

impl RunState {
    fn line(&self, elapsed: Duration) -> String {
        let doing = match (&self.tool, self.planned) {
            (Some((position, name)), Some(total)) => format!(
                "calling tool {} of {total} ({})",
                position + 1,
                crate::mcp::tool::shorten(&crate::text::escape::terminal(name), 60)
            ),
            _ if !self.stage.is_empty() => self.stage.clone(),
            _ => "starting".into(),
        };
        format!("hintcheck: {} s: {doing}", elapsed.as_secs())
    }

    fn apply(&mut self, e: ProgressEvent<'_>) {
        match e {
            ProgressEvent::Stage(s) => {
                self.stage = s.to_string();
                self.tool = None;
            }
            ProgressEvent::Planned(n) => self.planned = Some(n),
            ProgressEvent::Tool { position, name } => {
                self.tool = Some((position, name.to_string()));
            }
        }
    }
}

/// Plain progress lines for logs (CI): every `every`, what the run is doing and for how long.
#[derive(Debug)]
pub struct Lines {
    state: Arc<Mutex<RunState>>,
    done: std::sync::mpsc::Sender<()>,
    printer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Lines {
    /// Lines on stderr every `every` until [`Lines::finish`].
    pub fn stderr(every: Duration) -> Lines {
        Self::to(every, |line| eprintln!("{line}"))
    }

    /// Lines given to `print` every `every` until [`Lines::finish`].
    pub fn to(every: Duration, print: impl Fn(&str) + Send + 'static) -> Lines {
        let state = Arc::new(Mutex::new(RunState::default()));
        let (done, stop) = std::sync::mpsc::channel::<()>();
        let shared = state.clone();
        let started = Instant::now();
        let printer = std::thread::spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(every) {
                let line = shared
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .line(started.elapsed());
                print(&line);
            }
        });
        Lines {
            state,
            done,
            printer: Mutex::new(Some(printer)),
        }
    }

    /// The hook that feeds these lines.
    pub fn hook(&self) -> ProgressHook {
        let state = self.state.clone();
        ProgressHook::new(move |e| state.lock().unwrap_or_else(|p| p.into_inner()).apply(e))
    }

    /// Stops the lines (before the report is printed).
    pub fn finish(&self) {
        let _ = self.done.send(());
        if let Some(h) = self
            .printer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = h.join();
        }
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

    #[test]
    fn lines_say_what_the_run_does_every_period_and_stop_at_finish() {
        let printed = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = printed.clone();
        let lines = Lines::to(Duration::from_millis(40), move |l| {
            sink.lock().expect("lock").push(l.to_string());
        });
        let hook = lines.hook();
        hook.emit(ProgressEvent::Stage("starting the server"));
        std::thread::sleep(Duration::from_millis(100));
        hook.emit(ProgressEvent::Planned(11));
        hook.emit(ProgressEvent::Tool {
            position: 2,
            name: "read\u{1b}[31mfile",
        });
        std::thread::sleep(Duration::from_millis(100));
        lines.finish();
        let seen = printed.lock().expect("lock").clone();
        assert!(
            seen.iter().any(|l| l.ends_with("s: starting the server")),
            "{seen:?}"
        );
        let last = seen.last().expect("lines");
        assert!(last.contains("calling tool 3 of 11 (read"), "{last}");
        assert!(!last.contains('\u{1b}'), "escaped: {last}");
        let count = seen.len();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            printed.lock().expect("lock").len(),
            count,
            "no line after finish"
        );
    }
}
