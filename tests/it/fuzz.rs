//! The fuzz targets (`hintcheck::fuzz`) on the stable toolchain: every corpus input of
//! `fuzz/corpus/<target>/`, then mutations of them (bit flips, cut and repeated pieces,
//! splices, inserted newlines, braces, ids and torn UTF-8) until the target's time is up
//! (`HINTCHECK_FUZZ_SECONDS`, 5 s each by default). A failing input is saved under
//! `target/fuzz-failures/` and named in the failure, with the seed that found it
//! (`HINTCHECK_FUZZ_SEED` replays a run). Coverage-guided runs use `cargo +nightly fuzz`.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use hintcheck::fuzz::{TARGETS, run};

use crate::util::repo;

/// xorshift64*: enough randomness for mutations, reproducible from a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const TOKENS: [&[u8]; 12] = [
    b"\n",
    b"{",
    b"}",
    b"\"jsonrpc\":\"2.0\",",
    b"\"id\":7,",
    b"\"method\":\"ping\"",
    b"\"result\":{}",
    b"\xe2\x9c",
    b"\xff",
    b"\"$ref\":\"#\"",
    b"[",
    b"\"enum\":[1,2,3]",
];

fn mutate(input: &[u8], other: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..=rng.below(4) {
        match rng.below(6) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len());
                let len = rng.below(v.len() - i + 1);
                v.drain(i..i + len);
            }
            2 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                let i = rng.below(v.len() + 1);
                v.splice(i..i, t.iter().copied());
            }
            3 if !v.is_empty() => {
                let i = rng.below(v.len());
                let len = rng.below((v.len() - i).min(256) + 1);
                let piece: Vec<u8> = v[i..i + len].to_vec();
                for _ in 0..rng.below(8) {
                    v.splice(i..i, piece.iter().copied());
                }
            }
            4 if !other.is_empty() => {
                let cut = rng.below(v.len() + 1);
                let from = rng.below(other.len());
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
            }
            _ => {
                let i = rng.below(v.len() + 1);
                v.insert(i, rng.next() as u8);
            }
        }
    }
    v.truncate(1 << 16);
    v
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = repo().join("fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| std::fs::read(p).expect("corpus file"))
        .collect()
}

fn save_failure(target: &str, input: &[u8]) -> PathBuf {
    let dir = repo().join("target/fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let name = format!(
        "{target}-{:016x}",
        input
            .iter()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b))
                .wrapping_mul(0x100_0000_01b3))
    );
    let path = dir.join(name);
    let _ = std::fs::write(&path, input);
    path
}

#[test]
fn fuzz_targets_run_clean_for_their_bounded_time() {
    let seconds: u64 = std::env::var("HINTCHECK_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let seed: u64 = std::env::var("HINTCHECK_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
                | 1
        });
    // The targets assert; their panics are the findings, reported below, not printed here.
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut report = Vec::new();
    for target in TARGETS {
        let inputs = corpus(target);
        assert!(!inputs.is_empty(), "{target}: empty corpus");
        let mut rng = Rng(seed);
        let mut runs = 0u64;
        let mut failure = None;
        for input in &inputs {
            runs += 1;
            if catch_unwind(AssertUnwindSafe(|| run(target, input))).is_err() {
                failure = Some(input.clone());
                break;
            }
        }
        let deadline = Instant::now() + Duration::from_secs(seconds);
        while failure.is_none() && Instant::now() < deadline {
            let a = &inputs[rng.below(inputs.len())];
            let b = &inputs[rng.below(inputs.len())];
            let input = mutate(a, b, &mut rng);
            runs += 1;
            if catch_unwind(AssertUnwindSafe(|| run(target, &input))).is_err() {
                failure = Some(input);
            }
        }
        match failure {
            Some(input) => {
                let path = save_failure(target, &input);
                std::panic::set_hook(quiet);
                // Run it once more with the default hook, so the assertion is shown.
                let _ = catch_unwind(AssertUnwindSafe(|| run(target, &input)));
                panic!(
                    "fuzz target {target} failed after {runs} inputs (seed {seed}); the input is saved at {}",
                    path.display()
                );
            }
            None => report.push(format!("{target}: {runs} inputs")),
        }
    }
    std::panic::set_hook(quiet);
    eprintln!(
        "fuzz (seed {seed}, {seconds} s per target): {}",
        report.join(", ")
    );
}
