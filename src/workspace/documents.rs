//! Small valid files of the common document types, made by the harness for the default seed:
//! a spreadsheet (`.xlsx`), a word-processor document (`.docx`), a presentation (`.pptx`), a
//! PDF, a CSV table, a
//! Jupyter notebook, a PNG image, a Python source file and a zip archive. Tools that open
//! such files (an Excel server, a Word server, a PDF reader, a code indexer, an archiver)
//! then have something real to open. The Office files are Office Open XML packages with only the parts a reader needs;
//! the PDF has one page of text and a correct cross-reference table.

use std::io::Write;

/// The seeded workbook's data block (a header, two rows and a total) and the cell whose
/// formula makes the total: where tools about ranges and formulas find something real.
pub const WORKBOOK_BLOCK: &str = "A1:B4";
/// The formula cell of the seeded workbook (see [`WORKBOOK_BLOCK`]).
pub const WORKBOOK_FORMULA_CELL: &str = "B4";

/// One seeded document: where it goes in the workspace and its bytes.
pub struct Document {
    /// Path relative to the workspace.
    pub path: &'static str,
    /// The content.
    pub bytes: Vec<u8>,
}

/// Every document the default seed holds.
pub fn all() -> Vec<Document> {
    vec![
        Document {
            path: "data/budget.xlsx",
            bytes: xlsx(),
        },
        Document {
            path: "docs/report.docx",
            bytes: docx(),
        },
        Document {
            path: "docs/summary.pdf",
            bytes: pdf(),
        },
        Document {
            path: "slides/deck.pptx",
            bytes: pptx(),
        },
        Document {
            path: "data/table.csv",
            bytes: b"name,count\nalpha,1\nbeta,2\n".to_vec(),
        },
        Document {
            path: "notebooks/analysis.ipynb",
            bytes: NOTEBOOK.as_bytes().to_vec(),
        },
        Document {
            path: "images/pixel.png",
            bytes: PNG.to_vec(),
        },
        Document {
            path: "src/app.py",
            bytes: PYTHON.as_bytes().to_vec(),
        },
        Document {
            path: "archives/bundle.zip",
            bytes: zip_archive(),
        },
    ]
}

/// A zip archive (deflated) of one folder with a text file and a CSV table, for tools that
/// list, test or extract archives. Its entries sit under `bundle/`, so extracting it into
/// the workspace overwrites no seeded file.
pub fn zip_archive() -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let entries = [
        (
            "bundle/readme.txt",
            "Files kept together for the release.\n",
        ),
        ("bundle/items.csv", "name,count\nalpha,1\nbeta,2\n"),
    ];
    for (name, content) in entries {
        // Writing to memory cannot fail; a failure would only leave the archive short.
        if zip.start_file(name, options).is_ok() {
            let _ = zip.write_all(content.as_bytes());
        }
    }
    zip.finish().map(|c| c.into_inner()).unwrap_or_default()
}

const CONTENT_TYPES_HEAD: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>"#;

const RELS_NS: &str = "http://schemas.openxmlformats.org/package/2006/relationships";
const REL_TYPE: &str = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";

fn package(parts: &[(&str, String)]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, content) in parts {
        // Writing to memory cannot fail; a failure would only leave the file short.
        if zip.start_file(*name, options).is_ok() {
            let _ = zip.write_all(content.as_bytes());
        }
    }
    zip.finish().map(|c| c.into_inner()).unwrap_or_default()
}

fn relationships(items: &[(&str, &str)]) -> String {
    let mut s = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="{RELS_NS}">"#
    );
    for (i, (kind, target)) in items.iter().enumerate() {
        s.push_str(&format!(
            r#"<Relationship Id="rId{}" Type="{REL_TYPE}/{kind}" Target="{target}"/>"#,
            i + 1
        ));
    }
    s.push_str("</Relationships>");
    s
}

/// A workbook with one sheet `Sheet1`: a header row and two rows of data.
pub fn xlsx() -> Vec<u8> {
    let main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main";
    let types = format!(
        r#"{CONTENT_TYPES_HEAD}<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/><Override PartName="/xl/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.styles+xml"/></Types>"#
    );
    let workbook = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><workbook xmlns="{main}" xmlns:r="{REL_TYPE}"><sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>"#
    );
    let cell = |r: &str, v: &str| -> String {
        match v.parse::<f64>() {
            Ok(_) => format!(r#"<c r="{r}"><v>{v}</v></c>"#),
            Err(_) => format!(r#"<c r="{r}" t="inlineStr"><is><t>{v}</t></is></c>"#),
        }
    };
    let rows = [["name", "amount"], ["rent", "1200"], ["food", "300"]];
    let mut data = String::new();
    for (i, row) in rows.iter().enumerate() {
        let n = i + 1;
        data.push_str(&format!(
            r#"<row r="{n}">{}{}</row>"#,
            cell(&format!("A{n}"), row[0]),
            cell(&format!("B{n}"), row[1])
        ));
    }
    // A total with a formula (and its cached value), for tools about formulas.
    data.push_str(&format!(
        r#"<row r="4">{}<c r="B4"><f>SUM(B2:B3)</f><v>1500</v></c></row>"#,
        cell("A4", "total")
    ));
    let sheet = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><worksheet xmlns="{main}"><dimension ref="A1:B4"/><sheetData>{data}</sheetData></worksheet>"#
    );
    let styles = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><styleSheet xmlns="{main}"><fonts count="1"><font><sz val="11"/><name val="Calibri"/></font></fonts><fills count="2"><fill><patternFill patternType="none"/></fill><fill><patternFill patternType="gray125"/></fill></fills><borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders><cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs><cellXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/></cellXfs><cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles></styleSheet>"#
    );
    package(&[
        ("[Content_Types].xml", types),
        (
            "_rels/.rels",
            relationships(&[("officeDocument", "xl/workbook.xml")]),
        ),
        ("xl/workbook.xml", workbook),
        (
            "xl/_rels/workbook.xml.rels",
            relationships(&[
                ("worksheet", "worksheets/sheet1.xml"),
                ("styles", "styles.xml"),
            ]),
        ),
        ("xl/worksheets/sheet1.xml", sheet),
        ("xl/styles.xml", styles),
    ])
}

/// A document with a heading, two paragraphs and a 2×2 table.
pub fn docx() -> Vec<u8> {
    let w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main";
    let types = format!(
        r#"{CONTENT_TYPES_HEAD}<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/><Override PartName="/word/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"/></Types>"#
    );
    // The styles tools ask for by name: headings, title, lists, quote, table grid.
    let mut styles = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:styles xmlns:w="{w}"><w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/></w:style><w:style w:type="character" w:default="1" w:styleId="DefaultParagraphFont"><w:name w:val="Default Paragraph Font"/></w:style><w:style w:type="table" w:default="1" w:styleId="TableNormal"><w:name w:val="Normal Table"/></w:style><w:style w:type="table" w:styleId="TableGrid"><w:name w:val="Table Grid"/><w:basedOn w:val="TableNormal"/></w:style>"#
    );
    for level in 1..=6 {
        styles.push_str(&format!(
            r#"<w:style w:type="paragraph" w:styleId="Heading{level}"><w:name w:val="heading {level}"/><w:basedOn w:val="Normal"/><w:next w:val="Normal"/><w:pPr><w:outlineLvl w:val="{}"/></w:pPr><w:rPr><w:b/></w:rPr></w:style>"#,
            level - 1
        ));
    }
    for (id, name) in [
        ("Title", "Title"),
        ("ListBullet", "List Bullet"),
        ("ListNumber", "List Number"),
        ("ListParagraph", "List Paragraph"),
        ("Quote", "Quote"),
        ("Caption", "Caption"),
    ] {
        styles.push_str(&format!(
            r#"<w:style w:type="paragraph" w:styleId="{id}"><w:name w:val="{name}"/><w:basedOn w:val="Normal"/></w:style>"#
        ));
    }
    styles.push_str("</w:styles>");
    let paragraph = |text: &str| format!("<w:p><w:r><w:t>{text}</w:t></w:r></w:p>");
    let cell = |text: &str| {
        format!(
            "<w:tc><w:tcPr><w:tcW w:w=\"2000\" w:type=\"dxa\"/></w:tcPr>{}</w:tc>",
            paragraph(text)
        )
    };
    let table = format!(
        "<w:tbl><w:tblPr><w:tblW w:w=\"4000\" w:type=\"dxa\"/></w:tblPr><w:tblGrid><w:gridCol w:w=\"2000\"/><w:gridCol w:w=\"2000\"/></w:tblGrid><w:tr>{}{}</w:tr><w:tr>{}{}</w:tr></w:tbl>",
        cell("Item"),
        cell("Owner"),
        cell("Budget"),
        cell("Team")
    );
    let document = format!(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="{w}"><w:body>{}{}{}{}<w:sectPr/></w:body></w:document>"#,
        paragraph("Quarterly report"),
        paragraph("Sales grew in every region this quarter."),
        paragraph("The next review is in March."),
        table
    );
    package(&[
        ("[Content_Types].xml", types),
        (
            "_rels/.rels",
            relationships(&[("officeDocument", "word/document.xml")]),
        ),
        ("word/document.xml", document),
        (
            "word/_rels/document.xml.rels",
            relationships(&[("styles", "styles.xml")]),
        ),
        ("word/styles.xml", styles),
    ])
}

/// The namespaces of a presentation's parts.
const PPTX_NS: &str = r#"xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main""#;
/// An XML part's declaration.
const XML_HEAD: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>"#;
/// A shape tree's group properties.
const PPTX_GROUP: &str =
    r#"<p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>"#;
/// The presentation content types' prefix.
const PML: &str = "application/vnd.openxmlformats-officedocument.presentationml";
/// A placeholder: its type ("" for a body), index, name, and x, y, cx, cy in EMU.
type Placeholder = (&'static str, u32, &'static str, u32, u32, u32, u32);

const TITLE: Placeholder = ("title", 0, "Title 1", 457200, 274638, 8229600, 1143000);
const CENTER_TITLE: Placeholder = ("ctrTitle", 0, "Title 1", 685800, 2130425, 7772400, 1470025);
const SUBTITLE: Placeholder = (
    "subTitle",
    1,
    "Subtitle 2",
    1371600,
    3886200,
    6400800,
    1752600,
);
const BODY: Placeholder = (
    "",
    1,
    "Content Placeholder 2",
    457200,
    1600200,
    8229600,
    4525963,
);
const LEFT: Placeholder = (
    "",
    1,
    "Content Placeholder 2",
    457200,
    1600200,
    4038600,
    4525963,
);
const RIGHT: Placeholder = (
    "",
    2,
    "Content Placeholder 3",
    4648200,
    1600200,
    4038600,
    4525963,
);
const TEXT_BODY: Placeholder = (
    "body",
    1,
    "Text Placeholder 2",
    722313,
    2906713,
    7772400,
    1500187,
);

/// The slide layouts: type, name, placeholders.
const LAYOUTS: [(&str, &str, &[Placeholder]); 7] = [
    ("title", "Title Slide", &[CENTER_TITLE, SUBTITLE]),
    ("obj", "Title and Content", &[TITLE, BODY]),
    ("secHead", "Section Header", &[TITLE, TEXT_BODY]),
    ("twoObj", "Two Content", &[TITLE, LEFT, RIGHT]),
    ("twoTxTwoObj", "Comparison", &[TITLE, LEFT, RIGHT]),
    ("titleOnly", "Title Only", &[TITLE]),
    ("blank", "Blank", &[]),
];

/// A placeholder shape, with `text` (or an empty paragraph).
fn placeholder_shape(
    id: usize,
    (kind, idx, name, x, y, cx, cy): Placeholder,
    text: &str,
) -> String {
    let ph = match (kind, idx) {
        ("", idx) => format!(r#"<p:ph idx="{idx}"/>"#),
        (kind, 0) => format!(r#"<p:ph type="{kind}"/>"#),
        (kind, idx) => format!(r#"<p:ph type="{kind}" idx="{idx}"/>"#),
    };
    let paragraph = if text.is_empty() {
        r#"<a:p><a:endParaRPr lang="en-US"/></a:p>"#.to_string()
    } else {
        format!(r#"<a:p><a:r><a:rPr lang="en-US"/><a:t>{text}</a:t></a:r></a:p>"#)
    };
    format!(
        r#"<p:sp><p:nvSpPr><p:cNvPr id="{id}" name="{name}"/><p:cNvSpPr><a:spLocks noGrp="1"/></p:cNvSpPr><p:nvPr>{ph}</p:nvPr></p:nvSpPr><p:spPr><a:xfrm><a:off x="{x}" y="{y}"/><a:ext cx="{cx}" cy="{cy}"/></a:xfrm></p:spPr><p:txBody><a:bodyPr/><a:lstStyle/>{paragraph}</p:txBody></p:sp>"#
    )
}

/// The layouts' parts (each with its relationships), their content types' overrides and the
/// master's list of their ids.
fn layout_parts() -> (Vec<(String, String)>, String, String) {
    let mut parts: Vec<(String, String)> = Vec::new();
    let mut types = format!(
        r#"{CONTENT_TYPES_HEAD}<Override PartName="/ppt/presentation.xml" ContentType="{PML}.presentation.main+xml"/><Override PartName="/ppt/slideMasters/slideMaster1.xml" ContentType="{PML}.slideMaster+xml"/><Override PartName="/ppt/slides/slide1.xml" ContentType="{PML}.slide+xml"/><Override PartName="/ppt/theme/theme1.xml" ContentType="application/vnd.openxmlformats-officedocument.theme+xml"/>"#
    );
    let mut layout_ids = String::new();
    for (n, (kind, name, placeholders)) in LAYOUTS.iter().enumerate() {
        let k = n + 1;
        types.push_str(&format!(
            r#"<Override PartName="/ppt/slideLayouts/slideLayout{k}.xml" ContentType="{PML}.slideLayout+xml"/>"#
        ));
        layout_ids.push_str(&format!(
            r#"<p:sldLayoutId id="{}" r:id="rId{k}"/>"#,
            2147483648u32 + k as u32
        ));
        let shapes: String = placeholders
            .iter()
            .enumerate()
            .map(|(m, p)| placeholder_shape(m + 2, *p, ""))
            .collect();
        parts.push((
            format!("ppt/slideLayouts/slideLayout{k}.xml"),
            format!(
                r#"{XML_HEAD}<p:sldLayout {PPTX_NS} type="{kind}" preserve="1"><p:cSld name="{name}"><p:spTree>{PPTX_GROUP}{shapes}</p:spTree></p:cSld><p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:sldLayout>"#
            ),
        ));
        parts.push((
            format!("ppt/slideLayouts/_rels/slideLayout{k}.xml.rels"),
            relationships(&[("slideMaster", "../slideMasters/slideMaster1.xml")]),
        ));
    }
    types.push_str("</Types>");
    (parts, types, layout_ids)
}

/// The theme: Office's colours, fonts and formats.
fn pptx_theme() -> String {
    let colors = [
        ("dk1", r#"<a:sysClr val="windowText" lastClr="000000"/>"#),
        ("lt1", r#"<a:sysClr val="window" lastClr="FFFFFF"/>"#),
        ("dk2", r#"<a:srgbClr val="1F497D"/>"#),
        ("lt2", r#"<a:srgbClr val="EEECE1"/>"#),
        ("accent1", r#"<a:srgbClr val="4F81BD"/>"#),
        ("accent2", r#"<a:srgbClr val="C0504D"/>"#),
        ("accent3", r#"<a:srgbClr val="9BBB59"/>"#),
        ("accent4", r#"<a:srgbClr val="8064A2"/>"#),
        ("accent5", r#"<a:srgbClr val="4BACC6"/>"#),
        ("accent6", r#"<a:srgbClr val="F79646"/>"#),
        ("hlink", r#"<a:srgbClr val="0000FF"/>"#),
        ("folHlink", r#"<a:srgbClr val="800080"/>"#),
    ];
    let scheme: String = colors
        .iter()
        .map(|(k, v)| format!("<a:{k}>{v}</a:{k}>"))
        .collect();
    let fill = r#"<a:solidFill><a:schemeClr val="phClr"/></a:solidFill>"#;
    let line = format!(r#"<a:ln w="9525">{fill}</a:ln>"#);
    let font = r#"<a:latin typeface="Calibri"/><a:ea typeface=""/><a:cs typeface=""/>"#;
    format!(
        r#"{XML_HEAD}<a:theme xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" name="Office Theme"><a:themeElements><a:clrScheme name="Office">{scheme}</a:clrScheme><a:fontScheme name="Office"><a:majorFont>{font}</a:majorFont><a:minorFont>{font}</a:minorFont></a:fontScheme><a:fmtScheme name="Office"><a:fillStyleLst>{fill}{fill}{fill}</a:fillStyleLst><a:lnStyleLst>{line}{line}{line}</a:lnStyleLst><a:effectStyleLst><a:effectStyle><a:effectLst/></a:effectStyle><a:effectStyle><a:effectLst/></a:effectStyle><a:effectStyle><a:effectLst/></a:effectStyle></a:effectStyleLst><a:bgFillStyleLst>{fill}{fill}{fill}</a:bgFillStyleLst></a:fmtScheme></a:themeElements></a:theme>"#
    )
}

/// A presentation of one title slide, with the parts a reader needs to add slides: a slide
/// master, the usual layouts (title, title and content, section header, two content,
/// comparison, title only, blank; the indexes servers ask for by number) and a theme.
pub fn pptx() -> Vec<u8> {
    let (parts, types, layout_ids) = layout_parts();
    let master_shapes = format!(
        "{}{}",
        placeholder_shape(2, TITLE, ""),
        placeholder_shape(
            3,
            (
                "body",
                1,
                "Text Placeholder 2",
                457200,
                1600200,
                8229600,
                4525963
            ),
            ""
        )
    );
    let layout_targets: Vec<String> = (1..=LAYOUTS.len())
        .map(|k| format!("../slideLayouts/slideLayout{k}.xml"))
        .collect();
    let mut master_rels: Vec<(&str, &str)> = layout_targets
        .iter()
        .map(|t| ("slideLayout", t.as_str()))
        .collect();
    master_rels.push(("theme", "../theme/theme1.xml"));
    let theme = pptx_theme();
    let slide_shapes = format!(
        "{}{}",
        placeholder_shape(2, CENTER_TITLE, "Quarterly review"),
        placeholder_shape(3, SUBTITLE, "Sales grew in every region")
    );
    let mut all: Vec<(String, String)> = vec![
        ("[Content_Types].xml".into(), types),
        (
            "_rels/.rels".into(),
            relationships(&[("officeDocument", "ppt/presentation.xml")]),
        ),
        (
            "ppt/presentation.xml".into(),
            format!(
                r#"{XML_HEAD}<p:presentation {PPTX_NS}><p:sldMasterIdLst><p:sldMasterId id="2147483648" r:id="rId1"/></p:sldMasterIdLst><p:sldIdLst><p:sldId id="256" r:id="rId2"/></p:sldIdLst><p:sldSz cx="9144000" cy="6858000"/><p:notesSz cx="6858000" cy="9144000"/></p:presentation>"#
            ),
        ),
        (
            "ppt/_rels/presentation.xml.rels".into(),
            relationships(&[
                ("slideMaster", "slideMasters/slideMaster1.xml"),
                ("slide", "slides/slide1.xml"),
                ("theme", "theme/theme1.xml"),
            ]),
        ),
        (
            "ppt/slideMasters/slideMaster1.xml".into(),
            format!(
                r#"{XML_HEAD}<p:sldMaster {PPTX_NS}><p:cSld><p:spTree>{PPTX_GROUP}{master_shapes}</p:spTree></p:cSld><p:clrMap bg1="lt1" tx1="dk1" bg2="lt2" tx2="dk2" accent1="accent1" accent2="accent2" accent3="accent3" accent4="accent4" accent5="accent5" accent6="accent6" hlink="hlink" folHlink="folHlink"/><p:sldLayoutIdLst>{layout_ids}</p:sldLayoutIdLst></p:sldMaster>"#
            ),
        ),
        (
            "ppt/slideMasters/_rels/slideMaster1.xml.rels".into(),
            relationships(&master_rels),
        ),
        (
            "ppt/slides/slide1.xml".into(),
            format!(
                r#"{XML_HEAD}<p:sld {PPTX_NS}><p:cSld><p:spTree>{PPTX_GROUP}{slide_shapes}</p:spTree></p:cSld><p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:sld>"#
            ),
        ),
        (
            "ppt/slides/_rels/slide1.xml.rels".into(),
            relationships(&[("slideLayout", "../slideLayouts/slideLayout1.xml")]),
        ),
        ("ppt/theme/theme1.xml".into(), theme),
    ];
    all.extend(parts);
    let borrowed: Vec<(&str, String)> = all.iter().map(|(n, c)| (n.as_str(), c.clone())).collect();
    package(&borrowed)
}

/// A one-page PDF with a line of text, its cross-reference table computed.
pub fn pdf() -> Vec<u8> {
    let text = "BT /F1 18 Tf 72 720 Td (Quarterly summary) Tj ET";
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_string(),
        format!("<< /Length {} >>\nstream\n{text}\nendstream", text.len()),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_string(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for o in offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

/// A 1×1 PNG (one opaque white pixel).
pub const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xf8, 0xff, 0xff, 0x3f,
    0x00, 0x05, 0xfe, 0x02, 0xfe, 0x33, 0x12, 0x95, 0x14, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A notebook (nbformat 4) with one Markdown cell and one code cell.
const NOTEBOOK: &str = r##"{
 "cells": [
  {"cell_type": "markdown", "metadata": {}, "source": ["# Analysis\n", "A first look at the data."]},
  {"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [], "source": ["total = 1 + 2\n", "print(total)"]}
 ],
 "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}, "language_info": {"name": "python"}},
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

/// A small Python module with a class, a function and an import.
const PYTHON: &str = r#"import json


class Ledger:
    """Keeps amounts by name."""

    def __init__(self):
        self.amounts = {}

    def add(self, name, amount):
        self.amounts[name] = self.amounts.get(name, 0) + amount
        return self.amounts[name]


def total(ledger):
    return sum(ledger.amounts.values())


if __name__ == "__main__":
    ledger = Ledger()
    ledger.add("rent", 1200)
    print(json.dumps({"total": total(ledger)}))
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_office_files_are_zip_packages_with_their_main_part() {
        for (bytes, main) in [
            (xlsx(), "xl/workbook.xml"),
            (docx(), "word/document.xml"),
            (pptx(), "ppt/presentation.xml"),
        ] {
            let mut archive =
                zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("a zip archive");
            assert!(archive.by_name("[Content_Types].xml").is_ok());
            assert!(archive.by_name(main).is_ok(), "{main}");
        }
    }

    #[test]
    fn the_archive_holds_its_entries_under_one_folder() {
        let mut archive =
            zip::ZipArchive::new(std::io::Cursor::new(zip_archive())).expect("a zip archive");
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut archive.by_name("bundle/readme.txt").expect("the text file"),
            &mut text,
        )
        .expect("deflated text reads back");
        assert!(text.starts_with("Files kept together"));
        assert!(archive.file_names().all(|n| n.starts_with("bundle/")));
    }

    #[test]
    fn the_pdf_cross_reference_points_at_its_objects() {
        let bytes = pdf();
        let text = String::from_utf8_lossy(&bytes);
        let start: usize = text
            .split("startxref\n")
            .nth(1)
            .and_then(|s| s.lines().next())
            .and_then(|s| s.parse().ok())
            .expect("startxref");
        assert!(text[start..].starts_with("xref"));
        for (i, line) in text[start..].lines().skip(3).take(5).enumerate() {
            let offset: usize = line[..10].parse().expect("offset");
            assert!(
                text[offset..].starts_with(&format!("{} 0 obj", i + 1)),
                "{line}"
            );
        }
    }

    #[test]
    fn the_notebook_is_json() {
        let v: serde_json::Value = serde_json::from_str(NOTEBOOK).expect("json");
        assert_eq!(v["nbformat"], 4);
    }
}
