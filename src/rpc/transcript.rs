//! The transcript: an append-only record of every line exchanged with the server, taken
//! before the line is parsed, with a monotonic timestamp and its classification. Memory is
//! bounded: past a byte budget only the head of each line is kept, and every entry still
//! records the full length.

use std::time::Instant;

use serde::Serialize;

/// Which way a line went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// From hintcheck to the server (its stdin, or a POST over HTTP).
    Sent,
    /// From the server to hintcheck (its stdout, or an HTTP response or event).
    Received,
}

/// One transcript line.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// Position in the transcript, from 0.
    pub seq: u64,
    /// Microseconds since the transcript started.
    pub at_us: u64,
    /// Which way it went.
    pub direction: Direction,
    /// The class of the line (`request`, `response`, `not-json`, …).
    pub class: String,
    /// Why a garbage line was classified so, or what was wrong with a response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The full length of the line in bytes.
    pub len: u64,
    /// The stored bytes (lossily decoded); may be shorter than `len`.
    pub text: String,
    /// Whether `text` holds less than the whole line.
    pub truncated: bool,
}

/// Append-only transcript with a storage budget.
#[derive(Debug)]
pub struct Transcript {
    start: Instant,
    entries: Vec<Entry>,
    stored_bytes: usize,
    budget: usize,
    head_after_budget: usize,
    max_entries: usize,
    dropped_entries: u64,
}

/// Counts per class, for reports.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TranscriptStats {
    /// Lines sent to the server.
    pub sent: u64,
    /// Lines received from the server.
    pub received: u64,
    /// Received lines that were not well-formed JSON-RPC messages.
    pub garbage: u64,
    /// Well-formed responses whose id matched no outstanding request.
    pub unknown_id: u64,
    /// Entries not kept because the transcript was full (still counted here).
    pub dropped_entries: u64,
}

impl Transcript {
    /// A new transcript that stores at most `budget` bytes of line text in full.
    pub fn new(start: Instant, budget: usize) -> Self {
        Self {
            start,
            entries: Vec::new(),
            stored_bytes: 0,
            budget,
            head_after_budget: 128,
            max_entries: 50_000,
            dropped_entries: 0,
        }
    }

    /// Records a line and returns its sequence number.
    pub fn record(
        &mut self,
        direction: Direction,
        bytes: &[u8],
        full_len: u64,
        class: &str,
        note: Option<String>,
    ) -> u64 {
        let seq = self.entries.len() as u64 + self.dropped_entries;
        if self.entries.len() >= self.max_entries {
            self.dropped_entries += 1;
            return seq;
        }
        let keep = if self.stored_bytes + bytes.len() <= self.budget {
            bytes.len()
        } else {
            bytes.len().min(self.head_after_budget)
        };
        self.stored_bytes += keep;
        self.entries.push(Entry {
            seq,
            at_us: self.start.elapsed().as_micros() as u64,
            direction,
            class: class.to_string(),
            note,
            len: full_len,
            text: String::from_utf8_lossy(&bytes[..keep]).into_owned(),
            truncated: (keep as u64) < full_len,
        });
        seq
    }

    /// Changes the class of an entry after the fact (e.g. a response whose id is unknown).
    pub fn reclassify(&mut self, seq: u64, class: &str, note: Option<String>) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.seq == seq) {
            e.class = class.to_string();
            e.note = note;
        }
    }

    /// All kept entries.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Counts per class.
    pub fn stats(&self) -> TranscriptStats {
        let mut s = TranscriptStats {
            dropped_entries: self.dropped_entries,
            ..Default::default()
        };
        for e in &self.entries {
            match e.direction {
                Direction::Sent => s.sent += 1,
                Direction::Received => {
                    s.received += 1;
                    if e.class == "unknown-id"
                        || e.class == "late-response"
                        || e.class == "duplicate-response"
                    {
                        s.unknown_id += 1;
                    } else if !matches!(
                        e.class.as_str(),
                        "request" | "response" | "notification" | "probe-response"
                    ) {
                        s.garbage += 1;
                    }
                }
            }
        }
        s
    }
}

/// Bounded capture of a stream (the server's stderr): the first `head_cap` bytes and the last
/// `tail_cap` bytes are kept, and the total is counted.
#[derive(Debug, Clone)]
pub struct CappedCapture {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: u64,
}

impl CappedCapture {
    /// A capture that keeps at most `head_cap + tail_cap` bytes.
    pub fn new(head_cap: usize, tail_cap: usize) -> Self {
        Self {
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            head_cap,
            tail_cap,
            total: 0,
        }
    }

    /// Appends bytes.
    pub fn push(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        let room = self.head_cap.saturating_sub(self.head.len());
        let take = room.min(data.len());
        self.head.extend_from_slice(&data[..take]);
        data = &data[take..];
        for &b in data {
            if self.tail.len() == self.tail_cap {
                self.tail.pop_front();
            }
            if self.tail_cap > 0 {
                self.tail.push_back(b);
            }
        }
    }

    /// Total bytes seen.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The kept text; a marker stands where bytes were dropped.
    pub fn text(&self) -> String {
        let mut s = String::from_utf8_lossy(&self.head).into_owned();
        let kept = (self.head.len() + self.tail.len()) as u64;
        if kept < self.total {
            s.push_str(&format!("\n[… {} bytes not kept …]\n", self.total - kept));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        s.push_str(&String::from_utf8_lossy(&tail));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_keeps_heads_only_and_counts_lengths() {
        let mut t = Transcript::new(Instant::now(), 10);
        t.record(Direction::Received, b"0123456789", 10, "not-json", None);
        t.record(Direction::Received, &[b'a'; 2000], 2000, "not-json", None);
        assert!(!t.entries()[0].truncated);
        assert!(t.entries()[1].truncated);
        assert_eq!(t.entries()[1].text.len(), 128);
        assert_eq!(t.entries()[1].len, 2000);
        assert_eq!(t.stats().garbage, 2);
    }

    #[test]
    fn capped_capture_keeps_head_and_tail() {
        let mut c = CappedCapture::new(4, 4);
        c.push(b"abcdefghijkl");
        assert_eq!(c.total(), 12);
        let text = c.text();
        assert!(text.starts_with("abcd"));
        assert!(text.ends_with("ijkl"));
        assert!(text.contains("4 bytes not kept"));
    }
}
