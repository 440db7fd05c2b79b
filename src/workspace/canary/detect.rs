//! Finding canaries in data: any 16-byte part of a canary's value, at any offset, raw or in
//! the encodings that carry secrets out (base64 and base64url, hex, base32, URL and JSON
//! escaping, gzip and zlib bodies, and one encoding inside another: base64 of a gzip body).
//! Letters are compared without case, since DNS and hex lose it. A prefilter on the first
//! two bytes of each part keeps the scan of large data to a few nanoseconds a byte.

use std::collections::HashMap;
use std::io::Read;

/// Bytes of a value that identify it: any part this long names the canary.
pub const PART: usize = 16;

/// Most bytes of one input looked through for encodings (the raw bytes are all searched).
pub const MAX_DECODED_INPUT: usize = 8 << 20;

/// Most bytes one compressed body is inflated to.
const MAX_INFLATED: u64 = 8 << 20;

/// Most bytes all the decodings of one search may produce together: adversarial data (a
/// thousand small gzip bombs in base64) cannot make a search slow.
const DECODE_BUDGET: usize = 64 << 20;

/// Encodings inside encodings looked through.
const MAX_DEPTH: usize = 2;

/// Bits of the prefilter on a part's first four bytes.
const PREFILTER_BITS: u32 = 20;

/// Made-up bytes a part must hold to name a canary (the rest may be its kind's fixed
/// beginning, which other values share).
const MIN_OWN_BYTES: usize = 8;

/// A canary found in data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    /// Its index in the canaries the detector was made from.
    pub canary: usize,
    /// How it was carried: `raw`, `base64`, `hex`, `gzip in base64`, …
    pub encoding: String,
}

/// Finds the parts of a set of values.
#[derive(Debug, Clone, Default)]
pub struct Detector {
    /// Every part (lowercased) of every value, with the value's index.
    parts: HashMap<[u8; PART], usize>,
    /// A bit per hash of a part's first four (lowercased) bytes.
    starts: Vec<u64>,
}

/// The prefilter's bit of the four bytes at the start of `b` (lowercased already).
fn start_bit(b: &[u8]) -> usize {
    let word = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    (word.wrapping_mul(0x9E37_79B1) >> (32 - PREFILTER_BITS)) as usize
}

impl Detector {
    /// A detector of `values`, each with the length of the fixed beginning its kind shares
    /// (a part must hold [`MIN_OWN_BYTES`] of its own; values shorter than [`PART`] are never
    /// found).
    pub fn new<'a>(values: impl IntoIterator<Item = (&'a str, usize)>) -> Detector {
        let mut d = Detector {
            parts: HashMap::new(),
            starts: vec![0; (1 << PREFILTER_BITS) / 64],
        };
        for (i, (v, fixed)) in values.into_iter().enumerate() {
            let lower = v.as_bytes().to_ascii_lowercase();
            let first = (fixed + MIN_OWN_BYTES).saturating_sub(PART);
            for w in lower.windows(PART).skip(first) {
                let mut part = [0u8; PART];
                part.copy_from_slice(w);
                let bit = start_bit(w);
                d.starts[bit / 64] |= 1 << (bit % 64);
                d.parts.entry(part).or_insert(i);
            }
        }
        d
    }

    /// Whether it has nothing to find.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Every canary found in `data`, each once, with the first way it was found (raw before
    /// decoded).
    pub fn find(&self, data: &[u8]) -> Vec<Sighting> {
        let mut found = Vec::new();
        if !self.is_empty() {
            self.search(data, "raw", &mut found);
            let mut budget = DECODE_BUDGET;
            let data = &data[..data.len().min(MAX_DECODED_INPUT)];
            self.look_through(data, "", 0, &mut budget, &mut found);
        }
        found
    }

    /// Searches what `data` (reached through `through`, e.g. ` in base64`) decodes to.
    fn look_through(
        &self,
        data: &[u8],
        through: &str,
        depth: usize,
        budget: &mut usize,
        found: &mut Vec<Sighting>,
    ) {
        if depth >= MAX_DEPTH {
            return;
        }
        // A raw deflate stream has no header to tell it by: tried on the data as given and
        // on what base64 carried, not on every decoding's binary output.
        let raw_deflate = depth == 0 || through.starts_with(" in base64");
        decodings(data, raw_deflate, budget, &mut |name, decoded, budget| {
            let through = format!(" in {name}{through}");
            self.search(decoded, &through[4..], found);
            self.look_through(decoded, &through, depth + 1, budget, found);
        });
    }

    /// Looks for every part in `data` as it is.
    fn search(&self, data: &[u8], encoding: &str, found: &mut Vec<Sighting>) {
        if data.len() < PART {
            return;
        }
        let lower = data.to_ascii_lowercase();
        for w in lower.windows(PART) {
            let bit = start_bit(w);
            if self.starts[bit / 64] & (1 << (bit % 64)) == 0 {
                continue;
            }
            let mut part = [0u8; PART];
            part.copy_from_slice(w);
            if let Some(&canary) = self.parts.get(&part) {
                if !found.iter().any(|s: &Sighting| s.canary == canary) {
                    found.push(Sighting {
                        canary,
                        encoding: encoding.to_string(),
                    });
                }
            }
        }
    }
}

/// Hands each thing `data` may hold in another encoding to `each` (its encoding's name,
/// the bytes, the budget left), while the budget of decoded bytes lasts.
fn decodings(
    data: &[u8],
    raw_deflate: bool,
    budget: &mut usize,
    each: &mut dyn FnMut(&'static str, &[u8], &mut usize),
) {
    let mut give = |name: &'static str, decoded: Vec<u8>, budget: &mut usize| {
        if decoded.len() >= PART && *budget > 0 {
            *budget = budget.saturating_sub(decoded.len());
            each(name, &decoded, budget);
        }
    };
    // A compressed body where it starts: at the start, or after the head of a request or
    // any other bytes before it.
    for start in compressed_starts(data) {
        if let Some((name, inflated)) = inflate(&data[start..], raw_deflate && start == 0, *budget)
        {
            give(name, inflated, budget);
        }
    }
    if data.contains(&b'\\') {
        give("JSON escaping", json_unescaped(data), budget);
    }
    if data.contains(&b'%') {
        give("URL encoding", percent_decoded(data), budget);
    }
    // Line breaks inside a run: base64 and hex as tools wrap them.
    let wrapped = |b: u8| b == b'\n' || b == b'\r';
    for run in runs(data, 22, |b| {
        b.is_ascii_alphanumeric() || b"+/-_=".contains(&b) || wrapped(b)
    }) {
        let text: Vec<u8> = run
            .iter()
            .copied()
            .filter(|b| *b != b'=' && !wrapped(*b))
            .collect();
        let name = if text.iter().any(|b| b"-_".contains(b)) {
            "base64url"
        } else {
            "base64"
        };
        for offset in 0..4.min(text.len()) {
            if let Some(d) = base64_decoded(&text[offset..]) {
                give(name, d, budget);
            }
        }
    }
    for run in runs(data, 2 * PART, |b| b.is_ascii_hexdigit() || wrapped(b)) {
        let text: Vec<u8> = run.iter().copied().filter(|b| !wrapped(*b)).collect();
        for offset in 0..2 {
            give("hex", hex_decoded(&text[offset..]), budget);
        }
    }
    // Base32 as DNS carries it: letters and the digits 2 to 7, at least one digit.
    for run in runs(data, 26, |b| {
        b.is_ascii_alphabetic() || (b'2'..=b'7').contains(&b)
    }) {
        if run.iter().any(u8::is_ascii_digit) {
            for offset in 0..8.min(run.len()) {
                give("base32", base32_decoded(&run[offset..]), budget);
            }
        }
    }
}

/// The maximal runs of bytes that `keep` accepts, at least `min` long.
fn runs(data: &[u8], min: usize, keep: impl Fn(u8) -> bool) -> Vec<&[u8]> {
    data.split(|b| !keep(*b))
        .filter(|r| r.len() >= min)
        .collect()
}

/// Most places in one input tried as the start of a compressed body (a failed try costs a
/// few bytes of decoding; what the tries inflate counts against the decoding budget).
const MAX_COMPRESSED_STARTS: usize = 1024;

/// Where a compressed body may start in `data`: its start, and every gzip header (`1f 8b
/// 08`) and zlib header of a real compression level (`78 01`, `78 5e`, `78 9c`, `78 da`)
/// after it, at most [`MAX_COMPRESSED_STARTS`].
fn compressed_starts(data: &[u8]) -> Vec<usize> {
    let mut starts = vec![0];
    starts.extend(
        data.windows(3)
            .enumerate()
            .skip(1)
            .filter(|(_, w)| {
                w == &[0x1f, 0x8b, 0x08]
                    || (w[0] == 0x78 && [0x01, 0x5e, 0x9c, 0xda].contains(&w[1]))
            })
            .map(|(i, _)| i)
            .take(MAX_COMPRESSED_STARTS - 1),
    );
    starts
}

/// A gzip or zlib body (or, in what is not text, a raw deflate stream), inflated as far as
/// it goes (bounded; a body cut short still gives what it held).
fn inflate(data: &[u8], raw_deflate: bool, budget: usize) -> Option<(&'static str, Vec<u8>)> {
    let (name, reader): (&'static str, Box<dyn Read + '_>) = if data.starts_with(&[0x1f, 0x8b]) {
        ("gzip", Box::new(flate2::read::GzDecoder::new(data)))
    } else if data.len() > 2
        && data[0] == 0x78
        && (u16::from(data[0]) << 8 | u16::from(data[1])) % 31 == 0
    {
        ("deflate", Box::new(flate2::read::ZlibDecoder::new(data)))
    } else if raw_deflate && !data.is_ascii() {
        ("deflate", Box::new(flate2::read::DeflateDecoder::new(data)))
    } else {
        return None;
    };
    let mut out = Vec::new();
    let mut reader = reader.take(MAX_INFLATED.min(budget as u64));
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n) = reader.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    (!out.is_empty()).then_some((name, out))
}

/// `\"`, `\\`, `\/`, `\n`, `\uXXXX` and the like undone.
fn json_unescaped(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        if data[i] == b'\\' && i + 1 < data.len() {
            let e = data[i + 1];
            i += 2;
            match e {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'b' => out.push(8),
                b'f' => out.push(12),
                b'u' if i + 4 <= data.len() => {
                    let code = std::str::from_utf8(&data[i..i + 4])
                        .ok()
                        .and_then(|h| u32::from_str_radix(h, 16).ok())
                        .and_then(char::from_u32);
                    match code {
                        Some(c) => {
                            let mut buf = [0u8; 4];
                            out.extend(c.encode_utf8(&mut buf).as_bytes());
                            i += 4;
                        }
                        None => out.extend([b'\\', b'u']),
                    }
                }
                other => out.push(other),
            }
        } else {
            out.push(data[i]);
            i += 1;
        }
    }
    out
}

/// `%XX` undone (a `+` stays: it is base64's as often as a space).
fn percent_decoded(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match data[i] {
            b'%' if i + 2 < data.len() => match (hex(data[i + 1]), hex(data[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    out
}

/// A base64 or base64url run (padding and line breaks removed) decoded leniently: a single
/// character left over is dropped.
fn base64_decoded(run: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine;
    let mut text: Vec<u8> = run
        .iter()
        .map(|b| match b {
            b'-' => b'+',
            b'_' => b'/',
            b => *b,
        })
        .collect();
    // A single character left over encodes nothing; two or three are a last partial group.
    if text.len() % 4 == 1 {
        text.pop();
    }
    if text.is_empty() {
        return None;
    }
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    engine.decode(&text).ok()
}

/// Pairs of hex digits decoded (a trailing digit dropped).
fn hex_decoded(run: &[u8]) -> Vec<u8> {
    run.chunks_exact(2)
        .filter_map(|p| {
            let h = (p[0] as char).to_digit(16)?;
            let l = (p[1] as char).to_digit(16)?;
            Some((h * 16 + l) as u8)
        })
        .collect()
}

/// RFC 4648 base32 (either case) decoded, a trailing partial group as far as it goes.
fn base32_decoded(run: &[u8]) -> Vec<u8> {
    let value = |b: u8| match b.to_ascii_uppercase() {
        c @ b'A'..=b'Z' => Some(u64::from(c - b'A')),
        c @ b'2'..=b'7' => Some(u64::from(c - b'2' + 26)),
        _ => None,
    };
    let mut out = Vec::with_capacity(run.len() * 5 / 8);
    for group in run.chunks(8) {
        let mut bits = 0u64;
        for b in group {
            bits = bits << 5 | value(*b).unwrap_or(0);
        }
        bits <<= 5 * (8 - group.len());
        // 2, 4, 5 and 7 characters carry 1, 2, 3 and 4 whole bytes.
        let whole = group.len() * 5 / 8;
        out.extend(&bits.to_be_bytes()[3..3 + whole]);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use base64::Engine;

    use super::*;

    const SECRET: &str = "ghp_Q7cLw0ZxY3mN8rTb5vK2pH9sJd4fGa1eRu6i";

    fn found(data: &[u8]) -> Vec<String> {
        Detector::new([(SECRET, 4), ("AKIAJ4N7XQ2LZ5RKB3WD", 4)])
            .find(data)
            .into_iter()
            .map(|s| format!("{} {}", s.canary, s.encoding))
            .collect()
    }

    #[test]
    fn finds_a_secret_raw_and_in_every_encoding_at_any_offset() {
        let b64 = base64::engine::general_purpose::STANDARD;
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (format!("token={SECRET}&x=1").into_bytes(), "raw"),
            (
                format!(
                    "{{\"t\":\"{}\"}}",
                    SECRET
                        .chars()
                        .enumerate()
                        .map(|(i, c)| if i % 8 == 3 {
                            format!("\\u{:04x}", c as u32)
                        } else {
                            c.to_string()
                        })
                        .collect::<String>()
                )
                .into_bytes(),
                "JSON escaping",
            ),
            (
                format!(
                    "t={}",
                    SECRET
                        .bytes()
                        .map(|b| format!("%{b:02X}"))
                        .collect::<String>()
                )
                .into_bytes(),
                "URL encoding",
            ),
            (
                b64.encode(format!("Authorization: token {SECRET}\n"))
                    .into_bytes(),
                "base64",
            ),
            (b64.encode(format!("x{SECRET}")).into_bytes(), "base64"),
            (b64.encode(format!("xy{SECRET}")).into_bytes(), "base64"),
            (
                format!("d={}", url.encode(format!("??>{SECRET}>>"))).into_bytes(),
                "base64url",
            ),
            (
                SECRET
                    .bytes()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
                    .into_bytes(),
                "hex",
            ),
            (
                format!(
                    "0{}",
                    SECRET
                        .bytes()
                        .map(|b| format!("{b:02X}"))
                        .collect::<String>()
                )
                .into_bytes(),
                "hex",
            ),
        ];
        for (data, encoding) in cases {
            assert_eq!(
                found(&data),
                [format!("0 {encoding}")],
                "{}",
                String::from_utf8_lossy(&data)
            );
        }
    }

    #[test]
    fn finds_a_part_of_sixteen_bytes_and_nothing_shorter() {
        assert_eq!(found(&SECRET.as_bytes()[10..26]), ["0 raw"]);
        assert!(found(&SECRET.as_bytes()[10..25]).is_empty());
        // Lowercased, as a DNS name carries it.
        let dns = format!("{}.x.example.test", SECRET[4..24].to_ascii_lowercase());
        assert_eq!(found(dns.as_bytes()), ["0 raw"]);
    }

    #[test]
    fn finds_secrets_in_compressed_bodies_and_base32_labels() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(
            format!(
                "{{\"aws\":\"AKIAJ4N7XQ2LZ5RKB3WD\",\"pad\":\"{}\"}}",
                "z".repeat(500)
            )
            .as_bytes(),
        )
        .expect("gz");
        let body = gz.finish().expect("gz");
        assert_eq!(found(&body), ["1 gzip"]);
        // After a request's head, as an upload sends it.
        let mut request = b"POST /up HTTP/1.1\r\nContent-Encoding: gzip\r\n\r\n".to_vec();
        request.extend_from_slice(&body);
        assert_eq!(found(&request), ["1 gzip"]);
        let b64 = base64::engine::general_purpose::STANDARD.encode(&body);
        assert_eq!(found(b64.as_bytes()), ["1 gzip in base64"]);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(SECRET.as_bytes()).expect("z");
        assert_eq!(found(&z.finish().expect("z")), ["0 deflate"]);
        // Base32 of the secret in DNS labels (lowercase, split by dots, joined by the caller).
        let alphabet = b"abcdefghijklmnopqrstuvwxyz234567";
        let mut bits = 0u64;
        let mut n = 0;
        let mut label = String::new();
        for b in SECRET.bytes() {
            bits = bits << 8 | u64::from(b);
            n += 8;
            while n >= 5 {
                n -= 5;
                label.push(alphabet[((bits >> n) & 31) as usize] as char);
            }
        }
        assert_eq!(found(format!("q{label}").as_bytes()), ["0 base32"]);
    }

    #[test]
    fn finds_wrapped_base64_and_the_shortest_base32_part() {
        let b64 =
            base64::engine::general_purpose::STANDARD.encode(format!("{}{SECRET}", "k".repeat(40)));
        let wrapped: Vec<String> = b64
            .as_bytes()
            .chunks(76)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect();
        assert_eq!(found(wrapped.join("\r\n").as_bytes()), ["0 base64"]);
        // Sixteen bytes are 26 base32 characters, the last group partial.
        let part = &SECRET.as_bytes()[5..21];
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
        let (mut bits, mut n, mut text) = (0u64, 0, String::new());
        for b in part {
            bits = bits << 8 | u64::from(*b);
            n += 8;
            while n >= 5 {
                n -= 5;
                text.push(alphabet[((bits >> n) & 31) as usize] as char);
            }
        }
        text.push(alphabet[((bits << (5 - n)) & 31) as usize] as char);
        assert_eq!(text.len(), 26);
        assert_eq!(found(text.as_bytes()), ["0 base32"]);
    }

    #[test]
    fn many_compressed_bombs_stay_within_the_budget() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&vec![b'a'; 16 << 20]).expect("gz");
        let bomb = base64::engine::general_purpose::STANDARD.encode(gz.finish().expect("gz"));
        let data = vec![bomb; 200].join(" ");
        assert!(found(data.as_bytes()).is_empty());
    }

    #[test]
    fn ordinary_data_holds_no_canary() {
        let text = include_str!("mod.rs");
        assert!(found(text.as_bytes()).is_empty());
        let noise: Vec<u8> = (0..200_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        assert!(found(&noise).is_empty());
    }
}
