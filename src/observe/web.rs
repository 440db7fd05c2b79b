//! The other side of the network, as a fetching tool meets it: the observer's listeners answer
//! a plain HTTP request like a small, ordinary web site, so that a fetcher reaches the code that
//! handles real answers (and whatever that code does). `/robots.txt` allows everything; a
//! request that asks for JSON (and not HTML) gets a JSON document; one that accepts HTML
//! (`text/html`, `*/*`, or no `Accept` at all) gets a page with a title, paragraphs and links on
//! the same host; one that asks only for plain text gets plain text. `HEAD` gets the headers
//! alone. Nothing of the request is echoed back, and nothing may be cached (`no-store`): a
//! client's cache would only hold the sandbox's stand-in pages.

/// The robots.txt every host serves: everything is allowed.
const ROBOTS: &str = "User-agent: *\nAllow: /\n";

/// The page every HTML request gets: an ordinary small site's home page (nothing in it says
/// where it is served from).
const PAGE: &str = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<title>Home | Northfield Notes</title>\n<meta name=\"description\" content=\"Notes, guides and news from a small team.\">\n\
</head>\n<body>\n<header><nav><a href=\"/\">Home</a> <a href=\"/about\">About</a> <a href=\"/docs/guide.html\">Guide</a></nav></header>\n\
<main>\n<h1>Welcome</h1>\n\
<p>We write about the tools we use every day: how we set them up, what broke, and what we learned fixing it.</p>\n\
<p>Start with <a href=\"/docs/guide.html\">the guide</a>, read <a href=\"/about\">about us</a>, or follow \
<a href=\"/feed.json\">the feed</a>.</p>\n\
<ul>\n<li>Release notes for the spring update</li>\n<li>Moving our builds to a new runner</li>\n</ul>\n</main>\n\
<footer><p>&copy; Northfield Notes</p></footer>\n</body>\n</html>\n";

/// The document every JSON request gets.
const JSON: &str = "{\"ok\": true, \"items\": [{\"id\": 1, \"title\": \"Release notes for the spring update\"}, \
{\"id\": 2, \"title\": \"Moving our builds to a new runner\"}], \"next\": null}\n";

/// The page of a file the site does not have.
const NOT_FOUND: &str = "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body><h1>Not Found</h1></body></html>\n";

/// The text every plain-text request gets.
const TEXT: &str = "Notes, guides and news from a small team.\n";

/// Phrases of the stand-in site's page, document and text that an ordinary result holds only
/// if it came from the site (each at least 30 bytes, none in the robots file or the 404 page).
const SERVED_PHRASES: [&str; 3] = [
    "Release notes for the spring update",
    "Moving our builds to a new runner",
    "Notes, guides and news from a small team",
];

/// Whether `bytes` hold what the stand-in site served (a page, the JSON document, the text),
/// as converted to text or Markdown or quoted in JSON.
pub fn carries_served(bytes: &[u8]) -> bool {
    SERVED_PHRASES
        .iter()
        .any(|p| memchr::memmem::find(bytes, p.as_bytes()).is_some())
}

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// `/robots.txt`.
    Robots,
    /// An HTML page.
    Html,
    /// A JSON document.
    Json,
    /// Plain text.
    Text,
    /// A file the site does not have (404).
    NotFound,
}

impl Served {
    fn body_and_type(self) -> (&'static str, &'static str) {
        match self {
            Served::Robots => (ROBOTS, "text/plain; charset=utf-8"),
            Served::Html => (PAGE, "text/html; charset=utf-8"),
            Served::Json => (JSON, "application/json"),
            Served::Text => (TEXT, "text/plain; charset=utf-8"),
            Served::NotFound => (NOT_FOUND, "text/html; charset=utf-8"),
        }
    }
}

/// A request's method, path and headers.
pub struct RequestHead {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path (of an absolute target, the part after its host; a query may hold a URL
    /// of its own).
    pub path: String,
    /// The headers, names and values trimmed, in order.
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    /// The value of the first header called `name` (without case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find_map(|(n, v)| n.eq_ignore_ascii_case(name).then_some(v.as_str()))
    }
}

/// The method, path and headers of the request whose first bytes are `head`, read as far as
/// `max` bytes; `None` without a method and a target.
pub fn request_head(head: &[u8], max: usize) -> Option<RequestHead> {
    let text = String::from_utf8_lossy(&head[..head.len().min(max)]);
    let mut lines = text.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let target = first.next()?;
    let path = Some(target)
        .filter(|t| !t.starts_with('/'))
        .and_then(|t| t.split_once("://"))
        .map_or(target, |(_, rest)| {
            rest.find('/').map_or("/", |i| &rest[i..])
        })
        .to_string();
    let headers = lines
        .take_while(|l| !l.is_empty())
        .filter_map(|l| {
            let (n, v) = l.split_once(':')?;
            Some((n.trim().to_string(), v.trim().to_string()))
        })
        .collect();
    Some(RequestHead {
        method,
        path,
        headers,
    })
}

/// What the request `head` (its first bytes) asks for, if it is an HTTP request.
pub fn served_for(head: &[u8]) -> Option<Served> {
    let request = request_head(head, 8192)?;
    if !matches!(
        request.method.as_str(),
        "GET" | "POST" | "PUT" | "DELETE" | "HEAD" | "PATCH" | "OPTIONS"
    ) {
        return None;
    }
    let path = request.path.as_str();
    if path.split('?').next() == Some("/robots.txt") {
        return Some(Served::Robots);
    }
    let accept = request
        .header("accept")
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let wants = |t: &str| accept.contains(t);
    let ext = path
        .split(['?', '#'])
        .next()
        .and_then(|p| p.rsplit('/').next())
        .and_then(|name| name.rsplit_once('.'))
        .map(|(_, e)| e.to_ascii_lowercase());
    // A client that asks for JSON and not for HTML gets JSON; otherwise the resource decides,
    // as on a real site: a `.txt` (or `.md`, `.csv`) is text, a page (no extension, `.html`,
    // `.htm`, `.php`, `.asp`, `.aspx`) is HTML unless the client accepts plain text only, and
    // any other file (an archive, a `.json` data file asked for without JSON, a binary) is not
    // on this site: 404, as a download that cannot be served must fail, not yield garbage.
    Some(if wants("json") && !wants("text/html") {
        Served::Json
    } else {
        match ext.as_deref() {
            Some("txt" | "md" | "csv") => Served::Text,
            None | Some("html" | "htm" | "xhtml" | "php" | "asp" | "aspx" | "jsp") => {
                if !accept.is_empty() && wants("text/plain") && !wants("html") && !wants("*/*") {
                    Served::Text
                } else {
                    Served::Html
                }
            }
            Some(_) => Served::NotFound,
        }
    })
}

/// Most bytes of a request's head read.
const MAX_HEAD: usize = 64 << 10;

/// Most bytes of a request's body read; a longer body is not waited for.
const MAX_BODY: usize = 1 << 20;

/// One request as it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The request line and headers (through the empty line; all that came, without one).
    pub head: Vec<u8>,
    /// The head and the body as sent, and for a chunked body its chunks joined (what the
    /// request carried out).
    pub carried: Vec<u8>,
}

/// Reads the rest of the HTTP request whose first bytes are `first` from `conn`: the head,
/// then the body as long as `Content-Length` says or until the last chunk, at most
/// [`MAX_BODY`] bytes, within the connection's read timeout. A client that waits for `100
/// Continue` before its body is told to go on.
pub fn read_request(first: Vec<u8>, conn: &mut (impl std::io::Read + std::io::Write)) -> Request {
    let mut bytes = first;
    let mut buf = vec![0u8; 16 << 10];
    let mut more = |bytes: &mut Vec<u8>, conn: &mut dyn std::io::Read| match conn.read(&mut buf) {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            bytes.extend_from_slice(&buf[..n]);
            true
        }
    };
    let head_end = loop {
        if let Some(i) = find(&bytes, b"\r\n\r\n") {
            break i + 4;
        }
        if bytes.len() >= MAX_HEAD || !more(&mut bytes, conn) {
            return Request {
                head: bytes.clone(),
                carried: bytes,
            };
        }
    };
    let head = String::from_utf8_lossy(&bytes[..head_end]).to_ascii_lowercase();
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            (n.trim() == name).then(|| v.trim().to_string())
        })
    };
    let chunked = header("transfer-encoding").is_some_and(|v| v.contains("chunked"));
    let length = header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_BODY);
    if (chunked || length > 0) && header("expect").is_some_and(|v| v == "100-continue") {
        let _ = conn.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    let body = if chunked {
        loop {
            let (body, complete) = dechunk(&bytes[head_end..]);
            if complete || bytes.len() - head_end >= MAX_BODY || !more(&mut bytes, conn) {
                break body;
            }
        }
    } else {
        while bytes.len() - head_end < length {
            if !more(&mut bytes, conn) {
                break;
            }
        }
        bytes[head_end..].to_vec()
    };
    // The body as sent, and its chunks joined after it (a secret across a chunk boundary is
    // whole there; what the chunks left out, trailers included, is in the first).
    let mut carried = bytes.clone();
    if chunked {
        carried.push(b'\n');
        carried.extend_from_slice(&body[..body.len().min(MAX_BODY)]);
    }
    bytes.truncate(head_end);
    Request {
        head: bytes,
        carried,
    }
}

/// Most bytes read from a client after its answer.
pub const MAX_AFTER_ANSWER: usize = 64 << 10;

/// What `conn` sends until it closes, fails or pauses longer than its read timeout, at most
/// `max` bytes.
pub fn read_on(conn: &mut impl std::io::Read, max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 8192];
    while out.len() < max {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(k) => out.extend_from_slice(&chunk[..k]),
        }
    }
    out.truncate(max);
    out
}

/// Where `needle` first starts in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The data of a chunked body so far, and whether its last (empty) chunk came.
fn dechunk(mut b: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    loop {
        let Some(line_end) = find(b, b"\r\n") else {
            return (out, false);
        };
        let size = String::from_utf8_lossy(&b[..line_end]);
        let size = size.split(';').next().unwrap_or_default().trim();
        let Ok(size) = usize::from_str_radix(size, 16) else {
            // Not chunked after all: keep what is there as it is.
            out.extend_from_slice(b);
            return (out, true);
        };
        if size == 0 {
            return (out, true);
        }
        let data = &b[line_end + 2..];
        let take = size.min(data.len());
        out.extend_from_slice(&data[..take]);
        if take < size || data.len() < size + 2 {
            return (out, false);
        }
        b = &data[size + 2..];
    }
}

/// The whole answer to an HTTP request whose first bytes are `head`, or `None` when it is not
/// one.
pub fn answer(head: &[u8]) -> Option<Vec<u8>> {
    let served = served_for(head)?;
    let (body, content_type) = served.body_and_type();
    let head_only = head.starts_with(b"HEAD ");
    let status = if served == Served::NotFound {
        "404 Not Found"
    } else {
        "200 OK"
    };
    // The headers an ordinary site behind nginx sends.
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    let mut out = format!(
        "HTTP/1.1 {status}\r\nServer: nginx\r\nDate: {date}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(line: &str, accept: Option<&str>) -> Vec<u8> {
        let mut r = format!("{line}\r\nHost: docs.example.test\r\n");
        if let Some(a) = accept {
            r.push_str(&format!("Accept: {a}\r\n"));
        }
        r.push_str("\r\n");
        r.into_bytes()
    }

    #[test]
    fn what_a_request_accepts_decides_the_answer() {
        let get = "GET /page HTTP/1.1";
        assert_eq!(served_for(&request(get, None)), Some(Served::Html));
        assert_eq!(
            served_for(&request(
                get,
                Some("text/html,application/xhtml+xml;q=0.9,*/*;q=0.8")
            )),
            Some(Served::Html)
        );
        assert_eq!(
            served_for(&request(get, Some("application/json"))),
            Some(Served::Json)
        );
        assert_eq!(
            served_for(&request(
                "GET /feed.json HTTP/1.1",
                Some("application/json")
            )),
            Some(Served::Json)
        );
        // Files the site does not have are not served as something else.
        for path in ["/releases/parsers.json", "/pkg-1.0.tar.gz", "/lib.so"] {
            assert_eq!(
                served_for(&request(&format!("GET {path} HTTP/1.1"), Some("*/*"))),
                Some(Served::NotFound),
                "{path}"
            );
        }
        assert_eq!(
            served_for(&request(get, Some("text/plain"))),
            Some(Served::Text)
        );
        assert_eq!(
            served_for(&request("GET /notes.txt HTTP/1.1", Some("text/html,*/*"))),
            Some(Served::Text)
        );
        assert_eq!(
            served_for(&request("GET /robots.txt HTTP/1.1", Some("text/html"))),
            Some(Served::Robots)
        );
        assert_eq!(
            served_for(&request(
                "GET http://docs.example.test/robots.txt HTTP/1.1",
                None
            )),
            Some(Served::Robots)
        );
        assert_eq!(served_for(b"\x16\x03\x01 not http"), None);
        assert_eq!(served_for(b"SSH-2.0-OpenSSH\r\n"), None);
    }

    /// What `read_request` makes of `parts` written one after another by a client over
    /// loopback (and what the client was told before it sent its body).
    fn read_from_client(parts: Vec<Vec<u8>>) -> (Request, Vec<u8>) {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let client = std::thread::spawn(move || {
            let mut c = std::net::TcpStream::connect(addr).expect("connect");
            c.set_read_timeout(Some(std::time::Duration::from_millis(300)))
                .expect("timeout");
            let mut told = Vec::new();
            for part in parts {
                c.write_all(&part).expect("write");
                std::thread::sleep(std::time::Duration::from_millis(20));
                if part.ends_with(b"\r\n\r\n") && part.starts_with(b"POST") {
                    let mut b = [0u8; 64];
                    if let Ok(n) = c.read(&mut b) {
                        told.extend_from_slice(&b[..n]);
                    }
                }
            }
            told
        });
        let (mut conn, _) = listener.accept().expect("accept");
        conn.set_read_timeout(Some(std::time::Duration::from_millis(500)))
            .expect("timeout");
        let request = read_request(Vec::new(), &mut conn);
        (request, client.join().expect("client"))
    }

    #[test]
    fn a_request_is_read_with_its_body_in_parts_chunks_and_after_100_continue() {
        let head = b"POST /ingest HTTP/1.1\r\nHost: hooks.test\r\nContent-Length: 11\r\n\r\n";
        let (r, _) = read_from_client(vec![
            head[..20].to_vec(),
            head[20..].to_vec(),
            b"hello".to_vec(),
            b" world".to_vec(),
        ]);
        assert_eq!(r.head, head);
        assert!(
            r.carried.ends_with(b"\r\n\r\nhello world"),
            "{:?}",
            String::from_utf8_lossy(&r.carried)
        );
        // Chunks are joined (a secret across a chunk boundary is whole again).
        let chunked = b"POST /u HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        let (r, _) = read_from_client(vec![
            chunked,
            b"5\r\nhello\r\n".to_vec(),
            b"6;x=y\r\n world\r\n0\r\n\r\n".to_vec(),
        ]);
        assert!(
            r.carried.ends_with(b"0\r\n\r\n\nhello world"),
            "{:?}",
            String::from_utf8_lossy(&r.carried)
        );
        // A client that waits to be told to go on is told.
        let expecting =
            b"POST /big HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n".to_vec();
        let (r, told) = read_from_client(vec![expecting, b"body".to_vec()]);
        assert!(
            told.starts_with(b"HTTP/1.1 100 Continue"),
            "{:?}",
            String::from_utf8_lossy(&told)
        );
        assert!(r.carried.ends_with(b"body"));
        assert_eq!(dechunk(b"3\r\nabc\r\n"), (b"abc".to_vec(), false));
        assert_eq!(dechunk(b"not chunked"), (Vec::new(), false));
        assert_eq!(dechunk(b"zz\r\nraw"), (b"zz\r\nraw".to_vec(), true));
    }

    #[test]
    fn answers_are_complete_http_responses() {
        let a = answer(&request("GET / HTTP/1.1", None)).expect("answer");
        let text = String::from_utf8(a).expect("utf8");
        let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        assert!(
            head.contains(&format!("Content-Length: {}", body.len())),
            "{head}"
        );
        assert!(
            body.contains("<title>") && body.contains("<a href="),
            "{body}"
        );
        let head_only = answer(&request("HEAD / HTTP/1.1", None)).expect("answer");
        assert!(String::from_utf8_lossy(&head_only).ends_with("\r\n\r\n"));
    }
}
