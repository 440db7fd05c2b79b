//! Finding canaries in data: any 16-byte part of a canary's value, at any offset, raw or in
//! the encodings that carry secrets out (base64 and base64url, hex, base32, URL and JSON
//! escaping, gzip and zlib bodies, and one encoding inside another: base64 of a gzip body).
//! Letters are compared without case, since DNS and hex lose it. A prefilter on the first
//! two bytes of each part keeps the scan of large data to a few nanoseconds a byte.

use std::collections::HashMap;
use std::io::Read;

/// Bytes of a value that identify it: any part this long names the canary.
pub const PART: usize = 16;

/// Most bytes of one input scanned (the rest is not looked at).
pub const MAX_SCANNED: usize = 8 << 20;

/// Most bytes a compressed body is inflated to.
const MAX_INFLATED: u64 = 8 << 20;

/// Encodings inside encodings looked through.
const MAX_DEPTH: usize = 2;

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
    /// Whether a part starts with these two (lowercased) bytes.
    starts: Vec<bool>,
}

impl Detector {
    /// A detector of `values` (each at least [`PART`] bytes long to be found).
    pub fn new<'a>(values: impl IntoIterator<Item = &'a str>) -> Detector {
        let mut d = Detector {
            parts: HashMap::new(),
            starts: vec![false; 1 << 16],
        };
        for (i, v) in values.into_iter().enumerate() {
            for w in v.as_bytes().windows(PART) {
                let mut part = [0u8; PART];
                for (p, b) in part.iter_mut().zip(w) {
                    *p = b.to_ascii_lowercase();
                }
                d.starts[pair(part[0], part[1])] = true;
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
            let data = &data[..data.len().min(MAX_SCANNED)];
            self.scan(data, "", 0, &mut found);
        }
        found
    }

    /// Scans `data` (reached through `through`, e.g. ` in base64`) and what it decodes to.
    fn scan(&self, data: &[u8], through: &str, depth: usize, found: &mut Vec<Sighting>) {
        self.search(
            data,
            if through.is_empty() {
                "raw"
            } else {
                &through[4..]
            },
            found,
        );
        if depth >= MAX_DEPTH {
            return;
        }
        for (name, decoded) in decodings(data) {
            if decoded.len() >= PART {
                self.scan(&decoded, &format!(" in {name}{through}"), depth + 1, found);
            }
        }
    }

    /// Looks for every part in `data` as it is.
    fn search(&self, data: &[u8], encoding: &str, found: &mut Vec<Sighting>) {
        if data.len() < PART {
            return;
        }
        for i in 0..=data.len() - PART {
            if !self.starts[pair(
                data[i].to_ascii_lowercase(),
                data[i + 1].to_ascii_lowercase(),
            )] {
                continue;
            }
            let mut part = [0u8; PART];
            for (p, b) in part.iter_mut().zip(&data[i..i + PART]) {
                *p = b.to_ascii_lowercase();
            }
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

fn pair(a: u8, b: u8) -> usize {
    (a as usize) << 8 | b as usize
}

/// What `data` may hold in another encoding: each candidate with its encoding's name.
fn decodings(data: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    if let Some(inflated) = inflate(data) {
        out.push(inflated);
    }
    if data.contains(&b'\\') {
        out.push(("JSON escaping", json_unescaped(data)));
    }
    if data.contains(&b'%') {
        out.push(("URL encoding", percent_decoded(data)));
    }
    for run in runs(data, 22, |b| {
        b.is_ascii_alphanumeric() || b"+/-_=".contains(&b)
    }) {
        let url_safe = run.iter().any(|b| b"-_".contains(b));
        let name = if url_safe { "base64url" } else { "base64" };
        for offset in 0..4 {
            if let Some(d) = base64_decoded(&run[offset.min(run.len())..]) {
                out.push((name, d));
            }
        }
    }
    for run in runs(data, 2 * PART, |b| b.is_ascii_hexdigit()) {
        for offset in 0..2 {
            out.push(("hex", hex_decoded(&run[offset..])));
        }
    }
    for run in runs(data, 26, |b| {
        b.is_ascii_alphabetic() || (b'2'..=b'7').contains(&b)
    }) {
        for offset in 0..8.min(run.len()) {
            out.push(("base32", base32_decoded(&run[offset..])));
        }
    }
    out
}

/// The maximal runs of bytes that `keep` accepts, at least `min` long.
fn runs(data: &[u8], min: usize, keep: impl Fn(u8) -> bool) -> Vec<&[u8]> {
    data.split(|b| !keep(*b))
        .filter(|r| r.len() >= min)
        .collect()
}

/// A gzip or zlib body (or, in what is not text, a raw deflate stream), inflated as far as
/// it goes (bounded; a body cut short still gives what it held).
fn inflate(data: &[u8]) -> Option<(&'static str, Vec<u8>)> {
    let (name, reader): (&'static str, Box<dyn Read + '_>) = if data.starts_with(&[0x1f, 0x8b]) {
        ("gzip", Box::new(flate2::read::GzDecoder::new(data)))
    } else if data.len() > 2
        && data[0] == 0x78
        && (u16::from(data[0]) << 8 | u16::from(data[1])) % 31 == 0
    {
        ("deflate", Box::new(flate2::read::ZlibDecoder::new(data)))
    } else if !data.is_ascii() {
        ("deflate", Box::new(flate2::read::DeflateDecoder::new(data)))
    } else {
        return None;
    };
    let mut out = Vec::new();
    let mut reader = reader.take(MAX_INFLATED);
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

/// `%XX` and `+` undone.
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
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    out
}

/// A base64 or base64url run decoded leniently (padding anywhere ignored, a trailing partial
/// quantum dropped).
fn base64_decoded(run: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine;
    let mut text: Vec<u8> = run
        .iter()
        .filter(|b| **b != b'=')
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

/// RFC 4648 base32 (either case) decoded (a trailing partial group dropped).
fn base32_decoded(run: &[u8]) -> Vec<u8> {
    let value = |b: u8| match b.to_ascii_uppercase() {
        c @ b'A'..=b'Z' => Some(u64::from(c - b'A')),
        c @ b'2'..=b'7' => Some(u64::from(c - b'2' + 26)),
        _ => None,
    };
    let mut out = Vec::with_capacity(run.len() * 5 / 8);
    for group in run.chunks_exact(8) {
        let mut bits = 0u64;
        for b in group {
            bits = bits << 5 | value(*b).unwrap_or(0);
        }
        out.extend(&bits.to_be_bytes()[3..]);
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
        Detector::new([SECRET, "AKIAJ4N7XQ2LZ5RKB3WD"])
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
    fn ordinary_data_holds_no_canary() {
        let text = include_str!("mod.rs");
        assert!(found(text.as_bytes()).is_empty());
        let noise: Vec<u8> = (0..200_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        assert!(found(&noise).is_empty());
    }
}
