//! What the server may do at each moment: the hints each tool declared (as the host last
//! listed them), the policy a call of a tool runs under, the calls in flight and those held
//! back until the calls of another policy have answered (a call that may write never widens
//! a read-only call's window), and which processes and threads acted for which tool, so that
//! work a call left behind can be named after it.

use std::collections::{HashMap, VecDeque};

use serde::Serialize;
use serde_json::Value;

/// The hints of one tool as declared: only JSON booleans count; anything else is absent, and
/// an absent hint means the protocol's worst case. Hints the tool did not declare may be
/// filled from a verification (`--policy`): `learned` says which.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Hints {
    /// `readOnlyHint`.
    pub read_only: Option<bool>,
    /// `destructiveHint`.
    pub destructive: Option<bool>,
    /// `openWorldHint`.
    pub open_world: Option<bool>,
    /// The hints that come from the verification, not the tool's declaration.
    pub learned: Learned3,
}

/// Which of the three enforced hints were filled from a verification.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Learned3 {
    /// `readOnlyHint`.
    pub read_only: bool,
    /// `destructiveHint`.
    pub destructive: bool,
    /// `openWorldHint`.
    pub open_world: bool,
}

impl Hints {
    /// Whether `rule` (which holds for these hints) holds only by what was filled from the
    /// verification.
    pub fn learned_for(&self, rule: Rule) -> bool {
        match rule {
            Rule::ReadOnly => self.learned.read_only,
            // Non-destructive by a declared readOnlyHint: true or destructiveHint: false.
            Rule::NonDestructive => {
                let by_declared_read_only = self.read_only == Some(true) && !self.learned.read_only;
                let by_declared_destructive =
                    self.destructive == Some(false) && !self.learned.destructive;
                !by_declared_read_only && !by_declared_destructive
            }
            Rule::ClosedWorld => self.learned.open_world,
        }
    }
}

/// The hints a verification supports for each tool (`--policy REPORT.json`: a `hintcheck
/// verify --format json` report): those backed by observations (`observed`, `consistent`),
/// with the tool's definition they were seen on.
#[derive(Debug, Clone, Default)]
pub struct Learned {
    tools: HashMap<String, (Option<String>, Hints)>,
}

impl Learned {
    /// Reads a verify JSON report.
    pub fn from_report(text: &str) -> Result<Learned, String> {
        let report: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let tools = report
            .get("tools")
            .and_then(Value::as_array)
            .ok_or("not a hintcheck verify JSON report (it has no tools[])")?;
        let mut out = Learned::default();
        for t in tools {
            let Some(name) = t.get("name").and_then(Value::as_str) else {
                continue;
            };
            let sha = t
                .get("definition_sha256")
                .and_then(Value::as_str)
                .map(String::from);
            let mut hints = Hints::default();
            for s in t
                .get("supported")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let backed = matches!(
                    s.get("basis").and_then(Value::as_str),
                    Some("observed" | "consistent")
                );
                let value = s.get("value").and_then(Value::as_bool);
                let (Some(value), true) = (value, backed) else {
                    continue;
                };
                match s.get("hint").and_then(Value::as_str) {
                    Some("readOnlyHint") => hints.read_only = Some(value),
                    Some("destructiveHint") => hints.destructive = Some(value),
                    Some("openWorldHint") => hints.open_world = Some(value),
                    _ => {}
                }
            }
            out.tools.insert(name.to_string(), (sha, hints));
        }
        Ok(out)
    }

    /// How many tools it knows.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether it knows no tool.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// `declared` with its absent hints filled for the tool `name` defined as `definition`
    /// (never a declared one changed); a note when the definition changed since the report.
    pub fn fill(&self, name: &str, definition: &Value, declared: Hints) -> (Hints, Option<String>) {
        let Some((sha, learned)) = self.tools.get(name) else {
            return (declared, None);
        };
        if let Some(sha) = sha {
            let now = crate::mcp::tool::sha256_hex(definition.to_string().as_bytes());
            if &now != sha {
                return (
                    declared,
                    Some(format!(
                        "tool {name} is defined otherwise than in the --policy report: its declared hints only"
                    )),
                );
            }
        }
        let mut out = declared;
        if out.read_only.is_none() && learned.read_only.is_some() {
            out.read_only = learned.read_only;
            out.learned.read_only = true;
        }
        if out.destructive.is_none() && learned.destructive.is_some() {
            out.destructive = learned.destructive;
            out.learned.destructive = true;
        }
        if out.open_world.is_none() && learned.open_world.is_some() {
            out.open_world = learned.open_world;
            out.learned.open_world = true;
        }
        (out, None)
    }
}

impl Hints {
    /// The stricter of each hint of `self` and `other`.
    pub fn strictest(self, other: Hints) -> Hints {
        let pick = |a: Option<bool>, b: Option<bool>, strict: bool| {
            if a == Some(strict) || b == Some(strict) {
                Some(strict)
            } else {
                a.or(b)
            }
        };
        Hints {
            read_only: pick(self.read_only, other.read_only, true),
            destructive: pick(self.destructive, other.destructive, false),
            open_world: pick(self.open_world, other.open_world, false),
            learned: Learned3 {
                read_only: self.learned.read_only && other.learned.read_only,
                destructive: self.learned.destructive && other.learned.destructive,
                open_world: self.learned.open_world && other.learned.open_world,
            },
        }
    }

    /// The hints of a tool definition (its `annotations`).
    pub fn of_tool(tool: &Value) -> Hints {
        let a = tool.get("annotations");
        let flag = |name: &str| a.and_then(|a| a.get(name)).and_then(Value::as_bool);
        Hints {
            read_only: flag("readOnlyHint"),
            destructive: flag("destructiveHint"),
            open_world: flag("openWorldHint"),
            learned: Learned3::default(),
        }
    }
}

/// What a window allows: each restriction is on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Policy {
    /// No write outside the server's own state (`readOnlyHint: true`, and outside calls).
    pub read_only: bool,
    /// No delete, truncation or rename over existing content (`destructiveHint: false`).
    pub non_destructive: bool,
    /// No DNS lookup, connection or datagram past loopback (`openWorldHint: false`).
    pub closed_world: bool,
}

impl Policy {
    /// Outside every call (start-up, background work, a timer after the answer): the
    /// server's own state only, and no network.
    pub const OUTSIDE_CALLS: Policy = Policy {
        read_only: true,
        non_destructive: true,
        closed_world: true,
    };

    /// Before the first call with `--allow-startup-writes`: additive writes in the shared
    /// directories (a server that creates its database or log directory as it starts), no
    /// network.
    pub const STARTING: Policy = Policy {
        read_only: false,
        non_destructive: true,
        closed_world: true,
    };

    /// A call of a tool with `hints`. A tool declared read-only is non-destructive too (the
    /// protocol: `destructiveHint` is meaningful only when `readOnlyHint` is false).
    pub fn of(hints: &Hints) -> Policy {
        let read_only = hints.read_only == Some(true);
        Policy {
            read_only,
            non_destructive: read_only || hints.destructive == Some(false),
            closed_world: hints.open_world == Some(false),
        }
    }

    /// What two calls in flight together allow (with `--no-serialize`): the wider of each.
    pub fn widest(self, other: Policy) -> Policy {
        Policy {
            read_only: self.read_only && other.read_only,
            non_destructive: self.non_destructive && other.non_destructive,
            closed_world: self.closed_world && other.closed_world,
        }
    }

    /// Whether it restricts the filesystem at all.
    pub fn restricts_files(self) -> bool {
        self.read_only || self.non_destructive
    }
}

/// Which hint a refusal enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// `readOnlyHint: true` (and outside calls: the server's own state only).
    ReadOnly,
    /// `destructiveHint: false`.
    NonDestructive,
    /// `openWorldHint: false` (and outside calls: no network).
    ClosedWorld,
}

impl Rule {
    /// The hint under its protocol name.
    pub fn hint(self) -> &'static str {
        match self {
            Rule::ReadOnly => "readOnlyHint",
            Rule::NonDestructive => "destructiveHint",
            Rule::ClosedWorld => "openWorldHint",
        }
    }

    /// The declaration it enforces.
    pub fn declared(self) -> &'static str {
        match self {
            Rule::ReadOnly => "readOnlyHint: true",
            Rule::NonDestructive => "destructiveHint: false",
            Rule::ClosedWorld => "openWorldHint: false",
        }
    }

    /// Why it holds outside every call.
    pub fn outside(self) -> &'static str {
        match self {
            Rule::ClosedWorld => "outside a call the server has no network",
            Rule::NonDestructive => {
                "before the first call the server may add to the shared directories, not delete, truncate or replace (--allow-startup-writes)"
            }
            Rule::ReadOnly => "outside a call the server may change only its own state directory",
        }
    }
}

/// A call the host made: its JSON-RPC id (as its JSON text), the tool, the policy, the hints.
#[derive(Debug, Clone)]
pub struct Call {
    /// The request's id as JSON text (`7`, `"abc"`).
    pub id: String,
    /// The tool's name.
    pub tool: String,
    /// What its hints allow.
    pub policy: Policy,
    /// The hints it runs under.
    pub hints: Hints,
}

/// A call in flight, with what was refused in its window.
#[derive(Debug)]
struct InFlight {
    call: Call,
    refused: Vec<String>,
}

/// Who is acting now: the policy in force and the calls whose window it is (none: outside
/// calls).
#[derive(Debug, Clone)]
pub struct Now {
    /// The policy in force.
    pub policy: Policy,
    /// The calls in flight.
    pub calls: Vec<Call>,
}

/// The window of a call as it was, to name the tool whose call started a thread or process
/// that acts after the answer.
#[derive(Debug)]
struct Past {
    tool: String,
    /// When it opened and closed, on the boot clock (nanoseconds).
    opened: u64,
    closed: Option<u64>,
    id: String,
}

/// A call whose answer came, with what was refused in its window.
pub type Ended = (Call, Vec<String>);

/// Most past windows kept.
const HISTORY_CAP: usize = 512;

/// Nanoseconds on the boot clock (the clock of a process's start time in /proc).
pub fn boot_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    (t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64
}

/// What is known of the tools a thread or process acted for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Acted {
    /// One tool only.
    One(String),
    /// Several: it cannot be said for which a later act was.
    Several,
}

/// The proxy's view of the session, shared by the two directions of the proxy and the
/// arbiter.
#[derive(Debug, Default)]
pub struct Window {
    tools: HashMap<String, Hints>,
    in_flight: Vec<InFlight>,
    held: VecDeque<(Call, Vec<u8>)>,
    no_serialize: bool,
    /// Hints filled from a verification.
    learned: Learned,
    /// Additive writes in the shared directories are allowed until the first call.
    startup_writes: bool,
    /// The last listing had more tools than guard holds.
    overflowed: bool,
    /// Whether a call was ever in flight.
    called: bool,
    /// Processes and threads that acted in calls' windows, and for which tools.
    lineage: HashMap<u32, Acted>,
    /// Past and present windows, newest last.
    history: VecDeque<Past>,
    /// `tools/list` requests of the host not yet answered (id text → whether it asked a later
    /// page).
    listing: HashMap<String, bool>,
    /// A whole listing was read since the start (or since the server said its tools changed).
    listed_once: bool,
    /// Guard's own `tools/list` in flight.
    fetch: Option<Fetch>,
    /// Guard's own listings asked so far.
    fetches: u64,
    /// Lines with calls of tools guard has not seen listed, waiting for its own listing.
    awaiting: Vec<Awaiting>,
    /// Several hosts share the server: listings only tighten hints.
    never_relax: bool,
    /// The server said its tools changed since the last whole listing.
    changed: bool,
    /// Makes guard's own listings' ids its own (no host's id meets them).
    nonce: u64,
}

/// A line of the host waiting for guard's own listing.
#[derive(Debug)]
struct Awaiting {
    /// Its calls: (id, tool).
    calls: Vec<(String, String)>,
    line: Vec<u8>,
    /// A batch, which goes whole.
    batch: bool,
}

/// Most lines waiting for guard's own listing; past it, calls of unknown tools go at once
/// under the strictest hints.
const AWAITING_CAP: usize = 4096;

/// Guard's own `tools/list` request in flight.
#[derive(Debug)]
struct Fetch {
    /// Its id text.
    id: String,
    /// The `_meta` its pages carry.
    meta: Option<Value>,
}

/// Guard's own `tools/list` request (`meta`: the `_meta` of the 2026-07-28 era to carry).
fn listing_request(id: &str, meta: Option<&Value>, cursor: Option<&str>) -> Vec<u8> {
    let mut params = serde_json::Map::new();
    if let Some(meta) = meta {
        params.insert("_meta".into(), meta.clone());
    }
    if let Some(cursor) = cursor {
        params.insert("cursor".into(), Value::String(cursor.into()));
    }
    serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/list",
        "params": params,
    }))
    .unwrap_or_default()
}

/// Most processes and threads whose tool is remembered.
const LINEAGE_CAP: usize = 4096;

impl Window {
    /// A window that serializes calls of different policies unless `no_serialize`.
    pub fn new(no_serialize: bool, learned: Learned) -> Window {
        Window {
            no_serialize,
            learned,
            ..Window::default()
        }
    }

    /// Listings only tighten hints from now on (a server several hosts share).
    pub fn share(&mut self) {
        self.never_relax = true;
    }

    /// Allows additive writes in the shared directories until the first call
    /// (`--allow-startup-writes`).
    pub fn allow_startup_writes(&mut self) {
        self.startup_writes = true;
    }

    /// The hints in force for `tool` (absent hints: the worst case; a tool past the cap of a
    /// listing too long to hold, or called before any listing could be read: the strictest).
    pub fn hints_of(&self, tool: &str) -> Hints {
        match self.tools.get(tool) {
            Some(h) => *h,
            None if self.overflowed || !self.listed_once => Hints {
                read_only: Some(true),
                destructive: Some(false),
                open_world: Some(false),
                learned: Learned3::default(),
            },
            None => Hints::default(),
        }
    }

    /// Replaces the hints of the listed tools (`first_page`: a listing without a cursor
    /// starts afresh; later pages add to it), filled from the verification where given. At
    /// most 10,000 tools are kept. Returns notes for the user (definitions that changed).
    pub fn listed(&mut self, tools: &[Value], first_page: bool, last_page: bool) -> Vec<String> {
        // On a server several hosts share, one host's listing never relaxes what another was
        // shown (hints only tighten), unless the server said its tools changed since.
        let replace = first_page && (!self.never_relax || self.changed);
        let notes = self.read_listing(tools, replace);
        if last_page {
            self.listed_once = true;
            self.changed = false;
        }
        notes
    }

    /// Reads listed `tools`; `replace`: they replace what was known (a host's new listing),
    /// otherwise a known tool keeps the stricter of each hint (guard's own listing, which no
    /// host saw, and listings on a shared server).
    fn read_listing(&mut self, tools: &[Value], replace: bool) -> Vec<String> {
        if replace {
            self.tools.clear();
            self.overflowed = false;
        }
        let mut notes = Vec::new();
        for t in tools {
            let Some(name) = t.get("name").and_then(Value::as_str) else {
                continue;
            };
            if self.tools.len() >= 10_000 && !self.tools.contains_key(name) {
                // Past the cap, tools guard cannot hold are held to the strictest hints.
                self.overflowed = true;
                continue;
            }
            let (hints, note) = self.learned.fill(name, t, Hints::of_tool(t));
            notes.extend(note);
            // A name listed twice: the stricter of each hint (a host may keep either).
            let hints = match self.tools.get(name) {
                Some(before) => before.strictest(hints),
                None => hints,
            };
            self.tools.insert(name.to_string(), hints);
        }
        notes
    }

    /// Whether a call of `tool` must wait for guard's own listing: nothing was listed since
    /// the start (a host that kept the listing of an earlier run, a stateless host that
    /// caches it) or since the server said its tools changed, and the tool is unknown. Past
    /// [`AWAITING_CAP`] waiting lines, calls go at once under the strictest hints.
    pub fn needs_listing(&self, tool: &str) -> bool {
        !self.listed_once
            && !self.overflowed
            && !self.tools.contains_key(tool)
            && self.awaiting.len() < AWAITING_CAP
    }

    /// Holds `line` (with `calls`: id and tool; `batch`: it goes whole) until guard's own
    /// listing is read; returns that listing's request when none is in flight yet. `meta` is
    /// the call's `_meta` (the 2026-07-28 era's protocol version and capabilities, which the
    /// listing needs as well).
    pub fn await_listing(
        &mut self,
        calls: Vec<(String, String)>,
        line: Vec<u8>,
        batch: bool,
        meta: Option<Value>,
    ) -> Option<Vec<u8>> {
        self.awaiting.push(Awaiting { calls, line, batch });
        if self.fetch.is_some() {
            return None;
        }
        self.fetches += 1;
        let id = self.listing_id();
        let request = listing_request(&id, meta.as_ref(), None);
        self.fetch = Some(Fetch {
            id: Value::String(id).to_string(),
            meta,
        });
        Some(request)
    }

    /// The id of guard's next own listing request.
    fn listing_id(&mut self) -> String {
        if self.nonce == 0 {
            let mut bytes = [0u8; 8];
            let _ = rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty());
            self.nonce = u64::from_le_bytes(bytes) | 1;
        }
        format!(
            "hintcheck-guard-listing-{:016x}-{}",
            self.nonce, self.fetches
        )
    }

    /// Whether `id` is guard's own listing's (and no call of the host's bears it).
    pub fn fetching(&self, id: &str) -> bool {
        self.fetch.as_ref().is_some_and(|f| f.id == id)
            && !self.in_flight.iter().any(|f| f.call.id == id)
    }

    /// Answer `id` of the server, when it answers guard's own listing: `Some(lines to send to
    /// the server)` (the next page's request, or the waiting calls that may go now), and the
    /// answer goes no further; `None` for any other answer.
    pub fn fetch_answered(&mut self, id: &str, result: Option<&Value>) -> Option<Vec<Vec<u8>>> {
        let Fetch { meta, .. } = self.fetch.take_if(|f| f.id == id)?;
        if let Some(tools) = result
            .and_then(|r| r.get("tools"))
            .and_then(Value::as_array)
        {
            // No host saw this listing: it adds what was unknown, and tightens at most.
            for note in self.read_listing(tools, false) {
                eprintln!("hintcheck guard: {note}");
            }
        }
        if let Some(cursor) = result
            .and_then(|r| r.get("nextCursor"))
            .and_then(Value::as_str)
            .filter(|_| self.fetches < 10_000)
        {
            self.fetches += 1;
            let next = self.listing_id();
            let request = listing_request(&next, meta.as_ref(), Some(cursor));
            self.fetch = Some(Fetch {
                id: Value::String(next).to_string(),
                meta,
            });
            return Some(vec![request]);
        }
        // Listed, or the server would not list: the waiting calls go under what is known
        // (an unknown tool: the worst case, as a tool without hints).
        self.listed_once = true;
        let mut go = Vec::new();
        for waiting in std::mem::take(&mut self.awaiting) {
            go.extend(self.enter(waiting.calls, waiting.line, waiting.batch));
        }
        Some(go)
    }

    /// The server said its tools changed: the next call of a tool guard does not know waits
    /// for a listing again.
    pub fn tools_changed(&mut self) {
        self.listed_once = false;
        self.changed = true;
    }

    /// The host asked `tools/list` with request `id` (`first_page`: without a cursor).
    pub fn listing_asked(&mut self, id: String, first_page: bool) {
        if self.listing.len() < 64 {
            self.listing.insert(id, first_page);
        }
    }

    /// Whether response `id` answers a listing, and whether it was a first page.
    pub fn listing_answered(&mut self, id: &str) -> Option<bool> {
        self.listing.remove(id)
    }

    /// The policy in force now and the calls whose window it is.
    pub fn now(&self) -> Now {
        let mut calls = self.in_flight.iter().map(|f| f.call.clone());
        match calls.next() {
            None => Now {
                policy: if self.startup_writes && !self.called {
                    Policy::STARTING
                } else {
                    Policy::OUTSIDE_CALLS
                },
                calls: Vec::new(),
            },
            Some(first) => {
                let mut policy = first.policy;
                let mut all = vec![first];
                for c in calls {
                    policy = policy.widest(c.policy);
                    all.push(c);
                }
                Now { policy, calls: all }
            }
        }
    }

    /// Host line `line` with `calls` (id and tool), under the hints known now: `Some(line)`
    /// to send it on now, `None` when its call is held (see [`Window::admit`]). A batch goes
    /// whole: its calls are in flight together, whatever their policies.
    pub fn enter(
        &mut self,
        calls: Vec<(String, String)>,
        line: Vec<u8>,
        batch: bool,
    ) -> Option<Vec<u8>> {
        let mut calls: Vec<Call> = calls
            .into_iter()
            .map(|(id, tool)| {
                let hints = self.hints_of(&tool);
                Call {
                    id,
                    tool,
                    policy: Policy::of(&hints),
                    hints,
                }
            })
            .collect();
        match (calls.len(), batch) {
            (0, _) => Some(line),
            (1, false) => self.admit(calls.pop().expect("one call"), line),
            _ => {
                for c in calls {
                    self.force(c);
                }
                Some(line)
            }
        }
    }

    /// A call the host asked for: `Some(line)` to send it on now (it is in flight from now
    /// on), `None` when it is held until the calls of another policy have answered.
    pub fn admit(&mut self, call: Call, line: Vec<u8>) -> Option<Vec<u8>> {
        let fits = self.no_serialize
            || (self.held.is_empty()
                && self.in_flight.iter().all(|f| f.call.policy == call.policy));
        if fits {
            self.open(call);
            Some(line)
        } else {
            self.held.push_back((call, line));
            None
        }
    }

    /// A call in flight at once whatever its policy (a call inside a batch, which goes whole).
    pub fn force(&mut self, call: Call) {
        self.open(call);
    }

    /// `call`'s window opens.
    fn open(&mut self, call: Call) {
        self.called = true;
        if self.history.len() >= HISTORY_CAP {
            self.history.pop_front();
        }
        self.history.push_back(Past {
            tool: call.tool.clone(),
            opened: boot_ns(),
            closed: None,
            id: call.id.clone(),
        });
        self.in_flight.push(InFlight {
            call,
            refused: Vec::new(),
        });
    }

    /// The host cancelled request `id`: true when it was held or waiting for guard's listing
    /// (it is dropped, and the server never hears of it).
    pub fn cancel_held(&mut self, id: &str) -> bool {
        let before = self.held.len() + self.awaiting.len();
        self.held.retain(|(c, _)| c.id != id);
        self.awaiting
            .retain(|a| a.batch || a.calls.iter().all(|(c, _)| c != id));
        self.held.len() + self.awaiting.len() != before
    }

    /// Response `id` came: the call leaves the window. Returns it with what was refused in
    /// its window, and the held calls that may go now (in flight from now on).
    pub fn answered(&mut self, id: &str) -> (Option<Ended>, Vec<Vec<u8>>) {
        let ended = self
            .in_flight
            .iter()
            .position(|f| f.call.id == id)
            .map(|i| self.in_flight.remove(i))
            .map(|f| (f.call, f.refused));
        if ended.is_some() {
            let now = boot_ns();
            if let Some(p) = self
                .history
                .iter_mut()
                .rev()
                .find(|p| p.id == id && p.closed.is_none())
            {
                p.closed = Some(now);
            }
        }
        let mut released = Vec::new();
        while let Some((next, _)) = self.held.front() {
            let fits = self.in_flight.iter().all(|f| f.call.policy == next.policy);
            if !fits {
                break;
            }
            let (call, line) = self.held.pop_front().expect("front exists");
            self.open(call);
            released.push(line);
        }
        (ended, released)
    }

    /// Notes a refusal in the windows of the calls in flight.
    pub fn note_refusal(&mut self, what: &str) {
        for f in &mut self.in_flight {
            if f.refused.len() < 32 {
                f.refused.push(what.to_string());
            }
        }
    }

    /// Remembers that thread `id` acted for `tool`.
    pub fn acted_for(&mut self, id: u32, tool: &str) {
        let full = self.lineage.len() >= LINEAGE_CAP;
        match self.lineage.get_mut(&id) {
            Some(acted @ Acted::One(_)) if *acted != Acted::One(tool.to_string()) => {
                *acted = Acted::Several;
            }
            Some(_) => {}
            None if !full => {
                self.lineage.insert(id, Acted::One(tool.to_string()));
            }
            None => {}
        }
    }

    /// The tool whose call left behind the work of a thread acting outside every call: the
    /// one call whose window was open when the thread (`thread_started`, boot clock, with the
    /// 10 ms granularity of /proc) or else its process (`process_started`) started, or the one
    /// tool the thread acted for before. `None` when it cannot be told.
    pub fn armed_by(
        &self,
        tid: u32,
        thread_started: Option<u64>,
        process_started: Option<u64>,
    ) -> Option<String> {
        const TICK: u64 = 10_000_000;
        let during = |start: u64| {
            let mut tools = self
                .history
                .iter()
                .filter(|p| p.opened < start + TICK && p.closed.is_none_or(|c| c >= start))
                .map(|p| p.tool.as_str());
            let first = tools.next()?;
            tools.all(|t| t == first).then(|| first.to_string())
        };
        thread_started
            .and_then(during)
            .or_else(|| process_started.and_then(during))
            .or_else(|| match self.lineage.get(&tid) {
                Some(Acted::One(t)) => Some(t.clone()),
                _ => None,
            })
    }

    /// How many calls are held back.
    pub fn held(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str, policy: Policy) -> Call {
        Call {
            id: id.into(),
            tool: format!("tool-{id}"),
            policy,
            hints: Hints::default(),
        }
    }

    const OPEN: Policy = Policy {
        read_only: false,
        non_destructive: false,
        closed_world: false,
    };

    #[test]
    fn only_boolean_hints_count_and_read_only_implies_non_destructive() {
        let t = json!({"name": "x", "annotations": {"readOnlyHint": "true", "destructiveHint": false, "openWorldHint": false}});
        let h = Hints::of_tool(&t);
        assert_eq!(h.read_only, None);
        let p = Policy::of(&h);
        assert!(!p.read_only && p.non_destructive && p.closed_world);
        let ro = Policy::of(&Hints {
            read_only: Some(true),
            destructive: Some(true),
            ..Hints::default()
        });
        assert!(ro.read_only && ro.non_destructive && !ro.closed_world);
        assert_eq!(Policy::of(&Hints::default()), OPEN);
    }

    #[test]
    fn calls_of_another_policy_wait_for_the_window_to_close() {
        let mut w = Window::new(false, Learned::default());
        let ro = Policy::OUTSIDE_CALLS;
        assert!(w.admit(call("1", ro), b"a".to_vec()).is_some());
        assert!(w.admit(call("2", ro), b"b".to_vec()).is_some());
        assert!(w.admit(call("3", OPEN), b"c".to_vec()).is_none());
        // Behind a held call, even a call of the same policy waits (first come, first served).
        assert!(w.admit(call("4", ro), b"d".to_vec()).is_none());
        assert_eq!(w.now().policy, ro);
        let (ended, released) = w.answered("1");
        assert_eq!(ended.expect("in flight").0.id, "1");
        assert!(released.is_empty());
        let (_, released) = w.answered("2");
        assert_eq!(released, vec![b"c".to_vec()]);
        assert_eq!(w.now().policy, OPEN);
        let (_, released) = w.answered("3");
        assert_eq!(released, vec![b"d".to_vec()]);
        assert!(!w.cancel_held("9"));
    }

    #[test]
    fn without_serializing_the_widest_policy_is_in_force() {
        let mut w = Window::new(true, Learned::default());
        assert!(w.admit(call("1", Policy::OUTSIDE_CALLS), vec![]).is_some());
        assert!(w.admit(call("2", OPEN), vec![]).is_some());
        assert_eq!(w.now().policy, OPEN);
        assert_eq!(w.now().calls.len(), 2);
        w.answered("2");
        assert_eq!(w.now().policy, Policy::OUTSIDE_CALLS);
        w.answered("1");
        assert!(w.now().calls.is_empty());
    }

    #[test]
    fn a_verification_fills_undeclared_hints_and_never_loosens_a_declared_one() {
        let def = json!({"name": "t", "annotations": {"readOnlyHint": false}});
        let sha = crate::mcp::tool::sha256_hex(def.to_string().as_bytes());
        let report = json!({"tools": [{"name": "t", "definition_sha256": sha, "supported": [
            {"hint": "readOnlyHint", "value": true, "basis": "consistent"},
            {"hint": "destructiveHint", "value": false, "basis": "observed"},
            {"hint": "openWorldHint", "value": false, "basis": "unverified"}
        ]}]});
        let learned = Learned::from_report(&report.to_string()).expect("report");
        let (h, note) = learned.fill("t", &def, Hints::of_tool(&def));
        assert!(note.is_none());
        // Declared false stays; undeclared destructiveHint is filled; unverified is not.
        assert_eq!(h.read_only, Some(false));
        assert_eq!(h.destructive, Some(false));
        assert!(h.learned.destructive && !h.learned.read_only);
        assert_eq!(h.open_world, None);
        // A changed definition keeps only what it declares.
        let changed =
            json!({"name": "t", "description": "new", "annotations": {"readOnlyHint": false}});
        let (h, note) = learned.fill("t", &changed, Hints::of_tool(&changed));
        assert!(note.is_some());
        assert_eq!(h.destructive, None);
        assert!(Learned::from_report("{}").is_err());
        assert!(Learned::from_report("nonsense").is_err());
    }

    #[test]
    fn startup_writes_end_with_the_first_call() {
        let mut w = Window::new(false, Learned::default());
        w.allow_startup_writes();
        assert_eq!(w.now().policy, Policy::STARTING);
        w.admit(call("1", OPEN), vec![]);
        w.answered("1");
        assert_eq!(w.now().policy, Policy::OUTSIDE_CALLS);
    }

    #[test]
    fn a_cancelled_held_call_is_dropped() {
        let mut w = Window::new(false, Learned::default());
        w.admit(call("1", OPEN), vec![]);
        assert!(w.admit(call("2", Policy::OUTSIDE_CALLS), vec![]).is_none());
        assert!(w.cancel_held("2"));
        let (_, released) = w.answered("1");
        assert!(released.is_empty());
        assert_eq!(w.held(), 0);
    }
}
