//! Digests of file content that leave out what a format writes anew on every save, so that a
//! document saved again with nothing changed is a same-content rewrite, not an overwrite: zip
//! packages (Office and OpenDocument files, and the packages nested in them, such as a
//! workbook embedded in a presentation) are compared by their entries' names and contents
//! (never their entry times), with only the timestamp fields of their document properties
//! left out (`dcterms:modified`, `cp:lastModifiedBy`, `TotalTime`, OpenDocument's `dc:date`
//! and editing statistics); PDF files without their trailer `/ID`, creation and
//! modification dates (in the info dictionary and the XMP metadata), document and instance
//! ids, and the cross-reference offsets that shift with them. Every other byte still counts:
//! a restyled slide is a change.

use std::io::{Cursor, Read};
use std::sync::LazyLock;

use regex::bytes::Regex;
use sha2::{Digest, Sha256};

/// Most bytes unpacked from one package, nested ones included: past it there is no
/// normalised digest (the plain one decides).
const MAX_UNPACKED: u64 = 256 * 1024 * 1024;

/// How deep packages nested in packages are opened.
const MAX_DEPTH: usize = 3;

/// Timestamp fields of document properties (Office `docProps/core.xml` and `app.xml`,
/// OpenDocument `meta.xml`): the element and its text.
static PROPERTY_TIMES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"<(dcterms:modified|cp:lastModifiedBy|cp:lastPrinted|TotalTime|dc:date|meta:editing-duration|meta:editing-cycles|meta:print-date)\b[^>]*>[^<]*</[^>]+>",
    )
    .unwrap_or_else(|e| panic!("the property pattern: {e}"))
});

/// What a PDF writer sets anew on every save.
static PDF_PER_SAVE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?x)
        /ID\s*\[\s*<[0-9A-Fa-f]*>\s*<[0-9A-Fa-f]*>\s*\]
        | /(CreationDate|ModDate)\s*\([^)]*\)
        | <(xmp:CreateDate|xmp:ModifyDate|xmp:MetadataDate|xmpMM:DocumentID|xmpMM:InstanceID)>[^<]*</[^>]+>
        | (xmp:CreateDate|xmp:ModifyDate|xmp:MetadataDate|xmpMM:DocumentID|xmpMM:InstanceID)=\x22[^\x22]*\x22
        | (?m:^\d{10}\x20\d{5}\x20[nf]\s*$)
        | startxref\s+\d+
        | /Length\s+\d+
        ",
    )
    .unwrap_or_else(|e| panic!("the PDF pattern: {e}"))
});

/// The normalised digest of `content`, for the formats this module knows (a zip package, a
/// PDF); `None` for others and for packages that cannot be read or are too large.
pub fn normalised_digest(content: &[u8]) -> Option<[u8; 32]> {
    if content.starts_with(b"PK\x03\x04") {
        let mut budget = MAX_UNPACKED;
        zip_digest(content, 0, &mut budget)
    } else if content.starts_with(b"%PDF-") {
        Some(Sha256::digest(PDF_PER_SAVE.replace_all(content, &b""[..])).into())
    } else {
        None
    }
}

/// A package's entries by name (sorted), each name with its content normalised: nested
/// packages by their own digest, XML by leaving out property timestamps.
fn zip_digest(content: &[u8], depth: usize, budget: &mut u64) -> Option<[u8; 32]> {
    let mut archive = zip::ZipArchive::new(Cursor::new(content)).ok()?;
    let mut names: Vec<String> = archive.file_names().map(str::to_string).collect();
    names.sort();
    let mut hasher = Sha256::new();
    for name in names {
        let mut entry = archive.by_name(&name).ok()?;
        if entry.size() > *budget {
            return None;
        }
        *budget -= entry.size();
        let size = entry.size();
        let mut data = Vec::with_capacity(size as usize);
        entry
            .by_ref()
            .take(size.saturating_add(1))
            .read_to_end(&mut data)
            .ok()?;
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        if data.starts_with(b"PK\x03\x04") && depth < MAX_DEPTH {
            hasher.update(zip_digest(&data, depth + 1, budget)?);
        } else if name.ends_with(".xml") {
            let kept = PROPERTY_TIMES.replace_all(&data, &b""[..]);
            hasher.update((kept.len() as u64).to_le_bytes());
            hasher.update(&kept);
        } else {
            hasher.update((data.len() as u64).to_le_bytes());
            hasher.update(&data);
        }
    }
    Some(hasher.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A zip package of `entries` (name, content), every entry stamped with `minute`.
    fn package(entries: &[(&str, &[u8])], minute: u8) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        {
            let mut w = zip::ZipWriter::new(&mut out);
            let time = zip::DateTime::from_date_and_time(2026, 1, 1, 10, minute, 0)
                .unwrap_or_else(|_| panic!("time"));
            let options = zip::write::SimpleFileOptions::default().last_modified_time(time);
            for (name, content) in entries {
                w.start_file(*name, options)
                    .unwrap_or_else(|e| panic!("{e}"));
                w.write_all(content).unwrap_or_else(|e| panic!("{e}"));
            }
            w.finish().unwrap_or_else(|e| panic!("{e}"));
        }
        out.into_inner()
    }

    fn core(modified: &str) -> Vec<u8> {
        format!(
            "<cp:coreProperties><dc:title>Q3</dc:title><cp:lastModifiedBy>{modified}</cp:lastModifiedBy><dcterms:modified xsi:type=\"dcterms:W3CDTF\">{modified}</dcterms:modified></cp:coreProperties>"
        )
        .into_bytes()
    }

    /// A presentation with a workbook embedded in it, saved at `when`, its slide saying
    /// `slide`.
    fn deck(when: &str, minute: u8, slide: &str) -> Vec<u8> {
        let workbook = package(
            &[
                ("docProps/core.xml", &core(when)),
                (
                    "xl/worksheets/sheet1.xml",
                    b"<sheetData><c>42</c></sheetData>",
                ),
            ],
            minute,
        );
        package(
            &[
                ("docProps/core.xml", &core(when)),
                ("ppt/slides/slide1.xml", slide.as_bytes()),
                ("ppt/embeddings/Microsoft_Excel_Worksheet.xlsx", &workbook),
            ],
            minute,
        )
    }

    #[test]
    fn a_package_saved_again_differs_only_in_what_every_save_writes() {
        let first = deck("2026-01-01T10:00:00Z", 0, "<a:t>Revenue</a:t>");
        let again = deck("2026-01-01T10:07:31Z", 7, "<a:t>Revenue</a:t>");
        assert_ne!(first, again);
        assert_eq!(normalised_digest(&first), normalised_digest(&again));
        assert!(normalised_digest(&first).is_some());
        // A restyled slide is a change.
        let restyled = deck("2026-01-01T10:07:31Z", 7, "<a:t b=\"1\">Revenue</a:t>");
        assert_ne!(normalised_digest(&first), normalised_digest(&restyled));
    }

    fn pdf(id: &str, date: &str, text: &str) -> Vec<u8> {
        let body = format!(
            "1 0 obj << /Length 44 >> stream\nBT /F1 12 Tf ({text}) Tj ET\nendstream endobj\n2 0 obj << /CreationDate (D:{date}) /ModDate (D:{date}) >> endobj\n<x:xmpmeta><xmp:ModifyDate>{date}</xmp:ModifyDate><xmpMM:InstanceID>uuid:{id}</xmpMM:InstanceID></x:xmpmeta>\n"
        );
        let offset = 9 + body.len();
        format!(
            "%PDF-1.7\n{body}xref\n0 3\n0000000000 65535 f \n0000000009 00000 n \n{:010} 00000 n \ntrailer << /Size 3 /Info 2 0 R /ID [<{id}><{id}>] >>\nstartxref\n{offset}\n%%EOF\n",
            offset - 20
        )
        .into_bytes()
    }

    #[test]
    fn a_pdf_exported_again_differs_only_in_its_ids_and_dates() {
        let first = pdf("0a1b2c", "20260101100000Z", "Hello");
        let again = pdf("99ffee77", "20260101100731Z", "Hello");
        assert_ne!(first, again);
        assert_eq!(normalised_digest(&first), normalised_digest(&again));
        let changed = pdf("99ffee77", "20260101100731Z", "Hellp");
        assert_ne!(normalised_digest(&first), normalised_digest(&changed));
    }

    #[test]
    fn other_content_has_no_normalised_digest() {
        assert_eq!(normalised_digest(b"plain text"), None);
        assert_eq!(normalised_digest(b"PK\x03\x04 not really a zip"), None);
    }
}
